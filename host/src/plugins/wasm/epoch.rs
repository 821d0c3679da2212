//! The thread that ticks the engine's epoch: every 5 ms while a guest call is running, every
//! 50 ms while none is. A busy guest yields to the async runtime at each tick (and traps at the
//! first one past its deadline): first within 50 ms of its start, then every 5 ms.
//!
//! Short calls (most plugin calls take well under a millisecond) are seldom running when the
//! ticker looks, so under steady load the thread wakes about 20 times a second instead of 200: at
//! 100 kube deliveries a second that was about 2 context switches per event, and 20–55 µs of CPU
//! (one binary with either pace, or this build against the one before: BENCHMARKS.md,
//! "cpu_kube").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::EngineWeak;

/// The epoch advances this often while a guest call is running.
const BUSY_TICK: Duration = Duration::from_millis(5);
/// ... and the ticker looks this often while none is.
const QUIET_TICK: Duration = Duration::from_millis(50);

/// Guest calls running now, each counted by the [`Running`] it holds.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Ticks `engine`'s epoch on a thread of its own until the engine is dropped.
pub(super) fn start_ticker(engine: EngineWeak) {
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = engine.upgrade() {
                let running = RUNNING.load(Ordering::Relaxed);
                if running > 0 {
                    engine.increment_epoch();
                }
                drop(engine);
                std::thread::sleep(pace(running));
            }
        })
        .expect("the epoch thread starts");
}

/// How long the ticker sleeps after it saw `running` guest calls under way.
fn pace(running: usize) -> Duration {
    if running > 0 { BUSY_TICK } else { QUIET_TICK }
}

/// A guest call under way: counted from [`Running::start`] until dropped.
#[must_use = "the call counts as running only while this is held"]
pub(super) struct Running(());

impl Running {
    pub(super) fn start() -> Self {
        RUNNING.fetch_add(1, Ordering::Relaxed);
        Self(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_is_fine_while_a_call_runs_and_coarse_while_none_does() {
        assert_eq!(pace(0), QUIET_TICK);
        assert_eq!(pace(1), BUSY_TICK);
        assert_eq!(pace(8), BUSY_TICK);
    }

    #[test]
    fn a_running_call_is_counted_until_dropped() {
        let running = Running::start();
        assert!(RUNNING.load(Ordering::Relaxed) >= 1);
        drop(running);
    }
}
