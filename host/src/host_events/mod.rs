//! One plugin's host events (timers, NOTIFYs, watch events) on their way to `on-events`: a bounded
//! queue that coalesces what is already waiting and pushes back on producers when full.
//!
//! - A timer that goes off while its last firing is still queued is one firing.
//! - A notification whose payload is already queued on its channel is one notification.
//! - A watched object that changes while its last change is still queued is queued once, as its
//!   latest state, at its first place in its lane.
//! - When `capacity` distinct events wait, in all lanes together, producers wait for room (a
//!   LISTEN stops reading its connection, a watch stops reading the API server, which ends a
//!   watch that falls too far behind; the host then lists again).
//!
//! The plugin's dispatcher takes up to a batch of events at a time (and, while a call runs, waits
//! for a backlog first: see `plugins::lanes`), fairly across clusters: each event waits in the
//! lane of its cluster (a watched object's namespace) or in one shared lane, and a batch takes
//! the lanes in turn ([`round_robin`]), so a burst for some clusters delays another cluster's
//! event by at most one batch.

mod round_robin;

use std::collections::HashMap;

use conductor_plugin_sdk::HostEvent;
use parking_lot::Mutex;
use tokio::sync::Notify;

use self::round_robin::RoundRobin;
use crate::telemetry::PluginMetrics;

/// What makes two queued events one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventKey {
    Timer(String),
    Notification {
        database: String,
        channel: String,
        payload: String,
    },
    Listening {
        database: String,
        channel: String,
    },
    /// A watched object: the watch's resource, the object's namespace and name.
    Object {
        resource: String,
        namespace: String,
        name: String,
    },
}

impl EventKey {
    /// The key of a timer, notification or LISTEN event (a watch event's key names its object,
    /// which the watch knows: see [`EventKey::Object`]).
    pub fn of(event: &HostEvent) -> Option<Self> {
        Some(match event {
            HostEvent::Timer(name) => Self::Timer(name.clone()),
            HostEvent::Notification(n) => Self::Notification {
                database: n.database.clone(),
                channel: n.channel.clone(),
                payload: n.payload.clone(),
            },
            HostEvent::Listening(l) => Self::Listening {
                database: l.database.clone(),
                channel: l.channel.clone(),
            },
            HostEvent::Watch(_) => return None,
        })
    }

    /// The metric label of the event's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Timer(_) => "timer",
            Self::Notification { .. } => "notification",
            Self::Listening { .. } => "listening",
            Self::Object { .. } => "watch",
        }
    }
}

/// Folds `newer` into the queued `older` event with the same key.
fn coalesce(older: &mut HostEvent, newer: HostEvent) {
    match (older, newer) {
        // A first LISTEN still waiting stays first: its full catch-up covers a reconnect.
        (HostEvent::Listening(old), HostEvent::Listening(new)) => old.reconnected = old.reconnected && new.reconnected,
        (old, new) => *old = new,
    }
}

/// How many events one call may carry: `events`, or, when it carries only notifications, up to
/// `notifications` (`limits.event_batch`, `limits.notification_batch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSize {
    pub events: usize,
    pub notifications: usize,
}

impl From<usize> for BatchSize {
    fn from(n: usize) -> Self {
        Self {
            events: n,
            notifications: n,
        }
    }
}

/// An event taken from the queue, with what it takes to put it back after a failed call.
#[derive(Debug, Clone)]
pub struct Taken {
    pub key: EventKey,
    pub event: HostEvent,
    /// How many calls carrying this event (in this state) failed before.
    pub failures: u32,
    /// Deliver it in a call of its own: its batch failed every delivery, and this tells whether
    /// it was this event.
    pub alone: bool,
}

impl std::borrow::Borrow<HostEvent> for Taken {
    fn borrow(&self) -> &HostEvent {
        &self.event
    }
}

#[derive(Default)]
struct State {
    /// The keys of the waiting events, in their lanes.
    order: RoundRobin,
    /// Each waiting event, how many calls carrying it failed, and whether it goes alone.
    pending: HashMap<EventKey, (HostEvent, u32, bool)>,
    closed: bool,
}

/// The host events waiting for a plugin, by lane (`conductor inspect plugins`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waiting {
    /// Events waiting, in all lanes.
    pub events: usize,
    /// Lanes with events waiting.
    pub lanes: usize,
    /// The deepest lanes, the deepest first: the namespace (`None`: the shared lane of timers,
    /// notifications, LISTEN events and cluster-scoped objects) and its events.
    pub deepest: Vec<(Option<String>, usize)>,
}

/// The queue of one plugin.
pub struct EventQueue {
    state: Mutex<State>,
    capacity: usize,
    arrived: Notify,
    room: Notify,
    metrics: PluginMetrics,
}

impl EventQueue {
    pub fn new(capacity: usize, metrics: PluginMetrics) -> Self {
        Self {
            state: Mutex::default(),
            capacity: capacity.max(1),
            arrived: Notify::new(),
            room: Notify::new(),
            metrics,
        }
    }

    /// Queues `event` under `key`, folding it into a queued event with the same key, or waits
    /// for room. Returns false once the queue is closed (the plugin is going).
    pub async fn push(&self, key: EventKey, event: HostEvent) -> bool {
        let mut event = Some(event);
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut state = self.state.lock();
                if state.closed {
                    return false;
                }
                let Some(e) = event.take() else { return true };
                if let Some((queued, failures, alone)) = state.pending.get_mut(&key) {
                    coalesce(queued, e);
                    // A newer state gets attempts of its own.
                    (*failures, *alone) = (0, false);
                    self.metrics.coalesced(key.kind());
                    return true;
                }
                if state.order.len() < self.capacity {
                    self.metrics.queued(key.kind());
                    state.order.push_back(key.clone());
                    state.pending.insert(key, (e, 0, false));
                    self.gauge(&state);
                    drop(state);
                    self.arrived.notify_one();
                    return true;
                }
                event = Some(e);
                self.metrics.waited_for_room();
            }
            room.await;
        }
    }

    /// Up to `max` events, the lanes in turn, waiting for one if none is queued; `None` once
    /// closed.
    pub async fn next_batch(&self, max: impl Into<BatchSize>) -> Option<Vec<Taken>> {
        self.next_batch_of(1, max).await
    }

    /// Puts events a failed call carried back at the front of their lanes, in their order, each
    /// unless a newer state of it is already waiting (which supersedes it). Room is not waited
    /// for: they held their places a moment ago.
    pub fn requeue(&self, taken: Vec<Taken>) {
        let mut state = self.state.lock();
        if state.closed {
            return;
        }
        for Taken {
            key,
            event,
            failures,
            alone,
        } in taken.into_iter().rev()
        {
            if state.pending.contains_key(&key) {
                continue;
            }
            self.metrics.retried(key.kind());
            state.order.push_front(key.clone());
            state.pending.insert(key, (event, failures, alone));
        }
        self.gauge(&state);
        drop(state);
        self.arrived.notify_one();
    }

    /// Up to `max.events` events, the lanes in turn, once at least `min` are queued (fewer once
    /// closed: none); a batch of notifications only goes on with the notifications next in line,
    /// up to `max.notifications`. Cancel-safe: nothing is taken unless it returns.
    pub async fn next_batch_of(&self, min: usize, max: impl Into<BatchSize>) -> Option<Vec<Taken>> {
        let max = max.into();
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            {
                let mut state = self.state.lock();
                if state.closed {
                    return None;
                }
                if !state.order.is_empty() && state.order.len() >= min {
                    let n = state.order.len().min(max.events.max(1));
                    let mut batch = Vec::with_capacity(n);
                    let take = |state: &mut State, key: EventKey, batch: &mut Vec<Taken>| {
                        if let Some((event, failures, alone)) = state.pending.remove(&key) {
                            batch.push(Taken {
                                key,
                                event,
                                failures,
                                alone,
                            });
                        }
                    };
                    for _ in 0..n {
                        let key = state.order.pop().expect("n <= len");
                        take(&mut state, key, &mut batch);
                    }
                    let notification = |key: &EventKey| matches!(key, EventKey::Notification { .. });
                    if batch.iter().all(|t| notification(&t.key)) {
                        while batch.len() < max.notifications {
                            match state.order.pop() {
                                Some(key) if notification(&key) => take(&mut state, key, &mut batch),
                                Some(key) => {
                                    state.order.push_front(key);
                                    break;
                                }
                                None => break,
                            }
                        }
                    }
                    self.gauge(&state);
                    drop(state);
                    self.room.notify_waiters();
                    return Some(batch);
                }
            }
            arrived.await;
        }
    }

    /// The queue's gauges, after a change.
    fn gauge(&self, state: &State) {
        self.metrics.set_depth(state.order.len());
        self.metrics
            .set_lanes(state.order.lanes_waiting(), state.order.deepest());
    }

    /// What waits, by lane: at most `lanes` of the deepest.
    pub fn waiting(&self, lanes: usize) -> Waiting {
        let state = self.state.lock();
        Waiting {
            events: state.order.len(),
            lanes: state.order.lanes_waiting(),
            deepest: state.order.deepest_lanes(lanes),
        }
    }

    /// The metrics of the plugin whose queue this is.
    pub fn metrics(&self) -> &PluginMetrics {
        &self.metrics
    }

    /// How many events wait.
    pub fn len(&self) -> usize {
        self.state.lock().order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends the queue: producers and the dispatcher stop.
    pub fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        state.order.clear();
        state.pending.clear();
        self.gauge(&state);
        drop(state);
        self.room.notify_waiters();
        self.arrived.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use conductor_plugin_sdk::kube::{Change, WatchEvent};
    use conductor_plugin_sdk::pg::{Listening, Notification};

    use super::*;
    use crate::telemetry::Metrics;

    fn queue(capacity: usize) -> EventQueue {
        EventQueue::new(capacity, Metrics::new().plugin("p"))
    }

    fn watch(name: &str, version: &str, change: Change) -> (EventKey, HostEvent) {
        (
            EventKey::Object {
                resource: "things.x".into(),
                namespace: "ns".into(),
                name: name.into(),
            },
            HostEvent::Watch(WatchEvent {
                resource: "things.x".into(),
                change,
                object: format!(r#"{{"metadata":{{"name":"{name}","resourceVersion":"{version}"}}}}"#),
            }),
        )
    }

    fn notification(payload: &str) -> HostEvent {
        HostEvent::Notification(Notification {
            database: "d".into(),
            channel: "c".into(),
            payload: payload.into(),
        })
    }

    #[tokio::test]
    async fn a_batch_of_at_least_min_waits_for_that_many() {
        let q = Arc::new(queue(10));
        push(&q, notification("a")).await;
        let waiting = {
            let q = Arc::clone(&q);
            tokio::spawn(async move { q.next_batch_of(3, 10).await })
        };
        push(&q, notification("b")).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "two of three");
        push(&q, notification("c")).await;
        assert_eq!(waiting.await.unwrap().unwrap().len(), 3);
    }

    fn events(batch: Option<Vec<Taken>>) -> Vec<HostEvent> {
        batch.unwrap().into_iter().map(|t| t.event).collect()
    }

    async fn push(q: &EventQueue, event: HostEvent) {
        assert!(q.push(EventKey::of(&event).unwrap(), event).await);
    }

    #[tokio::test]
    async fn timers_and_identical_notifications_still_queued_coalesce() {
        let q = queue(10);
        for _ in 0..3 {
            push(&q, HostEvent::Timer("t".into())).await;
        }
        let n = notification;
        push(&q, n("a")).await;
        push(&q, n("b")).await;
        push(&q, n("a")).await;
        assert_eq!(q.len(), 3);
        let batch = events(q.next_batch(10).await);
        assert_eq!(batch, [HostEvent::Timer("t".into()), n("a"), n("b")]);
        // Once delivered, a new firing queues again.
        push(&q, HostEvent::Timer("t".into())).await;
        assert_eq!(q.len(), 1);
    }

    #[tokio::test]
    async fn a_watched_object_keeps_its_place_and_its_latest_state() {
        let q = queue(10);
        for (k, e) in [
            watch("a", "1", Change::Applied),
            watch("b", "2", Change::Applied),
            watch("a", "3", Change::Applied),
            watch("a", "4", Change::Deleted),
        ] {
            assert!(q.push(k, e).await);
        }
        let batch = events(q.next_batch(10).await);
        assert_eq!(
            batch,
            [watch("a", "4", Change::Deleted).1, watch("b", "2", Change::Applied).1]
        );
    }

    #[tokio::test]
    async fn a_first_listening_still_queued_stays_first() {
        let q = queue(10);
        let l = |reconnected| {
            HostEvent::Listening(Listening {
                database: "d".into(),
                channel: "c".into(),
                reconnected,
            })
        };
        push(&q, l(false)).await;
        push(&q, l(true)).await;
        assert_eq!(events(q.next_batch(10).await), [l(false)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_makes_producers_wait_and_loses_nothing() {
        let q = Arc::new(queue(4));
        let producer = {
            let q = Arc::clone(&q);
            tokio::spawn(async move {
                for i in 0..100 {
                    let (k, e) = watch(&format!("o{i}"), "1", Change::Applied);
                    assert!(q.push(k, e).await);
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(q.len(), 4, "bounded");
        assert!(!producer.is_finished(), "the producer waits for room");
        let mut seen = Vec::new();
        while seen.len() < 100 {
            let batch = events(q.next_batch(3).await);
            assert!(batch.len() <= 3);
            seen.extend(batch);
            assert!(q.len() <= 4);
        }
        producer.await.unwrap();
        let names: Vec<String> = seen
            .iter()
            .map(|e| match e {
                HostEvent::Watch(w) => w.object.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        for (i, n) in names.iter().enumerate() {
            assert!(n.contains(&format!("\"o{i}\"")), "in order: {n} at {i}");
        }
    }

    /// Events of a failed call go back to the front, in order and counted as failed once more,
    /// unless a newer state of the same object arrived meanwhile.
    #[tokio::test]
    async fn requeued_events_go_first_unless_superseded() {
        let q = queue(10);
        for (k, e) in [watch("a", "1", Change::Applied), watch("b", "1", Change::Applied)] {
            assert!(q.push(k, e).await);
        }
        let failed = q.next_batch(10).await.unwrap();
        let (k, e) = watch("a", "2", Change::Applied);
        assert!(q.push(k, e).await);
        push(&q, notification("n")).await;
        q.requeue(
            failed
                .into_iter()
                .map(|t| Taken {
                    failures: t.failures + 1,
                    ..t
                })
                .collect(),
        );
        let again = q.next_batch(10).await.unwrap();
        let seen: Vec<(HostEvent, u32)> = again.into_iter().map(|t| (t.event, t.failures)).collect();
        assert_eq!(
            seen,
            [
                (watch("b", "1", Change::Applied).1, 1),
                (notification("n"), 0),
                (watch("a", "2", Change::Applied).1, 0),
            ],
            "b back first with its failure; a's newer state (in its own place, after b in their \
             lane) supersedes the failed one; the lanes take turns: the shared lane's n between"
        );
    }

    fn watch_in(namespace: &str, name: &str, version: &str) -> (EventKey, HostEvent) {
        (
            EventKey::Object {
                resource: "things.x".into(),
                namespace: namespace.into(),
                name: name.into(),
            },
            HostEvent::Watch(WatchEvent {
                resource: "things.x".into(),
                change: Change::Applied,
                object: format!(
                    r#"{{"metadata":{{"namespace":"{namespace}","name":"{name}","resourceVersion":"{version}"}}}}"#
                ),
            }),
        )
    }

    fn names(batch: &[Taken]) -> Vec<String> {
        batch
            .iter()
            .map(|t| match &t.key {
                EventKey::Object { namespace, name, .. } => format!("{namespace}/{name}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// Issue 46: a cluster with 1,000 events waiting does not hold up another cluster's one.
    #[tokio::test]
    async fn a_batch_of_notifications_goes_on_to_the_notification_size() {
        let q = queue(10_000);
        for i in 0..500 {
            push(&q, notification(&format!("n{i}"))).await;
        }
        let size = BatchSize {
            events: 100,
            notifications: 300,
        };
        assert_eq!(q.next_batch(size).await.unwrap().len(), 300, "notifications only: 300");
        push(&q, HostEvent::Timer("t".into())).await;
        push(&q, notification("after-the-timer")).await;
        let rest = q.next_batch(size).await.unwrap();
        assert_eq!(rest.len(), 200, "the 200 notifications up to the timer");
        let next = events(q.next_batch(size).await);
        assert_eq!(next.len(), 2, "the timer, then at most `events`: {next:?}");
        assert!(matches!(next[0], HostEvent::Timer(_)));
    }

    #[tokio::test]
    async fn a_new_clusters_event_is_in_the_next_batch_behind_a_burst() {
        let q = queue(10_000);
        for i in 0..1000 {
            let (k, e) = watch_in("burst", &format!("w{i}"), "1");
            assert!(q.push(k, e).await);
        }
        let first = q.next_batch(100).await.unwrap();
        assert_eq!(names(&first)[..2], ["burst/w0", "burst/w1"]);
        let (k, e) = watch_in("quiet", "new", "1");
        assert!(q.push(k, e).await);
        let next = q.next_batch(100).await.unwrap();
        assert_eq!(names(&next)[0], "quiet/new", "first in the next batch");
        assert_eq!(next.len(), 100);
        assert_eq!(q.len(), 1000 - 199);
        let waiting = q.waiting(20);
        assert_eq!(
            (waiting.events, waiting.lanes, waiting.deepest),
            (801, 1, vec![(Some("burst".to_owned()), 801)])
        );
    }

    #[tokio::test]
    async fn each_lane_keeps_its_order_and_the_lanes_take_turns() {
        let q = queue(100);
        for (ns, name) in [("a", "1"), ("a", "2"), ("b", "1"), ("a", "3"), ("b", "2")] {
            let (k, e) = watch_in(ns, name, "1");
            assert!(q.push(k, e).await);
        }
        push(&q, HostEvent::Timer("t".into())).await;
        let batch = q.next_batch(4).await.unwrap();
        assert_eq!(names(&batch), ["a/1", "b/1", "Timer(\"t\")", "a/2"]);
        let batch = q.next_batch(4).await.unwrap();
        assert_eq!(names(&batch), ["b/2", "a/3"]);
    }

    /// A newer state of a waiting object replaces it at its place in its lane: one entry per key.
    #[tokio::test]
    async fn coalescing_keeps_one_entry_per_key_at_its_first_place_in_its_lane() {
        let q = queue(100);
        for (ns, name, version) in [
            ("a", "x", "1"),
            ("a", "y", "1"),
            ("b", "z", "1"),
            ("a", "x", "2"),
            ("b", "z", "2"),
            ("a", "x", "3"),
        ] {
            let (k, e) = watch_in(ns, name, version);
            assert!(q.push(k, e).await);
        }
        assert_eq!(q.len(), 3);
        let batch = q.next_batch(10).await.unwrap();
        assert_eq!(names(&batch), ["a/x", "b/z", "a/y"]);
        assert_eq!(batch[0].event, watch_in("a", "x", "3").1, "the latest state");
        assert_eq!(batch[1].event, watch_in("b", "z", "2").1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_capacity_bounds_the_events_of_all_lanes_together() {
        let q = Arc::new(queue(6));
        let producers: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|ns| {
                let q = Arc::clone(&q);
                tokio::spawn(async move {
                    for i in 0..20 {
                        let (k, e) = watch_in(ns, &i.to_string(), "1");
                        assert!(q.push(k, e).await);
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(q.len(), 6, "bounded in all");
        assert!(producers.iter().all(|p| !p.is_finished()), "every producer waits");
        let mut seen: HashMap<String, Vec<usize>> = HashMap::new();
        while seen.values().map(Vec::len).sum::<usize>() < 60 {
            for t in q.next_batch(4).await.unwrap() {
                let EventKey::Object { namespace, name, .. } = t.key else {
                    panic!("{:?}", t.key)
                };
                seen.entry(namespace).or_default().push(name.parse().unwrap());
            }
            assert!(q.len() <= 6);
        }
        for p in producers {
            p.await.unwrap();
        }
        for (ns, names) in seen {
            assert_eq!(names, (0..20).collect::<Vec<_>>(), "{ns} in order");
        }
    }

    /// A failed batch taken across lanes goes back as it was taken: its events first in their
    /// lanes, their lanes first, each with its failure counted; what came meanwhile after them.
    #[tokio::test]
    async fn a_failed_batch_across_lanes_goes_back_first_in_its_order() {
        let q = queue(100);
        for (ns, name) in [("a", "1"), ("b", "1"), ("a", "2")] {
            let (k, e) = watch_in(ns, name, "1");
            assert!(q.push(k, e).await);
        }
        let failed = q.next_batch(10).await.unwrap();
        assert_eq!(names(&failed), ["a/1", "b/1", "a/2"]);
        for (ns, name) in [("c", "1"), ("a", "3")] {
            let (k, e) = watch_in(ns, name, "1");
            assert!(q.push(k, e).await);
        }
        q.requeue(
            failed
                .into_iter()
                .map(|t| Taken {
                    failures: t.failures + 1,
                    ..t
                })
                .collect(),
        );
        assert_eq!(q.len(), 5);
        let again = q.next_batch(10).await.unwrap();
        assert_eq!(names(&again), ["a/1", "b/1", "c/1", "a/2", "a/3"]);
        let failures: Vec<u32> = again.iter().map(|t| t.failures).collect();
        assert_eq!(failures, [1, 1, 0, 1, 0]);
    }

    #[tokio::test]
    async fn closing_stops_producers_and_the_dispatcher() {
        let q = Arc::new(queue(1));
        push(&q, HostEvent::Timer("a".into())).await;
        let waiting = {
            let q = Arc::clone(&q);
            tokio::spawn(async move { q.push(EventKey::Timer("b".into()), HostEvent::Timer("b".into())).await })
        };
        tokio::task::yield_now().await;
        q.close();
        assert!(!waiting.await.unwrap(), "a waiting producer is told the queue closed");
        assert!(q.next_batch(1).await.is_none());
    }
}
