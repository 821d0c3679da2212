//! Wiring: configuration → sources → registry → broker → gRPC server and admin endpoint, and the
//! orderly shutdown on SIGTERM or SIGINT.

use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::broker::{Broker, EventSink, Fanout};
use crate::config::{ConfigError, LoadedConfig, PluginConfig, PluginKind};
use crate::database::{Databases, EmbeddedPostgres};
use crate::kube::Kubernetes;
use crate::plugins::{Backends, KvStore, PluginSource};
use crate::proto::SERVICE_NAME;
use crate::registry::{Registry, Source};
use crate::sources::MemorySource;
use crate::telemetry::{Metrics, admin};

/// Every plugin's `kv` state by plugin name, for the life of the process (it survives reloads).
#[derive(Clone, Default)]
pub struct KvStores(Arc<parking_lot::Mutex<std::collections::HashMap<String, KvStore>>>);

impl KvStores {
    fn of(&self, plugin: &str) -> KvStore {
        Arc::clone(self.0.lock().entry(plugin.to_owned()).or_default())
    }
}

/// Loads one configured plugin; errors name the plugin's key.
async fn load_source(
    loaded: &LoadedConfig,
    name: &str,
    plugin: &PluginConfig,
    sink: &Arc<dyn EventSink>,
    kv: &KvStores,
    backends: &Backends,
) -> Result<Arc<dyn Source>, ConfigError> {
    let config = &loaded.config;
    match plugin.kind {
        PluginKind::Memory => {
            let sources = config.sources_of(name);
            let memory = MemorySource::new(name, &sources, &plugin.config, Arc::clone(sink))
                .map_err(|(key, reason)| loaded.error(format!("plugins.{name}.config.{key}"), reason))?;
            Ok(Arc::new(memory))
        }
        PluginKind::Component | PluginKind::Native => {
            let file = loaded.plugin_file(plugin).expect("validated: plugins have files");
            let source = PluginSource::load(name, plugin, &file, Arc::clone(sink), kv.of(name), backends.clone())
                .await
                .map_err(|e| loaded.error(format!("plugins.{name}"), format!("{}: {e}", file.display())))?;
            Ok(source)
        }
    }
}

/// Loads every configured plugin and builds the registry over them.
pub async fn build_registry(
    loaded: &LoadedConfig,
    sink: Arc<dyn EventSink>,
    kv: &KvStores,
    backends: &Backends,
) -> Result<Registry, ConfigError> {
    let mut sources = Vec::new();
    for (name, plugin) in &loaded.config.plugins {
        sources.push(load_source(loaded, name, plugin, &sink, kv, backends).await?);
    }
    Registry::new(sources, &loaded.config.routes).map_err(|e| loaded.error("routes", e.to_string()))
}

/// Reloads the plugin files: every component or native plugin that loads again replaces the
/// running one; one that fails keeps the running one and says why. Subscriptions stay up.
pub async fn reload(loaded: &LoadedConfig, broker: &Broker, kv: &KvStores, backends: &Backends) {
    let sink: Arc<dyn EventSink> = broker.fanout().clone();
    let current = broker.registry();
    let mut sources = Vec::new();
    let mut kept = 0;
    for (name, plugin) in &loaded.config.plugins {
        let running = current.plugins().iter().find(|p| p.name() == name).cloned();
        let next = match (plugin.kind, running) {
            (PluginKind::Memory, Some(running)) => running,
            (_, running) => match load_source(loaded, name, plugin, &sink, kv, backends).await {
                Ok(fresh) => fresh,
                Err(e) => match running {
                    Some(running) => {
                        tracing::error!(plugin = %name, error = %e, "reload failed; the running plugin stays");
                        kept += 1;
                        running
                    }
                    None => {
                        tracing::error!(plugin = %name, error = %e, "reload failed");
                        continue;
                    }
                },
            },
        };
        sources.push(next);
    }
    match Registry::new(sources, &loaded.config.routes) {
        Ok(registry) => {
            broker.set_registry(Arc::new(registry));
            if kept == 0 {
                tracing::info!("plugins reloaded");
            } else {
                tracing::warn!(kept, "plugins reloaded, but some kept their running version");
            }
        }
        Err(e) => tracing::error!(error = %e, "reload failed; the running plugins stay"),
    }
}

/// A summary of what a configuration would run, for `check-config` and `plugins list`.
pub async fn describe(loaded: &LoadedConfig) -> Result<String, ConfigError> {
    let embedded = start_embedded_databases(loaded).await?;
    let databases = open_databases(loaded, &embedded, Metrics::new(), Arc::default());
    let registry = match databases {
        Ok(databases) => {
            let backends = Backends {
                databases,
                kubernetes: kubernetes(loaded),
            };
            let sink = Fanout::new(Metrics::new(), 1, 0);
            build_registry(loaded, sink, &KvStores::default(), &backends).await
        }
        Err(e) => Err(e),
    };
    stop_embedded_databases(embedded).await;
    let registry = registry?;
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
    for s in registry.plugins() {
        let types: Vec<String> = s.data_types().iter().map(ToString::to_string).collect();
        out += &format!("  plugin {}: data types {:?}\n", s.name(), types);
    }
    for (source, plugin) in registry.routes() {
        out += &format!("  route {source} -> {plugin}\n");
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
    let embedded = start_embedded_databases(&loaded).await?;
    let metrics = Metrics::new();
    let readiness = Arc::new(admin::Readiness::default());
    let started = async {
        let backends = Backends {
            databases: open_databases(&loaded, &embedded, metrics.clone(), Arc::clone(&readiness))?,
            kubernetes: kubernetes(&loaded),
        };
        let fanout = Fanout::new(
            metrics.clone(),
            config.broker.subscriber_queue_size,
            config.broker.remembered_metadata,
        );
        let kv = KvStores::default();
        let registry = Arc::new(build_registry(&loaded, fanout.clone(), &kv, &backends).await?);
        Ok::<_, ConfigError>((backends, fanout, kv, registry))
    }
    .await;
    let (backends, fanout, kv, registry) = match started {
        Ok(started) => started,
        Err(e) => {
            stop_embedded_databases(embedded).await;
            return Err(e.into());
        }
    };
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
    let (reload_tx, mut reload_rx) = tokio::sync::mpsc::channel::<()>(4);
    tokio::spawn(reload_on_signal(reload_tx.clone()));
    let admin_stopped = CancellationToken::new();
    let admin_task = if config.admin.enabled {
        let server = admin::serve(
            config.admin.listen,
            metrics.clone(),
            Arc::clone(&readiness),
            reload_tx,
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
    let reloads = {
        let broker = Arc::clone(&broker);
        let loaded = loaded.clone();
        tokio::spawn(async move {
            while reload_rx.recv().await.is_some() {
                tracing::info!("reloading plugins");
                reload(&loaded, &broker, &kv, &backends).await;
            }
        })
    };
    let result = crate::grpc::serve(
        listener,
        &config.server,
        Arc::clone(&broker),
        metrics,
        health_service,
        stop,
    )
    .await;
    reloads.abort();
    admin_stopped.cancel();
    if let Some(task) = admin_task {
        let _ = task.await;
    }
    // The plugins (and their database connections) go before the databases they use.
    drop(broker);
    stop_embedded_databases(embedded).await;
    tracing::info!("stopped");
    result
}

/// Sets the gRPC health of the server as a whole and of the CloudEvent service.
async fn set_health(health: &tonic_health::server::HealthReporter, status: tonic_health::ServingStatus) {
    for service in ["", SERVICE_NAME] {
        health.set_service_status(service, status).await;
    }
}

/// Starts every `embedded` database (initialising its folder and loading Maestro's schema when
/// new); a failure names the database's key.
async fn start_embedded_databases(loaded: &LoadedConfig) -> Result<Vec<(String, EmbeddedPostgres)>, ConfigError> {
    let mut started = Vec::new();
    for (name, db) in &loaded.config.databases {
        let Some(embedded) = &db.embedded else { continue };
        let mut embedded = embedded.clone();
        embedded.data_dir = loaded.resolve(&embedded.data_dir);
        let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&embedded))
            .await
            .map_err(|e| loaded.error(format!("databases.{name}.embedded"), e.to_string()))?
            .map_err(|e| loaded.error(format!("databases.{name}.embedded"), e.to_string()))?;
        tracing::info!(database = %name, url = %pg.url(), data_dir = %pg.data_dir().display(), "embedded database ready");
        started.push((name.clone(), pg));
    }
    Ok(started)
}

/// The Kubernetes API server of `[kubernetes]` (a client made on first use).
fn kubernetes(loaded: &LoadedConfig) -> Arc<Kubernetes> {
    let kubeconfig = loaded
        .config
        .kubernetes
        .kubeconfig
        .as_deref()
        .map(|p| loaded.resolve(p));
    Arc::new(Kubernetes::new(kubeconfig))
}

/// Pools for every configured database (connected on first use).
fn open_databases(
    loaded: &LoadedConfig,
    embedded: &[(String, EmbeddedPostgres)],
    metrics: Metrics,
    readiness: Arc<admin::Readiness>,
) -> Result<Arc<Databases>, ConfigError> {
    let urls = embedded.iter().map(|(name, pg)| (name.clone(), pg.url())).collect();
    Databases::new(
        &loaded.config.databases,
        &urls,
        |p| loaded.resolve(p),
        metrics,
        readiness,
    )
    .map_err(|e| loaded.error(e.key, e.reason))
}

async fn stop_embedded_databases(databases: Vec<(String, EmbeddedPostgres)>) {
    for (_, mut pg) in databases {
        let stopped = tokio::task::spawn_blocking(move || pg.stop()).await;
        if let Ok(Err(e)) = stopped {
            tracing::warn!(error = %e, "embedded database did not stop cleanly");
        }
    }
}

/// SIGHUP asks for a plugin reload.
async fn reload_on_signal(reload: tokio::sync::mpsc::Sender<()>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP; reload through the admin endpoint");
        return;
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP received");
        if reload.send(()).await.is_err() {
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
