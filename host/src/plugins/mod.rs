//! Plugins: loaded from files named in `conductor.toml` — WebAssembly components ([`wasm`]) or
//! native libraries ([`native`]) — checked against their grants, run as pools of instances, and
//! reachable by the broker only as a [`Source`].
//!
//! A plugin's life: its file is read and checked ([`PluginFile`]), instances are made (`init`),
//! [`PluginSource::start`] runs its once-only work and starts delivering host events, and
//! [`PluginSource::stop`] stops every task it started and waits for them.

pub mod capabilities;
pub mod kv;
mod lanes;
pub mod native;
mod pg;
mod pool;
pub mod routing;
pub mod stats;
pub mod wasm;

use async_trait::async_trait;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};
use conductor_plugin_sdk::ocm::DataType;
use conductor_plugin_sdk::{Capability, CloudEvent, Description, Error, HostEvent, Identity, ListOptions, SDK_VERSION};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::broker::EventSink;
use crate::config::{PluginConfig, PluginKind, PluginLimits};
use crate::host_events::{EventKey, EventQueue, Taken};
use crate::registry::Source;
use crate::telemetry::{Metrics, PluginCall};
pub use capabilities::{Backends, Mode};
use capabilities::{Capabilities, Grants, Tasks};
pub use kv::KvStore;
use lanes::Lanes;
use pool::Wait;

/// One running plugin, as the last start or reload left it: what it was loaded from, and the
/// source the registry routes to (the built-in memory source has no plugin behind it).
#[derive(Clone)]
pub struct Running {
    pub config: PluginConfig,
    /// `sha256:…` of what was loaded: the file's bytes, or the manifest digest of an artifact
    /// pulled from a registry (none for the memory source).
    pub digest: Option<String>,
    pub source: Arc<dyn Source>,
    /// The plugin behind `source` (none for the memory source).
    pub plugin: Option<Arc<PluginSource>>,
    /// Where it was pulled from, for a plugin from a registry.
    pub artifact: Option<PulledArtifact>,
    /// When it was loaded: at startup, or by the reload that last replaced it.
    pub loaded_at: std::time::SystemTime,
}

/// A plugin pulled from a registry (`file = "oci://…"`): the reference it was loaded by and what
/// that resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledArtifact {
    /// The `oci://…@sha256:…` reference.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    /// The component's digest: the bytes that run.
    pub component_digest: String,
    /// Whether it was loaded from the cache without contacting the registry.
    pub from_cache: bool,
}

/// Why a plugin did not load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a plugin: {reason}")]
    NotAPlugin { path: PathBuf, reason: String },
    #[error("incompatible plugin: {0}")]
    Incompatible(String),
    #[error(
        "the plugin needs capabilities that are not granted: {missing:?} (granted: {granted:?}); add them to `grants` if you trust it"
    )]
    Ungranted { missing: Vec<String>, granted: Vec<String> },
    #[error("invalid description: {0}")]
    Description(String),
    #[error("plugin configuration refused: {0}")]
    Config(#[source] Error),
    #[error("plugin init failed: {0}")]
    Init(#[source] Error),
    #[error("plugin start failed: {0}")]
    Start(#[source] Error),
    #[error("{0}")]
    Runtime(String),
}

/// The error of a call that ran past `limits.call_timeout`: agents retry it (`Unavailable`).
pub(crate) fn call_timed_out(plugin: &str, timeout: std::time::Duration) -> Error {
    Error::Unavailable(format!("plugin {plugin} {CALL_TIMED_OUT} of {timeout:?}"))
}

const CALL_TIMED_OUT: &str = "exceeded its call timeout";

/// The limit a failed call ran into, if it failed for time.
fn time_limit(error: &Error) -> Option<&'static str> {
    let message = error.to_string();
    if message.contains(CALL_TIMED_OUT) {
        Some("call_timeout")
    } else if message.contains(pool::BUSY) {
        Some("acquire_timeout")
    } else {
        None
    }
}

/// A loaded plugin's calls, whatever runs it.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    async fn call(&self, request: PluginRequest, wait: Wait) -> Result<PluginReply, Error>;
    /// How many instances exist now.
    fn instances(&self) -> usize;
}

/// What a plugin file declares, read without running anything of it but `describe` (and
/// `check-config`, which has no capability).
#[derive(Clone)]
pub struct PluginFile {
    pub kind: PluginKind,
    pub path: PathBuf,
    /// `sha256:…` of the bytes it was loaded from.
    pub digest: String,
    pub description: Description,
    /// The capabilities the plugin uses: a component's function imports, a native library's
    /// declaration.
    pub capabilities: Vec<Capability>,
    runtime: FileRuntime,
}

impl std::fmt::Debug for PluginFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginFile")
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("digest", &self.digest)
            .field("description", &self.description)
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum FileRuntime {
    Component(wasmtime::component::Component),
    Native(&'static conductor_plugin_sdk::native::PluginApi),
}

impl PluginFile {
    /// Reads and describes a plugin file (compiling a component off the async workers). With
    /// `expected`, the bytes read must hash to it (an artifact's verified digest), else the file
    /// is refused: what is loaded is exactly what was verified.
    pub async fn read(kind: PluginKind, path: &Path, expected: Option<&str>) -> Result<Self, LoadError> {
        match kind {
            PluginKind::Component => {
                let (component, description, capabilities, digest) = wasm::describe(path, expected).await?;
                Ok(Self {
                    kind,
                    path: path.to_owned(),
                    digest,
                    description,
                    capabilities,
                    runtime: FileRuntime::Component(component),
                })
            }
            PluginKind::Native => {
                let path_owned = path.to_owned();
                let expected = expected.map(str::to_owned);
                let (api, description, digest) =
                    tokio::task::spawn_blocking(move || native::load_library(&path_owned, expected.as_deref()))
                        .await
                        .map_err(|e| LoadError::Runtime(format!("loading the library: {e}")))??;
                Ok(Self {
                    kind,
                    path: path.to_owned(),
                    digest,
                    capabilities: description.capabilities.clone(),
                    description,
                    runtime: FileRuntime::Native(api),
                })
            }
            PluginKind::Memory => Err(LoadError::NotAPlugin {
                path: path.to_owned(),
                reason: "the memory source is built in; it has no file".into(),
            }),
        }
    }

    /// Checks the description against this host and the plugin's grants; returns its data types.
    pub fn check(&self, grants: &BTreeSet<Capability>) -> Result<Vec<DataType>, LoadError> {
        check(&self.description, &self.capabilities, grants)
    }

    /// Asks the plugin whether it takes `config` (JSON), with no capability at hand.
    pub async fn check_config(&self, config: &str) -> Result<(), LoadError> {
        match &self.runtime {
            FileRuntime::Component(component) => wasm::check_config(component, config).await,
            FileRuntime::Native(api) => native::check_config(api, config),
        }
        .map_err(LoadError::Config)
    }
}

/// Checks a description against this host and the plugin's grants.
pub fn check(
    description: &Description,
    capabilities: &[Capability],
    grants: &BTreeSet<Capability>,
) -> Result<Vec<DataType>, LoadError> {
    let ours = version_prefix(SDK_VERSION);
    if version_prefix(&description.sdk_version) != ours {
        return Err(LoadError::Incompatible(format!(
            "built against SDK {}, this host serves SDK {SDK_VERSION} ({ours}.x)",
            description.sdk_version
        )));
    }
    let missing: Vec<String> = capabilities
        .iter()
        .filter(|c| !grants.contains(c))
        .map(|c| c.name().to_owned())
        .collect();
    if !missing.is_empty() {
        return Err(LoadError::Ungranted {
            missing,
            granted: grants.iter().map(|c| c.name().to_owned()).collect(),
        });
    }
    if description.name.is_empty() {
        return Err(LoadError::Description("the plugin has no name".into()));
    }
    crate::telemetry::exported::check(&description.name, &description.metrics).map_err(LoadError::Description)?;
    description
        .data_types
        .iter()
        .map(|d| DataType::parse(d).map_err(|e| LoadError::Description(e.to_string())))
        .collect()
}

/// While a plugin's `on-events` call runs, how long the dispatcher waits for a backlog before it
/// starts another call (with `concurrent-notifications`): long enough for a call that keeps up
/// to end and take the next events in one batch, short enough that a call stuck on a lock or a
/// slow statement does not hold up the rest.
const OVERTAKE_AFTER: std::time::Duration = std::time::Duration::from_millis(10);

/// How many `on-events` calls with only notifications may run at once: what the plugin declares,
/// at most its pool size and the configured limit, at least one.
fn lanes(description: &Description, config: &PluginConfig) -> u32 {
    let pool = u32::try_from(config.pool_size).unwrap_or(u32::MAX);
    let limit = config.limits.concurrent_notifications.unwrap_or(u32::MAX);
    description.concurrent_notifications.min(pool).min(limit).max(1)
}

/// How many `on-events` calls with only notifications may run at once, and why when it is not
/// what the plugin declares (a plugin that declares 0, the default, gets one at a time).
fn lanes_applied(description: &Description, config: &PluginConfig) -> String {
    let applied = lanes(description, config);
    let declared = description.concurrent_notifications;
    if declared == applied {
        return applied.to_string();
    }
    if declared == 0 {
        return format!("{applied} (the plugin declares 0: one on-events call at a time)");
    }
    let mut bounds = vec![];
    if u32::try_from(config.pool_size).is_ok_and(|pool| pool < declared) {
        bounds.push(format!("pool_size = {}", config.pool_size));
    }
    if let Some(limit) = config.limits.concurrent_notifications.filter(|l| *l < declared) {
        bounds.push(format!("limits.concurrent_notifications = {limit}"));
    }
    format!("{applied} (the plugin declares {declared}; {})", bounds.join(", "))
}

/// `major.minor` of a `major.minor.patch` version: plugins built against the same minor version of
/// a 0.x contract (or the same major of a 1.x+) are compatible.
fn version_prefix(v: &str) -> String {
    let mut parts = v.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => format!("0.{minor}"),
        (Some(major), _) => major.to_owned(),
        _ => v.to_owned(),
    }
}

/// The grants of a plugin's configuration (validated when the configuration was loaded).
pub fn grants(config: &PluginConfig) -> Grants {
    Grants {
        capabilities: config.grants.iter().filter_map(|g| Capability::parse(g)).collect(),
        databases: config.databases.iter().cloned().collect(),
        kube_resources: config.kube_resources.clone(),
        blobs: config.blobs.clone(),
        limits: (&config.limits).into(),
    }
}

/// What the host hands every plugin it loads.
#[derive(Clone)]
pub struct HostContext {
    pub sink: Arc<dyn EventSink>,
    pub backends: Backends,
    pub metrics: Metrics,
    pub mode: Mode,
}

/// A loaded plugin as the registry sees it.
pub struct PluginSource {
    name: String,
    file: PluginFile,
    config: PluginConfig,
    runtime: Arc<dyn Runtime>,
    capabilities: Arc<Capabilities>,
    data_types: Vec<DataType>,
    events: Arc<EventQueue>,
    tasks: Tasks,
    limits: PluginLimits,
    stats: stats::CallStats,
    metrics: crate::telemetry::PluginMetrics,
    /// Watched objects given up once (their watch was listed again); given up again, they are
    /// dropped rather than listed in a loop.
    abandoned: parking_lot::Mutex<std::collections::HashSet<EventKey>>,
}

/// Deliveries of a host event before it is given up: the first, and three more with backoff;
/// then, if it was delivered with others, once more alone.
const DELIVERIES: u32 = 4;

/// A call's events with those to be delivered alone taken out, each into a call of its own.
fn apart(call: Vec<Taken>) -> Vec<Vec<Taken>> {
    if !call.iter().any(|t| t.alone) {
        return vec![call];
    }
    let (alone, together): (Vec<Taken>, Vec<Taken>) = call.into_iter().partition(|t| t.alone);
    let mut calls: Vec<Vec<Taken>> = alone.into_iter().map(|t| vec![t]).collect();
    if !together.is_empty() {
        calls.push(together);
    }
    calls
}

/// How long a failed call's events wait before they are queued again: 200 ms after the first
/// failure, doubling, at most 5 s.
fn redelivery_delay(failures: u32) -> std::time::Duration {
    let ms = 200u64.saturating_mul(1 << failures.saturating_sub(1).min(5));
    std::time::Duration::from_millis(ms.min(5_000))
}

impl PluginSource {
    /// Loads the plugin `name` from its (already read) `file`: checks it against the grants and
    /// makes its first instance (`init`). Nothing runs in the background until [`Self::start`].
    /// `kv` is the plugin's state, kept by the caller across reloads.
    pub async fn load(
        name: &str,
        config: &PluginConfig,
        file: PluginFile,
        kv: KvStore,
        host: &HostContext,
    ) -> Result<Arc<Self>, LoadError> {
        let grants = grants(config);
        let data_types = file.check(&grants.capabilities)?;
        let config_json = serde_json::to_string(&config.config).unwrap_or_else(|_| "{}".to_owned());
        file.check_config(&config_json).await?;
        let tasks = Tasks::default();
        let metrics = host.metrics.plugin(name);
        let exports = host
            .metrics
            .exported
            .declare(
                name,
                &file.description.name,
                &file.description.metrics,
                config.limits.metric_series,
            )
            .map_err(LoadError::Description)?;
        let events = Arc::new(EventQueue::new(config.limits.event_queue, metrics.clone()));
        let capabilities = Capabilities::new(
            name,
            grants,
            host.mode,
            Arc::clone(&host.sink),
            kv,
            Arc::clone(&events),
            tasks.clone(),
            host.backends.clone(),
            exports,
        );
        capabilities.sources().declare(&file.description.sources);
        let runtime: Arc<dyn Runtime> = match &file.runtime {
            FileRuntime::Native(api) => Arc::new(
                native::NativeRuntime::load(
                    api,
                    Arc::clone(&capabilities),
                    config.pool_size,
                    &config.limits,
                    config_json,
                )
                .await?,
            ),
            FileRuntime::Component(component) => Arc::new(
                wasm::WasmRuntime::load(
                    component,
                    Arc::clone(&capabilities),
                    config.pool_size,
                    &config.limits,
                    config_json,
                )
                .await?,
            ),
        };
        tracing::info!(
            plugin = name,
            file = %file.path.display(),
            kind = ?config.kind,
            version = %file.description.version,
            sources = ?file.description.sources,
            data_types = ?file.description.data_types,
            capabilities = ?file.capabilities.iter().map(|c| c.name()).collect::<Vec<_>>(),
            concurrent_notifications = %lanes_applied(&file.description, config),
            "plugin loaded"
        );
        Ok(Arc::new(Self {
            name: name.to_owned(),
            file,
            config: config.clone(),
            runtime,
            capabilities,
            data_types,
            events,
            tasks,
            limits: config.limits.clone(),
            stats: stats::CallStats::default(),
            metrics,
            abandoned: parking_lot::Mutex::default(),
        }))
    }

    /// Runs the plugin's once-only `start` (on its first instance), then delivers its host events.
    pub async fn start(self: &Arc<Self>) -> Result<(), LoadError> {
        self.call(PluginRequest::Start, Wait::Patient)
            .await
            .map_err(LoadError::Start)?;
        let plugin = Arc::clone(self);
        self.tasks.spawn(async move { plugin.deliver_events().await });
        Ok(())
    }

    /// Runs the plugin's once-only `start` and delivers no host event afterwards: `conductor
    /// plugins test` hands the plugin the events of its script itself (what `start` sets up —
    /// timers, say — stays quiet until [`Self::stop`]).
    pub async fn start_without_events(&self) -> Result<(), Error> {
        self.call(PluginRequest::Start, Wait::Patient).await.map(|_| ())
    }

    /// One `on-events` call with `events`, counted like the dispatcher's (for `conductor plugins
    /// test`).
    pub async fn on_events(&self, events: Vec<HostEvent>) -> Result<(), Error> {
        self.call(PluginRequest::OnEvents(events), Wait::Patient)
            .await
            .map(|_| ())
    }

    /// The dispatcher: batches of queued host events to `on-events` calls, one at a time or, for
    /// notifications, on as many lanes as the plugin takes ([`Lanes`]). While a call runs, the
    /// next one starts once a quarter of a batch waits, after [`OVERTAKE_AFTER`], or when no call
    /// runs any more, whichever comes first.
    async fn deliver_events(self: Arc<Self>) {
        let lanes = Lanes::new(lanes(&self.file.description, &self.config));
        let max = self.limits.event_batch;
        let backlog = (max / 4).max(1);
        loop {
            let lane = lanes.free().await;
            let min = if lanes.others_in_flight() { backlog } else { 1 };
            let batch = tokio::select! {
                batch = self.events.next_batch_of(min, max) => batch,
                () = lanes.ended(), if min > 1 => continue,
                () = tokio::time::sleep(OVERTAKE_AFTER), if min > 1 => self.events.next_batch(max).await,
            };
            let Some(batch) = batch else { return };
            let mut held = Some(lane);
            for taken in lanes.calls(batch).into_iter().flat_map(apart) {
                let lane = lanes.for_call(held.take(), &taken).await;
                let plugin = Arc::clone(&self);
                self.tasks.spawn(async move {
                    let events = taken.iter().map(|t| t.event.clone()).collect();
                    // A busy pool delays events; it never drops them.
                    let outcome = plugin.call(PluginRequest::OnEvents(events), Wait::Patient).await;
                    drop(lane);
                    match outcome {
                        Ok(_) => plugin.delivered(&taken),
                        Err(e) => plugin.failed(taken, &e).await,
                    }
                });
            }
        }
    }

    /// Events the plugin took: watched objects given up before are no longer.
    fn delivered(&self, taken: &[Taken]) {
        let mut abandoned = self.abandoned.lock();
        if !abandoned.is_empty() {
            for t in taken {
                abandoned.remove(&t.key);
            }
        }
    }

    /// Events a failed `on-events` call carried: queued again after a backoff, up to
    /// [`DELIVERIES`] (and once more each alone, if they came with others); then given up: a
    /// watched object's watch lists every object again (once; an object given up after that is
    /// dropped), anything else is dropped. Either is logged and counted.
    async fn failed(self: &Arc<Self>, taken: Vec<Taken>, error: &Error) {
        let with_others = taken.len() > 1;
        let (retry, give_up): (Vec<Taken>, Vec<Taken>) = taken
            .into_iter()
            .map(|t| match t.failures + 1 {
                // Failed every delivery with others: once more alone, to find out whether it
                // was this one.
                DELIVERIES if with_others => Taken {
                    failures: DELIVERIES - 1,
                    alone: true,
                    ..t
                },
                failures => Taken { failures, ..t },
            })
            .partition(|t| t.failures < DELIVERIES);
        if let Some(most) = retry.iter().map(|t| t.failures).max() {
            let delay = redelivery_delay(most);
            tracing::warn!(plugin = %self.name, events = retry.len(), attempt = most, retry_in = ?delay, %error, "plugin failed to handle host events; delivering them again");
            let plugin = Arc::clone(self);
            self.tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                plugin.events.requeue(retry);
            });
        }
        let mut relist = std::collections::BTreeSet::new();
        for t in give_up {
            self.metrics.dropped(t.key.kind());
            match &t.event {
                HostEvent::Watch(w) if self.abandoned.lock().insert(t.key.clone()) => {
                    relist.insert(w.resource.clone());
                }
                _ => {
                    tracing::error!(plugin = %self.name, event = ?t.key, deliveries = DELIVERIES, %error, "plugin failed every delivery of a host event: dropped");
                }
            }
        }
        for resource in relist {
            tracing::error!(plugin = %self.name, %resource, deliveries = DELIVERIES, %error, "plugin failed every delivery of watched objects: listing them all again");
            self.capabilities.relist(&resource).await;
        }
    }

    /// Stops everything the plugin runs in the background and waits for it; calls in flight
    /// finish on their own.
    pub async fn stop(&self) {
        self.events.close();
        self.tasks.stop().await;
        tracing::debug!(plugin = %self.name, "plugin stopped");
    }

    pub fn description(&self) -> &Description {
        &self.file.description
    }

    pub fn file(&self) -> &PluginFile {
        &self.file
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    pub fn instances(&self) -> usize {
        self.runtime.instances()
    }

    /// What the plugin keeps in `kv` (shared by its instances, kept across reloads).
    pub fn kv(&self) -> &KvStore {
        self.capabilities.kv()
    }

    pub fn queued_events(&self) -> usize {
        self.events.len()
    }

    /// The routes of a new registry, with the sources the plugin declares that route to another
    /// plugin (`foreign`): logs what routes elsewhere (see [`routing`]).
    pub fn routed(&self, owners: Arc<crate::registry::Owners>, foreign: &[&crate::registry::Foreign]) {
        self.capabilities.sources().routed(owners, foreign);
    }

    /// What its calls did so far.
    /// The limits that refused the plugin's host calls: by limit, how many times and when last.
    pub fn limit_refusals(&self) -> std::collections::BTreeMap<String, (u64, i64)> {
        self.metrics.limit_refusals()
    }

    pub fn stats(&self) -> stats::CallStatsSnapshot {
        self.stats.snapshot()
    }

    /// A call into the plugin, counted in its stats and metrics.
    async fn call(&self, request: PluginRequest, wait: Wait) -> Result<PluginReply, Error> {
        let call = match &request {
            PluginRequest::Start => PluginCall::Start,
            PluginRequest::List(_) => PluginCall::List,
            PluginRequest::Handle(..) => PluginCall::Handle,
            PluginRequest::OnEvents(_) => PluginCall::OnEvents,
        };
        let started = std::time::Instant::now();
        let span = tracing::span!(
            target: "conductor::trace",
            tracing::Level::TRACE,
            "plugin call",
            plugin = %self.name,
            call = call.as_str(),
        );
        let reply = tracing::Instrument::instrument(self.runtime.call(request, wait), span).await;
        let elapsed = started.elapsed();
        let error = reply.as_ref().err().map(|e| e as &dyn std::fmt::Display);
        self.stats.record(elapsed, error);
        if let Err(e @ Error::Internal(_)) = &reply {
            // A bug of the plugin's (an uncaught exception, carrying its traceback) or a trap:
            // the agent sees it too, the operator should not have to ask the agent.
            tracing::warn!(plugin = %self.name, call = call.as_str(), error = %e, "plugin call failed with an internal error");
        }
        self.metrics.called(call, elapsed.as_secs_f64(), reply.is_ok());
        if let Some(limit) = reply.as_ref().err().and_then(time_limit) {
            self.metrics.timed_out(call, limit);
        }
        self.metrics
            .set_instances(self.runtime.instances(), self.config.pool_size);
        reply
    }
}

impl Drop for PluginSource {
    fn drop(&mut self) {
        // A backstop: `stop` is the orderly way.
        self.events.close();
    }
}

#[async_trait]
impl Source for PluginSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn data_types(&self) -> &[DataType] {
        &self.data_types
    }

    fn sources(&self) -> &[String] {
        &self.file.description.sources
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CloudEvent>, Error> {
        match self.call(PluginRequest::List(options.clone()), Wait::Bounded).await? {
            PluginReply::Listed(events) => {
                let sources = self.capabilities.sources();
                for event in &events {
                    sources.sent(event);
                }
                Ok(events)
            }
            PluginReply::Done => Ok(vec![]),
        }
    }

    async fn handle(&self, identity: &Identity, event: CloudEvent) -> Result<(), Error> {
        self.call(PluginRequest::Handle(identity.clone(), event), Wait::Bounded)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_whose_bytes_are_not_the_verified_ones_is_refused_before_it_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plugin");
        std::fs::write(&file, b"\0asm not what was verified").unwrap();
        let verified = crate::oci::sha256_digest(b"\0asm what was verified");
        for kind in [PluginKind::Component, PluginKind::Native] {
            let e = PluginFile::read(kind, &file, Some(&verified))
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("not the verified {verified}")), "{kind:?}: {e}");
        }
    }

    fn description(sdk: &str) -> Description {
        let mut d = Description::new("p", "1.0.0")
            .sources(["s"])
            .data_types(["a.v1.things"]);
        d.sdk_version = sdk.into();
        d
    }

    #[test]
    fn sdk_versions_must_share_major_and_minor() {
        let grants = [Capability::Emit].into();
        let minor = SDK_VERSION.rsplit_once('.').map(|(m, _)| m).unwrap_or(SDK_VERSION);
        assert!(check(&description(&format!("{minor}.7")), &[Capability::Emit], &grants).is_ok());
        assert!(matches!(
            check(&description("0.2.0"), &[], &grants),
            Err(LoadError::Incompatible(_))
        ));
        assert!(matches!(
            check(&description("1.0.0"), &[], &grants),
            Err(LoadError::Incompatible(_))
        ));
    }

    #[test]
    fn notification_lanes_are_what_the_plugin_declares_within_the_pool_and_the_limit() {
        let config = |pool_size, limit| {
            let mut c: PluginConfig = toml::from_str("kind = \"component\"\nfile = \"p.wasm\"").unwrap();
            c.pool_size = pool_size;
            c.limits.concurrent_notifications = limit;
            c
        };
        let declares = |n| description(SDK_VERSION).concurrent_notifications(n);
        assert_eq!(lanes(&declares(0), &config(4, None)), 1, "undeclared: one at a time");
        assert_eq!(lanes(&declares(4), &config(4, None)), 4);
        assert_eq!(lanes(&declares(4), &config(2, None)), 2, "at most the pool");
        assert_eq!(lanes(&declares(4), &config(4, Some(1))), 1, "at most the limit");
        assert_eq!(lanes(&declares(1), &config(4, Some(3))), 1, "the limit raises nothing");

        // What the log says is what is applied, and why it is not what the plugin declares.
        assert_eq!(
            lanes_applied(&declares(0), &config(4, None)),
            "1 (the plugin declares 0: one on-events call at a time)"
        );
        assert_eq!(lanes_applied(&declares(1), &config(4, None)), "1");
        assert_eq!(lanes_applied(&declares(4), &config(4, None)), "4");
        assert_eq!(
            lanes_applied(&declares(4), &config(2, None)),
            "2 (the plugin declares 4; pool_size = 2)"
        );
        assert_eq!(
            lanes_applied(&declares(8), &config(4, Some(2))),
            "2 (the plugin declares 8; pool_size = 4, limits.concurrent_notifications = 2)"
        );
    }

    #[test]
    fn capabilities_must_be_granted() {
        let grants = [Capability::Emit, Capability::Log].into();
        let err = check(
            &description(SDK_VERSION),
            &[Capability::Emit, Capability::Kv, Capability::Timer],
            &grants,
        )
        .unwrap_err();
        match err {
            LoadError::Ungranted { missing, .. } => assert_eq!(missing, ["kv", "timer"]),
            other => panic!("{other}"),
        }
    }
}
