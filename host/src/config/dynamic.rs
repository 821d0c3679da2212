//! `[dynamic]`: plugins registered at runtime as `SourcePlugin` custom resources, and the most a
//! resource may hand a plugin — so that whoever may create a `SourcePlugin` can never grant more
//! than the operator allows here.

use serde::Deserialize;

use super::{ByteSize, Invalid, KubeResourceGrant, VerifyConfig, invalid};

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DynamicConfig {
    /// Watch `SourcePlugin` resources (`sourceplugins.conductor.open-cluster-management.io`) on
    /// the `[kubernetes]` API server and load, reload and unload the plugins they describe. Takes
    /// effect on restart.
    pub source_plugins: bool,
    /// This replica's name in the resources' status. Unset: `$POD_NAME`, else the host name.
    pub replica: Option<String>,
    /// Whether a resource may name a file in `plugin_folder` (by bare file name) instead of an
    /// `oci://…@sha256:…` artifact.
    pub allow_plugin_folder: bool,
    /// Accept only artifacts signed with this key, for every resource.
    pub verify: Option<VerifyConfig>,
    /// The most a resource may ask for.
    pub max_grants: MaxGrants,
}

/// The ceiling of a `SourcePlugin`'s `grants`, `kube_resources`, `databases`, `pool_size` and
/// `limits.memory`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaxGrants {
    /// Capabilities a resource may grant. `blob` is never granted to one (it names files of the
    /// host).
    pub grants: Vec<String>,
    /// Kubernetes resources (and verbs) a resource may grant.
    pub kube_resources: Vec<KubeResourceGrant>,
    /// Databases (`[databases.<name>]`) a resource may name.
    pub databases: Vec<String>,
    pub pool_size: usize,
    pub memory: ByteSize,
}

impl Default for MaxGrants {
    fn default() -> Self {
        Self {
            grants: ["emit", "log", "timer", "kv", "metrics"].map(String::from).to_vec(),
            kube_resources: Vec::new(),
            databases: Vec::new(),
            pool_size: 4,
            memory: ByteSize(64 << 20),
        }
    }
}

impl DynamicConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        let key = "dynamic.max_grants";
        for (i, grant) in self.max_grants.grants.iter().enumerate() {
            if conductor_plugin_sdk::Capability::parse(grant).is_none() {
                return invalid(format!("{key}.grants[{i}]"), format!("unknown capability {grant:?}"));
            }
            if grant == "blob" {
                return invalid(
                    format!("{key}.grants[{i}]"),
                    "`blob` reads files of the host: it is granted in conductor.toml only",
                );
            }
        }
        if self.max_grants.pool_size == 0 {
            return invalid(format!("{key}.pool_size"), "must be at least 1");
        }
        if let Some(replica) = &self.replica
            && replica.is_empty()
        {
            return invalid("dynamic.replica", "must not be empty");
        }
        Ok(())
    }

    /// This replica's name: `replica`, else `$POD_NAME`, else the host name.
    pub fn replica_name(&self) -> String {
        if let Some(r) = &self.replica {
            return r.clone();
        }
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        env("POD_NAME")
            .or_else(|| env("HOSTNAME"))
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
            })
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| format!("conductor-{}", std::process::id()))
    }
}
