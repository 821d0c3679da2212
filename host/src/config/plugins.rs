//! `[plugins.<name>]`: what a plugin is, where its file is, what it may do, and its limits.

use std::{collections::BTreeMap, fmt, path::PathBuf, time::Duration};

use serde::Deserialize;

use super::{ByteSize, DatabaseConfig, HumanDuration, Invalid, invalid};

/// One plugin: what it is, where it is, what it may do, and its own configuration table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    pub kind: PluginKind,
    /// The plugin file (`component`: a `.wasm` component; `native`: a shared library): a bare
    /// file name is looked up in `plugin_folder`; a path is relative to the configuration file's
    /// folder; `oci://registry/repository@sha256:…` is a component pulled from a registry
    /// (`[oci]`), pinned by its manifest's digest.
    pub file: Option<PathBuf>,
    /// Accept only an artifact signed with this key (cosign's key-based signatures); for
    /// `oci://` files.
    #[serde(default)]
    pub verify: Option<VerifyConfig>,
    /// The host capabilities granted (`emit`, `log`, `timer`, `kv`, `pg`, `kube`, `metrics`,
    /// `blob`); deny by default.
    #[serde(default)]
    pub grants: Vec<String>,
    /// The databases (`[databases.<name>]`) the plugin may use through the `pg` capability.
    #[serde(default)]
    pub databases: Vec<String>,
    /// The Kubernetes resources the plugin may reach through the `kube` capability.
    #[serde(default)]
    pub kube_resources: Vec<KubeResourceGrant>,
    /// Files the plugin may read through the `blob` capability, by the name it reads them by
    /// (paths relative to the configuration file).
    #[serde(default)]
    pub blobs: BTreeMap<String, PathBuf>,
    /// Instances serving calls at once.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
    #[serde(default)]
    pub limits: PluginLimits,
    /// The plugin's own settings, handed to it at start.
    #[serde(default)]
    pub config: toml::Table,
}

/// `verify = { public_key_file = "…" }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    /// An ECDSA P-256 public key in PEM (`cosign.pub`); relative to the configuration file.
    pub public_key_file: PathBuf,
}

fn default_pool_size() -> usize {
    4
}

/// Limits of a plugin's calls and background work.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginLimits {
    /// Linear memory one instance may grow to (components only).
    pub memory: ByteSize,
    /// How long one call may run before it fails (a component is interrupted; a native call's
    /// thread runs on until the plugin returns).
    pub call_timeout: HumanDuration,
    /// How long an agent's call waits for a free instance before it fails as `Unavailable`.
    pub acquire_timeout: HumanDuration,
    /// Distinct host events (timers, notifications, watched objects) that may wait for the
    /// plugin; past it, their producers wait.
    pub event_queue: usize,
    /// Host events handed to one `on-events` call at most.
    pub event_batch: usize,
    /// Notifications handed to one `on-events` call at most when it carries nothing else (a
    /// notification is a few bytes, and a plugin that files them, as the maestro plugin does,
    /// should see a burst in a few calls rather than one per `event_batch`).
    pub notification_batch: usize,
    /// Agent → hub requests handed to one `handle-batch` call at most: requests that wait for the
    /// plugin together (every instance busy, or several arriving while a call runs) go in one call.
    pub request_batch: usize,
    /// Agents' calls (`handle`, `handle-batch`) running at once, at most `pool_size`. Unset: the
    /// pool size. Fewer calls make larger batches: a plugin that does a batch's work at once (the
    /// maestro plugin's one transaction per batch) spends less per request; one that loops over
    /// its requests (the default) only serializes them.
    pub request_calls: Option<usize>,
    /// At most this many `on-events` calls with only notifications at once, for a plugin that
    /// declares `concurrent-notifications` (which, and `pool_size`, bound it too); `1`, one call
    /// at a time. Unset: what the plugin declares.
    pub concurrent_notifications: Option<u32>,
    /// Keys the plugin may hold in `kv`; past it, a new key is refused.
    pub kv_keys: usize,
    /// Bytes of keys and values the plugin may hold in `kv`; past it, a value is refused.
    pub kv_bytes: ByteSize,
    /// Timers the plugin may have set and not yet fired or cancelled; past it, a new one is
    /// refused.
    pub timers: usize,
    /// Log lines the plugin may write per second (a burst of as many); the rest are dropped and
    /// counted.
    pub log_lines_per_second: u32,
    /// Series of its own metrics the plugin may hold; past it, a new series is refused.
    pub metric_series: usize,
    /// An instance whose linear memory passed this after a call is replaced (off the call
    /// path), so memory a plugin keeps over calls comes back (components only). Unset: three
    /// quarters of `memory`.
    pub recycle_above: Option<ByteSize>,
    /// An instance that served this many calls is replaced; 0: never.
    pub max_calls_per_instance: u64,
    /// Calls into a native plugin that may run on past their `call_timeout` at once (each holds
    /// a thread until the plugin returns); at it, the plugin's calls are refused until they
    /// return.
    pub max_abandoned_calls: usize,
}

impl PluginLimits {
    /// The linear memory past which an instance is replaced after its call.
    pub fn recycle_above(&self) -> usize {
        self.recycle_above
            .map_or(self.memory.as_usize() / 4 * 3, ByteSize::as_usize)
    }
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            memory: ByteSize(64 << 20),
            call_timeout: HumanDuration(Duration::from_secs(5)),
            acquire_timeout: HumanDuration(Duration::from_secs(10)),
            event_queue: 10_000,
            event_batch: 100,
            notification_batch: 10_000,
            request_batch: 100,
            request_calls: None,
            concurrent_notifications: None,
            kv_keys: 10_000,
            kv_bytes: ByteSize(16 << 20),
            timers: 1_000,
            log_lines_per_second: 100,
            metric_series: 1_000,
            recycle_above: None,
            max_calls_per_instance: 0,
            max_abandoned_calls: 4,
        }
    }
}

/// The verbs a `kube_resources` grant may name.
pub const KUBE_VERBS: [&str; 7] = ["get", "list", "watch", "create", "update", "patch", "delete"];

/// A Kubernetes resource a plugin may reach: `"<plural>.<group>"` (`"<plural>"` for the core
/// group, `"<plural>.<group>/<subresource>"` for a subresource, `"serviceaccounts/token"` for
/// TokenRequests) with every verb, or `{ resource = "…", verbs = ["get", …] }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeResourceGrant {
    pub resource: String,
    /// `None`: every verb.
    pub verbs: Option<Vec<String>>,
}

impl KubeResourceGrant {
    pub fn allows(&self, resource: &str, verb: &str) -> bool {
        self.resource == resource && self.verbs.as_ref().is_none_or(|v| v.iter().any(|v| v == verb))
    }

    /// The verbs granted.
    pub fn verbs(&self) -> Vec<&str> {
        match &self.verbs {
            Some(v) => v.iter().map(String::as_str).collect(),
            None => KUBE_VERBS.to_vec(),
        }
    }

    /// (group, plural, subresource) of the resource named.
    pub fn parts(&self) -> (&str, &str, Option<&str>) {
        let (name, sub) = match self.resource.split_once('/') {
            Some((n, s)) => (n, Some(s)),
            None => (self.resource.as_str(), None),
        };
        match name.split_once('.') {
            Some((plural, group)) => (group, plural, sub),
            None => ("", name, sub),
        }
    }
}

impl<'de> Deserialize<'de> for KubeResourceGrant {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            resource: String,
            verbs: Vec<String>,
        }
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = KubeResourceGrant;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a resource name ("manifestworks.work.open-cluster-management.io") or { resource = "…", verbs = ["get", …] }"#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KubeResourceGrant {
                    resource: v.to_owned(),
                    verbs: None,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let t = Table::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(KubeResourceGrant {
                    resource: t.resource,
                    verbs: Some(t.verbs),
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// The built-in in-memory source (development and tests).
    Memory,
    /// A WebAssembly component (`wasm32-wasip2`), sandboxed and limited.
    Component,
    /// A native shared library built with the SDK's `export_plugin!`.
    Native,
}

impl PluginConfig {
    /// The `oci://…` reference `file` holds, if it names an artifact in a registry.
    pub fn oci_reference(&self) -> Option<String> {
        let file = self.file.as_deref()?.to_str()?;
        crate::oci::is_oci(file).then(|| file.to_owned())
    }

    /// Checks the plugin's table at `key` (`plugins.<name>`) against the configured databases.
    pub(crate) fn validate(&self, key: &str, databases: &BTreeMap<String, DatabaseConfig>) -> Result<(), Invalid> {
        let at = |field: &str| format!("{key}.{field}");
        match (self.kind, &self.file) {
            (PluginKind::Memory, Some(_)) => return invalid(at("file"), "the memory source has no file"),
            (PluginKind::Component | PluginKind::Native, None) => {
                return invalid(at("file"), "required for a component or native plugin");
            }
            _ => {}
        }
        if let Some(reference) = self.oci_reference() {
            crate::oci::ArtifactReference::parse_pinned(&reference).or_else(|e| invalid(at("file"), e))?;
            if self.kind != PluginKind::Component {
                return invalid(
                    at("kind"),
                    "a plugin from a registry (file = \"oci://…\") is a component",
                );
            }
        } else if self.verify.is_some() {
            return invalid(
                at("verify"),
                "signatures are checked for plugins pulled from a registry (file = \"oci://…@sha256:…\")",
            );
        }
        for (i, grant) in self.grants.iter().enumerate() {
            if conductor_plugin_sdk::Capability::parse(grant).is_none() {
                let known: Vec<&str> = conductor_plugin_sdk::Capability::ALL.iter().map(|c| c.name()).collect();
                return invalid(
                    format!("{key}.grants[{i}]"),
                    format!("unknown capability {grant:?} (known: {known:?})"),
                );
            }
        }
        if self.pool_size == 0 {
            return invalid(at("pool_size"), "must be at least 1");
        }
        for (i, db) in self.databases.iter().enumerate() {
            if !databases.contains_key(db) {
                let known: Vec<&String> = databases.keys().collect();
                return invalid(
                    format!("{key}.databases[{i}]"),
                    format!("no database {db:?} in [databases] (configured: {known:?})"),
                );
            }
        }
        let grants_pg = self.grants.iter().any(|g| g == "pg");
        match (grants_pg, self.databases.is_empty()) {
            (true, true) => {
                return invalid(
                    at("databases"),
                    "the `pg` grant needs the databases the plugin may use, e.g. databases = [\"maestro\"]",
                );
            }
            (false, false) => return invalid(at("grants"), "databases are listed but `pg` is not granted"),
            _ => {}
        }
        self.limits.validate(&at("limits"))?;
        let grants_blob = self.grants.iter().any(|g| g == "blob");
        if !self.blobs.is_empty() && !grants_blob {
            return invalid(at("grants"), "blobs are listed but `blob` is not granted");
        }
        if grants_blob && self.blobs.is_empty() {
            return invalid(
                at("blobs"),
                "the `blob` grant needs the files the plugin may read, e.g. blobs = { manifests = \"manifests.yaml\" }",
            );
        }
        let grants_kube = self.grants.iter().any(|g| g == "kube");
        if !self.kube_resources.is_empty() && !grants_kube {
            return invalid(at("grants"), "kube_resources are listed but `kube` is not granted");
        }
        for (i, grant) in self.kube_resources.iter().enumerate() {
            grant.validate(&format!("{key}.kube_resources[{i}]"))?;
        }
        Ok(())
    }
}

impl PluginLimits {
    fn validate(&self, key: &str) -> Result<(), Invalid> {
        let at = |field: &str| format!("{key}.{field}");
        if self.memory.0 < (1 << 20) {
            return invalid(at("memory"), "must be at least 1MiB");
        }
        if self.call_timeout.0 < Duration::from_millis(10) {
            return invalid(at("call_timeout"), "must be at least 10ms");
        }
        if self.acquire_timeout.0.is_zero() {
            return invalid(at("acquire_timeout"), "must be longer than 0s");
        }
        if self.event_queue == 0 {
            return invalid(at("event_queue"), "must be at least 1");
        }
        if self.event_batch == 0 {
            return invalid(at("event_batch"), "must be at least 1");
        }
        if self.notification_batch == 0 {
            return invalid(at("notification_batch"), "must be at least 1");
        }
        if self.request_batch == 0 {
            return invalid(at("request_batch"), "must be at least 1");
        }
        if self.request_calls == Some(0) {
            return invalid(at("request_calls"), "must be at least 1");
        }
        if self.concurrent_notifications == Some(0) {
            return invalid(at("concurrent_notifications"), "must be at least 1");
        }
        for (field, value) in [
            ("kv_keys", self.kv_keys),
            ("kv_bytes", self.kv_bytes.as_usize()),
            ("timers", self.timers),
            ("log_lines_per_second", self.log_lines_per_second as usize),
            ("metric_series", self.metric_series),
            ("max_abandoned_calls", self.max_abandoned_calls),
        ] {
            if value == 0 {
                return invalid(at(field), "must be at least 1");
            }
        }
        if let Some(above) = self.recycle_above
            && (above.0 == 0 || above.0 > self.memory.0)
        {
            return invalid(
                at("recycle_above"),
                format!(
                    "must be more than 0 and at most limits.memory ({} bytes)",
                    self.memory.0
                ),
            );
        }
        Ok(())
    }
}

impl KubeResourceGrant {
    fn validate(&self, key: &str) -> Result<(), Invalid> {
        let (_, plural, sub) = self.parts();
        let well_formed = !plural.is_empty()
            && sub.is_none_or(|s| !s.is_empty() && !s.contains('/'))
            && self
                .resource
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-./".contains(c));
        if !well_formed {
            return invalid(
                key,
                format!(
                    "{:?} is not a resource name: want <plural>.<group>[/<subresource>], e.g. \"manifestworks.work.open-cluster-management.io\"",
                    self.resource
                ),
            );
        }
        if let Some(verbs) = &self.verbs {
            if verbs.is_empty() {
                return invalid(format!("{key}.verbs"), "must name at least one verb");
            }
            if let Some(bad) = verbs.iter().find(|v| !KUBE_VERBS.contains(&v.as_str())) {
                return invalid(
                    format!("{key}.verbs"),
                    format!("unknown verb {bad:?} (known: {KUBE_VERBS:?})"),
                );
            }
        }
        Ok(())
    }
}
