//! `[admin]`: the admin HTTP endpoint (metrics, health, reload, the inspector), its TLS and who
//! may use it.

use std::net::SocketAddr;

use serde::Deserialize;

use super::{HumanDuration, Invalid, TlsConfig, invalid};

/// The HTTP endpoint for `/metrics`, `/healthz`, `/readyz`, `/reload` and `/inspect/*`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// Label the broker series with each cluster's name (`consumer`, as upstream), or with `*`.
    pub consumer_label: bool,
    /// A cluster with no subscriber whose series have not moved this long (it left) has its
    /// broker series taken out of `/metrics`, and its name out of memory.
    pub forget_idle_consumers_after: HumanDuration,
    /// Who may use the endpoint (`/healthz` and `/readyz` are always open).
    pub authorization: AdminAuthorization,
    /// Serve HTTPS with this certificate (reloaded when it changes on disk); plain HTTP without.
    pub tls: Option<TlsConfig>,
    /// Open connections at once; past it, a new connection is closed at once.
    pub max_connections: usize,
}

/// Who may read `/metrics` and `/inspect/*` and `POST /reload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdminAuthorization {
    /// Anyone who can reach the port (keep it on loopback, or behind a network policy).
    None,
    /// A bearer token checked with a TokenReview, then a SubjectAccessReview on the request's
    /// non-resource URL: `get` for `GET`, `create` for `POST /reload`, as Kubernetes controllers
    /// protect their metrics.
    Sar,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            // Loopback unless the operator names another address: the endpoint can reload the
            // configuration and read every plugin's kv.
            listen: SocketAddr::from(([127, 0, 0, 1], 9090)),
            consumer_label: true,
            forget_idle_consumers_after: HumanDuration(std::time::Duration::from_secs(600)),
            authorization: AdminAuthorization::None,
            tls: None,
            max_connections: 256,
        }
    }
}

impl AdminConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if self.max_connections == 0 {
            return invalid("admin.max_connections", "must be at least 1");
        }
        if self.forget_idle_consumers_after.0 < std::time::Duration::from_secs(1) {
            return invalid("admin.forget_idle_consumers_after", "must be at least 1s");
        }
        if let Some(tls) = &self.tls {
            if tls.client_ca_file.is_some() {
                return invalid(
                    "admin.tls.client_ca_file",
                    "the admin endpoint identifies callers by token ([admin] authorization = \"sar\"), not by client certificate",
                );
            }
            tls.validate("admin.tls")?;
        }
        Ok(())
    }
}
