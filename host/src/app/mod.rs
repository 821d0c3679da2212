//! Wiring: configuration → backends → plugins → registry → broker → gRPC server and admin
//! endpoint; reloads that re-read `conductor.toml`; and the orderly shutdown on SIGTERM or SIGINT.

pub mod artifacts;
pub mod backends;
pub mod check;
pub mod distribute;
pub mod plugin_set;
mod reconfigure;
pub mod security;
mod source_plugins;
mod watch;

use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, Inspector, ReloadRequest, ReloadTrigger};
use crate::broker::{Broker, EventSink, Fanout};
use crate::config::LoadedConfig;
use crate::plugins::{Backends, HostContext, Mode};
use crate::proto::SERVICE_NAME;
use crate::telemetry::{Metrics, Readiness};
pub use check::describe;
pub use plugin_set::PluginSet;

/// Runs conductor until SIGTERM or SIGINT.
pub async fn run(loaded: LoadedConfig) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    serve(loaded, shutdown).await
}

/// Runs conductor until `shutdown` is cancelled: then stops accepting, ends every subscription
/// with OK, stops the plugins and returns once the open calls have finished.
pub async fn serve(loaded: LoadedConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let config = &loaded.config;
    // Before the plugin files are read: one replaced while they load is then seen as a change.
    let baseline = watch::Baseline::look(loaded.watched_files());
    // Every agent connection is a file descriptor: before any is opened.
    crate::fd_limit::raise_and_report(config.server.max_connections);
    let metrics = if config.admin.consumer_label {
        Metrics::new()
    } else {
        Metrics::new().without_consumer_label()
    };
    if config.admin.consumer_label {
        tokio::spawn(crate::telemetry::idle_consumers::forget_idle_consumers(
            metrics.clone(),
            config.admin.forget_idle_consumers_after.0,
            shutdown.clone(),
        ));
    }
    // The ports first: a port that is taken stops conductor before anything has started (no
    // database, LISTEN, watch or plugin to undo).
    let listener = bind(config.server.listen, "server.listen").await?;
    let grpc_addr = listener.local_addr()?;
    let admin_listener = match config.admin.enabled {
        true => {
            let listener = bind(config.admin.listen, "admin.listen").await?;
            tracing::info!(addr = %listener.local_addr()?, "admin endpoint listening (/metrics, /healthz, /readyz, /reload, /inspect/…)");
            Some(listener)
        }
        false => None,
    };
    let kubernetes = backends::kubernetes(&loaded);
    let security::Security {
        tls,
        auth,
        admin: admin_access,
    } = security::start(&loaded, &kubernetes, &metrics, shutdown.clone()).await?;
    let embedded = backends::start_embedded(&loaded).await?;
    let readiness = Arc::new(Readiness::default());
    let fanout = Fanout::new(
        metrics.clone(),
        config.broker.subscriber_queue_size,
        config.broker.remembered_metadata,
    );
    let host = match backends::open_databases(
        &loaded,
        &backends::embedded_urls(&embedded),
        metrics.clone(),
        Arc::clone(&readiness),
        false,
    ) {
        Ok(databases) => HostContext {
            sink: fanout.clone() as Arc<dyn EventSink>,
            backends: Backends { databases, kubernetes },
            metrics: metrics.clone(),
            mode: Mode::Serve,
        },
        Err(e) => {
            backends::stop_embedded(embedded).await;
            return Err(e.into());
        }
    };
    let plugins = match PluginSet::start(&loaded, &host).await {
        Ok(p) => p,
        Err(e) => {
            host.backends.databases.close().await;
            backends::stop_embedded(embedded).await;
            return Err(e.into());
        }
    };
    let streams_end = CancellationToken::new();
    let broker = Arc::new(Broker::new(
        fanout,
        plugins.registry(),
        &config.broker,
        metrics.clone(),
        streams_end.clone(),
    ));

    // From here on nothing returns early: what started (plugins, databases) is stopped below.
    let (health, health_service) = tonic_health::server::health_reporter();
    set_health(&health, tonic_health::ServingStatus::Serving).await;
    let (reload_tx, mut reload_rx) = mpsc::channel::<ReloadRequest>(4);
    tokio::spawn(reload_on_signal(reload_tx.clone()));
    let (watched_tx, watched_rx) = tokio::sync::watch::channel(loaded.watched_files());
    if config.reload.watch {
        tracing::info!(
            interval = %config.reload.watch_interval,
            files = watched_rx.borrow().len(),
            "watching the configuration and plugin files (reload.watch)"
        );
        tokio::spawn(watch::watch_files(
            watched_rx,
            baseline,
            config.reload.watch_interval.0,
            config.reload.debounce.0,
            reload_tx.clone(),
            shutdown.clone(),
        ));
    }
    let inspector = Arc::new(Inspector::new(
        Arc::clone(&broker),
        loaded.path.clone(),
        plugins.entries(),
    ));
    let admin_stopped = CancellationToken::new();
    let admin_task = admin_listener.map(|listener| {
        let state = admin::AdminState {
            metrics: metrics.clone(),
            readiness: Arc::clone(&readiness),
            reload: reload_tx,
            inspector: Arc::clone(&inspector),
        };
        tokio::spawn(admin::serve(listener, state, admin_access, admin_stopped.clone()))
    });

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
    let dynamic = source_plugins::start(&loaded, &host, &readiness, shutdown.clone()).await;
    let reloads = {
        let broker = Arc::clone(&broker);
        let host = host.clone();
        let stopped = shutdown.clone();
        let mut config = reconfigure::Reconfigurer::new(loaded.clone(), plugins);
        let mut dynamic = dynamic;
        tokio::spawn(async move {
            loop {
                let (trigger, outcome, reply) = tokio::select! {
                    _ = stopped.cancelled() => break,
                    r = reload_rx.recv() => match r {
                        Some(r) => (r.trigger, config.reload_file(r.trigger, &broker, &host).await, r.reply),
                        None => break,
                    },
                    Some(resources) = source_plugins::changed(&mut dynamic) => {
                        (ReloadTrigger::SourcePlugins, config.resources_changed(resources, &broker, &host).await, None)
                    }
                };
                let applied = outcome.as_ref().map(|s| !s.restart_needed.is_empty()).map_err(|_| ());
                host.metrics.config.reloaded(trigger.as_str(), applied);
                inspector.reloaded(&outcome, config.plugins().entries());
                source_plugins::report(&dynamic, &config);
                watched_tx.send_if_modified(|files| {
                    let now = config.applied().watched_files();
                    let changed = *files != now;
                    *files = now;
                    changed
                });
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
            source_plugins::stop(dynamic).await;
            config
        })
    };
    let parts = crate::grpc::ServerParts {
        broker: Arc::clone(&broker),
        metrics,
        health: health_service,
        auth,
        tls,
    };
    let result = serve_until_drained(
        crate::grpc::serve(listener, &config.server, parts, stop),
        shutdown.clone(),
        config.server.shutdown_grace_period.0,
    )
    .await;
    admin_stopped.cancel();
    if let Some(task) = admin_task {
        let _ = task.await;
    }
    shutdown.cancel();
    // The plugins (and their database connections) go before the databases they use.
    if let Ok(config) = reloads.await {
        config.stop().await;
    }
    drop(broker);
    host.backends.databases.close().await;
    backends::stop_embedded(embedded).await;
    tracing::info!("stopped");
    result
}

/// Binds `addr`; the error names the address and the key it comes from.
async fn bind(addr: std::net::SocketAddr, key: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({key})"))
}

/// Runs `server` until it has drained, or until `grace` after `shutdown`: a client that never
/// closes its connection (unreachable, or not reading) does not keep the process alive.
async fn serve_until_drained(
    server: impl Future<Output = anyhow::Result<()>>,
    shutdown: CancellationToken,
    grace: std::time::Duration,
) -> anyhow::Result<()> {
    tokio::select! {
        result = server => result,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        } => {
            tracing::warn!(grace = ?grace, "connections still open after server.shutdown_grace_period: dropping them");
            Ok(())
        }
    }
}

/// Sets the gRPC health of the server as a whole and of the CloudEvent service.
async fn set_health(health: &tonic_health::server::HealthReporter, status: tonic_health::ServingStatus) {
    for service in ["", SERVICE_NAME] {
        health.set_service_status(service, status).await;
    }
}

/// SIGHUP asks for a reload.
async fn reload_on_signal(reload: mpsc::Sender<ReloadRequest>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP; reload through the admin endpoint");
        return;
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP received");
        if reload
            .send(ReloadRequest {
                reply: None,
                trigger: ReloadTrigger::Signal,
            })
            .await
            .is_err()
        {
            return;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_server_that_never_drains_is_dropped_after_the_grace_period() {
        let shutdown = CancellationToken::new();
        let stuck = std::future::pending::<anyhow::Result<()>>();
        let run = tokio::spawn(serve_until_drained(stuck, shutdown.clone(), Duration::from_secs(20)));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!run.is_finished(), "no shutdown asked for: it serves on");
        shutdown.cancel();
        tokio::time::sleep(Duration::from_secs(19)).await;
        assert!(!run.is_finished(), "within the grace period");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(run.await.unwrap().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_drained_server_returns_its_result_at_once() {
        let result = serve_until_drained(
            async { anyhow::bail!("bind failed") },
            CancellationToken::new(),
            Duration::from_secs(20),
        )
        .await;
        assert_eq!(result.unwrap_err().to_string(), "bind failed");
    }
}
