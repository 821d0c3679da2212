//! `[kubernetes]`: how to reach the Kubernetes API server.

use std::path::PathBuf;

use serde::Deserialize;

/// How to reach the Kubernetes API server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesConfig {
    /// A kubeconfig file (relative to this file); without one, the in-cluster service account,
    /// `KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
}
