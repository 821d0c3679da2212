//! Spec resync (`docs/protocol.md` §5.1): compare what the agent holds with what the sources
//! list, and send the agent what it is missing, what is newer, what is being deleted, and a
//! delete for everything it holds that no source has any more.

use std::collections::HashMap;

use conductor_plugin_sdk::ocm::{DataType, OcmExtensions, ResourceVersionList, SubResource, actions, extensions};
use conductor_plugin_sdk::{CloudEvent, Error};

/// Why a resync request could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResyncError {
    #[error("failed to find service for data type {0}")]
    NoService(String),
    #[error("failed to get clustername extension: {0}")]
    ClusterName(#[source] conductor_plugin_sdk::ExtensionError),
    #[error("failed to decode resync request payload: {0}")]
    Payload(String),
    #[error("failed to list {data_type} from plugin {plugin}: {error}")]
    List {
        data_type: String,
        plugin: String,
        #[source]
        error: Error,
    },
}

/// Parses the agent's `{"resourceVersions": […]}`; the payload is required.
pub fn agent_versions(event: &CloudEvent) -> Result<HashMap<String, i64>, ResyncError> {
    let data = event
        .data
        .as_deref()
        .filter(|d| !d.is_empty())
        .ok_or_else(|| ResyncError::Payload("the event has no data; want {\"resourceVersions\":[…]}".to_owned()))?;
    let list: ResourceVersionList = serde_json::from_slice(data).map_err(|e| ResyncError::Payload(e.to_string()))?;
    Ok(list
        .resource_versions
        .into_iter()
        .map(|v| (v.resource_id, v.resource_version))
        .collect())
}

/// A resource the agent holds that no source listed, with what the hub last said about it.
pub struct Gone {
    pub resource_id: String,
    pub agent_version: i64,
    /// `(source, metadata)` of the last spec event sent for it, when remembered.
    pub last_known: Option<(String, String)>,
}

/// The events answering a resync: listed events the agent needs, re-typed as
/// `resync_response`, followed by synthetic deletes for the resources in `gone`.
pub fn plan(
    data_type: &DataType,
    cluster: &str,
    listed: Vec<CloudEvent>,
    agent: &HashMap<String, i64>,
) -> (Vec<CloudEvent>, Vec<String>) {
    let response_type = data_type.event_type(SubResource::Spec, actions::RESYNC_RESPONSE);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for mut event in listed {
        event.ty = response_type.clone();
        if let Ok(id) = event.resource_id() {
            seen.insert(id.to_owned());
        }
        if event.deletion_timestamp().is_some() {
            out.push(event);
            continue;
        }
        let (Ok(id), Ok(current)) = (event.resource_id(), event.resource_version()) else {
            tracing::warn!(cluster, %data_type, id = %event.id, "listed event without a readable resourceid/resourceversion: skipped");
            continue;
        };
        let held = agent.get(id).copied().unwrap_or(0);
        if current == 0 || current > held {
            out.push(event);
        }
    }
    let mut gone: Vec<String> = agent.keys().filter(|id| !seen.contains(*id)).cloned().collect();
    gone.sort();
    (out, gone)
}

/// The delete for a resource only the agent holds: `deletiontimestamp` now, no data, and —
/// unlike upstream — the `resourceversion` the agent reported (work agents need it to decode the
/// event) and the last known `metadata` (so the agent matches the right work by name).
pub fn synthetic_delete(data_type: &DataType, cluster: &str, gone: &Gone) -> CloudEvent {
    let (source, metadata) = match &gone.last_known {
        Some((source, meta)) => (source.as_str(), Some(meta.as_str())),
        None => ("source", None),
    };
    let mut e = CloudEvent::new(
        uuid::Uuid::new_v4().to_string(),
        source,
        data_type.event_type(SubResource::Spec, actions::RESYNC_RESPONSE),
    );
    let now = chrono::Utc::now();
    e.time = Some(now);
    e.set_extension(extensions::RESOURCE_ID, gone.resource_id.as_str());
    e.set_extension(extensions::CLUSTER_NAME, cluster);
    e.set_extension(extensions::ORIGINAL_SOURCE, "");
    e.set_extension(extensions::DELETION_TIMESTAMP, now);
    e.set_resource_version(data_type, gone.agent_version);
    if let Some(meta) = metadata {
        e.set_extension(extensions::METADATA, meta);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::ExtensionValue;
    use conductor_plugin_sdk::ocm::data_types::{LEASES, MANIFEST_BUNDLES};

    fn listed(dt: &DataType, id: &str, version: i64, deleting: bool) -> CloudEvent {
        let mut e = CloudEvent::new(id, "kube", dt.event_type(SubResource::Spec, actions::CREATE_REQUEST));
        e.set_extension("resourceid", id);
        e.set_extension("clustername", "c1");
        e.set_resource_version(dt, version);
        if deleting {
            e.set_extension("deletiontimestamp", chrono::Utc::now());
        }
        e
    }

    fn ids(events: &[CloudEvent]) -> Vec<&str> {
        events.iter().map(|e| e.resource_id().unwrap()).collect()
    }

    #[test]
    fn empty_agent_list_gets_everything() {
        let dt = DataType::parse(MANIFEST_BUNDLES).unwrap();
        let (out, gone) = plan(
            &dt,
            "c1",
            vec![listed(&dt, "a", 3, false), listed(&dt, "b", 1, false)],
            &HashMap::new(),
        );
        assert_eq!(ids(&out), ["a", "b"]);
        assert!(out.iter().all(|e| e.ty.ends_with(".spec.resync_response")));
        assert!(gone.is_empty());
    }

    #[test]
    fn same_version_is_skipped_older_is_resent_deleting_always_sent() {
        let dt = DataType::parse(LEASES).unwrap();
        let agent = [("a".to_owned(), 5), ("b".to_owned(), 4), ("c".to_owned(), 9)].into();
        let listed = vec![
            listed(&dt, "a", 5, false),
            listed(&dt, "b", 7, false),
            listed(&dt, "c", 9, true),
        ];
        let (out, gone) = plan(&dt, "c1", listed, &agent);
        assert_eq!(ids(&out), ["b", "c"]);
        assert!(gone.is_empty());
    }

    #[test]
    fn version_zero_is_always_sent() {
        let dt = DataType::parse(LEASES).unwrap();
        let agent = [("a".to_owned(), 5)].into();
        let (out, _) = plan(&dt, "c1", vec![listed(&dt, "a", 0, false)], &agent);
        assert_eq!(ids(&out), ["a"]);
    }

    #[test]
    fn agent_only_resources_get_a_synthetic_delete_with_their_version() {
        let dt = DataType::parse(MANIFEST_BUNDLES).unwrap();
        let agent = [("gone".to_owned(), 3), ("kept".to_owned(), 1)].into();
        let (_, gone) = plan(&dt, "c1", vec![listed(&dt, "kept", 1, false)], &agent);
        assert_eq!(gone, ["gone"]);
        let e = synthetic_delete(
            &dt,
            "c1",
            &Gone {
                resource_id: "gone".into(),
                agent_version: 3,
                last_known: Some(("kube".into(), "{\"name\":\"w1\"}".into())),
            },
        );
        assert_eq!(e.extension("resourceversion"), Some(&ExtensionValue::Integer(3)));
        assert_eq!(e.metadata_json(), Some("{\"name\":\"w1\"}"));
        assert_eq!(e.source, "kube");
        assert!(e.deletion_timestamp().is_some());
        assert!(e.data.is_none() && e.data_content_type.is_none());
        assert_eq!(e.cluster_name(), Ok("c1"));
    }

    #[test]
    fn the_payload_is_required() {
        let mut e = CloudEvent::new("1", "agent", "t");
        assert!(matches!(agent_versions(&e), Err(ResyncError::Payload(_))));
        e.data = Some(b"not json".to_vec());
        assert!(matches!(agent_versions(&e), Err(ResyncError::Payload(_))));
        e.data = Some(br#"{"resourceVersions":null}"#.to_vec());
        assert!(agent_versions(&e).unwrap().is_empty());
    }
}
