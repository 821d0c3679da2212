//! The broker (`docs/protocol.md` §4–§6): subscriptions, the publish pipeline, spec resync, and
//! work that never reached its agent, sent again.

pub mod fanout;
mod queue;
mod remembered;
pub mod resync;
pub mod subscription;
mod undelivered;

use std::sync::Arc;

use conductor_plugin_sdk::ocm::{DataType, EventType, OcmExtensions, SubResource, actions, conditions};
use conductor_plugin_sdk::{CloudEvent, Error, Identity, ListOptions};
use tokio_util::sync::CancellationToken;

pub use fanout::{EventSink, Fanout, FanoutError, Peer, SubscriberSnapshot};
use resync::{Gone, ResyncError};
pub use subscription::Subscription;
use subscription::Timing;
pub use undelivered::Overdue;

use crate::config::BrokerConfig;
use crate::routes::{RouteError, RoutingTable};
use crate::telemetry::Metrics;

/// Why a subscription was refused. The messages are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscribeError {
    #[error("invalid subscription request: missing cluster name")]
    MissingClusterName,
    #[error("invalid subscription request: invalid data type {data_type:?}: {reason}")]
    InvalidDataType { data_type: String, reason: String },
}

/// Why a published event was not handled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    #[error("failed to respond resync spec request: {0}")]
    Resync(#[from] ResyncError),
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error("{0}")]
    Source(#[from] Error),
}

pub struct Broker {
    fanout: Arc<Fanout>,
    /// Replaced whole when plugins are reloaded; calls in flight keep the one they started with.
    routes: parking_lot::RwLock<Arc<RoutingTable>>,
    timing: Timing,
    shutdown: CancellationToken,
    /// Shared by every subscription (one handle each, not a copy of every metric's).
    metrics: Arc<Metrics>,
}

impl Broker {
    pub fn new(
        fanout: Arc<Fanout>,
        routes: Arc<RoutingTable>,
        config: &BrokerConfig,
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> Self {
        // Spawned here, in the runtime that serves; it ends with the broker's streams.
        let watch = fanout.watch_undelivered();
        let ended = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = watch => {}
                () = ended.cancelled() => {}
            }
        });
        undelivered_series(&fanout, &routes);
        Self {
            fanout,
            routes: parking_lot::RwLock::new(routes),
            timing: Timing {
                heartbeat: config.heartbeat(),
                stall_timeout: config.subscriber_stall_timeout.0,
            },
            shutdown,
            metrics: Arc::new(metrics),
        }
    }

    pub fn fanout(&self) -> &Arc<Fanout> {
        &self.fanout
    }

    /// The current routing table.
    pub fn routes(&self) -> Arc<RoutingTable> {
        Arc::clone(&self.routes.read())
    }

    /// Swaps in a new routing table (plugin reload). Subscriptions are untouched; the work a
    /// removed plugin sent is awaited no more.
    pub fn set_routes(&self, routes: Arc<RoutingTable>) {
        let (before, after) = (work_plugins(&self.routes()), work_plugins(&routes));
        self.fanout
            .forget_plugins(before.difference(&after).map(String::as_str));
        undelivered_series(&self.fanout, &routes);
        *self.routes.write() = routes;
    }

    /// Validates a subscription and registers it; events flow from the moment this returns.
    pub fn subscribe(&self, cluster_name: &str, data_type: &str, peer: Peer) -> Result<Subscription, SubscribeError> {
        if cluster_name.is_empty() {
            return Err(SubscribeError::MissingClusterName);
        }
        let parsed = DataType::parse(data_type).map_err(|e| SubscribeError::InvalidDataType {
            data_type: data_type.to_owned(),
            reason: e.to_string(),
        })?;
        let registration = self.fanout.register(cluster_name, &parsed.to_string(), peer);
        Ok(Subscription::new(
            &self.fanout,
            registration,
            self.timing,
            self.shutdown.clone(),
            Arc::clone(&self.metrics),
        ))
    }

    /// Handles an agent → hub event: a spec resync request is answered by the broker itself,
    /// everything else goes to the source that owns the event.
    pub async fn publish(&self, identity: &Identity, event: CloudEvent, ty: &EventType) -> Result<(), PublishError> {
        if ty.action == actions::RESYNC_REQUEST {
            return Ok(self.resync(&event, &ty.data_type).await?);
        }
        if ty.subresource == SubResource::Status {
            self.status_received(&event, &ty.data_type);
        }
        let source = Arc::clone(self.routes().route(&event, &ty.data_type)?);
        source.handle(identity, event).await?;
        Ok(())
    }

    /// An agent's status update (authenticated and authorized, whatever its plugin answers):
    /// the agent holds the spec it reports on, which is no longer awaited. One reporting the work
    /// deleted (`Deleted=True`) means the agent holds it no more: its remembered metadata, kept
    /// for a synthetic resync delete, is forgotten (else every work ever deleted would be kept,
    /// up to `broker.remembered_metadata`).
    fn status_received(&self, event: &CloudEvent, data_type: &DataType) {
        let data_type = data_type.to_string();
        if !undelivered::is_work(&data_type) {
            return;
        }
        if let (Ok(cluster), Ok(id)) = (event.cluster_name(), event.resource_id()) {
            let version = event.resource_version().ok();
            self.fanout.answered(cluster, &data_type, id, version);
            if reports_deleted(event) {
                self.fanout.forget(cluster, &data_type, id);
            }
        }
    }

    async fn resync(&self, event: &CloudEvent, data_type: &DataType) -> Result<(), ResyncError> {
        let span = tracing::span!(
            target: "conductor::trace",
            tracing::Level::TRACE,
            "resync",
            data_type = %data_type,
        );
        let answered = tracing::Instrument::instrument(self.answer_resync(event, data_type), span).await;
        self.metrics
            .broker
            .resynced(&data_type.to_string(), answered.as_ref().map(|n| *n).map_err(drop));
        answered.map(drop)
    }

    /// Answers a spec resync; returns how many events the sources listed and how many deletes
    /// were sent.
    async fn answer_resync(&self, event: &CloudEvent, data_type: &DataType) -> Result<(usize, usize), ResyncError> {
        let cluster = event.cluster_name().map_err(ResyncError::ClusterName)?.to_owned();
        let agent = resync::agent_versions(event)?;
        let sources: Vec<_> = self.routes().serving(data_type).cloned().collect();
        if sources.is_empty() {
            return Err(ResyncError::NoService(data_type.to_string()));
        }
        let options = ListOptions {
            cluster_name: cluster.clone(),
            data_type: data_type.to_string(),
        };
        let lists = futures::future::join_all(sources.iter().map(|s| s.list(&options))).await;
        let mut listed = Vec::new();
        for (source, list) in sources.iter().zip(lists) {
            listed.extend(list.map_err(|error| ResyncError::List {
                data_type: data_type.to_string(),
                plugin: source.name().to_owned(),
                error,
            })?);
        }
        let dt = data_type.to_string();
        let (answers, gone) = resync::plan(data_type, &cluster, listed, &agent);
        let (sent, deleted) = (answers.len(), gone.len());
        for event in answers {
            self.deliver(&event);
        }
        for id in gone {
            let gone = Gone {
                agent_version: agent.get(&id).copied().unwrap_or_default(),
                last_known: self.fanout.remembered(&cluster, &dt, &id),
                resource_id: id,
            };
            self.deliver(&resync::synthetic_delete(data_type, &cluster, &gone));
            self.fanout.forget(&cluster, &dt, &gone.resource_id);
        }
        tracing::debug!(
            cluster,
            data_type = dt,
            agent_held = agent.len(),
            sent,
            deleted,
            "answered spec resync"
        );
        Ok((sent, deleted))
    }

    /// Queues a resync answer like any emitted event: it folds into what waits for its
    /// resource, so an answer of many resources never waits for room.
    fn deliver(&self, event: &CloudEvent) {
        let event = crate::telemetry::traces::stamped(event);
        if let Err(e) = self.fanout.resync_answer(&event) {
            tracing::warn!(error = %e, "resync answer not delivered");
        }
    }
}

/// The undelivered series of every plugin serving a work data type, at 0 from the start.
fn undelivered_series(fanout: &Fanout, routes: &RoutingTable) {
    let plugins = work_plugins(routes);
    fanout.undelivered_series(plugins.iter().map(String::as_str));
}

/// The plugins serving a work data type.
fn work_plugins(routes: &RoutingTable) -> std::collections::BTreeSet<String> {
    undelivered::WORK_DATA_TYPES
        .iter()
        .filter_map(|data_type| DataType::parse(data_type).ok())
        .flat_map(|parsed| routes.serving(&parsed).map(|s| s.name().to_owned()).collect::<Vec<_>>())
        .collect()
}

/// Whether a status update reports its work deleted (the condition `Deleted=True`). Only a status
/// whose data names `Deleted` is parsed: the others, nearly all, cost a search of their bytes.
fn reports_deleted(event: &CloudEvent) -> bool {
    let Some(data) = &event.data else {
        return false;
    };
    if !data.windows(b"Deleted".len()).any(|w| w == b"Deleted") {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(data).is_ok_and(|status| conditions::is_deleted(&status))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES;

    use super::*;

    fn status(conditions: serde_json::Value) -> CloudEvent {
        let mut e = CloudEvent::new(
            "s",
            "cluster1-work-agent",
            format!("{MANIFEST_BUNDLES}.status.update_request"),
        );
        e.set_extension("clustername", "cluster1");
        e.set_extension("resourceid", "w1");
        e.set_extension("resourceversion", 1);
        e.set_json_data(&serde_json::json!({ "conditions": conditions }))
            .unwrap();
        e
    }

    #[tokio::test]
    async fn a_work_its_agent_reports_deleted_is_remembered_no_more() {
        let fanout = Arc::new(Fanout::new(Metrics::new(), 10, 10, Duration::from_secs(600)));
        let routes = Arc::new(RoutingTable::new(vec![], &BTreeMap::new()).unwrap());
        let broker = Broker::new(
            Arc::clone(&fanout),
            routes,
            &BrokerConfig::default(),
            Metrics::new(),
            CancellationToken::new(),
        );
        let mut spec = CloudEvent::new("e", "maestro", format!("{MANIFEST_BUNDLES}.spec.create_request"));
        spec.set_extension("resourceid", "w1");
        spec.set_extension("metadata", r#"{"name":"w"}"#);
        fanout.remember("cluster1", MANIFEST_BUNDLES, &spec);
        let identity = Identity {
            user: "agent".into(),
            groups: vec![],
        };
        let ty = |e: &CloudEvent| EventType::parse(&e.ty).unwrap();

        // Applied: still held by the agent (no route here: the plugin's answer does not matter).
        let applied = status(serde_json::json!([{"type": "Applied", "status": "True"}]));
        let _ = broker.publish(&identity, applied.clone(), &ty(&applied)).await;
        assert!(fanout.remembered("cluster1", MANIFEST_BUNDLES, "w1").is_some());
        // "Deleted" named but not true: still held.
        let not_yet = status(serde_json::json!([{"type": "Deleted", "status": "False"}]));
        let _ = broker.publish(&identity, not_yet.clone(), &ty(&not_yet)).await;
        assert!(fanout.remembered("cluster1", MANIFEST_BUNDLES, "w1").is_some());
        // Deleted: gone from the agent.
        let deleted = status(serde_json::json!([{"type": "Deleted", "status": "True"}]));
        let _ = broker.publish(&identity, deleted.clone(), &ty(&deleted)).await;
        assert!(fanout.remembered("cluster1", MANIFEST_BUNDLES, "w1").is_none());
    }
}
