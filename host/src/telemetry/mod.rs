//! Logs, metrics, traces and readiness.

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

pub use metrics::Metrics;
pub use plugin_metrics::{PluginCall, PluginMetrics};
pub use readiness::Readiness;
pub use security_metrics::SecurityMetrics;
