//! Source plugins registered at runtime as `SourcePlugin` custom resources
//! (`sourceplugins.conductor.open-cluster-management.io`, cluster-scoped), switched on by
//! `[dynamic] source_plugins`: each resource's spec is a `[plugins.<name>]` table and the sources
//! it serves. The whole controller is here, as kube-runtime keeps a controller's watch, reconcile
//! and status together: every replica watches the resources ([`watch`]), admits each within
//! `[dynamic] max_grants` ([`admission`]), applies them with conductor.toml as one reload of the
//! plugin set ([`reconfigure`]), and reports in each resource's status whether it loaded it
//! ([`status`]); [`controller`] runs the watch and the status task beside the reload loop.
//!
//! The `[dynamic]` section's type ([`crate::config::DynamicConfig`]) stays in `config/`, which
//! reads it with the rest of conductor.toml and must not depend on this module.

pub mod admission;
pub mod controller;
pub mod reconfigure;
pub mod status;
pub mod watch;

pub use controller::Controller;
pub use reconfigure::Reconfigurer;

pub const GROUP: &str = "conductor.open-cluster-management.io";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "conductor.open-cluster-management.io/v1alpha1";
pub const KIND: &str = "SourcePlugin";
pub const PLURAL: &str = "sourceplugins";

/// The resource, for kube-rs (the API server's discovery is not needed).
pub fn api_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        plural: PLURAL.into(),
    }
}

/// One `SourcePlugin` as watched.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcePlugin {
    pub name: String,
    pub generation: i64,
    /// Its creation time (older resources win a contested source).
    pub created: String,
    pub spec: serde_json::Value,
    /// This replica's entry in its status, as the API server holds it.
    pub reported: Option<serde_json::Value>,
    /// The other replicas' entries: each one's name and when it last renewed it.
    pub others: Vec<(String, Option<String>)>,
}
