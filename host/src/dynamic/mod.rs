//! Source plugins registered at runtime as `SourcePlugin` custom resources
//! (`sourceplugins.conductor.open-cluster-management.io`, cluster-scoped): each resource's spec is
//! a `[plugins.<name>]` table and the sources it serves. Every replica watches them ([`watch`]),
//! admits each within `[dynamic] max_grants` ([`admission`]), loads, reloads or unloads the
//! plugins as a reload of conductor.toml does, and reports in the resource's status whether it
//! loaded it ([`status`]).

pub mod admission;
pub mod status;
pub mod watch;

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
