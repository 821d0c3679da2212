//! The order a plugin's queued host events are taken in: fair across clusters.
//!
//! Each event waits in a lane: a watched namespaced object in the lane of its namespace (for
//! ManifestWorks and the other per-cluster kinds the namespace is the cluster), everything else
//! (timers, notifications, LISTEN events, cluster-scoped objects) in one shared lane. Within a
//! lane events keep their order. Events are taken round-robin: one from each lane with events
//! waiting, in turn, the lane served least recently first — so a lane that had nothing waiting
//! goes first when something arrives, and a burst in some lanes delays another lane's event by
//! at most one turn of the lanes.
//!
//! A lane is a `VecDeque` of keys; the lanes with events waiting form a ring, ordered by when
//! each was last served. A lane that empties is kept, with a small buffer, for its namespace's
//! next event (no allocation then), unless many idle lanes are kept already.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::EventKey;

/// Idle lanes kept for the next event of their namespace; past this many, a lane that empties is
/// let go (its next event makes it again).
const IDLE_LANES_KEPT: usize = 1024;

/// The buffer an idle lane keeps (in events), so a burst's buffer is not held for good.
const IDLE_CAPACITY: usize = 16;

/// A lane's name: its namespace, or `None` for the shared lane.
type LaneName = Option<Arc<str>>;

#[derive(Default)]
struct Lane {
    name: LaneName,
    keys: VecDeque<EventKey>,
    /// When it was last served, on [`RoundRobin::clock`]; 0: never.
    served: u64,
}

/// The lane of an event: its namespace for a watched namespaced object, else the shared lane.
fn namespace_of(key: &EventKey) -> Option<&str> {
    match key {
        EventKey::Object { namespace, .. } if !namespace.is_empty() => Some(namespace),
        _ => None,
    }
}

/// How many lanes hold each number of events, to know the deepest lane without looking at all
/// of them.
#[derive(Default)]
struct Depths {
    /// `lanes_at[d]`: the lanes holding `d` events (`d` ≥ 1).
    lanes_at: Vec<usize>,
    deepest: usize,
}

impl Depths {
    /// A lane that held `from` events holds one more.
    fn grew(&mut self, from: usize) {
        let to = from + 1;
        if self.lanes_at.len() <= to {
            self.lanes_at.resize(to + 1, 0);
        }
        if from > 0 {
            self.lanes_at[from] -= 1;
        }
        self.lanes_at[to] += 1;
        self.deepest = self.deepest.max(to);
    }

    /// A lane that held `from` (≥ 1) events holds one fewer.
    fn shrank(&mut self, from: usize) {
        self.lanes_at[from] -= 1;
        if from > 1 {
            self.lanes_at[from - 1] += 1;
        }
        if from == self.deepest && self.lanes_at[from] == 0 {
            // The lane that shrank is now the deepest (or none is left).
            self.deepest = from - 1;
        }
    }
}

/// The keys of the queued events, in their lanes.
#[derive(Default)]
pub(super) struct RoundRobin {
    shared: Lane,
    namespaces: HashMap<Arc<str>, Lane>,
    /// The lanes with events waiting, the one served least recently first: (when served, lane).
    ring: VecDeque<(u64, LaneName)>,
    /// Events taken so far: the clock of [`Lane::served`].
    clock: u64,
    len: usize,
    depths: Depths,
}

/// The lane named `namespace` (made if need be).
fn lane<'a>(
    shared: &'a mut Lane,
    namespaces: &'a mut HashMap<Arc<str>, Lane>,
    namespace: Option<&str>,
) -> &'a mut Lane {
    let Some(namespace) = namespace else { return shared };
    if !namespaces.contains_key(namespace) {
        let name: Arc<str> = Arc::from(namespace);
        namespaces.insert(
            Arc::clone(&name),
            Lane {
                name: Some(name),
                ..Lane::default()
            },
        );
    }
    namespaces.get_mut(namespace).expect("inserted above")
}

impl RoundRobin {
    /// Queues `key` last in its lane.
    pub fn push_back(&mut self, key: EventKey) {
        self.push(key, false);
    }

    /// Queues `key` first in its lane, and the lane first in the ring, as if never served: an
    /// event going back after a failed call goes first, as it did before the call.
    pub fn push_front(&mut self, key: EventKey) {
        self.push(key, true);
    }

    fn push(&mut self, key: EventKey, front: bool) {
        let lane = lane(&mut self.shared, &mut self.namespaces, namespace_of(&key));
        let depth = lane.keys.len();
        if front {
            lane.keys.push_front(key);
            if depth > 0 {
                let same = |name: &LaneName| match (name, &lane.name) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (a, b) => a.is_none() && b.is_none(),
                };
                if let Some(at) = self.ring.iter().position(|(_, name)| same(name)) {
                    self.ring.remove(at);
                }
            }
            lane.served = 0;
            self.ring.push_front((0, lane.name.clone()));
        } else {
            lane.keys.push_back(key);
            if depth == 0 {
                // Into the ring after the lanes served before it (or as long ago).
                let at = self.ring.partition_point(|(served, _)| *served <= lane.served);
                self.ring.insert(at, (lane.served, lane.name.clone()));
            }
        }
        self.depths.grew(depth);
        self.len += 1;
    }

    /// The next key: the first of the lane served least recently.
    pub fn pop(&mut self) -> Option<EventKey> {
        let (_, name) = self.ring.pop_front()?;
        let lane = match &name {
            None => &mut self.shared,
            Some(namespace) => self
                .namespaces
                .get_mut(&**namespace)
                .expect("a lane in the ring is kept"),
        };
        let depth = lane.keys.len();
        let key = lane.keys.pop_front().expect("a lane in the ring has events");
        self.clock += 1;
        lane.served = self.clock;
        self.depths.shrank(depth);
        self.len -= 1;
        if !lane.keys.is_empty() {
            self.ring.push_back((self.clock, name));
            return Some(key);
        }
        if lane.keys.capacity() > IDLE_CAPACITY {
            lane.keys.shrink_to(IDLE_CAPACITY);
        }
        if let Some(namespace) = name
            && self.namespaces.len().saturating_sub(self.ring.len()) > IDLE_LANES_KEPT
        {
            self.namespaces.remove(&*namespace);
        }
        Some(key)
    }

    /// Events waiting, in all lanes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Lanes with events waiting.
    pub fn lanes_waiting(&self) -> usize {
        self.ring.len()
    }

    /// The most events waiting in one lane.
    pub fn deepest(&self) -> usize {
        self.depths.deepest
    }

    /// The `n` lanes with the most events waiting (the deepest first, then by name; `None` is the
    /// shared lane), with how many wait in each.
    pub fn deepest_lanes(&self, n: usize) -> Vec<(Option<String>, usize)> {
        let mut lanes: Vec<(Option<String>, usize)> = self
            .ring
            .iter()
            .map(|(_, name)| match name {
                None => (None, self.shared.keys.len()),
                Some(namespace) => (
                    Some(namespace.to_string()),
                    self.namespaces.get(&**namespace).map_or(0, |l| l.keys.len()),
                ),
            })
            .collect();
        lanes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        lanes.truncate(n);
        lanes
    }

    /// Forgets every lane.
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(namespace: &str, name: &str) -> EventKey {
        EventKey::Object {
            resource: "things.x".into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn drain(rr: &mut RoundRobin, n: usize) -> Vec<EventKey> {
        (0..n).map_while(|_| rr.pop()).collect()
    }

    #[test]
    fn lanes_take_turns_and_keep_their_order() {
        let mut rr = RoundRobin::default();
        for i in 0..3 {
            rr.push_back(object("a", &format!("a{i}")));
        }
        rr.push_back(object("b", "b0"));
        rr.push_back(EventKey::Timer("t".into()));
        rr.push_back(object("b", "b1"));
        // Cluster-scoped objects share the lane of timers.
        rr.push_back(object("", "c0"));
        assert_eq!(rr.len(), 7);
        assert_eq!(
            drain(&mut rr, 7),
            [
                object("a", "a0"),
                object("b", "b0"),
                EventKey::Timer("t".into()),
                object("a", "a1"),
                object("b", "b1"),
                object("", "c0"),
                object("a", "a2"),
            ]
        );
        assert!(rr.pop().is_none());
        assert_eq!((rr.len(), rr.lanes_waiting(), rr.deepest()), (0, 0, 0));
    }

    #[test]
    fn a_lane_with_nothing_waiting_goes_first_when_something_arrives() {
        let mut rr = RoundRobin::default();
        for i in 0..1000 {
            rr.push_back(object("busy", &i.to_string()));
        }
        rr.push_back(object("other", "x"));
        assert_eq!(drain(&mut rr, 2), [object("busy", "0"), object("other", "x")]);
        // "other" was idle while "busy" was served ten times more: back, "other" goes first.
        assert_eq!(drain(&mut rr, 10).last(), Some(&object("busy", "10")));
        rr.push_back(object("other", "y"));
        assert_eq!(rr.pop(), Some(object("other", "y")), "served less recently than busy");
        rr.push_back(object("new", "z"));
        assert_eq!(rr.pop(), Some(object("new", "z")), "never served");
        assert_eq!(rr.pop(), Some(object("busy", "11")));
    }

    #[test]
    fn keys_pushed_to_the_front_go_first_and_their_lanes_too() {
        let mut rr = RoundRobin::default();
        rr.push_back(object("c", "1"));
        rr.push_back(object("a", "3"));
        // A failed batch [a1, b1, a2] going back, last first.
        rr.push_front(object("a", "2"));
        rr.push_front(object("b", "1"));
        rr.push_front(object("a", "1"));
        assert_eq!(
            drain(&mut rr, 5),
            [
                object("a", "1"),
                object("b", "1"),
                object("c", "1"),
                object("a", "2"),
                object("a", "3"),
            ]
        );
    }

    #[test]
    fn the_deepest_lanes_are_known() {
        let mut rr = RoundRobin::default();
        for (ns, n) in [("a", 3), ("b", 5), ("c", 1)] {
            for i in 0..n {
                rr.push_back(object(ns, &i.to_string()));
            }
        }
        rr.push_back(EventKey::Timer("t".into()));
        assert_eq!((rr.lanes_waiting(), rr.deepest()), (4, 5));
        assert_eq!(
            rr.deepest_lanes(3),
            [(Some("b".into()), 5), (Some("a".into()), 3), (None, 1)]
        );
        // One turn: b 4, a 2, c and the shared lane empty.
        drain(&mut rr, 4);
        assert_eq!((rr.lanes_waiting(), rr.deepest()), (2, 4));
        drain(&mut rr, 4);
        assert_eq!((rr.lanes_waiting(), rr.deepest()), (1, 2));
        drain(&mut rr, 2);
        assert_eq!((rr.lanes_waiting(), rr.deepest(), rr.len()), (0, 0, 0));
    }

    #[test]
    fn idle_lanes_are_let_go_past_a_bound() {
        let mut rr = RoundRobin::default();
        for i in 0..IDLE_LANES_KEPT + 10 {
            rr.push_back(object(&format!("ns{i}"), "x"));
        }
        drain(&mut rr, IDLE_LANES_KEPT + 10);
        assert!(rr.namespaces.len() <= IDLE_LANES_KEPT + 1, "{}", rr.namespaces.len());
        // A lane let go comes back with its namespace's next event.
        rr.push_back(object("ns0", "y"));
        assert_eq!(rr.pop(), Some(object("ns0", "y")));
    }
}
