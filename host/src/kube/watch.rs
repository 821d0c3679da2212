//! A plugin's watch: kube-runtime's watcher (list, then watch, listing again when the server says
//! the position is gone, with backoff on errors) feeding its cache ([`super::cache`]) and the
//! plugin's event queue. When the watcher lists again, objects that vanished meanwhile are
//! delivered as deleted, so a restart of the API server or a `410 Gone` never leaves a silent
//! gap. The host may also ask for a list ([`Watch::relist`]) when the plugin could not take events
//! it was given: every object then arrives again. A watch asked to skip status-only changes
//! (`kube.watch-with`) keeps them in its cache but does not hand them to the plugin
//! ([`super::status_only`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use conductor_plugin_sdk::HostEvent;
use conductor_plugin_sdk::kube::{ApiResource, WatchEvent, WatchOptions};
use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::api::api_resource;
use super::cache::{Cache, Filler};
use super::object::Object;
use super::selector::{FieldSelector, LabelSelector};
use crate::host_events::{EventKey, EventQueue};
use crate::telemetry::PluginMetrics;

/// What a watch was asked for (one watch per distinct key and plugin).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchKey {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub labels: Option<String>,
    pub fields: Option<String>,
    pub options: WatchOptions,
}

/// A running watch and its cache.
pub struct Watch {
    key: WatchKey,
    labels: LabelSelector,
    cache: Arc<Cache>,
    /// The cache holds a complete list (the first list finished).
    ready: AtomicBool,
    /// Asks the watch to list every object again.
    relist: Notify,
}

impl Watch {
    /// The resource watched, `<plural>.<group>` (what its events name).
    pub fn resource(&self) -> String {
        self.key.resource.name()
    }

    /// Lists every object again and delivers each (and, as deleted, what vanished since the
    /// last list), as at start.
    pub fn relist(&self) {
        self.relist.notify_one();
    }

    /// Whether this watch's cache holds every object a list of `resource` in `namespace` with
    /// these selectors would return.
    pub fn covers(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        labels: &LabelSelector,
        fields: Option<&str>,
    ) -> Option<FieldSelector> {
        if !self.ready.load(Ordering::Acquire) || self.key.resource != *resource || self.key.fields.is_some() {
            return None;
        }
        let namespace_covered = match (&self.key.namespace, namespace) {
            (None, _) => true,
            (Some(watched), Some(wanted)) => watched == wanted,
            (Some(_), None) => false,
        };
        if !namespace_covered || !labels.narrows(&self.labels) {
            return None;
        }
        FieldSelector::parse_cacheable(fields.unwrap_or_default())
    }

    /// The cached objects in `namespace` matching the selectors, as JSON.
    pub fn list(&self, namespace: Option<&str>, labels: &LabelSelector, fields: &FieldSelector) -> Vec<String> {
        let namespace = fields.namespace.as_deref().or(namespace);
        // One object by name (a plugin reading the object an agent's request is about): looked
        // up, not found among every object of the cache.
        if let (Some(name), Some(namespace)) = (fields.name.as_deref(), namespace) {
            return self
                .cache
                .get(namespace, name)
                .filter(|o| labels.matches(o.labels()))
                .map(|o| o.json().to_owned())
                .into_iter()
                .collect();
        }
        self.cache
            .matching(|o| {
                namespace.is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns))
                    && fields
                        .name
                        .as_deref()
                        .is_none_or(|n| o.metadata.name.as_deref() == Some(n))
                    && labels.matches(o.labels())
            })
            .iter()
            .map(|o| o.json().to_owned())
            .collect()
    }
}

/// Starts watching `key` for `plugin`: returns the watch (its cache fills as the first list
/// arrives) and the task that feeds `queue` until `stop`.
pub fn start(
    client: Client,
    key: WatchKey,
    plugin: PluginMetrics,
    queue: Arc<EventQueue>,
    stop: CancellationToken,
) -> Result<(Arc<Watch>, impl Future<Output = ()> + Send + 'static), conductor_plugin_sdk::Error> {
    let labels = LabelSelector::parse(key.labels.as_deref().unwrap_or_default())
        .map_err(|e| conductor_plugin_sdk::Error::Invalid(e.to_string()))?;
    let ar = api_resource(&key.resource);
    let api: Api<Object> = match &key.namespace {
        Some(ns) => Api::namespaced_with(client, ns, &ar),
        None => Api::all_with(client, &ar),
    };
    let mut config = watcher::Config::default();
    if let Some(l) = key.labels.as_deref().filter(|s| !s.is_empty()) {
        config = config.labels(l);
    }
    if let Some(f) = key.fields.as_deref().filter(|s| !s.is_empty()) {
        config = config.fields(f);
    }
    let watch = Arc::new(Watch {
        key,
        labels,
        cache: Arc::default(),
        ready: AtomicBool::new(false),
        relist: Notify::new(),
    });
    let task = forward(Arc::clone(&watch), api, config, plugin, queue, stop);
    Ok((watch, task))
}

async fn forward(
    watch: Arc<Watch>,
    api: Api<Object>,
    config: watcher::Config,
    metrics: PluginMetrics,
    queue: Arc<EventQueue>,
    stop: CancellationToken,
) {
    let resource = watch.key.resource.name();
    metrics.watch_started(&resource);
    // Two watches of one kind at two versions deliver the same objects: keep them apart.
    let queue_key = format!("{resource}@{}", watch.key.resource.version);
    let mut filler = Filler::new(Arc::clone(&watch.cache), watch.key.options.skip_status_only);
    let mut failing = false;
    // A new watcher lists first: at start, and each time a list is asked for.
    'watcher: loop {
        let stream = watcher(api.clone(), config.clone()).default_backoff();
        let mut stream = std::pin::pin!(stream);
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return,
                () = watch.relist.notified() => {
                    tracing::info!(plugin = metrics.plugin(), %resource, "listing every object again");
                    continue 'watcher;
                }
                next = stream.next() => next,
            };
            let event = match next {
                None => return,
                Some(Err(e)) => {
                    if !failing {
                        tracing::warn!(plugin = metrics.plugin(), %resource, error = %e, "watch failed; resuming with backoff");
                        metrics.watch_restarted(&resource);
                    }
                    failing = true;
                    continue;
                }
                Some(Ok(event)) => event,
            };
            if failing {
                tracing::info!(plugin = metrics.plugin(), %resource, "watch resumed");
                failing = false;
            }
            if matches!(event, watcher::Event::Init) {
                metrics.watch_relisted(&resource);
            }
            let listed = matches!(event, watcher::Event::InitDone);
            let deliver = filler.apply(event);
            // Ready once the cache holds the whole list.
            if listed {
                watch.ready.store(true, Ordering::Release);
            }
            for (change, object) in deliver {
                let key = EventKey::Object {
                    resource: queue_key.clone(),
                    namespace: object.metadata.namespace.clone().unwrap_or_default(),
                    name: object.metadata.name.clone().unwrap_or_default(),
                };
                let json = object.json().to_owned();
                let event = HostEvent::Watch(WatchEvent {
                    resource: resource.clone(),
                    change,
                    object: json,
                });
                let pushed = tokio::select! {
                    _ = stop.cancelled() => return,
                    pushed = queue.push(key, event) => pushed,
                };
                if !pushed {
                    return;
                }
            }
        }
    }
}
