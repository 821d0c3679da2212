//! `resources.payload` and `resources.status` hold a CloudEvent in structured JSON mode, with one
//! change: the `metadata` extension, a JSON string on the wire, is stored as a JSON object
//! (`docs/maestro-database.md` §2). These convert both ways.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use conductor_plugin_sdk::ocm::extensions::METADATA;
use conductor_plugin_sdk::{CloudEvent, ExtensionValue};
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("stored event is not a JSON object")]
    NotAnObject,
    #[error("stored event has no string {0:?}")]
    Missing(&'static str),
    #[error("stored event has an invalid time {0:?}")]
    Time(String),
    #[error("stored event data is not JSON: {0}")]
    Data(String),
}

const CORE: [&str; 9] = [
    "specversion",
    "id",
    "source",
    "type",
    "time",
    "datacontenttype",
    "dataschema",
    "subject",
    "data",
];

fn format_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A value of [`status_json`]'s object: borrowed from the event where it can be.
enum Field<'a> {
    Str(&'a str),
    Owned(String),
    Int(i32),
    Bool(bool),
    Bytes(&'a [u8]),
    Raw(&'a RawValue),
    Value(Value),
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(v) => s.serialize_str(v),
            Field::Owned(v) => s.serialize_str(v),
            Field::Int(v) => s.serialize_i32(*v),
            Field::Bool(v) => s.serialize_bool(*v),
            Field::Bytes(v) => s.collect_seq(v.iter()),
            Field::Raw(v) => v.serialize(s),
            Field::Value(v) => v.serialize(s),
        }
    }
}

/// The stored form of an event: structured JSON with `metadata` as an object (the event's own,
/// parsed from its string, or `metadata`, the spec's, when there is one), written as JSON text
/// without building a tree: `data` is copied as the agent sent it (checked to be JSON), the keys
/// in the order a JSON map takes, as Maestro writes them.
pub fn status_json(event: &CloudEvent, metadata: Option<&RawValue>) -> Result<Box<RawValue>, PayloadError> {
    let mut m: BTreeMap<&str, Field<'_>> = BTreeMap::new();
    m.insert("specversion", Field::Str(&event.spec_version));
    m.insert("id", Field::Str(&event.id));
    m.insert("source", Field::Str(&event.source));
    m.insert("type", Field::Str(&event.ty));
    if let Some(t) = &event.time {
        m.insert("time", Field::Owned(format_time(t)));
    }
    for (key, value) in [
        ("datacontenttype", &event.data_content_type),
        ("dataschema", &event.data_schema),
        ("subject", &event.subject),
    ] {
        if let Some(v) = value {
            m.insert(key, Field::Str(v));
        }
    }
    if let Some(data) = &event.data {
        m.insert("data", Field::Raw(data_json(data)?));
    }
    for (name, value) in &event.extensions {
        let v = match value {
            ExtensionValue::String(_) if name == METADATA && metadata.is_some() => continue,
            ExtensionValue::String(s) if name == METADATA => {
                Field::Value(serde_json::from_str(s).unwrap_or_else(|_| s.clone().into()))
            }
            ExtensionValue::String(s) | ExtensionValue::Uri(s) | ExtensionValue::UriRef(s) => Field::Str(s),
            ExtensionValue::Integer(i) => Field::Int(*i),
            ExtensionValue::Boolean(b) => Field::Bool(*b),
            ExtensionValue::Timestamp(t) => Field::Owned(format_time(t)),
            ExtensionValue::Bytes(b) => Field::Bytes(b),
        };
        m.insert(name, v);
    }
    if let Some(meta) = metadata {
        m.insert(METADATA, Field::Raw(meta));
    }
    serde_json::value::to_raw_value(&m).map_err(|e| PayloadError::Data(e.to_string()))
}

/// An event's `data` as the JSON it must be.
fn data_json(data: &[u8]) -> Result<&RawValue, PayloadError> {
    serde_json::from_slice(data).map_err(|e| PayloadError::Data(e.to_string()))
}

/// An event from its stored form: `metadata` back to a JSON string, numbers as integers,
/// other JSON values as strings.
pub fn from_json_map(stored: &Value) -> Result<CloudEvent, PayloadError> {
    let m = stored.as_object().ok_or(PayloadError::NotAnObject)?;
    let text = |key: &'static str| m.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut e = CloudEvent::new(
        text("id").ok_or(PayloadError::Missing("id"))?,
        text("source").ok_or(PayloadError::Missing("source"))?,
        text("type").ok_or(PayloadError::Missing("type"))?,
    );
    e.spec_version = text("specversion").ok_or(PayloadError::Missing("specversion"))?;
    e.data_content_type = text("datacontenttype");
    e.data_schema = text("dataschema");
    e.subject = text("subject");
    if let Some(t) = text("time") {
        e.time = Some(
            DateTime::parse_from_rfc3339(&t)
                .map_err(|_| PayloadError::Time(t.clone()))?
                .with_timezone(&Utc),
        );
    }
    if let Some(data) = m.get("data").filter(|d| !d.is_null()) {
        e.data = Some(serde_json::to_vec(data).map_err(|err| PayloadError::Data(err.to_string()))?);
    }
    for (key, value) in m.iter().filter(|(k, _)| !CORE.contains(&k.as_str())) {
        let v = match value {
            Value::String(s) => ExtensionValue::String(s.clone()),
            Value::Bool(b) => ExtensionValue::Boolean(*b),
            Value::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
                Some(i) => ExtensionValue::Integer(i),
                None => ExtensionValue::String(n.to_string()),
            },
            Value::Null => continue,
            other => ExtensionValue::String(other.to_string()),
        };
        e.extensions.insert(key.clone(), v);
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    /// The stored form built as a tree, field by field: the oracle `status_json`'s text is checked
    /// against.
    fn to_json_map(event: &CloudEvent) -> Result<Value, PayloadError> {
        let mut m = Map::new();
        m.insert("specversion".into(), event.spec_version.clone().into());
        m.insert("id".into(), event.id.clone().into());
        m.insert("source".into(), event.source.clone().into());
        m.insert("type".into(), event.ty.clone().into());
        if let Some(t) = &event.time {
            m.insert("time".into(), format_time(t).into());
        }
        for (key, value) in [
            ("datacontenttype", &event.data_content_type),
            ("dataschema", &event.data_schema),
            ("subject", &event.subject),
        ] {
            if let Some(v) = value {
                m.insert(key.into(), v.clone().into());
            }
        }
        if let Some(data) = &event.data {
            let data: Value = serde_json::from_slice(data).map_err(|e| PayloadError::Data(e.to_string()))?;
            m.insert("data".into(), data);
        }
        for (name, value) in &event.extensions {
            let v = match value {
                ExtensionValue::String(s) if name == METADATA => {
                    serde_json::from_str(s).unwrap_or_else(|_| s.clone().into())
                }
                ExtensionValue::String(s) | ExtensionValue::Uri(s) | ExtensionValue::UriRef(s) => s.clone().into(),
                ExtensionValue::Integer(i) => (*i).into(),
                ExtensionValue::Boolean(b) => (*b).into(),
                ExtensionValue::Timestamp(t) => format_time(t).into(),
                ExtensionValue::Bytes(b) => Value::Array(b.iter().map(|x| Value::from(*x)).collect()),
            };
            m.insert(name.clone(), v);
        }
        Ok(Value::Object(m))
    }

    fn stored_spec() -> Value {
        json!({
            "specversion": "1.0", "id": "e-1", "source": "source-work-client",
            "type": "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
            "time": "2025-06-01T12:00:00Z", "datacontenttype": "application/json",
            "data": {"manifests": [{"kind": "ConfigMap"}]},
            "metadata": {"name": "nginx", "namespace": "cluster1"},
            "resourceid": "r-1", "clustername": "cluster1", "resourceversion": 2, "originalsource": "", "logtracing": "{}"
        })
    }

    #[test]
    fn metadata_is_an_object_in_the_database_and_a_string_on_the_wire() {
        let e = from_json_map(&stored_spec()).unwrap();
        let meta: Value = serde_json::from_str(e.extension_str("metadata").unwrap()).unwrap();
        assert_eq!(meta["name"], "nginx");
        assert_eq!(e.extension("resourceversion"), Some(&ExtensionValue::Integer(2)));
        assert_eq!(e.data_json::<Value>().unwrap()["manifests"][0]["kind"], "ConfigMap");
        let back = status_json(&e, None).unwrap();
        assert_eq!(serde_json::from_str::<Value>(back.get()).unwrap(), stored_spec());
    }

    #[test]
    fn a_status_written_as_text_is_the_stored_form_with_the_specs_metadata() {
        let mut e = from_json_map(&stored_spec()).unwrap();
        e.set_extension("sequenceid", "1");
        e.set_extension("flag", true);
        e.data = Some(br#"{ "conditions": [{"type": "Applied", "status": "True"}], "b": 1, "a": [] }"#.to_vec());
        // Without the spec's metadata, the event's own (a JSON string) becomes an object.
        let text = status_json(&e, None).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text.get()).unwrap(),
            to_json_map(&e).unwrap()
        );
        // With it, it replaces the event's.
        let spec_meta = RawValue::from_string(r#"{"name":"from-spec"}"#.into()).unwrap();
        let text = status_json(&e, Some(&spec_meta)).unwrap();
        let mut expected = to_json_map(&e).unwrap();
        expected["metadata"] = json!({"name": "from-spec"});
        assert_eq!(serde_json::from_str::<Value>(text.get()).unwrap(), expected);
        // The top-level keys in a JSON map's order, as Maestro writes them; `data` as sent.
        let at = |key: &str| text.get().find(&format!("\"{key}\":")).unwrap();
        assert!(at("data") < at("id") && at("id") < at("metadata") && at("metadata") < at("specversion"));
        assert!(text.get().contains(r#""b": 1, "a": []"#));
        e.data = Some(b"{not json".to_vec());
        assert!(matches!(status_json(&e, None), Err(PayloadError::Data(_))));
    }

    #[test]
    fn malformed_stored_events_are_errors() {
        assert_eq!(from_json_map(&json!([])), Err(PayloadError::NotAnObject));
        assert_eq!(from_json_map(&json!({"id": "x"})), Err(PayloadError::Missing("source")));
        let mut bad = stored_spec();
        bad["time"] = "yesterday".into();
        assert!(matches!(from_json_map(&bad), Err(PayloadError::Time(_))));
    }
}
