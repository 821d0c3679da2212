//! `kind = "memory"`: an in-process source that keeps resources in memory, like a tiny API
//! server. Agents' spec requests create, update and delete resources; every change is emitted to
//! the subscribers as a spec event, as a watch would; status updates are stored. For development
//! and for testing the host without a backing store.
//!
//! ```toml
//! [plugins.demo]
//! kind = "memory"
//! config = { data_types = ["io.open-cluster-management.works.v1alpha1.manifestbundles"] }
//! ```
//!
//! `events` names CloudEvent files (the JSON format `conductor agent publish` reads) applied at
//! start, in order, as if an agent had published them: the default configuration gives `cluster1`
//! a work this way, so a watching agent gets one at once.

use std::path::{Path, PathBuf};
use std::{collections::BTreeMap, sync::Arc};

use async_trait::async_trait;
use conductor_plugin_sdk::ocm::{DataType, EventType, OcmExtensions, SubResource, actions, extensions};
use conductor_plugin_sdk::{CloudEvent, Error, Identity, ListOptions, Timestamp};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;

use crate::broker::EventSink;
use crate::routes::Source;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryConfig {
    data_types: Vec<String>,
    /// CloudEvent files applied at start, relative to the configuration file.
    #[serde(default)]
    events: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
struct Resource {
    name: String,
    version: i64,
    data: Value,
    deleting: Option<Timestamp>,
    status: Option<Value>,
}

type Key = (String, String); // (cluster, data type)

pub struct MemorySource {
    name: String,
    source: String,
    sources: Vec<String>,
    data_types: Vec<DataType>,
    resources: Mutex<BTreeMap<Key, BTreeMap<String, Resource>>>,
    sink: Arc<dyn EventSink>,
}

impl MemorySource {
    /// Builds the source from its `config` table and applies its `events` files (`resolve` makes
    /// their paths absolute); errors name the key under that table.
    pub fn new(
        name: &str,
        sources: &[String],
        config: &toml::Table,
        resolve: &dyn Fn(&Path) -> PathBuf,
        sink: Arc<dyn EventSink>,
    ) -> Result<Self, (String, String)> {
        let config: MemoryConfig = serde_path_to_error::deserialize(toml::Value::Table(config.clone()))
            .map_err(|e| (e.path().to_string(), e.into_inner().message().to_owned()))?;
        let data_types = config
            .data_types
            .iter()
            .enumerate()
            .map(|(i, s)| DataType::parse(s).map_err(|e| (format!("data_types[{i}]"), e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let memory = Self {
            name: name.to_owned(),
            // Events carry the first source routed here, so agents echo it back as originalsource.
            source: sources.first().cloned().unwrap_or_else(|| name.to_owned()),
            sources: sources.to_vec(),
            data_types,
            resources: Mutex::default(),
            sink,
        };
        for (i, path) in config.events.iter().enumerate() {
            let file = resolve(path);
            memory
                .apply_file(&file)
                .map_err(|reason| (format!("events[{i}]"), format!("{}: {reason}", file.display())))?;
        }
        Ok(memory)
    }

    /// Applies the CloudEvent in the JSON file at `path`, as if an agent had published it.
    fn apply_file(&self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let json: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
        let event = crate::agent::json::from_json(&json).map_err(|e| e.to_string())?;
        let ty = EventType::parse(&event.ty).map_err(|e| e.to_string())?;
        if !self.data_types.contains(&ty.data_type) {
            return Err(format!(
                "its data type {} is not among this source's data_types",
                ty.data_type
            ));
        }
        if let Some(e) = self.apply(&event).map_err(|e| e.to_string())? {
            self.emit(&e);
        }
        Ok(())
    }

    fn spec_event(&self, cluster: &str, dt: &DataType, id: &str, r: &Resource, action: &str) -> CloudEvent {
        let mut e = CloudEvent::new(
            uuid::Uuid::new_v4().to_string(),
            &self.source,
            dt.event_type(SubResource::Spec, action),
        );
        e.time = Some(chrono::Utc::now());
        e.set_extension(extensions::CLUSTER_NAME, cluster);
        e.set_extension(extensions::ORIGINAL_SOURCE, "");
        e.set_extension(extensions::RESOURCE_ID, id);
        e.set_resource_version(dt, r.version);
        let mut meta = serde_json::json!({ "name": r.name, "namespace": cluster, "uid": id, "generation": r.version });
        if let Some(t) = r.deleting {
            e.set_extension(extensions::DELETION_TIMESTAMP, t);
            meta["deletionTimestamp"] = Value::from(conductor_plugin_sdk::event::format_timestamp(&t));
        } else if e.set_json_data(&r.data).is_err() {
            e.clear_data();
        }
        e.set_extension(extensions::METADATA, meta.to_string());
        e
    }

    fn emit(&self, event: &CloudEvent) {
        if let Err(e) = self.sink.emit(&self.name, event) {
            tracing::warn!(plugin = %self.name, error = %e, "event not delivered");
        }
    }
}

fn required_id(event: &CloudEvent) -> Result<String, Error> {
    event
        .resource_id()
        .map(str::to_owned)
        .map_err(|e| Error::Invalid(e.to_string()))
}

fn json_data(event: &CloudEvent) -> Result<Value, Error> {
    match event.data.as_deref() {
        None | Some([]) => Err(Error::Invalid(format!("event {} has no data", event.id))),
        Some(_) => event
            .data_json()
            .map_err(|e| Error::Invalid(format!("event {} data is not JSON: {e}", event.id))),
    }
}

fn existing<'a>(
    resources: &'a mut BTreeMap<String, Resource>,
    dt: &DataType,
    id: &str,
) -> Result<&'a mut Resource, Error> {
    resources
        .get_mut(id)
        .ok_or_else(|| Error::NotFound(format!("{} {id} not found", dt.resource)))
}

#[async_trait]
impl Source for MemorySource {
    fn name(&self) -> &str {
        &self.name
    }

    fn data_types(&self) -> &[DataType] {
        &self.data_types
    }

    fn sources(&self) -> &[String] {
        &self.sources
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CloudEvent>, Error> {
        let dt = DataType::parse(&options.data_type).map_err(|e| Error::Invalid(e.to_string()))?;
        let key = (options.cluster_name.clone(), options.data_type.clone());
        let resources = self.resources.lock();
        Ok(resources
            .get(&key)
            .into_iter()
            .flatten()
            .map(|(id, r)| self.spec_event(&key.0, &dt, id, r, actions::CREATE_REQUEST))
            .collect())
    }

    async fn handle(&self, _identity: &Identity, event: CloudEvent) -> Result<(), Error> {
        if let Some(e) = self.apply(&event)? {
            self.emit(&e);
        }
        Ok(())
    }
}

impl MemorySource {
    /// Applies a request to the resources held; returns the spec event it makes, if any.
    fn apply(&self, event: &CloudEvent) -> Result<Option<CloudEvent>, Error> {
        let ty = EventType::parse(&event.ty).map_err(|e| Error::Invalid(e.to_string()))?;
        let dt = ty.data_type.clone();
        let cluster = event
            .cluster_name()
            .map_err(|e| Error::Invalid(e.to_string()))?
            .to_owned();
        let key = (cluster.clone(), dt.to_string());
        let mut all = self.resources.lock();
        let resources = all.entry(key).or_default();
        let emitted = match (ty.subresource, ty.action.as_str()) {
            (SubResource::Spec, actions::CREATE_REQUEST) => {
                let data = json_data(event)?;
                let id = event
                    .resource_id()
                    .map(str::to_owned)
                    .unwrap_or_else(|_| uuid::Uuid::new_v4().to_string());
                let name = data["metadata"]["name"].as_str().unwrap_or(&id).to_owned();
                if resources.contains_key(&id) {
                    return Err(Error::from(
                        conductor_plugin_sdk::Status::failure(
                            409,
                            "AlreadyExists",
                            format!("{} {name:?} already exists", dt.resource),
                        )
                        .with_details(conductor_plugin_sdk::StatusDetails {
                            name,
                            group: dt.group.clone(),
                            kind: dt.resource.clone(),
                            uid: id,
                        }),
                    ));
                }
                let r = Resource {
                    name,
                    version: 1,
                    data,
                    deleting: None,
                    status: None,
                };
                let e = self.spec_event(&cluster, &dt, &id, &r, actions::CREATE_REQUEST);
                resources.insert(id, r);
                Some(e)
            }
            (SubResource::Spec, actions::UPDATE_REQUEST) => {
                let id = required_id(event)?;
                let data = json_data(event)?;
                let r = existing(resources, &dt, &id)?;
                r.version += 1;
                r.data = data;
                Some(self.spec_event(&cluster, &dt, &id, r, actions::UPDATE_REQUEST))
            }
            (SubResource::Spec, actions::DELETE_REQUEST) => {
                let id = required_id(event)?;
                let r = existing(resources, &dt, &id)?;
                r.version += 1;
                r.deleting.get_or_insert_with(chrono::Utc::now);
                Some(self.spec_event(&cluster, &dt, &id, r, actions::UPDATE_REQUEST))
            }
            (SubResource::Status, actions::UPDATE_REQUEST) => {
                let id = required_id(event)?;
                let status = json_data(event)?;
                let Some(r) = resources.get_mut(&id) else {
                    // As OCM's work service (docs/protocol.md §6.3): a status for a
                    // resource the source no longer holds is answered OK. An error would
                    // make the agent retry it forever, e.g. the last `Deleted` status it
                    // sends again after the final delete.
                    tracing::debug!(plugin = %self.name, cluster, resource = %id, "status of an unknown resource ignored");
                    return Ok(None);
                };
                if r.deleting.is_some() && conductor_plugin_sdk::ocm::conditions::is_deleted(&status) {
                    // The agent finished deleting: the resource is gone for good.
                    let r = resources.remove(&id).expect("present above");
                    Some(self.spec_event(&cluster, &dt, &id, &r, actions::DELETE_REQUEST))
                } else {
                    r.status = Some(status);
                    None
                }
            }
            (sub, action) => {
                return Err(Error::Invalid(format!(
                    "unsupported action {action:?} on {sub} for {dt}"
                )));
            }
        };
        Ok(emitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<CloudEvent>>);
    impl EventSink for Recorder {
        fn emit(&self, _from: &str, event: &CloudEvent) -> Result<usize, crate::broker::FanoutError> {
            self.0.lock().push(event.clone());
            Ok(1)
        }
    }

    fn source(sink: Arc<Recorder>) -> MemorySource {
        let config: toml::Table = toml::from_str(&format!("data_types = [\"{MANIFEST_BUNDLES}\"]")).unwrap();
        MemorySource::new("demo", &["memory".into()], &config, &Path::to_path_buf, sink).unwrap()
    }

    fn request(sub: &str, action: &str, id: Option<&str>, data: Option<Value>) -> CloudEvent {
        let mut e = CloudEvent::new("x", "agent", format!("{MANIFEST_BUNDLES}.{sub}.{action}"));
        e.set_extension("clustername", "c1");
        if let Some(id) = id {
            e.set_extension("resourceid", id);
        }
        if let Some(d) = data {
            e.set_json_data(&d).unwrap();
        }
        e
    }

    /// What the source lists for cluster `c1`'s manifest bundles.
    async fn works_of_c1(s: &MemorySource) -> Vec<CloudEvent> {
        let options = ListOptions {
            cluster_name: "c1".into(),
            data_type: MANIFEST_BUNDLES.into(),
        };
        s.list(&options).await.unwrap()
    }

    #[tokio::test]
    async fn lifecycle_emits_spec_events_and_lists_resources() {
        let sink = Arc::new(Recorder::default());
        let s = source(sink.clone());
        let id = Identity::anonymous();
        let work = serde_json::json!({"manifests": [], "metadata": {"name": "w1"}});
        s.handle(&id, request("spec", "create_request", Some("u1"), Some(work.clone())))
            .await
            .unwrap();
        let err = s
            .handle(&id, request("spec", "create_request", Some("u1"), Some(work)))
            .await
            .unwrap_err();
        assert_eq!(err.to_status().reason, "AlreadyExists");
        s.handle(&id, request("spec", "delete_request", Some("u1"), None))
            .await
            .unwrap();
        let emitted = sink.0.lock().clone();
        assert_eq!(emitted.len(), 2);
        assert_eq!(emitted[0].source, "memory");
        assert_eq!(emitted[0].resource_version(), Ok(1));
        assert!(emitted[1].deletion_timestamp().is_some() && emitted[1].data.is_none());
        let listed = works_of_c1(&s).await;
        assert_eq!(listed.len(), 1);
        let deleted = serde_json::json!({"conditions": [{"type": "Deleted", "status": "True"}]});
        s.handle(&id, request("status", "update_request", Some("u1"), Some(deleted)))
            .await
            .unwrap();
        // The agent reports Deleted again for the work it re-added on the final delete: OK,
        // nothing emitted (OCM's work service answers the same).
        s.handle(
            &id,
            request("status", "update_request", Some("u1"), Some(deleted_again())),
        )
        .await
        .unwrap();
        assert_eq!(sink.0.lock().len(), 3, "the final delete, and nothing after it");
        let err = s
            .handle(
                &id,
                request("spec", "update_request", Some("u1"), Some(serde_json::json!({}))),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_status().code,
            404,
            "spec requests for unknown resources still fail"
        );
    }

    fn deleted_again() -> Value {
        serde_json::json!({"conditions": [{"type": "Deleted", "status": "True"}]})
    }

    /// A source whose `events` lists `listed`, after writing `files` into `dir`.
    fn seeded(dir: &Path, files: &[(&str, String)], listed: &[&str]) -> Result<MemorySource, (String, String)> {
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let config: toml::Table =
            toml::from_str(&format!("data_types = [\"{MANIFEST_BUNDLES}\"]\nevents = {listed:?}")).unwrap();
        MemorySource::new(
            "demo",
            &["memory".into()],
            &config,
            &|p| dir.join(p),
            Arc::new(Recorder::default()),
        )
    }

    fn work_file(id: &str, name: &str) -> String {
        serde_json::json!({
            "specversion": "1.0", "id": id, "source": "test",
            "type": format!("{MANIFEST_BUNDLES}.spec.create_request"),
            "clustername": "c1", "resourceid": id,
            "data": {"metadata": {"name": name}, "manifests": []},
        })
        .to_string()
    }

    #[tokio::test]
    async fn events_files_are_applied_at_start_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            ("a.json", work_file("u1", "first")),
            ("b.json", work_file("u2", "second")),
        ];
        let s = seeded(dir.path(), &files, &["a.json", "b.json"]).unwrap();
        let listed = works_of_c1(&s).await;
        let names: Vec<String> = listed
            .iter()
            .map(|e| {
                e.data_json::<Value>().unwrap()["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(names, ["first", "second"]);
        assert!(listed.iter().all(|e| e.source == "memory"));
    }

    #[test]
    fn a_bad_events_file_names_its_key_its_path_and_why() {
        let misspelt = work_file("u2", "w").replace("\"clustername\"", "\"ce-clustername\"");
        let cases = [
            ("missing.json", None, "No such file"),
            ("text.json", Some("not json".to_owned()), "not JSON"),
            ("misspelt.json", Some(misspelt), "\"clustername\""),
            (
                "elsewhere.json",
                Some(work_file("u2", "w").replace("manifestbundles", "manifestworks")),
                "not among this source's data_types",
            ),
            ("twice.json", Some(work_file("u1", "w")), "already exists"),
        ];
        for (name, text, reason) in cases {
            let dir = tempfile::tempdir().unwrap();
            let mut files = vec![("ok.json", work_file("u1", "w"))];
            files.extend(text.map(|t| (name, t)));
            let (key, message) = seeded(dir.path(), &files, &["ok.json", name])
                .err()
                .unwrap_or_else(|| panic!("{name} was accepted"));
            assert_eq!(key, "events[1]", "{name}");
            assert!(message.contains(name) && message.contains(reason), "{name}: {message}");
        }
    }

    #[test]
    fn bad_config_names_the_key() {
        let config: toml::Table = toml::from_str("data_types = [\"nodots\"]").unwrap();
        let err = MemorySource::new("demo", &[], &config, &Path::to_path_buf, Arc::new(Recorder::default()))
            .err()
            .unwrap();
        assert_eq!(err.0, "data_types[0]");
        let config: toml::Table = toml::from_str("datatypes = []").unwrap();
        assert!(MemorySource::new("demo", &[], &config, &Path::to_path_buf, Arc::new(Recorder::default())).is_err());
    }
}
