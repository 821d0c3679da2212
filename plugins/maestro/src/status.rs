//! What to do with a work agent's status update for a Maestro resource (`docs/maestro-database.md` §5.2).
//! The caller reads the row under the `resource_status` advisory lock, asks [`decide`], and
//! writes what the decision says.

use std::borrow::Cow;

use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::extensions::SEQUENCE_ID;
use conductor_plugin_sdk::ocm::{OcmExtensions, conditions};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::payload::{PayloadError, status_json};
use crate::sequence::{SequenceError, is_newer};

/// What of a `resources` row a status update is judged against
/// ([`crate::sql::READ_STATUS_TARGETS`]).
#[derive(Debug, Clone)]
pub struct StatusTarget {
    pub consumer_name: String,
    pub version: i64,
    /// The `metadata` of the row's payload (the spec's), copied into the stored status.
    pub metadata: Option<Box<RawValue>>,
    /// The stored status, if any: only its sequence id is judged, so only that is read.
    pub status: Option<StoredStatus>,
}

/// What of a stored status an update is judged against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStatus {
    /// Its `sequenceid`, when that is a string.
    pub sequence: Option<String>,
}

/// A status to store, as JSON text ([`status_json`]).
#[derive(Debug, Clone)]
pub struct Status(pub Box<RawValue>);

impl PartialEq for Status {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// The decision for one status update.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No such resource (already hard-deleted): succeed, write nothing.
    UnknownResource,
    /// The agent finished deleting: insert a `StatusDelete` status event (with the row's
    /// `source` and `payload` and this status) plus NOTIFY, then hard-delete the row.
    Delete { status: Status },
    /// Replace `resources.status` with this, then insert a `StatusUpdate` event plus NOTIFY.
    Update { status: Status },
    /// Succeed, write nothing: the update is stale, older or identical.
    Skip(Skip),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The agent reported another version of the spec than the row has.
    OtherVersion,
    /// The stored status has this update's sequence id: it is this update, sent again.
    Unchanged,
    /// The stored status has a newer (or the same) sequence id.
    OlderSequence,
}

/// A status update that is refused (the agent gets an error and retries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusError {
    #[error("status update without {0}")]
    Missing(&'static str),
    #[error("unmatched consumer name {event:?} for resource {id} of {row:?}")]
    WrongCluster { id: String, event: String, row: String },
    #[error("stored status of resource {0} has no sequenceid")]
    StoredWithoutSequence(String),
    #[error(transparent)]
    Sequence(#[from] SequenceError),
    #[error(transparent)]
    Payload(#[from] PayloadError),
}

/// Decides what a status update does to `found` (the row, read unscoped; `None` if absent).
pub fn decide(event: &CloudEvent, found: Option<&StatusTarget>) -> Result<Decision, StatusError> {
    let cluster = event.cluster_name().map_err(|_| StatusError::Missing("clustername"))?;
    let id = event.resource_id().map_err(|_| StatusError::Missing("resourceid"))?;
    let version = event
        .resource_version()
        .map_err(|_| StatusError::Missing("resourceversion"))?;
    let Some(row) = found else {
        return Ok(Decision::UnknownResource);
    };
    if row.consumer_name != cluster {
        return Err(StatusError::WrongCluster {
            id: id.to_owned(),
            event: cluster.to_owned(),
            row: row.consumer_name.clone(),
        });
    }
    // The agent's event as received, with the spec's metadata (an object) in place of its own.
    let status = Status(status_json(event, row.metadata.as_deref())?);
    if reports_deleted(event) {
        return Ok(Decision::Delete { status });
    }
    if row.version != version {
        return Ok(Decision::Skip(Skip::OtherVersion));
    }
    let new_sequence = event
        .extension_str(SEQUENCE_ID)
        .map_err(|_| StatusError::Missing("sequenceid"))?;
    let stored_sequence = match &row.status {
        None => None,
        Some(stored) => Some(
            stored
                .sequence
                .as_deref()
                .ok_or_else(|| StatusError::StoredWithoutSequence(id.to_owned()))?,
        ),
    };
    // A status is stored with its update's sequence id: the same id is the same update, sent
    // again (the agent retries), skipped without judging the id.
    if stored_sequence == Some(new_sequence) {
        return Ok(Decision::Skip(Skip::Unchanged));
    }
    if !is_newer(new_sequence, stored_sequence)? {
        return Ok(Decision::Skip(Skip::OlderSequence));
    }
    Ok(Decision::Update { status })
}

/// Whether the agent's status (the event's `data`) holds the condition `Deleted=True`
/// ([`conditions::is_deleted`]), read without building the status.
fn reports_deleted(event: &CloudEvent) -> bool {
    #[derive(Deserialize)]
    struct Data<'a> {
        #[serde(borrow, default)]
        conditions: Option<Vec<Condition<'a>>>,
    }
    #[derive(Deserialize)]
    struct Condition<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        status: Option<Cow<'a, str>>,
    }
    let Some(data) = event.data.as_deref() else {
        return false;
    };
    // Only an object has conditions.
    if data.trim_ascii_start().first() != Some(&b'{') {
        return false;
    }
    match serde_json::from_slice::<Data<'_>>(data) {
        Ok(d) => d
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.kind.as_deref() == Some(conditions::DELETED) && c.status.as_deref() == Some("True")),
        // Another shape (a condition that is not an object, a type that is not a string): the
        // whole status decides.
        Err(_) => serde_json::from_slice::<Value>(data).is_ok_and(|v| conditions::is_deleted(&v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> StatusTarget {
        StatusTarget {
            consumer_name: "cluster1".into(),
            version: 2,
            metadata: Some(RawValue::from_string(r#"{"name":"nginx","namespace":"cluster1"}"#.into()).unwrap()),
            status: None,
        }
    }

    fn parsed(status: &Status) -> Value {
        serde_json::from_str(status.0.get()).unwrap()
    }

    fn update(version: i32, sequence: i64, condition: &str) -> CloudEvent {
        let mut e = CloudEvent::new(
            "s-1",
            "cluster1-work-agent",
            "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request",
        );
        e.set_extension("clustername", "cluster1");
        e.set_extension("resourceid", "r-1");
        e.set_extension("resourceversion", version);
        e.set_extension("originalsource", "maestro");
        e.set_extension("sequenceid", (sequence << 22 | 1 << 12).to_string());
        e.set_extension("metadata", r#"{"name":"agent-side"}"#);
        e.set_json_data(&json!({"conditions": [{"type": condition, "status": "True"}]}))
            .unwrap();
        e
    }

    #[test]
    fn a_newer_status_replaces_the_stored_one_with_the_specs_metadata() {
        let Decision::Update { status } = decide(&update(2, 10, "Applied"), Some(&row())).unwrap() else {
            panic!("expected an update");
        };
        let status = parsed(&status);
        assert_eq!(status["metadata"], json!({"name": "nginx", "namespace": "cluster1"}));
        assert_eq!(status["data"]["conditions"][0]["type"], "Applied");
        assert_eq!(status["source"], "cluster1-work-agent");
        assert!(status["sequenceid"].is_string());

        let mut stored = row();
        stored.status = Some(StoredStatus {
            sequence: status["sequenceid"].as_str().map(str::to_owned),
        });
        assert_eq!(
            decide(&update(2, 10, "Applied"), Some(&stored)),
            Ok(Decision::Skip(Skip::Unchanged))
        );
        assert_eq!(
            decide(&update(2, 9, "Available"), Some(&stored)),
            Ok(Decision::Skip(Skip::OlderSequence))
        );
        assert!(matches!(
            decide(&update(2, 11, "Available"), Some(&stored)),
            Ok(Decision::Update { .. })
        ));
    }

    #[test]
    fn an_update_sent_again_is_skipped_even_when_its_sequence_id_is_no_snowflake() {
        // Stored when nothing was: the first status's id is not judged (§5.2 step 10).
        let mut first = update(2, 10, "Applied");
        first.set_extension("sequenceid", "not-a-snowflake");
        let Decision::Update { status } = decide(&first, Some(&row())).unwrap() else {
            panic!("expected an update");
        };
        let status = parsed(&status);
        let mut stored = row();
        stored.status = Some(StoredStatus {
            sequence: status["sequenceid"].as_str().map(str::to_owned),
        });
        // The agent sends it again (its answer was lost): OK, nothing written, not refused.
        assert_eq!(decide(&first, Some(&stored)), Ok(Decision::Skip(Skip::Unchanged)));
        // Another id against it must be judged, and cannot be.
        assert!(matches!(
            decide(&update(2, 11, "Available"), Some(&stored)),
            Err(StatusError::Sequence(_))
        ));
    }

    #[test]
    fn other_versions_unknown_resources_and_wrong_clusters() {
        assert_eq!(
            decide(&update(1, 10, "Applied"), Some(&row())),
            Ok(Decision::Skip(Skip::OtherVersion))
        );
        assert_eq!(decide(&update(2, 10, "Applied"), None), Ok(Decision::UnknownResource));
        let mut elsewhere = row();
        elsewhere.consumer_name = "cluster2".into();
        assert!(matches!(
            decide(&update(2, 10, "Applied"), Some(&elsewhere)),
            Err(StatusError::WrongCluster { .. })
        ));
        let mut no_sequence = update(2, 10, "Applied");
        no_sequence.remove_extension("sequenceid");
        assert_eq!(
            decide(&no_sequence, Some(&row())),
            Err(StatusError::Missing("sequenceid"))
        );
        let mut stored = row();
        stored.status = Some(StoredStatus { sequence: None });
        assert_eq!(
            decide(&update(2, 10, "Applied"), Some(&stored)),
            Err(StatusError::StoredWithoutSequence("r-1".into()))
        );
    }

    #[test]
    fn a_deleted_condition_deletes_whatever_the_version() {
        let Decision::Delete { status } = decide(&update(1, 1, "Deleted"), Some(&row())).unwrap() else {
            panic!("expected a delete");
        };
        assert_eq!(parsed(&status)["metadata"]["name"], "nginx");
    }

    #[test]
    fn deleted_is_read_as_the_whole_status_would_say() {
        let with = |data: &str| {
            let mut e = update(2, 10, "Applied");
            e.data = Some(data.as_bytes().to_vec());
            e
        };
        for (data, deleted) in [
            (
                r#"{"conditions":[{"type":"Applied","status":"True"},{"type":"Deleted","status":"True"}]}"#,
                true,
            ),
            (
                r#"{"resourceStatus":{"x":[1,2]},"conditions":[{"status":"True","type":"Deleted","reason":"Gone"}]}"#,
                true,
            ),
            (r#"{"conditions":[{"type":"Deleted","status":"False"}]}"#, false),
            (r#"{"conditions":null}"#, false),
            (r#"{}"#, false),
            // Shapes the typed reading refuses: the whole status decides.
            (r#"{"conditions":[{"type":"Deleted","status":true}]}"#, false),
            (r#"{"conditions":[7,{"type":"Deleted","status":"True"}]}"#, true),
            (r#"{"conditions":{"type":"Deleted","status":"True"}}"#, false),
            (r#"[[{"type":"Deleted","status":"True"}]]"#, false),
        ] {
            let event = with(data);
            let whole: Value = serde_json::from_str(data).unwrap();
            assert_eq!(reports_deleted(&event), deleted, "{data}");
            assert_eq!(conditions::is_deleted(&whole), deleted, "{data}");
        }
    }
}
