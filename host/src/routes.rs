//! The routing table: which plugin serves a request. Built from the loaded plugins and the
//! routes of `conductor.toml`; the broker reaches sources only through it.

use std::{collections::BTreeMap, sync::Arc};

use async_trait::async_trait;
use conductor_plugin_sdk::ocm::{DataType, OcmExtensions};
use conductor_plugin_sdk::{CloudEvent, Error, Identity, ListOptions};

/// A source of work: the interface the broker calls, implemented by every plugin runtime.
#[async_trait]
pub trait Source: Send + Sync + 'static {
    /// The plugin's name (the key under `[plugins]`).
    fn name(&self) -> &str;
    /// The data types this plugin serves.
    fn data_types(&self) -> &[DataType];
    /// The sources this plugin declares it owns (routed to it unless `[routes]` says otherwise).
    fn sources(&self) -> &[String];
    /// Every resource of `options.data_type` for the cluster, encoded as spec events.
    async fn list(&self, options: &ListOptions) -> Result<Vec<CloudEvent>, Error>;
    /// An agent → hub event (a status update, a registration request, …).
    async fn handle(&self, identity: &Identity, event: CloudEvent) -> Result<(), Error>;
}

/// Why an event could not be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("failed to find service for event type {0}")]
    NoService(String),
    #[error("failed to find service for event type {data_type}: unknown original source {source_name:?}")]
    UnknownSource { data_type: String, source_name: String },
    #[error(
        "failed to find service for event type {data_type}: source {source_name:?} (plugin {plugin:?}) does not serve it"
    )]
    NotServed {
        data_type: String,
        source_name: String,
        plugin: String,
    },
    #[error(
        "failed to find service for event type {data_type}: it has no original source and plugins {plugins:?} all serve it"
    )]
    Ambiguous { data_type: String, plugins: Vec<String> },
}

/// A routing table that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutingTableError {
    #[error("source {source_name:?} is claimed by plugins {first:?} and {second:?}; route it in [routes]")]
    ClaimedTwice {
        source_name: String,
        first: String,
        second: String,
    },
    #[error("routes.{source_name}: no plugin named {plugin:?} is loaded")]
    NoPlugin { source_name: String, plugin: String },
}

/// Sources by route, and by the data types they serve.
#[derive(Default)]
pub struct RoutingTable {
    /// Source name → plugin.
    routes: BTreeMap<String, Arc<dyn Source>>,
    plugins: Vec<Arc<dyn Source>>,
    /// The plugins an explicit route (`[routes]`, a SourcePlugin's sources) names.
    routed_explicitly: std::collections::BTreeSet<String>,
}

/// Where agents' events go by their `originalsource`: source name → plugin name (no plugin
/// behind it, so a plugin may keep a copy without keeping the table's plugins alive).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners(BTreeMap<String, String>);

impl Owners {
    /// The route `source` takes (its exact name, else the part before `::`) and the plugin that
    /// route names.
    pub fn owner(&self, source: &str) -> Option<(&str, &str)> {
        route_of(&self.0, source).map(|(route, plugin)| (route.as_str(), plugin.as_str()))
    }
}

/// The entry of `routes` an `originalsource` takes: the exact name, or the part before `::`.
/// Never slices `source`.
fn route_of<'a, V>(routes: &'a BTreeMap<String, V>, source: &str) -> Option<(&'a String, &'a V)> {
    if let Some(found) = routes.get_key_value(source) {
        return Some(found);
    }
    let (prefix, _) = source.split_once("::")?;
    routes.get_key_value(prefix)
}

/// A source a plugin declares that routes to another plugin: agents echo the source of the
/// plugin's events in their status updates, which then go to `routed_to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    pub plugin: String,
    pub source: String,
    pub routed_to: String,
}

impl RoutingTable {
    /// A routing table over `plugins`: the explicit `routes` (source name → plugin name), then every
    /// source a plugin declares that no route names. Two plugins declaring the same unrouted
    /// source is an error.
    pub fn new(plugins: Vec<Arc<dyn Source>>, routes: &BTreeMap<String, String>) -> Result<Self, RoutingTableError> {
        Self::with_routed_only(plugins, routes, &std::collections::BTreeSet::new())
    }

    /// As [`RoutingTable::new`], except that the plugins named in `routed_only` serve only the
    /// sources routed to them, not those they declare (plugins registered at runtime serve what
    /// their resource names).
    pub fn with_routed_only(
        plugins: Vec<Arc<dyn Source>>,
        routes: &BTreeMap<String, String>,
        routed_only: &std::collections::BTreeSet<String>,
    ) -> Result<Self, RoutingTableError> {
        let mut table: BTreeMap<String, Arc<dyn Source>> = BTreeMap::new();
        for (source, plugin) in routes {
            let p = plugins
                .iter()
                .find(|p| p.name() == plugin)
                .ok_or_else(|| RoutingTableError::NoPlugin {
                    source_name: source.clone(),
                    plugin: plugin.clone(),
                })?;
            table.insert(source.clone(), Arc::clone(p));
        }
        let mut declared: BTreeMap<String, Arc<dyn Source>> = BTreeMap::new();
        for p in plugins.iter().filter(|p| !routed_only.contains(p.name())) {
            for source in p.sources() {
                if routes.contains_key(source) {
                    continue;
                }
                if let Some(first) = declared.get(source) {
                    return Err(RoutingTableError::ClaimedTwice {
                        source_name: source.clone(),
                        first: first.name().to_owned(),
                        second: p.name().to_owned(),
                    });
                }
                declared.insert(source.clone(), Arc::clone(p));
            }
        }
        table.extend(declared);
        Ok(Self {
            routes: table,
            plugins,
            routed_explicitly: routes.values().cloned().collect(),
        })
    }

    /// The plugins, in configuration order.
    pub fn plugins(&self) -> &[Arc<dyn Source>] {
        &self.plugins
    }

    /// Source name → plugin name, for display.
    pub fn routes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.routes.iter().map(|(s, p)| (s.as_str(), p.name()))
    }

    /// Source name → plugin name, as agents' events are routed.
    pub fn owners(&self) -> Owners {
        Owners(
            self.routes
                .iter()
                .map(|(source, p)| (source.clone(), p.name().to_owned()))
                .collect(),
        )
    }

    /// The sources plugins declare that route to another plugin (`[routes]` gave them to it):
    /// the status updates agents send about such a plugin's events with that source go to the
    /// other plugin. A plugin that a route names serves what its routes give it, and its
    /// declarations are not held against it (a plugin registered at runtime, or a second copy of a
    /// plugin configured with a source of its own): what it really sends is checked as it sends it.
    pub fn foreign_declared(&self) -> Vec<Foreign> {
        let mut foreign = Vec::new();
        for p in self
            .plugins
            .iter()
            .filter(|p| !self.routed_explicitly.contains(p.name()))
        {
            for source in p.sources() {
                if let Some((_, owner)) = route_of(&self.routes, source)
                    && owner.name() != p.name()
                {
                    foreign.push(Foreign {
                        plugin: p.name().to_owned(),
                        source: source.clone(),
                        routed_to: owner.name().to_owned(),
                    });
                }
            }
        }
        foreign
    }

    /// Every plugin serving `data_type`, for resync.
    pub fn serving<'a>(&'a self, data_type: &DataType) -> impl Iterator<Item = &'a Arc<dyn Source>> + use<'a> {
        let data_type = data_type.clone();
        self.plugins.iter().filter(move |p| p.data_types().contains(&data_type))
    }

    /// The plugin for an agent → hub event: the owner of its `originalsource` (the exact name or
    /// a `name::` prefix), else the only plugin serving its data type.
    pub fn route(&self, event: &CloudEvent, data_type: &DataType) -> Result<&Arc<dyn Source>, RouteError> {
        let original = event.original_source().unwrap_or_default();
        if !original.is_empty() {
            let plugin = self.by_source(original).ok_or_else(|| RouteError::UnknownSource {
                data_type: data_type.to_string(),
                source_name: original.to_owned(),
            })?;
            if !plugin.data_types().contains(data_type) {
                return Err(RouteError::NotServed {
                    data_type: data_type.to_string(),
                    source_name: original.to_owned(),
                    plugin: plugin.name().to_owned(),
                });
            }
            return Ok(plugin);
        }
        let mut serving = self.serving(data_type);
        match (serving.next(), serving.next()) {
            (Some(only), None) => Ok(only),
            (None, _) => Err(RouteError::NoService(data_type.to_string())),
            (Some(a), Some(b)) => Err(RouteError::Ambiguous {
                data_type: data_type.to_string(),
                plugins: [a, b].into_iter().chain(serving).map(|p| p.name().to_owned()).collect(),
            }),
        }
    }

    fn by_source(&self, original: &str) -> Option<&Arc<dyn Source>> {
        route_of(&self.routes, original).map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, Vec<DataType>, Vec<String>);

    #[async_trait]
    impl Source for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn data_types(&self) -> &[DataType] {
            &self.1
        }
        fn sources(&self) -> &[String] {
            &self.2
        }
        async fn list(&self, _: &ListOptions) -> Result<Vec<CloudEvent>, Error> {
            Ok(vec![])
        }
        async fn handle(&self, _: &Identity, _: CloudEvent) -> Result<(), Error> {
            Ok(())
        }
    }

    fn dt(s: &str) -> DataType {
        DataType::parse(s).unwrap()
    }

    fn table() -> RoutingTable {
        let works = dt("io.open-cluster-management.works.v1alpha1.manifestbundles");
        let leases = dt("coordination.k8s.io.v1.leases");
        let plugins: Vec<Arc<dyn Source>> = vec![
            Arc::new(Named("kube-plugin", vec![works.clone(), leases], vec!["kube".into()])),
            Arc::new(Named("db", vec![works], vec![])),
        ];
        // kube is declared by its plugin; maestro is routed explicitly.
        let routes = [("maestro".to_owned(), "db".to_owned())].into();
        RoutingTable::new(plugins, &routes).unwrap()
    }

    fn event(original: Option<&str>) -> CloudEvent {
        let mut e = CloudEvent::new("1", "agent", "t");
        if let Some(o) = original {
            e.set_extension("originalsource", o);
        }
        e
    }

    #[test]
    fn original_source_routes_by_exact_name_or_prefix() {
        let r = table();
        let works = dt("io.open-cluster-management.works.v1alpha1.manifestbundles");
        assert_eq!(r.route(&event(Some("kube")), &works).unwrap().name(), "kube-plugin");
        assert_eq!(r.route(&event(Some("maestro::abc")), &works).unwrap().name(), "db");
        assert!(matches!(
            r.route(&event(Some("maestrox")), &works),
            Err(RouteError::UnknownSource { .. })
        ));
        // Shorter than any prefix: no slicing, no panic.
        assert!(matches!(
            r.route(&event(Some("ab")), &works),
            Err(RouteError::UnknownSource { .. })
        ));
        assert!(matches!(
            r.route(&event(Some("::")), &works),
            Err(RouteError::UnknownSource { .. })
        ));
    }

    #[test]
    fn a_source_declared_twice_without_a_route_is_an_error() {
        let plugins: Vec<Arc<dyn Source>> = vec![
            Arc::new(Named("a", vec![], vec!["kube".into()])),
            Arc::new(Named("b", vec![], vec!["kube".into()])),
        ];
        assert!(matches!(
            RoutingTable::new(plugins.clone(), &BTreeMap::new()),
            Err(RoutingTableError::ClaimedTwice { .. })
        ));
        let routes = [("kube".to_owned(), "b".to_owned())].into();
        let r = RoutingTable::new(plugins, &routes).unwrap();
        assert_eq!(r.routes().collect::<Vec<_>>(), [("kube", "b")]);
    }

    #[test]
    fn a_declared_source_routed_to_another_plugin_is_foreign_unless_routes_name_the_plugin() {
        let works = dt("io.open-cluster-management.works.v1alpha1.manifestbundles");
        let copy =
            |name: &'static str| Arc::new(Named(name, vec![works.clone()], vec!["hello".into()])) as Arc<dyn Source>;
        // A second copy of a plugin, its source routed to the first: the copy's status updates
        // would go to the first.
        let routes = [("hello".to_owned(), "hello".to_owned())].into();
        let r = RoutingTable::new(vec![copy("hello"), copy("hello-2")], &routes).unwrap();
        assert_eq!(
            r.foreign_declared(),
            [Foreign {
                plugin: "hello-2".into(),
                source: "hello".into(),
                routed_to: "hello".into(),
            }]
        );
        assert_eq!(r.owners().owner("hello"), Some(("hello", "hello")));
        assert_eq!(r.owners().owner("hello::x"), Some(("hello", "hello")));
        assert_eq!(r.owners().owner("hello-2"), None);
        // The copy routed a source of its own: it serves what its routes give it.
        let routes = [
            ("hello".to_owned(), "hello".to_owned()),
            ("hello-2".to_owned(), "hello-2".to_owned()),
        ]
        .into();
        let r = RoutingTable::new(vec![copy("hello"), copy("hello-2")], &routes).unwrap();
        assert_eq!(r.foreign_declared(), []);
        assert_eq!(r.owners().owner("hello-2"), Some(("hello-2", "hello-2")));
        // Sources declared by their own plugin, or routed to it: nothing foreign.
        assert_eq!(table().foreign_declared(), []);
    }

    #[test]
    fn without_original_source_the_only_server_of_the_type_answers() {
        let r = table();
        let leases = dt("coordination.k8s.io.v1.leases");
        assert_eq!(r.route(&event(Some("")), &leases).unwrap().name(), "kube-plugin");
        assert_eq!(r.route(&event(None), &leases).unwrap().name(), "kube-plugin");
        let works = dt("io.open-cluster-management.works.v1alpha1.manifestbundles");
        assert!(matches!(
            r.route(&event(None), &works),
            Err(RouteError::Ambiguous { .. })
        ));
        assert!(matches!(
            r.route(&event(None), &dt("a.v1.nothing")),
            Err(RouteError::NoService(_))
        ));
        assert!(matches!(
            r.route(&event(Some("maestro")), &leases),
            Err(RouteError::NotServed { .. })
        ));
        assert_eq!(r.serving(&works).count(), 2);
    }
}
