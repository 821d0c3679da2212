//! What a plugin's calls did, for the inspector: how many, how many failed, how long they took
//! (a log-linear histogram: four buckets per power of two, so a quantile is within 25 %) and the
//! last error. Lock-free but for the last error, which is written only when a call fails.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Buckets cover 0 µs up to 2^41 µs (about 25 days): more than any call may take.
const BUCKETS: usize = 160;

/// The last failure of a plugin's calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    pub at: SystemTime,
    pub message: String,
}

/// A point-in-time copy of [`CallStats`].
#[derive(Debug, Clone, PartialEq)]
pub struct CallStatsSnapshot {
    pub calls: u64,
    pub errors: u64,
    pub mean: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub last_error: Option<LastError>,
}

pub struct CallStats {
    calls: AtomicU64,
    errors: AtomicU64,
    total_micros: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
    last_error: parking_lot::Mutex<Option<LastError>>,
}

impl Default for CallStats {
    fn default() -> Self {
        Self {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            total_micros: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            last_error: parking_lot::Mutex::new(None),
        }
    }
}

/// The bucket of a duration in microseconds: 0–3 µs exactly, then four per power of two.
fn bucket(micros: u64) -> usize {
    if micros < 4 {
        return micros as usize;
    }
    let log2 = 63 - u64::from(micros.leading_zeros());
    let sub = (micros >> (log2 - 2)) & 3;
    (((log2 - 1) * 4 + sub) as usize).min(BUCKETS - 1)
}

/// The largest duration (µs) a bucket holds.
fn upper_bound(index: usize) -> u64 {
    if index < 4 {
        return index as u64;
    }
    let (log2, sub) = (index as u64 / 4 + 1, index as u64 % 4);
    ((5 + sub) << (log2 - 2)) - 1
}

impl CallStats {
    /// Counts a call that took `elapsed` and failed with `error`, if it did.
    pub fn record(&self, elapsed: Duration, error: Option<&dyn std::fmt::Display>) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.total_micros.fetch_add(micros, Ordering::Relaxed);
        self.buckets[bucket(micros)].fetch_add(1, Ordering::Relaxed);
        if let Some(error) = error {
            self.errors.fetch_add(1, Ordering::Relaxed);
            *self.last_error.lock() = Some(LastError {
                at: SystemTime::now(),
                message: error.to_string(),
            });
        }
    }

    pub fn snapshot(&self) -> CallStatsSnapshot {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let counted: u64 = counts.iter().sum();
        let quantile = |q: f64| {
            if counted == 0 {
                return Duration::ZERO;
            }
            let rank = ((counted as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return Duration::from_micros(upper_bound(i));
                }
            }
            Duration::from_micros(upper_bound(BUCKETS - 1))
        };
        let calls = self.calls.load(Ordering::Relaxed);
        CallStatsSnapshot {
            calls,
            errors: self.errors.load(Ordering::Relaxed),
            mean: Duration::from_micros(self.total_micros.load(Ordering::Relaxed) / calls.max(1)),
            p50: quantile(0.5),
            p99: quantile(0.99),
            last_error: self.last_error.lock().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_hold_their_values() {
        let mut last = 0;
        for micros in [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 100, 1_000, 65_535, 1 << 30, 1 << 40] {
            let b = bucket(micros);
            assert!(b >= last, "{micros} µs went to bucket {b}, below {last}");
            assert!(upper_bound(b) >= micros, "{micros} µs is above bucket {b}'s bound");
            // Within a quarter of the value: four buckets per power of two.
            assert!(
                upper_bound(b) <= micros + micros / 4 + 1,
                "{micros}: {}",
                upper_bound(b)
            );
            last = b;
        }
    }

    #[test]
    fn counts_errors_and_estimates_quantiles() {
        let stats = CallStats::default();
        for _ in 0..98 {
            stats.record(Duration::from_micros(100), None);
        }
        stats.record(Duration::from_millis(10), None);
        stats.record(Duration::from_millis(50), Some(&"database unreachable"));
        let s = stats.snapshot();
        assert_eq!((s.calls, s.errors), (100, 1));
        assert!(
            s.p50 >= Duration::from_micros(100) && s.p50 < Duration::from_micros(125),
            "{:?}",
            s.p50
        );
        assert!(
            s.p99 >= Duration::from_millis(10) && s.p99 < Duration::from_micros(12_500),
            "{:?}",
            s.p99
        );
        assert_eq!(s.mean, Duration::from_micros((98 * 100 + 10_000 + 50_000) / 100));
        assert_eq!(s.last_error.unwrap().message, "database unreachable");
        assert_eq!(CallStats::default().snapshot().p99, Duration::ZERO);
    }
}
