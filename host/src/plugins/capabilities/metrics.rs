//! `conductor:plugin/metrics`: the counters and gauges the plugin declared, exported with the
//! host's own (at most `limits.metric_series` series).

use std::sync::Arc;

use conductor_plugin_sdk::{Capability, Error, MetricKind};

use super::guard::Guard;
use crate::telemetry::exported::{Declared, MetricRefused};

/// The `metrics` state of one plugin: the metrics it declared.
pub struct MetricsHost {
    guard: Arc<Guard>,
    exports: Declared,
}

impl MetricsHost {
    pub fn new(guard: Arc<Guard>, exports: Declared) -> Self {
        Self { guard, exports }
    }

    /// Adds to a counter or sets a gauge of the plugin's own metrics.
    pub fn record(&self, kind: MetricKind, name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
        self.guard.check(Capability::Metrics)?;
        self.exports.record(kind, name, labels, value).map_err(|e| match e {
            MetricRefused::Invalid(why) => Error::Invalid(why),
            refused @ MetricRefused::Series(_) => {
                self.guard.refused("metric_series");
                Error::Unavailable(format!("metric {name:?} refused: {refused}"))
            }
        })
    }
}
