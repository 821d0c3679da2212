//! Work that never arrived: the spec events of work data types a source sent to a connected agent
//! that the agent has not answered with a status yet, found once `broker.undelivered_after` has
//! passed, counted, listed and re-sent once.
//!
//! Work agents answer every spec they apply — a create, an update, a delete — with a status
//! update of the same resource (`<data type>.status.*`). So the fan-out records each work spec
//! event it queues for at least one subscriber, and an agent's status update for that cluster and
//! resource drops the record. A record still there after the deadline, while an agent of its
//! cluster and data type is connected, is *overdue*: it counts in
//! `conductor_undelivered_resources{plugin}`, `conductor inspect undelivered` lists it, and its
//! event — the same bytes, the same `resourceversion` — is queued again for the cluster's
//! subscribers, once. An agent that already holds it ignores it; one that lost it applies it and
//! answers. An overdue record that was re-sent stays counted until it is answered or replaced,
//! but is never re-sent again: a source that keeps sending what no agent answers is a problem to
//! alert on, not to hide behind a loop of re-sends.
//!
//! - **One record per resource**, keyed by cluster, data type and `resourceid` (what the agent
//!   keys its works by), holding the plugin that sent it: a later spec event of the resource
//!   replaces it (the newest is what is awaited, with a fresh deadline), unless it is a stale
//!   state the queues would not deliver either (a lower `resourceversion`).
//! - **A status answers a record** unless it reports an earlier `resourceversion` than the one
//!   awaited (an answer to the previous spec, sent before the agent got this one); a status
//!   without a version answers it. A delete is answered the same way: agents report a deleted
//!   work with a status too, so a deleted resource's record goes away then, or when replaced.
//! - **What was answered is not awaited again.** The highest version the agent reported for a
//!   resource is kept: a spec event sent again at that version or an earlier one — a catch-up's
//!   duplicate, which the agent ignores and does not answer — makes no record, where one would be
//!   overdue for good. A delete is always awaited; the resource gone (reported deleted, or
//!   found gone by a resync), its version is forgotten.
//! - **Only while an agent is connected.** When the last subscriber of a cluster and data type
//!   leaves, that pair's records are dropped: the agent sends a resync request when it connects
//!   again, which re-sends whatever it lacks (and what it holds, it received). Keeping them would
//!   count, and re-send, work the resync already settled; restarting their clock on reconnect
//!   would re-send what the resync just sent. A record whose cluster has no subscriber when the
//!   deadline is looked at is dropped too.
//! - **Bounded by what the hub holds**: at most one record per resource of a connected cluster,
//!   and only until its agent answers, which agents do within seconds; a record shares its
//!   encoded event with the subscribers' queues (reference-counted bytes) and adds its key and a
//!   few words. An answered version is a key and a number per resource of a connected cluster.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use conductor_plugin_sdk::ocm::data_types::{MANIFEST_BUNDLES, MANIFESTS};
use tokio::time::Instant;

use super::queue::Outgoing;

/// The data types whose spec events agents answer with status updates: the works'.
pub const WORK_DATA_TYPES: [&str; 2] = [MANIFEST_BUNDLES, MANIFESTS];

/// Whether `data_type` is one of [`WORK_DATA_TYPES`].
pub fn is_work(data_type: &str) -> bool {
    WORK_DATA_TYPES.contains(&data_type)
}

/// How often the deadline is looked at: every eighth of it, at most every 30 s, so an overdue
/// record is found within 1⅛ of the deadline (or half a minute past it).
pub fn look_every(after: Duration) -> Duration {
    (after / 8).clamp(Duration::from_millis(10), Duration::from_secs(30))
}

struct Record {
    plugin: Arc<str>,
    event: Outgoing,
    /// When it was queued, for the deadline (Tokio's clock, paused in tests) and for people.
    sent: Instant,
    sent_at: SystemTime,
    /// When it was queued again, once overdue.
    resent_at: Option<SystemTime>,
    /// Past the deadline with an agent connected: counted and listed.
    overdue: bool,
}

/// One (cluster, data type): its records, and what its agent answered, by `resourceid`.
#[derive(Default)]
struct Table {
    awaiting: HashMap<Arc<str>, Record>,
    /// The highest version the agent reported for each resource no longer awaited: a spec event
    /// sent again at that version or an earlier one (a catch-up's duplicate, which agents ignore
    /// and do not answer) is not awaited.
    answered: HashMap<Arc<str>, i64>,
}

impl Table {
    fn is_empty(&self) -> bool {
        self.awaiting.is_empty() && self.answered.is_empty()
    }
}

/// An overdue record, for the inspector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    pub plugin: String,
    pub cluster: String,
    pub data_type: String,
    pub resource_id: String,
    pub resource_version: Option<i64>,
    pub sent_at: SystemTime,
    pub resent_at: Option<SystemTime>,
}

/// An overdue event to queue again for the subscribers of its cluster and data type.
pub struct Resend {
    pub plugin: Arc<str>,
    pub cluster: String,
    pub data_type: String,
    pub event: Outgoing,
}

/// The records, and how many are overdue per plugin.
pub struct Undelivered {
    after: Duration,
    /// cluster → data type → resource.
    clusters: HashMap<String, HashMap<String, Table>>,
    /// Overdue records per plugin; every plugin that ever sent a record has an entry (its names
    /// are shared by its records).
    overdue: HashMap<Arc<str>, usize>,
    /// Whether `overdue` changed since [`Self::take_changed`].
    changed: bool,
}

impl Undelivered {
    pub fn new(after: Duration) -> Self {
        Self {
            after,
            clusters: HashMap::new(),
            overdue: HashMap::new(),
            changed: false,
        }
    }

    pub fn after(&self) -> Duration {
        self.after
    }

    /// `event`, sent by `plugin` to at least one subscriber of (`cluster`, `data_type`) at `now`,
    /// is awaited. An event without a `resourceid` is not recorded, nor one the agent answered
    /// already (a spec, not a delete, at a version it reported or an earlier one).
    pub fn sent(&mut self, cluster: &str, data_type: &str, plugin: &str, event: Outgoing, now: (Instant, SystemTime)) {
        let Some(id) = event.resource().cloned() else {
            return;
        };
        let plugin = self.plugin(plugin);
        let table = table(table(&mut self.clusters, cluster), data_type);
        if let Some(answered) = table.answered.get(&id) {
            if !event.deleting() && event.version().is_some_and(|v| v <= *answered) {
                return;
            }
            table.answered.remove(&id);
        }
        let resources = &mut table.awaiting;
        let record = Record {
            plugin,
            event,
            sent: now.0,
            sent_at: now.1,
            resent_at: None,
            overdue: false,
        };
        match resources.entry(id) {
            std::collections::hash_map::Entry::Occupied(mut held) => {
                if !record.event.supersedes(&held.get().event) {
                    return;
                }
                let replaced = held.insert(record);
                Self::settle(&mut self.overdue, &mut self.changed, &replaced);
            }
            std::collections::hash_map::Entry::Vacant(place) => {
                place.insert(record);
            }
        }
    }

    /// An agent of `cluster` reported the status of resource `id` at `version`: the record is
    /// dropped unless it awaits a later version, and the version is kept as answered. Returns
    /// whether a record was dropped.
    pub fn answered(&mut self, cluster: &str, data_type: &str, id: &str, version: Option<i64>) -> bool {
        let version = version.filter(|v| *v > 0);
        let table = table(table(&mut self.clusters, cluster), data_type);
        let earlier = |awaited: Option<i64>| matches!((version, awaited), (Some(v), Some(a)) if v < a);
        let dropped = match table.awaiting.get(id) {
            Some(record) if !earlier(record.event.version()) => table.awaiting.remove_entry(id),
            _ => None,
        };
        if let Some(v) = version {
            match table.answered.get_mut(id) {
                Some(held) => *held = (*held).max(v),
                None => {
                    let key = dropped
                        .as_ref()
                        .map_or_else(|| Arc::from(id), |(key, _)| Arc::clone(key));
                    table.answered.insert(key, v);
                }
            }
        }
        let answered = dropped.is_some();
        if let Some((_, record)) = dropped {
            Self::settle(&mut self.overdue, &mut self.changed, &record);
        }
        self.drop_if_empty(cluster, data_type);
        answered
    }

    /// The agent of `cluster` holds resource `id` no more (it reported it deleted, or a resync
    /// found it gone): what it answered of it is forgotten.
    pub fn gone(&mut self, cluster: &str, data_type: &str, id: &str) {
        if let Some(table) = self.clusters.get_mut(cluster).and_then(|t| t.get_mut(data_type)) {
            table.answered.remove(id);
            self.drop_if_empty(cluster, data_type);
        }
    }

    /// Drops the table of (`cluster`, `data_type`) if it holds nothing.
    fn drop_if_empty(&mut self, cluster: &str, data_type: &str) {
        let Some(by_type) = self.clusters.get_mut(cluster) else {
            return;
        };
        if by_type.get(data_type).is_some_and(Table::is_empty) {
            by_type.remove(data_type);
        }
        if by_type.is_empty() {
            self.clusters.remove(cluster);
        }
    }

    /// The last subscriber of (`cluster`, `data_type`) left: its records are dropped (the
    /// agent resyncs when it connects again).
    pub fn disconnected(&mut self, cluster: &str, data_type: &str) {
        let Some(by_type) = self.clusters.get_mut(cluster) else {
            return;
        };
        if let Some(table) = by_type.remove(data_type) {
            for record in table.awaiting.values() {
                Self::settle(&mut self.overdue, &mut self.changed, record);
            }
        }
        if by_type.is_empty() {
            self.clusters.remove(cluster);
        }
    }

    /// Looks at the deadline at `now`: records of pairs with no subscriber (`connected` says)
    /// are dropped; records past the deadline become overdue, and those never re-sent are
    /// returned to be queued again (and marked re-sent).
    pub fn look(&mut self, now: (Instant, SystemTime), connected: impl Fn(&str, &str) -> bool) -> Vec<Resend> {
        let mut resend = Vec::new();
        let (overdue, changed, after) = (&mut self.overdue, &mut self.changed, self.after);
        self.clusters.retain(|cluster, by_type| {
            by_type.retain(|data_type, table| {
                if !connected(cluster, data_type) {
                    for record in table.awaiting.values() {
                        Self::settle(overdue, changed, record);
                    }
                    return false;
                }
                for record in table.awaiting.values_mut() {
                    if record.overdue || now.0.duration_since(record.sent) < after {
                        continue;
                    }
                    record.overdue = true;
                    *overdue.entry(Arc::clone(&record.plugin)).or_default() += 1;
                    *changed = true;
                    if record.resent_at.is_none() {
                        record.resent_at = Some(now.1);
                        resend.push(Resend {
                            plugin: Arc::clone(&record.plugin),
                            cluster: cluster.clone(),
                            data_type: data_type.clone(),
                            event: record.event.clone(),
                        });
                    }
                }
                true
            });
            !by_type.is_empty()
        });
        resend
    }

    /// `plugin` is gone (a reload removed it): its records are dropped and it is counted no more.
    pub fn forget(&mut self, plugin: &str) {
        self.clusters.retain(|_, by_type| {
            by_type.retain(|_, table| {
                table.awaiting.retain(|_, record| &*record.plugin != plugin);
                !table.is_empty()
            });
            !by_type.is_empty()
        });
        self.overdue.remove(plugin);
    }

    /// Overdue records per plugin, when they changed since the last call.
    pub fn take_changed(&mut self) -> Option<Vec<(Arc<str>, usize)>> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        Some(self.overdue.iter().map(|(p, n)| (Arc::clone(p), *n)).collect())
    }

    /// Every overdue record, by plugin, cluster, data type and resource.
    pub fn overdue(&self) -> Vec<Overdue> {
        let mut all: Vec<Overdue> = self
            .clusters
            .iter()
            .flat_map(|(cluster, by_type)| {
                by_type.iter().flat_map(move |(data_type, table)| {
                    table
                        .awaiting
                        .iter()
                        .filter(|(_, r)| r.overdue)
                        .map(move |(id, r)| Overdue {
                            plugin: r.plugin.to_string(),
                            cluster: cluster.clone(),
                            data_type: data_type.clone(),
                            resource_id: id.to_string(),
                            resource_version: r.event.version(),
                            sent_at: r.sent_at,
                            resent_at: r.resent_at,
                        })
                })
            })
            .collect();
        all.sort_by(|a, b| {
            (&a.plugin, &a.cluster, &a.data_type, &a.resource_id).cmp(&(
                &b.plugin,
                &b.cluster,
                &b.data_type,
                &b.resource_id,
            ))
        });
        all
    }

    /// Records held, overdue or not.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.clusters
            .values()
            .flat_map(HashMap::values)
            .map(|t| t.awaiting.len())
            .sum()
    }

    /// `plugin`'s shared name (made once per plugin).
    fn plugin(&mut self, plugin: &str) -> Arc<str> {
        match self.overdue.get_key_value(plugin) {
            Some((name, _)) => Arc::clone(name),
            None => {
                let name: Arc<str> = Arc::from(plugin);
                self.overdue.insert(Arc::clone(&name), 0);
                self.changed = true;
                name
            }
        }
    }

    /// A record leaves: it no longer counts if it did.
    fn settle(overdue: &mut HashMap<Arc<str>, usize>, changed: &mut bool, record: &Record) {
        if record.overdue
            && let Some(n) = overdue.get_mut(&record.plugin)
        {
            *n = n.saturating_sub(1);
            *changed = true;
        }
    }
}

/// The entry of `key`, made if missing (its key allocated only then: this is on every work
/// event's way out).
fn table<'a, V: Default>(map: &'a mut HashMap<String, V>, key: &str) -> &'a mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key).expect("present: inserted above if it was missing")
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::CloudEvent;
    use conductor_plugin_sdk::ocm::{DataType, OcmExtensions, SubResource, actions};

    const AFTER: Duration = Duration::from_secs(600);

    fn work(id: &str, version: i64) -> Outgoing {
        Outgoing::new(&work_event(id, version))
    }

    fn deleting(mut event: CloudEvent) -> Outgoing {
        event.set_extension("deletiontimestamp", chrono::Utc::now());
        Outgoing::new(&event)
    }

    fn work_event(id: &str, version: i64) -> CloudEvent {
        let dt = DataType::parse(MANIFEST_BUNDLES).unwrap();
        let mut e = CloudEvent::new(
            format!("{id}/{version}"),
            "maestro",
            dt.event_type(SubResource::Spec, actions::UPDATE_REQUEST),
        );
        e.set_extension("clustername", "c1");
        e.set_extension("resourceid", id);
        e.set_resource_version(&dt, version);
        e
    }

    fn at(start: Instant, after: Duration) -> (Instant, SystemTime) {
        (start + after, SystemTime::UNIX_EPOCH + after)
    }

    fn connected(_: &str, _: &str) -> bool {
        true
    }

    fn resent(r: &[Resend]) -> Vec<(String, Option<i64>)> {
        r.iter()
            .map(|r| (r.event.resource().unwrap().to_string(), r.event.version()))
            .collect()
    }

    fn counts(u: &mut Undelivered) -> Vec<(String, usize)> {
        let mut c: Vec<_> = u
            .take_changed()
            .unwrap_or_default()
            .into_iter()
            .map(|(p, n)| (p.to_string(), n))
            .collect();
        c.sort();
        c
    }

    #[test]
    fn work_data_types_are_the_answered_ones() {
        assert!(is_work(MANIFEST_BUNDLES));
        assert!(is_work(MANIFESTS));
        assert!(!is_work(conductor_plugin_sdk::ocm::data_types::LEASES));
    }

    #[test]
    fn a_plugin_removed_is_awaited_and_counted_no_more() {
        let t0 = Instant::now();
        let mut u = Undelivered::new(AFTER);
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 1), at(t0, Duration::ZERO));
        u.sent("c1", MANIFEST_BUNDLES, "works", work("b", 1), at(t0, Duration::ZERO));
        assert_eq!(u.look(at(t0, AFTER), connected).len(), 2);
        u.forget("works");
        assert_eq!(u.len(), 1);
        assert_eq!(
            u.overdue().iter().map(|o| o.plugin.as_str()).collect::<Vec<_>>(),
            ["maestro"]
        );
        assert_eq!(
            counts(&mut u),
            [("maestro".to_owned(), 1)],
            "works is no longer counted"
        );
    }

    #[test]
    fn a_record_past_the_deadline_is_counted_listed_and_re_sent_once() {
        let t0 = Instant::now();
        let mut u = Undelivered::new(AFTER);
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 1), at(t0, Duration::ZERO));
        assert_eq!(counts(&mut u), [("maestro".to_owned(), 0)], "the series exists at 0");
        assert!(u.look(at(t0, AFTER - Duration::from_secs(1)), connected).is_empty());
        assert!(u.overdue().is_empty(), "not yet overdue");
        assert!(u.take_changed().is_none());

        let again = u.look(at(t0, AFTER), connected);
        assert_eq!(resent(&again), [("a".to_owned(), Some(1))]);
        assert_eq!((again[0].cluster.as_str(), &*again[0].plugin), ("c1", "maestro"));
        assert_eq!(counts(&mut u), [("maestro".to_owned(), 1)]);
        let listed = u.overdue();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].resource_id, "a");
        assert_eq!(listed[0].resource_version, Some(1));
        assert_eq!(listed[0].sent_at, SystemTime::UNIX_EPOCH);
        assert_eq!(listed[0].resent_at, Some(SystemTime::UNIX_EPOCH + AFTER));

        // Never re-sent again, and still counted and listed.
        for n in 2..10 {
            assert!(u.look(at(t0, AFTER * n), connected).is_empty());
        }
        assert!(u.take_changed().is_none());
        assert_eq!(u.overdue().len(), 1);

        // The status: gone, no longer counted.
        assert!(u.answered("c1", MANIFEST_BUNDLES, "a", Some(1)));
        assert_eq!(counts(&mut u), [("maestro".to_owned(), 0)]);
        assert!(u.overdue().is_empty());
        assert_eq!(u.len(), 0);
        u.gone("c1", MANIFEST_BUNDLES, "a");
        assert!(u.clusters.is_empty(), "no empty tables left behind");
    }

    #[test]
    fn a_spec_sent_again_at_a_version_its_agent_answered_is_not_awaited() {
        let t0 = Instant::now();
        let mut u = Undelivered::new(AFTER);
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 2), at(t0, Duration::ZERO));
        assert!(u.answered("c1", MANIFEST_BUNDLES, "a", Some(2)));
        // A catch-up sends version 2 again, or an older one: the agent holds a version at least as
        // new, ignores it and answers nothing, so awaiting it would count it overdue forever.
        u.sent(
            "c1",
            MANIFEST_BUNDLES,
            "maestro",
            work("a", 2),
            at(t0, Duration::from_secs(1)),
        );
        u.sent(
            "c1",
            MANIFEST_BUNDLES,
            "maestro",
            work("a", 1),
            at(t0, Duration::from_secs(1)),
        );
        assert_eq!(u.len(), 0);
        assert!(u.look(at(t0, AFTER * 2), connected).is_empty());
        assert!(u.overdue().is_empty());

        // A later version is awaited, and so is a delete at the version answered.
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 3), at(t0, AFTER * 2));
        assert_eq!(u.len(), 1);
        assert!(u.answered("c1", MANIFEST_BUNDLES, "a", Some(3)));
        u.sent(
            "c1",
            MANIFEST_BUNDLES,
            "maestro",
            deleting(work_event("a", 3)),
            at(t0, AFTER * 2),
        );
        assert_eq!(u.len(), 1, "a delete is awaited");
        assert!(u.answered("c1", MANIFEST_BUNDLES, "a", Some(3)));
        // The agent reported it deleted: nothing of it is kept.
        u.gone("c1", MANIFEST_BUNDLES, "a");
        assert!(u.clusters.is_empty());

        // What the agent answered of a resource never recorded (a resync's answer) counts too,
        // until its agent leaves.
        assert!(!u.answered("c1", MANIFEST_BUNDLES, "b", Some(4)));
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("b", 4), at(t0, AFTER * 2));
        assert_eq!(u.len(), 0);
        u.disconnected("c1", MANIFEST_BUNDLES);
        assert!(u.clusters.is_empty());
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("b", 4), at(t0, AFTER * 2));
        assert_eq!(u.len(), 1, "after a reconnect, awaited again");
    }

    #[test]
    fn an_answered_resource_is_never_re_sent() {
        let t0 = Instant::now();
        let mut u = Undelivered::new(AFTER);
        u.sent("c1", MANIFEST_BUNDLES, "kube", work("a", 1), at(t0, Duration::ZERO));
        u.sent("c1", MANIFEST_BUNDLES, "kube", work("b", 1), at(t0, Duration::ZERO));
        assert!(u.answered("c1", MANIFEST_BUNDLES, "a", Some(1)));
        // A status of another cluster, data type or resource answers nothing.
        assert!(!u.answered("c2", MANIFEST_BUNDLES, "b", Some(1)));
        assert!(!u.answered("c1", MANIFESTS, "b", Some(1)));
        assert!(!u.answered("c1", MANIFEST_BUNDLES, "x", Some(1)));
        assert_eq!(resent(&u.look(at(t0, AFTER), connected)), [("b".to_owned(), Some(1))]);
    }

    #[test]
    fn a_newer_version_replaces_the_record_with_a_fresh_deadline() {
        let t0 = Instant::now();
        let mut u = Undelivered::new(AFTER);
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 1), at(t0, Duration::ZERO));
        assert_eq!(resent(&u.look(at(t0, AFTER), connected)).len(), 1);
        assert_eq!(counts(&mut u), [("maestro".to_owned(), 1)]);

        // Version 2: awaited anew, no longer counted; a stale version 1 does not replace it.
        let later = AFTER + Duration::from_secs(1);
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 2), at(t0, later));
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 1), at(t0, later * 3));
        assert_eq!(counts(&mut u), [("maestro".to_owned(), 0)]);
        assert!(u.overdue().is_empty());
        assert_eq!(u.len(), 1);
        // A status of version 1 answers the previous spec, not this one.
        assert!(!u.answered("c1", MANIFEST_BUNDLES, "a", Some(1)));
        assert!(
            u.look(at(t0, later + AFTER - Duration::from_secs(1)), connected)
                .is_empty()
        );
        assert_eq!(
            resent(&u.look(at(t0, later + AFTER), connected)),
            [("a".to_owned(), Some(2))],
            "the newest is re-sent, once, after its own deadline"
        );
        // A status of a later version, or without one, answers it.
        assert!(u.answered("c1", MANIFEST_BUNDLES, "a", Some(3)));
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("b", 4), at(t0, later));
        assert!(u.answered("c1", MANIFEST_BUNDLES, "b", None));
        assert_eq!(u.len(), 0);
    }

    #[test]
    fn records_are_not_counted_while_no_agent_is_connected() {
        let t0 = Instant::now();
        let mut u = Undelivered::new(AFTER);
        u.sent("c1", MANIFEST_BUNDLES, "maestro", work("a", 1), at(t0, Duration::ZERO));
        u.sent("c2", MANIFEST_BUNDLES, "maestro", work("b", 1), at(t0, Duration::ZERO));
        u.sent("c3", MANIFEST_BUNDLES, "maestro", work("c", 1), at(t0, Duration::ZERO));
        // c1's agent is gone by the deadline: dropped, not counted, not re-sent.
        let again = u.look(at(t0, AFTER), |cluster, _| cluster != "c1");
        assert_eq!(resent(&again).len(), 2);
        assert_eq!(counts(&mut u), [("maestro".to_owned(), 2)]);
        assert_eq!(u.len(), 2);
        // c2's agent leaves after: its overdue record no longer counts.
        u.disconnected("c2", MANIFEST_BUNDLES);
        assert_eq!(counts(&mut u), [("maestro".to_owned(), 1)]);
        assert_eq!(u.overdue().into_iter().map(|o| o.cluster).collect::<Vec<_>>(), ["c3"]);
        u.disconnected("c3", MANIFESTS);
        assert_eq!(u.len(), 1, "another data type's agent leaving drops nothing");
    }

    #[test]
    fn an_event_without_a_resource_id_is_not_recorded() {
        let dt = DataType::parse(MANIFEST_BUNDLES).unwrap();
        let mut e = CloudEvent::new(
            "x",
            "maestro",
            dt.event_type(SubResource::Spec, actions::UPDATE_REQUEST),
        );
        e.set_extension("clustername", "c1");
        let mut u = Undelivered::new(AFTER);
        u.sent(
            "c1",
            MANIFEST_BUNDLES,
            "maestro",
            Outgoing::new(&e),
            (Instant::now(), SystemTime::now()),
        );
        assert_eq!(u.len(), 0);
        assert!(e.resource_id().is_err());
    }

    #[test]
    fn the_deadline_is_looked_at_often_enough() {
        assert_eq!(look_every(Duration::from_secs(600)), Duration::from_secs(30));
        assert_eq!(look_every(Duration::from_secs(2)), Duration::from_millis(250));
    }
}
