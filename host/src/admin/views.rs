//! What the admin endpoint answers, as JSON: the inspector's views of a running conductor
//! (`/inspect/subscribers`, `/inspect/plugins`, `/inspect/plugins/<name>`, `/inspect/routes`,
//! `/inspect/undelivered`) and a reload's outcome
//! (`POST /reload`). `conductor inspect` reads the same types back.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a reload changed.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadSummary {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub replaced: Vec<String>,
    pub kept: Vec<String>,
    /// Settings that changed but take effect only on restart.
    pub restart_needed: Vec<String>,
}

/// One live Subscribe stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscriber {
    /// The `subscription-id` the agent received.
    pub id: String,
    pub cluster: String,
    pub data_type: String,
    /// The authenticated user (`system:anonymous` when no authenticator is configured).
    pub user: String,
    /// The agent's address.
    pub remote: Option<String>,
    pub connected_since: DateTime<Utc>,
    /// Events sent on the stream (heartbeats not counted).
    pub events_sent: u64,
    /// Events waiting in the subscriber's queue, and the queue's size.
    pub queue_depth: usize,
    pub queue_capacity: usize,
}

/// A work spec an agent did not answer with a status within `broker.undelivered_after`, while
/// connected (`/inspect/undelivered`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Undelivered {
    /// The plugin that sent it.
    pub plugin: String,
    pub cluster: String,
    pub data_type: String,
    pub resource_id: String,
    /// The `resourceversion` awaited (none when the event has none).
    pub resource_version: Option<i64>,
    /// When it was sent, and when it was sent again (once, at the deadline).
    pub sent_at: DateTime<Utc>,
    pub resent_at: Option<DateTime<Utc>>,
}

/// One configured plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plugin {
    /// Its name in `conductor.toml`.
    pub name: String,
    /// `component`, `native` or `memory`.
    pub form: String,
    /// Its file, or the `oci://…@sha256:…` reference it was pulled by.
    pub file: Option<String>,
    /// `sha256:…` of what runs: the file's bytes, or the artifact's manifest digest.
    #[serde(default)]
    pub digest: Option<String>,
    /// For a plugin pulled from a registry (`file = "oci://…"`): its reference and what that
    /// resolved to.
    #[serde(default)]
    pub oci: Option<OciArtifact>,
    /// The name and version the plugin declares, and the contract it was built against (none
    /// for the built-in memory source).
    pub declared_name: Option<String>,
    pub version: Option<String>,
    pub contract: Option<String>,
    pub grants: Vec<String>,
    pub databases: Vec<String>,
    /// Kubernetes resources with their verbs, `resource: verb,verb`.
    pub kube_resources: Vec<String>,
    /// The capabilities the plugin uses (read from a component's imports).
    pub capabilities: Vec<String>,
    /// The source names routed to it.
    pub sources: Vec<String>,
    pub data_types: Vec<String>,
    pub pool_size: usize,
    /// Instances alive now.
    pub instances: usize,
    /// Host events (timers, notifications, watched objects) waiting for it.
    pub queued_events: usize,
    /// The same events by the lane they wait in (batches take the lanes in turn).
    #[serde(default)]
    pub host_event_lanes: HostEventLanes,
    /// Every call into the plugin: agents' requests, resync lists, host events, start (none for
    /// the built-in memory source, whose calls are not counted).
    pub calls: Option<Calls>,
    /// The limits (`[plugins.<name>.limits]`) that refused its host calls: how many times, and
    /// when last.
    #[serde(default)]
    pub limits_refused: BTreeMap<String, LimitRefusals>,
    /// When it was loaded: at startup, or by the reload that last replaced it.
    pub loaded_at: DateTime<Utc>,
}

/// A plugin's waiting host events by lane: the namespace of a watched object (the cluster, for
/// ManifestWorks and the other per-cluster kinds), or the lane everything else shares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEventLanes {
    /// Lanes with events waiting.
    pub waiting: usize,
    /// The deepest of them, the deepest first (at most 20).
    pub deepest: Vec<LaneDepth>,
}

/// Host events waiting in one lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneDepth {
    /// The lane's namespace; none for the shared lane (timers, notifications, LISTEN events,
    /// cluster-scoped objects).
    pub namespace: Option<String>,
    pub events: usize,
}

/// Where a plugin from a registry came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OciArtifact {
    /// The `oci://registry/repository@sha256:…` reference it was loaded by.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    /// The component's digest: the bytes that run.
    pub component_digest: String,
    /// Whether its last load found it in the cache, without contacting the registry.
    pub from_cache: bool,
}

/// How often a limit refused a plugin's host calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitRefusals {
    pub count: u64,
    pub last_at: DateTime<Utc>,
}

/// One configured plugin with what it keeps in `kv` (`/inspect/plugins/<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginDetail {
    #[serde(flatten)]
    pub plugin: Plugin,
    /// What the plugin holds in `kv`, sorted by key (none for the built-in memory source).
    pub kv: Option<Kv>,
}

/// A plugin's `kv` state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kv {
    /// Keys held, and bytes of keys and values together (what `limits.kv_keys` and
    /// `limits.kv_bytes` bound).
    pub keys: usize,
    pub bytes: usize,
    pub entries: Vec<KvEntry>,
}

/// One key and its value: as text when the value is UTF-8, else base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvEntry {
    pub key: String,
    /// The value's length in bytes.
    pub bytes: usize,
    pub text: Option<String>,
    pub base64: Option<String>,
}

/// What a plugin's calls did since it was loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calls {
    pub total: u64,
    pub errors: u64,
    /// Call latency in milliseconds (p50 and p99 within 25 %).
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub last_error: Option<LastError>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastError {
    pub at: DateTime<Utc>,
    pub message: String,
}

/// The routes, and the configuration they come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Routes {
    pub config_file: String,
    pub routes: Vec<Route>,
    pub last_reload: Option<Reload>,
}

/// Events whose source is `source` go to `plugin`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    pub source: String,
    pub plugin: String,
    /// The data types that plugin serves.
    pub data_types: Vec<String>,
}

/// The outcome of the last reload (SIGHUP or `conductor reload`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reload {
    pub at: DateTime<Utc>,
    pub applied: bool,
    /// What it changed, when applied.
    pub changes: Option<ReloadSummary>,
    /// Why it was refused (the running configuration stayed).
    pub error: Option<String>,
}
