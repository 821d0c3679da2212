//! Readiness: whether the process should receive traffic, as `/readyz` reports it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the process should receive traffic: it is serving, and nothing it depends on (a
/// database LISTEN connection) is down.
#[derive(Debug, Default)]
pub struct Readiness {
    serving: AtomicBool,
    /// What is down, by name, with the reason.
    down: parking_lot::Mutex<BTreeMap<String, String>>,
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
        let mut down = self.down.lock();
        match reason {
            Some(reason) => down.insert(what.to_owned(), reason),
            None => down.remove(what),
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
        Err(down.iter().map(|(what, why)| format!("{what}: {why}\n")).collect())
    }
}
