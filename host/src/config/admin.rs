//! `[admin]`: the admin HTTP endpoint.

use std::net::SocketAddr;

use serde::Deserialize;

/// The HTTP endpoint for `/metrics`, `/healthz` and `/readyz`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// Label the broker series with each cluster's name (`consumer`, as upstream), or with `*`.
    pub consumer_label: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([0, 0, 0, 0], 9090)),
            consumer_label: true,
        }
    }
}
