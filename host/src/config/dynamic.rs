//! `[dynamic]`: plugins registered at runtime as `SourcePlugin` custom resources, and the most a
//! resource may hand a plugin — so that whoever may create a `SourcePlugin` can never grant more
//! than the operator allows here.
//!
//! Only the section's keys, defaults and checks are here, read with the rest of conductor.toml;
//! the feature itself (watch, admission against these ceilings, reconcile, status) is
//! `crate::source_plugins`, which depends on `config` — so the section's type stays on this side.

use serde::Deserialize;

use super::{ByteSize, HumanDuration, Invalid, KubeResourceGrant, PluginLimits, VerifyConfig, invalid};

#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    /// Refuse every resource whose artifact is not signed with the `verify` key (with no key
    /// configured: every resource naming an artifact). Files of `plugin_folder` are the
    /// operator's own and are not signed.
    pub require_signature: bool,
    /// The most a resource may ask for.
    pub max_grants: MaxGrants,
    /// Each replica renews its entry in every resource's status a third as often; an entry not
    /// renewed this long (its replica was killed) is removed by the other replicas.
    pub replica_timeout: HumanDuration,
}

impl Default for DynamicConfig {
    fn default() -> Self {
        Self {
            source_plugins: false,
            replica: None,
            allow_plugin_folder: false,
            verify: None,
            require_signature: true,
            max_grants: MaxGrants::default(),
            replica_timeout: HumanDuration(std::time::Duration::from_secs(180)),
        }
    }
}

/// The ceiling of everything a `SourcePlugin` may ask for: its `grants`, `kube_resources`,
/// `databases`, `pool_size` and every one of its `limits`. A resource asking more is refused.
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
    /// The ceilings of `limits`: each the most a resource may set (by default what a plugin
    /// gets by default, 64 MiB of memory among them).
    pub memory: ByteSize,
    pub call_timeout: HumanDuration,
    pub acquire_timeout: HumanDuration,
    pub event_queue: usize,
    pub event_batch: usize,
    pub notification_batch: usize,
    pub request_batch: usize,
    pub concurrent_notifications: u32,
    pub kv_keys: usize,
    pub kv_bytes: ByteSize,
    pub timers: usize,
    pub log_lines_per_second: u32,
    pub metric_series: usize,
}

impl Default for MaxGrants {
    fn default() -> Self {
        let limits = PluginLimits::default();
        Self {
            grants: ["emit", "log", "timer", "kv", "metrics"].map(String::from).to_vec(),
            kube_resources: Vec::new(),
            databases: Vec::new(),
            pool_size: 4,
            memory: limits.memory,
            call_timeout: limits.call_timeout,
            acquire_timeout: limits.acquire_timeout,
            event_queue: limits.event_queue,
            event_batch: limits.event_batch,
            notification_batch: limits.notification_batch,
            request_batch: limits.request_batch,
            concurrent_notifications: 4,
            kv_keys: limits.kv_keys,
            kv_bytes: limits.kv_bytes,
            timers: limits.timers,
            log_lines_per_second: limits.log_lines_per_second,
            metric_series: limits.metric_series,
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
        if self.replica_timeout.0 < std::time::Duration::from_secs(1) {
            return invalid("dynamic.replica_timeout", "must be at least 1s");
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
}
