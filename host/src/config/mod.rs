//! `conductor.toml`: typed configuration. Every bad value is a [`ConfigError`] naming the file,
//! the key and the reason.

//!
//! The loader is here; each section (`[server]`, `[auth]`, `[plugins.<name>]`, …) lives in a file
//! of its own with the checks of its values.

mod admin;
mod auth;
mod broker;
mod databases;
mod dynamic;
mod kubernetes;
mod log;
mod oci;
mod plugins;
mod reload;
mod server;
mod telemetry;
mod units;

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use serde::Deserialize;

pub use admin::{AdminAuthorization, AdminConfig};
pub use auth::{AuthConfig, Authenticator, Authorization};
pub use broker::BrokerConfig;
pub use databases::{DatabaseConfig, EmbeddedDatabase, TlsMode};
pub use dynamic::{DynamicConfig, MaxGrants};
pub use kubernetes::KubernetesConfig;
pub use log::{LogConfig, LogFormat};
pub use oci::OciConfig;
pub use plugins::{KUBE_VERBS, KubeResourceGrant, PluginConfig, PluginKind, PluginLimits, VerifyConfig};
pub use reload::ReloadConfig;
pub use server::{ServerConfig, TlsConfig};
pub use telemetry::{OtlpConfig, TelemetryConfig};
pub use units::{ByteSize, HumanDuration};

/// A value that fails its check: the dotted key and the reason.
pub(crate) type Invalid = (String, String);

/// `Err` naming `key` and the reason.
pub(crate) fn invalid<T>(key: impl Into<String>, reason: impl Into<String>) -> Result<T, Invalid> {
    Err((key.into(), reason.into()))
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where plugins named by a bare file name (`file = "kube.wasm"`, no `/`) are found; relative
    /// to this file. Unset: the folder of this file. A top-level key: write it before any table.
    #[serde(default)]
    pub plugin_folder: Option<PathBuf>,
    /// Where compiled WebAssembly components are kept between runs, so a restart or a reload does
    /// not compile them again; relative to this file. Unset: [`default_compile_cache`]. `""`:
    /// nowhere (every start compiles). A top-level key.
    #[serde(default)]
    pub compile_cache: Option<PathBuf>,
    /// The most the compiled components kept in `compile_cache` may take together; past it,
    /// the least recently used go. A top-level key.
    #[serde(default = "default_compile_cache_max_size")]
    pub compile_cache_max_size: ByteSize,
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub broker: BrokerConfig,
    #[serde(default)]
    pub admin: AdminConfig,
    #[serde(default)]
    pub log: LogConfig,
    /// Traces.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Whether a changed configuration is applied by itself.
    #[serde(default)]
    pub reload: ReloadConfig,
    /// How plugins named `file = "oci://…"` are pulled.
    #[serde(default)]
    pub oci: OciConfig,
    /// Plugins registered at runtime as `SourcePlugin` resources, and what they may be granted.
    #[serde(default)]
    pub dynamic: DynamicConfig,
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

/// conductor's folder for what it keeps between runs: `$XDG_CACHE_HOME/conductor`, else
/// `~/.cache/conductor` (`None` with neither).
pub fn cache_home() -> Option<PathBuf> {
    let nonempty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = nonempty("XDG_CACHE_HOME").or_else(|| nonempty("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("conductor"))
}

/// Where compiled components are kept when the configuration names no folder:
/// [`cache_home`]`/compiled`.
/// The default `compile_cache_max_size`: a dozen Python components (~40 MiB compiled each), many
/// more of the others.
pub const DEFAULT_COMPILE_CACHE_MAX_SIZE: u64 = 512 << 20;

/// The environment variable that sets the plugin folder, over the configuration's
/// `plugin_folder` (`serve`'s `--plugin-folder` reads it; `grpc` has no other way to set it).
pub const PLUGIN_FOLDER_ENV: &str = "CONDUCTOR_PLUGIN_FOLDER";

fn default_compile_cache_max_size() -> ByteSize {
    ByteSize(DEFAULT_COMPILE_CACHE_MAX_SIZE)
}

pub fn default_compile_cache() -> Option<PathBuf> {
    cache_home().map(|home| home.join("compiled"))
}

/// Where pulled plugin artifacts are kept when the configuration names no folder:
/// [`cache_home`]`/oci`.
pub fn default_oci_cache() -> Option<PathBuf> {
    cache_home().map(|home| home.join("oci"))
}

/// A configuration read from a file: the values and where they came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub path: PathBuf,
    pub config: Config,
    /// `plugin_folder` given on the command line, which wins over the file's and survives
    /// reloads.
    pub plugin_folder_override: Option<PathBuf>,
    /// Plugins that serve only the sources routed to them, not those they declare: the ones
    /// registered at runtime (`SourcePlugin`), added to the file's.
    pub routed_only: std::collections::BTreeSet<String>,
    /// How to read this configuration again when it was not read from a `conductor.toml` but
    /// made from another format (`conductor grpc`: OCM's server configuration and flags).
    pub regenerate: Option<Regenerate>,
}

/// Makes a configuration again from what it was made of (the files it was translated from).
#[derive(Clone)]
pub struct Regenerate(pub std::sync::Arc<dyn Fn() -> Result<LoadedConfig, ConfigError> + Send + Sync>);

impl fmt::Debug for Regenerate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Regenerate")
    }
}

impl LoadedConfig {
    /// A plugin's file: a bare file name is looked up in the plugin folder, a path is resolved
    /// against the folder of the configuration file. `None` for the memory source and for a
    /// plugin pulled from a registry (`oci://…`).
    pub fn plugin_file(&self, plugin: &PluginConfig) -> Option<PathBuf> {
        if plugin.oci_reference().is_some() {
            return None;
        }
        let file = plugin.file.as_deref()?;
        Some(if self.in_plugin_folder(plugin) {
            self.plugin_folder().join(file)
        } else {
            self.resolve(file)
        })
    }

    /// Whether a plugin's file is a bare file name, looked up in the plugin folder.
    pub fn in_plugin_folder(&self, plugin: &PluginConfig) -> bool {
        plugin.oci_reference().is_none()
            && plugin
                .file
                .as_deref()
                .is_some_and(|file| file.components().count() == 1 && !file.to_string_lossy().contains('/'))
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

    /// Where compiled components are kept (`None`: nowhere).
    pub fn compile_cache(&self) -> Option<PathBuf> {
        match self.config.compile_cache.as_deref() {
            None => default_compile_cache(),
            Some(p) if p.as_os_str().is_empty() => None,
            Some(p) => Some(self.resolve(p)),
        }
    }

    /// Where pulled plugin artifacts are kept.
    pub fn oci_cache(&self) -> Option<PathBuf> {
        match &self.config.oci.cache {
            Some(folder) => Some(self.resolve(folder)),
            None => default_oci_cache(),
        }
    }

    /// The files whose change reloads this configuration: the file itself and every plugin file
    /// it names (blobs are read on every call, so a changed blob needs no reload).
    pub fn watched_files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.path.clone()];
        for plugin in self.config.plugins.values() {
            files.extend(self.plugin_file(plugin));
        }
        files
    }

    /// A path from the configuration, resolved against the folder of the configuration file.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        match self.path.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        }
    }

    /// Reads the file again (for a reload), keeping the command line's overrides; a translated
    /// configuration is translated again.
    pub fn reread(&self) -> Result<LoadedConfig, ConfigError> {
        if let Some(regenerate) = &self.regenerate {
            return (regenerate.0)();
        }
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
        Self::load_text(path, &text, plugin_folder)
    }

    /// Parses and validates configuration `text` as if read from `path` (relative paths are
    /// resolved against its folder, errors name it).
    pub fn load_text(path: &Path, text: &str, plugin_folder: Option<PathBuf>) -> Result<LoadedConfig, ConfigError> {
        let err = |key: String, reason: String| ConfigError {
            file: path.to_owned(),
            key,
            reason,
        };
        let config = Self::parse(text).map_err(|(key, reason)| err(key, reason))?;
        let mut loaded = LoadedConfig {
            path: path.to_owned(),
            config,
            plugin_folder_override: plugin_folder,
            routed_only: Default::default(),
            regenerate: None,
        };
        loaded
            .config
            .validate()
            .map_err(|(key, reason)| loaded.error(key, reason))?;
        // Blobs are read where the plugin runs: their paths are made absolute here, once.
        let resolved: Vec<(String, BTreeMap<String, PathBuf>)> = loaded
            .config
            .plugins
            .iter()
            .map(|(name, p)| {
                let blobs = p.blobs.iter().map(|(k, f)| (k.clone(), loaded.resolve(f))).collect();
                (name.clone(), blobs)
            })
            .collect();
        for (name, blobs) in resolved {
            if let Some(plugin) = loaded.config.plugins.get_mut(&name) {
                plugin.blobs = blobs;
            }
        }
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

    /// Checks every section; the first value that fails names its key. Security settings (TLS,
    /// authentication, authorization) are checked last: a configuration with other mistakes is
    /// told about those first.
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        self.server.validate()?;
        self.broker.validate()?;
        self.log.validate()?;
        self.telemetry.validate()?;
        self.reload.validate()?;
        self.oci.validate()?;
        self.dynamic.validate()?;
        for (name, plugin) in &self.plugins {
            plugin.validate(&format!("plugins.{name}"), &self.databases)?;
            if let Some(reference) = plugin
                .oci_reference()
                .and_then(|text| crate::oci::ArtifactReference::parse(&text).ok())
                && let Some(why) = self.oci.refusal(&reference)
            {
                return invalid(format!("plugins.{name}.file"), why);
            }
        }
        for (name, db) in &self.databases {
            db.validate(&format!("databases.{name}"))?;
        }
        self.validate_routes()?;
        self.server.validate_tls()?;
        self.admin.validate()?;
        self.auth.validate(&self.server)
    }

    /// What in this configuration lets other hosts do more than a hub should allow: plaintext or
    /// `allow-all` gRPC, or an admin endpoint anyone may use, on an address other hosts reach.
    /// Each warning names its key.
    pub fn exposure_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let grpc = self.server.listen;
        if !grpc.ip().is_loopback() {
            if self.server.plaintext {
                warnings.push(format!(
                    "server.plaintext: gRPC without TLS on {grpc}, which other hosts reach: agents' credentials cross the network in the clear"
                ));
            }
            if self.auth.authorization == Authorization::AllowAll {
                warnings.push(format!(
                    "auth.authorization: \"allow-all\" on {grpc}, which other hosts reach: any of them may read and write every cluster's resources"
                ));
            }
        }
        let admin = self.admin.listen;
        if self.admin.enabled && !admin.ip().is_loopback() && self.admin.authorization == AdminAuthorization::None {
            warnings.push(format!(
                "admin.authorization: the admin endpoint on {admin}, which other hosts reach, lets anyone read /metrics and /inspect/* and POST /reload; set authorization = \"sar\""
            ));
        }
        warnings
    }

    fn validate_routes(&self) -> Result<(), Invalid> {
        for (source, plugin) in &self.routes {
            let key = format!("routes.{source}");
            if source.is_empty() || source.contains("::") {
                return invalid(key, "a source name must be non-empty and must not contain \"::\"");
            }
            if !self.plugins.contains_key(plugin) {
                let known: Vec<&str> = self.plugins.keys().map(String::as_str).collect();
                return invalid(
                    key,
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
    use std::time::Duration;

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
        for limit in ["request_batch", "request_calls"] {
            let (key, reason) = check_dev(&format!("{plugin}limits = {{ {limit} = 0 }}\n")).unwrap_err();
            assert_eq!(key, format!("plugins.p.limits.{limit}"));
            assert!(reason.contains("at least 1"), "{reason}");
        }
    }

    #[test]
    fn traces_are_off_unless_an_otlp_endpoint_is_named() {
        assert!(check_dev("").unwrap().telemetry.otlp.is_none());
        let c = check_dev("[telemetry.otlp]\nendpoint = \"http://collector:4317\"\n").unwrap();
        let otlp = c.telemetry.otlp.unwrap();
        assert_eq!(
            (otlp.service_name.as_str(), otlp.timeout.0),
            ("conductor", Duration::from_secs(10))
        );
        assert!(
            (otlp.sample_ratio - 1.0).abs() < f64::EPSILON,
            "every trace kept by default"
        );
        let (key, reason) = check_dev("[telemetry.otlp]\nendpoint = \"collector:4317\"\n").unwrap_err();
        assert_eq!(key, "telemetry.otlp.endpoint");
        assert!(reason.contains("http://"), "{reason}");
        let (key, _) = check_dev("[telemetry.otlp]\nendpoint = \"http://c:4317\"\nservice_name = \"\"\n").unwrap_err();
        assert_eq!(key, "telemetry.otlp.service_name");
        let (key, _) = check_dev("[telemetry.otlp]\nendpoint = \"http://c:4317\"\ntimeout = \"0s\"\n").unwrap_err();
        assert_eq!(key, "telemetry.otlp.timeout");
        let (key, _) = check_dev("[telemetry.otlp]\nendpoint = \"http://c:4317\"\nsample_ratio = 1.5\n").unwrap_err();
        assert_eq!(key, "telemetry.otlp.sample_ratio");
    }

    #[test]
    fn reload_watches_by_default_within_bounds() {
        let c = check_dev("").unwrap();
        assert!(c.reload.watch);
        assert_eq!(c.reload.watch_interval.0, Duration::from_secs(1));
        let (key, _) = check_dev("[reload]\nwatch_interval = \"10ms\"\n").unwrap_err();
        assert_eq!(key, "reload.watch_interval");
        let (key, _) = check_dev("[reload]\ndebounce = \"2m\"\n").unwrap_err();
        assert_eq!(key, "reload.debounce");
    }

    #[test]
    fn compile_cache_is_resolved_against_the_file_or_off() {
        let l = loaded("compile_cache = \"cache\"\n", None);
        assert_eq!(l.compile_cache(), Some(PathBuf::from("/etc/conductor/cache")));
        let l = loaded("compile_cache = \"/var/cache/conductor\"\n", None);
        assert_eq!(l.compile_cache(), Some(PathBuf::from("/var/cache/conductor")));
        assert_eq!(loaded("compile_cache = \"\"\n", None).compile_cache(), None);
        assert_eq!(loaded("", None).compile_cache(), default_compile_cache());
        let files = loaded("[plugins.a]\nkind = \"component\"\nfile = \"/opt/a.wasm\"\n", None).watched_files();
        assert_eq!(
            files,
            [
                PathBuf::from("/etc/conductor/conductor.toml"),
                PathBuf::from("/opt/a.wasm")
            ]
        );
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
            routed_only: Default::default(),
            regenerate: None,
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
