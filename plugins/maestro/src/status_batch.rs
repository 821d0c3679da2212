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
//!
//! Before the `COMMIT`, the batch takes in the updates that arrived for the plugin meanwhile
//! (`requests.take-waiting`), part after part until none waits: their locks are only tried, so a
//! transaction holding the first part's locks (taken in key order) never waits for more. An update
//! whose lock another transaction holds, with every later update of its resource, is written after
//! the `COMMIT` in a transaction of its own. The statuses of every part are written in one
//! statement sent with the `COMMIT`, so a part costs one round trip (its locks and its rows,
//! `transaction.run-all`), and a batch that takes nothing in two in all: `BEGIN` with its locks
//! and reads, its writes with the `COMMIT` (`pg.begin-with`, `commit-with`).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use conductor_plugin_sdk::ocm::OcmExtensions;
use conductor_plugin_sdk::ocm::extensions::SEQUENCE_ID;
use conductor_plugin_sdk::{CloudEvent, Database, Error, Host, Transaction};

use crate::status::{Decision, Status, StatusTarget, StoredStatus, decide};
use crate::store::{self, StatusWrite};

/// A status update to write, or why it is refused before it is judged.
pub type Update = Result<CloudEvent, Error>;

/// Writes `updates` in one transaction, with what `take` brings while it is open (requests that
/// waited while the batch ran); one result per update, given then taken, in their order.
pub fn write(
    host: &Host,
    db: &Database<'_>,
    updates: Vec<Update>,
    take: &mut dyn FnMut() -> Vec<Update>,
) -> Vec<Result<(), Error>> {
    let mut batch = Batch::new(updates);
    let outcome = batch.commit(host, db, take);
    if let Err(e) = outcome {
        batch.fail_all(&e);
        return batch.results;
    }
    if !batch.deferred.is_empty() {
        // Taken updates whose locks another transaction held: written after, in a transaction
        // of their own that waits for them as a first batch does.
        let deferred = std::mem::take(&mut batch.deferred);
        let updates = deferred.iter().map(|&i| batch.updates[i].clone()).collect();
        let written = write(host, db, updates, &mut Vec::new);
        for (i, result) in deferred.into_iter().zip(written) {
            batch.results[i] = result;
        }
    }
    batch.results
}

struct Batch {
    updates: Vec<Update>,
    ids: Vec<Option<String>>,
    results: Vec<Result<(), Error>>,
    /// Updates left for a transaction of their own (their resource's lock was not free).
    deferred: Vec<usize>,
    /// Statuses decided and not yet written (update, status): written together, before a
    /// resource is deleted and before the `COMMIT`, so a part taken in costs no write of its own.
    unwritten: Vec<(usize, Status)>,
}

impl Batch {
    fn new(updates: Vec<Update>) -> Self {
        let mut batch = Self {
            updates: Vec::new(),
            ids: Vec::new(),
            results: Vec::new(),
            deferred: Vec::new(),
            unwritten: Vec::new(),
        };
        batch.extend(updates);
        batch
    }

    fn extend(&mut self, updates: Vec<Update>) {
        for update in updates {
            let (id, result) = match &update {
                Ok(event) => match event.resource_id() {
                    Ok(id) => (Some(id.to_owned()), Ok(())),
                    Err(_) => (None, Err(Error::Invalid("status update without resourceid".into()))),
                },
                Err(e) => (None, Err(e.clone())),
            };
            self.updates.push(update);
            self.ids.push(id);
            self.results.push(result);
        }
    }

    fn fail_all(&mut self, e: &Error) {
        for result in self.results.iter_mut().filter(|r| r.is_ok()) {
            *result = Err(e.clone());
        }
    }

    /// The distinct resources of updates `from..`, sorted.
    fn distinct(&self, from: usize) -> Vec<String> {
        let mut ids: Vec<String> = self.ids[from..].iter().flatten().cloned().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn commit(&mut self, host: &Host, db: &Database<'_>, take: &mut dyn FnMut() -> Vec<Update>) -> Result<(), Error> {
        let first = self.distinct(0);
        if first.is_empty() {
            return Ok(());
        }
        let refs: Vec<&str> = first.iter().map(String::as_str).collect();
        let (tx, mut targets) = store::begin_status_batch(db, &refs)?;
        let mut held: HashSet<String> = first.into_iter().collect();
        let mut left: HashSet<String> = HashSet::new();
        let now = Utc::now();
        self.judge(host, &tx, 0..self.updates.len(), &mut targets, now)?;
        loop {
            let more = take();
            if more.is_empty() {
                break;
            }
            let from = self.updates.len();
            self.extend(more);
            // Locks of the batch's first part were taken in key order and waited for; those of
            // later parts are only tried, so this transaction never waits holding locks out of
            // order (no deadlock against Maestro or another replica).
            let new: Vec<String> = self
                .distinct(from)
                .into_iter()
                .filter(|id| !held.contains(id) && !left.contains(id))
                .collect();
            let refs: Vec<&str> = new.iter().map(String::as_str).collect();
            let (locked, read) = store::try_lock_and_read(&tx, &refs)?;
            targets.extend(read);
            for id in new {
                match locked.contains(&id) {
                    true => held.insert(id),
                    false => left.insert(id),
                };
            }
            let mut part = Vec::new();
            for i in from..self.updates.len() {
                match &self.ids[i] {
                    Some(id) if left.contains(id) => self.deferred.push(i),
                    Some(_) => part.push(i),
                    None => {}
                }
            }
            self.judge(host, &tx, part, &mut targets, now)?;
        }
        // What is left to write goes with the `COMMIT`, in one round trip.
        self.with_decided(|writes| store::commit_statuses(tx, writes, now))
    }

    /// Writes the statuses decided so far, in their order, in one statement.
    fn write_decided(&mut self, tx: &Transaction<'_>, now: DateTime<Utc>) -> Result<(), Error> {
        self.with_decided(|writes| store::store_statuses(tx, writes, now))
    }

    /// Hands the statuses decided so far, in their order, to `write`; they are no longer waiting.
    fn with_decided<R>(&mut self, write: impl FnOnce(&[StatusWrite<'_>]) -> R) -> R {
        let unwritten = std::mem::take(&mut self.unwritten);
        let writes: Vec<StatusWrite<'_>> = unwritten
            .iter()
            .filter_map(|(i, status)| {
                Some(StatusWrite {
                    id: self.ids[*i].as_deref()?,
                    status: &status.0,
                })
            })
            .collect();
        write(&writes)
    }

    /// Judges updates `which` (in their order) against `targets` as the updates before left them;
    /// a status to store waits in `unwritten`, a deletion is written at once (after what waits).
    fn judge(
        &mut self,
        host: &Host,
        tx: &Transaction<'_>,
        which: impl IntoIterator<Item = usize>,
        targets: &mut HashMap<String, StatusTarget>,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        for i in which {
            let (Some(id), Ok(event)) = (self.ids[i].as_deref(), &self.updates[i]) else {
                continue;
            };
            if self.results[i].is_err() {
                continue;
            }
            let decision = match decide(event, targets.get(id)) {
                Ok(d) => d,
                Err(e) => {
                    self.results[i] = Err(Error::Invalid(e.to_string()));
                    continue;
                }
            };
            match decision {
                Decision::Update { status } => {
                    if let Some(target) = targets.get_mut(id) {
                        let sequence = event.extension_str(SEQUENCE_ID).ok().map(str::to_owned);
                        target.status = Some(StoredStatus { sequence });
                    }
                    self.unwritten.push((i, status));
                }
                // The whole row (its payload goes into the StatusDelete event), read under the
                // lock, after the statuses decided before it are written: the events keep their
                // order.
                Decision::Delete { status } => {
                    let id = id.to_owned();
                    self.write_decided(tx, now)?;
                    let id = id.as_str();
                    if let Some(row) = store::read_resource(tx, id)? {
                        store::delete_resource(tx, &row, &status.0, now)?;
                    }
                    targets.remove(id);
                    host.debug(&format!(
                        "status of resource {id}: deleted by the agent; resource removed"
                    ));
                }
                // Only the rare outcomes are logged: a line formatted for every stored status
                // costs each update a string and a host call, and the host drops it below its
                // debug level.
                Decision::UnknownResource => {
                    host.debug(&format!("status of resource {id}: unknown resource; nothing written"))
                }
                Decision::Skip(_) => {}
            }
        }
        Ok(())
    }
}
