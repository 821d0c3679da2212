//! A watched object as the API server sent it: its JSON kept whole, its metadata read from it.
//!
//! A plugin is handed each watched object as JSON. Decoding it into a [`kube::api::DynamicObject`]
//! (a tree of `serde_json::Value`s) only to print it again cost the watch a tree of allocations
//! per change, and the cache a tree per object. An [`Object`] keeps the text the API server sent,
//! reads the metadata the watch and its cache need (the `managedFields` skipped, not decoded),
//! and notes where each other top-level field lies in the text, so that a change of the status
//! alone can be told by comparing text ([`Object::same_but_status`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A watched object: its JSON as sent, and its metadata.
#[derive(Clone)]
pub struct Object {
    /// The object's metadata, `managedFields` left out (it stays in [`Object::json`]).
    pub metadata: ObjectMeta,
    json: Box<str>,
    /// The top-level fields other than `metadata` and `status`, by name, with where their values
    /// lie in `json`.
    rest: Vec<(String, Range<usize>)>,
}

impl Object {
    /// Reads an object from its JSON.
    pub fn from_json(json: &str) -> serde_json::Result<Self> {
        serde_json::from_str(json)
    }

    /// The object as the API server sent it.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Whether the fields of `self` and `other` other than `metadata` and `status` are the same
    /// text. Text that differs may still mean the same (another order of keys, other spaces), so
    /// `false` can be said of equal fields, never `true` of different ones; the API server prints
    /// an unchanged field the same way each time.
    pub fn same_but_status(&self, other: &Object) -> bool {
        self.rest.len() == other.rest.len()
            && self
                .rest
                .iter()
                .zip(&other.rest)
                .all(|((name, at), (other_name, other_at))| {
                    name == other_name && self.json[at.clone()] == other.json[other_at.clone()]
                })
    }

    fn from_raw(raw: Box<RawValue>) -> serde_json::Result<Self> {
        let json: Box<str> = raw.into();
        let fields: BTreeMap<Cow<'_, str>, &RawValue> = serde_json::from_str(&json)?;
        let metadata = match fields.get("metadata") {
            Some(metadata) => serde_json::from_str::<Metadata>(metadata.get())?.into(),
            None => ObjectMeta::default(),
        };
        let start = json.as_ptr() as usize;
        let rest = fields
            .iter()
            .filter(|(name, _)| !matches!(name.as_ref(), "metadata" | "status"))
            .map(|(name, value)| {
                let at = value.get().as_ptr() as usize - start;
                (name.to_string(), at..at + value.get().len())
            })
            .collect();
        Ok(Self { metadata, json, rest })
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Self::from_raw(raw).map_err(D::Error::custom)
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("namespace", &self.metadata.namespace)
            .field("name", &self.metadata.name)
            .field("resource_version", &self.metadata.resource_version)
            .field("bytes", &self.json.len())
            .finish()
    }
}

impl kube::Resource for Object {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `ObjectMeta` as read from a watched object: every field but `managedFields`, which the
/// decoder skips (it is the larger part of a written object's metadata, and nothing here reads
/// it).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Metadata {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<Metadata> for ObjectMeta {
    fn from(m: Metadata) -> Self {
        // Every field named, so a field k8s-openapi adds is a compile error here, not a field
        // silently dropped.
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORK: &str = r#"{"apiVersion":"work.open-cluster-management.io/v1","kind":"ManifestWork",
        "metadata":{"name":"w","namespace":"c1","uid":"u1","generation":2,"resourceVersion":"7",
                    "labels":{"a":"b"},"finalizers":["f"],
                    "managedFields":[{"manager":"m","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
        "spec":{"workload":{"manifests":[{"kind":"ConfigMap","data":{"k":"v \"quoted\""}}]}},
        "status":{"conditions":[{"type":"Applied"}]}}"#;

    #[test]
    fn an_object_keeps_its_text_and_reads_its_metadata() {
        let object = Object::from_json(WORK).unwrap();
        assert_eq!(object.json(), WORK);
        let m = &object.metadata;
        assert_eq!(m.name.as_deref(), Some("w"));
        assert_eq!(m.namespace.as_deref(), Some("c1"));
        assert_eq!(m.generation, Some(2));
        assert_eq!(m.resource_version.as_deref(), Some("7"));
        assert_eq!(m.labels.as_ref().unwrap()["a"], "b");
        assert_eq!(m.finalizers.as_deref(), Some(&["f".to_owned()][..]));
        assert_eq!(m.managed_fields, None, "managedFields are skipped, kept in the text");
        let rest: Vec<_> = object
            .rest
            .iter()
            .map(|(name, at)| (name.as_str(), &object.json[at.clone()]))
            .collect();
        assert_eq!(
            rest,
            [
                ("apiVersion", r#""work.open-cluster-management.io/v1""#),
                ("kind", r#""ManifestWork""#),
                (
                    "spec",
                    r#"{"workload":{"manifests":[{"kind":"ConfigMap","data":{"k":"v \"quoted\""}}]}}"#
                ),
            ]
        );
    }

    #[test]
    fn objects_in_a_list_and_a_watch_event_keep_their_text() {
        let list: kube::core::ObjectList<Object> = serde_json::from_str(&format!(
            r#"{{"apiVersion":"v1","kind":"List","metadata":{{}},"items":[{WORK}]}}"#
        ))
        .unwrap();
        assert_eq!(list.items[0].json(), WORK);
        let event: kube::core::WatchEvent<Object> =
            serde_json::from_str(&format!(r#"{{"type":"MODIFIED","object":{WORK}}}"#)).unwrap();
        let kube::core::WatchEvent::Modified(object) = event else {
            panic!("a modification")
        };
        assert_eq!(object.json(), WORK);
    }

    #[test]
    fn bad_json_is_an_error() {
        assert!(Object::from_json(r#"{"metadata":{"name":7}}"#).is_err());
        assert!(Object::from_json("[1]").is_err());
    }

    #[test]
    fn fields_beside_the_status_compare_as_text() {
        let object = Object::from_json(WORK).unwrap();
        let other_status = Object::from_json(&WORK.replace("Applied", "Available")).unwrap();
        assert!(object.same_but_status(&other_status));
        let other_spec = Object::from_json(&WORK.replace(r#""k":"v"#, r#""k":"w"#)).unwrap();
        assert!(!object.same_but_status(&other_spec));
        let no_spec = Object::from_json(r#"{"kind":"ManifestWork","metadata":{"name":"w"}}"#).unwrap();
        assert!(!object.same_but_status(&no_spec));
        assert!(!no_spec.same_but_status(&object));
    }
}
