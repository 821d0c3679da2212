//! What the inspector reads in a running conductor: the broker's subscribers and the work its
//! agents never answered, the plugin set as the last start or reload left it, the routes, and the
//! last reload's outcome.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::{Mutex, RwLock};

use crate::broker::Broker;
use crate::config::PluginKind;
use crate::plugins::Running;

use super::views::{self as inspect, ReloadSummary};

/// The lanes of a plugin's host-event queue the inspector lists: the deepest this many.
const DEEPEST_LANES_SHOWN: usize = 20;

pub struct Inspector {
    broker: Arc<Broker>,
    config_file: PathBuf,
    plugins: RwLock<BTreeMap<String, Running>>,
    last_reload: Mutex<Option<inspect::Reload>>,
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Inspector {
    pub fn new(broker: Arc<Broker>, config_file: PathBuf, plugins: BTreeMap<String, Running>) -> Self {
        Self {
            broker,
            config_file,
            plugins: RwLock::new(plugins),
            last_reload: Mutex::new(None),
        }
    }

    /// Records a reload's outcome and, when applied, the plugins it left running.
    pub fn reloaded(&self, outcome: &Result<ReloadSummary, String>, plugins: BTreeMap<String, Running>) {
        if outcome.is_ok() {
            *self.plugins.write() = plugins;
        }
        *self.last_reload.lock() = Some(inspect::Reload {
            at: Utc::now(),
            applied: outcome.is_ok(),
            changes: outcome.as_ref().ok().cloned(),
            error: outcome.as_ref().err().cloned(),
        });
    }

    pub fn subscribers(&self) -> Vec<inspect::Subscriber> {
        self.broker
            .fanout()
            .snapshot()
            .into_iter()
            .map(|s| inspect::Subscriber {
                id: s.id.to_string(),
                cluster: s.cluster,
                data_type: s.data_type,
                user: s.user,
                remote: s.remote.map(|a| a.to_string()),
                connected_since: DateTime::<Utc>::from(s.since),
                events_sent: s.events_sent,
                queue_depth: s.queue_depth,
                queue_capacity: s.queue_capacity,
            })
            .collect()
    }

    /// Work sent and unanswered past `broker.undelivered_after`.
    pub fn undelivered(&self) -> Vec<inspect::Undelivered> {
        self.broker
            .fanout()
            .undelivered()
            .into_iter()
            .map(|u| inspect::Undelivered {
                plugin: u.plugin,
                cluster: u.cluster,
                data_type: u.data_type,
                resource_id: u.resource_id,
                resource_version: u.resource_version,
                sent_at: DateTime::<Utc>::from(u.sent_at),
                resent_at: u.resent_at.map(DateTime::<Utc>::from),
            })
            .collect()
    }

    /// The source names routed to `plugin`.
    fn sources_of(&self, plugin: &str) -> Vec<String> {
        let registry = self.broker.routes();
        registry
            .routes()
            .filter(|(_, p)| *p == plugin)
            .map(|(s, _)| s.to_owned())
            .collect()
    }

    pub fn plugins(&self) -> Vec<inspect::Plugin> {
        let running = self.plugins.read().clone();
        running.iter().map(|(name, r)| self.plugin(name, r)).collect()
    }

    fn plugin(&self, name: &str, entry: &Running) -> inspect::Plugin {
        let config = &entry.config;
        let form = match config.kind {
            PluginKind::Component => "component",
            PluginKind::Native => "native",
            PluginKind::Memory => "memory",
        };
        let plugin = entry.plugin.as_deref();
        let description = plugin.map(|p| p.description());
        let calls = plugin.map(|p| {
            let s = p.stats();
            inspect::Calls {
                total: s.calls,
                errors: s.errors,
                mean_ms: ms(s.mean),
                p50_ms: ms(s.p50),
                p99_ms: ms(s.p99),
                last_error: s.last_error.map(|e| inspect::LastError {
                    at: DateTime::<Utc>::from(e.at),
                    message: e.message,
                }),
            }
        });
        inspect::Plugin {
            name: name.to_owned(),
            form: form.to_owned(),
            // A plugin from a registry by its reference (its file is in the artifact cache).
            file: config
                .oci_reference()
                .or_else(|| plugin.map(|p| p.file().path.display().to_string())),
            digest: entry.digest.clone(),
            oci: entry.artifact.as_ref().map(|a| inspect::OciArtifact {
                reference: a.reference.clone(),
                digest: a.digest.clone(),
                component_digest: a.component_digest.clone(),
                from_cache: a.from_cache,
            }),
            declared_name: description.map(|d| d.name.clone()),
            version: description.map(|d| d.version.clone()),
            contract: description.map(|d| d.sdk_version.clone()),
            grants: config.grants.clone(),
            databases: config.databases.clone(),
            kube_resources: config
                .kube_resources
                .iter()
                .map(|g| format!("{}: {}", g.resource, g.verbs().join(",")))
                .collect(),
            capabilities: plugin
                .map(|p| p.file().capabilities.iter().map(|c| c.name().to_owned()).collect())
                .unwrap_or_default(),
            sources: self.sources_of(name),
            data_types: entry.source.data_types().iter().map(ToString::to_string).collect(),
            pool_size: if plugin.is_some() { config.pool_size } else { 1 },
            instances: plugin.map_or(1, |p| p.instances()),
            queued_events: plugin.map_or(0, |p| p.queued_events()),
            host_event_lanes: plugin
                .map(|p| {
                    let waiting = p.host_event_lanes(DEEPEST_LANES_SHOWN);
                    inspect::HostEventLanes {
                        waiting: waiting.lanes,
                        deepest: waiting
                            .deepest
                            .into_iter()
                            .map(|(namespace, events)| inspect::LaneDepth { namespace, events })
                            .collect(),
                    }
                })
                .unwrap_or_default(),
            calls,
            limits_refused: plugin
                .map(|p| p.limit_refusals())
                .unwrap_or_default()
                .into_iter()
                .map(|(limit, (count, at))| {
                    let last_at = DateTime::<Utc>::from_timestamp(at, 0).unwrap_or_default();
                    (limit, inspect::LimitRefusals { count, last_at })
                })
                .collect(),
            loaded_at: DateTime::<Utc>::from(entry.loaded_at),
        }
    }

    /// One plugin, with what it keeps in `kv`; none when no plugin of that name runs.
    pub fn plugin_detail(&self, name: &str) -> Option<inspect::PluginDetail> {
        let running = self.plugins.read().get(name).cloned()?;
        let kv = running.plugin.as_deref().map(|p| {
            use base64::Engine as _;
            let store = p.kv();
            let (keys, bytes) = store.size();
            let entries = store
                .entries()
                .into_iter()
                .map(|(key, value)| {
                    let text = std::str::from_utf8(&value).ok().map(str::to_owned);
                    inspect::KvEntry {
                        key,
                        bytes: value.len(),
                        base64: text
                            .is_none()
                            .then(|| base64::engine::general_purpose::STANDARD.encode(&value)),
                        text,
                    }
                })
                .collect();
            inspect::Kv { keys, bytes, entries }
        });
        Some(inspect::PluginDetail {
            plugin: self.plugin(name, &running),
            kv,
        })
    }

    pub fn routes(&self) -> inspect::Routes {
        let registry = self.broker.routes();
        let routes = registry
            .routes()
            .map(|(source, plugin)| inspect::Route {
                source: source.to_owned(),
                plugin: plugin.to_owned(),
                data_types: registry
                    .plugins()
                    .iter()
                    .find(|p| p.name() == plugin)
                    .map(|p| p.data_types().iter().map(ToString::to_string).collect())
                    .unwrap_or_default(),
            })
            .collect();
        inspect::Routes {
            config_file: self.config_file.display().to_string(),
            routes,
            last_reload: self.last_reload.lock().clone(),
        }
    }
}
