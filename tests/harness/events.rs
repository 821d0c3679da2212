//! Building OCM wire events by hand, independently of conductor's own codec.

use std::collections::HashMap;

use crate::proto::{CloudEvent, CloudEventAttributeValue, cloud_event::Data, cloud_event_attribute_value::Attr};

pub fn string(s: &str) -> CloudEventAttributeValue {
    CloudEventAttributeValue {
        attr: Some(Attr::CeString(s.to_owned())),
    }
}

pub fn integer(i: i32) -> CloudEventAttributeValue {
    CloudEventAttributeValue {
        attr: Some(Attr::CeInteger(i)),
    }
}

/// An agent event of `type` for `cluster`, with `originalsource` and JSON `data`.
pub fn agent_event(ty: &str, cluster: &str, original_source: &str, data: Option<serde_json::Value>) -> CloudEvent {
    let mut attributes: HashMap<String, CloudEventAttributeValue> = HashMap::new();
    attributes.insert("ce-clustername".into(), string(cluster));
    attributes.insert("ce-originalsource".into(), string(original_source));
    if data.is_some() {
        attributes.insert("contenttype".into(), string("application/json"));
    }
    CloudEvent {
        id: uuid::Uuid::new_v4().to_string(),
        source: format!("{cluster}-work-agent"),
        spec_version: "1.0".into(),
        r#type: ty.to_owned(),
        attributes,
        data: data.map(|d| Data::BinaryData(serde_json::to_vec(&d).unwrap())),
    }
}

/// Sets `ce-resourceid`.
pub fn with_id(mut e: CloudEvent, id: &str) -> CloudEvent {
    e.attributes.insert("ce-resourceid".into(), string(id));
    e
}

/// A spec create request for a resource `id` of `data_type` (the memory source stores it).
pub fn create(data_type: &str, cluster: &str, id: &str, name: &str) -> CloudEvent {
    with_id(
        agent_event(
            &format!("{data_type}.spec.create_request"),
            cluster,
            "",
            Some(serde_json::json!({"metadata": {"name": name}, "manifests": []})),
        ),
        id,
    )
}

/// A spec resync request listing `(id, version)` pairs.
pub fn resync_request(data_type: &str, cluster: &str, held: &[(&str, i64)]) -> CloudEvent {
    let versions: Vec<_> = held
        .iter()
        .map(|(id, v)| serde_json::json!({"resourceID": id, "resourceVersion": v}))
        .collect();
    agent_event(
        &format!("{data_type}.spec.resync_request"),
        cluster,
        "",
        Some(serde_json::json!({ "resourceVersions": versions })),
    )
}

pub fn attr<'a>(e: &'a CloudEvent, key: &str) -> Option<&'a Attr> {
    e.attributes.get(key).and_then(|v| v.attr.as_ref())
}

pub fn attr_str<'a>(e: &'a CloudEvent, key: &str) -> Option<&'a str> {
    match attr(e, key) {
        Some(Attr::CeString(s)) => Some(s),
        _ => None,
    }
}

/// An event's JSON data (`Null` when it has none).
pub fn data_json(e: &CloudEvent) -> serde_json::Value {
    match &e.data {
        Some(Data::BinaryData(b)) => serde_json::from_slice(b).unwrap_or(serde_json::Value::Null),
        _ => serde_json::Value::Null,
    }
}

/// The work agent's status update for work `uid` at `generation`.
pub fn work_status(cluster: &str, uid: &str, generation: i32, conditions: serde_json::Value) -> CloudEvent {
    let mut e = with_id(
        agent_event(
            "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request",
            cluster,
            "kube",
            Some(serde_json::json!({"conditions": conditions, "resourceStatus": []})),
        ),
        uid,
    );
    e.attributes.insert("ce-resourceversion".into(), integer(generation));
    e.attributes
        .insert("ce-sequenceid".into(), string("7000000000000000001"));
    e
}

/// One condition of type `kind`, true, as the work agent reports it.
pub fn condition(kind: &str) -> serde_json::Value {
    serde_json::json!([{"type": kind, "status": "True", "reason": kind, "message": kind,
            "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": 1}])
}
