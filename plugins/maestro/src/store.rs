//! Maestro's tables through the host's `pg` capability: the statements of [`crate::sql`] with
//! their parameters bound and their rows read into the plugin's types.

use std::collections::{HashMap, HashSet};

use conductor_plugin_sdk::Database;
use conductor_plugin_sdk::pg::{LockKey, Statement};
use conductor_plugin_sdk::{Error, PgRow, PgRows, PgValue, Timestamp, Transaction};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::spec::ResourceRow;
use crate::sql;
use crate::status::{StatusTarget, StoredStatus};

/// The last Maestro migration this plugin understands (`docs/maestro-database.md` §1.1).
pub const LAST_MIGRATION: &str = "202412181141";
/// The NOTIFY channel of spec events.
pub const EVENTS_CHANNEL: &str = "events";
/// Maestro's advisory lock types (`docs/maestro-database.md` §4.1).
pub const EVENTS_LOCK: &str = "events";
pub const RESOURCE_STATUS_LOCK: &str = "resource_status";
/// Events handled per page of a catch-up.
pub const CATCH_UP_PAGE: i64 = 100;

/// A JSON parameter, sent as `text`. Every statement of [`crate::sql`] casts its JSON
/// parameters to `json` (`$n::json`), and from text PostgreSQL only checks them; the `pg`
/// capability's `json` value is sent as `jsonb`, which PostgreSQL parses into a tree, prints
/// again for the cast and then checks as text: two more passes over every status a batch stores.
/// The statuses are then stored as the plugin wrote them, as Maestro stores its own, not in
/// `jsonb`'s spacing and key order.
fn json_text(value: &Value) -> PgValue {
    // As the SDK's `json` value is made: written straight into a buffer, not through `Display`.
    PgValue::Text(serde_json::to_string(value).expect("a JSON value serializes: its map keys are strings"))
}

/// FNV-1a, 32 bits, reinterpreted as `int4`: Maestro's advisory-lock key of a string.
pub fn fnv1a(s: &str) -> i32 {
    let mut hash: u32 = 2_166_136_261;
    for b in s.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(16_777_619);
    }
    hash as i32
}

/// The lock Maestro takes for `id` of `lock_type` (`events`, `resources`, `resource_status`, …):
/// the two-`int4` form, (FNV-1a(id), FNV-1a(lock type)). The `bigint` form is a different lock
/// space.
pub fn lock_key(id: &str, lock_type: &str) -> LockKey {
    let (a, b) = lock_pair(id, lock_type);
    LockKey::Pair(a, b)
}

/// The two `int4` keys of [`lock_key`], for statements that lock in SQL.
pub fn lock_pair(id: &str, lock_type: &str) -> (i32, i32) {
    (fnv1a(id), fnv1a(lock_type))
}

/// An `events` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub source: String,
    pub source_id: String,
    pub event_type: String,
    pub reconciled: bool,
}

fn text(row: &PgRow<'_>, column: &str) -> Result<String, Error> {
    Ok(row.text(column)?.unwrap_or_default().to_owned())
}

fn resource(row: PgRow<'_>) -> Result<ResourceRow, Error> {
    Ok(ResourceRow {
        id: text(&row, "id")?,
        consumer_name: text(&row, "consumer_name")?,
        version: row.int("version")?.unwrap_or_default(),
        source: text(&row, "source")?,
        payload: row.json("payload")?.unwrap_or(Value::Null),
        status: row.json("status")?,
        created_at: row.timestamp("created_at")?,
        deleted_at: row.timestamp("deleted_at")?,
    })
}

fn resources(rows: PgRows) -> Result<Vec<ResourceRow>, Error> {
    rows.iter().map(resource).collect()
}

/// A page of event ids, in id order.
pub struct Page {
    pub ids: Vec<String>,
}

impl Page {
    /// The last id, to continue after it.
    pub fn last(&self) -> Option<&String> {
        self.ids.last()
    }
}

/// Checks that the database has Maestro's schema (its last migration).
pub fn check_schema(db: &Database<'_>) -> Result<bool, Error> {
    let present = db.query(sql::SCHEMA_PRESENT, &[])?;
    if present.first().and_then(|r| r.bool("present").ok().flatten()) != Some(true) {
        return Ok(false);
    }
    Ok(!db.query(sql::LAST_MIGRATION, &[LAST_MIGRATION.into()])?.is_empty())
}

/// An event of a batch as [`lock_and_read_events`] found it.
#[derive(Debug, Clone, PartialEq)]
pub struct LockedEvent {
    /// This replica holds the event's `events` lock until the transaction ends.
    pub locked: bool,
    /// The event; `None` for an event that is gone.
    pub found: Option<EventRow>,
}

/// An event a batch asks for: its id, and whether the batch may send its resource.
pub struct Wanted<'q> {
    pub id: &'q str,
    pub may_send: bool,
}

/// What a batch of spec events reads as it begins ([`begin_batch`]).
pub struct BatchRead {
    /// The events, in the order asked.
    pub events: Vec<LockedEvent>,
    /// The resources of the events that may be sent, by id.
    pub resources: HashMap<String, ResourceRow>,
}

/// Begins a batch of spec events, in one round trip with its `BEGIN`: try-locks each event with
/// Maestro's `events` lock and reads it, and waits for this replica's send lock of the resource
/// of each event that may be sent ([`sql::LOCK_AND_READ_EVENTS`]); then reads those resources
/// ([`sql::READ_RESOURCES_OF_EVENTS`]), with a snapshot that follows the send locks.
pub fn begin_batch<'h>(
    db: &Database<'h>,
    replica: u64,
    events: &[Wanted<'_>],
) -> Result<(Transaction<'h>, BatchRead), Error> {
    let wanted: Vec<Value> = events
        .iter()
        .enumerate()
        .map(|(n, e)| {
            let (a, b) = lock_pair(e.id, EVENTS_LOCK);
            json!({"n": n, "id": e.id, "a": a, "b": b, "s": e.may_send})
        })
        .collect();
    let sent: Vec<&str> = events.iter().filter(|e| e.may_send).map(|e| e.id).collect();
    let (tx, rows) = db.begin_with(&[
        Statement::new(
            sql::LOCK_AND_READ_EVENTS,
            vec![json_text(&Value::from(wanted)), (replica as i64).into()],
        ),
        Statement::new(sql::READ_RESOURCES_OF_EVENTS, vec![json_text(&json!(sent))]),
    ])?;
    let [locked, resources] = each_of_two(rows)?;
    let read = BatchRead {
        events: locked_events(&locked, events.len())?,
        resources: resources
            .iter()
            .map(|row| resource(row).map(|r| (r.id.clone(), r)))
            .collect::<Result<_, _>>()?,
    };
    Ok((tx, read))
}

/// The events of a batch as [`sql::LOCK_AND_READ_EVENTS`] found them, in the order asked.
fn locked_events(rows: &PgRows, len: usize) -> Result<Vec<LockedEvent>, Error> {
    let mut out = vec![
        LockedEvent {
            locked: false,
            found: None
        };
        len
    ];
    for row in rows.iter() {
        let Some(n) = position(&row, len)? else {
            continue;
        };
        out[n].locked = row.bool("locked")?.unwrap_or(false);
        if row.bool("found")? != Some(true) {
            continue;
        }
        out[n].found = Some(EventRow {
            source: text(&row, "event_source")?,
            source_id: text(&row, "source_id")?,
            event_type: text(&row, "event_type")?,
            reconciled: row.bool("reconciled")?.unwrap_or(false),
        });
    }
    Ok(out)
}

fn position(row: &PgRow<'_>, len: usize) -> Result<Option<usize>, Error> {
    Ok(row.int("n")?.and_then(|n| usize::try_from(n).ok()).filter(|&n| n < len))
}

/// One resource, unscoped (soft-deleted rows too), in a transaction.
pub fn read_resource(tx: &Transaction<'_>, id: &str) -> Result<Option<ResourceRow>, Error> {
    let rows = tx.query(sql::READ_RESOURCE, &[id.into()])?;
    rows.first().map(resource).transpose()
}

/// Begins a batch of status updates of the resources `ids`, in one round trip with its `BEGIN`:
/// takes Maestro's `resource_status` lock of each, in one statement ([`sql::LOCK_STATUSES`]: in
/// key order, held until the transaction ends), then reads what their updates are judged against
/// ([`sql::READ_STATUS_TARGETS`]), with a snapshot that follows the locks.
pub fn begin_status_batch<'h>(
    db: &Database<'h>,
    ids: &[&str],
) -> Result<(Transaction<'h>, HashMap<String, StatusTarget>), Error> {
    let keys: Vec<Value> = ids
        .iter()
        .map(|id| {
            let (a, b) = lock_pair(id, RESOURCE_STATUS_LOCK);
            json!({"a": a, "b": b})
        })
        .collect();
    let (tx, rows) = db.begin_with(&[
        Statement::new(sql::LOCK_STATUSES, vec![json_text(&Value::from(keys))]),
        read_status_targets_of(ids),
    ])?;
    let [_, targets] = each_of_two(rows)?;
    Ok((tx, status_targets(&targets, |_| true)?))
}

/// The rows of each of two statements sent together.
fn each_of_two(rows: Vec<PgRows>) -> Result<[PgRows; 2], Error> {
    <[PgRows; 2]>::try_from(rows).map_err(|rows| Error::Internal(format!("{} results for 2 statements", rows.len())))
}

/// A part taken into a running status batch: tries Maestro's `resource_status` lock of each
/// resource of `ids` without waiting, and reads the rows after the locks, both in one round trip
/// (`transaction.run-all`). The ids whose lock this transaction now holds, and what their updates
/// are judged against (the rows of the others, read without their lock, are left out).
pub fn try_lock_and_read(
    tx: &Transaction<'_>,
    ids: &[&str],
) -> Result<(HashSet<String>, HashMap<String, StatusTarget>), Error> {
    if ids.is_empty() {
        return Ok((HashSet::new(), HashMap::new()));
    }
    let mut by_pair: HashMap<(i32, i32), Vec<&str>> = HashMap::new();
    let keys: Vec<Value> = ids
        .iter()
        .map(|id| {
            let (a, b) = lock_pair(id, RESOURCE_STATUS_LOCK);
            by_pair.entry((a, b)).or_default().push(id);
            json!({"a": a, "b": b})
        })
        .collect();
    let rows = tx.run_all(&[
        Statement::new(sql::TRY_LOCK_STATUSES, vec![json_text(&Value::from(keys))]),
        read_status_targets_of(ids),
    ])?;
    let [locks, targets] = each_of_two(rows)?;
    let mut held = HashSet::new();
    for row in locks.iter() {
        if row.bool("held")? != Some(true) {
            continue;
        }
        let pair = (
            row.int("a")?.and_then(|a| i32::try_from(a).ok()).unwrap_or_default(),
            row.int("b")?.and_then(|b| i32::try_from(b).ok()).unwrap_or_default(),
        );
        held.extend(by_pair.get(&pair).into_iter().flatten().map(|id| (*id).to_owned()));
    }
    let targets = status_targets(&targets, |id| held.contains(id))?;
    Ok((held, targets))
}

/// [`sql::READ_STATUS_TARGETS`] for `ids`.
fn read_status_targets_of(ids: &[&str]) -> Statement {
    Statement::new(sql::READ_STATUS_TARGETS, vec![json_text(&json!(ids))])
}

/// The targets [`sql::READ_STATUS_TARGETS`] read, by id: those of the resources `wanted` takes
/// (the others are not parsed).
fn status_targets(rows: &PgRows, wanted: impl Fn(&str) -> bool) -> Result<HashMap<String, StatusTarget>, Error> {
    let mut targets = HashMap::new();
    for row in rows.iter() {
        let id = text(&row, "id")?;
        if !wanted(&id) {
            continue;
        }
        let target = StatusTarget {
            consumer_name: text(&row, "consumer_name")?,
            version: row.int("version")?.unwrap_or_default(),
            metadata: match row.text("metadata")? {
                Some(text) => Some(
                    RawValue::from_string(text.to_owned())
                        .map_err(|e| Error::Internal(format!("the payload's metadata is not JSON: {e}")))?,
                ),
                None => None,
            },
            status: match row.bool("has_status")? {
                // A `sequenceid` that is not a JSON string is none.
                Some(true) => Some(StoredStatus {
                    sequence: row.text("sequence")?.and_then(|s| serde_json::from_str(s).ok()),
                }),
                _ => None,
            },
        };
        targets.insert(id, target);
    }
    Ok(targets)
}

/// A status to store: the resource, and the status.
pub struct StatusWrite<'a> {
    pub id: &'a str,
    pub status: &'a RawValue,
}

/// Stores `writes` (in their order; a resource takes its last), a `StatusUpdate` event for each
/// and Maestro's doorbell for each, at commit: one round trip ([`sql::STORE_STATUSES`]).
pub fn store_statuses(tx: &Transaction<'_>, writes: &[StatusWrite<'_>], now: Timestamp) -> Result<(), Error> {
    match store_statuses_of(writes, now)? {
        Some(statement) => tx.query(&statement.sql, &statement.params).map(drop),
        None => Ok(()),
    }
}

/// Stores `writes` as [`store_statuses`] does and commits, in one round trip.
pub fn commit_statuses(tx: Transaction<'_>, writes: &[StatusWrite<'_>], now: Timestamp) -> Result<(), Error> {
    match store_statuses_of(writes, now)? {
        Some(statement) => tx.commit_with(&[statement]).map(drop),
        None => tx.commit(),
    }
}

/// [`sql::STORE_STATUSES`] for `writes`; none for none.
fn store_statuses_of(writes: &[StatusWrite<'_>], now: Timestamp) -> Result<Option<Statement>, Error> {
    if writes.is_empty() {
        return Ok(None);
    }
    /// One element of `$1`, serialized as it is: a status is not copied.
    #[derive(serde::Serialize)]
    struct Row<'a> {
        id: &'a str,
        status: &'a RawValue,
        event: String,
        last: bool,
    }
    let mut seen = std::collections::HashSet::new();
    let mut rows: Vec<Row<'_>> = writes
        .iter()
        .rev()
        .map(|w| Row {
            id: w.id,
            status: w.status,
            event: uuid::Uuid::new_v4().to_string(),
            last: seen.insert(w.id),
        })
        .collect();
    rows.reverse();
    let rows = serde_json::to_string(&rows).map_err(|e| Error::Internal(format!("statuses as JSON: {e}")))?;
    Ok(Some(Statement::new(
        sql::STORE_STATUSES,
        vec![PgValue::Text(rows), now.into()],
    )))
}

/// A consumer's resources for resync: unscoped, no source filter.
pub fn list_resources(db: &Database<'_>, cluster: &str) -> Result<Vec<ResourceRow>, Error> {
    resources(db.query(sql::LIST_RESOURCES, &[cluster.into()])?)
}

/// Ends a batch of spec events: sets `reconciled_date` of the events `ids`
/// ([`sql::MARK_RECONCILED`]) and commits, in one round trip.
pub fn commit_batch(tx: Transaction<'_>, ids: &[&str], now: Timestamp) -> Result<(), Error> {
    if ids.is_empty() {
        return tx.commit();
    }
    tx.commit_with(&[Statement::new(
        sql::MARK_RECONCILED,
        vec![now.into(), json_text(&json!(ids))],
    )])
    .map(drop)
}

/// The consumer of each event of `ids`, in their order (`None`: the event or its resource is
/// gone), in one statement.
pub fn consumers_of(db: &Database<'_>, ids: &[&str]) -> Result<Vec<Option<String>>, Error> {
    let rows = db.query(sql::CONSUMERS_OF_EVENTS, &[json_text(&json!(ids))])?;
    let consumers: Vec<Option<String>> = match rows.first().map(|r| r.text("consumers")).transpose()?.flatten() {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| Error::Internal(format!("the consumers of {} events: {e}", ids.len())))?,
        None => Vec::new(),
    };
    if consumers.len() != ids.len() {
        return Err(Error::Internal(format!(
            "asked the consumers of {} events, read {}",
            ids.len(),
            consumers.len()
        )));
    }
    Ok(consumers)
}

/// Deletes the reconciled events (startup); returns how many.
pub fn purge_reconciled(db: &Database<'_>) -> Result<u64, Error> {
    db.execute(sql::PURGE_RECONCILED, &[])
}

/// How many events wait unreconciled, and how old (seconds) the oldest of `retrying` that is still
/// unreconciled is (0 without one).
pub fn unreconciled(db: &Database<'_>, retrying: &[&str]) -> Result<(i64, f64), Error> {
    let rows = db.query(sql::UNRECONCILED, &[json_text(&json!(retrying))])?;
    let row = rows
        .first()
        .ok_or_else(|| Error::Internal("the count of unreconciled events returned no row".into()))?;
    let waiting = row.int("waiting")?.unwrap_or(0);
    let oldest = match row.get("oldest")? {
        PgValue::Float8(f) => *f,
        _ => 0.0,
    };
    Ok((waiting, oldest))
}

/// A page of the events to (re-)handle, in id order after `after`: the unreconciled ones, plus
/// (with `since`) those written since then.
pub fn pending_events(db: &Database<'_>, since: Option<Timestamp>, after: Option<&str>) -> Result<Page, Error> {
    // Without `since`, a time no event has (parameters keep one type from call to call).
    let never = Timestamp::from_timestamp(253_402_300_799, 0).unwrap_or(Timestamp::MAX_UTC);
    let rows = db.query(
        sql::PENDING_PAGE,
        &[
            since.unwrap_or(never).into(),
            after.unwrap_or("").into(),
            CATCH_UP_PAGE.into(),
        ],
    )?;
    Ok(Page {
        ids: rows.iter().map(|row| text(&row, "id")).collect::<Result<_, _>>()?,
    })
}

/// The agent deleted the work: a `StatusDelete` event carrying what Maestro needs to tell the
/// source (the row's source and payload, this status) plus NOTIFY, then the hard delete.
pub fn delete_resource(
    tx: &Transaction<'_>,
    row: &ResourceRow,
    status: &RawValue,
    now: Timestamp,
) -> Result<(), Error> {
    let event_id = uuid::Uuid::new_v4().to_string();
    let params: [PgValue; 6] = [
        (&event_id).into(),
        now.into(),
        (&row.id).into(),
        (&row.source).into(),
        json_text(&crate::spec::stamped_payload(row)),
        PgValue::Text(status.get().to_owned()),
    ];
    tx.query(sql::INSERT_STATUS_DELETE, &params)?;
    tx.execute(sql::HARD_DELETE, &[(&row.id).into()]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_match_maestros() {
        // docs/maestro-database.md §4.1, computed by Maestro's Go code.
        assert_eq!(fnv1a("events"), 316_203_908);
        assert_eq!(fnv1a("resources"), 1_893_056_498);
        assert_eq!(fnv1a("resource_status"), -1_890_629_248);
        assert_eq!(fnv1a("instances"), 105_446_707);
        assert_eq!(fnv1a("migrations"), 457_026_696);
        assert_eq!(fnv1a("maestro-instances-liveness-check"), -63_087_106);
        assert_eq!(fnv1a("maestro-undelivered-check"), -534_849_769);
        assert_eq!(fnv1a("maestro-stale-delete-check"), -1_780_146_569);
        assert_eq!(lock_key("e1", EVENTS_LOCK), LockKey::Pair(fnv1a("e1"), 316_203_908));
    }
}
