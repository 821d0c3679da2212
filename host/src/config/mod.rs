//! `conductor.toml`: typed configuration. Every bad value is a [`ConfigError`] naming the file,
//! the key and the reason.

mod units;

use std::{
    collections::BTreeMap,
    fmt,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

pub use units::{ByteSize, HumanDuration};

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where plugins named by a bare file name (`file = "kube.wasm"`, no `/`) are found; relative
    /// to this file. Unset: the folder of this file. A top-level key: write it before any table.
    #[serde(default)]
    pub plugin_folder: Option<PathBuf>,
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub broker: BrokerConfig,
    #[serde(default)]
    pub admin: AdminConfig,
    #[serde(default)]
    pub log: LogConfig,
    /// Plugins by name.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
    /// Source name → the plugin that serves it.
    #[serde(default)]
    pub routes: BTreeMap<String, String>,
    /// Databases by name (PostgreSQL), for the plugins that use them.
    #[serde(default)]
    pub databases: BTreeMap<String, DatabaseConfig>,
    /// The Kubernetes API server, for the plugins granted `kube` and for token and SAR checks.
    #[serde(default)]
    pub kubernetes: KubernetesConfig,
    /// Who may call, and what they may do.
    #[serde(default)]
    pub auth: AuthConfig,
}

/// How callers are identified and what they may do (`ocm-grpc-protocol.md` §9).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Tried in this order; the first that identifies the caller wins. Unset: `token`, then
    /// `mtls` when `server.tls.client_ca_file` is set.
    pub authenticators: Option<Vec<Authenticator>>,
    pub authorization: Authorization,
    /// How long a TokenReview's answer is kept: an authenticated token, and a refused one.
    pub token_cache_ttl: HumanDuration,
    pub token_negative_cache_ttl: HumanDuration,
    /// How long a SubjectAccessReview's decision is kept.
    pub authorization_cache_ttl: HumanDuration,
    /// Data types beyond OCM's (served by other plugins), each with the Kubernetes resource
    /// (`<plural>.<group>`, or `<plural>` for the core group) its SubjectAccessReviews name.
    pub data_types: BTreeMap<String, String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            authenticators: None,
            authorization: Authorization::Sar,
            token_cache_ttl: HumanDuration(Duration::from_secs(30)),
            token_negative_cache_ttl: HumanDuration(Duration::from_secs(5)),
            authorization_cache_ttl: HumanDuration(Duration::from_secs(5)),
            data_types: BTreeMap::new(),
        }
    }
}

impl AuthConfig {
    /// The authenticators in the order they are tried.
    pub fn authenticators(&self, server: &ServerConfig) -> Vec<Authenticator> {
        match &self.authenticators {
            Some(list) => list.clone(),
            None => {
                let mut list = vec![Authenticator::Token];
                if server.tls.as_ref().is_some_and(|t| t.client_ca_file.is_some()) {
                    list.push(Authenticator::Mtls);
                }
                list
            }
        }
    }

    /// Whether the Kubernetes API server is needed (TokenReview, SubjectAccessReview).
    pub fn needs_kubernetes(&self, server: &ServerConfig) -> bool {
        self.authorization == Authorization::Sar || self.authenticators(server).contains(&Authenticator::Token)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Authenticator {
    /// A bearer token in the `authorization` metadata, checked with a TokenReview.
    Token,
    /// The client certificate the TLS handshake verified (user = CN, groups = O).
    Mtls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Authorization {
    /// A SubjectAccessReview per request (cached briefly).
    Sar,
    /// Everything is allowed: development only (a warning is logged at startup).
    AllowAll,
}

/// How to reach the Kubernetes API server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesConfig {
    /// A kubeconfig file (relative to this file); without one, the in-cluster service account,
    /// `KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
}

/// A PostgreSQL database: a URL, or an embedded development server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `postgres://user:password@host:port/database`.
    pub url: Option<String>,
    /// A file holding the URL (a mounted Secret), relative to the configuration file; read when
    /// the database is opened, surrounding whitespace ignored.
    pub url_file: Option<PathBuf>,
    /// Run a local PostgreSQL from the machine's binaries, with Maestro's schema (development).
    pub embedded: Option<EmbeddedDatabase>,
    /// Connections in the pool (each open plugin transaction holds one; each LISTEN has its own
    /// connection besides).
    #[serde(default = "default_db_pool_size")]
    pub pool_size: u32,
    /// TLS to the server: `disable`, `prefer`, `require`, `verify-ca` or `verify-full`. Overrides
    /// `sslmode` in the URL when set.
    pub tls: Option<TlsMode>,
    /// The CA certificate (PEM) that `verify-ca`/`verify-full` check the server against.
    pub ca_file: Option<PathBuf>,
    /// How long one statement (or a wait for an advisory lock) may take.
    #[serde(default = "default_statement_timeout")]
    pub statement_timeout: HumanDuration,
    /// How long to wait for a connection (a new one, or a free one from the pool); keep it below
    /// the plugins' `limits.call_timeout` so they see the database's error, not their timeout.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: HumanDuration,
}

fn default_connect_timeout() -> HumanDuration {
    HumanDuration(Duration::from_secs(3))
}

fn default_db_pool_size() -> u32 {
    10
}

fn default_statement_timeout() -> HumanDuration {
    HumanDuration(Duration::from_secs(30))
}

/// PostgreSQL `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// An embedded development PostgreSQL: it listens on a Unix socket in its data folder (and on
/// 127.0.0.1 only when a port is given).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedDatabase {
    /// The data folder, relative to the configuration file; created and initialised when new.
    pub data_dir: PathBuf,
    /// The database to create in it.
    #[serde(default = "default_embedded_database")]
    pub database: String,
    /// SQL files (relative to the configuration file) run, in order, when the database is created.
    #[serde(default)]
    pub init_sql: Vec<PathBuf>,
    /// A TCP port on 127.0.0.1 to listen on besides the socket.
    pub port: Option<u16>,
    /// Where `initdb`, `pg_ctl` and `psql` are; the newest `/usr/lib/postgresql/*/bin` if unset.
    pub bin_dir: Option<PathBuf>,
}

fn default_embedded_database() -> String {
    "postgres".to_owned()
}

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

/// Subscriptions, heartbeats and resync.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrokerConfig {
    pub heartbeat_interval: HumanDuration,
    pub heartbeat_disabled: bool,
    /// Events queued for one subscriber before it counts as too slow and its stream is ended.
    pub subscriber_queue_size: usize,
    /// How many resources' last `metadata` the broker remembers for synthetic resync deletes.
    pub remembered_metadata: usize,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: HumanDuration(Duration::from_secs(10)),
            heartbeat_disabled: false,
            subscriber_queue_size: 100,
            remembered_metadata: 100_000,
        }
    }
}

impl BrokerConfig {
    /// The heartbeat period, or `None` when heartbeats are disabled.
    pub fn heartbeat(&self) -> Option<Duration> {
        (!self.heartbeat_disabled).then_some(self.heartbeat_interval.0)
    }
}

/// The HTTP endpoint for `/metrics`, `/healthz` and `/readyz`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// Label the broker series with each cluster's name (`consumer`, as upstream), or with `*`.
    pub consumer_label: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([0, 0, 0, 0], 9090)),
            consumer_label: true,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A `tracing` filter such as `info` or `conductor=debug,info`; `RUST_LOG` overrides it.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Human,
            level: "info".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Human,
    Json,
}

/// One plugin: what it is, where it is, what it may do, and its own configuration table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    pub kind: PluginKind,
    /// The plugin file (`component`: a `.wasm` component; `native`: a shared library): a bare
    /// file name is looked up in `plugin_folder`; a path is relative to the configuration file's
    /// folder.
    pub file: Option<PathBuf>,
    /// The host capabilities granted (`emit`, `log`, `timer`, `kv`, `pg`, `kube`); deny by
    /// default.
    #[serde(default)]
    pub grants: Vec<String>,
    /// The databases (`[databases.<name>]`) the plugin may use through the `pg` capability.
    #[serde(default)]
    pub databases: Vec<String>,
    /// The Kubernetes resources the plugin may reach through the `kube` capability.
    #[serde(default)]
    pub kube_resources: Vec<KubeResourceGrant>,
    /// Instances serving calls at once.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
    #[serde(default)]
    pub limits: PluginLimits,
    /// The plugin's own settings, handed to it at start.
    #[serde(default)]
    pub config: toml::Table,
}

fn default_pool_size() -> usize {
    4
}

/// Limits of a plugin's calls and background work.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginLimits {
    /// Linear memory one instance may grow to (components only).
    pub memory: ByteSize,
    /// How long one call may run before it fails (a component is interrupted; a native call's
    /// thread runs on until the plugin returns).
    pub call_timeout: HumanDuration,
    /// How long an agent's call waits for a free instance before it fails as `Unavailable`.
    pub acquire_timeout: HumanDuration,
    /// Distinct host events (timers, notifications, watched objects) that may wait for the
    /// plugin; past it, their producers wait.
    pub event_queue: usize,
    /// Host events handed to one `on-events` call at most.
    pub event_batch: usize,
    /// At most this many `on-events` calls with only notifications at once, for a plugin that
    /// declares `concurrent-notifications` (which, and `pool_size`, bound it too); `1`, one call
    /// at a time. Unset: what the plugin declares.
    pub concurrent_notifications: Option<u32>,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            memory: ByteSize(64 << 20),
            call_timeout: HumanDuration(Duration::from_secs(5)),
            acquire_timeout: HumanDuration(Duration::from_secs(10)),
            event_queue: 10_000,
            event_batch: 100,
            concurrent_notifications: None,
        }
    }
}

/// The verbs a `kube_resources` grant may name.
pub const KUBE_VERBS: [&str; 7] = ["get", "list", "watch", "create", "update", "patch", "delete"];

/// A Kubernetes resource a plugin may reach: `"<plural>.<group>"` (`"<plural>"` for the core
/// group, `"<plural>.<group>/<subresource>"` for a subresource, `"serviceaccounts/token"` for
/// TokenRequests) with every verb, or `{ resource = "…", verbs = ["get", …] }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeResourceGrant {
    pub resource: String,
    /// `None`: every verb.
    pub verbs: Option<Vec<String>>,
}

impl KubeResourceGrant {
    pub fn allows(&self, resource: &str, verb: &str) -> bool {
        self.resource == resource && self.verbs.as_ref().is_none_or(|v| v.iter().any(|v| v == verb))
    }

    /// The verbs granted.
    pub fn verbs(&self) -> Vec<&str> {
        match &self.verbs {
            Some(v) => v.iter().map(String::as_str).collect(),
            None => KUBE_VERBS.to_vec(),
        }
    }

    /// (group, plural, subresource) of the resource named.
    pub fn parts(&self) -> (&str, &str, Option<&str>) {
        let (name, sub) = match self.resource.split_once('/') {
            Some((n, s)) => (n, Some(s)),
            None => (self.resource.as_str(), None),
        };
        match name.split_once('.') {
            Some((plural, group)) => (group, plural, sub),
            None => ("", name, sub),
        }
    }
}

impl<'de> Deserialize<'de> for KubeResourceGrant {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            resource: String,
            verbs: Vec<String>,
        }
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = KubeResourceGrant;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a resource name ("manifestworks.work.open-cluster-management.io") or { resource = "…", verbs = ["get", …] }"#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KubeResourceGrant {
                    resource: v.to_owned(),
                    verbs: None,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let t = Table::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(KubeResourceGrant {
                    resource: t.resource,
                    verbs: Some(t.verbs),
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// The built-in in-memory source (development and tests).
    Memory,
    /// A WebAssembly component (`wasm32-wasip2`), sandboxed and limited.
    Component,
    /// A native shared library built with the SDK's `export_plugin!`.
    Native,
}

/// A configuration error: the file, the key (dotted path) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
    pub key: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.reason)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.reason)
        }
    }
}

/// A configuration read from a file: the values and where they came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub path: PathBuf,
    pub config: Config,
    /// `plugin_folder` given on the command line, which wins over the file's and survives
    /// reloads.
    pub plugin_folder_override: Option<PathBuf>,
}

impl LoadedConfig {
    /// A plugin's file: a bare file name is looked up in the plugin folder, a path is resolved
    /// against the folder of the configuration file.
    pub fn plugin_file(&self, plugin: &PluginConfig) -> Option<PathBuf> {
        let file = plugin.file.as_deref()?;
        let bare = file.components().count() == 1 && !file.to_string_lossy().contains('/');
        Some(if bare {
            self.plugin_folder().join(file)
        } else {
            self.resolve(file)
        })
    }

    /// Where plugins named by a bare file name are found.
    pub fn plugin_folder(&self) -> PathBuf {
        match self
            .plugin_folder_override
            .as_deref()
            .or(self.config.plugin_folder.as_deref())
        {
            Some(folder) => self.resolve(folder),
            None => self.resolve(Path::new("")),
        }
    }

    /// A path from the configuration, resolved against the folder of the configuration file.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        match self.path.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        }
    }

    /// Reads the file again (for a reload), keeping the command line's overrides.
    pub fn reread(&self) -> Result<LoadedConfig, ConfigError> {
        Config::load(&self.path, self.plugin_folder_override.clone())
    }

    /// An error about `key` in this file.
    pub fn error(&self, key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.path.clone(),
            key: key.into(),
            reason: reason.into(),
        }
    }
}

impl Config {
    /// Reads, parses and validates a configuration file; `plugin_folder` (from the command line)
    /// wins over the file's.
    pub fn load(path: &Path, plugin_folder: Option<PathBuf>) -> Result<LoadedConfig, ConfigError> {
        let err = |key: String, reason: String| ConfigError {
            file: path.to_owned(),
            key,
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(String::new(), format!("cannot read: {e}")))?;
        let config = Self::parse(&text).map_err(|(key, reason)| err(key, reason))?;
        let loaded = LoadedConfig {
            path: path.to_owned(),
            config,
            plugin_folder_override: plugin_folder,
        };
        loaded
            .config
            .validate()
            .map_err(|(key, reason)| loaded.error(key, reason))?;
        Ok(loaded)
    }

    /// Parses TOML text; on error returns the dotted key and the reason.
    pub fn parse(text: &str) -> Result<Self, (String, String)> {
        let position = |span: Option<std::ops::Range<usize>>| {
            span.map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                format!(" (line {line})")
            })
            .unwrap_or_default()
        };
        let de = toml::Deserializer::parse(text)
            .map_err(|e| (String::new(), format!("{}{}", e.message(), position(e.span()))))?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let key = if key == "." { String::new() } else { key };
            (key, format!("{}{}", inner.message(), position(inner.span())))
        })
    }

    /// TLS, authentication, authorization and the limits against abuse.
    fn validate_security(&self) -> Result<(), (String, String)> {
        let fail = |key: &str, reason: String| Err((key.to_owned(), reason));
        match (self.server.plaintext, &self.server.tls) {
            (false, None) => {
                return fail(
                    "server.tls",
                    "required unless server.plaintext = true (development): cert_file and key_file, and client_ca_file for client certificates"
                        .into(),
                );
            }
            (true, Some(_)) => {
                return fail(
                    "server.plaintext",
                    "[server.tls] is configured: remove plaintext = true to serve TLS".into(),
                );
            }
            (false, Some(tls)) => {
                if !matches!(tls.min_version.as_str(), "1.2" | "1.3") {
                    return fail(
                        "server.tls.min_version",
                        format!(
                            "{:?} is not a TLS version this server speaks: \"1.2\" or \"1.3\"",
                            tls.min_version
                        ),
                    );
                }
                if tls.reload_interval.0 < Duration::from_millis(100) {
                    return fail("server.tls.reload_interval", "must be at least 100ms".into());
                }
            }
            (true, None) => {}
        }
        if self.server.max_connections == 0 {
            return fail("server.max_connections", "must be at least 1".into());
        }
        if self.server.max_subscriptions_per_identity == 0 {
            return fail("server.max_subscriptions_per_identity", "must be at least 1".into());
        }
        let authenticators = self.auth.authenticators(&self.server);
        for (i, a) in authenticators.iter().enumerate() {
            let key = format!("auth.authenticators[{i}]");
            if authenticators[..i].contains(a) {
                return fail(&key, format!("{a:?} is listed twice"));
            }
            if *a == Authenticator::Mtls && self.server.tls.as_ref().is_none_or(|t| t.client_ca_file.is_none()) {
                return fail(
                    &key,
                    "\"mtls\" needs server.tls.client_ca_file to verify client certificates against".into(),
                );
            }
        }
        if authenticators.is_empty() && self.auth.authorization == Authorization::Sar {
            return fail(
                "auth.authenticators",
                "empty: every caller would be anonymous and SubjectAccessReview would refuse them all; list \"token\" and/or \"mtls\", or set authorization = \"allow-all\" (development)"
                    .into(),
            );
        }
        for (data_type, resource) in &self.auth.data_types {
            let key = format!("auth.data_types.\"{data_type}\"");
            if conductor_plugin_sdk::ocm::DataType::parse(data_type).is_err() {
                return fail(&key, "not a data type: <group>.<version>.<resource>".into());
            }
            if resource.is_empty() || resource.contains(['/', ' ']) {
                return fail(
                    &key,
                    format!("{resource:?} is not a Kubernetes resource: <plural>.<group>"),
                );
            }
        }
        for (key, d) in [
            ("auth.token_cache_ttl", self.auth.token_cache_ttl),
            ("auth.token_negative_cache_ttl", self.auth.token_negative_cache_ttl),
            ("auth.authorization_cache_ttl", self.auth.authorization_cache_ttl),
        ] {
            if d.0 > Duration::from_secs(600) {
                return fail(
                    key,
                    format!("{d} is too long: at most 10m (a revoked credential would be honoured that long)"),
                );
            }
        }
        Ok(())
    }

    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let fail = |key: &str, reason: String| Err((key.to_owned(), reason));
        if self.server.max_receive_message_size.0 < 1024 {
            return fail("server.max_receive_message_size", "must be at least 1KiB".into());
        }
        if self.server.max_send_message_size.0 < 1024 {
            return fail("server.max_send_message_size", "must be at least 1KiB".into());
        }
        if self.server.max_concurrent_streams == Some(0) {
            return fail("server.max_concurrent_streams", "must be at least 1".into());
        }
        for (key, d) in [
            ("server.keepalive_interval", self.server.keepalive_interval),
            ("server.keepalive_timeout", self.server.keepalive_timeout),
            ("server.client_min_ping_interval", self.server.client_min_ping_interval),
            ("server.tls_handshake_timeout", self.server.tls_handshake_timeout),
        ] {
            if d.0.is_zero() {
                return fail(key, "must be longer than 0s".into());
            }
        }
        if !self.broker.heartbeat_disabled && self.broker.heartbeat_interval.0 < Duration::from_millis(100) {
            return fail(
                "broker.heartbeat_interval",
                format!(
                    "{} is too short: must be at least 100ms (or set heartbeat_disabled = true)",
                    self.broker.heartbeat_interval
                ),
            );
        }
        if self.broker.subscriber_queue_size == 0 {
            return fail("broker.subscriber_queue_size", "must be at least 1".into());
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return fail("log.level", format!("invalid filter {:?}: {e}", self.log.level));
        }
        for (name, plugin) in &self.plugins {
            let key = |field: &str| format!("plugins.{name}.{field}");
            match (plugin.kind, &plugin.file) {
                (PluginKind::Memory, Some(_)) => return fail(&key("file"), "the memory source has no file".into()),
                (PluginKind::Component | PluginKind::Native, None) => {
                    return fail(&key("file"), "required for a component or native plugin".into());
                }
                _ => {}
            }
            for (i, grant) in plugin.grants.iter().enumerate() {
                if conductor_plugin_sdk::Capability::parse(grant).is_none() {
                    let known: Vec<&str> = conductor_plugin_sdk::Capability::ALL.iter().map(|c| c.name()).collect();
                    return fail(
                        &format!("plugins.{name}.grants[{i}]"),
                        format!("unknown capability {grant:?} (known: {known:?})"),
                    );
                }
            }
            if plugin.pool_size == 0 {
                return fail(&key("pool_size"), "must be at least 1".into());
            }
            let grants_pg = plugin.grants.iter().any(|g| g == "pg");
            for (i, db) in plugin.databases.iter().enumerate() {
                if !self.databases.contains_key(db) {
                    let known: Vec<&String> = self.databases.keys().collect();
                    return fail(
                        &format!("plugins.{name}.databases[{i}]"),
                        format!("no database {db:?} in [databases] (configured: {known:?})"),
                    );
                }
            }
            match (grants_pg, plugin.databases.is_empty()) {
                (true, true) => {
                    return fail(
                        &key("databases"),
                        "the `pg` grant needs the databases the plugin may use, e.g. databases = [\"maestro\"]".into(),
                    );
                }
                (false, false) => {
                    return fail(&key("grants"), "databases are listed but `pg` is not granted".into());
                }
                _ => {}
            }
            if plugin.limits.memory.0 < (1 << 20) {
                return fail(&key("limits.memory"), "must be at least 1MiB".into());
            }
            if plugin.limits.call_timeout.0 < Duration::from_millis(10) {
                return fail(&key("limits.call_timeout"), "must be at least 10ms".into());
            }
            if plugin.limits.acquire_timeout.0.is_zero() {
                return fail(&key("limits.acquire_timeout"), "must be longer than 0s".into());
            }
            if plugin.limits.event_queue == 0 {
                return fail(&key("limits.event_queue"), "must be at least 1".into());
            }
            if plugin.limits.event_batch == 0 {
                return fail(&key("limits.event_batch"), "must be at least 1".into());
            }
            if plugin.limits.concurrent_notifications == Some(0) {
                return fail(&key("limits.concurrent_notifications"), "must be at least 1".into());
            }
            let grants_kube = plugin.grants.iter().any(|g| g == "kube");
            if !plugin.kube_resources.is_empty() && !grants_kube {
                return fail(
                    &key("grants"),
                    "kube_resources are listed but `kube` is not granted".into(),
                );
            }
            for (i, grant) in plugin.kube_resources.iter().enumerate() {
                let at = format!("plugins.{name}.kube_resources[{i}]");
                let (_, plural, sub) = grant.parts();
                let well_formed = !plural.is_empty()
                    && sub.is_none_or(|s| !s.is_empty() && !s.contains('/'))
                    && grant
                        .resource
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-./".contains(c));
                if !well_formed {
                    return fail(
                        &at,
                        format!(
                            "{:?} is not a resource name: want <plural>.<group>[/<subresource>], e.g. \"manifestworks.work.open-cluster-management.io\"",
                            grant.resource
                        ),
                    );
                }
                if let Some(verbs) = &grant.verbs {
                    if verbs.is_empty() {
                        return fail(&format!("{at}.verbs"), "must name at least one verb".into());
                    }
                    if let Some(bad) = verbs.iter().find(|v| !KUBE_VERBS.contains(&v.as_str())) {
                        return fail(
                            &format!("{at}.verbs"),
                            format!("unknown verb {bad:?} (known: {KUBE_VERBS:?})"),
                        );
                    }
                }
            }
        }
        for (name, db) in &self.databases {
            let sources = [db.url.is_some(), db.url_file.is_some(), db.embedded.is_some()];
            if sources.iter().filter(|set| **set).count() != 1 {
                return fail(
                    &format!("databases.{name}"),
                    "set exactly one of `url`, `url_file` and `embedded`".into(),
                );
            }
            match (&db.url, &db.embedded) {
                (Some(url), None) if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) => {
                    return fail(
                        &format!("databases.{name}.url"),
                        "must start with postgres:// or postgresql://".into(),
                    );
                }
                (None, Some(e)) if e.port == Some(0) => {
                    return fail(&format!("databases.{name}.embedded.port"), "must not be 0".into());
                }
                (None, Some(e))
                    if e.database.is_empty() || !e.database.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    return fail(
                        &format!("databases.{name}.embedded.database"),
                        "must be a plain identifier (letters, digits, _)".into(),
                    );
                }
                _ => {}
            }
            if db.pool_size == 0 {
                return fail(&format!("databases.{name}.pool_size"), "must be at least 1".into());
            }
            if db.ca_file.is_some() && !matches!(db.tls, Some(TlsMode::VerifyCa | TlsMode::VerifyFull)) {
                return fail(
                    &format!("databases.{name}.ca_file"),
                    "only used with tls = \"verify-ca\" or \"verify-full\"".into(),
                );
            }
        }
        for (source, plugin) in &self.routes {
            let key = format!("routes.{source}");
            if source.is_empty() || source.contains("::") {
                return fail(
                    &key,
                    "a source name must be non-empty and must not contain \"::\"".into(),
                );
            }
            if !self.plugins.contains_key(plugin) {
                let known: Vec<&str> = self.plugins.keys().map(String::as_str).collect();
                return fail(
                    &key,
                    format!("routes to {plugin:?}, but no plugin has that name (plugins: {known:?})"),
                );
            }
        }
        // Last: a configuration with other mistakes is told about those first.
        self.validate_security()
    }

    /// The sources routed to `plugin`, in name order.
    pub fn sources_of(&self, plugin: &str) -> Vec<String> {
        self.routes
            .iter()
            .filter(|(_, p)| p.as_str() == plugin)
            .map(|(s, _)| s.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Config, (String, String)> {
        let c = Config::parse(text)?;
        c.validate()?;
        Ok(c)
    }

    /// `check`, with plaintext serving where no TLS is configured (tests of other settings).
    fn check_dev(text: &str) -> Result<Config, (String, String)> {
        let mut c = Config::parse(text)?;
        c.server.plaintext |= c.server.tls.is_none();
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn tls_and_auth_settings_are_checked() {
        let (key, reason) = check("").unwrap_err();
        assert_eq!(key, "server.tls", "TLS unless plaintext is asked for");
        assert!(reason.contains("cert_file"), "{reason}");
        let tls = "[server.tls]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n";
        let c = check(tls).unwrap();
        let t = c.server.tls.as_ref().unwrap();
        assert_eq!((t.min_version.as_str(), t.client_ca_file.as_ref()), ("1.3", None));
        assert_eq!(c.auth.authenticators(&c.server), [Authenticator::Token]);
        assert_eq!(
            c.auth.authorization,
            Authorization::Sar,
            "allow-all only when configured"
        );
        let mtls = format!("{tls}client_ca_file = \"ca.pem\"\n");
        let c = check(&mtls).unwrap();
        assert_eq!(
            c.auth.authenticators(&c.server),
            [Authenticator::Token, Authenticator::Mtls]
        );
        let (key, _) = check(&format!("{tls}min_version = \"1.1\"\n")).unwrap_err();
        assert_eq!(key, "server.tls.min_version");
        let (key, _) = check(&format!("[server]\nplaintext = true\n{tls}")).unwrap_err();
        assert_eq!(key, "server.plaintext");
        let c =
            check("[server]\nplaintext = true\n[auth]\nauthenticators = []\nauthorization = \"allow-all\"\n").unwrap();
        assert_eq!(c.auth.authorization, Authorization::AllowAll);
        assert!(!c.auth.needs_kubernetes(&c.server));
        let (key, reason) = check("[server]\nplaintext = true\n[auth]\nauthenticators = []\n").unwrap_err();
        assert_eq!(key, "auth.authenticators");
        assert!(reason.contains("allow-all"), "{reason}");
        let (key, _) = check(&format!("[auth]\nauthenticators = [\"password\"]\n{tls}")).unwrap_err();
        assert_eq!(key, "auth.authenticators[0]");
        let (key, _) = check(&format!("[auth]\nauthenticators = [\"token\", \"token\"]\n{tls}")).unwrap_err();
        assert_eq!(key, "auth.authenticators[1]");
        let (key, reason) = check(&format!("[auth]\nauthenticators = [\"token\", \"mtls\"]\n{tls}")).unwrap_err();
        assert_eq!(key, "auth.authenticators[1]");
        assert!(reason.contains("client_ca_file"), "{reason}");
        let (key, _) = check(&format!("[auth]\ntoken_cache_ttl = \"1h\"\n{tls}")).unwrap_err();
        assert_eq!(key, "auth.token_cache_ttl");
        let (key, _) = check(&format!("[server]\nmax_connections = 0\n{tls}")).unwrap_err();
        assert_eq!(key, "server.max_connections");
        let c = check(&format!(
            "{tls}[auth.data_types]\n\"example.com.v1.widgets\" = \"widgets.example.com\"\n"
        ))
        .unwrap();
        assert_eq!(c.auth.data_types["example.com.v1.widgets"], "widgets.example.com");
        let (key, _) = check(&format!("{tls}[auth.data_types]\n\"nodots\" = \"x\"\n")).unwrap_err();
        assert_eq!(key, "auth.data_types.\"nodots\"");
    }

    #[test]
    fn defaults_match_upstream() {
        let c = check_dev("").unwrap();
        assert_eq!(c.server.listen.port(), 8090);
        assert_eq!(c.server.max_receive_message_size.0, 4 << 20);
        assert_eq!(c.broker.heartbeat(), Some(Duration::from_secs(10)));
        assert_eq!(c.broker.subscriber_queue_size, 100);
        assert_eq!(c.server.keepalive_interval.0, Duration::from_secs(30));
        assert_eq!(c.server.client_min_ping_interval.0, Duration::from_secs(5));
        assert_eq!(c.server.tls_handshake_timeout.0, Duration::from_secs(10));
    }

    #[test]
    fn unknown_keys_name_their_path() {
        let (key, reason) = check_dev("[server]\nlisten = \"127.0.0.1:1\"\nlisen = 1\n").unwrap_err();
        assert_eq!(key, "server.lisen");
        assert!(reason.contains("unknown field `lisen`"), "{reason}");
        assert!(reason.contains("line 3"), "{reason}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let (key, reason) = check_dev("[broker]\nheartbeat_interval = \"10x\"\n").unwrap_err();
        assert_eq!(key, "broker.heartbeat_interval");
        assert!(reason.contains("invalid duration"), "{reason}");
        let (key, _) = check_dev("[server]\nmax_receive_message_size = \"4QB\"\n").unwrap_err();
        assert_eq!(key, "server.max_receive_message_size");
        let (key, _) = check_dev("[broker]\nheartbeat_interval = \"1ms\"\n").unwrap_err();
        assert_eq!(key, "broker.heartbeat_interval");
        let (key, _) = check_dev("[log]\nformat = \"xml\"\n").unwrap_err();
        assert_eq!(key, "log.format");
        let plugin = "[plugins.p]\nkind = \"component\"\nfile = \"p.wasm\"\n";
        let (key, _) = check_dev(&format!("{plugin}limits = {{ concurrent_notifications = 0 }}\n")).unwrap_err();
        assert_eq!(key, "plugins.p.limits.concurrent_notifications");
    }

    #[test]
    fn plugins_use_listed_databases_with_the_pg_grant() {
        let db = "[databases.m]\nurl = \"postgres://u@h/db\"\ntls = \"verify-full\"\nca_file = \"ca.pem\"\n";
        let plugin = "[plugins.p]\nkind = \"component\"\nfile = \"p.wasm\"\n";
        let c = check_dev(&format!("{db}{plugin}grants = [\"pg\"]\ndatabases = [\"m\"]\n")).unwrap();
        assert_eq!(c.plugins["p"].databases, ["m"]);
        assert_eq!(c.databases["m"].tls, Some(TlsMode::VerifyFull));
        let (key, reason) = check_dev(&format!("{db}{plugin}grants = [\"pg\"]\ndatabases = [\"x\"]\n")).unwrap_err();
        assert_eq!(key, "plugins.p.databases[0]");
        assert!(reason.contains("\"x\""), "{reason}");
        let (key, _) = check_dev(&format!("{db}{plugin}grants = [\"pg\"]\n")).unwrap_err();
        assert_eq!(key, "plugins.p.databases");
        let (key, _) = check_dev(&format!("{db}{plugin}databases = [\"m\"]\n")).unwrap_err();
        assert_eq!(key, "plugins.p.grants");
        let (key, _) = check_dev("[databases.m]\nurl = \"postgres://u@h/db\"\nca_file = \"ca.pem\"\n").unwrap_err();
        assert_eq!(key, "databases.m.ca_file");
        let (key, _) = check_dev("[databases.m]\nurl = \"postgres://u@h/db\"\ntls = \"sometimes\"\n").unwrap_err();
        assert_eq!(key, "databases.m.tls");
    }

    #[test]
    fn databases_take_a_url_or_an_embedded_server() {
        let c = check_dev("[databases.m]\nembedded = { data_dir = \"pg\" }\n").unwrap();
        let embedded = c.databases["m"].embedded.as_ref().unwrap();
        assert_eq!(embedded.port, None, "a Unix socket only, unless a port is given");
        assert_eq!(embedded.database, "postgres");
        let (key, _) = check_dev("[databases.m]\nembedded = { data_dir = \"pg\", database = \"a-b\" }\n").unwrap_err();
        assert_eq!(key, "databases.m.embedded.database");
        assert!(check_dev("[databases.m]\nurl = \"postgres://u@h/db\"\n").is_ok());
        let (key, _) = check_dev("[databases.m]\n").unwrap_err();
        assert_eq!(key, "databases.m");
        let (key, _) = check_dev("[databases.m]\nurl = \"mysql://x\"\n").unwrap_err();
        assert_eq!(key, "databases.m.url");
        let (key, _) =
            check_dev("[databases.m]\nurl = \"postgres://x\"\nembedded = { data_dir = \"pg\" }\n").unwrap_err();
        assert_eq!(key, "databases.m");
        assert!(check_dev("[databases.m]\nurl_file = \"/etc/db/url\"\n").is_ok());
        let (key, _) = check_dev("[databases.m]\nurl = \"postgres://x\"\nurl_file = \"u\"\n").unwrap_err();
        assert_eq!(key, "databases.m");
    }

    fn loaded(text: &str, plugin_folder_override: Option<&str>) -> LoadedConfig {
        LoadedConfig {
            path: PathBuf::from("/etc/conductor/conductor.toml"),
            config: check_dev(text).unwrap(),
            plugin_folder_override: plugin_folder_override.map(PathBuf::from),
        }
    }

    #[test]
    fn bare_plugin_file_names_are_found_in_the_plugin_folder() {
        let plugins = "[plugins.a]\nkind = \"component\"\nfile = \"kube.wasm\"\n[plugins.b]\nkind = \"component\"\nfile = \"extra/b.wasm\"\n[plugins.c]\nkind = \"native\"\nfile = \"/opt/c.so\"\n";
        let files = |l: &LoadedConfig| -> Vec<PathBuf> {
            ["a", "b", "c"]
                .iter()
                .map(|n| l.plugin_file(&l.config.plugins[*n]).unwrap())
                .collect()
        };
        // No folder: the configuration file's folder, as any relative path.
        assert_eq!(
            files(&loaded(plugins, None)),
            ["/etc/conductor/kube.wasm", "/etc/conductor/extra/b.wasm", "/opt/c.so"].map(PathBuf::from)
        );
        let with_folder = format!("plugin_folder = \"/usr/lib/conductor/plugins\"\n{plugins}");
        assert_eq!(
            files(&loaded(&with_folder, None)),
            [
                "/usr/lib/conductor/plugins/kube.wasm",
                "/etc/conductor/extra/b.wasm",
                "/opt/c.so"
            ]
            .map(PathBuf::from)
        );
        // The command line wins; a relative folder is relative to the configuration file.
        assert_eq!(
            files(&loaded(&with_folder, Some("dist")))[0],
            PathBuf::from("/etc/conductor/dist/kube.wasm")
        );
    }

    #[test]
    fn kube_resources_name_resources_and_verbs() {
        let plugin = "[plugins.k]\nkind = \"component\"\nfile = \"k.wasm\"\ngrants = [\"kube\"]\n";
        let c = check_dev(&format!(
            "{plugin}kube_resources = [\"manifestworks.work.open-cluster-management.io\", {{ resource = \"manifestworks.work.open-cluster-management.io/status\", verbs = [\"patch\"] }}, \"serviceaccounts/token\"]\n"
        ))
        .unwrap();
        let grants = &c.plugins["k"].kube_resources;
        assert!(grants[0].allows("manifestworks.work.open-cluster-management.io", "delete"));
        assert!(!grants[0].allows("manifestworks.work.open-cluster-management.io/status", "patch"));
        assert!(grants[1].allows("manifestworks.work.open-cluster-management.io/status", "patch"));
        assert!(!grants[1].allows("manifestworks.work.open-cluster-management.io/status", "update"));
        assert_eq!(
            grants[1].parts(),
            ("work.open-cluster-management.io", "manifestworks", Some("status"))
        );
        assert_eq!(grants[2].parts(), ("", "serviceaccounts", Some("token")));
        let (key, reason) = check_dev(&format!(
            "{plugin}kube_resources = [{{ resource = \"leases.coordination.k8s.io\", verbs = [\"steal\"] }}]\n"
        ))
        .unwrap_err();
        assert_eq!(key, "plugins.k.kube_resources[0].verbs");
        assert!(reason.contains("steal"), "{reason}");
        let (key, _) = check_dev(&format!("{plugin}kube_resources = [\"Leases!\"]\n")).unwrap_err();
        assert_eq!(key, "plugins.k.kube_resources[0]");
        let (key, _) = check_dev(&format!("{plugin}kube_resources = [{{ resource = \"x\" }}]\n")).unwrap_err();
        assert_eq!(key, "plugins.k.kube_resources[0]");
        let no_grant = "[plugins.k]\nkind = \"component\"\nfile = \"k.wasm\"\nkube_resources = [\"x\"]\n";
        assert_eq!(check_dev(no_grant).unwrap_err().0, "plugins.k.grants");
    }

    #[test]
    fn routes_must_lead_to_a_plugin_and_sources_are_claimed_once() {
        let (key, reason) = check_dev("[routes]\nkube = \"nope\"\n").unwrap_err();
        assert_eq!(key, "routes.kube");
        assert!(reason.contains("no plugin"), "{reason}");
        let (_, reason) =
            check_dev("[plugins.m]\nkind = \"memory\"\n[routes]\nkube = \"m\"\nkube = \"m\"\n").unwrap_err();
        assert!(reason.contains("duplicate key"), "{reason}");
        let c = check_dev("[plugins.m]\nkind = \"memory\"\n[routes]\nkube = \"m\"\nother = \"m\"\n").unwrap();
        assert_eq!(c.sources_of("m"), ["kube", "other"]);
    }
}
