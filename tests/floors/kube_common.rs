//! What the `cpu_kube` bench and its floor (`floor-kube`) share: the status the work agents
//! report in the status scenario, the patch the kube plugin writes for it, and when each update
//! is due, so conductor and the floor do the same work at the same rate and concurrency.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The status the agent of a cluster reports for its `k`-th update in the phase tagged `tag`:
/// `(conditions, resourceStatus)` as the work agent sends them (`ManifestBundleStatus`). Each is
/// different, so every update is written.
pub fn status(tag: &str, k: usize) -> (Value, Value) {
    let conditions = json!([
        {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
         "message": format!("Apply manifest work complete {tag}-{k}"),
         "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": 1},
        {"type": "Available", "status": "True", "reason": "ResourcesAvailable",
         "message": "All resources are available", "lastTransitionTime": "2026-11-30T10:00:00Z",
         "observedGeneration": 1},
    ]);
    let manifests = json!([
        {"resourceMeta": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
          "resource": "deployments", "name": "web", "namespace": "default"},
         "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedManifestComplete",
           "message": "Apply manifest complete", "lastTransitionTime": "2026-11-30T10:00:00Z"}]},
    ]);
    (conditions, manifests)
}

/// The merge patch of the `status` subresource the kube plugin sends for a status update
/// (`plugins/kube/src/works.rs`, `apply`): the work's uid and resourceVersion as preconditions,
/// and the agent's conditions and manifests.
pub fn status_patch(uid: &str, resource_version: &str, conditions: &Value, manifests: &Value) -> Value {
    json!({"metadata": {"uid": uid, "resourceVersion": resource_version},
           "status": {"conditions": conditions, "resourceStatus": {"manifests": manifests}}})
}

/// When the `k`-th update of agent `agent` (of `agents`) is due, `rate` updates per second in
/// all: each agent sends one every `agents / rate` seconds, the agents spread evenly over that.
pub fn due(start: Instant, agent: usize, k: usize, agents: usize, rate: f64) -> Instant {
    let slot = (k * agents + agent) as f64 / rate;
    start + Duration::from_secs_f64(slot)
}
