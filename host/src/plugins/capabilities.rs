//! The host capabilities of one plugin: `emit`, `log`, `timer`, `kv`, `config`, `pg` (whose
//! per-instance transactions live in [`super::pg::PgSession`]). Every call checks
//! the plugin's grants (components cannot even link an ungranted import; native libraries are
//! refused at load when they declare one, and this check stops any call that slips through).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use conductor_plugin_sdk::{ApiResource, Capability, CloudEvent, HostEvent, Level, PgError};
use parking_lot::Mutex;
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::broker::EventSink;
use crate::database::Databases;
use crate::kube::Kubernetes;

/// A plugin's `kv` state. It belongs to the plugin's name, not to one loaded copy, so it
/// survives reloads.
pub type KvStore = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// What the host does for one plugin, shared by all its instances.
pub struct Capabilities {
    plugin: String,
    grants: BTreeSet<Capability>,
    sink: Arc<dyn EventSink>,
    kv: KvStore,
    config_json: String,
    timers: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// Where fired timers go: the plugin's event loop calls `on_event` with them.
    events: mpsc::UnboundedSender<HostEvent>,
    runtime: tokio::runtime::Handle,
    backends: Backends,
    /// The databases this plugin may use (`databases` in its table).
    allowed_databases: BTreeSet<String>,
    /// LISTEN registrations by (database, channel), and Kubernetes watches by (resource,
    /// namespace); cancelled when the plugin goes.
    listeners: Registrations<(String, String)>,
    watches: Registrations<(ApiResource, Option<String>)>,
}

/// Background work a plugin started (a LISTEN, a watch), started once per key however often the
/// plugin asks, and stopped with the plugin.
struct Registrations<K>(tokio::sync::Mutex<HashMap<K, CancellationToken>>);

impl<K> Default for Registrations<K> {
    fn default() -> Self {
        Self(tokio::sync::Mutex::default())
    }
}

impl<K: Eq + std::hash::Hash> Registrations<K> {
    /// Runs `start` unless `key` is registered already; registers what it returns.
    async fn once<E>(&self, key: K, start: impl Future<Output = Result<CancellationToken, E>>) -> Result<bool, E> {
        let mut running = self.0.lock().await;
        if running.contains_key(&key) {
            return Ok(false);
        }
        running.insert(key, start.await?);
        Ok(true)
    }

    /// Stops everything registered (if no registration is under way).
    fn stop(&self) {
        if let Ok(mut running) = self.0.try_lock() {
            for (_, stop) in running.drain() {
                stop.cancel();
            }
        }
    }
}

impl<K> Drop for Registrations<K> {
    fn drop(&mut self) {
        for stop in self.0.get_mut().values() {
            stop.cancel();
        }
    }
}

/// What a plugin was granted in `conductor.toml`: capabilities, and the databases `pg` reaches.
pub struct Grants {
    pub capabilities: BTreeSet<Capability>,
    pub databases: BTreeSet<String>,
}

/// What the host reaches for its plugins besides the broker.
#[derive(Clone)]
pub struct Backends {
    pub databases: Arc<Databases>,
    pub kubernetes: Arc<Kubernetes>,
}

impl Backends {
    /// No databases, and a Kubernetes client inferred on first use.
    pub fn none() -> Self {
        Self {
            databases: Databases::none(),
            kubernetes: Arc::new(Kubernetes::new(None)),
        }
    }
}

impl Capabilities {
    pub fn new(
        plugin: &str,
        grants: Grants,
        sink: Arc<dyn EventSink>,
        config_json: String,
        events: mpsc::UnboundedSender<HostEvent>,
        kv: KvStore,
        backends: Backends,
    ) -> Arc<Self> {
        Arc::new(Self {
            plugin: plugin.to_owned(),
            grants: grants.capabilities,
            sink,
            kv,
            config_json,
            timers: Mutex::default(),
            events,
            runtime: tokio::runtime::Handle::current(),
            backends,
            allowed_databases: grants.databases,
            listeners: Registrations::default(),
            watches: Registrations::default(),
        })
    }

    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    pub fn granted(&self, capability: Capability) -> bool {
        self.grants.contains(&capability)
    }

    fn check(&self, capability: Capability) -> Result<(), String> {
        if self.granted(capability) {
            Ok(())
        } else {
            tracing::warn!(plugin = %self.plugin, capability = capability.name(), "call to an ungranted capability refused");
            Err(format!(
                "capability {:?} is not granted to plugin {:?}",
                capability.name(),
                self.plugin
            ))
        }
    }

    pub fn emit(&self, event: &CloudEvent) -> Result<u32, String> {
        self.check(Capability::Emit)?;
        self.sink
            .emit(event)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            .map_err(|e| e.to_string())
    }

    pub fn log(&self, level: Level, message: &str) {
        if self.check(Capability::Log).is_err() {
            return;
        }
        let plugin = self.plugin.as_str();
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }

    pub fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) {
        if self.check(Capability::Timer).is_err() {
            return;
        }
        let events = self.events.clone();
        let event_name = name.to_owned();
        let period = Duration::from_millis(after_ms.max(1));
        let task = self.runtime.spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                if events.send(HostEvent::Timer(event_name.clone())).is_err() || !repeat {
                    break;
                }
            }
        });
        if let Some(old) = self.timers.lock().insert(name.to_owned(), task) {
            old.abort();
        }
    }

    pub fn cancel_timer(&self, name: &str) {
        if self.check(Capability::Timer).is_ok()
            && let Some(task) = self.timers.lock().remove(name)
        {
            task.abort();
        }
    }

    pub fn kv_get(&self, key: &str) -> Option<Vec<u8>> {
        self.check(Capability::Kv).ok()?;
        self.kv.lock().get(key).cloned()
    }

    pub fn kv_set(&self, key: &str, value: &[u8]) {
        if self.check(Capability::Kv).is_ok() {
            self.kv.lock().insert(key.to_owned(), value.to_vec());
        }
    }

    pub fn kv_delete(&self, key: &str) -> bool {
        self.check(Capability::Kv).is_ok() && self.kv.lock().remove(key).is_some()
    }

    pub fn config(&self) -> String {
        if self.check(Capability::Config).is_err() {
            return "{}".to_owned();
        }
        self.config_json.clone()
    }

    /// The pool of `database`, if the plugin may use it.
    pub fn pg_pool(&self, database: &str) -> Result<&PgPool, PgError> {
        self.check(Capability::Pg).map_err(PgError::new)?;
        if !self.allowed_databases.contains(database) {
            return Err(PgError::new(format!(
                "plugin {:?} may not use database {database:?} (its databases: {:?})",
                self.plugin, self.allowed_databases
            )));
        }
        self.backends
            .databases
            .pool(database)
            .ok_or_else(|| PgError::new(format!("no database {database:?}")))
    }

    /// LISTENs on `channel` for the plugin, once however often it asks.
    pub async fn pg_listen(&self, database: &str, channel: &str) -> Result<(), PgError> {
        self.pg_pool(database)?;
        let key = (database.to_owned(), channel.to_owned());
        let start = self
            .backends
            .databases
            .listen(&self.plugin, database, channel, self.events.clone());
        if self.listeners.once(key, start).await.map_err(PgError::new)? {
            tracing::info!(plugin = %self.plugin, database, channel, "listening");
        }
        Ok(())
    }

    /// Watches `resource` on the Kubernetes API server for the plugin, once however often it
    /// asks.
    pub async fn kube_watch(&self, resource: &ApiResource, namespace: Option<&str>) -> Result<(), String> {
        self.check(Capability::Kube)?;
        let key = (resource.clone(), namespace.map(str::to_owned));
        let start = self
            .backends
            .kubernetes
            .watch(&self.plugin, resource, namespace, self.events.clone());
        if self.watches.once(key, start).await? {
            tracing::info!(plugin = %self.plugin, resource = %resource.name(), ?namespace, "watching");
        }
        Ok(())
    }

    /// Stops every timer, LISTEN and watch (the plugin is being replaced or the host stops).
    pub fn stop(&self) {
        for (_, task) in self.timers.lock().drain() {
            task.abort();
        }
        self.listeners.stop();
        self.watches.stop();
    }
}

impl Drop for Capabilities {
    fn drop(&mut self) {
        // Listeners and watches stop as their registrations drop.
        self.stop();
    }
}
