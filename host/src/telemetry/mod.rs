//! Logs, metrics and the admin HTTP endpoint.

pub mod admin;
pub mod logging;
pub mod metrics;
pub mod security_metrics;
pub mod series;

pub use metrics::{Metrics, PluginCall, PluginMetrics};
pub use security_metrics::SecurityMetrics;
