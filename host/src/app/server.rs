//! The server as one value: [`Server::build`] starts everything the configuration asks for, in
//! order — the ports first, then TLS and the auth layer, the embedded databases, the pools, the
//! plugins and the broker — and [`Server::run`] serves until shutdown, then stops it all in order.
//!
//! Everything started is owned by the `Server` (or, once it runs, by `run`'s frame), and each
//! part undoes itself when dropped: the listeners close, the embedded databases stop, the plugin
//! set stops its plugins' tasks, the background tasks are aborted and the server's cancellation
//! token is cancelled (the TLS reloaders, the file watch, the SourcePlugin controller). So a
//! failure halfway through `build`, a `Server` dropped without being run, or a panic leaves
//! nothing running; the orderly shutdown of `run` is what a normal stop goes through.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::backends::{self, Embedded};
use super::reload::Reloads;
use super::security::{self, Security};
use super::{signals, watch};
use crate::admin::{self, Inspector, ReloadRequest};
use crate::broker::{Broker, EventSink, Fanout};
use crate::config::LoadedConfig;
use crate::plugin_set::PluginSet;
use crate::plugins::{Backends, HostContext, Mode};
use crate::proto::SERVICE_NAME;
use crate::source_plugins::{Controller, Reconfigurer};
use crate::telemetry::{Metrics, Readiness};

/// A conductor built from its configuration, not serving yet.
///
/// Its fields drop in the order they are declared: the cancellation first, so that every task
/// started sees it before what it uses goes away; the plugins before the databases they use.
pub struct Server {
    /// Cancels `shutdown` when the server is dropped.
    _cancel_on_drop: DropGuard,
    /// Cancelled on SIGTERM or SIGINT (the caller's token), at the end of `run`, or on drop.
    shutdown: CancellationToken,
    /// The tasks started besides the listeners' (aborted when dropped).
    tasks: JoinSet<()>,
    loaded: LoadedConfig,
    /// The files as they were before the plugins were read (see [`watch::Baseline`]).
    baseline: watch::Baseline,
    listener: TcpListener,
    grpc_addr: SocketAddr,
    admin_listener: Option<TcpListener>,
    security: Security,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    streams_end: CancellationToken,
    broker: Arc<Broker>,
    /// Stops its plugins when dropped.
    plugins: PluginSet,
    host: HostContext,
    /// Each stops its server when dropped.
    embedded: Embedded,
}

impl Server {
    /// Starts what `loaded` asks for; `shutdown` is cancelled to stop the server. A port that
    /// is taken stops it before anything else has started.
    pub async fn build(loaded: LoadedConfig, shutdown: CancellationToken) -> anyhow::Result<Self> {
        let shutdown = shutdown.child_token();
        let cancel_on_drop = shutdown.clone().drop_guard();
        let mut tasks = JoinSet::new();
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
            tasks.spawn(crate::telemetry::idle_consumers::forget_idle_consumers(
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
        let security = security::start(&loaded, &kubernetes, &metrics, shutdown.clone()).await?;
        let embedded = backends::start_embedded(&loaded).await?;
        let readiness = Arc::new(Readiness::default());
        let fanout = Fanout::new(
            metrics.clone(),
            config.broker.subscriber_queue_size,
            config.broker.remembered_metadata,
            config.broker.undelivered_after.0,
        );
        let databases = backends::open_databases(
            &loaded,
            &backends::embedded_urls(&embedded),
            metrics.clone(),
            Arc::clone(&readiness),
            false,
        )?;
        let host = HostContext {
            sink: fanout.clone() as Arc<dyn EventSink>,
            backends: Backends { databases, kubernetes },
            metrics: metrics.clone(),
            mode: Mode::Serve,
        };
        let plugins = PluginSet::start(&loaded, &host).await?;
        let streams_end = CancellationToken::new();
        let broker = Arc::new(Broker::new(
            fanout,
            plugins.routing_table(),
            &config.broker,
            metrics.clone(),
            streams_end.clone(),
        ));
        Ok(Self {
            _cancel_on_drop: cancel_on_drop,
            shutdown,
            tasks,
            loaded,
            baseline,
            listener,
            grpc_addr,
            admin_listener,
            security,
            metrics,
            readiness,
            streams_end,
            broker,
            plugins,
            host,
            embedded,
        })
    }

    /// Serves until the shutdown token is cancelled: then reports NOT_SERVING (and `/readyz`
    /// 503), ends every subscription with OK, waits for the open calls up to
    /// `server.shutdown_grace_period`, stops the admin endpoint, the reload loop and the plugins,
    /// closes the databases and stops the embedded ones.
    pub async fn run(self) -> anyhow::Result<()> {
        let Self {
            _cancel_on_drop,
            shutdown,
            mut tasks,
            loaded,
            baseline,
            listener,
            grpc_addr,
            admin_listener,
            security,
            metrics,
            readiness,
            streams_end,
            broker,
            plugins,
            host,
            embedded,
        } = self;
        let config = &loaded.config;
        let (health, health_service) = tonic_health::server::health_reporter();
        set_health(&health, tonic_health::ServingStatus::Serving).await;
        let (reload_tx, reload_rx) = mpsc::channel::<ReloadRequest>(4);
        tasks.spawn(signals::reload_on_signal(reload_tx.clone()));
        let (watched_tx, watched_rx) = tokio::sync::watch::channel(loaded.watched_files());
        if config.reload.watch {
            tracing::info!(
                interval = %config.reload.watch_interval,
                files = watched_rx.borrow().len(),
                "watching the configuration and plugin files (reload.watch)"
            );
            tasks.spawn(watch::watch_files(
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
        // Not the shutdown token: the admin endpoint answers (`/readyz` 503) while the gRPC
        // server drains.
        let admin_stopped = CancellationToken::new();
        let _stop_admin_on_drop = admin_stopped.clone().drop_guard();
        let admin_task = admin_listener.map(|listener| {
            let state = admin::AdminState {
                metrics: metrics.clone(),
                readiness: Arc::clone(&readiness),
                reload: reload_tx,
                inspector: Arc::clone(&inspector),
            };
            tokio::spawn(admin::serve(listener, state, security.admin, admin_stopped.clone()))
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
        let controller = Controller::start(&loaded, &host, &readiness, shutdown.clone()).await;
        let reloads = tokio::spawn(
            Reloads {
                requests: reload_rx,
                reconfigurer: Reconfigurer::new(loaded.clone(), plugins),
                controller,
                broker: Arc::clone(&broker),
                host: host.clone(),
                inspector,
                watched: watched_tx,
            }
            .run(shutdown.clone()),
        );
        let parts = crate::grpc::ServerParts {
            broker: Arc::clone(&broker),
            metrics,
            health: health_service,
            auth: security.auth,
            tls: security.tls,
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
        if let Ok(reconfigurer) = reloads.await {
            reconfigurer.stop().await;
        }
        drop(broker);
        host.backends.databases.close().await;
        backends::stop_embedded(embedded).await;
        tracing::info!("stopped");
        result
    }
}

/// Binds `addr`; the error names the address and the key it comes from.
async fn bind(addr: SocketAddr, key: &str) -> anyhow::Result<TcpListener> {
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

    /// A configuration serving a memory source on `grpc` and the admin endpoint on `admin`,
    /// plaintext and open (nothing to reach outside the process); `events` is the memory
    /// source's `events` list.
    fn config(grpc: SocketAddr, admin: SocketAddr, events: &str) -> LoadedConfig {
        let text = format!(
            "[server]\nlisten = \"{grpc}\"\nplaintext = true\n\
             [auth]\nauthenticators = []\nauthorization = \"allow-all\"\n\
             [admin]\nlisten = \"{admin}\"\n\
             [plugins.m]\nkind = \"memory\"\nconfig = {{ data_types = [\"io.open-cluster-management.works.v1alpha1.manifestbundles\"], events = [{events}] }}\n\
             [routes]\nworks = \"m\"\n"
        );
        crate::config::Config::load_text(std::path::Path::new("/nonexistent/conductor.toml"), &text, None).unwrap()
    }

    /// An address nothing listens on now.
    fn free_port() -> SocketAddr {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    fn is_free(addr: SocketAddr) -> bool {
        std::net::TcpListener::bind(addr).is_ok()
    }

    #[tokio::test]
    async fn a_server_dropped_without_running_stops_what_it_started() {
        let any = "127.0.0.1:0".parse().unwrap();
        let caller = CancellationToken::new();
        let server = Server::build(config(any, any, ""), caller.clone()).await.unwrap();
        let grpc = server.grpc_addr;
        let admin = server.admin_listener.as_ref().unwrap().local_addr().unwrap();
        let tasks = server.shutdown.clone();
        assert!(!is_free(grpc) && !is_free(admin), "the ports are bound once built");
        assert!(!tasks.is_cancelled());
        drop(server);
        assert!(
            tasks.is_cancelled(),
            "its tasks (TLS reloaders, watches, controller) are told to stop"
        );
        assert!(is_free(grpc) && is_free(admin), "its listeners are closed");
        assert!(!caller.is_cancelled(), "the caller's token is the caller's");
    }

    #[tokio::test]
    async fn a_build_that_fails_after_binding_leaves_the_ports_free() {
        let (grpc, admin) = (free_port(), free_port());
        let failed = Server::build(
            config(grpc, admin, "\"/nonexistent/event.json\""),
            CancellationToken::new(),
        )
        .await;
        let error = failed
            .err()
            .expect("a memory source whose events file is missing does not start");
        assert!(error.to_string().contains("plugins.m.config.events[0]"), "{error}");
        assert!(is_free(grpc) && is_free(admin));
    }

    #[tokio::test]
    async fn a_port_taken_stops_the_build_naming_it() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let failed = Server::build(config(addr, free_port(), ""), CancellationToken::new()).await;
        let error = failed.err().expect("the port is taken");
        assert_eq!(error.to_string(), format!("cannot listen on {addr} (server.listen)"));
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
