//! What a plugin author implements: [`Plugin`], called by the host for resync (`list`), for agent
//! events (`handle`) and for what the host observed for it (`on_event`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::host::Host;
use crate::kube::WatchEvent;
pub use crate::metric::{MetricDescription, MetricKind};
use crate::pg::{Listening, Notification};
pub use crate::request::Request;
use crate::{CloudEvent, Error, Identity};

/// The version of the plugin contract (`conductor:plugin@…` in `wit/plugin.wit`, the one source
/// of truth) this SDK implements.
pub const SDK_VERSION: &str = env!("CONDUCTOR_CONTRACT_VERSION");

/// What a plugin declares about itself; the host checks it before loading the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    pub name: String,
    pub version: String,
    /// The contract version the plugin was built against: filled in by the SDK.
    pub sdk_version: String,
    /// The sources whose events it owns (agents echo them back as `originalsource`).
    pub sources: Vec<String>,
    /// The data types it serves; none for a plugin that serves no agent events.
    pub data_types: Vec<String>,
    /// The host capabilities it needs. A native library declares them here; a WebAssembly
    /// component's capabilities are read from its imports instead.
    pub capabilities: Vec<Capability>,
    /// How many [`Plugin::on_events`] calls carrying only notifications may run at once (the
    /// host runs at most the pool size); 0 or 1, none overlap. See
    /// [`Description::concurrent_notifications`].
    #[serde(default)]
    pub concurrent_notifications: u32,
    /// The metrics it exports through the host ([`Host::counter_add`], [`Host::gauge_set`]).
    #[serde(default)]
    pub metrics: Vec<MetricDescription>,
}

impl Description {
    /// A plugin called `name` at `version` (e.g. `env!("CARGO_PKG_VERSION")`), built against
    /// this SDK.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            sdk_version: SDK_VERSION.to_owned(),
            sources: vec![],
            data_types: vec![],
            capabilities: vec![],
            concurrent_notifications: 0,
            metrics: vec![],
        }
    }

    /// Declares a metric the plugin exports (see [`MetricDescription`]).
    pub fn metric(mut self, name: &str, kind: MetricKind, help: &str, labels: &[&str]) -> Self {
        self.metrics.push(MetricDescription {
            name: name.to_owned(),
            kind,
            help: help.to_owned(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        });
        self
    }

    pub fn sources<S: Into<String>>(mut self, sources: impl IntoIterator<Item = S>) -> Self {
        self.sources = sources.into_iter().map(Into::into).collect();
        self
    }

    pub fn data_types<S: Into<String>>(mut self, data_types: impl IntoIterator<Item = S>) -> Self {
        self.data_types = data_types.into_iter().map(Into::into).collect();
        self
    }

    pub fn capabilities(mut self, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        self.capabilities = capabilities.into_iter().collect();
        self
    }

    /// Lets up to `calls` [`Plugin::on_events`] calls that carry only notifications run at once,
    /// each on an instance of its own. Set it only if the plugin stays correct when they overlap:
    /// what they share through `kv` is read and written concurrently, and events about one row
    /// are kept in order by the plugin (a database lock per row, taken in a fixed order). Calls
    /// with a timer, `listening` or watch event still overlap no other call, and start after
    /// every call handed out before them.
    pub fn concurrent_notifications(mut self, calls: u32) -> Self {
        self.concurrent_notifications = calls;
        self
    }
}

/// The host capabilities a plugin can be granted in `conductor.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// Hand hub → agent events to the broker.
    Emit,
    /// Write to the host's log.
    Log,
    /// Timers delivered through `on_event`.
    Timer,
    /// Small state shared by all instances of the plugin.
    Kv,
    /// PostgreSQL: statements, transactions, advisory locks, LISTEN.
    Pg,
    /// Kubernetes: watches, reads and writes of the granted resources.
    Kube,
    /// Metrics of the plugin's own, exported with the host's.
    Metrics,
    /// Files the operator names for the plugin, read-only.
    Blob,
}

impl Capability {
    pub const ALL: [Capability; 8] = [
        Self::Emit,
        Self::Log,
        Self::Timer,
        Self::Kv,
        Self::Pg,
        Self::Kube,
        Self::Metrics,
        Self::Blob,
    ];

    /// The name used in grants and as the WIT interface name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Emit => "emit",
            Self::Log => "log",
            Self::Timer => "timer",
            Self::Kv => "kv",
            Self::Pg => "pg",
            Self::Kube => "kube",
            Self::Metrics => "metrics",
            Self::Blob => "blob",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
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
    Notification(Notification),
    /// A LISTEN was (re-)established.
    Listening(Listening),
    /// A watched Kubernetes object.
    Watch(WatchEvent),
}

/// The configuration of a plugin that takes none: an empty table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoConfig {}

/// A plugin. The host runs a pool of instances, each made by [`Plugin::init`]; calls on one
/// instance never overlap, and host events reach one instance at a time (unless the plugin
/// declares [`Description::concurrent_notifications`]). State that instances
/// share lives in the host's `kv` or in the backing store.
///
/// Only [`Plugin::describe`] and [`Plugin::init`] are required: a plugin that serves no agent
/// events (a controller) leaves `list` and `handle` out.
pub trait Plugin: Sized + 'static {
    /// The plugin's table in `conductor.toml` (`[plugins.<name>.config]`), as serde reads it.
    /// Unknown keys should be refused (`#[serde(deny_unknown_fields)]`); errors name the key.
    type Config: DeserializeOwned;

    /// The plugin's name, version, sources, data types and needed capabilities.
    fn describe() -> Description;

    /// Checks a configuration beyond its shape. Runs without a host (`conductor check-config`):
    /// no capability may be used here.
    fn check(config: &Self::Config) -> Result<(), Error> {
        let _ = config;
        Ok(())
    }

    /// Creates an instance. Runs once per instance (a pool may hold several, and the host
    /// replaces an instance whose call trapped): keep once-only work for [`Plugin::start`].
    fn init(host: &Host, config: Self::Config) -> Result<Self, Error>;

    /// Runs once per loaded plugin, on its first instance after `init`: start watches, LISTENs,
    /// timers and other once-only work. A failure stops the plugin from loading.
    fn start(&mut self, host: &Host) -> Result<(), Error> {
        let _ = host;
        Ok(())
    }

    /// Every resource of the data type for the cluster, as spec events (for resync).
    fn list(&mut self, host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, Error> {
        let _ = (host, options);
        Ok(vec![])
    }

    /// An agent → hub event: a status update, a registration request, …
    fn handle(&mut self, host: &Host, identity: Identity, event: CloudEvent) -> Result<(), Error> {
        let _ = (host, identity);
        Err(Error::Invalid(format!(
            "plugin {} takes no agent events (got {})",
            Self::describe().name,
            event.ty
        )))
    }

    /// Agent → hub events that waited for the plugin together (every instance busy, or several
    /// arriving while a call ran), oldest first, from one caller or several: one result per
    /// request, in their order; each goes back to its own caller. The host calls
    /// [`Plugin::handle`] for a request that waited alone and this for two or more (at most the
    /// plugin's `limits.request_batch`). By default each request goes to [`Plugin::handle`] in
    /// turn. Override it to do the batch's work at once — one database transaction for many
    /// status updates — keeping each request's own answer: one refused request fails alone.
    fn handle_batch(&mut self, host: &Host, requests: Vec<Request>) -> Vec<Result<(), Error>> {
        requests
            .into_iter()
            .map(|r| self.handle(host, r.identity, r.event))
            .collect()
    }

    /// One timer, watch event or notification the host delivers.
    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), Error> {
        let _ = (host, event);
        Ok(())
    }

    /// What the host observed since the last call, oldest first. By default each event goes to
    /// [`Plugin::on_event`]; every event is handled even if one fails, and the first failure is
    /// returned. Override it to handle a burst at once (one query for many notifications).
    fn on_events(&mut self, host: &Host, events: Vec<HostEvent>) -> Result<(), Error> {
        let total = events.len();
        let mut failed = 0;
        let mut first = None;
        for event in events {
            if let Err(e) = self.on_event(host, event) {
                failed += 1;
                first.get_or_insert(e);
            }
        }
        match first {
            None => Ok(()),
            Some(e) if total == 1 => Err(e),
            Some(e) => Err(e.context(format!("{failed} of {total} host events failed; the first"))),
        }
    }
}

/// Reads a plugin's configuration from JSON; an error names the key at fault.
pub fn parse_config<C: DeserializeOwned>(json: &str) -> Result<C, Error> {
    let mut de = serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            Error::Invalid(format!("config: {inner}"))
        } else {
            Error::Invalid(format!("config.{path}: {inner}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Config {
        database: String,
        #[serde(default)]
        limits: Limits,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Limits {
        #[serde(default)]
        batch: u32,
    }

    #[test]
    fn config_errors_name_the_key() {
        let err = parse_config::<Config>(r#"{"database": "m", "limits": {"batch": "x"}}"#).unwrap_err();
        assert!(err.to_string().contains("config.limits.batch"), "{err}");
        let err = parse_config::<Config>(r#"{"databse": "m"}"#).unwrap_err();
        assert!(err.to_string().contains("databse"), "{err}");
        assert!(parse_config::<NoConfig>("{}").is_ok());
        assert!(parse_config::<NoConfig>(r#"{"x": 1}"#).is_err());
    }

    #[test]
    fn the_sdk_fills_in_its_own_version() {
        let d = Description::new("p", "1.0.0");
        assert_eq!(d.sdk_version, SDK_VERSION);
        assert!(SDK_VERSION.starts_with("0."), "{SDK_VERSION}");
    }

    #[test]
    fn capabilities_have_their_wit_names() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.name()), Some(c));
        }
        assert_eq!(Capability::parse("config"), None);
    }
}
