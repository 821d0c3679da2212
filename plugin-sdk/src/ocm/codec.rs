//! Hub → agent encoders: Kubernetes objects as the spec events OCM's hub services send
//! (`docs/protocol.md` §3.2, §7.3, §8.3). The golden vectors in `host/tests/golden/` hold
//! what the upstream Go encoders produce for the same objects.

use serde_json::{Map, Value};

use super::extensions::{
    CLUSTER_NAME, DELETION_TIMESTAMP, LOG_TRACING, METADATA, ORIGINAL_SOURCE, OcmExtensions, RESOURCE_ID,
    RESOURCE_VERSION,
};
use super::types::{DataType, SubResource, data_types};
use crate::event::{CloudEvent, Timestamp};

/// The annotation prefix whose entries travel in `logtracing`.
const LOG_TRACING_PREFIX: &str = "logging.open-cluster-management.io/";
/// The label naming a CSR's cluster.
const CLUSTER_NAME_LABEL: &str = "open-cluster-management.io/cluster-name";

/// An object that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("{kind} has no {field}")]
    Missing { kind: &'static str, field: &'static str },
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("no known kind for data type {0}")]
    UnknownKind(String),
}

/// The kind OCM's hub encoders stamp on objects of each data type.
fn kind_of(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type.to_string().as_str() {
        data_types::MANAGED_CLUSTERS => "ManagedCluster",
        data_types::CSRS => "CertificateSigningRequest",
        data_types::LEASES => "Lease",
        data_types::EVENTS => "Event",
        data_types::ADDONS_V1ALPHA1 | data_types::ADDONS_V1BETA1 => "ManagedClusterAddOn",
        data_types::TOKEN_REQUESTS => "TokenRequest",
        _ => return None,
    })
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn deletion_timestamp(meta: &Value) -> Result<Option<Timestamp>, CodecError> {
    str_at(meta, &["deletionTimestamp"])
        .map(|s| {
            chrono::DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&chrono::Utc))
                .map_err(|e| CodecError::Invalid {
                    field: "metadata.deletionTimestamp",
                    reason: e.to_string(),
                })
        })
        .transpose()
}

fn new_event(source: &str, data_type: &DataType, action: &str) -> CloudEvent {
    let mut e = CloudEvent::new(
        uuid::Uuid::new_v4().to_string(),
        source,
        data_type.event_type(SubResource::Spec, action),
    );
    e.time = Some(chrono::Utc::now());
    e.set_extension(ORIGINAL_SOURCE, "");
    e
}

/// A ManifestWork as a `manifestbundles` spec event (§8.3): `resourceid` = uid,
/// `resourceversion` = generation (integer), `metadata` = the ObjectMeta JSON, `logtracing`,
/// and the ManifestBundle as data — or `deletiontimestamp` and no data while deleting.
pub fn manifest_work_event(work: &Value, source: &str, action: &str) -> Result<CloudEvent, CodecError> {
    const KIND: &str = "ManifestWork";
    let meta = work.get("metadata").ok_or(CodecError::Missing {
        kind: KIND,
        field: "metadata",
    })?;
    let uid = str_at(meta, &["uid"]).ok_or(CodecError::Missing {
        kind: KIND,
        field: "metadata.uid",
    })?;
    let namespace = str_at(meta, &["namespace"]).ok_or(CodecError::Missing {
        kind: KIND,
        field: "metadata.namespace",
    })?;
    let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
    let data_type = DataType::parse(data_types::MANIFEST_BUNDLES).expect("a valid data type");
    let mut e = new_event(source, &data_type, action);
    e.set_extension(CLUSTER_NAME, namespace);
    e.set_extension(RESOURCE_ID, uid);
    e.set_resource_version(&data_type, generation);
    e.set_extension(METADATA, meta.to_string());
    let tracing: Map<String, Value> = meta
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(LOG_TRACING_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    e.set_extension(LOG_TRACING, Value::Object(tracing).to_string());
    if let Some(t) = deletion_timestamp(meta)? {
        e.set_extension(DELETION_TIMESTAMP, t);
        return Ok(e);
    }
    let spec = work.get("spec").cloned().unwrap_or(Value::Null);
    let mut bundle = Map::new();
    bundle.insert("manifests".into(), spec["workload"]["manifests"].clone());
    for (from, to) in [
        ("deleteOption", "deleteOption"),
        ("manifestConfigs", "manifestConfigs"),
        ("executor", "executer"),
    ] {
        if let Some(v) = spec.get(from).filter(|v| !v.is_null()) {
            bundle.insert(to.into(), v.clone());
        }
    }
    e.set_json_data(&Value::Object(bundle))
        .map_err(|err| CodecError::Invalid {
            field: "spec",
            reason: err.to_string(),
        })?;
    Ok(e)
}

/// Any other Kubernetes object as a spec event of `data_type` (§3.2, §7.3): `apiVersion`/`kind`
/// stamped on a copy of the object, `resourceid` = uid, `resourceversion` = the resourceVersion
/// string, `clustername` from the object (a cluster's name, a CSR's cluster-name label, or the
/// namespace).
pub fn kube_object_event(
    data_type: &DataType,
    object: &Value,
    source: &str,
    action: &str,
) -> Result<CloudEvent, CodecError> {
    const KIND: &str = "object";
    let meta = object.get("metadata").ok_or(CodecError::Missing {
        kind: KIND,
        field: "metadata",
    })?;
    let dt = data_type.to_string();
    let cluster = match dt.as_str() {
        data_types::MANAGED_CLUSTERS => str_at(meta, &["name"]),
        data_types::CSRS => str_at(meta, &["labels", CLUSTER_NAME_LABEL]),
        _ => str_at(meta, &["namespace"]),
    }
    .ok_or(CodecError::Missing {
        kind: KIND,
        field: "cluster name (name, cluster-name label or namespace)",
    })?;
    let mut e = new_event(source, data_type, action);
    e.set_extension(CLUSTER_NAME, cluster);
    if let Some(uid) = str_at(meta, &["uid"]) {
        e.set_extension(RESOURCE_ID, uid);
    }
    if let Some(rv) = str_at(meta, &["resourceVersion"]) {
        e.set_extension(RESOURCE_VERSION, rv);
    }
    if let Some(t) = deletion_timestamp(meta)? {
        e.set_extension(DELETION_TIMESTAMP, t);
    }
    let mut object = object.clone();
    if dt != data_types::TOKEN_REQUESTS {
        let kind = kind_of(data_type).ok_or_else(|| CodecError::UnknownKind(dt.clone()))?;
        if let Some(o) = object.as_object_mut() {
            o.insert(
                "apiVersion".into(),
                format!("{}/{}", data_type.group, data_type.version).into(),
            );
            o.insert("kind".into(), kind.into());
        }
    }
    e.set_json_data(&object).map_err(|err| CodecError::Invalid {
        field: "object",
        reason: err.to_string(),
    })?;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deleting_works_carry_no_data() {
        let work = json!({"metadata": {"name": "w", "namespace": "c1", "uid": "u", "generation": 2,
            "deletionTimestamp": "2025-06-01T11:00:00Z"}, "spec": {"workload": {"manifests": []}}});
        let e = manifest_work_event(&work, "kube", "update_request").unwrap();
        assert!(e.deletion_timestamp().is_some());
        assert!(e.data.is_none() && e.data_content_type.is_none());
        assert_eq!(e.resource_version(), Ok(2));
        assert_eq!(e.extension_str(LOG_TRACING), Ok("{}"));
    }

    #[test]
    fn works_need_uid_and_namespace() {
        assert!(manifest_work_event(&json!({"metadata": {"uid": "u"}}), "kube", "create_request").is_err());
        assert!(manifest_work_event(&json!({}), "kube", "create_request").is_err());
    }

    #[test]
    fn csrs_take_their_cluster_from_the_label() {
        let dt = DataType::parse(data_types::CSRS).unwrap();
        let csr = json!({"metadata": {"name": "x", "uid": "u", "resourceVersion": "7",
            "labels": {"open-cluster-management.io/cluster-name": "c9"}}});
        let e = kube_object_event(&dt, &csr, "kube", "create_request").unwrap();
        assert_eq!(e.cluster_name(), Ok("c9"));
        assert_eq!(e.extension_str(RESOURCE_VERSION), Ok("7"));
        let data: Value = e.data_json().unwrap();
        assert_eq!(data["kind"], "CertificateSigningRequest");
        assert_eq!(data["apiVersion"], "certificates.k8s.io/v1");
        let unlabelled = json!({"metadata": {"name": "x", "uid": "u"}});
        assert!(kube_object_event(&dt, &unlabelled, "kube", "create_request").is_err());
    }
}
