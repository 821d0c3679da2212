//! `tracing` output, human or JSON, filtered by the configured level or `RUST_LOG`; and, when
//! traces are on, the spans of [`super::traces::TARGET`] handed to OpenTelemetry.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::{EnvFilter, Layer, fmt, prelude::*};

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. `RUST_LOG`, when set, overrides `log.level`. With `tracer`,
/// conductor's trace spans go to it (and only those: the log filter does not apply to them).
pub fn init(config: &LogConfig, tracer: Option<opentelemetry_sdk::trace::SdkTracer>) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = match config.format {
        LogFormat::Human => fmt::layer().with_writer(std::io::stderr).boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let traces = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(Targets::new().with_target(super::traces::TARGET, LevelFilter::TRACE))
    });
    // A second init (tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(traces)
        .try_init();
}
