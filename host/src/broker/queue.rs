//! One subscriber's queue of encoded events: at most one event waits per resource, its latest
//! state, as a resync would give it.
//!
//! - An event for a resource already waiting takes the waiting one's place in line (a later
//!   version replaces an earlier one not yet sent; a delete replaces what it deletes), so what a
//!   subscriber can have waiting is bounded by what its cluster holds, never by a burst.
//! - An event without a `resourceid` is never folded into another: it waits in order.
//! - A stale state never replaces a newer one: a waiting event with a higher `resourceversion`
//!   stays (a resync answer listed before a change can arrive after it), and a delete is replaced
//!   only by a higher version or another delete.
//!
//! The stream takes the oldest waiting event; the broker ends a queue whose stream has taken
//! nothing for too long (`Fanout::watch_stall`), which drops what waits.

use std::collections::{HashMap, VecDeque, hash_map::Entry};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::OcmExtensions;
use parking_lot::Mutex;

use crate::wire::WireEvent;

/// Once a queue that held this many resources is empty again, its tables are shrunk back.
const SHRINK_PAST: usize = 1024;

/// An event on its way to the queues: encoded once, with what coalescing reads of it, for every
/// subscriber it goes to.
#[derive(Clone)]
pub struct Outgoing {
    bytes: Bytes,
    resource: Option<Arc<str>>,
    state: State,
}

/// What decides whether an event replaces a waiting one of the same resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    /// `resourceversion`, when it has a positive one.
    version: Option<i64>,
    deleting: bool,
}

impl State {
    /// Whether `self`, arriving later, replaces `waiting`.
    fn replaces(self, waiting: Self) -> bool {
        match (self.version, waiting.version) {
            (Some(new), Some(old)) if new != old => new > old,
            // The same version (or unknown ones): the latest arrival, unless it would take a
            // delete back.
            _ => self.deleting || !waiting.deleting,
        }
    }
}

impl Outgoing {
    pub fn new(event: &CloudEvent) -> Self {
        Self {
            bytes: WireEvent::encode(event),
            resource: event.resource_id().ok().map(Arc::from),
            state: State {
                version: event.resource_version().ok().filter(|v| *v > 0),
                deleting: event.deletion_timestamp().is_some(),
            },
        }
    }

    /// Its `resourceid`, when it has one.
    pub fn resource(&self) -> Option<&Arc<str>> {
        self.resource.as_ref()
    }

    /// Its positive `resourceversion`, when it has one.
    pub fn version(&self) -> Option<i64> {
        self.state.version
    }

    /// Whether it deletes its resource (it carries a `deletiontimestamp`).
    pub fn deleting(&self) -> bool {
        self.state.deleting
    }

    /// Whether `self`, sent later, supersedes `earlier` of the same resource (the rule queues
    /// fold by: a stale state never replaces a newer one).
    pub fn supersedes(&self, earlier: &Self) -> bool {
        self.state.replaces(earlier.state)
    }
}

/// A place in line.
enum Slot {
    /// The resource's latest state waits in `Inner::waiting`.
    Resource(Arc<str>),
    /// An event without a resource id, sent as it is.
    Unkeyed(Bytes),
}

struct Waiting {
    bytes: Bytes,
    state: State,
}

#[derive(Default)]
struct Inner {
    order: VecDeque<Slot>,
    waiting: HashMap<Arc<str>, Waiting>,
    /// Events the stream has taken, ever: the stall watch compares it between two looks.
    taken: u64,
    /// The stream waiting for an event.
    waker: Option<Waker>,
    ended: bool,
}

impl Inner {
    fn pop(&mut self) -> Option<Bytes> {
        while let Some(slot) = self.order.pop_front() {
            let bytes = match slot {
                Slot::Unkeyed(bytes) => Some(bytes),
                Slot::Resource(id) => self.waiting.remove(&id).map(|w| w.bytes),
            };
            if let Some(bytes) = bytes {
                self.taken += 1;
                if self.order.is_empty() && self.waiting.capacity() > SHRINK_PAST {
                    // A burst is over: give back what it took.
                    self.waiting.shrink_to(0);
                    self.order.shrink_to(0);
                }
                return Some(bytes);
            }
        }
        None
    }
}

/// What [`SubscriberQueue::push`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// It waits in a place of its own.
    Queued,
    /// It replaced the waiting state of its resource, in that state's place.
    Replaced,
    /// A newer state of its resource waits already: it was dropped.
    Stale,
    /// The queue was ended: nothing more goes to this subscriber.
    Ended,
}

/// A progress sample, for the stall watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub taken: u64,
    pub waiting: usize,
}

/// The queue between the fan-out and one subscriber's stream.
#[derive(Default)]
pub struct SubscriberQueue {
    inner: Mutex<Inner>,
}

impl SubscriberQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `event`, folding it into the waiting state of its resource.
    pub fn push(&self, event: &Outgoing) -> Pushed {
        let mut inner = self.inner.lock();
        if inner.ended {
            return Pushed::Ended;
        }
        let Inner { order, waiting, .. } = &mut *inner;
        let pushed = match &event.resource {
            None => {
                order.push_back(Slot::Unkeyed(event.bytes.clone()));
                Pushed::Queued
            }
            Some(id) => match waiting.entry(Arc::clone(id)) {
                Entry::Occupied(mut held) if event.state.replaces(held.get().state) => {
                    *held.get_mut() = Waiting {
                        bytes: event.bytes.clone(),
                        state: event.state,
                    };
                    Pushed::Replaced
                }
                Entry::Occupied(_) => Pushed::Stale,
                Entry::Vacant(place) => {
                    place.insert(Waiting {
                        bytes: event.bytes.clone(),
                        state: event.state,
                    });
                    order.push_back(Slot::Resource(Arc::clone(id)));
                    Pushed::Queued
                }
            },
        };
        let waker = inner.waker.take();
        drop(inner);
        if let Some(waker) = waker {
            waker.wake();
        }
        pushed
    }

    /// The oldest waiting event; `Ready(None)` once the queue was ended.
    pub fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut inner = self.inner.lock();
        if inner.ended {
            return Poll::Ready(None);
        }
        if let Some(bytes) = inner.pop() {
            return Poll::Ready(Some(bytes));
        }
        if !inner.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            inner.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// The oldest waiting event, if any (tests, and streams that do not wait).
    pub fn try_take(&self) -> Option<Bytes> {
        self.inner.lock().pop()
    }

    /// Events waiting: one per resource, plus those without a resource id.
    pub fn len(&self) -> usize {
        self.inner.lock().order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn progress(&self) -> Progress {
        let inner = self.inner.lock();
        Progress {
            taken: inner.taken,
            waiting: inner.order.len(),
        }
    }

    /// Ends the queue: what waits is dropped, nothing more is queued, and the stream's next take
    /// is its end. Returns how many events were dropped, or `None` if it had ended already.
    pub fn end(&self) -> Option<usize> {
        let mut inner = self.inner.lock();
        if inner.ended {
            return None;
        }
        inner.ended = true;
        let dropped = inner.order.len();
        inner.order = VecDeque::new();
        inner.waiting = HashMap::new();
        let waker = inner.waker.take();
        drop(inner);
        if let Some(waker) = waker {
            waker.wake();
        }
        Some(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES;
    use conductor_plugin_sdk::ocm::{DataType, SubResource, actions};

    fn event(id: Option<&str>, version: i64, deleting: bool) -> CloudEvent {
        let dt = DataType::parse(MANIFEST_BUNDLES).unwrap();
        let mut e = CloudEvent::new(
            format!("{}-{version}-{deleting}", id.unwrap_or("none")),
            "maestro",
            dt.event_type(SubResource::Spec, actions::UPDATE_REQUEST),
        );
        e.set_extension("clustername", "c1");
        if let Some(id) = id {
            e.set_extension("resourceid", id);
        }
        e.set_resource_version(&dt, version);
        if deleting {
            e.set_extension("deletiontimestamp", chrono::Utc::now());
        }
        e
    }

    fn push(q: &SubscriberQueue, id: Option<&str>, version: i64, deleting: bool) -> Pushed {
        q.push(&Outgoing::new(&event(id, version, deleting)))
    }

    /// The event ids left, in order.
    fn drain(q: &SubscriberQueue) -> Vec<String> {
        std::iter::from_fn(|| q.try_take())
            .map(|b| {
                let e: crate::proto::CloudEvent = prost::Message::decode(b).unwrap();
                e.id
            })
            .collect()
    }

    #[test]
    fn a_later_state_waits_in_the_first_place_of_its_resource() {
        let q = SubscriberQueue::new();
        assert_eq!(push(&q, Some("a"), 1, false), Pushed::Queued);
        assert_eq!(push(&q, Some("b"), 1, false), Pushed::Queued);
        assert_eq!(push(&q, Some("a"), 2, false), Pushed::Replaced);
        assert_eq!(push(&q, Some("b"), 1, true), Pushed::Replaced, "a delete replaces");
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&q), ["a-2-false", "b-1-true"]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_stale_state_never_replaces_a_newer_one() {
        let q = SubscriberQueue::new();
        push(&q, Some("a"), 5, false);
        assert_eq!(push(&q, Some("a"), 4, false), Pushed::Stale, "an older version");
        push(&q, Some("b"), 3, true);
        assert_eq!(
            push(&q, Some("b"), 3, false),
            Pushed::Stale,
            "the same version, not deleting"
        );
        assert_eq!(push(&q, Some("b"), 4, false), Pushed::Replaced, "a higher version");
        push(&q, Some("c"), 0, false);
        assert_eq!(
            push(&q, Some("c"), 0, false),
            Pushed::Replaced,
            "no version: the latest"
        );
        assert_eq!(drain(&q), ["a-5-false", "b-4-false", "c-0-false"]);
    }

    #[test]
    fn events_without_a_resource_are_never_folded() {
        let q = SubscriberQueue::new();
        push(&q, None, 1, false);
        push(&q, Some("a"), 1, false);
        push(&q, None, 1, false);
        push(&q, Some("a"), 2, false);
        assert_eq!(q.len(), 3);
        assert_eq!(drain(&q), ["none-1-false", "a-2-false", "none-1-false"]);
    }

    #[test]
    fn an_ended_queue_drops_what_waits_and_takes_nothing_more() {
        let q = SubscriberQueue::new();
        push(&q, Some("a"), 1, false);
        push(&q, Some("b"), 1, false);
        assert_eq!(q.end(), Some(2));
        assert_eq!(q.end(), None);
        assert_eq!(push(&q, Some("c"), 1, false), Pushed::Ended);
        let waker = futures::task::noop_waker();
        assert_eq!(q.poll_take(&mut Context::from_waker(&waker)), Poll::Ready(None));
    }

    #[test]
    fn progress_counts_what_was_taken() {
        let q = SubscriberQueue::new();
        push(&q, Some("a"), 1, false);
        push(&q, Some("a"), 2, false);
        push(&q, Some("b"), 1, false);
        assert_eq!(q.progress(), Progress { taken: 0, waiting: 2 });
        q.try_take();
        assert_eq!(q.progress(), Progress { taken: 1, waiting: 1 });
    }

    #[tokio::test]
    async fn a_waiting_stream_is_woken_by_a_push() {
        let q = Arc::new(SubscriberQueue::new());
        let taker = tokio::spawn({
            let q = Arc::clone(&q);
            async move { std::future::poll_fn(|cx| q.poll_take(cx)).await }
        });
        tokio::task::yield_now().await;
        push(&q, Some("a"), 1, false);
        assert!(taker.await.unwrap().is_some());
    }

    #[test]
    fn a_drained_burst_gives_its_memory_back() {
        let q = SubscriberQueue::new();
        for i in 0..10_000 {
            push(&q, Some(&i.to_string()), 1, false);
        }
        assert_eq!(drain(&q).len(), 10_000);
        let inner = q.inner.lock();
        assert!(inner.waiting.capacity() < SHRINK_PAST, "{}", inner.waiting.capacity());
    }
}
