//! A watch's cache: the objects its last list and the changes since left, by namespace and name.
//!
//! Each object is kept as the API server sent it ([`super::object`]) and shared with the change
//! that delivers it, not copied (kube-runtime's reflector `Writer` stores a deep copy of every
//! object it is given, which on a watch of ManifestWorks cost about 5 % of the delivery path).
//! While the watcher lists again, the cache goes on serving what it held; the new list is gathered
//! beside it and takes its place when the list is done, and what the new list no longer has is
//! reported as deleted.

use std::collections::HashMap;
use std::sync::Arc;

use conductor_plugin_sdk::kube::Change;
use kube::runtime::watcher;
use parking_lot::RwLock;

use super::object::Object;
use super::status_only::only_status_changed;

/// An object's place: its namespace (empty for a cluster-scoped one) and name.
type Key = (String, String);

type Objects = HashMap<Key, Arc<Object>>;

fn key_of(object: &Object) -> Key {
    (
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

/// What a change does to the cache's objects, for the plugin to hear of.
pub type Delivery = Vec<(Change, Arc<Object>)>;

/// The objects of one watch.
#[derive(Default)]
pub struct Cache {
    objects: RwLock<Objects>,
}

impl Cache {
    /// The object `name` in `namespace` (empty for a cluster-scoped one).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Object>> {
        self.objects
            .read()
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// The objects for which `keep` holds (taken under the lock, printed by the caller after it).
    pub fn matching(&self, keep: impl Fn(&Object) -> bool) -> Vec<Arc<Object>> {
        self.objects.read().values().filter(|o| keep(o)).cloned().collect()
    }
}

/// A new list being gathered: the objects it brought so far, and those of the cache it has not
/// brought (yet).
#[derive(Default)]
struct Listing {
    objects: Objects,
    vanished: Objects,
}

/// Keeps a [`Cache`] as a watcher's events change it.
pub struct Filler {
    cache: Arc<Cache>,
    listing: Option<Listing>,
    skip_status_only: bool,
}

impl Filler {
    /// Fills `cache`; with `skip_status_only`, a change of an object's status alone is kept but
    /// not delivered ([`only_status_changed`]).
    pub fn new(cache: Arc<Cache>, skip_status_only: bool) -> Self {
        Self {
            cache,
            listing: None,
            skip_status_only,
        }
    }

    /// Applies `event` to the cache; returns what the plugin is to hear of it.
    pub fn apply(&mut self, event: watcher::Event<Object>) -> Delivery {
        match event {
            watcher::Event::Init => {
                self.listing = Some(Listing {
                    objects: Objects::new(),
                    vanished: self.cache.objects.read().clone(),
                });
                Vec::new()
            }
            watcher::Event::InitApply(object) => {
                let object = Arc::new(object);
                let key = key_of(&object);
                match self.listing.as_mut() {
                    Some(listing) => {
                        listing.vanished.remove(&key);
                        listing.objects.insert(key, Arc::clone(&object));
                    }
                    // A watcher always says it lists before it does; should it not, the object
                    // is kept all the same.
                    None => {
                        self.cache.objects.write().insert(key, Arc::clone(&object));
                    }
                }
                vec![(Change::Applied, object)]
            }
            watcher::Event::InitDone => {
                let Listing { objects, vanished } = self.listing.take().unwrap_or_default();
                *self.cache.objects.write() = objects;
                vanished.into_values().map(|gone| (Change::Deleted, gone)).collect()
            }
            watcher::Event::Apply(object) => {
                let object = Arc::new(object);
                let before = self.cache.objects.write().insert(key_of(&object), Arc::clone(&object));
                if self.skip_status_only && before.is_some_and(|b| only_status_changed(&b, &object)) {
                    return Vec::new();
                }
                vec![(Change::Applied, object)]
            }
            watcher::Event::Delete(object) => {
                let object = Arc::new(object);
                self.cache.objects.write().remove(&key_of(&object));
                vec![(Change::Deleted, object)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn work(name: &str, generation: i64, status: &str) -> Object {
        Object::from_json(
            &json!({
                "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                "metadata": {"name": name, "namespace": "cluster1", "generation": generation,
                             "resourceVersion": format!("{generation}{status}")},
                "spec": {"workload": {"manifests": []}},
                "status": {"conditions": [{"type": status}]},
            })
            .to_string(),
        )
        .unwrap()
    }

    /// (change, name, generation) of what a delivery carries, sorted.
    fn told(delivery: Delivery) -> Vec<(Change, String, i64)> {
        let mut told: Vec<_> = delivery
            .into_iter()
            .map(|(change, o)| (change, o.metadata.name.clone().unwrap(), o.metadata.generation.unwrap()))
            .collect();
        told.sort_by(|a, b| a.1.cmp(&b.1));
        told
    }

    /// A cache and its filler after a first list of `names` (each at generation 1, `Applied`).
    fn listed(skip_status_only: bool, names: &[&str]) -> (Arc<Cache>, Filler) {
        let cache = Arc::new(Cache::default());
        let mut filler = Filler::new(Arc::clone(&cache), skip_status_only);
        filler.apply(watcher::Event::Init);
        for name in names {
            filler.apply(watcher::Event::InitApply(work(name, 1, "Applied")));
        }
        filler.apply(watcher::Event::InitDone);
        (cache, filler)
    }

    fn generation(cache: &Cache, name: &str) -> Option<i64> {
        cache.get("cluster1", name).and_then(|o| o.metadata.generation)
    }

    #[test]
    fn a_list_then_changes_fill_the_cache_and_reach_the_plugin() {
        let cache = Arc::new(Cache::default());
        let mut filler = Filler::new(Arc::clone(&cache), false);
        assert!(filler.apply(watcher::Event::Init).is_empty());
        assert_eq!(
            told(filler.apply(watcher::Event::InitApply(work("a", 1, "Applied")))),
            [(Change::Applied, "a".into(), 1)]
        );
        // The list is served only once it is whole.
        assert_eq!(generation(&cache, "a"), None);
        assert!(filler.apply(watcher::Event::InitDone).is_empty());
        assert_eq!(generation(&cache, "a"), Some(1));

        let delivered = filler.apply(watcher::Event::Apply(work("a", 2, "Applied")));
        assert_eq!(told(delivered.clone()), [(Change::Applied, "a".into(), 2)]);
        // The object delivered is the one the cache holds, not a copy of it.
        assert!(Arc::ptr_eq(&delivered[0].1, &cache.get("cluster1", "a").unwrap()));
        // Without the option, a status alone is delivered too.
        assert_eq!(
            told(filler.apply(watcher::Event::Apply(work("a", 2, "Available")))).len(),
            1
        );

        assert_eq!(
            told(filler.apply(watcher::Event::Delete(work("a", 2, "Available")))),
            [(Change::Deleted, "a".into(), 2)]
        );
        assert_eq!(generation(&cache, "a"), None);
    }

    #[test]
    fn listing_again_serves_the_old_objects_until_done_and_reports_the_vanished_deleted() {
        let (cache, mut filler) = listed(false, &["a", "b"]);

        filler.apply(watcher::Event::Init);
        filler.apply(watcher::Event::InitApply(work("a", 3, "Applied")));
        filler.apply(watcher::Event::InitApply(work("c", 1, "Applied")));
        assert_eq!(
            generation(&cache, "a"),
            Some(1),
            "the old list is served while the new one comes"
        );
        assert_eq!(generation(&cache, "b"), Some(1));
        assert_eq!(
            told(filler.apply(watcher::Event::InitDone)),
            [(Change::Deleted, "b".into(), 1)]
        );
        assert_eq!(generation(&cache, "a"), Some(3));
        assert_eq!(generation(&cache, "b"), None);
        assert_eq!(generation(&cache, "c"), Some(1));
        assert_eq!(cache.matching(|_| true).len(), 2);
    }

    #[test]
    fn a_watch_that_skips_status_only_changes_keeps_them_without_delivering_them() {
        let (cache, mut filler) = listed(true, &["a"]);
        assert!(
            filler
                .apply(watcher::Event::Apply(work("a", 1, "Available")))
                .is_empty()
        );
        let kept = cache.get("cluster1", "a").unwrap();
        let kept: serde_json::Value = serde_json::from_str(kept.json()).unwrap();
        assert_eq!(kept["status"]["conditions"][0]["type"], "Available");
        // A new generation is delivered.
        assert_eq!(
            told(filler.apply(watcher::Event::Apply(work("a", 2, "Available")))).len(),
            1
        );
        // An object the cache did not hold is delivered whatever changed.
        assert_eq!(
            told(filler.apply(watcher::Event::Apply(work("b", 1, "Applied")))).len(),
            1
        );
    }
}
