//! The `SourcePlugin` resources as a stream of snapshots: kube-runtime's watcher (list, then
//! watch, listing again when the position is gone, with backoff on errors), each complete state
//! sent as the resources ordered by creation. A missing CRD or a refusal by RBAC is logged once
//! and retried with backoff, so installing the CRD later needs no restart.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{SourcePlugin, api_resource};

/// The resources of the last complete state, in order; `None` until the first list is complete.
pub type Snapshot = Option<Arc<Vec<SourcePlugin>>>;

fn parse(object: &DynamicObject, replica: &str) -> SourcePlugin {
    let entry = object.data["status"]["replicas"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == replica))
        .cloned();
    let others = object.data["status"]["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let name = r["name"].as_str().filter(|n| *n != replica)?;
            Some((name.to_owned(), r["heartbeatTime"].as_str().map(str::to_owned)))
        })
        .collect();
    SourcePlugin {
        name: object.name_any(),
        generation: object.metadata.generation.unwrap_or(0),
        created: object
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        spec: object.data.get("spec").cloned().unwrap_or_default(),
        reported: entry,
        others,
    }
}

fn snapshot(objects: &BTreeMap<String, DynamicObject>, replica: &str) -> Arc<Vec<SourcePlugin>> {
    let mut all: Vec<SourcePlugin> = objects.values().map(|o| parse(o, replica)).collect();
    all.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
    Arc::new(all)
}

/// Watches the resources until `stop`, sending each complete state; `first_failure` runs once if
/// the watch fails before its first complete list (no CRD, or no permission yet).
pub async fn run(
    client: Client,
    replica: String,
    tx: watch::Sender<Snapshot>,
    first_failure: impl FnOnce() + Send,
    stop: CancellationToken,
) {
    let mut first_failure = Some(first_failure);
    let api: Api<DynamicObject> = Api::all_with(client, &api_resource());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut objects: BTreeMap<String, DynamicObject> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, DynamicObject>> = None;
    let mut failing = false;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let event = match next {
            None => return,
            Some(Err(e)) => {
                if !failing {
                    tracing::warn!(error = %e, "cannot watch SourcePlugin resources (is the CRD installed — deploy/components/source-plugins — and may conductor list them?); retrying with backoff");
                }
                failing = true;
                if tx.borrow().is_none()
                    && let Some(f) = first_failure.take()
                {
                    f();
                }
                continue;
            }
            Some(Ok(event)) => event,
        };
        if failing {
            tracing::info!("watching SourcePlugin resources");
            failing = false;
        }
        match event {
            watcher::Event::Init => listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(o) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(o.name_any(), o);
                }
            }
            watcher::Event::InitDone => {
                objects = listing.take().unwrap_or_default();
                tx.send_replace(Some(snapshot(&objects, &replica)));
            }
            watcher::Event::Apply(o) => {
                objects.insert(o.name_any(), o);
                tx.send_replace(Some(snapshot(&objects, &replica)));
            }
            watcher::Event::Delete(o) => {
                objects.remove(&o.name_any());
                tx.send_replace(Some(snapshot(&objects, &replica)));
            }
        }
    }
}
