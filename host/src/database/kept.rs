//! Connections kept between uses. sqlx tests every connection given back to its pool with a
//! round trip (a `Sync` and its `ReadyForQuery`, in a task of its own), so a statement in
//! autocommit cost two round trips and a transaction one more than its statements: on the maestro
//! paths one round trip in every five or six. A connection a plugin is done with, clean (no
//! transaction open, no error of its own), waits here for the next statement or transaction on
//! its database instead, for at most [`LINGER`] and at most `most` of them; after that it goes
//! back to the pool, tested as before. A connection in steady use proves itself; one that sat
//! idle longer is tested by the pool when next taken (`pools::PING_IF_IDLE_FOR`, the same second).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::session::Session;

/// How long a connection waits here for its next use before it goes back to the pool.
pub const LINGER: Duration = Duration::from_secs(1);

/// The connections one database keeps, the most recently used last.
pub struct Kept {
    idle: Mutex<VecDeque<(Session, Instant)>>,
    most: usize,
    /// Whether the task that gives back what lingered too long runs.
    sweeping: std::sync::atomic::AtomicBool,
}

impl Kept {
    /// Keeps at most `most` connections (none with 0).
    pub fn new(most: usize) -> Arc<Self> {
        Arc::new(Self {
            idle: Mutex::default(),
            most,
            sweeping: false.into(),
        })
    }

    /// The most recently kept connection, if one waits. Those that waited longer than
    /// [`LINGER`] go back to the pool.
    pub fn take(&self) -> Option<Session> {
        let (taken, stale) = {
            let mut idle = self.lock();
            let taken = idle.pop_back().filter(|(_, since)| since.elapsed() <= LINGER);
            (taken.map(|(conn, _)| conn), stale(&mut idle))
        };
        drop(stale);
        taken
    }

    /// Keeps `conn`, clean, for the next use; the oldest kept goes back to the pool beyond
    /// `most`. Must be called within a Tokio runtime (the first call starts the sweep).
    pub fn keep(self: &Arc<Self>, conn: Session) {
        if self.most == 0 {
            return;
        }
        let over = {
            let mut idle = self.lock();
            idle.push_back((conn, Instant::now()));
            (idle.len() > self.most).then(|| idle.pop_front())
        };
        drop(over);
        if !self.sweeping.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tokio::spawn(sweep(Arc::downgrade(self)));
        }
    }

    /// Gives every kept connection back to the pool (before it closes).
    pub fn release_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        drop(all);
    }

    /// How many connections wait here.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Session, Instant)>> {
        // A panic while holding the lock leaves only a list of connections, still whole.
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The connections that waited longer than [`LINGER`], taken out of `idle` (the oldest first).
fn stale(idle: &mut VecDeque<(Session, Instant)>) -> Vec<Session> {
    let fresh = idle
        .iter()
        .position(|(_, since)| since.elapsed() <= LINGER)
        .unwrap_or(idle.len());
    idle.drain(..fresh).map(|(conn, _)| conn).collect()
}

/// Every [`LINGER`], gives back what waited too long, so that an idle plugin holds no
/// connection; ends with the databases.
async fn sweep(kept: Weak<Kept>) {
    loop {
        tokio::time::sleep(LINGER).await;
        let Some(kept) = kept.upgrade() else { return };
        let stale = stale(&mut kept.lock());
        drop(stale);
    }
}
