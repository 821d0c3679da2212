//! Readiness: whether the process should receive traffic, as `/readyz` reports it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether the process should receive traffic: it is serving, and nothing it depends on (a
/// database LISTEN connection) is down.
#[derive(Debug, Default)]
pub struct Readiness {
    serving: AtomicBool,
    /// What is down, by name and holder ([`Readiness::set_down`]'s names are held by 0, each
    /// [`Entry`] by a number of its own), with the reason.
    down: parking_lot::Mutex<BTreeMap<(String, u64), String>>,
    /// The last number given to an [`Entry`].
    last_entry: AtomicU64,
}

impl Readiness {
    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::SeqCst);
    }

    pub fn is_serving(&self) -> bool {
        self.serving.load(Ordering::SeqCst)
    }

    /// Marks `what` down (with the reason) or up again (`None`).
    pub fn set_down(&self, what: &str, reason: Option<String>) {
        self.set(what, 0, reason);
    }

    /// An entry reported as `what`, of its own even where another holds the same name: a
    /// plugin's LISTEN and the one of the plugin replacing it, both running while a reload hands
    /// over. Up until marked down; gone when dropped.
    pub fn entry(self: &Arc<Self>, what: String) -> Entry {
        Entry {
            id: self.last_entry.fetch_add(1, Ordering::Relaxed) + 1,
            readiness: Arc::clone(self),
            what,
        }
    }

    fn set(&self, what: &str, holder: u64, reason: Option<String>) {
        let mut down = self.down.lock();
        match reason {
            Some(reason) => down.insert((what.to_owned(), holder), reason),
            None => down.remove(&(what.to_owned(), holder)),
        };
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), String> {
        if !self.is_serving() {
            return Err("not serving".to_owned());
        }
        let down = self.down.lock();
        if down.is_empty() {
            return Ok(());
        }
        Err(down.iter().map(|((what, _), why)| format!("{what}: {why}\n")).collect())
    }
}

/// One holder's entry in [`Readiness`] ([`Readiness::entry`]).
#[derive(Debug)]
pub struct Entry {
    readiness: Arc<Readiness>,
    what: String,
    id: u64,
}

impl Entry {
    /// Marks the entry down (with the reason) or up again (`None`).
    pub fn set_down(&self, reason: Option<String>) {
        self.readiness.set(&self.what, self.id, reason);
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.set_down(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serving() -> Arc<Readiness> {
        let readiness = Arc::new(Readiness::default());
        readiness.set_serving(true);
        readiness
    }

    #[test]
    fn two_entries_of_one_name_are_reported_apart() {
        let readiness = serving();
        let old = readiness.entry("database \"maestro\" LISTEN \"event\" (plugin maestro)".into());
        let new = readiness.entry("database \"maestro\" LISTEN \"event\" (plugin maestro)".into());
        new.set_down(Some("connection lost (reset); reconnecting".into()));
        old.set_down(None);
        let why = readiness.check().expect_err("the new entry is down");
        assert!(why.contains("connection lost (reset)"), "{why}");
        // The replaced plugin's entry goes; the new one's state stays.
        drop(old);
        assert!(readiness.check().is_err(), "the new entry is still down");
        new.set_down(None);
        assert_eq!(readiness.check(), Ok(()));
    }

    #[test]
    fn an_entry_dropped_while_down_is_no_longer_reported() {
        let readiness = serving();
        let entry = readiness.entry("database \"maestro\" LISTEN \"event\" (plugin maestro)".into());
        entry.set_down(Some("connection lost (reset); reconnecting".into()));
        assert!(readiness.check().is_err());
        drop(entry);
        assert_eq!(readiness.check(), Ok(()));
    }

    #[test]
    fn a_named_state_and_an_entry_of_that_name_are_apart() {
        let readiness = serving();
        readiness.set_down("source plugins", Some("waiting for the first list".into()));
        let entry = readiness.entry("source plugins".into());
        drop(entry);
        assert!(readiness.check().is_err(), "the named state is still down");
        readiness.set_down("source plugins", None);
        assert_eq!(readiness.check(), Ok(()));
        readiness.set_serving(false);
        assert_eq!(readiness.check(), Err("not serving".to_owned()));
    }
}
