//! The host capabilities of one plugin, shared by all its instances: one room per
//! `conductor:plugin/*` interface — [`emit`], [`log`], [`timer`], [`kv`], [`pg`], [`kube`],
//! [`metrics`], [`blob`] — each owning its share of the plugin's state, and what the wasm binding
//! (`plugins::wasm`) and the native host calls (`plugins::native`) call into.
//!
//! Every call passes the plugin's [`Guard`] first: its grants (components cannot even link an
//! ungranted import; native libraries are refused at load when they declare one, and this check
//! stops any call that slips through) and its [`Mode`]. What the host keeps for the plugin is
//! bounded by its limits: a call past one is refused with an error naming it, and counted.
//!
//! Everything a plugin starts in the background — timers, LISTENs, watches — runs in the plugin's
//! task tree ([`Tasks`]).

pub mod blob;
pub mod emit;
mod guard;
pub mod kube;
pub mod kv;
pub mod log;
pub mod metrics;
pub mod pg;
pub mod timer;

use std::sync::Arc;

use conductor_plugin_sdk::Capability;

use crate::broker::EventSink;
use crate::database::Databases;
use crate::host_events::EventQueue;
use crate::kube::Kubernetes;
use crate::plugins::routing::SourceCheck;
use crate::plugins::tasks::Tasks;
use crate::telemetry::PluginMetrics;
use crate::telemetry::exported::Declared;
use blob::BlobHost;
use emit::EmitHost;
pub use guard::{Grants, Guard, HostLimits, KvLimits, Mode, grants};
use kube::KubeHost;
use kv::KvHost;
pub use kv::KvStore;
use log::LogHost;
pub use log::OutputStream;
use metrics::MetricsHost;
use pg::PgHost;
pub use pg::PgSession;
use timer::TimerHost;

/// What the host reaches for its plugins besides the broker.
#[derive(Clone)]
pub struct Backends {
    pub databases: Arc<Databases>,
    pub kubernetes: Arc<Kubernetes>,
}

impl Backends {
    /// No databases, and a Kubernetes client inferred on first use.
    pub fn none() -> Self {
        Self {
            databases: Databases::none(),
            kubernetes: Arc::new(Kubernetes::new(None)),
        }
    }
}

/// What one plugin's capabilities are made of.
pub struct CapabilitiesParts {
    pub plugin: String,
    pub grants: Grants,
    pub mode: Mode,
    /// Where its events go.
    pub sink: Arc<dyn EventSink>,
    pub backends: Backends,
    /// Its `kv` state, kept across reloads.
    pub kv: KvStore,
    /// Its host events: timer firings, notifications, watched objects.
    pub events: Arc<EventQueue>,
    /// Its background tasks.
    pub tasks: Tasks,
    /// The metrics it declared.
    pub exports: Declared,
}

/// What the host does for one plugin, shared by all its instances: one room per interface.
pub struct Capabilities {
    guard: Arc<Guard>,
    emit: EmitHost,
    log: LogHost,
    timer: TimerHost,
    kv: KvHost,
    pg: PgHost,
    kube: KubeHost,
    metrics: MetricsHost,
    blob: BlobHost,
}

impl Capabilities {
    pub fn new(parts: CapabilitiesParts) -> Arc<Self> {
        let CapabilitiesParts {
            plugin,
            grants,
            mode,
            sink,
            backends,
            kv,
            events,
            tasks,
            exports,
        } = parts;
        let guard = Arc::new(Guard::new(&plugin, grants, mode, events.metrics().clone()));
        let share = || Arc::clone(&guard);
        Arc::new(Self {
            emit: EmitHost::new(share(), sink),
            log: LogHost::new(share()),
            timer: TimerHost::new(share(), Arc::clone(&events), tasks.clone()),
            kv: KvHost::new(share(), kv),
            pg: PgHost::new(share(), backends.databases, Arc::clone(&events), tasks.clone()),
            kube: KubeHost::new(share(), backends.kubernetes, events, tasks),
            metrics: MetricsHost::new(share(), exports),
            blob: BlobHost::new(share()),
            guard,
        })
    }

    pub fn plugin(&self) -> &str {
        self.guard.plugin()
    }

    /// The plugin's metrics.
    pub fn metrics(&self) -> &PluginMetrics {
        self.guard.metrics()
    }

    pub fn granted(&self, capability: Capability) -> bool {
        self.guard.granted(capability)
    }

    pub fn grants(&self) -> &Grants {
        self.guard.grants()
    }

    pub fn mode(&self) -> Mode {
        self.guard.mode()
    }

    /// Where the status updates about the events the plugin sends go.
    pub fn sources(&self) -> &SourceCheck {
        self.emit.sources()
    }

    pub fn emit(&self) -> &EmitHost {
        &self.emit
    }

    pub fn log(&self) -> &LogHost {
        &self.log
    }

    pub fn timer(&self) -> &TimerHost {
        &self.timer
    }

    pub fn kv(&self) -> &KvHost {
        &self.kv
    }

    pub fn pg(&self) -> &PgHost {
        &self.pg
    }

    pub fn kube(&self) -> &KubeHost {
        &self.kube
    }

    /// The plugin's own metrics (`conductor:plugin/metrics`).
    pub fn exported_metrics(&self) -> &MetricsHost {
        &self.metrics
    }

    pub fn blob(&self) -> &BlobHost {
        &self.blob
    }
}
