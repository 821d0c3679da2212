//! The server: configuration → backends → plugins → registry → broker → gRPC server and admin
//! endpoint, built as one [`Server`] and run until SIGTERM or SIGINT; reloads that re-read
//! `conductor.toml`; and the orderly shutdown.
//!
//! - [`server`]: [`Server::build`] and [`Server::run`], and what undoes each part when dropped;
//! - [`backends`]: the databases (embedded ones started first) and the Kubernetes API server;
//! - [`security`]: TLS and the auth layers, set up before anything else starts;
//! - `reload`: the reload loop; `watch`: reloads when the configuration's files change;
//!   `signals`: SIGTERM, SIGINT and SIGHUP.

pub mod backends;
mod reload;
pub mod security;
pub mod server;
mod signals;
mod watch;

use tokio_util::sync::CancellationToken;

use crate::config::LoadedConfig;
pub use server::Server;

/// Runs conductor until SIGTERM or SIGINT.
pub async fn run(loaded: LoadedConfig) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    tokio::spawn(signals::stop_on_signal(shutdown.clone()));
    Server::build(loaded, shutdown).await?.run().await
}
