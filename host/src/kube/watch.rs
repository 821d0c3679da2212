//! A plugin's watch: kube-runtime's watcher (list, then watch, listing again when the server says
//! the position is gone, with backoff on errors) feeding a reflector cache and the plugin's event
//! queue. When the watcher lists again, objects that vanished meanwhile are delivered as deleted,
//! so a restart of the API server or a `410 Gone` never leaves a silent gap. The host may also
//! ask for a list ([`Watch::relist`]) when the plugin could not take events it was given: every
//! object then arrives again. A watch asked to skip status-only changes (`kube.watch-with`) keeps
//! them in its cache but does not hand them to the plugin ([`only_status_changed`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use conductor_plugin_sdk::HostEvent;
use conductor_plugin_sdk::kube::{ApiResource, Change, WatchEvent, WatchOptions};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::api::api_resource;
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
    dyntype: kube::api::ApiResource,
    store: Store<DynamicObject>,
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
            let at = ObjectRef::new_with(name, self.dyntype.clone()).within(namespace);
            return self
                .store
                .get(&at)
                .filter(|o| labels.matches(o.labels()))
                .and_then(|o| serde_json::to_string(&*o).ok())
                .into_iter()
                .collect();
        }
        self.store
            .state()
            .iter()
            .filter(|o| namespace.is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns)))
            .filter(|o| {
                fields
                    .name
                    .as_deref()
                    .is_none_or(|n| o.metadata.name.as_deref() == Some(n))
            })
            .filter(|o| labels.matches(o.labels()))
            .filter_map(|o| serde_json::to_string(&**o).ok())
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
    let api: Api<DynamicObject> = match &key.namespace {
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
    let writer = reflector::store::Writer::new(ar.clone());
    let watch = Arc::new(Watch {
        key,
        labels,
        dyntype: ar,
        store: writer.as_reader(),
        ready: AtomicBool::new(false),
        relist: Notify::new(),
    });
    let task = forward(Arc::clone(&watch), api, config, writer, plugin, queue, stop);
    Ok((watch, task))
}

async fn forward(
    watch: Arc<Watch>,
    api: Api<DynamicObject>,
    config: watcher::Config,
    mut writer: reflector::store::Writer<DynamicObject>,
    metrics: PluginMetrics,
    queue: Arc<EventQueue>,
    stop: CancellationToken,
) {
    let resource = watch.key.resource.name();
    metrics.watch_started(&resource);
    // Two watches of one kind at two versions deliver the same objects: keep them apart.
    let queue_key = format!("{resource}@{}", watch.key.resource.version);
    // While the watcher lists: what the cache held before, less what the new list showed.
    let mut relisting: Option<HashMap<ObjectRef<DynamicObject>, Arc<DynamicObject>>> = None;
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
            // The object as the cache held it before this change, for a watch that skips
            // status-only changes.
            let before = match &event {
                watcher::Event::Apply(o) if watch.key.options.skip_status_only => {
                    watch.store.get(&ObjectRef::from_obj_with(o, watch.dyntype.clone()))
                }
                _ => None,
            };
            writer.apply_watcher_event(&event);
            let deliver: Vec<(Change, DynamicObject)> = match event {
                watcher::Event::Init => {
                    metrics.watch_relisted(&resource);
                    let before = watch.store.state();
                    relisting = Some(
                        before
                            .into_iter()
                            .map(|o| (ObjectRef::from_obj_with(&*o, watch.dyntype.clone()), o))
                            .collect(),
                    );
                    continue;
                }
                watcher::Event::InitApply(o) => {
                    if let Some(before) = relisting.as_mut() {
                        before.remove(&ObjectRef::from_obj_with(&o, watch.dyntype.clone()));
                    }
                    vec![(Change::Applied, o)]
                }
                watcher::Event::InitDone => {
                    watch.ready.store(true, Ordering::Release);
                    relisting
                        .take()
                        .into_iter()
                        .flatten()
                        .map(|(_, gone)| (Change::Deleted, (*gone).clone()))
                        .collect()
                }
                watcher::Event::Apply(o) if before.as_deref().is_some_and(|b| only_status_changed(b, &o)) => continue,
                watcher::Event::Apply(o) => vec![(Change::Applied, o)],
                watcher::Event::Delete(o) => vec![(Change::Deleted, o)],
            };
            for (change, object) in deliver {
                let key = EventKey::Object {
                    resource: queue_key.clone(),
                    namespace: object.metadata.namespace.clone().unwrap_or_default(),
                    name: object.metadata.name.clone().unwrap_or_default(),
                };
                let Ok(json) = serde_json::to_string(&object) else {
                    continue;
                };
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

/// Whether `after` differs from `before` only in its `status`, `metadata.resourceVersion` and
/// `metadata.managedFields`: what the API server changes when someone writes the status alone.
pub fn only_status_changed(before: &DynamicObject, after: &DynamicObject) -> bool {
    // Every field of the metadata is named, so a field k8s-openapi adds is compared or left out
    // here on purpose, not forgotten.
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = &before.metadata;
    let now = &after.metadata;
    let same_metadata = *annotations == now.annotations
        && *creation_timestamp == now.creation_timestamp
        && *deletion_grace_period_seconds == now.deletion_grace_period_seconds
        && *deletion_timestamp == now.deletion_timestamp
        && *finalizers == now.finalizers
        && *generate_name == now.generate_name
        && *generation == now.generation
        && *labels == now.labels
        && *name == now.name
        && *namespace == now.namespace
        && *owner_references == now.owner_references
        && *self_link == now.self_link
        && *uid == now.uid;
    same_metadata && before.types == after.types && same_but_status(&before.data, &after.data)
}

/// Whether two objects' fields other than `metadata` are the same, `status` aside.
fn same_but_status(before: &serde_json::Value, after: &serde_json::Value) -> bool {
    let (Some(before), Some(after)) = (before.as_object(), after.as_object()) else {
        return before == after;
    };
    let fields = |o: &'_ serde_json::Map<String, serde_json::Value>| o.keys().filter(|k| *k != "status").count();
    fields(before) == fields(after)
        && before
            .iter()
            .filter(|(k, _)| *k != "status")
            .all(|(k, v)| after.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(spec: serde_json::Value, status: serde_json::Value, resource_version: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "work.open-cluster-management.io/v1",
            "kind": "ManifestWork",
            "metadata": {
                "name": "w", "namespace": "c1", "uid": "u1", "generation": 1,
                "resourceVersion": resource_version, "labels": {"a": "b"},
                "managedFields": [{"manager": resource_version}],
            },
            "spec": spec,
            "status": status,
        }))
        .expect("a ManifestWork")
    }

    #[test]
    fn a_new_status_alone_is_a_status_only_change() {
        let before = work(serde_json::json!({"n": 1}), serde_json::json!({}), "1");
        let after = work(
            serde_json::json!({"n": 1}),
            serde_json::json!({"conditions": [{"type": "Applied"}]}),
            "2",
        );
        assert!(only_status_changed(&before, &after));
    }

    #[test]
    fn a_change_of_spec_or_metadata_is_not() {
        let before = work(serde_json::json!({"n": 1}), serde_json::json!({}), "1");
        let spec = work(serde_json::json!({"n": 2}), serde_json::json!({}), "2");
        assert!(!only_status_changed(&before, &spec));
        let mut generation = before.clone();
        generation.metadata.generation = Some(2);
        assert!(!only_status_changed(&before, &generation));
        let mut labels = before.clone();
        labels.metadata.labels = None;
        assert!(!only_status_changed(&before, &labels));
        let mut finalizers = before.clone();
        finalizers.metadata.finalizers = Some(vec!["f".into()]);
        assert!(!only_status_changed(&before, &finalizers));
        let mut deleting = before.clone();
        deleting.metadata.deletion_timestamp = serde_json::from_value(serde_json::json!("2026-12-06T00:00:00Z")).ok();
        assert!(deleting.metadata.deletion_timestamp.is_some());
        assert!(!only_status_changed(&before, &deleting));
        let mut field = before.clone();
        field.data["extra"] = serde_json::json!(true);
        assert!(!only_status_changed(&before, &field));
        assert!(!only_status_changed(&field, &before));
    }
}
