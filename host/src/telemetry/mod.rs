//! Logs, metrics and the admin HTTP endpoint.

pub mod admin;
pub mod logging;
pub mod metrics;

pub use metrics::{Metrics, PluginMetrics};
