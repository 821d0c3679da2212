//! The `kube` source plugin: what OCM's own gRPC server serves, from the hub's Kubernetes API —
//! ManifestWorks for the work agents ([`works`]), and cluster registration for the registration
//! agents ([`registration`]): ManagedClusters, CSRs, leases, add-ons, events and token requests
//! (`docs/protocol.md` §3.2–§3.4, §6.3, §7.3, §8).
//!
//! Everything goes through the host's `kube` capability: `start` watches the kinds agents
//! subscribe to (the host keeps the caches resync is answered from), watched changes become spec
//! events for the agents of their cluster, and agents' requests become writes. Several replicas
//! each watch and serve their own agents; writes that lose a race are tried again against the
//! object as it now is.
//!
//! Built as a WebAssembly component (the shipped form) or a native library.

pub mod registration;
pub mod resources;
pub mod works;

use conductor_plugin_sdk::kube::{Change, Selector, WatchOptions};
use conductor_plugin_sdk::ocm::{EventType, SubResource, actions, data_types};
use conductor_plugin_sdk::{
    Capability, CloudEvent, Description, Error, Host, HostEvent, Identity, ListOptions, MetricKind, Plugin,
};
use serde::Deserialize;

use resources::{manifest_works, watched_registration};

/// The source name agents see on kube resources (and echo back as `originalsource`).
pub const SOURCE: &str = "kube";

/// Every data type the kube source serves.
pub const DATA_TYPES: [&str; 8] = [
    data_types::MANIFEST_BUNDLES,
    data_types::MANAGED_CLUSTERS,
    data_types::CSRS,
    data_types::LEASES,
    data_types::EVENTS,
    data_types::ADDONS_V1ALPHA1,
    data_types::ADDONS_V1BETA1,
    data_types::TOKEN_REQUESTS,
];

/// `[plugins.kube.config]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How many times a write that lost a race (409 Conflict) is tried against a fresh object.
    #[serde(default = "default_attempts")]
    write_attempts: u32,
}

fn default_attempts() -> u32 {
    5
}

pub struct Kube {
    write_attempts: u32,
}

impl Plugin for Kube {
    type Config = Config;

    fn describe() -> Description {
        Description::new("kube", env!("CARGO_PKG_VERSION"))
            .sources([SOURCE])
            .data_types(DATA_TYPES)
            .capabilities([
                Capability::Emit,
                Capability::Log,
                Capability::Kv,
                Capability::Kube,
                Capability::Metrics,
            ])
            .metric(
                registration::JOINED_CLUSTERS,
                MetricKind::Gauge,
                "ManagedClusters whose condition ManagedClusterJoined is True.",
                &[],
            )
    }

    fn check(config: &Config) -> Result<(), Error> {
        if config.write_attempts == 0 {
            return Err(Error::Invalid("config.write_attempts: must be at least 1".into()));
        }
        Ok(())
    }

    fn init(_host: &Host, config: Config) -> Result<Self, Error> {
        Ok(Self {
            write_attempts: config.write_attempts,
        })
    }

    /// Once per plugin: a watch on every kind agents subscribe to. Agents hear of no status
    /// change of a ManifestWork ([`works::action`]), and the plugin writes one for each status
    /// update: its watch of works skips them, so the plugin is not handed the echo of each write.
    fn start(&mut self, host: &Host) -> Result<(), Error> {
        let kube = host.kube();
        let skip_status = WatchOptions { skip_status_only: true };
        kube.watch_with(&manifest_works(), None, &Selector::default(), skip_status)
            .map_err(|e| e.context("cannot watch ManifestWorks"))?;
        for w in watched_registration() {
            kube.watch(&w.resource, None, &w.selector)
                .map_err(|e| e.context(format!("cannot watch {}", w.resource.name())))?;
        }
        Ok(())
    }

    fn list(&mut self, host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, Error> {
        match options.data_type.as_str() {
            data_types::MANIFEST_BUNDLES => works::list(host, &options.cluster_name),
            other => registration::list(host, other, &options.cluster_name),
        }
    }

    fn handle(&mut self, host: &Host, identity: Identity, event: CloudEvent) -> Result<(), Error> {
        let ty = EventType::parse(&event.ty).map_err(|e| Error::Invalid(e.to_string()))?;
        if ty.data_type.to_string() != data_types::MANIFEST_BUNDLES {
            return registration::handle(host, &identity, &event, &ty);
        }
        if ty.subresource != SubResource::Status || ty.action != actions::UPDATE_REQUEST {
            return Err(Error::Invalid(format!(
                "unsupported action {} on {} for manifestworks",
                ty.action, ty.subresource
            )));
        }
        let outcome = works::update_status(host, &event, self.write_attempts)?;
        host.debug(&format!("status of manifestwork {}: {outcome:?}", event.id));
        Ok(())
    }

    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), Error> {
        let HostEvent::Watch(watch) = event else { return Ok(()) };
        let deleted = watch.change == Change::Deleted;
        let spec = if watch.resource == resources::MANIFEST_WORKS {
            if deleted {
                works::deleted(host, &watch.object()?)?
            } else {
                // The hot path: decoded once, as far as it is read.
                works::applied_text(host, &watch.object)?
            }
        } else {
            let object = watch.object()?;
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            match resources::data_type_of(&watch.resource, api_version) {
                Some(data_type) => registration::watched(host, data_type, &object, deleted)?,
                None => None,
            }
        };
        if let Some(spec) = spec {
            host.emit(&spec)?;
        }
        Ok(())
    }
}

conductor_plugin_sdk::export_plugin!(Kube);

#[cfg(test)]
mod tests {
    use conductor_plugin_sdk::fakes::FakeHost;
    use conductor_plugin_sdk::kube::WatchEvent;
    use serde_json::json;

    use super::*;

    #[test]
    fn start_watches_what_agents_subscribe_to() {
        let fake = FakeHost::new();
        let host = fake.host();
        let mut plugin = Kube { write_attempts: 5 };
        plugin.start(&host).unwrap();
        let recorded = fake.recorded();
        let watched: Vec<String> = recorded
            .watches
            .iter()
            .zip(&recorded.watch_options)
            .map(|((r, ns, s), o)| {
                let skips = if o.skip_status_only { " skips status-only" } else { "" };
                format!("{}@{} {ns:?} {:?}{skips}", r.name(), r.version, s.labels)
            })
            .collect();
        // Only works skip status changes: the others' statuses are news to agents (a CSR's
        // certificate, a cluster's conditions).
        assert_eq!(
            watched,
            [
                "manifestworks.work.open-cluster-management.io@v1 None None skips status-only",
                "managedclusters.cluster.open-cluster-management.io@v1 None None",
                "certificatesigningrequests.certificates.k8s.io@v1 None Some(\"open-cluster-management.io/cluster-name\")",
                "leases.coordination.k8s.io@v1 None Some(\"open-cluster-management.io/cluster-name\")",
                "managedclusteraddons.addon.open-cluster-management.io@v1alpha1 None None",
                "managedclusteraddons.addon.open-cluster-management.io@v1beta1 None None",
            ]
        );
    }

    #[test]
    fn watched_objects_reach_their_clusters_agents_and_resync_lists_them() {
        let fake = FakeHost::new();
        let host = fake.host();
        let mut plugin = Kube { write_attempts: 5 };
        let work = fake.put_object(
            &manifest_works(),
            json!({"metadata": {"name": "w1", "namespace": "cluster1"}, "spec": {"workload": {"manifests": []}}}),
        );
        let lease = fake.put_object(
            &resources::leases(),
            json!({"metadata": {"name": "l", "namespace": "cluster1", "labels": {"open-cluster-management.io/cluster-name": "cluster1"}}}),
        );
        for (resource, object) in [(manifest_works(), &work), (resources::leases(), &lease)] {
            let event = HostEvent::Watch(WatchEvent {
                resource: resource.name(),
                change: Change::Applied,
                object: object.to_string(),
            });
            plugin.on_event(&host, event).unwrap();
        }
        let emitted = fake.take_emitted();
        assert_eq!(emitted.len(), 2);
        assert!(emitted.iter().all(|e| e.source == SOURCE));
        let options = |data_type: &str| ListOptions {
            cluster_name: "cluster1".into(),
            data_type: data_type.into(),
        };
        assert_eq!(
            plugin.list(&host, options(data_types::MANIFEST_BUNDLES)).unwrap().len(),
            1
        );
        assert_eq!(plugin.list(&host, options(data_types::LEASES)).unwrap().len(), 1);
        assert!(
            plugin
                .list(&host, options(data_types::TOKEN_REQUESTS))
                .unwrap()
                .is_empty()
        );
    }
}
