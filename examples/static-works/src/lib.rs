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
//!   kept across reloads) and logged, an identical one as unchanged; a status that is not a
//!   ManifestBundleStatus is refused with a clear error; a status for a work it does not serve
//!   (any more) is answered OK and ignored, as OCM's own work service does, so an agent finishing
//!   a deletion does not retry forever;
//! - with `announce_after_ms`, a timer (set once, in `start`) emits every work once to the
//!   subscribed agents.
//!
//! The same source builds as a WebAssembly component (`--target wasm32-wasip2`) and as a native
//! library (`cdylib`); `export_plugin!` picks the form.

use std::collections::BTreeMap;

use std::time::Duration;

use conductor_plugin_sdk::ocm::{EventType, OcmExtensions, SubResource, actions, codec, data_types};
use conductor_plugin_sdk::{
    Capability, CloudEvent, Description, Error, Host, HostEvent, Identity, ListOptions, Plugin,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The source name agents echo back as `originalsource`.
pub const SOURCE: &str = "static";
const ANNOUNCE: &str = "announce";

/// `[plugins.<name>.config]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
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

    fn event(&self, action: &str) -> Result<CloudEvent, Error> {
        codec::manifest_work_event(&self.manifest_work(), SOURCE, action).map_err(|e| Error::Internal(e.to_string()))
    }
}

pub struct StaticWorks {
    works: Vec<Work>,
    announce_after: Option<Duration>,
}

impl StaticWorks {
    fn by_id(&self, cluster: &str, id: &str) -> Option<&Work> {
        self.works.iter().find(|w| w.cluster == cluster && w.uid == id)
    }
}

/// The namespace of the works' UIDs (a UUID of our own, fixed: python-works and js-works use it
/// too).
const WORKS_NAMESPACE: uuid::Uuid = uuid::uuid!("e20657af-4e0b-4517-81e3-7b0c5931e4e4");

/// A stable UID for a work: the same on every instance, every restart, and in every language —
/// the name-based UUID (version 5) of "cluster/name" in [`WORKS_NAMESPACE`].
fn uid_of(cluster: &str, name: &str) -> String {
    uuid::Uuid::new_v5(&WORKS_NAMESPACE, format!("{cluster}/{name}").as_bytes()).to_string()
}

impl Plugin for StaticWorks {
    type Config = Config;

    fn describe() -> Description {
        Description::new("static-works", env!("CARGO_PKG_VERSION"))
            .sources([SOURCE])
            .data_types([data_types::MANIFEST_BUNDLES])
            .capabilities([Capability::Emit, Capability::Log, Capability::Timer, Capability::Kv])
    }

    fn check(config: &Config) -> Result<(), Error> {
        for (cluster, works) in &config.clusters {
            for (name, work) in works {
                if work.generation < 1 {
                    return Err(Error::Invalid(format!(
                        "clusters.{cluster}.{name}.generation: must be at least 1"
                    )));
                }
            }
        }
        Ok(())
    }

    fn init(host: &Host, config: Config) -> Result<Self, Error> {
        let announce_after = config.announce_after_ms.map(Duration::from_millis);
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
        Ok(Self { works, announce_after })
    }

    fn start(&mut self, host: &Host) -> Result<(), Error> {
        if let Some(after) = self.announce_after {
            host.set_timer(ANNOUNCE, after, false)?;
        }
        Ok(())
    }

    fn list(&mut self, _host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, Error> {
        if options.data_type != data_types::MANIFEST_BUNDLES {
            return Ok(vec![]);
        }
        self.works
            .iter()
            .filter(|w| w.cluster == options.cluster_name)
            .map(|w| w.event(actions::CREATE_REQUEST))
            .collect()
    }

    fn handle(&mut self, host: &Host, _identity: Identity, event: CloudEvent) -> Result<(), Error> {
        let ty = EventType::parse(&event.ty).map_err(|e| Error::Invalid(e.to_string()))?;
        if ty.subresource != SubResource::Status || ty.action != actions::UPDATE_REQUEST {
            return Err(Error::Invalid(format!(
                "static-works is read-only: {} is not supported",
                event.ty
            )));
        }
        let cluster = event.cluster_name().map_err(|e| Error::Invalid(e.to_string()))?;
        let id = event.resource_id().map_err(|e| Error::Invalid(e.to_string()))?;
        let Some(work) = self.by_id(cluster, id) else {
            // As OCM's work service: a status for a work no longer served is answered OK.
            host.info(&format!("status of unknown work {id} in {cluster} ignored"));
            return Ok(());
        };
        let status = event.data.clone().unwrap_or_default();
        let parsed: Value = serde_json::from_slice(&status)
            .map_err(|e| Error::Invalid(format!("status of {cluster}/{} is not JSON: {e}", work.name)))?;
        if !parsed.is_object() || !(parsed["conditions"].is_array() || parsed["conditions"].is_null()) {
            return Err(Error::Invalid(format!(
                "status of {cluster}/{} is not a ManifestBundleStatus (want an object with a `conditions` list)",
                work.name
            )));
        }
        let key = format!("status/{cluster}/{}", work.name);
        if host.kv_get(&key).as_deref() == Some(status.as_slice()) {
            host.info(&format!("status of {cluster}/{} unchanged", work.name));
            return Ok(());
        }
        host.kv_set(&key, &status)?;
        host.info(&format!(
            "status of {cluster}/{} stored ({} bytes)",
            work.name,
            status.len()
        ));
        Ok(())
    }

    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), Error> {
        if matches!(event, HostEvent::Timer(name) if name == ANNOUNCE) {
            let mut reached = 0;
            for w in &self.works {
                reached += host.emit(&w.event(actions::UPDATE_REQUEST)?)?;
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

    fn config() -> Config {
        conductor_plugin_sdk::plugin::parse_config(&json!({
            "announce_after_ms": 10,
            "clusters": {
                "cluster1": { "web": { "generation": 2, "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}] } },
                "cluster2": { "db": { "manifests": [] } },
            }
        })
        .to_string())
        .unwrap()
    }

    #[test]
    fn check_refuses_a_generation_below_one() {
        let bad: Config = conductor_plugin_sdk::plugin::parse_config(
            r#"{"clusters": {"c1": {"w": {"generation": 0, "manifests": []}}}}"#,
        )
        .unwrap();
        let err = StaticWorks::check(&bad).unwrap_err();
        assert!(err.to_string().contains("clusters.c1.w.generation"), "{err}");
    }

    #[test]
    fn work_uids_are_the_uuid5_every_language_derives() {
        // CPython: str(uuid.uuid5(uuid.UUID("e20657af-4e0b-4517-81e3-7b0c5931e4e4"), "cluster1/web")),
        // as python-works and js-works compute it with their SDK's uuid5.
        assert_eq!(uid_of("cluster1", "web"), "41c88e70-99b2-599a-8b94-e770d3a8540f");
        assert_eq!(uid_of("cluster2", "db"), "461ee096-6995-56d3-8329-76778dad7bf4");
    }

    #[test]
    fn lists_the_works_of_a_cluster() {
        let fake = FakeHost::new();
        let host = fake.host();
        let mut p = StaticWorks::init(&host, config()).unwrap();
        p.start(&host).unwrap();
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
        let fake = FakeHost::new();
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
        status.data = Some(br#"["not", "a", "status"]"#.to_vec());
        let err = p.handle(&host, Identity::anonymous(), status.clone()).unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(m) if m.contains("not a ManifestBundleStatus")),
            "{err}"
        );
        status.set_extension("resourceid", "nope");
        p.handle(&host, Identity::anonymous(), status.clone()).unwrap();
        assert!(fake.recorded().logs.last().unwrap().1.contains("unknown work nope"));

        // Once the host refuses to keep more (the plugin's kv limits), the agent hears so and
        // sends the status again later; nothing half-stored.
        fake.refuse_writes(true);
        status.set_extension("resourceid", uid_of("cluster1", "web"));
        status.data = Some(br#"{"conditions":[{"type":"Applied"}]}"#.to_vec());
        let err = p.handle(&host, Identity::anonymous(), status).unwrap_err();
        assert!(matches!(&err, Error::Unavailable(m) if m.contains("refused")), "{err}");
        assert_eq!(
            fake.recorded().kv.get("status/cluster1/web").unwrap(),
            br#"{"conditions":[]}"#
        );
    }

    #[test]
    fn the_announce_timer_emits_every_work() {
        let fake = FakeHost::new();
        let host = fake.host();
        let mut p = StaticWorks::init(&host, config()).unwrap();
        p.on_event(&host, HostEvent::Timer(ANNOUNCE.into())).unwrap();
        let emitted = fake.take_emitted();
        assert_eq!(emitted.len(), 2);
        assert!(emitted.iter().all(|e| e.ty.ends_with(".spec.update_request")));
    }
}
