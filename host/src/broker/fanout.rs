//! Subscribers and delivery: every hub → agent event goes to every subscriber of its
//! (cluster name, data type), through a bounded queue per subscriber.
//!
//! Slow subscribers never block anyone: an event for a subscriber whose queue is full ends that
//! subscriber's stream (with `Unavailable`), so the agent reconnects and resyncs, while the others
//! keep receiving. Resync answers, which a Publish call is waiting for anyway, wait up to a bound
//! for queue space instead, so that a burst of many resources does not cut a healthy stream.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use bytes::Bytes;
use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::{EventType, OcmExtensions, TypeError};
use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::remembered::RememberedMetadata;
use crate::telemetry::broker_metrics::QueueDepths;
use crate::{telemetry::Metrics, wire::WireEvent};

/// Why an event could not be fanned out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FanoutError {
    #[error("cannot deliver event {id}: invalid type: {source}")]
    Type { id: String, source: TypeError },
    #[error("cannot deliver event {id}: {reason}")]
    ClusterName { id: String, reason: String },
}

/// Where sources hand the hub → agent events they produce.
pub trait EventSink: Send + Sync {
    /// Delivers `event` to its subscribers now; returns how many received it.
    fn emit(&self, event: &CloudEvent) -> Result<usize, FanoutError>;
}

struct Subscriber {
    id: Uuid,
    tx: mpsc::Sender<Bytes>,
    info: Arc<SubscriberInfo>,
}

/// Who a subscriber is, for the inspector.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    /// The authenticated user (empty when no authenticator is configured).
    pub user: String,
    /// The agent's address, when the connection has one.
    pub remote: Option<SocketAddr>,
}

/// What the inspector shows of a subscriber besides its queue.
#[derive(Debug)]
pub struct SubscriberInfo {
    pub peer: Peer,
    pub since: SystemTime,
    /// Events handed to the agent's stream (heartbeats not counted).
    sent: AtomicU64,
}

impl SubscriberInfo {
    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }
}

/// One live subscriber as the inspector sees it.
#[derive(Debug, Clone)]
pub struct SubscriberSnapshot {
    pub id: Uuid,
    pub cluster: String,
    pub data_type: String,
    pub user: String,
    pub remote: Option<SocketAddr>,
    pub since: SystemTime,
    pub events_sent: u64,
    /// Events queued for the stream and not yet taken by it.
    pub queue_depth: usize,
    pub queue_capacity: usize,
}

type ByDataType = HashMap<String, Vec<Subscriber>>;

/// The subscriber table and the delivery paths.
pub struct Fanout {
    subscribers: RwLock<HashMap<String, ByDataType>>,
    remembered: Mutex<RememberedMetadata>,
    metrics: Metrics,
    queue_size: usize,
}

/// A registered subscriber's end of its queue. Dropping it unregisters the subscriber.
pub struct Registration {
    pub id: Uuid,
    pub cluster: String,
    pub data_type: String,
    /// Encoded `CloudEvent` messages.
    pub rx: mpsc::Receiver<Bytes>,
    pub info: Arc<SubscriberInfo>,
    fanout: Arc<Fanout>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.fanout.unregister(&self.cluster, &self.data_type, self.id);
    }
}

impl Fanout {
    pub fn new(metrics: Metrics, queue_size: usize, remembered_metadata: usize) -> Arc<Self> {
        let fanout = Arc::new(Self {
            subscribers: RwLock::default(),
            remembered: Mutex::new(RememberedMetadata::new(remembered_metadata)),
            metrics,
            queue_size,
        });
        let source: std::sync::Weak<dyn QueueDepths> = Arc::downgrade(&fanout) as _;
        fanout.metrics.broker.queues(queue_size, source);
        fanout
    }

    /// Registers a subscriber for (cluster, data type); it receives events from now on.
    pub fn register(self: &Arc<Self>, cluster: &str, data_type: &str, peer: Peer) -> Registration {
        let (tx, rx) = mpsc::channel(self.queue_size);
        let id = Uuid::new_v4();
        let info = Arc::new(SubscriberInfo {
            peer,
            since: SystemTime::now(),
            sent: AtomicU64::new(0),
        });
        self.subscribers
            .write()
            .entry(cluster.to_owned())
            .or_default()
            .entry(data_type.to_owned())
            .or_default()
            .push(Subscriber {
                id,
                tx,
                info: Arc::clone(&info),
            });
        self.metrics.subscriber_added(cluster, data_type);
        Registration {
            id,
            cluster: cluster.to_owned(),
            data_type: data_type.to_owned(),
            rx,
            info,
            fanout: Arc::clone(self),
        }
    }

    fn unregister(&self, cluster: &str, data_type: &str, id: Uuid) {
        if self.remove(cluster, data_type, &[id]) > 0 {
            self.metrics.subscriber_removed(cluster, data_type);
        }
    }

    /// Drops subscribers from the table (their streams end once drained); returns how many.
    fn remove(&self, cluster: &str, data_type: &str, ids: &[Uuid]) -> usize {
        let mut table = self.subscribers.write();
        let Some(by_type) = table.get_mut(cluster) else {
            return 0;
        };
        let Some(subs) = by_type.get_mut(data_type) else {
            return 0;
        };
        let before = subs.len();
        subs.retain(|s| !ids.contains(&s.id));
        let removed = before - subs.len();
        if subs.is_empty() {
            by_type.remove(data_type);
            if by_type.is_empty() {
                table.remove(cluster);
            }
        }
        removed
    }

    /// The number of live subscribers, for tests and benchmarks.
    pub fn subscriber_count(&self) -> usize {
        self.subscribers
            .read()
            .values()
            .flat_map(|m| m.values())
            .map(Vec::len)
            .sum()
    }

    /// Every live subscriber, ordered by cluster, data type and time of subscribing.
    pub fn snapshot(&self) -> Vec<SubscriberSnapshot> {
        let table = self.subscribers.read();
        let mut all: Vec<SubscriberSnapshot> = table
            .iter()
            .flat_map(|(cluster, by_type)| {
                by_type.iter().flat_map(move |(data_type, subs)| {
                    subs.iter().map(move |s| SubscriberSnapshot {
                        id: s.id,
                        cluster: cluster.clone(),
                        data_type: data_type.clone(),
                        user: s.info.peer.user.clone(),
                        remote: s.info.peer.remote,
                        since: s.info.since,
                        events_sent: s.info.sent.load(Ordering::Relaxed),
                        queue_depth: s.tx.max_capacity() - s.tx.capacity(),
                        queue_capacity: s.tx.max_capacity(),
                    })
                })
            })
            .collect();
        drop(table);
        all.sort_by(|a, b| (&a.cluster, &a.data_type, a.since).cmp(&(&b.cluster, &b.data_type, b.since)));
        all
    }

    /// The last `metadata` and source delivered for a resource, if remembered.
    pub fn remembered(&self, cluster: &str, data_type: &str, resource_id: &str) -> Option<(String, String)> {
        self.remembered.lock().get(cluster, data_type, resource_id)
    }

    /// Forgets a resource's metadata (after the agent was told it is gone).
    pub fn forget(&self, cluster: &str, data_type: &str, resource_id: &str) {
        self.remembered.lock().forget(cluster, data_type, resource_id);
    }

    /// Remembers the metadata of an event a source produced (delivered or listed).
    pub fn remember(&self, cluster: &str, data_type: &str, event: &CloudEvent) {
        if let (Ok(id), Some(meta)) = (event.resource_id(), event.metadata_json()) {
            self.remembered.lock().put(cluster, data_type, id, &event.source, meta);
        }
    }

    fn target(event: &CloudEvent) -> Result<(String, String), FanoutError> {
        let ty = EventType::parse(&event.ty).map_err(|source| FanoutError::Type {
            id: event.id.clone(),
            source,
        })?;
        let cluster = event.cluster_name().map_err(|e| FanoutError::ClusterName {
            id: event.id.clone(),
            reason: e.to_string(),
        })?;
        Ok((cluster.to_owned(), ty.data_type.to_string()))
    }

    /// Delivers to the subscribers of the event's (cluster, data type), waiting up to `wait`
    /// for queue space; a subscriber still full after that is cut off.
    pub async fn deliver_waiting(&self, event: &CloudEvent, wait: Duration) -> Result<usize, FanoutError> {
        let (cluster, data_type) = Self::target(event)?;
        self.remember(&cluster, &data_type, event);
        let senders: Vec<(Uuid, mpsc::Sender<Bytes>)> = {
            let table = self.subscribers.read();
            match table.get(&cluster).and_then(|m| m.get(&data_type)) {
                Some(subs) => subs.iter().map(|s| (s.id, s.tx.clone())).collect(),
                None => return Ok(0),
            }
        };
        let msg = WireEvent::encode(event);
        let mut delivered = 0;
        let mut cut = Vec::new();
        for (id, tx) in senders {
            match tokio::time::timeout(wait, tx.send(msg.clone())).await {
                Ok(Ok(())) => delivered += 1,
                Ok(Err(_closed)) => {}
                Err(_elapsed) => cut.push(id),
            }
        }
        self.cut_off(&cluster, &data_type, &cut);
        Ok(delivered)
    }

    fn cut_off(&self, cluster: &str, data_type: &str, ids: &[Uuid]) {
        if ids.is_empty() {
            return;
        }
        let removed = self.remove(cluster, data_type, ids);
        for _ in 0..removed {
            self.metrics.subscriber_removed(cluster, data_type);
        }
        self.metrics.broker.cut_off(data_type, removed);
        tracing::warn!(
            cluster,
            data_type,
            subscribers = removed,
            "subscriber queue full: ending the stream so the agent reconnects and resyncs"
        );
    }
}

impl QueueDepths for Fanout {
    /// Per data type: the events waiting in every subscriber's queue, and in the fullest.
    fn queue_depths(&self) -> std::collections::BTreeMap<String, (usize, usize)> {
        let mut depths = std::collections::BTreeMap::<String, (usize, usize)>::new();
        for by_type in self.subscribers.read().values() {
            for (data_type, subs) in by_type {
                let entry = depths.entry(data_type.clone()).or_default();
                for s in subs {
                    let depth = s.tx.max_capacity() - s.tx.capacity();
                    entry.0 += depth;
                    entry.1 = entry.1.max(depth);
                }
            }
        }
        depths
    }
}

impl EventSink for Fanout {
    fn emit(&self, event: &CloudEvent) -> Result<usize, FanoutError> {
        let (cluster, data_type) = Self::target(event)?;
        self.remember(&cluster, &data_type, event);
        let mut delivered = 0;
        let mut cut = Vec::new();
        {
            let table = self.subscribers.read();
            let Some(subs) = table.get(&cluster).and_then(|m| m.get(&data_type)) else {
                return Ok(0);
            };
            let msg = WireEvent::encode(event);
            for s in subs {
                match s.tx.try_send(msg.clone()) {
                    Ok(()) => delivered += 1,
                    Err(mpsc::error::TrySendError::Full(_)) => cut.push(s.id),
                    Err(mpsc::error::TrySendError::Closed(_)) => {}
                }
            }
        }
        self.cut_off(&cluster, &data_type, &cut);
        Ok(delivered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::ocm::data_types::LEASES;

    fn lease_event(cluster: &str) -> CloudEvent {
        let mut e = CloudEvent::new("e1", "kube", format!("{LEASES}.spec.update_request"));
        e.set_extension("clustername", cluster);
        e
    }

    #[tokio::test]
    async fn events_reach_exactly_their_cluster_and_type() {
        let f = Fanout::new(Metrics::new(), 4, 10);
        let mut a = f.register("c1", LEASES, Peer::default());
        let mut b = f.register("c2", LEASES, Peer::default());
        let mut c = f.register("c1", "x.v1.other", Peer::default());
        assert_eq!(f.emit(&lease_event("c1")).unwrap(), 1);
        let got: crate::proto::CloudEvent = prost::Message::decode(a.rx.try_recv().unwrap()).unwrap();
        assert_eq!(got.id, "e1");
        assert!(b.rx.try_recv().is_err());
        assert!(c.rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_full_subscriber_is_cut_off_and_the_others_still_receive() {
        let f = Fanout::new(Metrics::new(), 2, 10);
        let slow = f.register("c1", LEASES, Peer::default());
        let mut fast = f.register("c1", LEASES, Peer::default());
        for _ in 0..5 {
            f.emit(&lease_event("c1")).unwrap();
            fast.rx.try_recv().unwrap();
        }
        assert_eq!(f.subscriber_count(), 1, "the slow subscriber was dropped");
        drop(slow);
        drop(fast);
        assert_eq!(f.subscriber_count(), 0);
    }

    #[tokio::test]
    async fn events_without_cluster_name_are_refused() {
        let f = Fanout::new(Metrics::new(), 2, 10);
        let e = CloudEvent::new("e1", "kube", format!("{LEASES}.spec.update_request"));
        assert!(matches!(f.emit(&e), Err(FanoutError::ClusterName { .. })));
    }
}
