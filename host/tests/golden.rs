//! The golden wire vectors produced by the upstream Go code (`tests/golden/`, whose README says
//! with which versions and functions): every vector decodes to what its JSON description says, and re-encodes to
//! the same message.

use std::path::PathBuf;

use base64::Engine as _;
use conductor::proto::{self, cloud_event::Data, cloud_event_attribute_value::Attr};
use conductor::wire;
use prost::Message;
use serde_json::Value;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn vectors() -> Vec<(String, proto::CloudEvent, Value)> {
    let index: Value = serde_json::from_slice(&std::fs::read(golden_dir().join("index.json")).unwrap()).unwrap();
    let names: Vec<String> = index
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 21, "the golden set has 21 vectors");
    names
        .into_iter()
        .map(|name| {
            let pb = std::fs::read(golden_dir().join(format!("{name}.pb"))).unwrap();
            let json = std::fs::read(golden_dir().join(format!("{name}.json"))).unwrap();
            let msg = proto::CloudEvent::decode(pb.as_slice()).unwrap();
            (name, msg, serde_json::from_slice(&json).unwrap())
        })
        .collect()
}

/// The attribute in the JSON description's form: `{"<oneof case>": value}`.
fn attr_json(attr: &Attr) -> Value {
    let (case, value) = match attr {
        Attr::CeBoolean(b) => ("ce_boolean", Value::from(*b)),
        Attr::CeInteger(i) => ("ce_integer", Value::from(*i)),
        Attr::CeString(s) => ("ce_string", Value::from(s.as_str())),
        Attr::CeBytes(b) => (
            "ce_bytes",
            Value::from(base64::engine::general_purpose::STANDARD.encode(b)),
        ),
        Attr::CeUri(s) => ("ce_uri", Value::from(s.as_str())),
        Attr::CeUriRef(s) => ("ce_uri_ref", Value::from(s.as_str())),
        Attr::CeTimestamp(ts) => {
            let t = chrono::DateTime::from_timestamp(ts.seconds, ts.nanos as u32).unwrap();
            (
                "ce_timestamp",
                Value::from(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            )
        }
    };
    serde_json::json!({ case: value })
}

#[test]
fn every_vector_matches_its_description() {
    for (name, msg, desc) in vectors() {
        let p = &desc["proto"];
        assert_eq!(msg.id, p["id"], "{name}: id");
        assert_eq!(msg.source, p["source"], "{name}: source");
        assert_eq!(msg.spec_version, p["spec_version"], "{name}: spec_version");
        assert_eq!(msg.r#type, p["type"], "{name}: type");
        let attrs: serde_json::Map<String, Value> = msg
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), attr_json(v.attr.as_ref().unwrap())))
            .collect();
        assert_eq!(Value::Object(attrs), p["attributes"], "{name}: attributes");
        match (&msg.data, p["data_case"].as_str().unwrap()) {
            (Some(Data::BinaryData(b)), "binary_data") => {
                assert_eq!(
                    std::str::from_utf8(b).unwrap(),
                    p["binary_data_utf8"],
                    "{name}: data bytes"
                );
            }
            (None, "none") => {}
            (other, case) => panic!("{name}: data {other:?} but description says {case}"),
        }
    }
}

#[test]
fn every_vector_decodes_as_upstream_decodes_it() {
    for (name, msg, desc) in vectors() {
        let event = wire::decode(&msg).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ce = &desc["cloudevent"];
        if ce.is_null() {
            assert_eq!(name, "h2a-heartbeat");
            continue;
        }
        assert_eq!(event.id, ce["id"], "{name}");
        assert_eq!(event.source, ce["source"], "{name}");
        assert_eq!(event.ty, ce["type"], "{name}");
        assert_eq!(event.spec_version, ce["specversion"], "{name}");
        assert_eq!(
            event
                .data_content_type
                .as_deref()
                .map(Value::from)
                .unwrap_or(Value::Null),
            ce.get("datacontenttype").cloned().unwrap_or(Value::Null),
            "{name}: content type"
        );
        let time = event
            .time
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
        assert_eq!(time.map(Value::from).unwrap_or(Value::Null), ce["time"], "{name}: time");
        let data: Value = event
            .data
            .as_deref()
            .map(|d| serde_json::from_slice(d).unwrap())
            .unwrap_or(Value::Null);
        assert_eq!(data, ce.get("data").cloned().unwrap_or(Value::Null), "{name}: data");
        // Every extension the upstream reader saw, with its value.
        let core = ["specversion", "id", "source", "type", "datacontenttype", "time", "data"];
        let expected: Vec<&String> = ce
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !core.contains(&k.as_str()))
            .collect();
        assert_eq!(
            event.extensions.keys().collect::<Vec<_>>(),
            expected
                .iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>(),
            "{name}: extension names"
        );
        for key in expected {
            let got = event.extension(key).unwrap();
            let want = &ce[key];
            match got {
                conductor_plugin_sdk::ExtensionValue::String(s) => assert_eq!(want, s.as_str(), "{name}: {key}"),
                conductor_plugin_sdk::ExtensionValue::Integer(i) => assert_eq!(want, *i, "{name}: {key}"),
                conductor_plugin_sdk::ExtensionValue::Timestamp(t) => assert_eq!(
                    chrono::DateTime::parse_from_rfc3339(want.as_str().unwrap()).unwrap(),
                    *t,
                    "{name}: {key}"
                ),
                other => panic!("{name}: {key}: unexpected {other:?}"),
            }
        }
    }
}

#[test]
fn every_vector_reencodes_to_the_same_message() {
    for (name, msg, _) in vectors() {
        let event = wire::decode(&msg).unwrap();
        let again = wire::encode(&event);
        // prost map fields are HashMaps: equality is attribute-wise, whatever the order.
        assert_eq!(again, msg, "{name}");
        assert_eq!(wire::decode(&again).unwrap(), event, "{name}: decode after encode");
    }
}

/// The hub → agent vectors are what conductor's own encoders produce for the same objects:
/// rebuild each input object from its vector, encode it, and compare attribute-wise (`id` and
/// `ce-time` are per-event; `ce-metadata` and the data are compared as parsed JSON).
#[test]
fn hub_encoders_produce_the_hub_to_agent_vectors() {
    use conductor_plugin_sdk::ocm::{DataType, EventType, codec};
    let mut checked = 0;
    for (name, msg, _) in vectors() {
        if !name.starts_with("h2a-") || name == "h2a-heartbeat" {
            continue;
        }
        let upstream = wire::decode(&msg).unwrap();
        let ty = EventType::parse(&upstream.ty).unwrap();
        let data: Value = upstream
            .data
            .as_deref()
            .map(|d| serde_json::from_slice(d).unwrap())
            .unwrap_or(Value::Null);
        let ours = if name.starts_with("h2a-work-") {
            let meta: Value = serde_json::from_str(upstream.extension_str("metadata").unwrap()).unwrap();
            let mut spec = serde_json::json!({ "workload": { "manifests": data["manifests"] } });
            for key in ["deleteOption", "manifestConfigs"] {
                if !data[key].is_null() {
                    spec[key] = data[key].clone();
                }
            }
            let work = serde_json::json!({
                "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                "metadata": meta, "spec": spec,
            });
            codec::manifest_work_event(&work, &upstream.source, &ty.action).unwrap()
        } else {
            // The encoder stamps apiVersion and kind itself.
            let mut object = data.clone();
            object
                .as_object_mut()
                .unwrap()
                .retain(|k, _| k != "apiVersion" && k != "kind");
            let dt = DataType::parse(&ty.data_type.to_string()).unwrap();
            codec::kube_object_event(&dt, &object, &upstream.source, &ty.action).unwrap()
        };
        let mut ours = wire::encode(&ours);
        // Per-event values.
        ours.id = msg.id.clone();
        ours.attributes
            .insert("ce-time".into(), msg.attributes["ce-time"].clone());
        let json_of = |m: &proto::CloudEvent, key: &str| -> Option<Value> {
            match m.attributes.get(key).and_then(|v| v.attr.as_ref()) {
                Some(Attr::CeString(s)) => Some(serde_json::from_str(s).unwrap()),
                _ => None,
            }
        };
        assert_eq!(
            json_of(&ours, "ce-metadata"),
            json_of(&msg, "ce-metadata"),
            "{name}: metadata"
        );
        ours.attributes.remove("ce-metadata");
        let mut expected = msg.clone();
        expected.attributes.remove("ce-metadata");
        let data_of = |m: &proto::CloudEvent| match &m.data {
            Some(Data::BinaryData(b)) => Some(serde_json::from_slice::<Value>(b).unwrap()),
            _ => None,
        };
        assert_eq!(data_of(&ours), data_of(&expected), "{name}: data");
        ours.data = None;
        expected.data = None;
        assert_eq!(ours, expected, "{name}: envelope and attributes");
        checked += 1;
    }
    assert_eq!(checked, 8, "every hub → agent vector but the heartbeat");
}
