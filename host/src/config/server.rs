//! `[server]`: the gRPC listener agents connect to, and its TLS.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use serde::Deserialize;

use super::{ByteSize, HumanDuration, Invalid, invalid};

/// The gRPC listener agents connect to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Serve HTTP/2 without TLS: development and tests only (logged as a warning). Off by
    /// default: without `[server.tls]` the server does not start.
    pub plaintext: bool,
    /// TLS serving (when `plaintext` is false).
    pub tls: Option<TlsConfig>,
    pub max_receive_message_size: ByteSize,
    pub max_send_message_size: ByteSize,
    /// Concurrent streams (Subscribe and Publish calls) per connection, announced to the client
    /// in HTTP/2 SETTINGS (an agent needs one per data type it subscribes to, plus its
    /// publishes); unset means no limit.
    pub max_concurrent_streams: Option<u32>,
    /// Open connections at once; past it, new connections are closed at once.
    pub max_connections: usize,
    /// Subscriptions one identity (user) may hold open at once.
    pub max_subscriptions_per_identity: usize,
    /// How long a client may take to finish the TLS handshake.
    pub tls_handshake_timeout: HumanDuration,
    /// A connection that has made no authenticated call this long after it was accepted is
    /// closed, so that clients without credentials cannot hold connection slots.
    pub unauthenticated_timeout: HumanDuration,
    /// How often the server pings an idle connection, and how long it waits for the answer
    /// before closing it (dead peers are reaped this way).
    pub keepalive_interval: HumanDuration,
    pub keepalive_timeout: HumanDuration,
    /// Clients may ping at most this often: a client that keeps pinging faster while the server
    /// has nothing to send is disconnected (gRPC's keepalive enforcement, `too_many_pings`).
    pub client_min_ping_interval: HumanDuration,
    /// On SIGTERM, how long open connections get to close after their streams ended; past it
    /// they are dropped and conductor exits (keep it below the pod's
    /// terminationGracePeriodSeconds).
    pub shutdown_grace_period: HumanDuration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8090)),
            plaintext: false,
            tls: None,
            max_receive_message_size: ByteSize(4 << 20),
            max_send_message_size: ByteSize(u64::from(i32::MAX as u32)),
            max_concurrent_streams: Some(100),
            max_connections: 50_000,
            max_subscriptions_per_identity: 100,
            tls_handshake_timeout: HumanDuration(Duration::from_secs(10)),
            unauthenticated_timeout: HumanDuration(Duration::from_secs(10)),
            keepalive_interval: HumanDuration(Duration::from_secs(30)),
            keepalive_timeout: HumanDuration(Duration::from_secs(10)),
            client_min_ping_interval: HumanDuration(Duration::from_secs(5)),
            shutdown_grace_period: HumanDuration(Duration::from_secs(20)),
        }
    }
}

/// `[server.tls]`: the serving certificate, and the CA client certificates are checked against.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM files (relative to this file); reloaded when they change on disk.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Client certificates signed by this CA (PEM) are verified when a client presents one;
    /// clients presenting none (token agents) are let through to the authenticators.
    pub client_ca_file: Option<PathBuf>,
    /// The oldest TLS version accepted: "1.2" or "1.3".
    #[serde(default = "default_tls_min")]
    pub min_version: String,
    /// The newest TLS version accepted: "1.2" or "1.3" (unset: 1.3).
    #[serde(default)]
    pub max_version: Option<String>,
    /// TLS 1.2 cipher suites by IANA name (TLS 1.3's are fixed); unset: every ECDHE AEAD
    /// suite (AES-GCM, ChaCha20-Poly1305).
    #[serde(default)]
    pub cipher_suites: Vec<String>,
    /// How often the files are checked for a change.
    #[serde(default = "default_tls_reload")]
    pub reload_interval: HumanDuration,
}

fn default_tls_min() -> String {
    "1.3".to_owned()
}

fn default_tls_reload() -> HumanDuration {
    HumanDuration(Duration::from_secs(10))
}

impl ServerConfig {
    /// Sizes, limits and timings.
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if self.max_receive_message_size.0 < 1024 {
            return invalid("server.max_receive_message_size", "must be at least 1KiB");
        }
        if self.max_send_message_size.0 < 1024 {
            return invalid("server.max_send_message_size", "must be at least 1KiB");
        }
        if self.max_concurrent_streams == Some(0) {
            return invalid("server.max_concurrent_streams", "must be at least 1");
        }
        for (key, d) in [
            ("server.keepalive_interval", self.keepalive_interval),
            ("server.keepalive_timeout", self.keepalive_timeout),
            ("server.client_min_ping_interval", self.client_min_ping_interval),
            ("server.tls_handshake_timeout", self.tls_handshake_timeout),
            ("server.unauthenticated_timeout", self.unauthenticated_timeout),
        ] {
            if d.0.is_zero() {
                return invalid(key, "must be longer than 0s");
            }
        }
        Ok(())
    }

    /// TLS (or plaintext) and the limits against abuse.
    pub(crate) fn validate_tls(&self) -> Result<(), Invalid> {
        match (self.plaintext, &self.tls) {
            (false, None) => {
                return invalid(
                    "server.tls",
                    "required unless server.plaintext = true (development): cert_file and key_file, and client_ca_file for client certificates",
                );
            }
            (true, Some(_)) => {
                return invalid(
                    "server.plaintext",
                    "[server.tls] is configured: remove plaintext = true to serve TLS",
                );
            }
            (false, Some(tls)) => tls.validate("server.tls")?,
            (true, None) => {}
        }
        if self.max_connections == 0 {
            return invalid("server.max_connections", "must be at least 1");
        }
        if self.max_subscriptions_per_identity == 0 {
            return invalid("server.max_subscriptions_per_identity", "must be at least 1");
        }
        Ok(())
    }
}

impl TlsConfig {
    pub(crate) fn validate(&self, key: &str) -> Result<(), Invalid> {
        if !matches!(self.min_version.as_str(), "1.2" | "1.3") {
            return invalid(
                format!("{key}.min_version"),
                format!(
                    "{:?} is not a TLS version this server speaks: \"1.2\" or \"1.3\"",
                    self.min_version
                ),
            );
        }
        if let Some(max) = &self.max_version {
            if !matches!(max.as_str(), "1.2" | "1.3") {
                return invalid(
                    format!("{key}.max_version"),
                    format!("{max:?} is not a TLS version this server speaks: \"1.2\" or \"1.3\""),
                );
            }
            if max.as_str() < self.min_version.as_str() {
                return invalid(
                    format!("{key}.max_version"),
                    format!("{max:?} is older than min_version {:?}", self.min_version),
                );
            }
        }
        if self.reload_interval.0 < Duration::from_millis(100) {
            return invalid(format!("{key}.reload_interval"), "must be at least 100ms");
        }
        Ok(())
    }
}
