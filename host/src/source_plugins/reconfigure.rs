//! What runs, as two inputs make it: conductor.toml (re-read on a reload) and, with `[dynamic]
//! source_plugins`, the `SourcePlugin` resources. Each change is applied as one reload of the
//! plugin set: the file's plugins and routes, then each resource admitted within the file's
//! `[dynamic] max_grants` (older resources first). A bad file is refused whole. A resource that
//! is refused or does not load leaves everything else in place — its earlier version keeps
//! serving if it had one — and says why in its status.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::status::Outcome;
use super::{SourcePlugin, admission};
use crate::admin::{ReloadSummary, ReloadTrigger};
use crate::broker::Broker;
use crate::config::{ConfigError, LoadedConfig};
use crate::plugin_set::PluginSet;
use crate::plugins::HostContext;

/// The running plugin set and what it was made from.
pub struct Reconfigurer {
    /// conductor.toml as last applied.
    file: LoadedConfig,
    /// The file plus the admitted resources: what runs.
    applied: LoadedConfig,
    /// The plugins that come from resources.
    from_resources: BTreeSet<String>,
    resources: Arc<Vec<SourcePlugin>>,
    outcomes: BTreeMap<String, Outcome>,
    plugins: PluginSet,
}

/// The resource among `names` that the configuration key `key` (`plugins.<name>…`) is about.
fn resource_named<'a>(key: &str, names: impl Iterator<Item = &'a String>) -> Option<String> {
    names
        .filter(|n| {
            let prefix = format!("plugins.{n}");
            key == prefix || key.starts_with(&format!("{prefix}."))
        })
        .max_by_key(|n| n.len())
        .cloned()
}

impl Reconfigurer {
    pub fn new(loaded: LoadedConfig, plugins: PluginSet) -> Self {
        Self {
            applied: loaded.clone(),
            file: loaded,
            from_resources: BTreeSet::new(),
            resources: Arc::default(),
            outcomes: BTreeMap::new(),
            plugins,
        }
    }

    /// What runs now.
    pub fn applied(&self) -> &LoadedConfig {
        &self.applied
    }

    pub fn plugins(&self) -> &PluginSet {
        &self.plugins
    }

    /// What became of each resource, by name.
    pub fn outcomes(&self) -> &BTreeMap<String, Outcome> {
        &self.outcomes
    }

    /// The resources of the last snapshot.
    pub fn resources(&self) -> Arc<Vec<SourcePlugin>> {
        Arc::clone(&self.resources)
    }

    /// Re-reads conductor.toml and applies it with the resources; a file that does not load
    /// whole changes nothing.
    pub async fn reload_file(
        &mut self,
        trigger: ReloadTrigger,
        broker: &Broker,
        host: &HostContext,
    ) -> Result<ReloadSummary, String> {
        tracing::info!(file = %self.file.path.display(), trigger = trigger.as_str(), "reloading the configuration");
        let next = self.file.reread().map_err(|e| {
            tracing::error!(error = %e, "reload refused; the running configuration stays");
            e.to_string()
        })?;
        crate::plugins::wasm::set_compile_cache(next.compile_cache());
        crate::plugins::wasm::set_compile_cache_max_size(next.config.compile_cache_max_size.0);
        self.apply(next, broker, host).await.map_err(|e| {
            tracing::error!(error = %e, "reload refused; the running configuration stays");
            e.to_string()
        })
    }

    /// Applies a new state of the resources with the running conductor.toml.
    pub async fn resources_changed(
        &mut self,
        resources: Arc<Vec<SourcePlugin>>,
        broker: &Broker,
        host: &HostContext,
    ) -> Result<ReloadSummary, String> {
        tracing::info!(
            trigger = ReloadTrigger::SourcePlugins.as_str(),
            resources = resources.len(),
            "applying the SourcePlugin resources"
        );
        self.resources = resources;
        let file = self.file.clone();
        self.apply(file, broker, host).await.map_err(|e| {
            tracing::error!(error = %e, "SourcePlugin resources not applied");
            e.to_string()
        })
    }

    /// Makes `file` plus the admitted resources run.
    async fn apply(
        &mut self,
        file: LoadedConfig,
        broker: &Broker,
        host: &HostContext,
    ) -> Result<ReloadSummary, ConfigError> {
        let mut outcomes = BTreeMap::new();
        let mut next = file.clone();
        let mut admitted = BTreeSet::new();
        // Resources running the version they ran before: one that fails now is taken out.
        let mut fell_back = BTreeSet::new();
        if file.config.dynamic.source_plugins {
            for r in self.resources.iter() {
                match admission::admit(&r.name, &r.spec, &next.config) {
                    Ok(a) => {
                        for source in &a.sources {
                            next.config.routes.insert(source.clone(), r.name.clone());
                        }
                        next.config.plugins.insert(r.name.clone(), a.plugin);
                        next.routed_only.insert(r.name.clone());
                        admitted.insert(r.name.clone());
                    }
                    Err(refusal) => {
                        // A refused change never takes down what serves: the version admitted
                        // before keeps running (the same spec refused now that a ceiling was
                        // lowered, too) while its sources are still its own.
                        let kept = self.keep_running(&r.name, &mut next);
                        match &kept {
                            Some(digest) => {
                                tracing::warn!(resource = %r.name, reason = refusal.reason, message = %refusal.message, running = %digest, "SourcePlugin refused; the earlier version keeps serving");
                                admitted.insert(r.name.clone());
                                fell_back.insert(r.name.clone());
                            }
                            None => {
                                tracing::warn!(resource = %r.name, reason = refusal.reason, message = %refusal.message, "SourcePlugin refused")
                            }
                        }
                        outcomes.insert(
                            r.name.clone(),
                            Outcome::Refused {
                                reason: refusal.reason.to_owned(),
                                message: refusal.message,
                                running: kept,
                            },
                        );
                    }
                }
            }
        }
        // A resource whose plugin fails falls back to the version that runs, or goes.
        let summary = loop {
            let tried = match next.config.validate() {
                Err((key, reason)) => Err(next.error(key, reason)),
                Ok(()) => self.plugins.reload(&self.applied, &next, host).await,
            };
            let e = match tried {
                Ok(summary) => break summary,
                Err(e) => e,
            };
            let Some(name) = resource_named(&e.key, admitted.iter()) else {
                return Err(e);
            };
            let message = format!("{}: {}", e.key, e.reason);
            tracing::warn!(resource = %name, error = %message, "SourcePlugin did not load");
            next.config.plugins.remove(&name);
            next.config.routes.retain(|_, p| *p != name);
            next.routed_only.remove(&name);
            let kept = match fell_back.contains(&name) {
                false => self.keep_running(&name, &mut next),
                true => None,
            };
            if kept.is_none() {
                admitted.remove(&name);
            }
            if let Some(Outcome::Refused { running, .. }) = outcomes.get_mut(&name) {
                // Refused, and the earlier version it kept does not load any more either.
                *running = kept;
            } else {
                outcomes.insert(name.clone(), Outcome::Failed { message, running: kept });
            }
            fell_back.insert(name);
        };
        broker.set_routes(self.plugins.routing_table());
        self.plugins.stop_retired().await;
        for name in &summary.removed {
            host.metrics.forget_plugin(name);
        }
        host.metrics
            .config
            .source_plugins_refused(outcomes.iter().filter_map(|(name, outcome)| match outcome {
                Outcome::Refused { reason, running, .. } => Some((name.as_str(), reason.as_str(), running.is_some())),
                _ => None,
            }));
        let entries = self.plugins.entries();
        for name in &admitted {
            if !outcomes.contains_key(name) {
                let digest = entries.get(name).and_then(|r| r.digest.clone()).unwrap_or_default();
                outcomes.insert(name.clone(), Outcome::Loaded { digest });
            }
        }
        self.from_resources = admitted;
        self.outcomes = outcomes;
        self.file = file;
        self.applied = next;
        if !summary.restart_needed.is_empty() {
            tracing::warn!(sections = ?summary.restart_needed, "these settings changed and take effect on restart");
        }
        tracing::info!(
            added = ?summary.added,
            removed = ?summary.removed,
            replaced = ?summary.replaced,
            kept = ?summary.kept,
            "configuration reloaded"
        );
        Ok(summary)
    }

    /// Puts the version of resource `name` that runs now (if one does) into `next`, with its
    /// routes, unless a source of its is taken there; returns its digest when it does.
    fn keep_running(&self, name: &str, next: &mut LoadedConfig) -> Option<String> {
        if !self.from_resources.contains(name) {
            return None;
        }
        let previous = self.applied.config.plugins.get(name)?;
        let sources: Vec<&String> = self
            .applied
            .config
            .routes
            .iter()
            .filter(|(_, plugin)| plugin.as_str() == name)
            .map(|(source, _)| source)
            .collect();
        if sources.iter().any(|s| next.config.routes.contains_key(*s)) || next.config.plugins.contains_key(name) {
            return None;
        }
        next.config.plugins.insert(name.to_owned(), previous.clone());
        next.routed_only.insert(name.to_owned());
        for source in sources {
            next.config.routes.insert(source.clone(), name.to_owned());
        }
        Some(
            self.plugins
                .entries()
                .get(name)
                .and_then(|r| r.digest.clone())
                .unwrap_or_default(),
        )
    }

    /// Stops every plugin.
    pub async fn stop(mut self) {
        self.plugins.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_key_names_the_resource_it_is_about() {
        let names = ["works".to_owned(), "works.v2".to_owned(), "other".to_owned()];
        assert_eq!(resource_named("plugins.works", names.iter()).as_deref(), Some("works"));
        assert_eq!(
            resource_named("plugins.works.file", names.iter()).as_deref(),
            Some("works")
        );
        assert_eq!(
            resource_named("plugins.works.v2.limits.memory", names.iter()).as_deref(),
            Some("works.v2")
        );
        assert_eq!(resource_named("plugins.workshop", names.iter()), None);
        assert_eq!(resource_named("routes", names.iter()), None);
    }
}
