//! The thread that ticks the engine's epoch: every 5 ms while the host is busy, so a busy guest
//! yields to the async runtime at least that often; every 50 ms once no guest call has started or
//! run for a second, so an idle host is not woken 200 times a second.
//!
//! The pace under load is the fine one on purpose: ticking finely only while a call is under way
//! measured about 7 % more CPU per event on the maestro spec path (BENCHMARKS.md, "cpu_maestro").

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use wasmtime::EngineWeak;

/// The epoch advances this often while the host is busy.
const BUSY_TICK: Duration = Duration::from_millis(5);
/// ... and this often once it is quiet. A call that starts then yields first within this, then
/// every [`BUSY_TICK`].
const QUIET_TICK: Duration = Duration::from_millis(50);
/// The host is quiet when no guest call has started or run for this long.
const QUIET_AFTER: Duration = Duration::from_secs(1);

/// Guest calls running now, each counted by the [`Running`] it holds.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// Guest calls started since the process began.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// Ticks `engine`'s epoch on a thread of its own until the engine is dropped.
pub(super) fn start_ticker(engine: EngineWeak) {
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            let mut pace = Pace::new(Instant::now());
            while let Some(engine) = engine.upgrade() {
                engine.increment_epoch();
                drop(engine);
                let tick = pace.next(
                    STARTED.load(Ordering::Relaxed),
                    RUNNING.load(Ordering::Relaxed),
                    Instant::now(),
                );
                std::thread::sleep(tick);
            }
        })
        .expect("the epoch thread starts");
}

/// A guest call under way: counted from [`Running::start`] until dropped.
#[must_use = "the call counts as running only while this is held"]
pub(super) struct Running(());

impl Running {
    pub(super) fn start() -> Self {
        STARTED.fetch_add(1, Ordering::Relaxed);
        RUNNING.fetch_add(1, Ordering::Relaxed);
        Self(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long the ticker sleeps, from what it saw of the calls at each tick.
struct Pace {
    started: u64,
    last_busy: Instant,
}

impl Pace {
    fn new(now: Instant) -> Self {
        Self {
            started: 0,
            last_busy: now,
        }
    }

    /// The sleep before the next tick, with `started` calls started so far and `running` under
    /// way at `now`.
    fn next(&mut self, started: u64, running: usize, now: Instant) -> Duration {
        if started != self.started || running > 0 {
            self.started = started;
            self.last_busy = now;
        }
        if now.duration_since(self.last_busy) < QUIET_AFTER {
            BUSY_TICK
        } else {
            QUIET_TICK
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_is_fine_while_calls_come_and_coarse_after_a_quiet_second() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut pace = Pace::new(start);
        assert_eq!(pace.next(0, 0, at(5)), BUSY_TICK, "just started");
        assert_eq!(pace.next(0, 0, at(1_000)), QUIET_TICK, "a second without calls");
        assert_eq!(
            pace.next(1, 0, at(1_050)),
            BUSY_TICK,
            "a call started and ended between ticks"
        );
        assert_eq!(pace.next(1, 0, at(2_000)), BUSY_TICK, "within a second of it");
        assert_eq!(pace.next(1, 0, at(2_050)), QUIET_TICK, "a second after it");
        assert_eq!(pace.next(1, 1, at(9_000)), BUSY_TICK, "a call that runs on");
        assert_eq!(pace.next(1, 1, at(12_000)), BUSY_TICK, "still running");
        assert_eq!(pace.next(1, 0, at(13_000)), QUIET_TICK, "a second after it ended");
    }

    #[test]
    fn a_running_call_is_counted_until_dropped() {
        let started = STARTED.load(Ordering::Relaxed);
        let running = Running::start();
        assert!(STARTED.load(Ordering::Relaxed) > started);
        assert!(RUNNING.load(Ordering::Relaxed) >= 1);
        drop(running);
    }
}
