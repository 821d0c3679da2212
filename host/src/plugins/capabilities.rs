//! The host capabilities of one plugin, shared by all its instances: `emit`, `log`, `timer`, `kv`,
//! `pg` (whose per-instance transactions live in [`super::pg::PgSession`]), `kube`, `metrics` and
//! `blob`. Every call checks the plugin's grants (components cannot even link an ungranted
//! import; native libraries are refused at load when they declare one, and this check stops any
//! call that slips through), and what the host keeps for the plugin is bounded by its limits: a
//! call past one is refused with an error naming it, and counted.
//!
//! Everything a plugin starts in the background — timers, LISTENs, watches — runs in the plugin's
//! task tree ([`Tasks`]): one cancellation parent, every task tracked, all of them stopped and
//! awaited when the plugin is unloaded, replaced or the host stops.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use conductor_plugin_sdk::kube::{ApiResource, KubeReply, KubeRequest};
use conductor_plugin_sdk::{Capability, CloudEvent, Error, HostEvent, Level};
use parking_lot::Mutex;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::kv::{KvLimits, KvStore};
use super::routing::SourceCheck;
use crate::broker::EventSink;
use crate::config::KubeResourceGrant;
use crate::database::Databases;
use crate::host_events::{EventKey, EventQueue};
use crate::kube::selector::LabelSelector;
use crate::kube::watch::{Watch, WatchKey};
use crate::kube::{Kubernetes, api};
use crate::telemetry::exported::{Declared, MetricRefused};

/// The background tasks of one plugin: cancelled together, awaited together.
#[derive(Clone, Default)]
pub struct Tasks {
    stop: CancellationToken,
    tracker: TaskTracker,
}

impl Tasks {
    /// Runs `task` until it ends or the plugin stops.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = task => {}
            }
        });
    }

    /// A token cancelled when the plugin stops (or earlier, by whoever holds it).
    pub fn child(&self) -> CancellationToken {
        self.stop.child_token()
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Stops every task and waits until all have ended.
    pub async fn stop(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// What a plugin was granted in `conductor.toml`.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub capabilities: BTreeSet<Capability>,
    /// The databases `pg` reaches.
    pub databases: BTreeSet<String>,
    /// The Kubernetes resources `kube` reaches, and with which verbs.
    pub kube_resources: Vec<KubeResourceGrant>,
    /// The files `blob` reads, by name (absolute paths).
    pub blobs: std::collections::BTreeMap<String, std::path::PathBuf>,
    /// How much the host keeps for the plugin.
    pub limits: HostLimits,
}

/// How much the host keeps for one plugin (`[plugins.<name>.limits]`).
#[derive(Debug, Clone, Copy)]
pub struct HostLimits {
    pub kv: KvLimits,
    pub timers: usize,
    pub log_lines_per_second: u32,
}

impl Default for HostLimits {
    /// The configuration's defaults.
    fn default() -> Self {
        Self::from(&crate::config::PluginLimits::default())
    }
}

impl From<&crate::config::PluginLimits> for HostLimits {
    fn from(limits: &crate::config::PluginLimits) -> Self {
        Self {
            kv: KvLimits {
                keys: limits.kv_keys,
                bytes: limits.kv_bytes.as_usize(),
            },
            timers: limits.timers,
            log_lines_per_second: limits.log_lines_per_second,
        }
    }
}

/// A plugin's standard output or error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// The largest file `blob` hands a plugin.
const MAX_BLOB: u64 = 16 << 20;

/// Log lines a plugin may write now: a bucket refilled at the configured rate, as deep as one
/// second of it. Only lines that would be written count (one below the log level costs nothing).
struct LogBudget {
    tokens: f64,
    refilled: std::time::Instant,
    /// Lines dropped since the last report of them.
    dropped: u64,
    /// When dropped lines were last reported (at most once per [`DROPPED_LINES_REPORT`]).
    reported: Option<std::time::Instant>,
}

/// How often, at most, a plugin's dropped log lines are reported (with their count).
const DROPPED_LINES_REPORT: Duration = Duration::from_secs(10);

impl LogBudget {
    /// The lines dropped to report now, if a report is due.
    fn report_due(&mut self, now: std::time::Instant) -> Option<u64> {
        let due = self
            .reported
            .is_none_or(|at| now.duration_since(at) >= DROPPED_LINES_REPORT);
        (due && self.dropped > 0).then(|| {
            self.reported = Some(now);
            std::mem::take(&mut self.dropped)
        })
    }
}

/// Whether a line at `level` would be written (the log level and filters allow it).
fn would_log(level: Level) -> bool {
    match level {
        Level::Trace => tracing::enabled!(tracing::Level::TRACE),
        Level::Debug => tracing::enabled!(tracing::Level::DEBUG),
        Level::Info => tracing::enabled!(tracing::Level::INFO),
        Level::Warn => tracing::enabled!(tracing::Level::WARN),
        Level::Error => tracing::enabled!(tracing::Level::ERROR),
    }
}

impl Grants {
    /// Whether `verb` on `resource` (`<plural>.<group>`, with `/<subresource>` for one) is granted.
    pub fn allows_kube(&self, resource: &str, verb: &str) -> bool {
        self.kube_resources.iter().any(|g| g.allows(resource, verb))
    }
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

/// How a plugin's capabilities behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Serving: everything granted works.
    Serve,
    /// `check-config --connect`: reads only. Statements run in read-only transactions; LISTEN,
    /// watches, timers, emits and Kubernetes writes are refused.
    ReadOnly,
}

/// What the host does for one plugin, shared by all its instances.
pub struct Capabilities {
    plugin: String,
    grants: Grants,
    mode: Mode,
    sink: Arc<dyn EventSink>,
    kv: KvStore,
    events: Arc<EventQueue>,
    tasks: Tasks,
    /// Live timers by name: a number (to tell a timer from its replacement) and its stop.
    timers: Arc<Mutex<HashMap<String, (u64, CancellationToken)>>>,
    log_budget: Mutex<LogBudget>,
    /// The metrics the plugin declared.
    exports: Declared,
    backends: Backends,
    /// LISTENs by (database, channel): one each, however often asked.
    listening: tokio::sync::Mutex<HashSet<(String, String)>>,
    /// Watches by what was asked: one each; their caches answer lists.
    watches: tokio::sync::Mutex<HashMap<WatchKey, Arc<Watch>>>,
    /// Where the status updates about the events it sends go.
    sources: SourceCheck,
}

fn denied(capability: &str, plugin: &str) -> Error {
    Error::Denied(format!("capability {capability:?} is not granted to plugin {plugin:?}"))
}

impl Capabilities {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        plugin: &str,
        grants: Grants,
        mode: Mode,
        sink: Arc<dyn EventSink>,
        kv: KvStore,
        events: Arc<EventQueue>,
        tasks: Tasks,
        backends: Backends,
        exports: Declared,
    ) -> Arc<Self> {
        let log_budget = LogBudget {
            tokens: f64::from(grants.limits.log_lines_per_second),
            refilled: std::time::Instant::now(),
            dropped: 0,
            reported: None,
        };
        let sources = SourceCheck::new(plugin, events.metrics().clone());
        Arc::new(Self {
            plugin: plugin.to_owned(),
            grants,
            mode,
            sink,
            kv,
            events,
            tasks,
            timers: Arc::default(),
            log_budget: Mutex::new(log_budget),
            exports,
            backends,
            listening: tokio::sync::Mutex::default(),
            watches: tokio::sync::Mutex::default(),
            sources,
        })
    }

    /// Where the status updates about the events the plugin sends go.
    pub fn sources(&self) -> &SourceCheck {
        &self.sources
    }

    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The plugin's metrics.
    pub fn metrics(&self) -> &crate::telemetry::PluginMetrics {
        self.events.metrics()
    }

    pub fn granted(&self, capability: Capability) -> bool {
        self.grants.capabilities.contains(&capability)
    }

    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The plugin's `kv` state (for the inspector and `conductor plugins test`).
    pub fn kv(&self) -> &KvStore {
        &self.kv
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn check(&self, capability: Capability) -> Result<(), Error> {
        if self.granted(capability) {
            Ok(())
        } else {
            tracing::warn!(plugin = %self.plugin, capability = capability.name(), "call to an ungranted capability refused");
            Err(denied(capability.name(), &self.plugin))
        }
    }

    fn serving(&self, what: &str) -> Result<(), Error> {
        match self.mode {
            Mode::Serve => Ok(()),
            Mode::ReadOnly => Err(Error::Denied(format!(
                "{what} is not allowed while checking a configuration (read-only)"
            ))),
        }
    }

    pub fn emit(&self, event: &CloudEvent) -> Result<u32, Error> {
        self.check(Capability::Emit)?;
        self.serving("emit")?;
        // With traces on, the event carries the trace of the call that emits it.
        let delivered = self
            .sink
            .emit(&crate::telemetry::traces::stamped(event))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        self.sources.sent(event);
        Ok(u32::try_from(delivered).unwrap_or(u32::MAX))
    }

    pub fn log(&self, level: Level, message: &str) {
        if self.check(Capability::Log).is_err() || !would_log(level) {
            return;
        }
        if !self.log_budget() {
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

    /// A line the plugin wrote to its standard output or error (a `print`, an interpreter's
    /// traceback, a Rust panic message): into the log under the plugin's name, stdout at info and
    /// stderr at warn, within the same `limits.log_lines_per_second` as `log`. WASI's stdio is
    /// always linked, so this needs no `log` grant.
    pub fn output(&self, stream: OutputStream, line: &str) {
        let level = match stream {
            OutputStream::Stdout => Level::Info,
            OutputStream::Stderr => Level::Warn,
        };
        if !would_log(level) || !self.log_budget() {
            return;
        }
        let plugin = self.plugin.as_str();
        match stream {
            OutputStream::Stdout => tracing::info!(plugin, stream = "stdout", "{line}"),
            OutputStream::Stderr => tracing::warn!(plugin, stream = "stderr", "{line}"),
        }
    }

    /// Whether the plugin may write one more log line now (`limits.log_lines_per_second`); a
    /// line refused is counted, and the lines dropped are reported with their count at most once
    /// per [`DROPPED_LINES_REPORT`].
    fn log_budget(&self) -> bool {
        let (allowed, report) = {
            let mut budget = self.log_budget.lock();
            let rate = f64::from(self.grants.limits.log_lines_per_second);
            let now = std::time::Instant::now();
            let refill = now.duration_since(budget.refilled).as_secs_f64() * rate;
            budget.tokens = (budget.tokens + refill).min(rate);
            budget.refilled = now;
            let allowed = budget.tokens >= 1.0;
            if allowed {
                budget.tokens -= 1.0;
            } else {
                budget.dropped += 1;
            }
            (allowed, budget.report_due(now))
        };
        if !allowed {
            self.refused("log_lines_per_second");
        }
        if let Some(dropped) = report {
            tracing::warn!(
                plugin = self.plugin.as_str(),
                dropped,
                limit = self.grants.limits.log_lines_per_second,
                every = ?DROPPED_LINES_REPORT,
                "dropping log lines of the plugin beyond limits.log_lines_per_second"
            );
        }
        allowed
    }

    /// Counts a call refused by `limit`.
    fn refused(&self, limit: &str) {
        self.metrics().limit_hit(limit);
    }

    /// Starts (or restarts) a timer in the plugin's task tree; its firings go through the event
    /// queue, where one still waiting absorbs the next. A new timer past `limits.timers` live
    /// ones is refused.
    pub fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) -> Result<(), Error> {
        self.check(Capability::Timer)?;
        self.serving("a timer")?;
        if self.tasks.is_stopped() {
            return Err(Error::Unavailable(format!("plugin {:?} is stopping", self.plugin)));
        }
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stop = self.tasks.child();
        {
            let mut timers = self.timers.lock();
            let limit = self.grants.limits.timers;
            if !timers.contains_key(name) && timers.len() >= limit {
                drop(timers);
                self.refused("timers");
                return Err(Error::Unavailable(format!(
                    "timer {name:?} refused: the plugin has {limit} timers set (limits.timers)"
                )));
            }
            if let Some((_, old)) = timers.insert(name.to_owned(), (id, stop.clone())) {
                old.cancel();
            }
        }
        let events = Arc::clone(&self.events);
        let timers = Arc::clone(&self.timers);
        let name = name.to_owned();
        let period = Duration::from_millis(after_ms.max(1));
        self.tasks.spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let fired = HostEvent::Timer(name.clone());
                if !events.push(EventKey::Timer(name.clone()), fired).await || !repeat {
                    break;
                }
            }
            // A one-shot that went off is no longer live (unless it was set again meanwhile).
            let mut timers = timers.lock();
            if timers.get(&name).is_some_and(|(set, _)| *set == id) {
                timers.remove(&name);
            }
        });
        Ok(())
    }

    pub fn cancel_timer(&self, name: &str) {
        if self.check(Capability::Timer).is_ok()
            && let Some((_, stop)) = self.timers.lock().remove(name)
        {
            stop.cancel();
        }
    }

    pub fn kv_get(&self, key: &str) -> Option<Vec<u8>> {
        self.check(Capability::Kv).ok()?;
        self.kv.get(key)
    }

    /// Stores `value`, unless the plugin's `kv` limits refuse it.
    pub fn kv_set(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        self.check(Capability::Kv)?;
        self.kv.set(key, value, self.grants.limits.kv).map_err(|refused| {
            self.refused(refused.limit());
            Error::Unavailable(format!("kv key {key:?} refused: {refused}"))
        })
    }

    pub fn kv_delete(&self, key: &str) -> bool {
        self.check(Capability::Kv).is_ok() && self.kv.delete(key)
    }

    /// Adds to a counter or sets a gauge of the plugin's own metrics.
    pub fn metric(
        &self,
        kind: conductor_plugin_sdk::MetricKind,
        name: &str,
        labels: &[&str],
        value: f64,
    ) -> Result<(), Error> {
        self.check(Capability::Metrics)?;
        self.exports.record(kind, name, labels, value).map_err(|e| match e {
            MetricRefused::Invalid(why) => Error::Invalid(why),
            refused @ MetricRefused::Series(_) => {
                self.refused("metric_series");
                Error::Unavailable(format!("metric {name:?} refused: {refused}"))
            }
        })
    }

    /// The contents of the file the operator named `name` for the plugin.
    pub async fn blob(&self, name: &str) -> Result<Vec<u8>, Error> {
        self.check(Capability::Blob)?;
        let path = self.grants.blobs.get(name).ok_or_else(|| {
            Error::NotFound(format!(
                "no file named {name:?} for plugin {:?} (its blobs: {:?})",
                self.plugin,
                self.grants.blobs.keys().collect::<Vec<_>>()
            ))
        })?;
        let unreadable = |e: std::io::Error| Error::Unavailable(format!("blob {name:?} ({}): {e}", path.display()));
        let size = tokio::fs::metadata(path).await.map_err(unreadable)?.len();
        if size > MAX_BLOB {
            return Err(Error::Invalid(format!(
                "blob {name:?} ({}) holds {size} bytes, more than the {MAX_BLOB} a plugin may read",
                path.display()
            )));
        }
        tokio::fs::read(path).await.map_err(unreadable)
    }

    /// The pool of `database`, if the plugin may use it.
    pub fn pg_pool(&self, database: &str) -> Result<&PgPool, Error> {
        self.check(Capability::Pg)?;
        if !self.grants.databases.contains(database) {
            return Err(Error::Denied(format!(
                "plugin {:?} may not use database {database:?} (its databases: {:?})",
                self.plugin, self.grants.databases
            )));
        }
        self.backends
            .databases
            .pool(database)
            .ok_or_else(|| Error::Invalid(format!("no database {database:?}")))
    }

    /// LISTENs on `channel` for the plugin, once however often it asks. The first connection is
    /// made now (an unreachable database or a role that cannot LISTEN is an error here).
    pub async fn pg_listen(&self, database: &str, channel: &str) -> Result<(), Error> {
        self.pg_pool(database)?;
        self.serving("LISTEN")?;
        let mut listening = self.listening.lock().await;
        let key = (database.to_owned(), channel.to_owned());
        if listening.contains(&key) {
            return Ok(());
        }
        let task = self
            .backends
            .databases
            .listen(
                &self.plugin,
                database,
                channel,
                Arc::clone(&self.events),
                self.tasks.child(),
            )
            .await
            .map_err(Error::Unavailable)?;
        self.tasks.spawn(task);
        listening.insert(key);
        tracing::info!(plugin = %self.plugin, database, channel, "listening");
        Ok(())
    }

    /// Answers one `kube` call of the plugin.
    pub async fn kube(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        self.check(Capability::Kube)?;
        let (resource, verb, subresource) = match &request {
            KubeRequest::Watch { resource, .. } => (resource.name(), "watch", None),
            KubeRequest::Get { resource, .. } => (resource.name(), "get", None),
            KubeRequest::List { resource, .. } => (resource.name(), "list", None),
            KubeRequest::Create { resource, .. } => (resource.name(), "create", None),
            KubeRequest::Update {
                resource, subresource, ..
            } => (resource.name(), "update", subresource.clone()),
            KubeRequest::Patch {
                resource, subresource, ..
            } => (resource.name(), "patch", subresource.clone()),
            KubeRequest::Delete { resource, .. } => (resource.name(), "delete", None),
            KubeRequest::CreateToken { .. } => ("serviceaccounts".to_owned(), "create", Some("token".to_owned())),
        };
        let granted_name = match &subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource,
        };
        if !self.grants.allows_kube(&granted_name, verb) {
            return Err(Error::Denied(format!(
                "plugin {:?} may not {verb} {granted_name} (not in its kube_resources)",
                self.plugin
            )));
        }
        if self.mode == Mode::ReadOnly && !matches!(verb, "get" | "list") {
            self.serving(&format!("{verb} of {granted_name}"))?;
        }
        let client = self.backends.kubernetes.client().await?;
        if matches!(request, KubeRequest::Watch { .. }) {
            return self.dispatch_kube(client, request).await;
        }
        let started = std::time::Instant::now();
        let span = tracing::span!(
            target: "conductor::trace",
            tracing::Level::TRACE,
            "kube",
            plugin = %self.plugin,
            verb,
            resource = %granted_name,
        );
        let reply = tracing::Instrument::instrument(self.dispatch_kube(client, request), span).await;
        self.metrics()
            .kube_request(verb, http_code(&reply, verb), started.elapsed());
        reply
    }

    async fn dispatch_kube(&self, client: kube::Client, request: KubeRequest) -> Result<KubeReply, Error> {
        match request {
            KubeRequest::Watch {
                resource,
                namespace,
                selector,
            } => {
                let key = WatchKey {
                    resource,
                    namespace,
                    labels: selector.labels,
                    fields: selector.fields,
                };
                self.watch(client, key).await.map(|()| KubeReply::Done)
            }
            KubeRequest::Get {
                resource,
                namespace,
                name,
            } => api::get(&client, &resource, namespace.as_deref(), &name)
                .await
                .map(KubeReply::MaybeObject),
            KubeRequest::List {
                resource,
                namespace,
                selector,
            } => {
                if let Some(cached) = self.cached_list(&resource, namespace.as_deref(), &selector).await? {
                    return Ok(KubeReply::Objects(cached));
                }
                api::list(&client, &resource, namespace.as_deref(), &selector)
                    .await
                    .map(KubeReply::Objects)
            }
            KubeRequest::Create {
                resource,
                namespace,
                object,
            } => api::create(&client, &resource, namespace.as_deref(), &object)
                .await
                .map(KubeReply::Object),
            KubeRequest::Update {
                resource,
                namespace,
                object,
                subresource,
            } => api::update(
                &client,
                &resource,
                namespace.as_deref(),
                &object,
                subresource.as_deref(),
            )
            .await
            .map(KubeReply::Object),
            KubeRequest::Patch {
                resource,
                namespace,
                name,
                patch,
                subresource,
            } => api::patch(
                &client,
                &resource,
                namespace.as_deref(),
                &name,
                &patch,
                subresource.as_deref(),
            )
            .await
            .map(KubeReply::Object),
            KubeRequest::Delete {
                resource,
                namespace,
                name,
            } => api::delete(&client, &resource, namespace.as_deref(), &name)
                .await
                .map(|()| KubeReply::Done),
            KubeRequest::CreateToken {
                namespace,
                name,
                request,
            } => api::create_token(&client, &namespace, &name, &request)
                .await
                .map(KubeReply::Object),
        }
    }

    /// Starts a watch for the plugin, once however often it asks.
    async fn watch(&self, client: kube::Client, key: WatchKey) -> Result<(), Error> {
        self.serving("a watch")?;
        let mut watches = self.watches.lock().await;
        if watches.contains_key(&key) {
            return Ok(());
        }
        let what = (key.resource.name(), key.namespace.clone());
        let (watch, task) = crate::kube::watch::start(
            client,
            key.clone(),
            self.events.metrics().clone(),
            Arc::clone(&self.events),
            self.tasks.child(),
        )?;
        self.tasks.spawn(task);
        watches.insert(key, watch);
        tracing::info!(plugin = %self.plugin, resource = %what.0, namespace = ?what.1, "watching");
        Ok(())
    }

    /// Lists every object of the plugin's watches of `resource` again (`<plural>.<group>`, as
    /// watch events name it); returns whether there was such a watch.
    pub async fn relist(&self, resource: &str) -> bool {
        let watches = self.watches.lock().await;
        let mut found = false;
        for watch in watches.values().filter(|w| w.resource() == resource) {
            watch.relist();
            found = true;
        }
        found
    }

    /// The answer of a running watch's cache, if one covers the list.
    async fn cached_list(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        selector: &conductor_plugin_sdk::kube::Selector,
    ) -> Result<Option<Vec<String>>, Error> {
        let labels = LabelSelector::parse(selector.labels.as_deref().unwrap_or_default())
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let watches = self.watches.lock().await;
        for watch in watches.values() {
            if let Some(fields) = watch.covers(resource, namespace, &labels, selector.fields.as_deref()) {
                return Ok(Some(watch.list(namespace, &labels, &fields)));
            }
        }
        Ok(None)
    }
}

/// The HTTP code a `kube` call's outcome stands for (0: the API server was not reached).
fn http_code(reply: &Result<KubeReply, Error>, verb: &str) -> u16 {
    match reply {
        Ok(_) if verb == "create" => 201,
        Ok(_) => 200,
        Err(Error::Status(status)) => u16::try_from(status.code).unwrap_or(0),
        Err(Error::NotFound(_)) => 404,
        Err(Error::AlreadyExists(_) | Error::Conflict(_)) => 409,
        Err(Error::Invalid(_)) => 400,
        Err(Error::Denied(_)) => 403,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::broker::Fanout;
    use crate::telemetry::Metrics;

    fn capabilities(events: Arc<EventQueue>, tasks: Tasks) -> Arc<Capabilities> {
        Capabilities::new(
            "p",
            Grants {
                capabilities: [Capability::Timer].into(),
                ..Grants::default()
            },
            Mode::Serve,
            Fanout::new(Metrics::new(), 1, 0),
            KvStore::default(),
            events,
            tasks,
            Backends::none(),
            Metrics::new().exported.declare("p", "p", &[], 10).unwrap(),
        )
    }

    /// A repeating timer fires at every interval, measured from when it was set, however long
    /// the plugin takes to handle the firings; firings that find the last one still queued are
    /// one.
    #[tokio::test(start_paused = true)]
    async fn a_repeating_timer_fires_on_its_interval_and_coalesces_when_the_plugin_lags() {
        let events = Arc::new(EventQueue::new(16, Metrics::new().plugin("p")));
        let tasks = Tasks::default();
        let caps = capabilities(Arc::clone(&events), tasks.clone());
        let start = tokio::time::Instant::now();
        caps.set_timer("catch-up", 300_000, true).unwrap();
        let mut fired = Vec::new();
        for _ in 0..12 {
            let batch = events.next_batch(10).await.unwrap();
            let events: Vec<HostEvent> = batch.into_iter().map(|t| t.event).collect();
            assert_eq!(events, [HostEvent::Timer("catch-up".into())]);
            fired.push(start.elapsed());
        }
        let expected: Vec<Duration> = (1..=12).map(|i| Duration::from_secs(300 * i)).collect();
        assert_eq!(fired, expected, "every five minutes, never later");

        // The plugin does not take events for 20 minutes: one firing waits, not four.
        tokio::time::sleep(Duration::from_secs(20 * 60 + 30)).await;
        assert_eq!(events.len(), 1);
        assert_eq!(events.next_batch(10).await.unwrap().len(), 1);

        // Cancelled timers stop; stopping the plugin ends every task it started.
        caps.cancel_timer("catch-up");
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(events.is_empty());
        caps.set_timer("other", 1000, true).unwrap();
        tasks.stop().await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(events.is_empty(), "no timer outlives its plugin");
        assert!(
            caps.set_timer("late", 1000, false).is_err(),
            "a stopped plugin starts no timer"
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(events.is_empty());
    }
}
