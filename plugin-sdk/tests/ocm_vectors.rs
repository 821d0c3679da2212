//! The OCM encoders of the three SDKs put the same bytes on the wire: `ocm-vectors.json` holds
//! objects and what `ocm::codec` makes of them; the Python (`conductor_sdk.ocm`) and JavaScript
//! (`ocm.mjs`) packages are tested against the same file. `CONDUCTOR_WRITE_VECTORS=1 cargo test -p
//! conductor-plugin-sdk --test ocm_vectors` rewrites the expectations from the Rust encoders (then
//! review the diff: the other two must follow).

use std::path::PathBuf;

use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::event::ExtensionValue;
use conductor_plugin_sdk::ocm::{DataType, codec};
use serde_json::{Map, Value, json};

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ocm-vectors.json")
}

/// What a case compares of an event: everything but its id and time.
fn observed(event: &CloudEvent) -> Value {
    let extensions: Map<String, Value> = event
        .extensions
        .iter()
        .map(|(name, value)| {
            let v = match value {
                ExtensionValue::Boolean(b) => json!({ "boolean": b }),
                ExtensionValue::Integer(i) => json!({ "integer": i }),
                ExtensionValue::String(s) => json!({ "string": s }),
                ExtensionValue::Bytes(b) => json!({ "bytes": b }),
                ExtensionValue::Uri(s) => json!({ "uri": s }),
                ExtensionValue::UriRef(s) => json!({ "uri-ref": s }),
                ExtensionValue::Timestamp(t) => json!({ "timestamp": [t.timestamp(), t.timestamp_subsec_nanos()] }),
            };
            (name.clone(), v)
        })
        .collect();
    json!({
        "type": event.ty,
        "source": event.source,
        "extensions": extensions,
        "data_content_type": event.data_content_type,
        "data": event.data.as_deref().map(|d| String::from_utf8(d.to_vec()).expect("JSON data is UTF-8")),
    })
}

fn encode(case: &Value) -> Value {
    let s = |key: &str| case[key].as_str().unwrap_or_else(|| panic!("{key} in {case}"));
    let encoded = match s("encoder") {
        "manifest_work" => codec::manifest_work_event(&case["object"], s("source"), s("action")),
        "kube_object" => {
            let data_type = DataType::parse(s("data_type")).expect("a valid data type");
            codec::kube_object_event(&data_type, &case["object"], s("source"), s("action"))
        }
        other => panic!("unknown encoder {other}"),
    };
    match encoded {
        Ok(event) => observed(&event),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

#[test]
fn the_rust_encoders_make_what_the_vectors_hold() {
    let path = vectors_path();
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let write = std::env::var_os("CONDUCTOR_WRITE_VECTORS").is_some();
    let cases = doc["cases"].as_array_mut().unwrap();
    assert!(cases.len() >= 10, "the vectors hold the cases");
    for case in cases.iter_mut() {
        let got = encode(case);
        if write {
            case["expected"] = got;
        } else {
            assert_eq!(got, case["expected"], "{}", case["name"]);
        }
    }
    if write {
        let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
    }
    // Both outcomes are covered: events and refusals.
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.iter().any(|c| c["expected"]["error"].is_string()));
    assert!(
        cases
            .iter()
            .any(|c| c["expected"]["extensions"]["deletiontimestamp"].is_object())
    );
}
