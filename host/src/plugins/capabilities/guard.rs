//! What a plugin may do — its grants, the mode its capabilities run in, the limits of what the
//! host keeps for it — and the [`Guard`] every capability call passes first: is the capability
//! granted, does the mode allow a write, and the count of calls a limit refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use conductor_plugin_sdk::{Capability, Error};

use crate::config::{KubeResourceGrant, PluginConfig, PluginLimits};
use crate::telemetry::PluginMetrics;

/// What a plugin was granted in `conductor.toml`.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub capabilities: BTreeSet<Capability>,
    /// The databases `pg` reaches.
    pub databases: BTreeSet<String>,
    /// The Kubernetes resources `kube` reaches, and with which verbs.
    pub kube_resources: Vec<KubeResourceGrant>,
    /// The files `blob` reads, by name (absolute paths).
    pub blobs: BTreeMap<String, PathBuf>,
    /// How much the host keeps for the plugin.
    pub limits: HostLimits,
}

impl Grants {
    /// Whether `verb` on `resource` (`<plural>.<group>`, with `/<subresource>` for one) is granted.
    pub fn allows_kube(&self, resource: &str, verb: &str) -> bool {
        self.kube_resources.iter().any(|g| g.allows(resource, verb))
    }
}

/// The grants of a plugin's configuration (validated when the configuration was loaded).
pub fn grants(config: &PluginConfig) -> Grants {
    Grants {
        capabilities: config.grants.iter().filter_map(|g| Capability::parse(g)).collect(),
        databases: config.databases.iter().cloned().collect(),
        kube_resources: config.kube_resources.clone(),
        blobs: config.blobs.clone(),
        limits: (&config.limits).into(),
    }
}

/// How much a plugin's `kv` store may hold.
#[derive(Debug, Clone, Copy)]
pub struct KvLimits {
    pub keys: usize,
    pub bytes: usize,
}

/// How much the host keeps for one plugin (`[plugins.<name>.limits]`).
#[derive(Debug, Clone, Copy)]
pub struct HostLimits {
    pub kv: KvLimits,
    pub timers: usize,
    pub log_lines_per_second: u32,
}

impl Default for HostLimits {
    /// The configuration's defaults.
    fn default() -> Self {
        Self::from(&PluginLimits::default())
    }
}

impl From<&PluginLimits> for HostLimits {
    fn from(limits: &PluginLimits) -> Self {
        Self {
            kv: KvLimits {
                keys: limits.kv_keys,
                bytes: limits.kv_bytes.as_usize(),
            },
            timers: limits.timers,
            log_lines_per_second: limits.log_lines_per_second,
        }
    }
}

/// How a plugin's capabilities behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Serving: everything granted works.
    Serve,
    /// `check-config --connect`: reads only. Statements run in read-only transactions; LISTEN,
    /// watches, timers, emits and Kubernetes writes are refused.
    ReadOnly,
}

/// Who the plugin is and what it may do, checked by every capability call.
pub struct Guard {
    plugin: String,
    grants: Grants,
    mode: Mode,
    metrics: PluginMetrics,
}

impl Guard {
    pub fn new(plugin: &str, grants: Grants, mode: Mode, metrics: PluginMetrics) -> Self {
        Self {
            plugin: plugin.to_owned(),
            grants,
            mode,
            metrics,
        }
    }

    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The plugin's metrics.
    pub fn metrics(&self) -> &PluginMetrics {
        &self.metrics
    }

    pub fn granted(&self, capability: Capability) -> bool {
        self.grants.capabilities.contains(&capability)
    }

    /// Refuses a call to a capability the plugin was not granted (and logs it).
    pub fn check(&self, capability: Capability) -> Result<(), Error> {
        if self.granted(capability) {
            Ok(())
        } else {
            tracing::warn!(plugin = %self.plugin, capability = capability.name(), "call to an ungranted capability refused");
            Err(Error::Denied(format!(
                "capability {:?} is not granted to plugin {:?}",
                capability.name(),
                self.plugin
            )))
        }
    }

    /// Refuses `what` unless the plugin is serving (not checking a configuration, read-only).
    pub fn serving(&self, what: &str) -> Result<(), Error> {
        match self.mode {
            Mode::Serve => Ok(()),
            Mode::ReadOnly => Err(Error::Denied(format!(
                "{what} is not allowed while checking a configuration (read-only)"
            ))),
        }
    }

    /// Counts a call refused by `limit`.
    pub fn refused(&self, limit: &str) {
        self.metrics.limit_hit(limit);
    }
}
