//! A `resources` row as the spec event agents receive (`docs/maestro-database.md` §6.2 step 4, §9).

use chrono::{DateTime, Utc};
use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::extensions::{CLUSTER_NAME, DELETION_TIMESTAMP, METADATA, RESOURCE_ID};
use conductor_plugin_sdk::ocm::{DataType, OcmExtensions, SubResource, data_types};
use serde_json::Value;

use crate::SOURCE;
use crate::payload::{PayloadError, from_json_map};

/// The columns of a `resources` row the plugin reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRow {
    pub id: String,
    pub consumer_name: String,
    pub version: i64,
    /// The originating client's source id (copied into `StatusDelete` events).
    pub source: String,
    pub payload: Value,
    pub status: Option<Value>,
    pub created_at: Option<DateTime<Utc>>,
    pub deleted_at: Option<DateTime<Utc>>,
}

/// How a row is read: `Get` (one resource, for the spec flow) stamps the row's timestamps into
/// the work's metadata; `List` (resync) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    Get,
    List,
}

/// The row's payload as Maestro's `Get` returns it: the work's metadata stamped with the row's
/// `creationTimestamp` and, while soft-deleted, `deletionTimestamp` (RFC 3339).
pub fn stamped_payload(row: &ResourceRow) -> Value {
    let mut payload = row.payload.clone();
    if let Some(meta) = payload.get_mut(METADATA).and_then(Value::as_object_mut) {
        let stamp = |t: &DateTime<Utc>| Value::from(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        if let Some(t) = &row.created_at {
            meta.insert("creationTimestamp".into(), stamp(t));
        }
        if let Some(t) = &row.deleted_at {
            meta.insert("deletionTimestamp".into(), stamp(t));
        }
    }
    payload
}

/// The spec event for `row`: the stored event, with `source = maestro`, `resourceid` = row id,
/// integer `resourceversion` = row version, `clustername` = consumer; while soft-deleted,
/// `deletiontimestamp` = `deleted_at` and no data.
pub fn spec_event(row: &ResourceRow, action: &str, read: Read) -> Result<CloudEvent, PayloadError> {
    let payload = match read {
        Read::Get => stamped_payload(row),
        Read::List => row.payload.clone(),
    };
    let mut e = from_json_map(&payload)?;
    let dt = DataType::parse(data_types::MANIFEST_BUNDLES).expect("a valid data type");
    e.ty = dt.event_type(SubResource::Spec, action);
    e.source = SOURCE.to_owned();
    e.set_extension(RESOURCE_ID, row.id.as_str());
    e.set_resource_version(&dt, row.version);
    e.set_extension(CLUSTER_NAME, row.consumer_name.as_str());
    if let Some(t) = row.deleted_at {
        e.set_extension(DELETION_TIMESTAMP, t);
        e.clear_data();
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::ExtensionValue;
    use serde_json::json;

    pub fn row() -> ResourceRow {
        ResourceRow {
            id: "3f9c1a52-0000-4000-8000-000000000001".into(),
            consumer_name: "cluster1".into(),
            version: 2,
            source: "source-work-client-ab12c".into(),
            payload: json!({
                "specversion": "1.0", "id": "e-1", "source": "source-work-client-ab12c",
                "type": "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
                "datacontenttype": "application/json", "data": {"manifests": []},
                "metadata": {"name": "nginx"}, "resourceid": "stale", "resourceversion": 1, "clustername": "stale"
            }),
            status: None,
            created_at: DateTime::from_timestamp(1_748_779_200, 0),
            deleted_at: None,
        }
    }

    #[test]
    fn the_row_decides_id_version_cluster_and_source() {
        let e = spec_event(&row(), "update_request", Read::List).unwrap();
        assert_eq!(
            e.ty,
            "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.update_request"
        );
        assert_eq!(e.source, "maestro");
        assert_eq!(e.resource_id(), Ok("3f9c1a52-0000-4000-8000-000000000001"));
        assert_eq!(e.extension("resourceversion"), Some(&ExtensionValue::Integer(2)));
        assert_eq!(e.cluster_name(), Ok("cluster1"));
        assert!(e.data.is_some() && e.deletion_timestamp().is_none());
        let meta: Value = serde_json::from_str(e.metadata_json().unwrap()).unwrap();
        assert!(
            meta.get("creationTimestamp").is_none(),
            "List does not stamp timestamps"
        );
    }

    #[test]
    fn soft_deleted_rows_carry_the_deletion_time_and_no_data() {
        let mut r = row();
        r.deleted_at = DateTime::from_timestamp(1_748_782_800, 0);
        let e = spec_event(&r, "delete_request", Read::Get).unwrap();
        assert_eq!(e.deletion_timestamp(), r.deleted_at);
        assert!(e.data.is_none() && e.data_content_type.is_none());
        let meta: Value = serde_json::from_str(e.metadata_json().unwrap()).unwrap();
        assert_eq!(meta["creationTimestamp"], "2025-06-01T12:00:00Z");
        assert_eq!(meta["deletionTimestamp"], "2025-06-01T13:00:00Z");
    }
}
