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
    /// The Kubernetes API server, for the plugins granted `kube`.
    #[serde(default)]
    pub kubernetes: KubernetesConfig,
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

/// An embedded development PostgreSQL.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedDatabase {
    /// The data folder, relative to the configuration file; created and initialised when new.
    pub data_dir: PathBuf,
    /// The port on 127.0.0.1.
    #[serde(default = "default_embedded_port")]
    pub port: u16,
    /// Where `initdb`, `pg_ctl` and `psql` are; the newest `/usr/lib/postgresql/*/bin` if unset.
    pub bin_dir: Option<PathBuf>,
}

fn default_embedded_port() -> u16 {
    55432
}

/// The gRPC listener agents connect to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Serve HTTP/2 without TLS (development and tests). TLS serving comes with authentication.
    pub plaintext: bool,
    pub max_receive_message_size: ByteSize,
    pub max_send_message_size: ByteSize,
    /// The HTTP/2 limit of concurrent streams per connection; unset means no limit.
    pub max_concurrent_streams: Option<u32>,
    /// How often the server pings an idle connection, and how long it waits for the answer.
    pub keepalive_interval: HumanDuration,
    pub keepalive_timeout: HumanDuration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8090)),
            plaintext: true,
            max_receive_message_size: ByteSize(4 << 20),
            max_send_message_size: ByteSize(u64::from(i32::MAX as u32)),
            max_concurrent_streams: None,
            keepalive_interval: HumanDuration(Duration::from_secs(30)),
            keepalive_timeout: HumanDuration(Duration::from_secs(10)),
        }
    }
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
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([0, 0, 0, 0], 9090)),
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    pub kind: PluginKind,
    /// The plugin file (`component`: a `.wasm` component; `native`: a shared library), relative
    /// to the configuration file's folder.
    pub file: Option<PathBuf>,
    /// The host capabilities granted (`emit`, `log`, `timer`, `kv`, `config`); deny by default.
    #[serde(default)]
    pub grants: Vec<String>,
    /// The databases (`[databases.<name>]`) the plugin may use through the `pg` capability.
    #[serde(default)]
    pub databases: Vec<String>,
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

/// Per-call limits of a WebAssembly plugin.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginLimits {
    /// Linear memory one instance may grow to.
    pub memory: ByteSize,
    /// How long one call may run before it is interrupted.
    pub call_timeout: HumanDuration,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            memory: ByteSize(64 << 20),
            call_timeout: HumanDuration(Duration::from_secs(5)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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
}

impl LoadedConfig {
    /// A plugin's file, resolved against the folder of the configuration file.
    pub fn plugin_file(&self, plugin: &PluginConfig) -> Option<PathBuf> {
        plugin.file.as_deref().map(|f| self.resolve(f))
    }

    /// A path from the configuration, resolved against the folder of the configuration file.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        match self.path.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        }
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
    /// Reads, parses and validates a configuration file.
    pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
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

    fn validate(&self) -> Result<(), (String, String)> {
        let fail = |key: &str, reason: String| Err((key.to_owned(), reason));
        if !self.server.plaintext {
            return fail(
                "server.plaintext",
                "TLS serving is not available in this version; set plaintext = true".into(),
            );
        }
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
        }
        for (name, db) in &self.databases {
            match (&db.url, &db.embedded) {
                (Some(_), Some(_)) | (None, None) => {
                    return fail(
                        &format!("databases.{name}"),
                        "set exactly one of `url` and `embedded`".into(),
                    );
                }
                (Some(url), None) if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) => {
                    return fail(
                        &format!("databases.{name}.url"),
                        "must start with postgres:// or postgresql://".into(),
                    );
                }
                (None, Some(e)) if e.port == 0 => {
                    return fail(&format!("databases.{name}.embedded.port"), "must not be 0".into());
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
        Ok(())
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

    #[test]
    fn defaults_match_upstream() {
        let c = check("").unwrap();
        assert_eq!(c.server.listen.port(), 8090);
        assert_eq!(c.server.max_receive_message_size.0, 4 << 20);
        assert_eq!(c.broker.heartbeat(), Some(Duration::from_secs(10)));
        assert_eq!(c.broker.subscriber_queue_size, 100);
        assert_eq!(c.server.keepalive_interval.0, Duration::from_secs(30));
    }

    #[test]
    fn unknown_keys_name_their_path() {
        let (key, reason) = check("[server]\nlisten = \"127.0.0.1:1\"\nlisen = 1\n").unwrap_err();
        assert_eq!(key, "server.lisen");
        assert!(reason.contains("unknown field `lisen`"), "{reason}");
        assert!(reason.contains("line 3"), "{reason}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let (key, reason) = check("[broker]\nheartbeat_interval = \"10x\"\n").unwrap_err();
        assert_eq!(key, "broker.heartbeat_interval");
        assert!(reason.contains("invalid duration"), "{reason}");
        let (key, _) = check("[server]\nmax_receive_message_size = \"4QB\"\n").unwrap_err();
        assert_eq!(key, "server.max_receive_message_size");
        let (key, _) = check("[broker]\nheartbeat_interval = \"1ms\"\n").unwrap_err();
        assert_eq!(key, "broker.heartbeat_interval");
        let (key, _) = check("[log]\nformat = \"xml\"\n").unwrap_err();
        assert_eq!(key, "log.format");
    }

    #[test]
    fn plugins_use_listed_databases_with_the_pg_grant() {
        let db = "[databases.m]\nurl = \"postgres://u@h/db\"\ntls = \"verify-full\"\nca_file = \"ca.pem\"\n";
        let plugin = "[plugins.p]\nkind = \"component\"\nfile = \"p.wasm\"\n";
        let c = check(&format!("{db}{plugin}grants = [\"pg\"]\ndatabases = [\"m\"]\n")).unwrap();
        assert_eq!(c.plugins["p"].databases, ["m"]);
        assert_eq!(c.databases["m"].tls, Some(TlsMode::VerifyFull));
        let (key, reason) = check(&format!("{db}{plugin}grants = [\"pg\"]\ndatabases = [\"x\"]\n")).unwrap_err();
        assert_eq!(key, "plugins.p.databases[0]");
        assert!(reason.contains("\"x\""), "{reason}");
        let (key, _) = check(&format!("{db}{plugin}grants = [\"pg\"]\n")).unwrap_err();
        assert_eq!(key, "plugins.p.databases");
        let (key, _) = check(&format!("{db}{plugin}databases = [\"m\"]\n")).unwrap_err();
        assert_eq!(key, "plugins.p.grants");
        let (key, _) = check("[databases.m]\nurl = \"postgres://u@h/db\"\nca_file = \"ca.pem\"\n").unwrap_err();
        assert_eq!(key, "databases.m.ca_file");
        let (key, _) = check("[databases.m]\nurl = \"postgres://u@h/db\"\ntls = \"sometimes\"\n").unwrap_err();
        assert_eq!(key, "databases.m.tls");
    }

    #[test]
    fn databases_take_a_url_or_an_embedded_server() {
        let c = check("[databases.m]\nembedded = { data_dir = \"pg\" }\n").unwrap();
        assert_eq!(c.databases["m"].embedded.as_ref().unwrap().port, 55432);
        assert!(check("[databases.m]\nurl = \"postgres://u@h/db\"\n").is_ok());
        let (key, _) = check("[databases.m]\n").unwrap_err();
        assert_eq!(key, "databases.m");
        let (key, _) = check("[databases.m]\nurl = \"mysql://x\"\n").unwrap_err();
        assert_eq!(key, "databases.m.url");
        let (key, _) = check("[databases.m]\nurl = \"postgres://x\"\nembedded = { data_dir = \"pg\" }\n").unwrap_err();
        assert_eq!(key, "databases.m");
    }

    #[test]
    fn routes_must_lead_to_a_plugin_and_sources_are_claimed_once() {
        let (key, reason) = check("[routes]\nkube = \"nope\"\n").unwrap_err();
        assert_eq!(key, "routes.kube");
        assert!(reason.contains("no plugin"), "{reason}");
        let (_, reason) = check("[plugins.m]\nkind = \"memory\"\n[routes]\nkube = \"m\"\nkube = \"m\"\n").unwrap_err();
        assert!(reason.contains("duplicate key"), "{reason}");
        let c = check("[plugins.m]\nkind = \"memory\"\n[routes]\nkube = \"m\"\nother = \"m\"\n").unwrap();
        assert_eq!(c.sources_of("m"), ["kube", "other"]);
    }
}
