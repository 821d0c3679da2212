//! The metrics a plugin exports through the host (the `metrics` capability), as its description
//! declares them.

use serde::{Deserialize, Serialize};

/// Whether a metric only goes up or is set to what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MetricKind {
    Counter,
    Gauge,
}

/// A metric a plugin exports: exported as `conductor_<name>`, labelled `plugin` (the plugin's
/// configured name) and `labels`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricDescription {
    /// `<the plugin's name>_<what>`: lowercase letters, digits and `_`.
    pub name: String,
    pub kind: MetricKind,
    pub help: String,
    /// Its labels besides `plugin`; values are given in this order.
    pub labels: Vec<String>,
}
