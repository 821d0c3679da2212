//! The `maestro` source plugin: Maestro's resources delivered to work agents when Maestro rings
//! the `events` doorbell, agents' statuses written back for Maestro, and resync answered from
//! `resources` (`maestro-db.md` §4–§6, §9).
//!
//! Several conductor replicas may share the database. Every replica that is notified of an event
//! sends it to the agents connected to *it*, so an agent's events never depend on which replica it
//! reached; `reconciled_date` is written once, under Maestro's `events` try-lock, by a replica that
//! delivered the event (or found the resource gone). An event no connected agent received stays
//! unreconciled, and is sent again by the periodic catch-up once its agent is connected (the
//! agent's resync at connect already brings it up to date).

use chrono::{DateTime, Utc};
use conductor_plugin_sdk::ocm::types::actions;
use conductor_plugin_sdk::ocm::{EventType, SubResource, data_types};
use conductor_plugin_sdk::{
    CloudEvent, Description, Host, HostEvent, Identity, ListOptions, Plugin, SDK_VERSION, SourceError,
};
use serde::{Deserialize, Serialize};

use crate::spec::{Read, spec_event};
use crate::status::{Decision, decide};
use crate::store::{self, EVENTS_CHANNEL, EVENTS_LOCK, LAST_MIGRATION, RESOURCE_STATUS_LOCK};
use crate::{SOURCE, duration};

/// The periodic catch-up (unreconciled events, in case a NOTIFY was missed).
const CATCH_UP_TIMER: &str = "catch-up";
/// The next batch of queued events.
const DRAIN_TIMER: &str = "drain";
/// Failed events, again.
const RETRY_TIMER: &str = "retry";
/// Events handled per call, so a long catch-up never runs into the call timeout.
const BATCH: usize = 100;
const RETRY_FIRST_MS: u64 = 100;
const RETRY_MAX_MS: u64 = 60_000;
/// After a lost LISTEN, events written since this long before the last sign of life are handled
/// again (another replica may have reconciled them meanwhile; clocks may differ).
const RECONNECT_MARGIN_SECONDS: i64 = 30;

mod keys {
    pub const QUEUE: &str = "queue";
    pub const RETRY: &str = "retry";
    pub const RETRY_BACKOFF: &str = "retry-backoff-ms";
    pub const LAST_HEARD: &str = "last-heard";
}

/// `[plugins.maestro.config]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
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

/// What handling an event came to (for the logs and the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No such event (purged).
    Gone,
    /// Not a resource event this plugin handles: left as is.
    NoHandler,
    /// Already reconciled, and not notified here.
    AlreadyReconciled,
    /// Sent to this many of this replica's agents; whether reconciled_date was written.
    Delivered { agents: u32, reconciled: bool },
    /// Delivered here, but another replica held the event's lock: reconcile it again shortly.
    Contended { agents: u32 },
}

pub struct Maestro {
    database: String,
}

fn internal(context: &str) -> impl Fn(String) -> SourceError + '_ {
    move |e| SourceError::Internal(format!("{context}: {e}"))
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

    /// §4.2: try-lock the event, re-read it, read the resource unscoped, send the spec event to
    /// this replica's agents, and set `reconciled_date` if this replica holds the lock and the
    /// event reached an agent (or its resource is gone).
    fn handle_event(&self, host: &Host, queued: &Queued) -> Result<Outcome, SourceError> {
        let (id, notified) = (queued.id.as_str(), queued.notified);
        let tx = host.pg(&self.database).begin()?;
        let locked = tx.try_advisory_lock(id, EVENTS_LOCK)?;
        let Some(event) = store::read_event(&tx, id)? else {
            return Ok(Outcome::Gone);
        };
        let Some(action) = Self::action(&event.event_type).filter(|_| event.source == "Resources") else {
            return Ok(Outcome::NoHandler);
        };
        if event.reconciled && !notified {
            return Ok(Outcome::AlreadyReconciled);
        }
        if queued.mark_only {
            if !locked {
                return Ok(Outcome::Contended { agents: 0 });
            }
            store::mark_reconciled(&tx, id, Utc::now())?;
            tx.commit()?;
            return Ok(Outcome::Delivered {
                agents: 0,
                reconciled: true,
            });
        }
        let agents = match store::read_resource(&tx, &event.source_id)? {
            None => None,
            Some(row) => {
                let spec = spec_event(&row, action, Read::Get)
                    .map_err(|e| SourceError::Internal(format!("resource {}: {e}", row.id)))?;
                Some(host.emit(&spec).map_err(internal("emit"))?)
            }
        };
        let delivered = agents.is_none_or(|n| n > 0);
        if !locked && delivered && !event.reconciled {
            return Ok(Outcome::Contended {
                agents: agents.unwrap_or(0),
            });
        }
        let reconciled = locked && !event.reconciled && delivered;
        if reconciled {
            store::mark_reconciled(&tx, id, Utc::now())?;
        }
        tx.commit()?;
        Ok(Outcome::Delivered {
            agents: agents.unwrap_or(0),
            reconciled,
        })
    }

    /// Queues events and handles the first batch.
    fn enqueue(&self, host: &Host, ids: Vec<String>, notified: bool) -> Result<(), SourceError> {
        let mut queue: Vec<Queued> = kv_json(host, keys::QUEUE);
        let queued: std::collections::HashSet<String> = queue.iter().map(|q| q.id.clone()).collect();
        for id in ids {
            if !queued.contains(&id) {
                queue.push(Queued {
                    id,
                    notified,
                    mark_only: false,
                });
            } else if notified && let Some(q) = queue.iter_mut().find(|q| q.id == id) {
                q.notified = true;
            }
        }
        self.drain(host, queue)
    }

    /// Handles up to [`BATCH`] events of `queue` and keeps the rest queued (in `kv`, for the next
    /// call); failures are retried with backoff.
    fn drain(&self, host: &Host, mut queue: Vec<Queued>) -> Result<(), SourceError> {
        let rest = queue.split_off(queue.len().min(BATCH));
        set_kv_json(host, keys::QUEUE, &rest);
        if !rest.is_empty() {
            host.set_timer(DRAIN_TIMER, 1, false);
        }
        let mut failed = Vec::new();
        for q in queue {
            match self.handle_event(host, &q) {
                Ok(outcome @ Outcome::Contended { .. }) => {
                    host.debug(&format!("event {}: {outcome:?}", q.id));
                    failed.push(Queued { mark_only: true, ..q });
                }
                Ok(outcome) => host.debug(&format!("event {}: {outcome:?}", q.id)),
                Err(e) => {
                    host.warn(&format!("event {} failed, will retry: {e}", q.id));
                    failed.push(q);
                }
            }
        }
        self.schedule_retry(host, failed);
        Ok(())
    }

    fn schedule_retry(&self, host: &Host, failed: Vec<Queued>) {
        if failed.is_empty() {
            return;
        }
        let mut retry: Vec<Queued> = kv_json(host, keys::RETRY);
        retry.extend(
            failed
                .into_iter()
                .filter(|f| !retry.iter().any(|r| r.id == f.id))
                .collect::<Vec<_>>(),
        );
        set_kv_json(host, keys::RETRY, &retry);
        let backoff: u64 = kv_json::<Option<u64>>(host, keys::RETRY_BACKOFF).unwrap_or(RETRY_FIRST_MS);
        set_kv_json(host, keys::RETRY_BACKOFF, &(backoff * 2).min(RETRY_MAX_MS));
        host.set_timer(RETRY_TIMER, backoff, false);
    }

    /// Queues the failed events again; once none fails, the backoff starts over.
    fn retry(&self, host: &Host) -> Result<(), SourceError> {
        let retry: Vec<Queued> = kv_json(host, keys::RETRY);
        host.kv_delete(keys::RETRY);
        let mut queue: Vec<Queued> = kv_json(host, keys::QUEUE);
        queue.extend(retry);
        let result = self.drain(host, queue);
        if kv_json::<Vec<Queued>>(host, keys::RETRY).is_empty() {
            host.kv_delete(keys::RETRY_BACKOFF);
        }
        result
    }

    /// Queues the events to (re-)handle: the unreconciled ones, and with `since` those written
    /// since then.
    fn catch_up(&self, host: &Host, since: Option<DateTime<Utc>>) -> Result<(), SourceError> {
        let ids = store::pending_events(&host.pg(&self.database), since)?;
        if !ids.is_empty() {
            host.info(&format!("catching up on {} events", ids.len()));
        }
        self.enqueue(host, ids, since.is_some())
    }

    /// The LISTEN on `events` is in place: at startup, purge reconciled events; either way,
    /// catch up on what was missed while it was not.
    fn listening(&self, host: &Host, reconnected: bool) -> Result<(), SourceError> {
        let last_heard: Option<DateTime<Utc>> = kv_json(host, keys::LAST_HEARD);
        set_kv_json(host, keys::LAST_HEARD, &Some(Utc::now()));
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

    /// §5: an agent's status update, judged and written under Maestro's `resource_status` lock.
    fn update_status(&self, host: &Host, event: CloudEvent) -> Result<(), SourceError> {
        let id = conductor_plugin_sdk::ocm::OcmExtensions::resource_id(&event)
            .map_err(|_| SourceError::Invalid("status update without resourceid".into()))?
            .to_owned();
        let tx = host.pg(&self.database).begin()?;
        tx.advisory_lock(&id, RESOURCE_STATUS_LOCK)?;
        let row = store::read_resource(&tx, &id)?;
        let decision = decide(&event, row.as_ref()).map_err(|e| SourceError::Invalid(e.to_string()))?;
        let now = Utc::now();
        match (&decision, &row) {
            (Decision::Update { status }, _) => store::update_status(&tx, &id, status, now)?,
            (Decision::Delete { status }, Some(row)) => store::delete_resource(&tx, row, status, now)?,
            _ => {}
        }
        tx.commit()?;
        let what = match decision {
            Decision::UnknownResource => "unknown resource; nothing written".to_owned(),
            Decision::Update { .. } => "status stored".to_owned(),
            Decision::Delete { .. } => "deleted by the agent; resource removed".to_owned(),
            Decision::Skip(why) => format!("skipped ({why:?})"),
        };
        host.debug(&format!("status of resource {id}: {what}"));
        Ok(())
    }
}

fn kv_json<T: for<'de> Deserialize<'de> + Default>(host: &Host, key: &str) -> T {
    host.kv_get(key)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn set_kv_json<T: Serialize>(host: &Host, key: &str, value: &T) {
    if let Ok(bytes) = serde_json::to_vec(value) {
        host.kv_set(key, &bytes);
    }
}

impl Plugin for Maestro {
    fn describe() -> Description {
        Description {
            name: "maestro".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            sdk_version: SDK_VERSION.into(),
            sources: vec![SOURCE.into()],
            data_types: vec![data_types::MANIFEST_BUNDLES.into()],
            capabilities: ["emit", "log", "timer", "kv", "config", "pg"]
                .map(String::from)
                .to_vec(),
        }
    }

    fn init(host: &Host, config: serde_json::Value) -> Result<Self, SourceError> {
        let config: Config =
            serde_json::from_value(config).map_err(|e| SourceError::Invalid(format!("maestro plugin config: {e}")))?;
        let interval = duration::parse(&config.catch_up_interval)
            .map_err(|e| SourceError::Invalid(format!("maestro plugin config: catch_up_interval: {e}")))?;
        let db = host.pg(&config.database);
        let has_schema = store::check_schema(&db)
            .map_err(|e| SourceError::Internal(format!("database {:?}: {e}", config.database)))?;
        if !has_schema {
            return Err(SourceError::Invalid(format!(
                "database {:?} has no Maestro schema (migration {LAST_MIGRATION} not found); run Maestro's migration first",
                config.database
            )));
        }
        db.listen(EVENTS_CHANNEL).map_err(|e| {
            SourceError::Invalid(format!(
                "cannot LISTEN on {EVENTS_CHANNEL:?} in database {:?}: {e}",
                config.database
            ))
        })?;
        host.set_timer(CATCH_UP_TIMER, interval, true);
        Ok(Self {
            database: config.database,
        })
    }

    /// §9: every resource of the consumer, soft-deleted ones included. Any error fails the whole
    /// resync: a partial answer would make the agent delete the works left out.
    fn list(&mut self, host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, SourceError> {
        if options.data_type != data_types::MANIFEST_BUNDLES {
            return Ok(vec![]);
        }
        let rows = store::list_resources(&host.pg(&self.database), &options.cluster_name)?;
        rows.iter()
            .map(|row| {
                spec_event(row, actions::UPDATE_REQUEST, Read::List)
                    .map_err(|e| SourceError::Internal(format!("resource {}: {e}", row.id)))
            })
            .collect()
    }

    fn handle(&mut self, host: &Host, _identity: Identity, event: CloudEvent) -> Result<(), SourceError> {
        let ty = EventType::parse(&event.ty).map_err(|e| SourceError::Invalid(e.to_string()))?;
        if ty.data_type.to_string() != data_types::MANIFEST_BUNDLES
            || ty.subresource != SubResource::Status
            || ty.action != actions::UPDATE_REQUEST
        {
            return Err(SourceError::Invalid(format!(
                "the maestro source takes manifest bundle status updates, not {}",
                event.ty
            )));
        }
        self.update_status(host, event)
    }

    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), SourceError> {
        match event {
            HostEvent::Timer(name) if name == CATCH_UP_TIMER => self.catch_up(host, None),
            HostEvent::Timer(name) if name == DRAIN_TIMER => self.drain(host, kv_json(host, keys::QUEUE)),
            HostEvent::Timer(name) if name == RETRY_TIMER => self.retry(host),
            HostEvent::Notification { channel, payload, .. } if channel == EVENTS_CHANNEL => {
                set_kv_json(host, keys::LAST_HEARD, &Some(Utc::now()));
                self.enqueue(host, vec![payload], true)
            }
            HostEvent::Listening {
                channel, reconnected, ..
            } if channel == EVENTS_CHANNEL => self.listening(host, reconnected),
            _ => Ok(()),
        }
    }
}
