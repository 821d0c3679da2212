//! The plugins a configuration runs, as a set: loaded and started together at startup, and on
//! reload compared with a new configuration — plugins added, removed or changed (file contents,
//! grants, config, limits) and routes — so that only what changed is replaced. A new
//! configuration that does not load whole is refused whole: the running plugins keep serving.
//! [`artifacts`] finds each plugin's file (on disk, or pulled from a registry into the cache).
//!
//! A set dropped without [`PluginSet::stop`] (an early return, a panic) still stops its plugins'
//! background tasks.

pub mod artifacts;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::admin::ReloadSummary;
use crate::config::{ConfigError, LoadedConfig, PluginKind};
use crate::errors::error_chain;
use crate::plugins::{HostContext, KvStore, PluginSource, Running};
use crate::routes::{RoutingTable, Source};
use crate::sources::MemorySource;

/// Every plugin's `kv` state by plugin name, for the life of the process (it survives reloads).
#[derive(Clone, Default)]
pub struct KvStores(Arc<parking_lot::Mutex<std::collections::HashMap<String, KvStore>>>);

impl KvStores {
    fn of(&self, plugin: &str) -> KvStore {
        self.0.lock().entry(plugin.to_owned()).or_default().clone()
    }
}

/// The running plugins and the routing table over them.
pub struct PluginSet {
    running: BTreeMap<String, Running>,
    routing_table: Arc<RoutingTable>,
    kv: KvStores,
    /// Replaced or removed by the last reload, to be stopped once the new routing table is in place.
    retired: Vec<Running>,
}

/// Loads one configured plugin (not started); errors name the plugin's key.
async fn load(loaded: &LoadedConfig, name: &str, host: &HostContext, kv: &KvStores) -> Result<Running, ConfigError> {
    let plugin = &loaded.config.plugins[name];
    let key = format!("plugins.{name}");
    match plugin.kind {
        PluginKind::Memory => {
            let sources = loaded.config.sources_of(name);
            let memory = MemorySource::new(
                name,
                &sources,
                &plugin.config,
                &|p| loaded.resolve(p),
                Arc::clone(&host.sink),
            )
            .map_err(|(k, reason)| loaded.error(format!("{key}.config.{k}"), reason))?;
            Ok(Running {
                config: plugin.clone(),
                digest: None,
                source: Arc::new(memory),
                plugin: None,
                artifact: None,
                loaded_at: SystemTime::now(),
            })
        }
        PluginKind::Component | PluginKind::Native => {
            let located = artifacts::locate(loaded, name).await?;
            let failed = |reason: String| loaded.error(&key, format!("{}: {reason}", located.path.display()));
            let file = located.read(plugin.kind).await.map_err(|e| failed(error_chain(&e)))?;
            let digest = located.digest(&file);
            let artifact = located.artifact();
            let source = PluginSource::load(name, plugin, file, kv.of(name), host)
                .await
                .map_err(|e| failed(error_chain(&e)))?;
            if let Some(a) = artifact.as_ref().filter(|a| a.from_cache) {
                tracing::info!(
                    plugin = name,
                    reference = %a.reference,
                    component = %a.component_digest,
                    "plugin {name}: loaded {} from the cache; the registry was not contacted",
                    a.reference
                );
            }
            Ok(Running {
                config: plugin.clone(),
                digest: Some(digest),
                source: Arc::clone(&source) as Arc<dyn Source>,
                plugin: Some(source),
                artifact,
                loaded_at: SystemTime::now(),
            })
        }
    }
}

/// The digest of the file at `path` (none if it cannot be read), hashed on a blocking thread.
async fn file_digest(path: std::path::PathBuf) -> Option<String> {
    tokio::task::spawn_blocking(move || crate::oci::sha256_file(&path).ok())
        .await
        .ok()
        .flatten()
}

async fn start_all(
    loaded: &LoadedConfig,
    plugins: &BTreeMap<String, Running>,
    names: &[String],
) -> Result<(), ConfigError> {
    for name in names {
        if let Some(plugin) = &plugins[name].plugin {
            plugin
                .start()
                .await
                .map_err(|e| loaded.error(format!("plugins.{name}"), error_chain(&e)))?;
        }
    }
    Ok(())
}

async fn stop_all<'a>(sources: impl IntoIterator<Item = &'a Running>) {
    for running in sources {
        if let Some(plugin) = &running.plugin {
            plugin.stop().await;
        }
    }
}

impl PluginSet {
    /// Loads and starts every plugin of `loaded`; on any failure, stops what it started.
    pub async fn start(loaded: &LoadedConfig, host: &HostContext) -> Result<Self, ConfigError> {
        let kv = KvStores::default();
        let mut running = BTreeMap::new();
        for name in loaded.config.plugins.keys() {
            match load(loaded, name, host, &kv).await {
                Ok(r) => {
                    running.insert(name.clone(), r);
                }
                Err(e) => {
                    stop_all(running.values()).await;
                    return Err(e);
                }
            }
        }
        let routing_table = match routing_table(loaded, &running) {
            Ok(r) => r,
            Err(e) => {
                stop_all(running.values()).await;
                return Err(e);
            }
        };
        let names: Vec<String> = running.keys().cloned().collect();
        if let Err(e) = start_all(loaded, &running, &names).await {
            stop_all(running.values()).await;
            return Err(e);
        }
        routed(&routing_table, &running);
        Ok(Self {
            running,
            routing_table: Arc::new(routing_table),
            kv,
            retired: Vec::new(),
        })
    }

    pub fn routing_table(&self) -> Arc<RoutingTable> {
        Arc::clone(&self.routing_table)
    }

    /// Applies `next` (a configuration already read and validated): loads what is new or changed,
    /// builds the new routing table, starts the new plugins, then stops what they replace. Nothing
    /// changes if any step fails.
    pub async fn reload(
        &mut self,
        current: &LoadedConfig,
        next: &LoadedConfig,
        host: &HostContext,
    ) -> Result<ReloadSummary, ConfigError> {
        let mut summary = ReloadSummary {
            restart_needed: restart_needed(current, next),
            ..ReloadSummary::default()
        };
        for (name, plugin) in &next.config.plugins {
            for (i, db) in plugin.databases.iter().enumerate() {
                if !current.config.databases.contains_key(db) {
                    return Err(next.error(
                        format!("plugins.{name}.databases[{i}]"),
                        format!("database {db:?} is not running; add databases with a restart"),
                    ));
                }
            }
        }
        let mut fresh: BTreeMap<String, Running> = BTreeMap::new();
        let mut plan = BTreeMap::new();
        for name in next.config.plugins.keys() {
            // A file may have changed under the same name; an artifact pinned by digest cannot.
            let unchanged = match self.running.get(name) {
                Some(old) if old.config == next.config.plugins[name] => match next.plugin_file(&old.config) {
                    None => true,
                    Some(path) => file_digest(path).await == old.digest,
                },
                _ => false,
            };
            if unchanged {
                plan.insert(name.clone(), self.running[name].clone());
                summary.kept.push(name.clone());
                continue;
            }
            match load(next, name, host, &self.kv).await {
                Ok(r) => {
                    plan.insert(name.clone(), r.clone());
                    fresh.insert(name.clone(), r);
                    if self.running.contains_key(name) {
                        summary.replaced.push(name.clone());
                    } else {
                        summary.added.push(name.clone());
                    }
                }
                Err(e) => {
                    stop_all(fresh.values()).await;
                    return Err(e);
                }
            }
        }
        let routing_table = match routing_table(next, &plan) {
            Ok(r) => r,
            Err(e) => {
                stop_all(fresh.values()).await;
                return Err(e);
            }
        };
        let names: Vec<String> = fresh.keys().cloned().collect();
        if let Err(e) = start_all(next, &fresh, &names).await {
            stop_all(fresh.values()).await;
            return Err(e);
        }
        routed(&routing_table, &plan);
        let old = std::mem::replace(&mut self.running, plan);
        self.routing_table = Arc::new(routing_table);
        summary.removed = old.keys().filter(|n| !self.running.contains_key(*n)).cloned().collect();
        // The new routing table must be in place before the old plugins go: the caller swaps it in
        // through `routing_table()`, then calls `stop_retired`; calls in flight on the old ones finish.
        self.retired = old
            .into_iter()
            .filter(|(n, _)| !summary.kept.contains(n))
            .map(|(_, r)| r)
            .collect();
        Ok(summary)
    }

    /// Stops the plugins the last reload replaced or removed (after the caller swapped the
    /// routing_table in).
    pub async fn stop_retired(&mut self) {
        let retired = std::mem::take(&mut self.retired);
        stop_all(retired.iter()).await;
    }

    /// Stops every plugin.
    pub async fn stop(&mut self) {
        self.stop_retired().await;
        let running = std::mem::take(&mut self.running);
        stop_all(running.values()).await;
    }

    /// Every running plugin, memory sources included, by name (for the inspector).
    pub fn entries(&self) -> BTreeMap<String, Running> {
        self.running.clone()
    }

    /// The running plugins (not the built-in memory sources), by name.
    pub fn plugins(&self) -> impl Iterator<Item = (&String, &Arc<PluginSource>)> {
        self.running
            .iter()
            .filter_map(|(n, r)| r.plugin.as_ref().map(|p| (n, p)))
    }
}

impl Drop for PluginSet {
    /// A backstop for a set not stopped with `stop`: its plugins' background tasks (timers,
    /// LISTENs, watches) are stopped on the runtime, as `stop` would have.
    fn drop(&mut self) {
        let left: Vec<Running> = std::mem::take(&mut self.running)
            .into_values()
            .chain(self.retired.drain(..))
            .filter(|r| r.plugin.is_some())
            .collect();
        if left.is_empty() {
            return;
        }
        // Without a runtime nothing of theirs runs any more.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { stop_all(left.iter()).await });
        }
    }
}

/// The routing table over `running` with `loaded`'s routes.
fn routing_table(loaded: &LoadedConfig, running: &BTreeMap<String, Running>) -> Result<RoutingTable, ConfigError> {
    let sources = running.values().map(|r| Arc::clone(&r.source)).collect();
    RoutingTable::with_routed_only(sources, &loaded.config.routes, &loaded.routed_only)
        .map_err(|e| loaded.error("routes", e.to_string()))
}

/// Tells each plugin where the sources of its events route with `routing_table`, which warns about
/// a plugin whose agents' status updates would go to another plugin.
fn routed(routing_table: &RoutingTable, running: &BTreeMap<String, Running>) {
    let owners = Arc::new(routing_table.owners());
    let foreign = routing_table.foreign_declared();
    for (name, r) in running {
        if let Some(plugin) = &r.plugin {
            let mine: Vec<_> = foreign.iter().filter(|f| f.plugin == *name).collect();
            plugin.routed(Arc::clone(&owners), &mine);
        }
    }
}

/// The settings that differ between two configurations but apply only on restart.
fn restart_needed(current: &LoadedConfig, next: &LoadedConfig) -> Vec<String> {
    let (a, b) = (&current.config, &next.config);
    let mut changed = Vec::new();
    let mut differs = |name: &str, same: bool| {
        if !same {
            changed.push(name.to_owned());
        }
    };
    differs("server", format!("{:?}", a.server) == format!("{:?}", b.server));
    differs("auth", a.auth == b.auth);
    differs("broker", format!("{:?}", a.broker) == format!("{:?}", b.broker));
    differs("admin", format!("{:?}", a.admin) == format!("{:?}", b.admin));
    differs("log", format!("{:?}", a.log) == format!("{:?}", b.log));
    differs(
        "databases",
        format!("{:?}", a.databases) == format!("{:?}", b.databases),
    );
    differs(
        "kubernetes",
        format!("{:?}", a.kubernetes) == format!("{:?}", b.kubernetes),
    );
    differs(
        "telemetry",
        format!("{:?}", a.telemetry) == format!("{:?}", b.telemetry),
    );
    differs("reload", a.reload == b.reload);
    differs(
        "dynamic.source_plugins",
        a.dynamic.source_plugins == b.dynamic.source_plugins && a.dynamic.replica == b.dynamic.replica,
    );
    changed
}
