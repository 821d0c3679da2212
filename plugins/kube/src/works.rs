//! ManifestWorks (`docs/protocol.md` §6.3, §7.3, §8): watched objects become spec events for
//! the work agent of their cluster, and the agent's status updates are written back.
//!
//! What the plugin last saw of each work is kept in `kv` ([`Seen`], by uid): whether a change is
//! one agents hear about (§7.3: labels or annotations changed, generation increased, deletion
//! started), and which cluster a uid belongs to.

use conductor_plugin_sdk::kube::Selector;
use conductor_plugin_sdk::ocm::{self, OcmExtensions, actions, codec};
use conductor_plugin_sdk::{CloudEvent, Error, Host};
use serde::{Deserialize, Serialize};
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
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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

/// A work appeared or changed: the spec event agents hear, if any.
pub fn applied(host: &Host, work: &Value) -> Result<Option<CloudEvent>, Error> {
    let Some((uid, now)) = Seen::of(work) else {
        return Ok(None);
    };
    let before = Seen::get(host, &uid);
    now.put(host, &uid)?;
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
        let data: Value = match event.data.as_deref() {
            Some(d) if !d.is_empty() => {
                serde_json::from_slice(d).map_err(|e| invalid(format!("the status is not JSON: {e}")))?
            }
            _ => return Err(invalid("it has no status".into())),
        };
        if !data.is_object() {
            return Err(invalid("the status is not a ManifestBundleStatus object".into()));
        }
        let conditions = data.get("conditions").cloned().unwrap_or(Value::Null);
        let manifests = data.get("resourceStatus").cloned().unwrap_or(Value::Null);
        if !(conditions.is_array() || conditions.is_null()) || !(manifests.is_array() || manifests.is_null()) {
            return Err(invalid("conditions and resourceStatus must be lists".into()));
        }
        let deleted = ocm::conditions::is_deleted(&data);
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

/// The work `update` is about, read fresh: the watch cache on the first try (`live` false), the
/// API server after a conflict. `None` when it does not exist.
fn find(host: &Host, update: &StatusUpdate, live: bool) -> Result<Option<Value>, Error> {
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
    let found = if live {
        host.kube().get(&works, Some(&update.cluster), &name)?
    } else {
        let fields = Selector::fields(format!("metadata.name={name}"));
        host.kube()
            .list(&works, Some(&update.cluster), &fields)?
            .into_iter()
            .next()
    };
    Ok(found.filter(|w| w["metadata"]["uid"] == update.uid.as_str()))
}

/// One attempt at a status update (§6.3) against `work`; a `Conflict` means the work changed
/// meanwhile.
fn apply(host: &Host, work: &Value, update: &StatusUpdate) -> Result<Outcome, Error> {
    let works = manifest_works();
    let meta = &work["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let finalizers: Vec<Value> = meta["finalizers"].as_array().cloned().unwrap_or_default();
    let has_finalizer = finalizers.iter().any(|f| f == CLEANUP_FINALIZER);
    let precondition = json!({"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]});

    // 1. The agent finished deleting: let the work go.
    if update.deleted {
        if !has_finalizer {
            return Ok(Outcome::FinalizerRemoved);
        }
        let rest: Vec<Value> = finalizers.into_iter().filter(|f| f != CLEANUP_FINALIZER).collect();
        let mut patch = json!({"metadata": precondition});
        patch["metadata"]["finalizers"] = Value::Array(rest);
        return match host.kube().patch(&works, Some(&update.cluster), name, &patch, None) {
            Ok(_) => Ok(Outcome::FinalizerRemoved),
            Err(e) if e.is_not_found() => Ok(Outcome::FinalizerRemoved),
            Err(e) => Err(e),
        };
    }
    // 2. Stale: the hub has a newer generation.
    if meta["generation"].as_i64().unwrap_or(0) > update.generation {
        return Ok(Outcome::Stale);
    }
    // 3. The finalizer first; its answer carries the resourceVersion the status patch needs.
    let mut precondition = precondition;
    if !has_finalizer {
        let mut with: Vec<Value> = finalizers;
        with.push(CLEANUP_FINALIZER.into());
        let mut patch = json!({"metadata": precondition});
        patch["metadata"]["finalizers"] = Value::Array(with);
        let patched = host.kube().patch(&works, Some(&update.cluster), name, &patch, None)?;
        precondition["resourceVersion"] = patched["metadata"]["resourceVersion"].clone();
    }
    // 4. The status, only if it changed.
    let status = json!({"conditions": update.conditions, "resourceStatus": {"manifests": update.manifests}});
    if work["status"]["conditions"] == status["conditions"]
        && work["status"]["resourceStatus"]["manifests"] == status["resourceStatus"]["manifests"]
    {
        return Ok(Outcome::Unchanged);
    }
    let patch = json!({"metadata": precondition, "status": status});
    host.kube()
        .patch(&works, Some(&update.cluster), name, &patch, Some("status"))?;
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
        match apply(host, &work, &update) {
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
        let created = applied(&host, &w).unwrap().unwrap();
        assert!(created.ty.ends_with(".spec.create_request"));
        assert_eq!(created.resource_version(), Ok(1));
        // A status-only change: nothing.
        let mut status_only = w.clone();
        status_only["status"] = json!({"conditions": [{"type": "Applied"}]});
        assert!(applied(&host, &status_only).unwrap().is_none());
        // A label, a new generation, a deletion: an update each.
        let mut relabelled = w.clone();
        relabelled["metadata"]["labels"]["app"] = "db".into();
        assert!(
            applied(&host, &relabelled)
                .unwrap()
                .unwrap()
                .ty
                .ends_with(".spec.update_request")
        );
        let mut newer = relabelled.clone();
        newer["metadata"]["generation"] = 2.into();
        assert_eq!(applied(&host, &newer).unwrap().unwrap().resource_version(), Ok(2));
        let mut deleting = newer.clone();
        deleting["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z".into();
        let e = applied(&host, &deleting).unwrap().unwrap();
        assert!(e.deletion_timestamp().is_some() && e.data.is_none());
        // Gone: a delete, with a deletion time even if the object had none.
        let gone = deleted(&host, &newer).unwrap().unwrap();
        assert!(gone.ty.ends_with(".spec.delete_request") && gone.deletion_timestamp().is_some());
        assert!(Seen::get(&host, gone.resource_id().unwrap()).is_none());
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
