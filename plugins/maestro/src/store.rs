//! Maestro's tables through the host's `pg` capability: the statements of [`crate::sql`] with
//! their parameters bound and their rows read into the plugin's types.

use conductor_plugin_sdk::pg::Database;
use conductor_plugin_sdk::{PgError, PgRow, PgRows, PgValue, Timestamp, Transaction};
use serde_json::Value;

use crate::spec::ResourceRow;
use crate::sql;

/// The last Maestro migration this plugin understands (`maestro-db.md` §1.1).
pub const LAST_MIGRATION: &str = "202412181141";
/// The NOTIFY channel of spec events.
pub const EVENTS_CHANNEL: &str = "events";
/// Maestro's advisory lock types (`maestro-db.md` §4.1).
pub const EVENTS_LOCK: &str = "events";
pub const RESOURCE_STATUS_LOCK: &str = "resource_status";

/// An `events` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub source: String,
    pub source_id: String,
    pub event_type: String,
    pub reconciled: bool,
}

fn text(row: &PgRow<'_>, column: &str) -> Result<String, PgError> {
    Ok(row.text(column)?.unwrap_or_default().to_owned())
}

fn resource(row: PgRow<'_>) -> Result<ResourceRow, PgError> {
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

fn resources(rows: PgRows) -> Result<Vec<ResourceRow>, PgError> {
    rows.iter().map(resource).collect()
}

fn ids(rows: PgRows) -> Result<Vec<String>, PgError> {
    rows.iter().map(|r| text(&r, "id")).collect()
}

/// Checks that the database has Maestro's schema (its last migration).
pub fn check_schema(db: &Database<'_>) -> Result<bool, PgError> {
    let present = db.query(sql::SCHEMA_PRESENT, &[])?;
    if present.first().and_then(|r| r.bool("present").ok().flatten()) != Some(true) {
        return Ok(false);
    }
    Ok(!db.query(sql::LAST_MIGRATION, &[LAST_MIGRATION.into()])?.is_empty())
}

pub fn read_event(tx: &Transaction<'_>, id: &str) -> Result<Option<EventRow>, PgError> {
    let rows = tx.query(sql::READ_EVENT, &[id.into()])?;
    let Some(row) = rows.first() else { return Ok(None) };
    Ok(Some(EventRow {
        source: text(&row, "source")?,
        source_id: text(&row, "source_id")?,
        event_type: text(&row, "event_type")?,
        reconciled: row.bool("reconciled")?.unwrap_or(false),
    }))
}

/// One resource, unscoped (soft-deleted rows too), in a transaction.
pub fn read_resource(tx: &Transaction<'_>, id: &str) -> Result<Option<ResourceRow>, PgError> {
    let rows = tx.query(sql::READ_RESOURCE, &[id.into()])?;
    rows.first().map(resource).transpose()
}

/// A consumer's resources for resync: unscoped, no source filter.
pub fn list_resources(db: &Database<'_>, cluster: &str) -> Result<Vec<ResourceRow>, PgError> {
    resources(db.query(sql::LIST_RESOURCES, &[cluster.into()])?)
}

pub fn mark_reconciled(tx: &Transaction<'_>, id: &str, now: Timestamp) -> Result<(), PgError> {
    tx.execute(sql::MARK_RECONCILED, &[now.into(), id.into()]).map(drop)
}

/// Deletes the reconciled events (startup); returns how many.
pub fn purge_reconciled(db: &Database<'_>) -> Result<u64, PgError> {
    db.execute(sql::PURGE_RECONCILED, &[])
}

/// The events to (re-)handle: the unreconciled ones, plus those written since `since`.
pub fn pending_events(db: &Database<'_>, since: Option<Timestamp>) -> Result<Vec<String>, PgError> {
    match since {
        None => ids(db.query(sql::UNRECONCILED, &[])?),
        Some(t) => ids(db.query(sql::UNRECONCILED_OR_SINCE, &[t.into()])?),
    }
}

/// Replaces the status and rings Maestro's doorbell (`StatusUpdate` + NOTIFY, at commit).
pub fn update_status(tx: &Transaction<'_>, id: &str, status: &Value, now: Timestamp) -> Result<(), PgError> {
    tx.execute(sql::UPDATE_STATUS, &[status.into(), now.into(), id.into()])?;
    let event_id = uuid::Uuid::new_v4().to_string();
    tx.query(sql::INSERT_STATUS_UPDATE, &[event_id.into(), now.into(), id.into()])
        .map(drop)
}

/// The agent deleted the work: a `StatusDelete` event carrying what Maestro needs to tell the
/// source (the row's source and payload, this status) plus NOTIFY, then the hard delete.
pub fn delete_resource(tx: &Transaction<'_>, row: &ResourceRow, status: &Value, now: Timestamp) -> Result<(), PgError> {
    let event_id = uuid::Uuid::new_v4().to_string();
    let params: [PgValue; 6] = [
        (&event_id).into(),
        now.into(),
        (&row.id).into(),
        (&row.source).into(),
        (&crate::spec::stamped_payload(row)).into(),
        status.into(),
    ];
    tx.query(sql::INSERT_STATUS_DELETE, &params)?;
    tx.execute(sql::HARD_DELETE, &[(&row.id).into()]).map(drop)
}
