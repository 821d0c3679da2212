//! The payloads the maestro source decodes: Maestro's stored CloudEvent payloads and
//! ManifestBundles (from its database), agents' ManifestBundleStatus updates, sequence ids; and
//! the SDK's ManifestWork → ManifestBundle conversion. The first byte picks which extensions the
//! status event carries; the rest is the JSON. (The kube source's decoder is `kube_status`: two
//! plugin libraries cannot link into one binary.)
#![no_main]

use conductor_fuzz::status_event;
use libfuzzer_sys::fuzz_target;
use maestro_plugin::spec::ResourceRow;
use serde_json::{Value, json};

fuzz_target!(|bytes: &[u8]| {
    let Some((&flags, data)) = bytes.split_first() else { return };
    let event = status_event(flags, data);
    let json: Option<Value> = serde_json::from_slice(data).ok();
    let row = ResourceRow {
        id: "55c61e54-a3f6-563d-9fec-b1fe297bdfdb".into(),
        consumer_name: "cluster1".into(),
        version: 1,
        source: "maestro".into(),
        payload: json.clone().unwrap_or_else(|| json!({})),
        status: json.clone(),
        created_at: None,
        deleted_at: None,
    };
    let target = maestro_plugin::status::StatusTarget {
        consumer_name: row.consumer_name.clone(),
        version: row.version,
        metadata: json
            .as_ref()
            .and_then(|j| j.get("metadata"))
            .and_then(|m| serde_json::value::to_raw_value(m).ok()),
        status: json.as_ref().map(|j| maestro_plugin::status::StoredStatus {
            sequence: j.get("sequenceid").and_then(Value::as_str).map(str::to_owned),
        }),
    };
    let _ = maestro_plugin::status::decide(&event, Some(&target));
    let _ = maestro_plugin::sequence::Snowflake::parse(&String::from_utf8_lossy(data));
    if let Some(json) = json {
        if let Ok(stored) = maestro_plugin::payload::from_json_map(&json) {
            // What is written back must be JSON, with or without the spec's metadata.
            let meta = serde_json::value::RawValue::from_string(r#"{"name":"x"}"#.into()).expect("JSON");
            for metadata in [None, Some(meta.as_ref())] {
                if let Ok(text) = maestro_plugin::payload::status_json(&stored, metadata) {
                    assert!(serde_json::from_str::<Value>(text.get()).is_ok(), "not JSON: {}", text.get());
                }
            }
        }
        let _ = maestro_plugin::spec::stamped_payload(&row);
        let _ = conductor_plugin_sdk::ocm::codec::manifest_work_event(&json, "kube", "create_request");
    }
});
