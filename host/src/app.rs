//! Wiring: configuration → sources → registry → broker → gRPC server and admin endpoint, and the
//! orderly shutdown on SIGTERM or SIGINT.

use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::broker::{Broker, EventSink, Fanout};
use crate::config::{ConfigError, LoadedConfig, PluginKind};
use crate::proto::SERVICE_NAME;
use crate::registry::{Registry, Source};
use crate::sources::MemorySource;
use crate::telemetry::{Metrics, admin};

/// Builds every configured plugin; a plugin's bad configuration names its key.
pub fn build_sources(loaded: &LoadedConfig, sink: Arc<dyn EventSink>) -> Result<Vec<Arc<dyn Source>>, ConfigError> {
    let config = &loaded.config;
    config
        .plugins
        .iter()
        .map(|(name, plugin)| {
            let sources = config.sources_of(name);
            let built: Arc<dyn Source> = match plugin.kind {
                PluginKind::Memory => Arc::new(
                    MemorySource::new(name, &sources, &plugin.config, Arc::clone(&sink))
                        .map_err(|(key, reason)| loaded.error(format!("plugins.{name}.config.{key}"), reason))?,
                ),
            };
            Ok(built)
        })
        .collect()
}

/// A one-paragraph summary of what a configuration would run, for `check-config`.
pub fn describe(loaded: &LoadedConfig) -> Result<String, ConfigError> {
    let sources = build_sources(loaded, Fanout::new(Metrics::new(), 1, 0))?;
    let c = &loaded.config;
    let mut out = format!(
        "{}: ok\n  gRPC: {} ({}), receive limit {} bytes\n  heartbeat: {}\n",
        loaded.path.display(),
        c.server.listen,
        if c.server.plaintext { "plaintext" } else { "TLS" },
        c.server.max_receive_message_size.0,
        c.broker
            .heartbeat()
            .map_or("disabled".to_owned(), |d| format!("every {d:?}")),
    );
    for s in &sources {
        let types: Vec<String> = s.data_types().iter().map(ToString::to_string).collect();
        out += &format!(
            "  plugin {}: sources {:?}, data types {:?}\n",
            s.name(),
            c.sources_of(s.name()),
            types
        );
    }
    Ok(out)
}

/// Runs conductor until SIGTERM or SIGINT.
pub async fn run(loaded: LoadedConfig) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    serve(loaded, shutdown).await
}

/// Runs conductor until `shutdown` is cancelled: then stops accepting, ends every subscription
/// with OK, and returns once the open calls have finished.
pub async fn serve(loaded: LoadedConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let config = &loaded.config;
    let metrics = Metrics::new();
    let fanout = Fanout::new(
        metrics.clone(),
        config.broker.subscriber_queue_size,
        config.broker.remembered_metadata,
    );
    let sources = build_sources(&loaded, fanout.clone())?;
    let registry = Arc::new(Registry::new(sources, &config.routes));
    let streams_end = CancellationToken::new();
    let broker = Arc::new(Broker::new(
        fanout,
        registry,
        &config.broker,
        metrics.clone(),
        streams_end.clone(),
    ));

    let listener = TcpListener::bind(config.server.listen)
        .await
        .with_context(|| format!("cannot listen on {} (server.listen)", config.server.listen))?;
    let grpc_addr = listener.local_addr()?;
    let (health, health_service) = tonic_health::server::health_reporter();
    set_health(&health, tonic_health::ServingStatus::Serving).await;
    let readiness = Arc::new(admin::Readiness::default());
    let admin_stopped = CancellationToken::new();
    let admin_task = if config.admin.enabled {
        let server = admin::serve(
            config.admin.listen,
            metrics.clone(),
            Arc::clone(&readiness),
            admin_stopped.clone(),
        )
        .await
        .with_context(|| format!("cannot listen on {} (admin.listen)", config.admin.listen))?;
        Some(tokio::spawn(server))
    } else {
        None
    };

    // The listener is bound: connections queue until the server polls it just below.
    readiness.set_serving(true);
    tracing::info!(addr = %grpc_addr, plaintext = config.server.plaintext, "serving gRPC");
    let stop = {
        let shutdown = shutdown.clone();
        let readiness = Arc::clone(&readiness);
        async move {
            shutdown.cancelled().await;
            tracing::info!("shutting down: no new calls; ending subscriptions");
            readiness.set_serving(false);
            set_health(&health, tonic_health::ServingStatus::NotServing).await;
            streams_end.cancel();
        }
    };
    let result = crate::grpc::serve(listener, &config.server, broker, metrics, health_service, stop).await;
    admin_stopped.cancel();
    if let Some(task) = admin_task {
        let _ = task.await;
    }
    tracing::info!("stopped");
    result
}

/// Sets the gRPC health of the server as a whole and of the CloudEvent service.
async fn set_health(health: &tonic_health::server::HealthReporter, status: tonic_health::ServingStatus) {
    for service in ["", SERVICE_NAME] {
        health.set_service_status(service, status).await;
    }
}

async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
    shutdown.cancel();
}
