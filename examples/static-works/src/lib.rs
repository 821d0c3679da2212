//! `static-works`: a third-party-style conductor source. It serves ManifestWorks declared in its
//! configuration, one table per cluster, under the source name `static`:
//!
//! ```toml
//! [plugins.static.config.clusters.cluster1.web]
//! generation = 1
//! manifests = [{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "web", namespace = "default" } }]
//! ```
//!
//! - resync (`list`) answers with the cluster's works;
//! - status updates from work agents are kept in the host's `kv` (shared by all instances and
//!   kept across reloads) and logged, an identical one as unchanged; a status for a work it does
//!   not serve is `NotFound`;
//! - with `announce_after_ms`, a timer emits every work once to the subscribed agents.
//!
//! The same source builds as a WebAssembly component (`--target wasm32-wasip2`) and as a native
//! library (`cdylib`); `export_plugin!` picks the form.

use std::collections::BTreeMap;

use conductor_plugin_sdk::ocm::{EventType, OcmExtensions, SubResource, actions, codec, data_types};
use conductor_plugin_sdk::{
    CloudEvent, Description, Host, HostEvent, Identity, ListOptions, Plugin, SDK_VERSION, SourceError,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The source name agents echo back as `originalsource`.
pub const SOURCE: &str = "static";
const ANNOUNCE: &str = "announce";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    clusters: BTreeMap<String, BTreeMap<String, WorkConfig>>,
    #[serde(default)]
    announce_after_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkConfig {
    #[serde(default = "one")]
    generation: i64,
    manifests: Vec<Value>,
}

fn one() -> i64 {
    1
}

/// One served ManifestWork.
struct Work {
    cluster: String,
    name: String,
    uid: String,
    generation: i64,
    manifests: Vec<Value>,
}

impl Work {
    fn manifest_work(&self) -> Value {
        json!({
            "apiVersion": "work.open-cluster-management.io/v1",
            "kind": "ManifestWork",
            "metadata": {
                "name": self.name, "namespace": self.cluster, "uid": self.uid,
                "generation": self.generation, "labels": { "app.kubernetes.io/managed-by": "static-works" },
            },
            "spec": { "workload": { "manifests": self.manifests } },
        })
    }

    fn event(&self, action: &str) -> Result<CloudEvent, SourceError> {
        codec::manifest_work_event(&self.manifest_work(), SOURCE, action)
            .map_err(|e| SourceError::Internal(e.to_string()))
    }
}

pub struct StaticWorks {
    works: Vec<Work>,
}

impl StaticWorks {
    fn by_id(&self, cluster: &str, id: &str) -> Option<&Work> {
        self.works.iter().find(|w| w.cluster == cluster && w.uid == id)
    }
}

/// A stable UID for a work: the same on every instance and every restart.
fn uid_of(cluster: &str, name: &str) -> String {
    // FNV-1a over "cluster/name", spread into a UUID-shaped string.
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in cluster.bytes().chain([b'/']).chain(name.bytes()) {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    let x = format!("{h:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

impl Plugin for StaticWorks {
    fn describe() -> Description {
        Description {
            name: "static-works".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            sdk_version: SDK_VERSION.to_owned(),
            sources: vec![SOURCE.to_owned()],
            data_types: vec![data_types::MANIFEST_BUNDLES.to_owned()],
            capabilities: ["emit", "log", "timer", "kv", "config"].map(str::to_owned).to_vec(),
        }
    }

    fn init(host: &Host, config: Value) -> Result<Self, SourceError> {
        let config: Config =
            serde_json::from_value(config).map_err(|e| SourceError::Invalid(format!("config: {e}")))?;
        let works = config
            .clusters
            .into_iter()
            .flat_map(|(cluster, works)| {
                works.into_iter().map(move |(name, w)| Work {
                    uid: uid_of(&cluster, &name),
                    cluster: cluster.clone(),
                    name,
                    generation: w.generation,
                    manifests: w.manifests,
                })
            })
            .collect::<Vec<_>>();
        host.debug(&format!("serving {} works", works.len()));
        if let Some(ms) = config.announce_after_ms {
            host.set_timer(ANNOUNCE, ms, false);
        }
        Ok(Self { works })
    }

    fn list(&mut self, _host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, SourceError> {
        if options.data_type != data_types::MANIFEST_BUNDLES {
            return Ok(vec![]);
        }
        self.works
            .iter()
            .filter(|w| w.cluster == options.cluster_name)
            .map(|w| w.event(actions::CREATE_REQUEST))
            .collect()
    }

    fn handle(&mut self, host: &Host, _identity: Identity, event: CloudEvent) -> Result<(), SourceError> {
        let ty = EventType::parse(&event.ty).map_err(|e| SourceError::Invalid(e.to_string()))?;
        if ty.subresource != SubResource::Status || ty.action != actions::UPDATE_REQUEST {
            return Err(SourceError::Invalid(format!(
                "static-works is read-only: {} is not supported",
                event.ty
            )));
        }
        let cluster = event.cluster_name().map_err(|e| SourceError::Invalid(e.to_string()))?;
        let id = event.resource_id().map_err(|e| SourceError::Invalid(e.to_string()))?;
        let work = self
            .by_id(cluster, id)
            .ok_or_else(|| SourceError::NotFound(format!("manifestworks {id} not found in {cluster}")))?;
        let status = event.data.clone().unwrap_or_default();
        let key = format!("status/{cluster}/{}", work.name);
        if host.kv_get(&key).as_deref() == Some(status.as_slice()) {
            host.info(&format!("status of {cluster}/{} unchanged", work.name));
            return Ok(());
        }
        host.kv_set(&key, &status);
        host.info(&format!(
            "status of {cluster}/{} stored ({} bytes)",
            work.name,
            status.len()
        ));
        Ok(())
    }

    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), SourceError> {
        if matches!(event, HostEvent::Timer(name) if name == ANNOUNCE) {
            let mut reached = 0;
            for w in &self.works {
                reached += host
                    .emit(&w.event(actions::UPDATE_REQUEST)?)
                    .map_err(SourceError::Internal)?;
            }
            host.info(&format!(
                "announced {} works to {reached} subscribers",
                self.works.len()
            ));
        }
        Ok(())
    }
}

conductor_plugin_sdk::export_plugin!(StaticWorks);

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::fakes::FakeHost;

    fn config() -> Value {
        json!({
            "announce_after_ms": 10,
            "clusters": {
                "cluster1": { "web": { "generation": 2, "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}] } },
                "cluster2": { "db": { "manifests": [] } },
            }
        })
    }

    #[test]
    fn lists_the_works_of_a_cluster() {
        let fake = FakeHost::new(config());
        let host = fake.host();
        let mut p = StaticWorks::init(&host, config()).unwrap();
        let listed = p
            .list(
                &host,
                ListOptions {
                    cluster_name: "cluster1".into(),
                    data_type: data_types::MANIFEST_BUNDLES.into(),
                },
            )
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].source, SOURCE);
        assert_eq!(listed[0].resource_version(), Ok(2));
        assert_eq!(listed[0].resource_id(), Ok(uid_of("cluster1", "web").as_str()));
        assert_eq!(fake.recorded().timers.get(ANNOUNCE), Some(&(10, false)));
    }

    #[test]
    fn stores_status_and_refuses_unknown_works() {
        let fake = FakeHost::new(config());
        let host = fake.host();
        let mut p = StaticWorks::init(&host, config()).unwrap();
        let mut status = CloudEvent::new(
            "1",
            "cluster1-work-agent",
            format!("{}.status.update_request", data_types::MANIFEST_BUNDLES),
        );
        status.set_extension("clustername", "cluster1");
        status.set_extension("resourceid", uid_of("cluster1", "web"));
        status.data = Some(br#"{"conditions":[]}"#.to_vec());
        p.handle(&host, Identity::anonymous(), status.clone()).unwrap();
        assert_eq!(
            fake.recorded().kv.get("status/cluster1/web").unwrap(),
            br#"{"conditions":[]}"#
        );
        p.handle(&host, Identity::anonymous(), status.clone()).unwrap();
        assert!(fake.recorded().logs.last().unwrap().1.ends_with("unchanged"));
        status.set_extension("resourceid", "nope");
        assert!(matches!(
            p.handle(&host, Identity::anonymous(), status),
            Err(SourceError::NotFound(_))
        ));
    }

    #[test]
    fn the_announce_timer_emits_every_work() {
        let fake = FakeHost::new(config());
        let host = fake.host();
        let mut p = StaticWorks::init(&host, config()).unwrap();
        p.on_event(&host, HostEvent::Timer(ANNOUNCE.into())).unwrap();
        let emitted = fake.take_emitted();
        assert_eq!(emitted.len(), 2);
        assert!(emitted.iter().all(|e| e.ty.ends_with(".spec.update_request")));
    }
}
