//! Metrics of the `prometheus` crate, made from a name, a help text and label names: the store of
//! every metric whose label values the configuration bounds (the rule is in [`super`]'s docs).
//! Names and labels are conductor's own constants, so one that is not valid is a bug and panics.

use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts};

pub(super) use prometheus::Registry as MetricsRegistry;

/// A counter without labels.
pub(super) fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::with_opts(Opts::new(name, help)).expect("valid metric")
}

/// A gauge without labels.
pub(super) fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::with_opts(Opts::new(name, help)).expect("valid metric")
}

/// A counter per value of `labels`.
pub(super) fn counters(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// A gauge per value of `labels`.
pub(super) fn gauges(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// A histogram with bucket bounds `buckets` per value of `labels`.
pub(super) fn histograms(name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> HistogramVec {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels).expect("valid metric")
}

/// Registers each of `collectors` in `registry`, once.
pub(super) fn register(registry: &MetricsRegistry, collectors: impl IntoIterator<Item = Box<dyn Collector>>) {
    for c in collectors {
        registry.register(c).expect("metric registered once");
    }
}

/// Removes the series of `vec` whose `plugin` label is `plugin`.
pub(super) fn forget_plugin<T: MetricVecBuilder>(vec: &MetricVec<T>, plugin: &str) {
    let names: Vec<String> = vec
        .desc()
        .first()
        .map(|d| d.variable_labels.clone())
        .unwrap_or_default();
    for family in vec.collect() {
        for metric in family.get_metric() {
            let value = |name: &str| {
                metric
                    .get_label()
                    .iter()
                    .find(|p| p.name() == name)
                    .map(|p| p.value())
                    .unwrap_or_default()
            };
            if value("plugin") != plugin {
                continue;
            }
            let values: Vec<&str> = names.iter().map(|n| value(n)).collect();
            let _ = vec.remove_label_values(&values);
        }
    }
}

/// Now, in Unix seconds: the value of a `*_timestamp_seconds` gauge.
pub(super) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
