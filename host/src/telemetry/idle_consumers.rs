//! Clusters that left: their broker series (labelled `consumer`, several per data type and
//! method) are taken out of `/metrics` once the cluster has had no subscriber and no call for a
//! while, so that a hub whose clusters come and go does not keep every name it ever saw. A
//! cluster that comes back starts its series again (Prometheus reads the restart as a counter
//! reset).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Metrics;

/// What each cluster's series counted at the last look, and since when it stood still.
#[derive(Default)]
pub struct IdleConsumers {
    still: HashMap<u32, (i64, Instant)>,
}

impl IdleConsumers {
    /// Looks at every cluster's series: one with no subscriber whose counts have not moved for
    /// `after` is forgotten. Returns how many were.
    pub fn sweep(&mut self, metrics: &Metrics, after: Duration, now: Instant) -> usize {
        let (mut counted, subscribers) = metrics.consumer_activity();
        // A cluster with only a subscribers series counts too (at 0 once it left).
        for &consumer in subscribers.keys() {
            counted.entry(consumer).or_default();
        }
        let mut forgotten = 0;
        let mut still = HashMap::with_capacity(counted.len());
        for (consumer, total) in counted {
            if subscribers.get(&consumer).is_some_and(|&n| n > 0) {
                // Never forgotten while subscribed.
                continue;
            }
            let since = match self.still.get(&consumer) {
                Some(&(before, since)) if before == total => since,
                _ => now,
            };
            if now.duration_since(since) >= after {
                metrics.forget_consumer(consumer);
                forgotten += 1;
            } else {
                still.insert(consumer, (total, since));
            }
        }
        self.still = still;
        forgotten
    }
}

/// Forgets the series of clusters idle for `after`, looking every tenth of it (at most every
/// minute), until `shutdown`.
pub async fn forget_idle_consumers(metrics: Metrics, after: Duration, shutdown: CancellationToken) {
    let every = (after / 10).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut idle = IdleConsumers::default();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let forgotten = idle.sweep(&metrics, after, Instant::now());
        if forgotten > 0 {
            tracing::debug!(
                forgotten,
                "broker series of clusters gone for {after:?} taken out of /metrics"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(metrics: &Metrics, cluster: &str) -> bool {
        metrics.render().contains(&format!("consumer=\"{cluster}\""))
    }

    #[test]
    fn a_cluster_gone_long_enough_leaves_metrics_and_one_subscribed_or_busy_stays() {
        let m = Metrics::new();
        let after = Duration::from_secs(60);
        let t0 = Instant::now();
        m.publish_received("idle-gone", "leases");
        m.publish_received("idle-busy", "leases");
        m.subscriber_added("idle-subscribed", "leases");
        let mut idle = IdleConsumers::default();
        assert_eq!(idle.sweep(&m, after, t0), 0);
        m.publish_received("idle-busy", "leases");
        assert_eq!(idle.sweep(&m, after, t0 + Duration::from_secs(30)), 0);
        m.publish_received("idle-busy", "leases");
        assert_eq!(idle.sweep(&m, after, t0 + Duration::from_secs(61)), 1);
        assert!(!shown(&m, "idle-gone"));
        assert!(shown(&m, "idle-busy"), "it called within the minute");
        assert!(shown(&m, "idle-subscribed"), "it is subscribed");
        assert_eq!(
            idle.sweep(&m, after, t0 + Duration::from_secs(200)),
            1,
            "busy, then idle"
        );
        assert!(shown(&m, "idle-subscribed"));
        m.subscriber_removed("idle-subscribed", "leases");
        idle.sweep(&m, after, t0 + Duration::from_secs(300));
        assert_eq!(idle.sweep(&m, after, t0 + Duration::from_secs(400)), 1);
        assert!(!shown(&m, "idle-subscribed"));
    }
}
