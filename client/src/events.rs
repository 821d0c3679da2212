//! The few CloudEvents the clients build and read, on the wire (`docs/protocol.md` §2): extensions
//! under `ce-<name>`, the content type under `contenttype`, the payload in `binary_data`.

use std::collections::HashMap;

use crate::proto::{CloudEvent, CloudEventAttributeValue, cloud_event::Data, cloud_event_attribute_value::Attr};

fn string(s: &str) -> CloudEventAttributeValue {
    CloudEventAttributeValue {
        attr: Some(Attr::CeString(s.to_owned())),
    }
}

/// A `spec.<action>` request for resource `id` of `cluster`, as a hub-side client publishes it
/// to a memory source (which stores it and emits the spec event to the cluster's agents).
pub fn spec_request(data_type: &str, action: &str, cluster: &str, id: &str, name: &str) -> CloudEvent {
    let mut attributes = HashMap::new();
    attributes.insert("ce-clustername".to_owned(), string(cluster));
    attributes.insert("ce-originalsource".to_owned(), string(""));
    attributes.insert("ce-resourceid".to_owned(), string(id));
    attributes.insert("contenttype".to_owned(), string("application/json"));
    let data = serde_json::json!({"metadata": {"name": name}, "manifests": []});
    CloudEvent {
        id: uuid::Uuid::new_v4().to_string(),
        source: format!("{cluster}-load"),
        spec_version: "1.0".into(),
        r#type: format!("{data_type}.spec.{action}"),
        attributes,
        data: Some(Data::BinaryData(data.to_string().into_bytes())),
    }
}

/// An agent's spec resync request for `data_type` (`docs/protocol.md` §5.1): from `source` (the
/// agent's client id), with `originalsource` `""` (every source) and the versions of the
/// resources it holds (`(resource id, version)`; none on a first subscription).
pub fn resync_request(data_type: &str, cluster: &str, source: &str, held: &[(String, i64)]) -> CloudEvent {
    let mut attributes = HashMap::new();
    attributes.insert("ce-clustername".to_owned(), string(cluster));
    attributes.insert("ce-originalsource".to_owned(), string(""));
    attributes.insert("contenttype".to_owned(), string("application/json"));
    let versions: Vec<serde_json::Value> = held
        .iter()
        .map(|(id, version)| serde_json::json!({"resourceID": id, "resourceVersion": version}))
        .collect();
    let data = serde_json::json!({ "resourceVersions": versions });
    CloudEvent {
        id: uuid::Uuid::new_v4().to_string(),
        source: source.to_owned(),
        spec_version: "1.0".into(),
        r#type: format!("{data_type}.spec.resync_request"),
        attributes,
        data: Some(Data::BinaryData(data.to_string().into_bytes())),
    }
}

/// Extension `name`: sdk-go's protobuf binding writes extensions as `ce-<name>`; plain `<name>`
/// is accepted too.
fn attr<'a>(e: &'a CloudEvent, name: &str) -> Option<&'a Attr> {
    e.attributes
        .get(&format!("ce-{name}"))
        .or_else(|| e.attributes.get(name))
        .and_then(|v| v.attr.as_ref())
}

/// `resourceid` and `resourceversion` of a spec event (integer, or a string holding one).
pub fn resource_key(e: &CloudEvent) -> Option<(String, i64)> {
    let id = match attr(e, "resourceid")? {
        Attr::CeString(s) => s.clone(),
        _ => return None,
    };
    let version = match attr(e, "resourceversion")? {
        Attr::CeInteger(i) => i64::from(*i),
        Attr::CeString(s) => s.parse().ok()?,
        _ => return None,
    };
    Some((id, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_key_is_read_from_prefixed_or_plain_extensions() {
        let mut e = spec_request("dt", "create_request", "c1", "r1", "n");
        assert_eq!(resource_key(&e), None, "no version yet");
        let int = CloudEventAttributeValue {
            attr: Some(Attr::CeInteger(3)),
        };
        e.attributes.insert("ce-resourceversion".into(), int);
        assert_eq!(resource_key(&e), Some(("r1".into(), 3)));
        e.attributes.remove("ce-resourceversion");
        e.attributes.insert("resourceversion".into(), string("7"));
        assert_eq!(resource_key(&e), Some(("r1".into(), 7)));
    }

    #[test]
    fn a_resync_request_lists_what_the_agent_holds() {
        let e = resync_request("a.v1.things", "c1", "c1-agent", &[("r1".into(), 3)]);
        assert_eq!(e.r#type, "a.v1.things.spec.resync_request");
        assert!(matches!(attr(&e, "originalsource"), Some(Attr::CeString(s)) if s.is_empty()));
        let Some(Data::BinaryData(data)) = &e.data else {
            panic!("no data")
        };
        let data: serde_json::Value = serde_json::from_slice(data).unwrap();
        assert_eq!(data["resourceVersions"][0]["resourceID"], "r1");
        let empty = resync_request("a.v1.things", "c1", "c1-agent", &[]);
        assert!(matches!(&empty.data, Some(Data::BinaryData(d)) if d.as_slice() == br#"{"resourceVersions":[]}"#));
    }
}
