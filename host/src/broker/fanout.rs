//! Subscribers and delivery: every hub → agent event goes to every subscriber of its
//! (cluster name, data type), through a queue per subscriber that holds at most one event per
//! resource, its latest state (`queue.rs`).
//!
//! Nobody waits for a subscriber: events are queued without waiting, and a burst only makes the
//! waiting states newer, never the queue longer than what the cluster holds. A stream ends only
//! when its agent stops reading: a subscriber that has taken nothing from its non-empty queue
//! for `broker.subscriber_stall_timeout` is ended (with `Unavailable`), so the agent reconnects
//! and resyncs, while the others keep receiving.
//!
//! The spec events of work data types a plugin sent to a connected agent are recorded until the
//! agent answers with a status; what is still unanswered after `broker.undelivered_after` is
//! counted, listed and queued again, once (`undelivered.rs`). The records have a lock of their
//! own, taken after the subscriber table's and never around a queue.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::{EventType, OcmExtensions, TypeError};
use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use super::queue::{Outgoing, Progress, Pushed, SubscriberQueue};
use super::remembered::RememberedMetadata;
use super::undelivered::{self, Overdue, Undelivered};
use crate::telemetry::Metrics;
use crate::telemetry::broker_metrics::QueueDepths;

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
    /// Delivers `event`, sent by the plugin named `from`, to its subscribers now; returns how
    /// many received it.
    fn emit(&self, from: &str, event: &CloudEvent) -> Result<usize, FanoutError>;
}

struct Subscriber {
    id: Uuid,
    queue: Arc<SubscriberQueue>,
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
    /// Events queued for the stream and not yet taken by it: one per resource at most.
    pub queue_depth: usize,
    /// `broker.subscriber_queue_size`: a reference depth, not a limit.
    pub queue_capacity: usize,
}

type ByDataType = HashMap<String, Vec<Subscriber>>;

/// The subscriber table and the delivery paths.
pub struct Fanout {
    subscribers: RwLock<HashMap<String, ByDataType>>,
    remembered: Mutex<RememberedMetadata>,
    /// Work sent and not answered yet. Locked inside the subscriber table's lock, never the
    /// other way round.
    undelivered: Mutex<Undelivered>,
    metrics: Metrics,
    /// `broker.subscriber_queue_size`, shown beside the depths.
    queue_size: usize,
}

/// A registered subscriber's end of its queue. Dropping it unregisters the subscriber.
pub struct Registration {
    pub id: Uuid,
    pub cluster: String,
    pub data_type: String,
    /// Encoded `CloudEvent` messages.
    pub queue: Arc<SubscriberQueue>,
    pub info: Arc<SubscriberInfo>,
    fanout: Arc<Fanout>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.fanout.unregister(&self.cluster, &self.data_type, self.id);
    }
}

impl Fanout {
    /// The fan-out with `broker.subscriber_queue_size`, `broker.remembered_metadata` and
    /// `broker.undelivered_after`; [`Self::watch_undelivered`] looks at the deadline.
    pub fn new(
        metrics: Metrics,
        queue_size: usize,
        remembered_metadata: usize,
        undelivered_after: Duration,
    ) -> Arc<Self> {
        let fanout = Arc::new(Self {
            subscribers: RwLock::default(),
            remembered: Mutex::new(RememberedMetadata::new(remembered_metadata)),
            undelivered: Mutex::new(Undelivered::new(undelivered_after)),
            metrics,
            queue_size,
        });
        let source: std::sync::Weak<dyn QueueDepths> = Arc::downgrade(&fanout) as _;
        fanout.metrics.broker.queues(queue_size, source);
        fanout
    }

    /// Registers a subscriber for (cluster, data type); it receives events from now on.
    pub fn register(self: &Arc<Self>, cluster: &str, data_type: &str, peer: Peer) -> Registration {
        let queue = Arc::new(SubscriberQueue::new());
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
                queue: Arc::clone(&queue),
                info: Arc::clone(&info),
            });
        self.metrics.subscriber_added(cluster, data_type);
        Registration {
            id,
            cluster: cluster.to_owned(),
            data_type: data_type.to_owned(),
            queue,
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
            // Its agent resyncs when it connects again: what it has not answered is not awaited.
            self.undelivered.lock().disconnected(cluster, data_type);
            self.sync_undelivered_gauges();
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
                        queue_depth: s.queue.len(),
                        queue_capacity: self.queue_size,
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

    /// Forgets a resource the agent holds no more (it reported it deleted, or was told it is
    /// gone): its metadata, and the version it answered.
    pub fn forget(&self, cluster: &str, data_type: &str, resource_id: &str) {
        self.remembered.lock().forget(cluster, data_type, resource_id);
        if undelivered::is_work(data_type) {
            self.undelivered.lock().gone(cluster, data_type, resource_id);
        }
    }

    /// Remembers the metadata of an event a source produced (delivered or listed).
    pub fn remember(&self, cluster: &str, data_type: &str, event: &CloudEvent) {
        if let (Ok(id), Some(meta)) = (event.resource_id(), event.metadata_json()) {
            self.remembered.lock().put(cluster, data_type, id, &event.source, meta);
        }
    }

    /// An agent of `cluster` reported the status of a resource of `data_type` (a work data
    /// type) at `version`: it is no longer awaited.
    pub fn answered(&self, cluster: &str, data_type: &str, resource_id: &str, version: Option<i64>) {
        if self
            .undelivered
            .lock()
            .answered(cluster, data_type, resource_id, version)
        {
            self.sync_undelivered_gauges();
        }
    }

    /// The work sent and still unanswered past `broker.undelivered_after`, for the inspector.
    pub fn undelivered(&self) -> Vec<Overdue> {
        self.undelivered.lock().overdue()
    }

    /// Makes the undelivered series of `plugins` exist (at 0 until something is overdue).
    pub fn undelivered_series<'a>(&self, plugins: impl IntoIterator<Item = &'a str>) {
        for plugin in plugins {
            self.metrics.broker.undelivered_series(plugin);
        }
    }

    /// `plugins` are gone (a reload removed them): their records are dropped and their
    /// undelivered series leave the scrape.
    pub fn forget_plugins<'a>(&self, plugins: impl IntoIterator<Item = &'a str>) {
        let mut undelivered = self.undelivered.lock();
        for plugin in plugins {
            undelivered.forget(plugin);
            self.metrics.broker.remove_undelivered_series(plugin);
        }
    }

    /// Looks at the undelivered records every eighth of `broker.undelivered_after` (at most
    /// every 30 s), queuing what became overdue again; returns once the fan-out is gone.
    pub fn watch_undelivered(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
        let fanout = Arc::downgrade(self);
        let every = undelivered::look_every(self.undelivered.lock().after());
        async move {
            let mut looks = tokio::time::interval(every);
            looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                looks.tick().await;
                let Some(fanout) = fanout.upgrade() else { return };
                fanout.resend_overdue();
            }
        }
    }

    /// Marks the records past the deadline overdue and queues those never re-sent again for the
    /// subscribers of their cluster and data type.
    fn resend_overdue(&self) {
        let table = self.subscribers.read();
        let connected = |cluster: &str, data_type: &str| {
            table
                .get(cluster)
                .and_then(|m| m.get(data_type))
                .is_some_and(|subs| !subs.is_empty())
        };
        let resend = self
            .undelivered
            .lock()
            .look((tokio::time::Instant::now(), SystemTime::now()), connected);
        self.sync_undelivered_gauges();
        for r in resend {
            let Some(subs) = table.get(&r.cluster).and_then(|m| m.get(&r.data_type)) else {
                continue;
            };
            let queued = subs.iter().filter(|s| s.queue.push(&r.event) != Pushed::Ended).count();
            self.metrics.broker.resent(&r.plugin);
            tracing::warn!(
                plugin = %r.plugin,
                cluster = %r.cluster,
                data_type = %r.data_type,
                resource = r.event.resource().map(|id| &**id),
                resource_version = r.event.version(),
                subscribers = queued,
                after = %conductor_plugin_sdk::duration::format(self.undelivered.lock().after()),
                "work unanswered by its agent (no status): sent again, once"
            );
        }
    }

    /// Sets the undelivered gauges to the records' counts, when they changed.
    fn sync_undelivered_gauges(&self) {
        if let Some(counts) = self.undelivered.lock().take_changed() {
            for (plugin, n) in counts {
                self.metrics.broker.undelivered(&plugin, n);
            }
        }
    }

    /// Queues a resync answer for every subscriber of its (cluster, data type), like an emitted
    /// event; not awaited (the agent asked for it, and resyncs again when it reconnects).
    pub fn resync_answer(&self, event: &CloudEvent) -> Result<usize, FanoutError> {
        self.queue(event, None)
    }

    /// Queues the event for every subscriber of its (cluster, data type), folded into the state
    /// of its resource already waiting there; never waits. A work event sent `from` a plugin to
    /// at least one subscriber is awaited. Its metadata is remembered only when a subscriber took
    /// it: only an agent that got a resource can hold it when the source no longer does (a
    /// replica that sends to nobody — its clusters' agents on another — remembered every resource
    /// it was told of, and forgot them only as `broker.remembered_metadata` evicted them).
    fn queue(&self, event: &CloudEvent, from: Option<&str>) -> Result<usize, FanoutError> {
        let (cluster, data_type) = Self::target(event)?;
        let (mut delivered, mut superseded) = (0, 0);
        {
            let table = self.subscribers.read();
            let Some(subs) = table.get(&cluster).and_then(|m| m.get(&data_type)) else {
                return Ok(0);
            };
            let outgoing = Outgoing::new(event);
            for s in subs {
                match s.queue.push(&outgoing) {
                    Pushed::Queued => delivered += 1,
                    Pushed::Replaced | Pushed::Stale => {
                        delivered += 1;
                        superseded += 1;
                    }
                    Pushed::Ended => {}
                }
            }
            if let Some(from) = from
                && delivered > 0
                && undelivered::is_work(&data_type)
            {
                // Under the table's lock: its subscribers cannot all leave (and drop its
                // records) before it is recorded.
                let now = (tokio::time::Instant::now(), SystemTime::now());
                self.undelivered.lock().sent(&cluster, &data_type, from, outgoing, now);
                self.sync_undelivered_gauges();
            }
        }
        if delivered > 0 {
            self.remember(&cluster, &data_type, event);
        }
        if superseded > 0 {
            self.metrics.broker.superseded(&data_type, superseded);
        }
        Ok(delivered)
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

    /// Watches a subscriber's progress: once it has taken nothing from its non-empty queue for
    /// `timeout`, its queue is ended and it leaves the table (its stream ends with
    /// `Unavailable`). Looks every quarter of `timeout`, so a stall is seen within 1¼ of it;
    /// returns when the subscriber is ended or gone.
    pub fn watch_stall(
        self: &Arc<Self>,
        registration: &Registration,
        timeout: Duration,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let fanout = Arc::downgrade(self);
        let queue = Arc::downgrade(&registration.queue);
        let (cluster, data_type, id) = (
            registration.cluster.clone(),
            registration.data_type.clone(),
            registration.id,
        );
        async move {
            let mut looks = tokio::time::interval((timeout / 4).max(Duration::from_millis(1)));
            looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut previous: Option<(tokio::time::Instant, Progress)> = None;
            let mut stalled_since = None;
            loop {
                let now = looks.tick().await;
                let Some(progress) = queue.upgrade().map(|q| q.progress()) else {
                    return;
                };
                match previous {
                    // Nothing taken since the last look, and something waits: stalled since the
                    // last look if something waited then too (the queue cannot have emptied
                    // without a take), else counted from now (it filled after the last look).
                    Some((then, before)) if progress.waiting > 0 && progress.taken == before.taken => {
                        let since = *stalled_since.get_or_insert(if before.waiting > 0 { then } else { now });
                        if now.duration_since(since) >= timeout {
                            if let (Some(fanout), Some(queue)) = (fanout.upgrade(), queue.upgrade()) {
                                fanout.end_stalled(&cluster, &data_type, id, &queue, timeout);
                            }
                            return;
                        }
                    }
                    _ => stalled_since = None,
                }
                previous = Some((now, progress));
            }
        }
    }

    fn end_stalled(&self, cluster: &str, data_type: &str, id: Uuid, queue: &SubscriberQueue, timeout: Duration) {
        let Some(dropped) = queue.end() else { return };
        if self.remove(cluster, data_type, &[id]) == 0 {
            return;
        }
        self.metrics.subscriber_removed(cluster, data_type);
        self.metrics.broker.cut_off(data_type, 1);
        tracing::warn!(
            cluster,
            data_type,
            subscription = %id,
            waiting = dropped,
            timeout = %conductor_plugin_sdk::duration::format(timeout),
            "subscriber stopped reading: ending the stream so the agent reconnects and resyncs"
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
                    let depth = s.queue.len();
                    entry.0 += depth;
                    entry.1 = entry.1.max(depth);
                }
            }
        }
        depths
    }
}

impl EventSink for Fanout {
    /// Queues the event for every subscriber of its (cluster, data type), folded into the state
    /// of its resource already waiting there; never waits. A work event is awaited until its
    /// agent answers.
    fn emit(&self, from: &str, event: &CloudEvent) -> Result<usize, FanoutError> {
        self.queue(event, Some(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::ocm::data_types::{LEASES, MANIFEST_BUNDLES};
    use conductor_plugin_sdk::ocm::{DataType, SubResource, actions};
    use std::collections::BTreeMap;
    use std::task::{Context, Poll};

    const AFTER: Duration = Duration::from_secs(600);

    fn lease_event(cluster: &str) -> CloudEvent {
        let mut e = CloudEvent::new("e1", "kube", format!("{LEASES}.spec.update_request"));
        e.set_extension("clustername", cluster);
        e
    }

    fn work(id: &str, version: i64, deleting: bool) -> CloudEvent {
        let dt = DataType::parse(MANIFEST_BUNDLES).unwrap();
        let mut e = CloudEvent::new(
            format!("{id}/{version}"),
            "maestro",
            dt.event_type(SubResource::Spec, actions::UPDATE_REQUEST),
        );
        e.set_extension("clustername", "c1");
        e.set_extension("resourceid", id);
        e.set_resource_version(&dt, version);
        if deleting {
            e.set_extension("deletiontimestamp", chrono::Utc::now());
        } else {
            e.data = Some(br#"{"manifests":[]}"#.to_vec());
        }
        e
    }

    /// (resource id, version, deleting, has data) of an encoded event.
    fn decoded(bytes: bytes::Bytes) -> (String, i64, bool, bool) {
        let e = crate::wire::decode(&prost::Message::decode(bytes).unwrap()).unwrap();
        (
            e.resource_id().unwrap().to_owned(),
            e.resource_version().unwrap(),
            e.deletion_timestamp().is_some(),
            e.data.is_some(),
        )
    }

    fn taken(registration: &Registration) -> Vec<(String, i64, bool, bool)> {
        std::iter::from_fn(|| registration.queue.try_take())
            .map(decoded)
            .collect()
    }

    fn ended(registration: &Registration) -> bool {
        let waker = futures::task::noop_waker();
        registration.queue.poll_take(&mut Context::from_waker(&waker)) == Poll::Ready(None)
    }

    #[tokio::test]
    async fn events_reach_exactly_their_cluster_and_type() {
        let f = Fanout::new(Metrics::new(), 4, 10, AFTER);
        let a = f.register("c1", LEASES, Peer::default());
        let b = f.register("c2", LEASES, Peer::default());
        let c = f.register("c1", "x.v1.other", Peer::default());
        assert_eq!(f.emit("maestro", &lease_event("c1")).unwrap(), 1);
        let got: crate::proto::CloudEvent = prost::Message::decode(a.queue.try_take().unwrap()).unwrap();
        assert_eq!(got.id, "e1");
        assert!(b.queue.try_take().is_none());
        assert!(c.queue.try_take().is_none());
    }

    /// The metadata of a work is remembered once an agent got it: a replica whose clusters'
    /// agents are elsewhere remembers nothing of the works it is told of.
    #[tokio::test]
    async fn only_what_a_subscriber_took_is_remembered() {
        let f = Fanout::new(Metrics::new(), 4, 10, AFTER);
        let mut nobodys = work("w1", 1, false);
        nobodys.set_extension("metadata", r#"{"name":"w1"}"#);
        assert_eq!(f.emit("maestro", &nobodys).unwrap(), 0);
        assert_eq!(f.remembered("c1", MANIFEST_BUNDLES, "w1"), None);
        let _sub = f.register("c1", MANIFEST_BUNDLES, Peer::default());
        assert_eq!(f.emit("maestro", &nobodys).unwrap(), 1);
        assert_eq!(
            f.remembered("c1", MANIFEST_BUNDLES, "w1"),
            Some(("maestro".to_owned(), r#"{"name":"w1"}"#.to_owned()))
        );
    }

    /// Issue 46: ten thousand events for a subscriber that is not reading end nothing and lose
    /// no final state.
    #[tokio::test(start_paused = true)]
    async fn a_burst_for_a_subscriber_that_is_not_reading_keeps_every_final_state() {
        let f = Fanout::new(Metrics::new(), 100, 10, AFTER);
        let sub = f.register("c1", MANIFEST_BUNDLES, Peer::default());
        let watch = tokio::spawn(f.watch_stall(&sub, Duration::from_secs(60)));
        // 2,500 works, four states each, the works' changes interleaved: created (v1), updated
        // twice (v2, v3), then updated again (v4) or, every third, deleted (v4, no data).
        let ids: Vec<String> = (0..2_500).map(|i| format!("w{i}")).collect();
        let mut emitted = 0;
        for version in 1..=4 {
            for (i, id) in ids.iter().enumerate() {
                let deleting = version == 4 && i % 3 == 0;
                assert_eq!(f.emit("maestro", &work(id, version, deleting)).unwrap(), 1);
                emitted += 1;
            }
        }
        assert_eq!(emitted, 10_000);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(f.subscriber_count(), 1, "the stream was not ended");
        assert_eq!(sub.queue.len(), 2_500, "one waiting event per work");
        assert_eq!(f.snapshot()[0].queue_depth, 2_500);
        let got = taken(&sub);
        let want: Vec<_> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), 4, i % 3 == 0, i % 3 != 0))
            .collect();
        assert_eq!(got, want, "the latest state of every work, in the order first seen");
        assert!(!ended(&sub));
        assert!(!watch.is_finished());
        let metrics = f.metrics.render();
        assert!(
            metrics.contains(&format!(
                "conductor_subscriber_events_superseded_total{{data_type=\"{MANIFEST_BUNDLES}\"}} 7500"
            )),
            "{metrics}"
        );
    }

    #[tokio::test]
    async fn a_reader_gets_every_resource_in_order_across_interleavings() {
        let f = Fanout::new(Metrics::new(), 100, 10, AFTER);
        let sub = f.register("c1", MANIFEST_BUNDLES, Peer::default());
        let mut next = [1_i64; 50];
        let mut seen: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        let mut rng = 7_u64;
        while next.iter().any(|v| *v <= 20) {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let r = usize::try_from(rng >> 33).unwrap();
            let i = r % next.len();
            if next[i] <= 20 {
                f.emit("maestro", &work(&format!("w{i}"), next[i], false)).unwrap();
                next[i] += 1;
            }
            // The reader takes a varying share of what waits.
            for _ in 0..(r / 64) % 3 {
                if let Some(bytes) = sub.queue.try_take() {
                    let (id, version, ..) = decoded(bytes);
                    seen.entry(id).or_default().push(version);
                }
            }
        }
        for (id, version, ..) in taken(&sub) {
            seen.entry(id).or_default().push(version);
        }
        assert_eq!(seen.len(), 50);
        for (id, versions) in seen {
            assert!(versions.is_sorted_by(|a, b| a < b), "{id}: {versions:?}");
            assert_eq!(versions.last(), Some(&20), "{id}: {versions:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_subscriber_that_stops_reading_is_ended_after_the_deadline_and_only_it() {
        let f = Fanout::new(Metrics::new(), 2, 10, AFTER);
        let timeout = Duration::from_secs(1);
        let stuck = f.register("c1", LEASES, Peer::default());
        let reader = f.register("c1", LEASES, Peer::default());
        let slow = f.register("c1", LEASES, Peer::default());
        let watches: Vec<_> = [&stuck, &reader, &slow]
            .into_iter()
            .map(|r| tokio::spawn(f.watch_stall(r, timeout)))
            .collect();
        // A backlog for the slow one, which takes one event every 600 ms.
        for i in 0..20 {
            f.emit("maestro", &work_lease(&format!("backlog{i}"))).unwrap();
        }
        assert_eq!(reader.queue.len(), 20);
        assert_eq!(std::iter::from_fn(|| reader.queue.try_take()).count(), 20);
        let started = tokio::time::Instant::now();
        let mut ended_after = None;
        for step in 0..40 {
            f.emit("maestro", &work_lease(&format!("l{step}"))).unwrap();
            assert!(reader.queue.try_take().is_some());
            if step % 6 == 5 {
                assert!(slow.queue.try_take().is_some());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            if ended_after.is_none() && f.subscriber_count() == 2 {
                ended_after = Some(started.elapsed());
            }
        }
        let ended_after = ended_after.expect("the stuck subscriber was ended");
        assert!(
            ended_after >= timeout && ended_after <= timeout * 3 / 2,
            "ended after {ended_after:?}"
        );
        assert!(ended(&stuck) && stuck.queue.is_empty(), "what waited was dropped");
        assert!(!ended(&reader) && !ended(&slow));
        let [stuck_watch, reader_watch, slow_watch] = <[_; 3]>::try_from(watches).ok().unwrap();
        assert!(stuck_watch.is_finished());
        assert!(!reader_watch.is_finished() && !slow_watch.is_finished());
        assert!(f.metrics.render().contains(&format!(
            "conductor_subscribers_cut_off_total{{data_type=\"{LEASES}\"}} 1"
        )));
        // Gone subscribers end their watch.
        drop((reader, slow));
        tokio::time::sleep(timeout).await;
        assert!(reader_watch.is_finished() && slow_watch.is_finished());
    }

    fn work_lease(id: &str) -> CloudEvent {
        let mut e = lease_event("c1");
        e.set_extension("resourceid", id);
        e
    }

    fn gauge_reads(f: &Fanout, plugin: &str) -> String {
        let metrics = f.metrics.render();
        let line = |name: &str| {
            metrics
                .lines()
                .find(|l| l.starts_with(&format!("{name}{{plugin=\"{plugin}\"}} ")))
                .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
                .unwrap_or_else(|| "absent".to_owned())
        };
        format!(
            "{} {}",
            line("conductor_undelivered_resources"),
            line("conductor_undelivered_resent_total")
        )
    }

    /// Issue 46: a work the agent never answered is counted, listed and sent again once, after
    /// the deadline; one it answered is not.
    #[tokio::test(start_paused = true)]
    async fn unanswered_work_is_sent_again_once_after_the_deadline() {
        let after = Duration::from_secs(2);
        let f = Fanout::new(Metrics::new(), 100, 10, after);
        let watch = tokio::spawn(f.watch_undelivered());
        let sub = f.register("c1", MANIFEST_BUNDLES, Peer::default());
        f.emit("maestro", &work("lost", 1, false)).unwrap();
        f.emit("maestro", &work("answered", 1, false)).unwrap();
        // Neither a lease (no status is awaited) nor a resync answer is awaited.
        f.register("c1", LEASES, Peer::default());
        f.emit("kube", &work_lease("l1")).unwrap();
        f.resync_answer(&work("asked", 1, false)).unwrap();
        assert_eq!(taken(&sub).len(), 3);
        f.answered("c1", MANIFEST_BUNDLES, "answered", Some(1));
        assert_eq!(gauge_reads(&f, "maestro"), "0 absent");

        tokio::time::sleep(after - Duration::from_millis(300)).await;
        assert!(taken(&sub).is_empty(), "not before the deadline");
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(
            taken(&sub),
            [("lost".to_owned(), 1, false, true)],
            "the same version, again"
        );
        assert_eq!(gauge_reads(&f, "maestro"), "1 1");
        assert_eq!(gauge_reads(&f, "kube"), "absent absent");
        let listed = f.undelivered();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (
                listed[0].plugin.as_str(),
                listed[0].cluster.as_str(),
                listed[0].resource_id.as_str()
            ),
            ("maestro", "c1", "lost")
        );
        assert!(listed[0].resent_at.is_some());

        // Never a third copy; counted until answered.
        tokio::time::sleep(after * 5).await;
        assert!(taken(&sub).is_empty(), "sent again once only");
        assert_eq!(gauge_reads(&f, "maestro"), "1 1");
        f.answered("c1", MANIFEST_BUNDLES, "lost", Some(1));
        assert_eq!(gauge_reads(&f, "maestro"), "0 1");
        assert!(f.undelivered().is_empty());
        assert!(!watch.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn work_of_a_cluster_whose_agent_left_is_not_awaited() {
        let after = Duration::from_secs(2);
        let f = Fanout::new(Metrics::new(), 100, 10, after);
        let _watch = tokio::spawn(f.watch_undelivered());
        // Sent to nobody: not awaited.
        f.emit("maestro", &work("nobody", 1, false)).unwrap();
        let first = f.register("c1", MANIFEST_BUNDLES, Peer::default());
        f.emit("maestro", &work("a", 1, false)).unwrap();
        // The agent reconnects: the old stream goes after the new one came, so it is awaited.
        let second = f.register("c1", MANIFEST_BUNDLES, Peer::default());
        drop(first);
        tokio::time::sleep(after * 2).await;
        assert_eq!(
            taken(&second),
            [("a".to_owned(), 1, false, true)],
            "re-sent to the stream connected"
        );
        assert_eq!(gauge_reads(&f, "maestro"), "1 1");
        // The last stream goes: no longer counted, and the agent's resync covers it.
        drop(second);
        assert_eq!(gauge_reads(&f, "maestro"), "0 1");
        assert!(f.undelivered().is_empty());
        let back = f.register("c1", MANIFEST_BUNDLES, Peer::default());
        tokio::time::sleep(after * 2).await;
        assert!(taken(&back).is_empty());
        assert_eq!(gauge_reads(&f, "maestro"), "0 1");
    }

    #[tokio::test]
    async fn events_without_cluster_name_are_refused() {
        let f = Fanout::new(Metrics::new(), 2, 10, AFTER);
        let e = CloudEvent::new("e1", "kube", format!("{LEASES}.spec.update_request"));
        assert!(matches!(f.emit("maestro", &e), Err(FanoutError::ClusterName { .. })));
    }
}
