//! Logs, metrics, traces and readiness.
//!
//! # Which store a new metric goes in
//!
//! Every metric is served from the one `prometheus::Registry` of [`Metrics`] (imported as
//! `MetricsRegistry`, so that `Registry` alone names the routing table), but its series are kept
//! in one of two stores, chosen by the values its labels can take:
//!
//! - **A label that grows with the hub** — the managed cluster (`consumer`), or any other label
//!   with thousands of values: the compact series store, [`series`] (`SeriesVec`,
//!   `series::HistogramVec`, at most four labels). A label set costs a few numbers there instead
//!   of the ~2 KB the `prometheus` crate keeps for each, and a cluster's series are taken out
//!   when it leaves ([`idle_consumers`]). Example: `grpc_server_ce_msg_sent_total{consumer,
//!   data_type, method}`.
//! - **Anything else** — no labels, or labels whose values the configuration bounds (data type,
//!   plugin, limit, database, listener, reason, outcome): the `prometheus` crate's counters,
//!   gauges and histograms, made and registered with the helpers of `vectors` (`counters`,
//!   `gauges`, `histograms`, `register`, …). Example: `conductor_plugin_calls_total{plugin, call,
//!   outcome}`. The metrics plugins export ([`exported`]) are of this kind too, their series
//!   bounded by `limits.metric_series`.

pub mod broker_metrics;
pub mod config_metrics;
pub mod exported;
pub mod idle_consumers;
mod label_values;
mod labels;
pub mod logging;
pub mod metrics;
pub mod plugin_metrics;
pub mod readiness;
pub mod security_metrics;
pub mod series;
pub mod traces;
mod vectors;

pub use metrics::Metrics;
pub use plugin_metrics::{PluginCall, PluginMetrics};
pub use readiness::Readiness;
pub use security_metrics::SecurityMetrics;
