//! What a plugin author implements: a source of work, called by the host for resync (`list`),
//! for agent events (`handle`) and for what the host observed for it (`on_event`).

use serde::{Deserialize, Serialize};

use crate::host::Host;
use crate::{CloudEvent, Identity, SourceError};

/// The version of the plugin contract (`conductor:plugin@…`) this SDK implements.
pub const SDK_VERSION: &str = "0.2.0";

/// What a plugin declares about itself; the host checks it before loading the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    pub name: String,
    pub version: String,
    /// The contract version the plugin was built against ([`SDK_VERSION`]).
    pub sdk_version: String,
    /// The sources whose events it owns (agents echo them back as `originalsource`).
    pub sources: Vec<String>,
    /// The data types it serves.
    pub data_types: Vec<String>,
    /// The host capabilities it needs (see [`Capability`]).
    pub capabilities: Vec<String>,
}

/// The host capabilities a plugin can be granted in `conductor.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// Hand hub → agent events to the broker.
    Emit,
    /// Write to the host's log.
    Log,
    /// Timers delivered through `on_event`.
    Timer,
    /// Small state shared by all instances of the plugin.
    Kv,
    /// The plugin's configuration table.
    Config,
    /// PostgreSQL: statements, transactions, advisory locks, LISTEN.
    Pg,
    /// Kubernetes: watches.
    Kube,
}

impl Capability {
    pub const ALL: [Capability; 7] = [
        Self::Emit,
        Self::Log,
        Self::Timer,
        Self::Kv,
        Self::Config,
        Self::Pg,
        Self::Kube,
    ];

    /// The name used in descriptions, grants and WIT interface names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Emit => "emit",
            Self::Log => "log",
            Self::Timer => "timer",
            Self::Kv => "kv",
            Self::Config => "config",
            Self::Pg => "pg",
            Self::Kube => "kube",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// What a resync asks for: every resource of `data_type` for `cluster_name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOptions {
    pub cluster_name: String,
    pub data_type: String,
}

/// Something the host observed for the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostEvent {
    /// The named timer went off.
    Timer(String),
    /// A NOTIFY on a channel the plugin listens on.
    Notification {
        database: String,
        channel: String,
        payload: String,
    },
    /// A LISTEN was (re-)established: notifications sent while it was down are lost, so catch
    /// up from the tables. `reconnected` is false the first time.
    Listening {
        database: String,
        channel: String,
        reconnected: bool,
    },
    /// A watched Kubernetes object (see [`crate::Host::kube_watch`]).
    Kube {
        /// `<plural>.<group>` of the watch.
        resource: String,
        change: KubeChange,
        /// The object, as JSON.
        object: String,
    },
}

/// What happened to a watched Kubernetes object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KubeChange {
    /// It exists as given: listed when the watch (re)starts, or created or changed since.
    Applied,
    Deleted,
}

/// A kind of Kubernetes object; `group` is empty for the core group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ApiResource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
}

impl ApiResource {
    /// `<plural>.<group>` (just `<plural>` for the core group), as watch events name it.
    pub fn name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// A source plugin. The host runs a pool of instances, each created by [`Plugin::init`]; calls
/// on one instance never overlap. State that instances share lives in the host's `kv` or in the
/// backing store.
pub trait Plugin: Sized + 'static {
    /// The plugin's name, version, sources, data types and needed capabilities.
    fn describe() -> Description;
    /// Creates an instance from the plugin's configuration table (as JSON).
    fn init(host: &Host, config: serde_json::Value) -> Result<Self, SourceError>;
    /// Every resource of the data type for the cluster, as spec events (for resync).
    fn list(&mut self, host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, SourceError>;
    /// An agent → hub event: a status update, a registration request, …
    fn handle(&mut self, host: &Host, identity: Identity, event: CloudEvent) -> Result<(), SourceError>;
    /// A timer, watch event or notification the host delivers.
    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), SourceError> {
        let _ = (host, event);
        Ok(())
    }
}
