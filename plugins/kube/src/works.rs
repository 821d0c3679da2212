//! ManifestWorks (`docs/protocol.md` §6.3, §7.3, §8): watched objects become spec events for
//! the work agent of their cluster, and the agent's status updates are written back.
//!
//! What the plugin last saw of each work is kept in `kv` ([`Seen`], by uid): whether a change is
//! one agents hear about (§7.3: labels or annotations changed, generation increased, deletion
//! started), and which cluster a uid belongs to.

use std::borrow::Cow;

use conductor_plugin_sdk::kube::Selector;
use conductor_plugin_sdk::ocm::{self, DataType, OcmExtensions, SubResource, actions, codec, data_types, extensions};
use conductor_plugin_sdk::{CloudEvent, Error, Host};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::SOURCE;
use crate::resources::manifest_works;

/// The finalizer the hub keeps on a work until its agent reports it deleted.
pub const CLEANUP_FINALIZER: &str = "cluster.open-cluster-management.io/manifest-work-cleanup";

/// What the plugin last saw of a work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub namespace: String,
    pub name: String,
    pub generation: i64,
    /// A fingerprint of its labels and annotations.
    pub meta: u64,
    pub deleting: bool,
}

fn key(uid: &str) -> String {
    format!("work/{uid}")
}

fn fingerprint(work: &Value) -> u64 {
    let text = format!("{}|{}", work["metadata"]["labels"], work["metadata"]["annotations"]);
    fnv(0xcbf2_9ce4_8422_2325, text.as_bytes())
}

/// FNV-1a of `bytes`, from `h`.
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The labels and annotations of a work as JSON text (`null` when absent), fingerprinted as
/// [`fingerprint`] does the parsed work: the host's text of a map is what `Value` prints.
fn fingerprint_text(labels: Option<&RawValue>, annotations: Option<&RawValue>) -> u64 {
    let h = fnv(0xcbf2_9ce4_8422_2325, labels.map_or("null", RawValue::get).as_bytes());
    let h = fnv(h, b"|");
    fnv(h, annotations.map_or("null", RawValue::get).as_bytes())
}

/// A watched work as the host hands it over (JSON text), decoded once and only as far as the
/// plugin reads it: the metadata's fields it decides on, and the metadata and the parts of the
/// spec agents receive kept as the text they are, to be copied into the event as they are.
#[derive(Deserialize)]
struct WorkText<'a> {
    #[serde(borrow)]
    metadata: &'a RawValue,
    #[serde(borrow, default)]
    spec: Option<SpecText<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaText<'a> {
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(borrow, default)]
    labels: Option<&'a RawValue>,
    #[serde(borrow, default)]
    annotations: Option<&'a RawValue>,
    #[serde(borrow, default)]
    deletion_timestamp: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecText<'a> {
    #[serde(borrow, default)]
    workload: Option<WorkloadText<'a>>,
    #[serde(borrow, default)]
    delete_option: Option<&'a RawValue>,
    #[serde(borrow, default)]
    manifest_configs: Option<&'a RawValue>,
    #[serde(borrow, default)]
    executor: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WorkloadText<'a> {
    #[serde(borrow, default)]
    manifests: Option<&'a RawValue>,
}

/// A watched work, decoded: what [`Seen`] holds and what its spec event carries.
struct Watched<'a> {
    uid: Cow<'a, str>,
    seen: Seen,
    /// The metadata as JSON text.
    metadata: &'a str,
    annotations: Option<&'a RawValue>,
    deletion_timestamp: Option<Cow<'a, str>>,
    spec: Option<SpecText<'a>>,
}

impl<'a> Watched<'a> {
    /// `None` when the text is not a work the plugin can read this way (no uid, namespace or
    /// name, or a field of another type than Kubernetes gives it): the caller falls back to the
    /// parsed object.
    fn decode(text: &'a str) -> Option<Self> {
        let work: WorkText<'a> = serde_json::from_str(text).ok()?;
        let meta: MetaText<'a> = serde_json::from_str(work.metadata.get()).ok()?;
        Some(Self {
            seen: Seen {
                namespace: meta.namespace?.into_owned(),
                name: meta.name?.into_owned(),
                generation: meta.generation.unwrap_or(0),
                meta: fingerprint_text(meta.labels, meta.annotations),
                deleting: meta.deletion_timestamp.is_some(),
            },
            uid: meta.uid?,
            metadata: work.metadata.get(),
            annotations: meta.annotations,
            deletion_timestamp: meta.deletion_timestamp,
            spec: work.spec,
        })
    }

    /// The spec event agents hear, as [`codec::manifest_work_event`] makes it from the parsed
    /// work: the metadata and the bundle's parts copied as text rather than parsed and printed
    /// again.
    fn event(&self, action: &str) -> Result<CloudEvent, codec::CodecError> {
        const KIND: &str = "ManifestWork";
        let missing = |field| codec::CodecError::Missing { kind: KIND, field };
        if self.uid.is_empty() {
            return Err(missing("metadata.uid"));
        }
        if self.seen.namespace.is_empty() {
            return Err(missing("metadata.namespace"));
        }
        let data_type = DataType::parse(data_types::MANIFEST_BUNDLES).map_err(|e| codec::CodecError::Invalid {
            field: "data type",
            reason: e.to_string(),
        })?;
        let mut e = CloudEvent::new(
            uuid::Uuid::new_v4().to_string(),
            SOURCE,
            data_type.event_type(SubResource::Spec, action),
        );
        e.time = Some(chrono::Utc::now());
        e.set_extension(extensions::ORIGINAL_SOURCE, "");
        e.set_extension(extensions::CLUSTER_NAME, self.seen.namespace.as_str());
        e.set_extension(extensions::RESOURCE_ID, &*self.uid);
        e.set_resource_version(&data_type, self.seen.generation);
        e.set_extension(extensions::METADATA, self.metadata);
        e.set_extension(extensions::LOG_TRACING, log_tracing(self.annotations)?);
        if let Some(t) = self.deletion_timestamp.as_deref().filter(|t| !t.is_empty()) {
            let t = chrono::DateTime::parse_from_rfc3339(t).map_err(|err| codec::CodecError::Invalid {
                field: "metadata.deletionTimestamp",
                reason: err.to_string(),
            })?;
            e.set_extension(extensions::DELETION_TIMESTAMP, t.with_timezone(&chrono::Utc));
            return Ok(e);
        }
        // The ManifestBundle, its keys in the order a parsed map prints them.
        let spec = self.spec.as_ref();
        let manifests = spec
            .and_then(|s| s.workload.as_ref())
            .and_then(|w| w.manifests)
            .map_or("null", RawValue::get);
        let mut data = String::with_capacity(manifests.len() + 64);
        data.push('{');
        for (key, value) in [
            ("deleteOption", spec.and_then(|s| s.delete_option)),
            ("executer", spec.and_then(|s| s.executor)),
            ("manifestConfigs", spec.and_then(|s| s.manifest_configs)),
        ] {
            if let Some(value) = value {
                data.push('"');
                data.push_str(key);
                data.push_str("\":");
                data.push_str(value.get());
                data.push(',');
            }
        }
        data.push_str("\"manifests\":");
        data.push_str(manifests);
        data.push('}');
        e.data = Some(data.into_bytes());
        e.data_content_type = Some("application/json".to_owned());
        Ok(e)
    }
}

/// `logtracing`: the work's annotations under `logging.open-cluster-management.io/`, as a JSON
/// object (empty when there are none).
fn log_tracing(annotations: Option<&RawValue>) -> Result<String, codec::CodecError> {
    const PREFIX: &str = "logging.open-cluster-management.io/";
    let Some(annotations) = annotations.filter(|a| a.get().contains(PREFIX)) else {
        return Ok("{}".to_owned());
    };
    let all: serde_json::Map<String, Value> =
        serde_json::from_str(annotations.get()).map_err(|e| codec::CodecError::Invalid {
            field: "metadata.annotations",
            reason: e.to_string(),
        })?;
    let tracing: serde_json::Map<String, Value> = all.into_iter().filter(|(k, _)| k.starts_with(PREFIX)).collect();
    Ok(Value::Object(tracing).to_string())
}

impl Seen {
    pub fn of(work: &Value) -> Option<(String, Self)> {
        let meta = &work["metadata"];
        Some((
            meta["uid"].as_str()?.to_owned(),
            Self {
                namespace: meta["namespace"].as_str()?.to_owned(),
                name: meta["name"].as_str()?.to_owned(),
                generation: meta["generation"].as_i64().unwrap_or(0),
                meta: fingerprint(work),
                deleting: !meta["deletionTimestamp"].is_null(),
            },
        ))
    }

    pub fn get(host: &Host, uid: &str) -> Option<Self> {
        host.kv_get(&key(uid)).and_then(|b| serde_json::from_slice(&b).ok())
    }

    fn put(&self, host: &Host, uid: &str) -> Result<(), Error> {
        let b = serde_json::to_vec(self).map_err(|e| Error::Internal(format!("work {uid}: {e}")))?;
        host.kv_set(&key(uid), &b)
    }
}

/// The action agents hear for a work that is now `now`, after `before` (§7.3), or none for a
/// change they do not hear about (a status update, say).
pub fn action(before: Option<&Seen>, now: &Seen) -> Option<&'static str> {
    match before {
        None => Some(actions::CREATE_REQUEST),
        Some(b) if now.generation > b.generation || now.meta != b.meta || (now.deleting && !b.deleting) => {
            Some(actions::UPDATE_REQUEST)
        }
        Some(_) => None,
    }
}

/// A work appeared or changed (its JSON text, as watched): the spec event agents hear, if any.
pub fn applied_text(host: &Host, text: &str) -> Result<Option<CloudEvent>, Error> {
    let Some(work) = Watched::decode(text) else {
        let work: Value =
            serde_json::from_str(text).map_err(|e| Error::Invalid(format!("watched work is not JSON: {e}")))?;
        return applied(host, &work);
    };
    let before = Seen::get(host, &work.uid);
    if before.as_ref() != Some(&work.seen) {
        work.seen.put(host, &work.uid)?;
    }
    match action(before.as_ref(), &work.seen) {
        Some(action) => work
            .event(action)
            .map(Some)
            .map_err(|e| Error::Internal(format!("manifestwork {}/{}: {e}", work.seen.namespace, work.seen.name))),
        None => Ok(None),
    }
}

/// A work appeared or changed: the spec event agents hear, if any.
pub fn applied(host: &Host, work: &Value) -> Result<Option<CloudEvent>, Error> {
    let Some((uid, now)) = Seen::of(work) else {
        return Ok(None);
    };
    let before = Seen::get(host, &uid);
    if before.as_ref() != Some(&now) {
        now.put(host, &uid)?;
    }
    match action(before.as_ref(), &now) {
        Some(action) => codec::manifest_work_event(work, SOURCE, action)
            .map(Some)
            .map_err(|e| Error::Internal(format!("manifestwork {}/{}: {e}", now.namespace, now.name))),
        None => Ok(None),
    }
}

/// A work is gone: the delete agents hear, with a deletion time (now, if the object had none).
pub fn deleted(host: &Host, work: &Value) -> Result<Option<CloudEvent>, Error> {
    let Some(uid) = work["metadata"]["uid"].as_str() else {
        return Ok(None);
    };
    host.kv_delete(&key(uid));
    let mut work = work.clone();
    if work["metadata"]["deletionTimestamp"].is_null() {
        work["metadata"]["deletionTimestamp"] = chrono::Utc::now()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            .into();
    }
    codec::manifest_work_event(&work, SOURCE, actions::DELETE_REQUEST)
        .map(Some)
        .map_err(|e| Error::Internal(format!("manifestwork {uid}: {e}")))
}

/// Every work of `cluster`, as spec events (resync): from the host's watch cache.
pub fn list(host: &Host, cluster: &str) -> Result<Vec<CloudEvent>, Error> {
    host.kube()
        .list(&manifest_works(), Some(cluster), &Selector::default())?
        .iter()
        .map(|work| {
            codec::manifest_work_event(work, SOURCE, actions::CREATE_REQUEST)
                .map_err(|e| Error::Internal(format!("manifestwork in {cluster}: {e}")))
        })
        .collect()
}

/// An agent's status update, decoded (§8.2, §8.5).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    pub cluster: String,
    pub uid: String,
    /// The generation the agent applied.
    pub generation: i64,
    /// The name the agent knows the work by, if it sent its metadata.
    pub name: Option<String>,
    pub conditions: Value,
    pub manifests: Value,
    pub deleted: bool,
}

impl StatusUpdate {
    /// Reads a `manifestbundles.status.update_request`; what is missing or malformed is an
    /// `Invalid` error naming it.
    pub fn decode(event: &CloudEvent) -> Result<Self, Error> {
        let invalid = |what: String| Error::Invalid(format!("status update {}: {what}", event.id));
        let cluster = event.cluster_name().map_err(|e| invalid(e.to_string()))?.to_owned();
        let uid = event.resource_id().map_err(|e| invalid(e.to_string()))?.to_owned();
        let generation = event.resource_version().map_err(|e| invalid(e.to_string()))?;
        event
            .extension_str(conductor_plugin_sdk::ocm::extensions::SEQUENCE_ID)
            .map_err(|e| invalid(e.to_string()))?;
        let mut data: Value = match event.data.as_deref() {
            Some(d) if !d.is_empty() => {
                serde_json::from_slice(d).map_err(|e| invalid(format!("the status is not JSON: {e}")))?
            }
            _ => return Err(invalid("it has no status".into())),
        };
        if !data.is_object() {
            return Err(invalid("the status is not a ManifestBundleStatus object".into()));
        }
        let deleted = ocm::conditions::is_deleted(&data);
        let conditions = data.get_mut("conditions").map(Value::take).unwrap_or(Value::Null);
        let manifests = data.get_mut("resourceStatus").map(Value::take).unwrap_or(Value::Null);
        if !(conditions.is_array() || conditions.is_null()) || !(manifests.is_array() || manifests.is_null()) {
            return Err(invalid("conditions and resourceStatus must be lists".into()));
        }
        let name = event
            .metadata_json()
            .and_then(|m| serde_json::from_str::<Value>(m).ok())
            .and_then(|m| m["name"].as_str().map(str::to_owned));
        Ok(Self {
            cluster,
            uid,
            generation,
            name,
            conditions,
            manifests,
            deleted,
        })
    }
}

/// What a status update came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No such work (gone already): answered OK, as OCM's work service does.
    Unknown,
    /// The agent finished deleting: the cleanup finalizer was removed.
    FinalizerRemoved,
    /// For an older generation than the hub's: ignored.
    Stale,
    /// Identical to what the work holds: nothing written.
    Unchanged,
    /// Written.
    Written,
}

/// What a status update reads of its work: the metadata it decides and writes on, and the
/// status it compares with (the spec, the managed fields and the rest are skipped, not decoded).
#[derive(Debug, Deserialize)]
struct WorkForStatus {
    metadata: WorkMeta,
    #[serde(default)]
    status: Option<WorkStatus>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkStatus {
    #[serde(default)]
    conditions: Value,
    #[serde(default)]
    resource_status: Option<ResourceStatus>,
}

#[derive(Debug, Default, Deserialize)]
struct ResourceStatus {
    #[serde(default)]
    manifests: Value,
}

/// What a patch's answer is read for: the resourceVersion it left.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Written {
    metadata: WrittenMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WrittenMeta {
    #[serde(default)]
    resource_version: Option<String>,
}

/// The work `update` is about, read fresh: the watch cache on the first try (`live` false), the
/// API server after a conflict. `None` when it does not exist.
fn find(host: &Host, update: &StatusUpdate, live: bool) -> Result<Option<WorkForStatus>, Error> {
    let seen = Seen::get(host, &update.uid);
    if let Some(seen) = &seen
        && seen.namespace != update.cluster
    {
        return Err(Error::Invalid(format!(
            "manifestwork {} belongs to cluster {:?}, not {:?}",
            update.uid, seen.namespace, update.cluster
        )));
    }
    let Some(name) = seen.map(|s| s.name).or_else(|| update.name.clone()) else {
        return Ok(None);
    };
    let works = manifest_works();
    let found: Option<WorkForStatus> = if live {
        host.kube()
            .get(&works, Some(&update.cluster), &name)?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::Internal(format!("manifestwork {}/{name}: {e}", update.cluster)))?
    } else {
        let fields = Selector::fields(format!("metadata.name={name}"));
        host.kube()
            .list_as(&works, Some(&update.cluster), &fields)?
            .into_iter()
            .next()
    };
    Ok(found.filter(|w| w.metadata.uid.as_deref() == Some(update.uid.as_str())))
}

/// One attempt at a status update (§6.3) against `work`; a `Conflict` means the work changed
/// meanwhile.
fn apply(host: &Host, work: WorkForStatus, update: &StatusUpdate) -> Result<Outcome, Error> {
    let works = manifest_works();
    let meta = work.metadata;
    let name = meta.name.as_deref().unwrap_or_default();
    let finalizers: Vec<String> = meta.finalizers.unwrap_or_default();
    let has_finalizer = finalizers.iter().any(|f| f == CLEANUP_FINALIZER);
    let precondition = json!({"uid": meta.uid, "resourceVersion": meta.resource_version});

    // 1. The agent finished deleting: let the work go.
    if update.deleted {
        if !has_finalizer {
            return Ok(Outcome::FinalizerRemoved);
        }
        let rest: Vec<String> = finalizers.into_iter().filter(|f| f != CLEANUP_FINALIZER).collect();
        let mut patch = json!({"metadata": precondition});
        patch["metadata"]["finalizers"] = json!(rest);
        return match host
            .kube()
            .patch_as::<IgnoredAny>(&works, Some(&update.cluster), name, &patch, None)
        {
            Ok(_) => Ok(Outcome::FinalizerRemoved),
            Err(e) if e.is_not_found() => Ok(Outcome::FinalizerRemoved),
            Err(e) => Err(e),
        };
    }
    // 2. Stale: the hub has a newer generation.
    if meta.generation.unwrap_or(0) > update.generation {
        return Ok(Outcome::Stale);
    }
    // 3. The finalizer first; its answer carries the resourceVersion the status patch needs.
    let mut precondition = precondition;
    if !has_finalizer {
        let mut with = finalizers;
        with.push(CLEANUP_FINALIZER.into());
        let mut patch = json!({"metadata": precondition});
        patch["metadata"]["finalizers"] = json!(with);
        let patched: Written = host
            .kube()
            .patch_as(&works, Some(&update.cluster), name, &patch, None)?;
        precondition["resourceVersion"] = json!(patched.metadata.resource_version);
    }
    // 4. The status, only if it changed.
    let current = work.status.unwrap_or_default();
    let current_manifests = current.resource_status.map(|r| r.manifests).unwrap_or_default();
    if current.conditions == update.conditions && current_manifests == update.manifests {
        return Ok(Outcome::Unchanged);
    }
    let status = json!({"conditions": update.conditions, "resourceStatus": {"manifests": update.manifests}});
    let patch = json!({"metadata": precondition, "status": status});
    host.kube()
        .patch_as::<IgnoredAny>(&works, Some(&update.cluster), name, &patch, Some("status"))?;
    Ok(Outcome::Written)
}

/// Applies an agent's status update; a write that loses a race with another writer (another
/// replica, a user) is tried again against the work as it now is, up to `attempts` times.
pub fn update_status(host: &Host, event: &CloudEvent, attempts: u32) -> Result<Outcome, Error> {
    let update = StatusUpdate::decode(event)?;
    let mut live = false;
    let mut last = None;
    for _ in 0..attempts.max(1) {
        let Some(work) = find(host, &update, live)? else {
            return Ok(Outcome::Unknown);
        };
        match apply(host, work, &update) {
            Err(e) if e.is_conflict() => {
                live = true;
                last = Some(e);
            }
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| Error::Conflict(format!("manifestwork {} kept changing", update.uid))))
}

#[cfg(test)]
mod tests {
    use conductor_plugin_sdk::fakes::FakeHost;
    use conductor_plugin_sdk::ocm::data_types;

    use super::*;

    fn work(name: &str, namespace: &str) -> Value {
        json!({
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
            "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}]}},
        })
    }

    fn status(cluster: &str, uid: &str, generation: i32, conditions: Value) -> CloudEvent {
        let mut e = CloudEvent::new(
            "s1",
            "cluster1-work-agent",
            format!("{}.status.update_request", data_types::MANIFEST_BUNDLES),
        );
        e.set_extension("clustername", cluster);
        e.set_extension("resourceid", uid);
        e.set_extension(
            "resourceversion",
            conductor_plugin_sdk::ExtensionValue::Integer(generation),
        );
        e.set_extension("sequenceid", "1");
        e.set_extension("metadata", r#"{"name":"w1"}"#);
        e.set_json_data(&json!({"conditions": conditions, "resourceStatus": []}))
            .unwrap();
        e
    }

    #[test]
    fn only_the_changes_agents_hear_about_are_sent() {
        let fake = FakeHost::new();
        let host = fake.host();
        let w = fake.put_object(&manifest_works(), work("w1", "cluster1"));
        let created = applied_text(&host, &w.to_string()).unwrap().unwrap();
        assert!(created.ty.ends_with(".spec.create_request"));
        assert_eq!(created.resource_version(), Ok(1));
        // A status-only change: nothing.
        let mut status_only = w.clone();
        status_only["status"] = json!({"conditions": [{"type": "Applied"}]});
        assert!(applied_text(&host, &status_only.to_string()).unwrap().is_none());
        // A label, a new generation, a deletion: an update each.
        let mut relabelled = w.clone();
        relabelled["metadata"]["labels"]["app"] = "db".into();
        assert!(
            applied_text(&host, &relabelled.to_string())
                .unwrap()
                .unwrap()
                .ty
                .ends_with(".spec.update_request")
        );
        let mut newer = relabelled.clone();
        newer["metadata"]["generation"] = 2.into();
        assert_eq!(
            applied_text(&host, &newer.to_string())
                .unwrap()
                .unwrap()
                .resource_version(),
            Ok(2)
        );
        let mut deleting = newer.clone();
        deleting["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z".into();
        let e = applied_text(&host, &deleting.to_string()).unwrap().unwrap();
        assert!(e.deletion_timestamp().is_some() && e.data.is_none());
        // Gone: a delete, with a deletion time even if the object had none.
        let gone = deleted(&host, &newer).unwrap().unwrap();
        assert!(gone.ty.ends_with(".spec.delete_request") && gone.deletion_timestamp().is_some());
        assert!(Seen::get(&host, gone.resource_id().unwrap()).is_none());
    }

    /// An event with its fresh parts (id, time) taken out, to compare two encodings.
    fn comparable(mut e: CloudEvent) -> CloudEvent {
        e.id.clear();
        e.time = None;
        e
    }

    #[test]
    fn a_watched_work_decoded_once_is_the_event_the_parsed_work_makes() {
        let mut full = work("w1", "cluster1");
        full["metadata"]["uid"] = "u1".into();
        full["metadata"]["generation"] = 3.into();
        full["metadata"]["resourceVersion"] = "77".into();
        full["metadata"]["annotations"] = json!({"logging.open-cluster-management.io/trace": "t\"1", "other": "x"});
        full["metadata"]["managedFields"] = json!([{"manager": "m", "fieldsV1": {"f:spec": {}}}]);
        full["spec"]["deleteOption"] = json!({"propagationPolicy": "Orphan"});
        full["spec"]["manifestConfigs"] = json!([{"resourceIdentifier": {"name": "c"}}]);
        full["spec"]["executor"] = json!({"subject": {"type": "ServiceAccount"}});
        full["status"] = json!({"conditions": [{"type": "Applied", "status": "True"}]});
        let mut bare = work("w2", "cluster1");
        bare["metadata"]["uid"] = "u2".into();
        bare["metadata"]["labels"] = Value::Null;
        bare["spec"] = Value::Null;
        let mut deleting = full.clone();
        deleting["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z".into();
        for w in [full, bare, deleting] {
            let text = w.to_string();
            let watched = Watched::decode(&text).unwrap();
            let (uid, seen) = Seen::of(&w).unwrap();
            assert_eq!((watched.uid.as_ref(), &watched.seen), (uid.as_str(), &seen));
            for action in [actions::CREATE_REQUEST, actions::UPDATE_REQUEST] {
                let ours = comparable(watched.event(action).unwrap());
                let codec = comparable(codec::manifest_work_event(&w, SOURCE, action).unwrap());
                assert_eq!(ours, codec, "{text}");
            }
        }
        // Not a work this path reads: the parsed object's path decides (here: nothing to send).
        let fake = FakeHost::new();
        assert!(Watched::decode(r#"{"metadata": {"name": 1}}"#).is_none());
        assert!(
            applied_text(&fake.host(), r#"{"metadata": {"name": 1}}"#)
                .unwrap()
                .is_none()
        );
        assert!(applied_text(&fake.host(), "{oops").is_err());
    }

    #[test]
    fn a_status_update_adds_the_finalizer_then_writes_the_status_once() {
        let fake = FakeHost::new();
        let host = fake.host();
        let w = fake.put_object(&manifest_works(), work("w1", "cluster1"));
        let uid = w["metadata"]["uid"].as_str().unwrap();
        applied(&host, &w).unwrap();
        let applied_condition = json!([{"type": "Applied", "status": "True"}]);
        let e = status("cluster1", uid, 1, applied_condition.clone());
        assert_eq!(update_status(&host, &e, 3).unwrap(), Outcome::Written);
        let stored = fake.object(&manifest_works(), Some("cluster1"), "w1").unwrap();
        assert_eq!(stored["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
        assert_eq!(stored["status"]["conditions"], applied_condition);
        assert_eq!(stored["status"]["resourceStatus"]["manifests"], json!([]));
        // The same again: nothing written.
        assert_eq!(update_status(&host, &e, 3).unwrap(), Outcome::Unchanged);
        // The hub moved on (a new generation): a status for the older one is ignored.
        let works = manifest_works();
        let spec = json!({"spec": {"workload": {"manifests": []}}});
        host.kube().patch(&works, Some("cluster1"), "w1", &spec, None).unwrap();
        let old = status("cluster1", uid, 1, json!([{"type": "Available", "status": "True"}]));
        assert_eq!(update_status(&host, &old, 3).unwrap(), Outcome::Stale);
        // Unknown works and other clusters' works.
        assert_eq!(
            update_status(&host, &status("cluster1", "nope", 1, json!([])), 3).unwrap(),
            Outcome::Unknown
        );
        let err = update_status(&host, &status("cluster2", uid, 1, json!([])), 3).unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(m) if m.contains("belongs to cluster")),
            "{err}"
        );
    }

    #[test]
    fn a_deleted_report_removes_the_finalizer_and_later_ones_are_ok() {
        let fake = FakeHost::new();
        let host = fake.host();
        let mut w = work("w1", "cluster1");
        w["metadata"]["finalizers"] = json!(["other", CLEANUP_FINALIZER]);
        let w = fake.put_object(&manifest_works(), w);
        let uid = w["metadata"]["uid"].as_str().unwrap().to_owned();
        applied(&host, &w).unwrap();
        let done = status("cluster1", &uid, 1, json!([{"type": "Deleted", "status": "True"}]));
        assert_eq!(update_status(&host, &done, 3).unwrap(), Outcome::FinalizerRemoved);
        let stored = fake.object(&manifest_works(), Some("cluster1"), "w1").unwrap();
        assert_eq!(stored["metadata"]["finalizers"], json!(["other"]));
        // The object went away for good (the fake removes a deleting object without finalizers).
        fake.recorded().objects.clear();
        deleted(&host, &stored).unwrap();
        assert_eq!(update_status(&host, &done, 3).unwrap(), Outcome::Unknown);
    }

    #[test]
    fn malformed_updates_are_refused_naming_what_is_wrong() {
        let mut e = status("cluster1", "u", 1, json!([]));
        e.extensions.remove("resourceversion");
        assert!(
            StatusUpdate::decode(&e)
                .unwrap_err()
                .to_string()
                .contains("resourceversion")
        );
        let mut e = status("cluster1", "u", 1, json!([]));
        e.data = Some(b"{oops".to_vec());
        assert!(StatusUpdate::decode(&e).unwrap_err().to_string().contains("not JSON"));
        let mut e = status("cluster1", "u", 1, json!([]));
        e.set_json_data(&json!({"conditions": "no"})).unwrap();
        assert!(
            StatusUpdate::decode(&e)
                .unwrap_err()
                .to_string()
                .contains("must be lists")
        );
    }
}
