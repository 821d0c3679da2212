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
    /// Events queued for one subscriber before it counts as too slow and its stream is ended.
    pub subscriber_queue_size: usize,
    /// How many resources' last `metadata` the broker remembers for synthetic resync deletes.
    pub remembered_metadata: usize,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: HumanDuration(Duration::from_secs(10)),
            heartbeat_disabled: false,
            subscriber_queue_size: 100,
            remembered_metadata: 100_000,
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
        if self.subscriber_queue_size == 0 {
            return invalid("broker.subscriber_queue_size", "must be at least 1");
        }
        Ok(())
    }
}
