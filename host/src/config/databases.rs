//! `[databases.<name>]`: PostgreSQL databases, by URL or as an embedded development server.

use std::{path::PathBuf, time::Duration};

use serde::Deserialize;

use super::{HumanDuration, Invalid, invalid};

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

impl DatabaseConfig {
    pub(crate) fn validate(&self, key: &str) -> Result<(), Invalid> {
        let sources = [self.url.is_some(), self.url_file.is_some(), self.embedded.is_some()];
        if sources.iter().filter(|set| **set).count() != 1 {
            return invalid(key, "set exactly one of `url`, `url_file` and `embedded`");
        }
        match (&self.url, &self.embedded) {
            (Some(url), None) if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) => {
                return invalid(format!("{key}.url"), "must start with postgres:// or postgresql://");
            }
            (None, Some(e)) if e.port == Some(0) => {
                return invalid(format!("{key}.embedded.port"), "must not be 0");
            }
            (None, Some(e))
                if e.database.is_empty() || !e.database.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                return invalid(
                    format!("{key}.embedded.database"),
                    "must be a plain identifier (letters, digits, _)",
                );
            }
            _ => {}
        }
        if self.pool_size == 0 {
            return invalid(format!("{key}.pool_size"), "must be at least 1");
        }
        if self.ca_file.is_some() && !matches!(self.tls, Some(TlsMode::VerifyCa | TlsMode::VerifyFull)) {
            return invalid(
                format!("{key}.ca_file"),
                "only used with tls = \"verify-ca\" or \"verify-full\"",
            );
        }
        Ok(())
    }
}
