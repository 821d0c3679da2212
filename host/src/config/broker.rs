//! `[broker]`: subscriptions, heartbeats and resync.

use std::time::Duration;

use serde::Deserialize;

use super::{HumanDuration, Invalid, invalid};

/// Subscriptions, heartbeats and resync.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrokerConfig {
    pub heartbeat_interval: HumanDuration,
    pub heartbeat_disabled: bool,
    /// A reference depth for a subscriber's queue, shown beside its depth: no longer a limit (a
    /// queue holds one event per resource at most, however large a burst).
    pub subscriber_queue_size: usize,
    /// How long a subscriber may take nothing from its non-empty queue before its stream is
    /// ended (the agent reconnects and resyncs).
    pub subscriber_stall_timeout: HumanDuration,
    /// How many resources' last `metadata` the broker remembers for synthetic resync deletes.
    pub remembered_metadata: usize,
    /// How long a work spec sent to a connected agent may go without the agent's status before
    /// it is counted as undelivered and sent again, once.
    pub undelivered_after: HumanDuration,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: HumanDuration(Duration::from_secs(10)),
            heartbeat_disabled: false,
            subscriber_queue_size: 100,
            subscriber_stall_timeout: HumanDuration(Duration::from_secs(60)),
            remembered_metadata: 100_000,
            undelivered_after: HumanDuration(Duration::from_secs(600)),
        }
    }
}

impl BrokerConfig {
    /// The heartbeat period, or `None` when heartbeats are disabled.
    pub fn heartbeat(&self) -> Option<Duration> {
        (!self.heartbeat_disabled).then_some(self.heartbeat_interval.0)
    }
}

impl BrokerConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if !self.heartbeat_disabled && self.heartbeat_interval.0 < Duration::from_millis(100) {
            return invalid(
                "broker.heartbeat_interval",
                format!(
                    "{} is too short: must be at least 100ms (or set heartbeat_disabled = true)",
                    self.heartbeat_interval
                ),
            );
        }
        if self.subscriber_stall_timeout.0 < Duration::from_millis(100) {
            return invalid(
                "broker.subscriber_stall_timeout",
                format!("{} is too short: must be at least 100ms", self.subscriber_stall_timeout),
            );
        }
        if self.undelivered_after.0 < Duration::from_millis(100) {
            return invalid(
                "broker.undelivered_after",
                format!("{} is too short: must be at least 100ms", self.undelivered_after),
            );
        }
        if self.subscriber_queue_size == 0 {
            return invalid("broker.subscriber_queue_size", "must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_subscriber_is_ended_after_a_minute_by_default_and_never_at_once() {
        let mut broker = BrokerConfig::default();
        assert_eq!(broker.subscriber_stall_timeout.0, Duration::from_secs(60));
        assert!(broker.validate().is_ok());
        broker.subscriber_stall_timeout = HumanDuration(Duration::from_millis(10));
        assert!(broker.validate().is_err());
    }

    #[test]
    fn unanswered_work_is_sent_again_after_ten_minutes_by_default_and_never_at_once() {
        let mut broker = BrokerConfig::default();
        assert_eq!(broker.undelivered_after.0, Duration::from_secs(600));
        assert!(broker.validate().is_ok());
        broker.undelivered_after = HumanDuration(Duration::ZERO);
        assert!(broker.validate().is_err());
        broker.undelivered_after = HumanDuration(Duration::from_secs(2));
        assert!(broker.validate().is_ok());
    }
}
