//! What to do with a work agent's status update for a Maestro resource (`docs/maestro-database.md` §5.2).
//! The caller reads the row under the `resource_status` advisory lock, asks [`decide`], and
//! writes what the decision says.

use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::extensions::{METADATA, SEQUENCE_ID};
use conductor_plugin_sdk::ocm::{OcmExtensions, conditions};
use serde_json::Value;

use crate::payload::{PayloadError, to_json_map};
use crate::sequence::{SequenceError, is_newer};

/// What of a `resources` row a status update is judged against
/// ([`crate::sql::READ_STATUS_TARGET`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusTarget {
    pub consumer_name: String,
    pub version: i64,
    /// The `metadata` of the row's payload (the spec's), copied into the stored status.
    pub metadata: Option<Value>,
    pub status: Option<Value>,
}

/// The decision for one status update.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No such resource (already hard-deleted): succeed, write nothing.
    UnknownResource,
    /// The agent finished deleting: insert a `StatusDelete` status event (with the row's
    /// `source` and `payload` and this status) plus NOTIFY, then hard-delete the row.
    Delete { status: Value },
    /// Replace `resources.status` with this, then insert a `StatusUpdate` event plus NOTIFY.
    Update { status: Value },
    /// Succeed, write nothing: the update is stale, older or identical.
    Skip(Skip),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The agent reported another version of the spec than the row has.
    OtherVersion,
    /// The stored status is the same.
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
    let mut status = to_json_map(event)?;
    if let (Some(map), Some(meta)) = (status.as_object_mut(), &row.metadata) {
        map.insert(METADATA.to_owned(), meta.clone());
    }
    if conditions::is_deleted(&status["data"]) {
        return Ok(Decision::Delete { status });
    }
    if row.version != version {
        return Ok(Decision::Skip(Skip::OtherVersion));
    }
    if row.status.as_ref() == Some(&status) {
        return Ok(Decision::Skip(Skip::Unchanged));
    }
    let new_sequence = event
        .extension_str(SEQUENCE_ID)
        .map_err(|_| StatusError::Missing("sequenceid"))?;
    let stored_sequence = match &row.status {
        None => None,
        Some(stored) => Some(
            stored[SEQUENCE_ID]
                .as_str()
                .ok_or_else(|| StatusError::StoredWithoutSequence(id.to_owned()))?,
        ),
    };
    if !is_newer(new_sequence, stored_sequence)? {
        return Ok(Decision::Skip(Skip::OlderSequence));
    }
    Ok(Decision::Update { status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> StatusTarget {
        StatusTarget {
            consumer_name: "cluster1".into(),
            version: 2,
            metadata: Some(json!({"name": "nginx", "namespace": "cluster1"})),
            status: None,
        }
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
        assert_eq!(status["metadata"], json!({"name": "nginx", "namespace": "cluster1"}));
        assert_eq!(status["data"]["conditions"][0]["type"], "Applied");
        assert_eq!(status["source"], "cluster1-work-agent");
        assert!(status["sequenceid"].is_string());

        let mut stored = row();
        stored.status = Some(status.clone());
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
        stored.status = Some(json!({"data": {}}));
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
        assert_eq!(status["metadata"]["name"], "nginx");
    }
}
