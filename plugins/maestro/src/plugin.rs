//! The `maestro` source plugin: Maestro's resources delivered to work agents when Maestro rings
//! the `events` doorbell, agents' statuses written back for Maestro, and resync answered from
//! `resources` (`docs/maestro-database.md` §4–§6, §9).
//!
//! Several conductor replicas may share the database. Every replica that is notified of an event
//! sends it to the agents connected to *it*, so an agent's events never depend on which replica it
//! reached; `reconciled_date` is written only under Maestro's `events` try-lock, by a replica that
//! delivered the event (or found the resource gone). An event no connected agent received stays
//! unreconciled, and is sent again by the periodic catch-up once its agent is connected (the
//! agent's resync at connect already brings it up to date).
//!
//! Notified and caught-up events wait in one line per consumer ([`crate::waiting`]) and are sent
//! in batches taken fairly across consumers, so a burst of some clusters (a mass delete, a
//! backlog replayed after downtime) delays another cluster's event by one batch at most. Every
//! `on-events` call files what it brought and sends one batch; while events wait, a timer brings
//! the next call. The catch-up reads its next page only once fewer than a page's worth wait, so
//! a backlog of any size is drained a batch at a time, in turns with what arrives meanwhile.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use conductor_plugin_sdk::duration;
use conductor_plugin_sdk::ocm::types::actions;
use conductor_plugin_sdk::ocm::{EventType, SubResource, data_types};
use conductor_plugin_sdk::{
    Capability, CloudEvent, Description, Error, Host, HostEvent, Identity, KvKey, ListOptions, MetricKind, Plugin,
    Request, Retry, Timestamp,
};
use serde::{Deserialize, Serialize};

use crate::SOURCE;
use crate::spec::{Read, spec_event};
use crate::store::{self, EVENTS_CHANNEL, LAST_MIGRATION};
use crate::{status_batch, waiting};

/// The periodic catch-up (unreconciled events, in case a NOTIFY was missed).
const CATCH_UP_TIMER: &str = "catch-up";
/// The next page of a catch-up under way.
const NEXT_PAGE_TIMER: &str = "catch-up-next-page";
/// The next batch of the events waiting ([`waiting`]).
const SEND_TIMER: &str = "send-waiting";
/// The most events one batch (one transaction) handles.
const SEND_BATCH: usize = 20;
/// After a lost LISTEN, events written since this long before the last sign of life are handled
/// again (another replica may have reconciled them meanwhile; clocks may differ).
const RECONNECT_MARGIN_SECONDS: i64 = 30;

/// Events that failed (or were delivered while another replica held their lock), tried again
/// with backoff.
const RETRY: Retry<Queued> = Retry::new("retry", Duration::from_millis(100), Duration::from_secs(60));
/// A random number for this replica (drawn at its first `start`, kept across reloads), which
/// makes its send locks its own.
const REPLICA: KvKey<u64> = KvKey::new("replica");
/// When this replica last heard from the database (a NOTIFY or a LISTEN).
const LAST_HEARD: KvKey<DateTime<Utc>> = KvKey::new("last-heard");
/// The catch-up under way: what it looks for, and where its last page ended.
const CATCH_UP: KvKey<CatchUp> = KvKey::new("catch-up");

/// The metrics the plugin exports (as `conductor_<name>{plugin}`), refreshed after each catch-up.
const UNRECONCILED_EVENTS: &str = "maestro_unreconciled_events";
const OLDEST_RETRIED_AGE: &str = "maestro_oldest_unreconciled_event_age_seconds";
const CATCH_UP_INTERVAL: &str = "maestro_catch_up_interval_seconds";
const CATCH_UP_RUNS: &str = "maestro_catch_up_runs_total";
const WAITING_EVENTS: &str = "maestro_waiting_events";
const WAITING_CONSUMERS: &str = "maestro_waiting_consumers";
const DEEPEST_WAITING: &str = "maestro_deepest_consumer_waiting_events";
const EVENTS_HANDLED: &str = "maestro_events_handled_total";

/// `[plugins.maestro.config]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The database (`[databases.<name>]`) holding Maestro's schema.
    #[serde(default = "default_database")]
    database: String,
    /// How often unreconciled events are looked for (`ms`, `s`, `m` or `h`).
    #[serde(default = "default_catch_up")]
    catch_up_interval: String,
}

fn default_database() -> String {
    "maestro".to_owned()
}

fn default_catch_up() -> String {
    "5m".to_owned()
}

/// A catch-up, page by page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct CatchUp {
    /// Also the events written since then (after a lost LISTEN), not only the unreconciled.
    since: Option<Timestamp>,
    /// The id the last page ended with (pages follow the ids' order).
    after: Option<String>,
}

/// A queued event: its id, and whether a notification for it arrived (then it is sent to this
/// replica's agents even if another replica already reconciled it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Queued {
    id: String,
    notified: bool,
    /// Delivered here while another replica held the event's lock: only reconcile it (if that
    /// replica did not).
    #[serde(default)]
    mark_only: bool,
}

/// What a batch of events came to (for the logs).
#[derive(Debug, Default)]
struct Tally {
    /// Spec events sent (one per resource of the batch), and to how many agents in all.
    sent: u32,
    agents: u32,
    reconciled: u32,
    /// Gone, not a resource event, or already reconciled elsewhere.
    skipped: u32,
}

pub struct Maestro {
    database: String,
    catch_up_interval: Duration,
    /// This replica's number for its send locks ([`REPLICA`]), once read.
    replica: std::cell::Cell<Option<u64>>,
}

impl Maestro {
    fn action(event_type: &str) -> Option<&'static str> {
        match event_type {
            "Create" => Some(actions::CREATE_REQUEST),
            "Update" => Some(actions::UPDATE_REQUEST),
            "Delete" => Some(actions::DELETE_REQUEST),
            _ => None,
        }
    }

    /// §4.2 for a batch of events, in one transaction and two round trips: `BEGIN`, then try-lock
    /// and read every event and wait for the send locks of their resources, in one statement,
    /// then read the resources, all sent together; send each resource's spec event once to this
    /// replica's agents; set `reconciled_date` on the events this replica holds the lock of and
    /// that reached an agent (or whose resource is gone), sent with the `COMMIT`. Returns the
    /// events to try again: the failures, and those another replica held the lock of.
    ///
    /// Per resource the order holds however many batches run at once: a batch waits for the
    /// send lock of each resource it may send ([`crate::sql::LOCK_AND_READ_EVENTS`]) and holds
    /// it until it has sent and committed, and reads the resource only once it holds the lock,
    /// so a later batch sends the same or a newer row, never an older one. Two events of one
    /// resource in a batch send its current row once, with the later event's action.
    fn handle_all(&self, host: &Host, queued: Vec<Queued>) -> Vec<Queued> {
        if queued.is_empty() {
            return queued;
        }
        match self.handle_batch(host, &queued) {
            Ok((again, tally)) => {
                host.debug(&format!(
                    "{} events: {tally:?}; {} to try again",
                    queued.len(),
                    again.len()
                ));
                again
            }
            Err(e) => {
                host.warn(&format!("{} events failed, will retry: {e}", queued.len()));
                queued
            }
        }
    }

    fn handle_batch(&self, host: &Host, queued: &[Queued]) -> Result<(Vec<Queued>, Tally), Error> {
        let wanted: Vec<store::Wanted<'_>> = queued
            .iter()
            .map(|q| store::Wanted {
                id: &q.id,
                may_send: !q.mark_only,
            })
            .collect();
        let replica = self.replica(host)?;
        let db = host.pg(&self.database);
        let (tx, read) = store::begin_batch(&db, replica, &wanted)?;
        let resources = read.resources;
        let (locked, events): (Vec<bool>, Vec<_>) = read.events.into_iter().map(|e| (e.locked, e.found)).unzip();
        let mut tally = Tally::default();
        let mut again = Vec::new();
        let mut mark: Vec<&str> = Vec::new();
        // Reconcile `q` if this replica holds its lock, else again shortly (mark only).
        fn settle<'q>(locked: bool, q: &'q Queued, again: &mut Vec<Queued>, mark: &mut Vec<&'q str>) {
            if locked {
                mark.push(&q.id);
            } else {
                again.push(Queued {
                    mark_only: true,
                    ..q.clone()
                });
            }
        }
        // The events to deliver with their action, and per resource the last of them.
        let mut deliver: Vec<(usize, &'static str)> = Vec::new();
        let mut last_of: HashMap<&str, usize> = HashMap::new();
        for (n, q) in queued.iter().enumerate() {
            let Some(event) = &events[n] else {
                tally.skipped += 1; // purged
                continue;
            };
            let action = Self::action(&event.event_type).filter(|_| event.source == "Resources");
            match action {
                None => tally.skipped += 1,
                Some(_) if event.reconciled && !q.notified => tally.skipped += 1,
                Some(_) if q.mark_only => settle(locked[n], q, &mut again, &mut mark),
                Some(action) => {
                    last_of.insert(&event.source_id, n);
                    deliver.push((n, action));
                }
            }
        }
        // Each resource's spec event, once: how many agents it reached, or that it failed.
        let mut reached: HashMap<&str, Option<u32>> = HashMap::new();
        for &(n, action) in &deliver {
            let Some(event) = &events[n] else { continue };
            let Some(row) = resources.get(&event.source_id) else {
                continue; // gone: nothing to send
            };
            if last_of.get(row.id.as_str()) != Some(&n) {
                continue;
            }
            let sent = spec_event(row, action, Read::Get)
                .map_err(|e| Error::Internal(format!("resource {}: {e}", row.id)))
                .and_then(|spec| host.emit(&spec));
            let agents = match sent {
                Ok(agents) => {
                    tally.sent += 1;
                    tally.agents += agents;
                    Some(agents)
                }
                Err(e) => {
                    host.warn(&format!("resource {}: {e}; will retry", row.id));
                    None
                }
            };
            reached.insert(&row.id, agents);
        }
        for &(n, _) in &deliver {
            let q = &queued[n];
            let Some(event) = &events[n] else { continue };
            let delivered = if resources.contains_key(&event.source_id) {
                match reached.get(event.source_id.as_str()) {
                    Some(Some(agents)) => *agents > 0,
                    _ => {
                        again.push(q.clone());
                        continue;
                    }
                }
            } else {
                true // the resource is gone: nothing to send
            };
            if delivered && !event.reconciled {
                settle(locked[n], q, &mut again, &mut mark);
            }
        }
        store::commit_batch(tx, &mark, Utc::now())?;
        tally.reconciled = mark.len() as u32;
        Ok((again, tally))
    }

    /// This replica's number ([`REPLICA`], drawn by `start`, which every batch follows). Missing,
    /// it is an error: a number shared by default would let replicas take each other's send locks.
    fn replica(&self, host: &Host) -> Result<u64, Error> {
        if let Some(replica) = self.replica.get() {
            return Ok(replica);
        }
        let replica = REPLICA.get(host).ok_or_else(|| {
            Error::Internal(format!(
                "this replica's number is missing from kv (`{}`, drawn by start): refusing to take send locks without it",
                REPLICA.name()
            ))
        })?;
        self.replica.set(Some(replica));
        Ok(replica)
    }

    /// Handles `queued` now; what must be tried again joins the retry queue.
    fn handle_new(&self, host: &Host, queued: Vec<Queued>) -> Result<(), Error> {
        let again = self.handle_all(host, queued);
        if again.is_empty() {
            return Ok(());
        }
        RETRY.schedule(host, again)
    }

    /// Files `queued` in the lines of their consumers ([`waiting`]), to be sent in turns. If
    /// their consumers cannot be read, they are handled now instead.
    fn file(&self, host: &Host, queued: Vec<Queued>) -> Result<(), Error> {
        if queued.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = queued.iter().map(|q| q.id.as_str()).collect();
        match store::consumers_of(&host.pg(&self.database), &ids) {
            Ok(consumers) => waiting::add(
                host,
                consumers
                    .into_iter()
                    .map(|c| c.unwrap_or_else(|| waiting::NO_CONSUMER.to_owned()))
                    .zip(queued)
                    .collect(),
            ),
            Err(e) => {
                host.warn(&format!(
                    "cannot read the consumers of {} events, sending them now: {e}",
                    ids.len()
                ));
                self.handle_new(host, queued)
            }
        }
    }

    /// Sends the next batch of what waits, taken fairly across consumers.
    fn send_waiting(&self, host: &Host) -> Result<(), Error> {
        let batch: Vec<Queued> = waiting::take(host, SEND_BATCH)?;
        if !batch.is_empty() {
            observed(host, host.counter_add(EVENTS_HANDLED, &[], batch.len() as f64));
        }
        self.handle_new(host, batch)
    }

    /// After a call: while events wait, the send timer brings the next batch (behind whatever
    /// host events already wait, so they are filed first); a catch-up under way reads its next
    /// page once fewer than a page's worth wait. The gauges of what waits are refreshed.
    fn pace(&self, host: &Host) -> Result<(), Error> {
        let depth = waiting::depth(host);
        observed(host, host.gauge_set(WAITING_EVENTS, &[], depth.events as f64));
        observed(host, host.gauge_set(WAITING_CONSUMERS, &[], depth.consumers as f64));
        observed(host, host.gauge_set(DEEPEST_WAITING, &[], depth.deepest as f64));
        if depth.events > 0 {
            host.set_timer(SEND_TIMER, Duration::ZERO, false)?;
        }
        if depth.events < store::CATCH_UP_PAGE as u64 && CATCH_UP.get(host).is_some_and(|c| c.after.is_some()) {
            host.set_timer(NEXT_PAGE_TIMER, Duration::from_millis(1), false)?;
        }
        Ok(())
    }

    /// Starts a catch-up: the unreconciled events, and with `since` those written since then.
    /// The gauges of what waits unreconciled are measured at its start and at its end.
    fn catch_up(&self, host: &Host, since: Option<Timestamp>) -> Result<(), Error> {
        CATCH_UP.set(host, &CatchUp { since, after: None })?;
        // What this catch-up starts from (a backlog after downtime shows here at once).
        self.measure_unreconciled(host);
        self.next_page(host)
    }

    /// Handles the next page of the catch-up under way; a full page asks for the one after it.
    /// The end of a catch-up (its last page, or a failure) is counted, and the gauges of what
    /// waits unreconciled refreshed.
    fn next_page(&self, host: &Host) -> Result<(), Error> {
        match self.page(host) {
            Ok(false) => Ok(()),
            Ok(true) => {
                observed(host, host.counter_add(CATCH_UP_RUNS, &["ok"], 1.0));
                self.measure_unreconciled(host);
                Ok(())
            }
            Err(e) => {
                observed(host, host.counter_add(CATCH_UP_RUNS, &["error"], 1.0));
                Err(e)
            }
        }
    }

    /// The gauges of the events waiting unreconciled: all of them, and the age of the oldest this
    /// replica is trying again (an event sent to agents that could not be marked, or held by
    /// another replica's lock). Events of clusters with no agent connected wait legitimately and
    /// count in the first only.
    fn measure_unreconciled(&self, host: &Host) {
        let retrying = RETRY.pending(host);
        let ids: Vec<&str> = retrying.iter().map(|q| q.id.as_str()).collect();
        match store::unreconciled(&host.pg(&self.database), &ids) {
            Ok((waiting, oldest)) => {
                observed(host, host.gauge_set(UNRECONCILED_EVENTS, &[], waiting as f64));
                observed(host, host.gauge_set(OLDEST_RETRIED_AGE, &[], oldest));
            }
            Err(e) => host.debug(&format!("cannot count unreconciled events: {e}")),
        }
    }

    /// Handles the next page of the catch-up under way; returns whether it was the last.
    fn page(&self, host: &Host) -> Result<bool, Error> {
        let Some(state) = CATCH_UP.get(host) else {
            return Ok(false);
        };
        let page = store::pending_events(&host.pg(&self.database), state.since, state.after.as_deref())?;
        if !page.ids.is_empty() {
            host.debug(&format!("catching up on {} events", page.ids.len()));
        }
        let full = page.ids.len() as i64 >= store::CATCH_UP_PAGE;
        let last = page.last().cloned();
        let notified = state.since.is_some();
        self.file(
            host,
            page.ids
                .into_iter()
                .map(|id| Queued {
                    id,
                    notified,
                    mark_only: false,
                })
                .collect(),
        )?;
        if full {
            CATCH_UP.set(
                host,
                &CatchUp {
                    since: state.since,
                    after: last,
                },
            )?;
            // The next page once what waits falls below a page ([`Self::send_waiting`]).
            Ok(false)
        } else {
            CATCH_UP.take(host);
            Ok(true)
        }
    }

    /// The LISTEN on `events` is in place: at startup, purge reconciled events; either way,
    /// catch up on what was missed while it was not.
    fn listening(&self, host: &Host, reconnected: bool) -> Result<(), Error> {
        let last_heard = LAST_HEARD.get(host);
        LAST_HEARD.set(host, &Utc::now())?;
        if reconnected {
            let since = last_heard.map(|t| t - chrono::Duration::seconds(RECONNECT_MARGIN_SECONDS));
            host.info("LISTEN on events re-established; catching up");
            self.catch_up(host, since)
        } else {
            let purged = store::purge_reconciled(&host.pg(&self.database))?;
            host.info(&format!("listening on events; purged {purged} reconciled events"));
            self.catch_up(host, None)
        }
    }
}

/// Refuses an agent event that is not a manifest bundle status update.
fn status_update(event: &CloudEvent) -> Result<(), Error> {
    let ty = EventType::parse(&event.ty).map_err(|e| Error::Invalid(e.to_string()))?;
    if ty.data_type.to_string() != data_types::MANIFEST_BUNDLES
        || ty.subresource != SubResource::Status
        || ty.action != actions::UPDATE_REQUEST
    {
        return Err(Error::Invalid(format!(
            "the maestro source takes manifest bundle status updates, not {}",
            event.ty
        )));
    }
    Ok(())
}

/// The configured catch-up interval: a duration of at least 1ms.
fn catch_up_interval(config: &Config) -> Result<Duration, Error> {
    let invalid = |e: String| Error::Invalid(format!("config.catch_up_interval: {e}"));
    match duration::parse(&config.catch_up_interval).map_err(invalid)? {
        d if d < Duration::from_millis(1) => {
            Err(invalid(format!("{:?} must be at least 1ms", config.catch_up_interval)))
        }
        d => Ok(d),
    }
}

impl Plugin for Maestro {
    type Config = Config;

    fn describe() -> Description {
        Description::new("maestro", env!("CARGO_PKG_VERSION"))
            .sources([SOURCE])
            .data_types([data_types::MANIFEST_BUNDLES])
            .capabilities([
                Capability::Emit,
                Capability::Log,
                Capability::Timer,
                Capability::Kv,
                Capability::Pg,
                Capability::Metrics,
            ])
            .metric(
                UNRECONCILED_EVENTS,
                MetricKind::Gauge,
                "Events in Maestro's database not reconciled yet, clusters with no agent connected included (at the last catch-up).",
                &[],
            )
            .metric(
                OLDEST_RETRIED_AGE,
                MetricKind::Gauge,
                "Age of the oldest event this replica sent to agents and is trying again to reconcile; 0 without one (at the last catch-up).",
                &[],
            )
            .metric(
                CATCH_UP_INTERVAL,
                MetricKind::Gauge,
                "The catch-up interval (config.catch_up_interval).",
                &[],
            )
            .metric(
                CATCH_UP_RUNS,
                MetricKind::Counter,
                "Catch-ups run (periodic, and after a lost LISTEN), by outcome.",
                &["outcome"],
            )
            .metric(
                WAITING_EVENTS,
                MetricKind::Gauge,
                "Events notified or caught up and waiting to be sent, all consumers together.",
                &[],
            )
            .metric(
                WAITING_CONSUMERS,
                MetricKind::Gauge,
                "Consumers with events waiting to be sent.",
                &[],
            )
            .metric(
                DEEPEST_WAITING,
                MetricKind::Gauge,
                "The most events waiting to be sent for one consumer.",
                &[],
            )
            .metric(
                EVENTS_HANDLED,
                MetricKind::Counter,
                "Events taken from the waiting lines and handled (sent, or skipped as gone or reconciled elsewhere): its rate is the drain rate.",
                &[],
            )
    }

    fn check(config: &Config) -> Result<(), Error> {
        catch_up_interval(config).map(drop)
    }

    /// Per instance: checks (reading only) that the database holds Maestro's schema.
    fn init(host: &Host, config: Config) -> Result<Self, Error> {
        let interval = catch_up_interval(&config)?;
        let db = host.pg(&config.database);
        let has_schema = store::check_schema(&db).map_err(|e| e.context(format!("database {:?}", config.database)))?;
        if !has_schema {
            return Err(Error::Invalid(format!(
                "database {:?} has no Maestro schema (migration {LAST_MIGRATION} not found); run Maestro's migration first",
                config.database
            )));
        }
        Ok(Self {
            database: config.database,
            catch_up_interval: interval,
            replica: std::cell::Cell::new(None),
        })
    }

    /// Once per plugin: LISTEN on `events` (whose first `listening` purges and catches up) and
    /// the periodic catch-up.
    fn start(&mut self, host: &Host) -> Result<(), Error> {
        host.pg(&self.database).listen(EVENTS_CHANNEL).map_err(|e| {
            e.context(format!(
                "cannot LISTEN on {EVENTS_CHANNEL:?} in database {:?}",
                self.database
            ))
        })?;
        host.set_timer(CATCH_UP_TIMER, self.catch_up_interval, true)?;
        observed(
            host,
            host.gauge_set(CATCH_UP_INTERVAL, &[], self.catch_up_interval.as_secs_f64()),
        );
        // Both outcomes at 0 from the start, so the first failure is an increase.
        for outcome in ["ok", "error"] {
            observed(host, host.counter_add(CATCH_UP_RUNS, &[outcome], 0.0));
        }
        if REPLICA.get(host).is_none() {
            REPLICA.set(host, &uuid::Uuid::new_v4().as_u64_pair().0)?;
        }
        Ok(())
    }

    /// §9: every resource of the consumer, soft-deleted ones included. Any error fails the whole
    /// resync: a partial answer would make the agent delete the works left out.
    fn list(&mut self, host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, Error> {
        if options.data_type != data_types::MANIFEST_BUNDLES {
            return Ok(vec![]);
        }
        let rows = store::list_resources(&host.pg(&self.database), &options.cluster_name)?;
        rows.iter()
            .map(|row| {
                spec_event(row, actions::UPDATE_REQUEST, Read::List)
                    .map_err(|e| Error::Internal(format!("resource {}: {e}", row.id)))
            })
            .collect()
    }

    fn handle(&mut self, host: &Host, _identity: Identity, event: CloudEvent) -> Result<(), Error> {
        status_update(&event)?;
        let mut results = status_batch::write(host, &host.pg(&self.database), vec![Ok(event)], &mut Vec::new);
        results.pop().unwrap_or(Ok(()))
    }

    /// Status updates that waited together, written in one transaction ([`status_batch`]); a
    /// request that is not a status update is refused alone.
    fn handle_batch(&mut self, host: &Host, requests: Vec<Request>) -> Vec<Result<(), Error>> {
        let checked = |requests: Vec<Request>| -> Vec<status_batch::Update> {
            requests
                .into_iter()
                .map(|r| status_update(&r.event).map(|()| r.event))
                .collect()
        };
        // The host bounds what a call takes by the plugin's `limits.request_batch`.
        let mut take = || checked(host.take_waiting(usize::MAX));
        status_batch::write(host, &host.pg(&self.database), checked(requests), &mut take)
    }

    /// A burst of host events: the notifications' events are filed in their consumers' lines
    /// with what the timers bring (a catch-up's page); with nothing waiting, a batch's worth or
    /// less is sent at once instead, unfiled. One batch of what waits is sent when the
    /// send timer brought the call, or when the call filed no more than a batch (an event at rest,
    /// or a cluster's first behind another's burst, goes out in the call that brought it);
    /// otherwise — a burst arriving — the send timer is set, and goes off behind the host events
    /// already waiting, so every one of them is filed before a batch is chosen. The
    /// plugin's `on-events` calls never overlap: only they touch the lines, the retry queue and
    /// the catch-up state.
    fn on_events(&mut self, host: &Host, events: Vec<HostEvent>) -> Result<(), Error> {
        let waiting_before = waiting::depth(host).events;
        let mut send_timer = false;
        let mut notified = Vec::new();
        let mut result = Ok(());
        for event in events {
            let handled = match event {
                HostEvent::Notification(n) if n.channel == EVENTS_CHANNEL => {
                    notified.push(Queued {
                        id: n.payload,
                        notified: true,
                        mark_only: false,
                    });
                    Ok(())
                }
                HostEvent::Listening(l) if l.channel == EVENTS_CHANNEL => self.listening(host, l.reconnected),
                HostEvent::Timer(name) if name == CATCH_UP_TIMER => self.catch_up(host, None),
                HostEvent::Timer(name) if name == NEXT_PAGE_TIMER => self.next_page(host),
                HostEvent::Timer(name) if name == SEND_TIMER => {
                    send_timer = true;
                    Ok(())
                }
                e if RETRY.is_due(&e) => {
                    let again = self.handle_all(host, RETRY.take(host));
                    if again.is_empty() {
                        RETRY.succeeded(host);
                        Ok(())
                    } else {
                        RETRY.schedule(host, again)
                    }
                }
                // Handed off by an earlier version, whose notification calls overlapped.
                e => match RETRY.take_handed_off(host, &e) {
                    Some(items) => self.handle_new(host, items),
                    None => Ok(()),
                },
            };
            if let Err(e) = handled {
                host.warn(&format!("host event failed: {e}"));
                result = result.and(Err(e));
            }
        }
        if !notified.is_empty() {
            result = result.and(LAST_HEARD.set(host, &Utc::now()));
            if waiting::depth(host).events == 0 && notified.len() <= SEND_BATCH {
                // Nothing waits and they fit in a batch: the next batch would be these, so they
                // go out now, in the order they came, without reading their consumers to file
                // them (a round trip per call at rest).
                observed(host, host.counter_add(EVENTS_HANDLED, &[], notified.len() as f64));
                return result.and(self.handle_new(host, notified)).and(self.pace(host));
            }
            result = result.and(self.file(host, notified));
        }
        let filed = waiting::depth(host).events.saturating_sub(waiting_before);
        if send_timer || filed <= SEND_BATCH as u64 {
            result = result.and(self.send_waiting(host));
        }
        result.and(self.pace(host))
    }
}

/// A metric's update is best effort: a refusal (the plugin's limits) is logged, never an error
/// of the work it describes.
fn observed(host: &Host, outcome: Result<(), Error>) {
    if let Err(e) = outcome {
        host.debug(&format!("metric not updated: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use conductor_plugin_sdk::fakes::FakeHost;

    use super::*;

    /// The once-only work is in `start`, which the host runs once per plugin however many
    /// instances it makes: one LISTEN and one repeating catch-up timer at the configured interval.
    #[test]
    fn start_listens_and_arms_the_catch_up_timer_once() {
        let fake = FakeHost::new();
        let host = fake.host();
        let mut plugin = Maestro {
            database: "maestro".into(),
            catch_up_interval: Duration::from_secs(300),
            replica: std::cell::Cell::new(None),
        };
        plugin.start(&host).unwrap();
        assert_eq!(
            fake.recorded().listens,
            [("maestro".to_owned(), EVENTS_CHANNEL.to_owned())]
        );
        assert_eq!(fake.recorded().timers.get(CATCH_UP_TIMER), Some(&(300_000, true)));
        assert_eq!(fake.recorded().timers.len(), 1);
    }

    /// Send locks are keyed by the replica's number: without it (no `start`), a batch is refused
    /// before it touches the database, rather than sharing a default number with other replicas.
    #[test]
    fn a_batch_without_the_replica_number_is_refused() {
        let fake = FakeHost::new();
        let host = fake.host();
        let plugin = Maestro {
            database: "maestro".into(),
            catch_up_interval: Duration::from_secs(300),
            replica: std::cell::Cell::new(None),
        };
        let queued = Queued {
            id: "event-1".into(),
            notified: true,
            mark_only: false,
        };
        let err = plugin.handle_batch(&host, &[queued]).unwrap_err();
        assert!(err.to_string().contains("replica's number is missing"), "{err}");
        REPLICA.set(&host, &7).unwrap();
        let err = plugin.handle_batch(&host, &[]).unwrap_err();
        assert!(
            err.to_string().contains("FakeHost has no database"),
            "with the number it goes on: {err}"
        );
    }

    #[test]
    fn a_bad_catch_up_interval_is_refused_before_anything_runs() {
        let config: Config =
            conductor_plugin_sdk::plugin::parse_config(r#"{"catch_up_interval": "5 fortnights"}"#).unwrap();
        let err = Maestro::check(&config).unwrap_err();
        assert!(err.to_string().contains("config.catch_up_interval"), "{err}");
    }
}
