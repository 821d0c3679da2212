//! `conductor grpc`: conductor run exactly as OCM's ClusterManager operator runs its hub gRPC
//! server (`/server grpc --server-config=/var/run/secrets/hub/grpc/config/config.yaml …`), so that
//! a hub switches to conductor by changing the image and nothing else.
//!
//! - `flags`: the operator's command line and every flag OCM's server and the Go conductor take;
//! - `server_config`: the file, in OCM's flat format or the Go conductor's nested one;
//! - `translate`: both → the equivalent `conductor.toml` (what `--print-config` prints);
//! - `health_cert`: the self-signed certificate of the HTTPS health endpoint;
//! - `go`: Go's spellings of durations, TLS versions, addresses and cipher suites.
//!
//! The configuration is made again from the same file on every reload, so a changed ConfigMap
//! is applied as a changed `conductor.toml` is.

pub mod flags;
pub mod go;
pub mod health_cert;
pub mod server_config;
pub mod translate;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{Config, ConfigError, LoadedConfig, PLUGIN_FOLDER_ENV, Regenerate};
pub use flags::{FlagError, Flags};
use server_config::{Format, ServerConfigFile};
use translate::Environment;

/// Where the image keeps its binary; its bundled plugins are in `usr/lib/conductor/plugins` of
/// the same root.
const IMAGE_BINARY: &str = "usr/local/bin/conductor";
const IMAGE_PLUGINS: &str = "usr/lib/conductor/plugins";

/// One `conductor grpc` invocation: its flags and where it runs.
#[derive(Debug, Clone)]
pub struct DropIn {
    pub flags: Flags,
    env: Environment,
}

/// The configuration made, with what to tell the operator about how it was made.
pub struct Made {
    pub loaded: LoadedConfig,
    /// The equivalent `conductor.toml`.
    pub text: String,
    pub report: Report,
}

/// What the operator is told once, at start: the file's format (or its absence), every flag and
/// key ignored and why, every value changed on the way.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub file: PathBuf,
    pub format: Option<Format>,
    pub ignored_flags: Vec<flags::Ignored>,
    pub ignored_keys: Vec<(String, &'static str)>,
    pub notes: Vec<String>,
}

impl Report {
    /// Logs it (after logging is set up).
    pub fn log(&self) {
        let file = self.file.display().to_string();
        match self.format {
            None => tracing::warn!(
                file,
                "the server configuration file does not exist: OCM's defaults apply"
            ),
            Some(Format::Flat) => tracing::info!(file, "read OCM's gRPC server configuration"),
            Some(Format::Nested) => {
                tracing::info!(file, "read the Go conductor's configuration (grpc_config, db_config)")
            }
        }
        for ignored in &self.ignored_flags {
            tracing::info!(flag = ignored.flag, reason = ignored.why, "command-line flag ignored");
        }
        for (key, why) in &self.ignored_keys {
            tracing::info!(file, key, reason = why, "server configuration key ignored");
        }
        for note in &self.notes {
            tracing::warn!(file, "{note}");
        }
    }
}

impl DropIn {
    /// Parses the arguments after `grpc`, and finds the bundled plugins and the writable folder.
    pub fn new(args: Vec<String>) -> Result<Self, FlagError> {
        let flags = Flags::parse(args)?;
        let scratch = std::env::temp_dir().join("conductor");
        let env = Environment {
            plugin_folder: bundled_plugins(),
            health_cert: (scratch.join("health/tls.crt"), scratch.join("health/tls.key")),
            scratch,
            working_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        Ok(Self { flags, env })
    }

    /// The file `--server-config` names (OCM's path when not given).
    pub fn server_config(&self) -> PathBuf {
        let file = self
            .flags
            .server_config
            .clone()
            .unwrap_or_else(|| PathBuf::from(flags::DEFAULT_SERVER_CONFIG));
        self.env.working_dir.join(file)
    }

    /// Makes the health endpoint's certificate (serving needs it; printing does not).
    pub fn make_health_cert(&self) -> Result<(), health_cert::HealthCertError> {
        let dir = self.env.health_cert.0.parent().unwrap_or(Path::new("/tmp"));
        health_cert::make(dir).map(drop)
    }

    /// Reads the file and makes the configuration; reloads make it again the same way.
    pub fn make(self: &Arc<Self>) -> Result<Made, ConfigError> {
        let path = self.server_config();
        let file = ServerConfigFile::read(&path)?;
        let translation = translate::translate(file.as_ref(), &self.flags, &self.env);
        let text = format!(
            "# The configuration `conductor grpc` runs, made from {} and the command line.\n{}",
            path.display(),
            toml::to_string(&translation.table).map_err(|e| ConfigError {
                file: path.clone(),
                key: String::new(),
                reason: format!("cannot write the equivalent conductor.toml: {e}"),
            })?
        );
        let mut loaded = Config::load_text(&path, &text, None)?;
        let again = Arc::clone(self);
        loaded.regenerate = Some(Regenerate(Arc::new(move || again.make().map(|made| made.loaded))));
        let report = Report {
            file: path,
            format: file.as_ref().map(|f| f.format),
            ignored_flags: self.flags.ignored.clone(),
            ignored_keys: file.map(|f| f.ignored).unwrap_or_default(),
            notes: translation.notes,
        };
        Ok(Made { loaded, text, report })
    }
}

/// The image's plugins: `CONDUCTOR_PLUGIN_FOLDER` when set, else beside the running binary in
/// the image's layout (`<root>/usr/local/bin/conductor` → `<root>/usr/lib/conductor/plugins`,
/// whether started as `/server` or by its own name), else the image's path.
fn bundled_plugins() -> PathBuf {
    if let Some(folder) = std::env::var_os(PLUGIN_FOLDER_ENV).filter(|f| !f.is_empty()) {
        return PathBuf::from(folder);
    }
    let root = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .ok()
        .and_then(|exe| {
            let root = exe.to_str()?.strip_suffix(IMAGE_BINARY)?.to_owned();
            Some(PathBuf::from(root))
        })
        .unwrap_or_else(|| PathBuf::from("/"));
    root.join(IMAGE_PLUGINS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_makes_the_configuration_again_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        std::fs::write(&file, "server_bind_port: \"9001\"\n").unwrap();
        let dropin = Arc::new(
            DropIn::new(vec![
                format!("--server-config={}", file.display()),
                "--namespace=x".into(),
            ])
            .unwrap(),
        );
        let made = dropin.make().unwrap();
        assert_eq!(made.loaded.config.server.listen.port(), 9001);
        assert_eq!(made.report.format, Some(Format::Flat));
        assert_eq!(made.report.ignored_flags.len(), 1);
        assert!(made.text.contains("listen = \"0.0.0.0:9001\""), "{}", made.text);
        std::fs::write(&file, "server_bind_port: \"9002\"\n").unwrap();
        assert_eq!(made.loaded.reread().unwrap().config.server.listen.port(), 9002);
        std::fs::write(&file, "server_bind_port: nine\n").unwrap();
        let err = made.loaded.reread().unwrap_err();
        assert_eq!((err.file, err.key.as_str()), (file.clone(), "server_bind_port"));
    }

    #[test]
    fn no_file_is_reported_and_served_with_defaults() {
        let dropin = Arc::new(DropIn::new(vec!["--server-config=/nonexistent/config.yaml".into()]).unwrap());
        let made = dropin.make().unwrap();
        assert_eq!(made.report.format, None);
        assert_eq!(made.loaded.config.server.listen.port(), 8090);
    }
}
