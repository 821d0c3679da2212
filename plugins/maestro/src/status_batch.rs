//! Agents' status updates written to Maestro's tables a batch at a time
//! (`docs/maestro-database.md` §5.2): one transaction for the whole batch — Maestro's
//! `resource_status` lock of every resource taken in one statement, what each update is judged
//! against read in one, the statuses, their `StatusUpdate` events and their NOTIFYs written in one,
//! one `COMMIT` — where one update at a time paid all five round trips and a commit each.
//!
//! Each update is judged as it would be alone ([`decide`]), in the batch's order, against the
//! row as the updates before it in the batch left it: two updates of one resource apply in order
//! (a stale or older one is skipped), and one after a `Deleted` condition finds no resource. An
//! update refused (a missing extension, another cluster's resource) fails alone and writes
//! nothing; the rest of the batch commits. A failure of the transaction itself fails every
//! update of the batch, which the agents send again.

use std::collections::HashMap;

use chrono::Utc;
use conductor_plugin_sdk::ocm::OcmExtensions;
use conductor_plugin_sdk::{CloudEvent, Database, Error, Host};

use crate::status::{Decision, StatusTarget, decide};
use crate::store::{self, StatusWrite};

/// Writes `updates` in one transaction; one result per update, in their order.
pub fn write(host: &Host, db: &Database<'_>, updates: &[CloudEvent]) -> Vec<Result<(), Error>> {
    let ids: Vec<Option<&str>> = updates.iter().map(|e| e.resource_id().ok()).collect();
    let mut results: Vec<Result<(), Error>> = ids
        .iter()
        .map(|id| match id {
            Some(_) => Ok(()),
            None => Err(Error::Invalid("status update without resourceid".into())),
        })
        .collect();
    if let Err(e) = commit(host, db, updates, &ids, &mut results) {
        for result in results.iter_mut().filter(|r| r.is_ok()) {
            *result = Err(e.clone());
        }
    }
    results
}

/// The batch's transaction. `results` holds an error for each update refused before it (or
/// while it is judged); the others succeed if this does.
fn commit(
    host: &Host,
    db: &Database<'_>,
    updates: &[CloudEvent],
    ids: &[Option<&str>],
    results: &mut [Result<(), Error>],
) -> Result<(), Error> {
    let mut distinct: Vec<&str> = ids.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.is_empty() {
        return Ok(());
    }
    let tx = db.begin()?;
    store::lock_statuses(&tx, &distinct)?;
    let mut targets: HashMap<String, StatusTarget> = store::read_status_targets(&tx, &distinct)?;
    let now = Utc::now();
    let mut writes: Vec<StatusWrite<'_>> = Vec::new();
    for ((event, id), result) in updates.iter().zip(ids).zip(results.iter_mut()) {
        let Some(id) = *id else { continue };
        let decision = match decide(event, targets.get(id)) {
            Ok(d) => d,
            Err(e) => {
                *result = Err(Error::Invalid(e.to_string()));
                continue;
            }
        };
        match decision {
            Decision::Update { status } => {
                if let Some(target) = targets.get_mut(id) {
                    target.status = Some(status.clone());
                }
                writes.push(StatusWrite { id, status });
            }
            // The whole row (its payload goes into the StatusDelete event), read under the lock,
            // after the statuses decided before it are written: the events keep their order.
            Decision::Delete { status } => {
                store::store_statuses(&tx, &writes, now)?;
                writes.clear();
                if let Some(row) = store::read_resource(&tx, id)? {
                    store::delete_resource(&tx, &row, &status, now)?;
                }
                targets.remove(id);
                host.debug(&format!(
                    "status of resource {id}: deleted by the agent; resource removed"
                ));
            }
            // Only the rare outcomes are logged: a line formatted for every stored status costs
            // each update a string and a host call, and the host drops it below its debug level.
            Decision::UnknownResource => {
                host.debug(&format!("status of resource {id}: unknown resource; nothing written"))
            }
            Decision::Skip(_) => {}
        }
    }
    store::store_statuses(&tx, &writes, now)?;
    tx.commit()
}
