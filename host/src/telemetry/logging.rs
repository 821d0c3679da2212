//! `tracing` output, human or JSON, filtered by the configured level or `RUST_LOG`.

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. `RUST_LOG`, when set, overrides `log.level`.
pub fn init(config: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    let result = match config.format {
        LogFormat::Human => registry.with(fmt::layer().with_writer(std::io::stderr)).try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_writer(std::io::stderr))
            .try_init(),
    };
    // A second init (tests) keeps the first subscriber.
    let _ = result;
}
