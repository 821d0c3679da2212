//! The bodies of the `conductor` commands, one file per command or group of commands: what each
//! reads, runs and prints. `main.rs` only parses the command line and calls them; the arguments
//! of a command are defined beside its body (clap's derive, so the help is the doc comments).
//!
//! - [`serve`]: `conductor serve` and `conductor grpc` (the server of [`crate::app`], with logging
//!   and traces set up);
//! - [`check_config`]: `conductor check-config`;
//! - [`plugins`]: `conductor plugins …`;
//! - [`inspect`] and [`reload`]: `conductor inspect …` and `conductor reload`, through a running
//!   conductor's admin endpoint.
//!
//! `conductor agent` is [`crate::agent::run`].

pub mod check_config;
pub mod inspect;
pub mod plugins;
pub mod reload;
pub mod serve;

use std::path::{Path, PathBuf};

use crate::admin_client::client::Endpoint;
use crate::config::{Config, LoadedConfig};

/// Where plugins named by a bare file name are found.
#[derive(clap::Args)]
pub struct PluginFolder {
    /// The folder of plugins named by file name (`file = "kube.wasm"`); wins over the
    /// configuration's `plugin_folder`.
    #[arg(long = "plugin-folder", env = "CONDUCTOR_PLUGIN_FOLDER", value_name = "DIR")]
    pub folder: Option<PathBuf>,
}

/// The admin endpoint of a running conductor.
#[derive(clap::Args)]
pub struct Admin {
    /// Its URL (`[admin] listen` of the running configuration; `https://` when it serves
    /// `[admin.tls]`).
    #[arg(
        long,
        env = "CONDUCTOR_ADMIN",
        default_value = "http://127.0.0.1:9090",
        global = true
    )]
    pub admin: String,
    /// A file holding the bearer token to send (`[admin] authorization = "sar"`); default: the
    /// pod's service account token, when there is one.
    #[arg(long, env = "CONDUCTOR_ADMIN_TOKEN_FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// The CA (PEM) an `https://` endpoint's certificate is signed by.
    #[arg(long, env = "CONDUCTOR_ADMIN_CA_FILE", global = true)]
    pub ca_file: Option<PathBuf>,
    /// The name an `https://` endpoint's certificate must carry, when not the URL's host: through
    /// `kubectl port-forward`, the Service name the certificate was made for.
    #[arg(long, env = "CONDUCTOR_ADMIN_TLS_SERVER_NAME", global = true)]
    pub tls_server_name: Option<String>,
}

impl Admin {
    fn endpoint(&self) -> Endpoint {
        Endpoint::new(&self.admin, self.token_file.clone(), self.ca_file.clone())
            .with_tls_server_name(self.tls_server_name.clone())
    }
}

/// The async runtime a command runs on.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Reads the configuration, and keeps compiled components where it says.
fn load(config: &Path, plugins: PluginFolder) -> anyhow::Result<LoadedConfig> {
    let loaded = Config::load(config, plugins.folder)?;
    use_compile_cache(&loaded);
    Ok(loaded)
}

/// Keeps compiled components where `loaded` says.
fn use_compile_cache(loaded: &LoadedConfig) {
    crate::plugins::wasm::set_compile_cache(loaded.compile_cache());
    crate::plugins::wasm::set_compile_cache_max_size(loaded.config.compile_cache_max_size.0);
}
