//! What the hub wrote and what the agents received, and the figures drawn from both.
//!
//! A write is *delivered* when its agent received that version of the resource or a newer one:
//! a server may coalesce quick successive writes of one resource into the latest (Maestro's
//! protocol reads the row when it handles an event), and that is not a loss. Its latency is the
//! time from the start of the write until that receipt.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Create,
    Update,
}

/// One write of the hub: resource `id` at `version`, started at `at`.
#[derive(Debug, Clone)]
pub struct Sent {
    pub kind: Kind,
    pub id: String,
    pub version: i64,
    pub at: Instant,
}

#[derive(Default)]
struct Received {
    /// Per resource, the versions received in increasing order, each with when it first came.
    versions: HashMap<String, Vec<(i64, Instant)>>,
    events: u64,
    out_of_order: u64,
    duplicates: u64,
}

/// Shared by the hub driver (writes) and the agents (receipts).
#[derive(Default)]
pub struct Receipts {
    sent: Mutex<Vec<Sent>>,
    received: Mutex<Received>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Receipts {
    pub fn sent(&self, sent: Sent) {
        lock(&self.sent).push(sent);
    }

    /// An agent received `version` of `id` at `at`: an older version than one it already had is
    /// out of order, the same one again a duplicate.
    pub fn received(&self, id: String, version: i64, at: Instant) {
        let mut r = lock(&self.received);
        r.events += 1;
        let versions = r.versions.entry(id).or_default();
        match versions.last() {
            Some(&(last, _)) if version < last => r.out_of_order += 1,
            Some(&(last, _)) if version == last => r.duplicates += 1,
            _ => versions.push((version, at)),
        }
    }

    /// Events received so far (heartbeats aside).
    pub fn events(&self) -> u64 {
        lock(&self.received).events
    }

    /// Writes so far, and how many of them are not delivered yet.
    pub fn outstanding(&self) -> (usize, usize) {
        let sent = lock(&self.sent);
        let received = lock(&self.received);
        let missing = sent.iter().filter(|s| delivery(&received, s).is_none()).count();
        (sent.len(), missing)
    }

    /// Every delivered write's latency of `kind`, in milliseconds (what shards hand their parent
    /// to merge percentiles exactly).
    pub fn latencies_ms(&self, kind: Kind) -> Vec<f64> {
        let sent = lock(&self.sent);
        let received = lock(&self.received);
        sent.iter()
            .filter(|s| s.kind == kind)
            .filter_map(|s| delivery(&received, s).map(|at| at.saturating_duration_since(s.at).as_secs_f64() * 1e3))
            .collect()
    }

    pub fn summary(&self) -> Summary {
        let sent = lock(&self.sent);
        let received = lock(&self.received);
        let phase = |kind| {
            let mut latencies = Vec::new();
            let mut count = 0;
            let (mut first, mut last) = (None::<Instant>, None::<Instant>);
            for s in sent.iter().filter(|s| s.kind == kind) {
                count += 1;
                first = Some(first.map_or(s.at, |f| f.min(s.at)));
                if let Some(at) = delivery(&received, s) {
                    latencies.push(at.saturating_duration_since(s.at));
                    last = Some(last.map_or(at, |l| l.max(at)));
                }
            }
            let span = first.zip(last).map(|(f, l)| l.saturating_duration_since(f));
            Phase::new(count, latencies, span)
        };
        Summary {
            creates: phase(Kind::Create),
            updates: phase(Kind::Update),
            events_received: received.events,
            out_of_order: received.out_of_order,
            duplicates: received.duplicates,
        }
    }
}

/// When `s` was delivered: the first receipt of its version or a newer one.
fn delivery(received: &Received, s: &Sent) -> Option<Instant> {
    let versions = received.versions.get(&s.id)?;
    let i = versions.partition_point(|&(v, _)| v < s.version);
    versions.get(i).map(|&(_, at)| at)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub creates: Phase,
    pub updates: Phase,
    /// Every spec event the agents received (duplicates and out-of-order ones included).
    pub events_received: u64,
    /// Events carrying an older version of a resource than one its agent already had.
    pub out_of_order: u64,
    /// Events carrying the version of a resource its agent already had.
    pub duplicates: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    pub sent: u64,
    pub delivered: u64,
    pub missing: u64,
    pub latency_ms: Option<Percentiles>,
    /// From the first write until the last delivery.
    pub seconds: f64,
    /// Writes delivered per second over `seconds` (how fast a burst drains).
    pub delivered_per_second: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Phase {
    fn new(sent: u64, mut latencies: Vec<Duration>, span: Option<Duration>) -> Self {
        latencies.sort();
        let delivered = latencies.len() as u64;
        let seconds = span.map_or(0.0, |s| s.as_secs_f64());
        Self {
            sent,
            delivered,
            missing: sent - delivered,
            latency_ms: Percentiles::of(&latencies),
            seconds,
            delivered_per_second: if seconds > 0.0 { delivered as f64 / seconds } else { 0.0 },
        }
    }
}

impl Phase {
    /// The phases of several shards as one: counts added, percentiles of all their latencies
    /// (`latencies_ms`), the longest span.
    pub fn merge(phases: &[Phase], mut latencies_ms: Vec<f64>) -> Self {
        latencies_ms.sort_by(f64::total_cmp);
        let sent = phases.iter().map(|p| p.sent).sum();
        let delivered = phases.iter().map(|p| p.delivered).sum();
        let seconds = phases.iter().map(|p| p.seconds).fold(0.0, f64::max);
        let sorted: Vec<Duration> = latencies_ms
            .iter()
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
            .collect();
        Self {
            sent,
            delivered,
            missing: phases.iter().map(|p| p.missing).sum(),
            latency_ms: Percentiles::of(&sorted),
            seconds,
            delivered_per_second: if seconds > 0.0 { delivered as f64 / seconds } else { 0.0 },
        }
    }
}

impl Percentiles {
    /// Nearest-rank percentiles of sorted `latencies`, in milliseconds.
    pub fn of(sorted: &[Duration]) -> Option<Self> {
        if sorted.is_empty() {
            return None;
        }
        let n = sorted.len();
        let at = |p: f64| {
            let rank = ((n as f64) * p).ceil() as usize;
            sorted[rank.clamp(1, n) - 1].as_secs_f64() * 1e3
        };
        Some(Self {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: at(1.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(r: &Receipts, kind: Kind, id: &str, version: i64, at: Instant) {
        r.sent(Sent {
            kind,
            id: id.into(),
            version,
            at,
        });
    }

    #[test]
    fn a_newer_version_delivers_the_older_writes_and_order_is_checked() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let r = Receipts::default();
        sent(&r, Kind::Create, "a", 1, t0);
        sent(&r, Kind::Update, "a", 2, ms(1));
        sent(&r, Kind::Update, "a", 3, ms(2));
        sent(&r, Kind::Create, "b", 1, ms(3));
        r.received("a".into(), 1, ms(5));
        r.received("a".into(), 3, ms(10)); // 2 coalesced into 3
        r.received("a".into(), 2, ms(11)); // older after newer
        r.received("a".into(), 3, ms(12)); // again
        assert_eq!(r.outstanding(), (4, 1));
        let s = r.summary();
        assert_eq!((s.creates.sent, s.creates.delivered, s.creates.missing), (2, 1, 1));
        assert_eq!((s.updates.sent, s.updates.delivered, s.updates.missing), (2, 2, 0));
        assert_eq!((s.events_received, s.out_of_order, s.duplicates), (4, 1, 1));
        let u = s.updates.latency_ms.unwrap();
        assert_eq!((u.p50, u.max), (8.0, 9.0));
        assert_eq!(s.creates.latency_ms.unwrap().max, 5.0);
        // Updates: first written at 1 ms, last delivered at 10 ms.
        assert!((s.updates.seconds - 0.009).abs() < 1e-9);
        assert!((s.updates.delivered_per_second - 2.0 / 0.009).abs() < 1e-6);
    }
}
