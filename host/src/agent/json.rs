//! The CloudEvents JSON format (`specversion`, `id`, `source`, `type`, the optional attributes and
//! the extensions as top-level keys, the payload as `data` or `data_base64`), read into the
//! SDK's event and written from it. Reading checks what OCM needs before anything is sent: the
//! required attributes, a `clustername`, a type that parses, and the spelling of every
//! attribute (`crate::attributes`).

use base64::Engine as _;
use conductor_plugin_sdk::event::{format_timestamp, is_valid_extension_name};
use conductor_plugin_sdk::ocm::{EventType, OcmExtensions, extensions};
use conductor_plugin_sdk::{CloudEvent, ExtensionValue, SPEC_VERSION, Timestamp};
use serde_json::{Map, Value};

use crate::attributes;

/// Why a JSON document is not an OCM CloudEvent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JsonError {
    #[error("a CloudEvent is a JSON object")]
    NotAnObject,
    #[error("attribute {0:?} is missing{1}")]
    Missing(&'static str, &'static str),
    #[error("attribute {found:?} is spelt {expected:?}: {why}")]
    Misspelt {
        found: String,
        expected: &'static str,
        why: &'static str,
    },
    #[error("attribute {0:?}: an extension's name is lowercase letters and digits")]
    BadName(String),
    #[error("attribute {key:?} must be {wanted}")]
    WrongType { key: String, wanted: &'static str },
    #[error("attribute {key:?}: {reason}")]
    Invalid { key: String, reason: String },
}

const WHY_PREFIX: &str = "in a CloudEvent's JSON an attribute is a top-level key without a prefix (`ce-` is its key on the gRPC wire, which conductor adds)";
const WHY_CASE: &str = "attribute names are lowercase letters and digits";

/// Reads a CloudEvent from its JSON format.
pub fn from_json(value: &Value) -> Result<CloudEvent, JsonError> {
    let object = value.as_object().ok_or(JsonError::NotAnObject)?;
    // Misspellings first: `specVersion` is named as such, not as a missing `specversion`.
    for key in object.keys() {
        if let Some(expected) = attributes::intended(key)
            && expected != key
            && !matches!(key.as_str(), "data" | "data_base64")
        {
            let why = if key.to_ascii_lowercase().starts_with("ce") && !expected.starts_with("ce") {
                WHY_PREFIX
            } else {
                WHY_CASE
            };
            return Err(JsonError::Misspelt {
                found: key.clone(),
                expected,
                why,
            });
        }
    }
    let required = |key: &'static str| -> Result<String, JsonError> {
        match object.get(key) {
            None => Err(JsonError::Missing(key, "")),
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(_) => Err(JsonError::WrongType {
                key: key.to_owned(),
                wanted: "a non-empty string",
            }),
        }
    };
    let spec_version = required("specversion")?;
    if spec_version != SPEC_VERSION {
        return Err(JsonError::Invalid {
            key: "specversion".into(),
            reason: format!("OCM speaks CloudEvents {SPEC_VERSION}, not {spec_version}"),
        });
    }
    let mut event = CloudEvent::new(required("id")?, required("source")?, required("type")?);
    let ty = EventType::parse(&event.ty).map_err(|e| JsonError::Invalid {
        key: "type".into(),
        reason: format!("{e} (an OCM type is <group>.<version>.<resource>.<spec|status>.<action>)"),
    })?;
    for (key, value) in object {
        match key.as_str() {
            "specversion" | "id" | "source" | "type" | "data" | "data_base64" => {}
            "datacontenttype" => event.data_content_type = Some(string(key, value)?),
            "dataschema" => event.data_schema = Some(string(key, value)?),
            "subject" => event.subject = Some(string(key, value)?),
            "time" => event.time = Some(time(key, value)?),
            _ if !is_valid_extension_name(key) || key.bytes().any(|b| b.is_ascii_uppercase()) => {
                return Err(JsonError::BadName(key.clone()));
            }
            extensions::RESOURCE_VERSION => match value {
                // The wire type follows the data type: an integer for manifest bundles.
                Value::Number(n) => {
                    let version = n.as_i64().ok_or_else(|| JsonError::WrongType {
                        key: key.clone(),
                        wanted: "an integer",
                    })?;
                    event.set_resource_version(&ty.data_type, version);
                }
                _ => event.set_extension(key, string(key, value)?),
            },
            extensions::DELETION_TIMESTAMP => event.set_extension(key, time(key, value)?),
            _ => event.set_extension(key, extension(key, value)?),
        }
    }
    if event.extension(extensions::CLUSTER_NAME).is_none() {
        return Err(JsonError::Missing(
            extensions::CLUSTER_NAME,
            ": the managed cluster, which every OCM event carries (a top-level key)",
        ));
    }
    event.data = data(object, event.data_content_type.as_deref())?;
    if event.data.is_some() && event.data_content_type.is_none() {
        event.data_content_type = Some("application/json".into());
    }
    Ok(event)
}

fn string(key: &str, value: &Value) -> Result<String, JsonError> {
    value.as_str().map(str::to_owned).ok_or_else(|| JsonError::WrongType {
        key: key.to_owned(),
        wanted: "a string",
    })
}

fn time(key: &str, value: &Value) -> Result<Timestamp, JsonError> {
    let text = string(key, value)?;
    chrono::DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| JsonError::Invalid {
            key: key.to_owned(),
            reason: format!("not an RFC 3339 time: {e}"),
        })
}

fn extension(key: &str, value: &Value) -> Result<ExtensionValue, JsonError> {
    match value {
        Value::String(s) => Ok(ExtensionValue::String(s.clone())),
        Value::Bool(b) => Ok(ExtensionValue::Boolean(*b)),
        Value::Number(n) => n
            .as_i64()
            .and_then(|i| i32::try_from(i).ok())
            .map(ExtensionValue::Integer)
            .ok_or_else(|| JsonError::WrongType {
                key: key.to_owned(),
                wanted: "a 32-bit integer, a string or a boolean",
            }),
        _ => Err(JsonError::WrongType {
            key: key.to_owned(),
            wanted: "a string, an integer or a boolean (an OCM extension holding JSON, as `metadata`, is a string)",
        }),
    }
}

fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_none_or(|ct| ct.contains("json"))
}

fn data(object: &Map<String, Value>, content_type: Option<&str>) -> Result<Option<Vec<u8>>, JsonError> {
    match (object.get("data"), object.get("data_base64")) {
        (Some(_), Some(_)) => Err(JsonError::Invalid {
            key: "data_base64".into(),
            reason: "an event has `data` or `data_base64`, not both".into(),
        }),
        (Some(Value::String(s)), None) if !is_json(content_type) => Ok(Some(s.clone().into_bytes())),
        (Some(value), None) => Ok(Some(value.to_string().into_bytes())),
        (None, Some(value)) => base64::engine::general_purpose::STANDARD
            .decode(string("data_base64", value)?)
            .map(Some)
            .map_err(|e| JsonError::Invalid {
                key: "data_base64".into(),
                reason: e.to_string(),
            }),
        (None, None) => Ok(None),
    }
}

/// Writes `event` in the JSON format (what `from_json` reads back).
pub fn to_json(event: &CloudEvent) -> Value {
    let mut out = Map::new();
    out.insert("specversion".into(), Value::from(event.spec_version.as_str()));
    out.insert("id".into(), Value::from(event.id.as_str()));
    out.insert("source".into(), Value::from(event.source.as_str()));
    out.insert("type".into(), Value::from(event.ty.as_str()));
    for (key, value) in [
        ("datacontenttype", &event.data_content_type),
        ("dataschema", &event.data_schema),
        ("subject", &event.subject),
    ] {
        if let Some(v) = value {
            out.insert(key.into(), Value::from(v.as_str()));
        }
    }
    if let Some(t) = &event.time {
        out.insert("time".into(), Value::from(format_timestamp(t)));
    }
    for (name, value) in &event.extensions {
        let value = match value {
            ExtensionValue::Boolean(b) => Value::from(*b),
            ExtensionValue::Integer(i) => Value::from(*i),
            ExtensionValue::String(s) | ExtensionValue::Uri(s) | ExtensionValue::UriRef(s) => Value::from(s.as_str()),
            ExtensionValue::Bytes(b) => Value::from(base64::engine::general_purpose::STANDARD.encode(b)),
            ExtensionValue::Timestamp(t) => Value::from(format_timestamp(t)),
        };
        out.insert(name.clone(), value);
    }
    if let Some(data) = &event.data {
        let parsed = is_json(event.data_content_type.as_deref())
            .then(|| serde_json::from_slice::<Value>(data).ok())
            .flatten();
        match (parsed, std::str::from_utf8(data)) {
            (Some(value), _) => {
                out.insert("data".into(), value);
            }
            (None, Ok(text)) if !is_json(event.data_content_type.as_deref()) => {
                out.insert("data".into(), Value::from(text));
            }
            _ => {
                out.insert(
                    "data_base64".into(),
                    Value::from(base64::engine::general_purpose::STANDARD.encode(data)),
                );
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hello() -> Value {
        json!({
            "specversion": "1.0", "id": "1", "source": "me",
            "type": "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
            "clustername": "cluster1", "originalsource": "memory", "resourceid": "r1",
            "data": {"metadata": {"name": "hello"}, "manifests": []}
        })
    }

    #[test]
    fn the_example_reads_and_writes_back() {
        let event = from_json(&hello()).unwrap();
        assert_eq!(event.cluster_name(), Ok("cluster1"));
        assert_eq!(event.data_content_type.as_deref(), Some("application/json"));
        assert_eq!(event.data_json::<Value>().unwrap()["metadata"]["name"], "hello");
        assert_eq!(from_json(&to_json(&event)).unwrap(), event);
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agent/hello-work.json");
        let example: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        assert!(from_json(&example).is_ok());
    }

    #[test]
    fn resource_versions_take_the_data_types_wire_type() {
        let mut v = hello();
        v["resourceversion"] = json!(4);
        let e = from_json(&v).unwrap();
        assert_eq!(e.extension("resourceversion"), Some(&ExtensionValue::Integer(4)));
        v["type"] = json!("coordination.k8s.io.v1.leases.spec.update_request");
        let e = from_json(&v).unwrap();
        assert_eq!(
            e.extension("resourceversion"),
            Some(&ExtensionValue::String("4".into()))
        );
    }

    #[test]
    fn misspelt_and_missing_attributes_are_named_with_their_spelling() {
        for wrong in ["ce-clustername", "clusterName", "cluster_name"] {
            let mut v = hello();
            let cluster = v.as_object_mut().unwrap().remove("clustername").unwrap();
            v[wrong] = cluster;
            let err = from_json(&v).unwrap_err();
            assert!(
                matches!(&err, JsonError::Misspelt { found, expected: "clustername", .. } if found == wrong),
                "{err}"
            );
            assert!(err.to_string().contains(r#""clustername""#), "{err}");
        }
        let mut v = hello();
        v.as_object_mut().unwrap().remove("clustername");
        assert!(matches!(from_json(&v), Err(JsonError::Missing("clustername", _))));
        let mut v = hello();
        v.as_object_mut().unwrap().remove("specversion");
        v["specVersion"] = json!("1.0");
        assert!(matches!(
            from_json(&v),
            Err(JsonError::Misspelt {
                expected: "specversion",
                ..
            })
        ));
        let mut v = hello();
        v["My-Thing"] = json!("x");
        assert!(matches!(from_json(&v), Err(JsonError::BadName(_))));
        let mut v = hello();
        v["type"] = json!("works.create");
        assert!(matches!(from_json(&v), Err(JsonError::Invalid { .. })));
    }

    #[test]
    fn binary_payloads_travel_as_base64() {
        let mut e = CloudEvent::new("1", "me", "a.v1.things.spec.create_request");
        e.set_extension("clustername", "c1");
        e.data_content_type = Some("application/octet-stream".into());
        e.data = Some(vec![0, 159, 146]);
        let v = to_json(&e);
        assert!(v.get("data_base64").is_some());
        assert_eq!(from_json(&v).unwrap(), e);
    }
}
