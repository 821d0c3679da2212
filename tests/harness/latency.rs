//! Latencies of the burst tests: the p99, and the bound a burst may raise another cluster's p99
//! to (3× its quiet figure).

use std::time::Duration;

/// A quiet p99 below this is taken as this: a bound of 3× a 2 ms figure measured on an idle
/// machine would be a bound on the machine's noise, not on conductor. A debug build (what the
/// test suite runs) takes 100–300 ms on two cores to handle a batch of a burst — a commit of
/// 10,000 NOTIFYs read and filed by consumer, or a batch of 100 watched deletes — and an event
/// that lands right behind it waits that long whatever the order after, where a release build
/// takes 15–50 ms; so a debug build's floor is 150 ms (one queue in arrival order, as before,
/// made the maestro source's eleventh cluster wait 3.4 s). The release figures, measured with
/// `CONDUCTOR_BIN` naming a release binary, are in BENCHMARKS.md.
pub const QUIET_FLOOR: Duration = if cfg!(debug_assertions) {
    Duration::from_millis(150)
} else {
    Duration::from_millis(20)
};

/// The 99th percentile of `samples` (the highest but 1 % of them).
pub fn p99(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (sorted.len() * 99).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Asserts that the p99 of `during` (another cluster's latencies while `what` ran) is within 3×
/// the p99 of `quiet` (a quiet figure below [`QUIET_FLOOR`] taken as the floor), and prints both.
pub fn assert_within_three_times(quiet: &[Duration], during: &[Duration], what: &str) {
    let (quiet_p99, during_p99) = (p99(quiet), p99(during));
    let bound = 3 * quiet_p99.max(QUIET_FLOOR);
    let slowest = during.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{what}: quiet p99 {quiet_p99:?}; {} meanwhile, p99 {during_p99:?}, slowest {slowest:?} (bound {bound:?})",
        during.len()
    );
    assert!(
        during_p99 <= bound,
        "the eleventh cluster's creates waited behind {what}: p99 {during_p99:?} against quiet {quiet_p99:?} (bound {bound:?}); all: {during:?}"
    );
}
