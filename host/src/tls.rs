//! TLS serving, for the gRPC listener (`[server.tls]`, `docs/protocol.md` §9.3: ALPN `h2`, an
//! optional client CA checked when a client presents a certificate; token agents present none)
//! and the admin endpoint (`[admin.tls]`: ALPN `http/1.1`): the serving certificate and key, the
//! oldest TLS version and the TLS 1.2 cipher suites. The files are watched: when one changes (a
//! mounted Secret is swapped through a symlink), the next connections get the new ones; open
//! connections keep theirs. The serving certificate's expiry is a metric.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, LoadedConfig, TlsConfig};
use crate::telemetry::SecurityMetrics;

/// The TLS settings with their files resolved against the configuration file's folder.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The configuration table they come from (`server.tls`, `admin.tls`): errors name its keys,
    /// and the expiry metric its listener.
    table: &'static str,
    /// The application protocol offered in ALPN.
    alpn: &'static [u8],
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    min_version: String,
    max_version: Option<String>,
    cipher_suites: Vec<String>,
    reload_interval: Duration,
}

/// What the files held when they were last read: a change in any of them is a reload.
#[derive(PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

/// A TLS setting that does not work: the configuration key it comes from, and why.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct TlsError {
    pub key: String,
    pub reason: String,
}

fn fail(table: &str, field: &str, reason: impl Into<String>) -> TlsError {
    TlsError {
        key: format!("{table}.{field}"),
        reason: reason.into(),
    }
}

impl TlsFiles {
    /// The gRPC listener's (`[server.tls]`, ALPN `h2`).
    pub fn new(loaded: &LoadedConfig, tls: &TlsConfig) -> Self {
        Self::of("server.tls", b"h2", loaded, tls)
    }

    /// The admin endpoint's (`[admin.tls]`, ALPN `http/1.1`).
    pub fn admin(loaded: &LoadedConfig, tls: &TlsConfig) -> Self {
        Self::of("admin.tls", b"http/1.1", loaded, tls)
    }

    fn of(table: &'static str, alpn: &'static [u8], loaded: &LoadedConfig, tls: &TlsConfig) -> Self {
        Self {
            table,
            alpn,
            cert: loaded.resolve(&tls.cert_file),
            key: loaded.resolve(&tls.key_file),
            client_ca: tls.client_ca_file.as_deref().map(|f| loaded.resolve(f)),
            min_version: tls.min_version.clone(),
            max_version: tls.max_version.clone(),
            cipher_suites: tls.cipher_suites.clone(),
            reload_interval: tls.reload_interval.0,
        }
    }

    /// The first of the files that does not exist.
    pub fn missing(&self) -> Option<&Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .find(|p| !p.exists())
            .map(PathBuf::as_path)
    }

    fn read(&self) -> Result<Contents, TlsError> {
        let read = |field, path: &Path| {
            std::fs::read(path).map_err(|e| fail(self.table, field, format!("cannot read {}: {e}", path.display())))
        };
        Ok(Contents {
            cert: read("cert_file", &self.cert)?,
            key: read("key_file", &self.key)?,
            client_ca: self
                .client_ca
                .as_deref()
                .map(|p| read("client_ca_file", p))
                .transpose()?,
        })
    }

    /// Reads the files and builds the rustls configuration they make.
    pub fn load(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.build(&self.read()?)
    }

    /// Checks that the files make a working configuration (what `check-config` runs).
    pub fn check(&self, loaded: &LoadedConfig) -> Result<(), ConfigError> {
        self.load().map(drop).map_err(|e| loaded.error(e.key, e.reason))
    }

    /// When the serving certificate (the first of `cert_file`) expires, as seconds since the
    /// Unix epoch.
    fn expiry(&self, contents: &Contents) -> Option<i64> {
        let leaf = CertificateDer::pem_slice_iter(&contents.cert).next()?.ok()?;
        not_after(&leaf)
    }

    /// When the first certificate of the client CA bundle to expire does: after that, the client
    /// certificates it signed are refused.
    fn client_ca_expiry(&self, contents: &Contents) -> Option<i64> {
        CertificateDer::pem_slice_iter(contents.client_ca.as_deref()?)
            .filter_map(|cert| not_after(&cert.ok()?))
            .min()
    }

    /// Both expiries, to the metrics.
    fn export_expiries(&self, contents: &Contents, metrics: &SecurityMetrics) {
        metrics.certificate_expires(self.table, self.expiry(contents));
        metrics.client_ca_expires(self.table, self.client_ca_expiry(contents));
    }

    fn build(&self, contents: &Contents) -> Result<Arc<ServerConfig>, TlsError> {
        let table = self.table;
        let provider = Arc::new(provider(&self.cipher_suites).map_err(|reason| fail(table, "cipher_suites", reason))?);
        let versions: &[&rustls::SupportedProtocolVersion] =
            match (self.min_version.as_str(), self.max_version.as_deref()) {
                ("1.2", Some("1.2")) => &[&rustls::version::TLS12],
                ("1.2", _) => &[&rustls::version::TLS13, &rustls::version::TLS12],
                _ => &[&rustls::version::TLS13],
            };
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .map_err(|e| fail(table, "min_version", e.to_string()))?;
        let builder = match &contents.client_ca {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates(pem).map_err(|reason| fail(table, "client_ca_file", reason))? {
                    roots
                        .add(cert)
                        .map_err(|e| fail(table, "client_ca_file", format!("not a CA certificate: {e}")))?;
                }
                // Verified when presented; a client without a certificate goes on to the
                // token authenticator.
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| fail(table, "client_ca_file", e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let chain = certificates(&contents.cert).map_err(|reason| fail(table, "cert_file", reason))?;
        let key = PrivateKeyDer::from_pem_slice(&contents.key)
            .map_err(|e| fail(table, "key_file", format!("no PEM private key: {e}")))?;
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| fail(table, "key_file", format!("does not go with cert_file: {e}")))?;
        config.alpn_protocols = vec![self.alpn.to_vec()];
        Ok(Arc::new(config))
    }
}

/// A certificate's notAfter, in seconds since the Unix epoch.
fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert).ok()?;
    Some(cert.validity().not_after.timestamp())
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate".to_owned());
    }
    Ok(certs)
}

/// The ring provider with every TLS 1.3 suite and the TLS 1.2 suites named (all of ring's
/// ECDHE AEAD suites when none are).
fn provider(tls12_suites: &[String]) -> Result<CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    if tls12_suites.is_empty() {
        return Ok(provider);
    }
    let name = |s: &SupportedCipherSuite| s.suite().as_str().unwrap_or("").to_owned();
    for wanted in tls12_suites {
        let known = provider
            .cipher_suites
            .iter()
            .any(|s| s.version() == &rustls::version::TLS12 && &name(s) == wanted);
        if !known {
            let offered: Vec<String> = provider
                .cipher_suites
                .iter()
                .filter(|s| s.version() == &rustls::version::TLS12)
                .map(name)
                .collect();
            return Err(format!(
                "{wanted:?} is not a TLS 1.2 suite this server offers: {offered:?}"
            ));
        }
    }
    provider
        .cipher_suites
        .retain(|s| s.version() == &rustls::version::TLS13 || tls12_suites.contains(&name(s)));
    Ok(provider)
}

/// The TLS configuration new connections get, replaced when the files change.
pub struct ReloadingTls {
    current: RwLock<Arc<ServerConfig>>,
}

impl ReloadingTls {
    /// Loads the files (an error names the key) and watches them until `stop`.
    pub fn start(files: TlsFiles, metrics: SecurityMetrics, stop: CancellationToken) -> Result<Arc<Self>, TlsError> {
        let contents = files.read()?;
        let this = Arc::new(Self {
            current: RwLock::new(files.build(&contents)?),
        });
        files.export_expiries(&contents, &metrics);
        let watcher = Arc::downgrade(&this);
        tokio::spawn(async move {
            let mut last = contents;
            let mut tick = tokio::time::interval(files.reload_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let Some(this) = watcher.upgrade() else { return };
                let files = files.clone();
                let read = tokio::task::spawn_blocking(move || files.read().map(|c| (files, c))).await;
                let Ok(Ok((files_back, contents))) = read else {
                    // A file missing for a moment (mid-swap) is read again on the next tick.
                    continue;
                };
                if contents == last {
                    continue;
                }
                match files_back.build(&contents) {
                    Ok(config) => {
                        *this.current.write() = config;
                        files_back.export_expiries(&contents, &metrics);
                        last = contents;
                        metrics.tls_reloaded(true);
                        tracing::info!("TLS certificate, key or client CA changed on disk: new connections use them");
                    }
                    Err(e) => {
                        // Not remembered as seen: a half-swapped pair is retried on the next tick.
                        metrics.tls_reloaded(false);
                        tracing::warn!(error = %e, "the TLS files changed but do not load; connections keep the previous ones");
                    }
                }
            }
        });
        Ok(this)
    }

    /// The configuration for a connection being accepted now.
    pub fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.current.read())
    }
}
