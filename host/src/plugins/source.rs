//! A loaded plugin as the routing table sees it — a [`Source`] — and its lifecycle: loaded from its
//! file ([`PluginSource::load`]: checked, its first instance made), started
//! ([`PluginSource::start`]: its once-only work, then its host events delivered by its
//! [`Dispatcher`]) and stopped ([`PluginSource::stop`]: every task it started ended and awaited).

use std::sync::Arc;

use async_trait::async_trait;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};
use conductor_plugin_sdk::ocm::DataType;
use conductor_plugin_sdk::{CloudEvent, Error, HostEvent, Identity, ListOptions, Request};

use super::calls::PluginCalls;
use super::capabilities::{Backends, Capabilities, CapabilitiesParts, KvStore, Mode, grants};
use super::dispatch::Dispatcher;
use super::file::PluginFile;
use super::lanes;
use super::requests::Requests;
use super::runtime::{LoadError, Wait};
use super::tasks::Tasks;
use crate::broker::EventSink;
use crate::config::PluginConfig;
use crate::host_events::{BatchSize, EventQueue};
use crate::routes::Source;
use crate::telemetry::{Metrics, PluginMetrics};

/// What the host hands every plugin it loads.
#[derive(Clone)]
pub struct HostContext {
    pub sink: Arc<dyn EventSink>,
    pub backends: Backends,
    pub metrics: Metrics,
    pub mode: Mode,
}

/// A loaded plugin as the routing table sees it. What the admin inspector reads of it is in
/// `plugins::views`.
pub struct PluginSource {
    name: String,
    pub(super) file: PluginFile,
    pub(super) config: PluginConfig,
    data_types: Vec<DataType>,
    pub(super) calls: Arc<PluginCalls>,
    requests: Arc<Requests>,
    pub(super) capabilities: Arc<Capabilities>,
    pub(super) events: Arc<EventQueue>,
    dispatcher: Arc<Dispatcher>,
    tasks: Tasks,
    pub(super) metrics: PluginMetrics,
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
        let capabilities = Capabilities::new(CapabilitiesParts {
            plugin: name.to_owned(),
            grants,
            mode: host.mode,
            sink: Arc::clone(&host.sink),
            backends: host.backends.clone(),
            kv,
            events: Arc::clone(&events),
            tasks: tasks.clone(),
            exports,
        });
        capabilities.sources().declare(&file.description.sources);
        let runtime = file.start(&capabilities, config, config_json).await?;
        tracing::info!(
            plugin = name,
            file = %file.path.display(),
            kind = ?config.kind,
            version = %file.description.version,
            sources = ?file.description.sources,
            data_types = ?file.description.data_types,
            capabilities = ?file.capabilities.iter().map(|c| c.name()).collect::<Vec<_>>(),
            concurrent_notifications = %lanes::explained(&file.description, config),
            "plugin loaded"
        );
        let calls = Arc::new(PluginCalls::new(name, runtime, config.pool_size, metrics.clone()));
        let dispatcher = Arc::new(Dispatcher::new(
            Arc::clone(&calls),
            Arc::clone(&events),
            tasks.clone(),
            Arc::clone(&capabilities),
            lanes::allowed(&file.description, config),
            BatchSize {
                events: config.limits.event_batch,
                notifications: config.limits.notification_batch,
            },
        ));
        let requests = Arc::new(
            Requests::new(
                name,
                config
                    .limits
                    .request_calls
                    .unwrap_or(config.pool_size)
                    .min(config.pool_size),
                config.limits.request_batch,
                config.limits.acquire_timeout.0,
            )
            .taking_waiting(file.takes_waiting()),
        );
        Ok(Arc::new(Self {
            name: name.to_owned(),
            file,
            config: config.clone(),
            data_types,
            calls,
            requests,
            capabilities,
            events,
            dispatcher,
            tasks,
            metrics,
        }))
    }

    /// Runs the plugin's once-only `start` (on its first instance), then delivers its host events.
    pub async fn start(&self) -> Result<(), LoadError> {
        self.calls
            .call(PluginRequest::Start, Wait::Patient)
            .await
            .map_err(LoadError::Start)?;
        self.tasks.spawn(Arc::clone(&self.dispatcher).run());
        Ok(())
    }

    /// Runs the plugin's once-only `start` and delivers no host event afterwards: `conductor
    /// plugins test` hands the plugin the events of its script itself (what `start` sets up —
    /// timers, say — stays quiet until [`Self::stop`]).
    pub async fn start_without_events(&self) -> Result<(), Error> {
        self.calls.call(PluginRequest::Start, Wait::Patient).await.map(|_| ())
    }

    /// One `on-events` call with `events`, counted like the dispatcher's (for `conductor plugins
    /// test`).
    pub async fn on_events(&self, events: Vec<HostEvent>) -> Result<(), Error> {
        self.calls
            .call(PluginRequest::OnEvents(events), Wait::Patient)
            .await
            .map(|_| ())
    }

    /// The routes of a new registry, with the sources the plugin declares that route to another
    /// plugin (`foreign`): logs what routes elsewhere (see [`routing`](crate::plugins::routing)).
    pub fn routed(&self, owners: Arc<crate::routes::Owners>, foreign: &[&crate::routes::Foreign]) {
        self.capabilities.sources().routed(owners, foreign);
    }

    /// Stops everything the plugin runs in the background and waits for it; calls in flight
    /// finish on their own.
    pub async fn stop(&self) {
        self.events.close();
        self.tasks.stop().await;
        tracing::debug!(plugin = %self.name, "plugin stopped");
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
        match self
            .calls
            .call(PluginRequest::List(options.clone()), Wait::Bounded)
            .await?
        {
            PluginReply::Listed(events) => {
                let sources = self.capabilities.sources();
                for event in &events {
                    sources.sent(event);
                }
                Ok(events)
            }
            PluginReply::Done | PluginReply::Handled(_) => Ok(vec![]),
        }
    }

    async fn handle(&self, identity: &Identity, event: CloudEvent) -> Result<(), Error> {
        let request = Request {
            identity: identity.clone(),
            event,
        };
        self.requests.handle(&self.calls, request).await
    }
}
