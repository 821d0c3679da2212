//! Where the status updates about a plugin's events go. Agents echo the `source` of each spec
//! event as the `originalsource` of their status updates, and the routing table routes those by it: a
//! plugin whose events carry a source that routes to another plugin (a second copy of a plugin
//! that kept the first one's source, say) has its agents' status updates handled by that other
//! plugin, which says nothing about it. [`SourceCheck`] tells: at load and at every reload, a
//! warning for each source the plugin declares that routes elsewhere (the routing table's
//! [`RoutingTable::foreign_declared`](crate::routes::RoutingTable::foreign_declared)); and as the plugin
//! sends events (emitted, or answering a resync), a warning the first time one carries a source
//! that routes elsewhere, and a count of them all
//! (`conductor_plugin_foreign_source_events_total{plugin,source,routed_to}`).
//!
//! A plugin sending a source it declares, routed to itself — the normal case — costs two atomic
//! loads and a comparison per event: no lock, no allocation.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use conductor_plugin_sdk::CloudEvent;
use parking_lot::Mutex;

use crate::routes::{Foreign, Owners};
use crate::telemetry::PluginMetrics;

/// The sources one plugin sends, checked against the routes (shared by its instances).
pub struct SourceCheck {
    plugin: String,
    /// The sources the plugin declares (set once it is described).
    declared: OnceLock<Vec<String>>,
    /// Whether no declared source routes to another plugin: then sending one needs no look-up.
    declared_here: AtomicBool,
    state: Mutex<State>,
    metrics: PluginMetrics,
}

#[derive(Default)]
struct State {
    /// The routes of the routing table in place.
    owners: Arc<Owners>,
    /// The routes that led elsewhere in events the plugin sent, and where: route → plugin. Each
    /// is logged the first time (and again at reloads while it still leads elsewhere). Bounded by
    /// the routes.
    seen: BTreeMap<String, String>,
}

/// A source that routes to another plugin: what the plugin sends (or declares) and where agents'
/// status updates about it go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misrouted {
    pub source: String,
    pub routed_to: String,
    /// Declared by the plugin (else seen in an event it sent).
    pub declared: bool,
}

impl SourceCheck {
    /// A check with no routes yet: nothing routes elsewhere until [`Self::routed`] says so.
    pub fn new(plugin: &str, metrics: PluginMetrics) -> Self {
        Self {
            plugin: plugin.to_owned(),
            declared: OnceLock::new(),
            declared_here: AtomicBool::new(true),
            state: Mutex::default(),
            metrics,
        }
    }

    /// The sources the plugin declares (its description's).
    pub fn declare(&self, sources: &[String]) {
        let _ = self.declared.set(sources.to_vec());
    }

    /// An event the plugin sends agents: counted (and logged the first time) if its source routes
    /// to another plugin.
    pub fn sent(&self, event: &CloudEvent) {
        if self.declared_here.load(Ordering::Relaxed)
            && self
                .declared
                .get()
                .is_some_and(|declared| declared.contains(&event.source))
        {
            return;
        }
        self.look_up(&event.source);
    }

    #[cold]
    fn look_up(&self, source: &str) {
        let mut state = self.state.lock();
        let Some((route, owner)) = state.owners.owner(source) else {
            return;
        };
        if owner == self.plugin {
            return;
        }
        let (route, owner) = (route.to_owned(), owner.to_owned());
        self.metrics.foreign_source_events(&route, &owner).inc();
        if state.seen.get(&route) != Some(&owner) {
            warn(&self.plugin, source, &owner, false);
            state.seen.insert(route, owner);
        }
    }

    /// The routes of a new routing table (at load and at every reload), with the plugin's declared
    /// sources that route elsewhere (`foreign`): each is logged, as is each route the plugin's
    /// events took elsewhere before that still leads elsewhere. Returns what was logged.
    pub fn routed(&self, owners: Arc<Owners>, foreign: &[&Foreign]) -> Vec<Misrouted> {
        let declared = self.declared.get().map(Vec::as_slice).unwrap_or_default();
        let here = declared
            .iter()
            .all(|s| owners.owner(s).is_none_or(|(_, owner)| owner == self.plugin));
        let mut misrouted: Vec<Misrouted> = foreign
            .iter()
            .map(|f| Misrouted {
                source: f.source.clone(),
                routed_to: f.routed_to.clone(),
                declared: true,
            })
            .collect();
        let mut state = self.state.lock();
        let seen = std::mem::take(&mut state.seen);
        for route in seen.into_keys() {
            let Some((_, owner)) = owners.owner(&route).filter(|(_, owner)| *owner != self.plugin) else {
                continue;
            };
            if !misrouted.iter().any(|m| m.source == route) {
                misrouted.push(Misrouted {
                    source: route.clone(),
                    routed_to: owner.to_owned(),
                    declared: false,
                });
            }
            state.seen.insert(route, owner.to_owned());
        }
        for m in &misrouted {
            // The series exists from now on, at 0 until an event takes the route.
            if let Some((route, _)) = owners.owner(&m.source) {
                self.metrics.foreign_source_events(route, &m.routed_to);
            }
            warn(&self.plugin, &m.source, &m.routed_to, m.declared);
        }
        state.owners = owners;
        self.declared_here.store(here, Ordering::Relaxed);
        misrouted
    }
}

fn warn(plugin: &str, source: &str, routed_to: &str, declared: bool) {
    let what = match declared {
        true => "declares",
        false => "sends events with",
    };
    tracing::warn!(
        plugin,
        source,
        routed_to,
        "plugin {plugin} {what} source {source:?}, which routes to plugin {routed_to}: agents echo it in their status updates, so those about {plugin}'s events go to {routed_to}; give {plugin} a source of its own (its configuration, and [routes])"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::{RoutingTable, Source};
    use crate::telemetry::Metrics;
    use async_trait::async_trait;
    use conductor_plugin_sdk::ocm::DataType;
    use conductor_plugin_sdk::{Error, Identity, ListOptions};

    struct Named(&'static str, Vec<String>);

    #[async_trait]
    impl Source for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn data_types(&self) -> &[DataType] {
            &[]
        }
        fn sources(&self) -> &[String] {
            &self.1
        }
        async fn list(&self, _: &ListOptions) -> Result<Vec<CloudEvent>, Error> {
            Ok(vec![])
        }
        async fn handle(&self, _: &Identity, _: CloudEvent) -> Result<(), Error> {
            Ok(())
        }
    }

    fn table(routes: &[(&str, &str)]) -> RoutingTable {
        let plugins: Vec<Arc<dyn Source>> = vec![
            Arc::new(Named("hello", vec!["hello".into()])),
            Arc::new(Named("hello-2", vec!["hello".into()])),
        ];
        let routes = routes.iter().map(|(s, p)| ((*s).to_owned(), (*p).to_owned())).collect();
        RoutingTable::new(plugins, &routes).unwrap()
    }

    fn event(source: &str) -> CloudEvent {
        CloudEvent::new("1", source, "t")
    }

    /// Applies `table` to the check of `hello-2`, as the plugin set does.
    fn routed(check: &SourceCheck, table: &RoutingTable) -> Vec<Misrouted> {
        let foreign = table.foreign_declared();
        let mine: Vec<&Foreign> = foreign.iter().filter(|f| f.plugin == "hello-2").collect();
        check.routed(Arc::new(table.owners()), &mine)
    }

    fn count(metrics: &Metrics, source: &str, routed_to: &str) -> u64 {
        metrics.plugin("hello-2").foreign_source_events(source, routed_to).get()
    }

    #[test]
    fn events_whose_source_routes_elsewhere_are_counted_and_reported_at_each_reload() {
        let metrics = Metrics::new();
        let check = SourceCheck::new("hello-2", metrics.plugin("hello-2"));
        check.declare(&["hello".to_owned()]);
        // Before any routes (`plugins test`): nothing to say.
        check.sent(&event("hello"));
        assert_eq!(count(&metrics, "hello", "hello"), 0);

        // The copy's declared source routed to the first plugin: reported at load, counted as sent.
        let misrouted = routed(&check, &table(&[("hello", "hello")]));
        let declared = Misrouted {
            source: "hello".into(),
            routed_to: "hello".into(),
            declared: true,
        };
        assert_eq!(misrouted, std::slice::from_ref(&declared));
        for _ in 0..3 {
            check.sent(&event("hello"));
        }
        check.sent(&event("hello::abc"));
        assert_eq!(
            count(&metrics, "hello", "hello"),
            4,
            "a `::` source counts under its route"
        );
        check.sent(&event("nowhere"));

        // Configured with a source of its own and routed to it: the declared source is not held
        // against it, but an event still carrying the first one's source is, and the reload after
        // says so again.
        let both = table(&[("hello", "hello"), ("hello-2", "hello-2")]);
        assert_eq!(
            routed(&check, &both),
            [Misrouted {
                declared: false,
                ..declared
            }]
        );
        check.sent(&event("hello-2"));
        assert_eq!(count(&metrics, "hello", "hello"), 4);
        check.sent(&event("hello"));
        assert_eq!(count(&metrics, "hello", "hello"), 5);

        // The route moved to the copy itself: nothing routes elsewhere any more.
        assert_eq!(routed(&check, &table(&[("hello", "hello-2")])), []);
        check.sent(&event("hello"));
        assert_eq!(count(&metrics, "hello", "hello"), 5);
        assert_eq!(count(&metrics, "hello", "hello-2"), 0);
    }
}
