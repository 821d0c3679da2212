//! Conditions in a status as the work agent reports it (`{"conditions": [{"type", "status", …}]}`).

use serde_json::Value;

use super::extensions::{CLUSTER_NAME, RESOURCE_ID};
use crate::{CloudEvent, Error};

/// The condition a work agent sets once it has deleted a resource from its cluster.
pub const DELETED: &str = "Deleted";

/// Whether `status` (an object with a `conditions` list) holds the condition `kind` with status
/// `"True"`.
pub fn is_true(status: &Value, kind: &str) -> bool {
    status["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// The status an agent reports (a `status.update_request`'s data): a JSON object whose
/// `conditions`, when present, is a list. Anything else is [`Error::Invalid`] naming the
/// resource (`status of cluster1/<id> is not JSON: …`), as the Python and JavaScript SDKs'
/// `status_of` and `statusOf` answer.
pub fn status_of(event: &CloudEvent) -> Result<Value, Error> {
    let name = |key: &str| event.extension_str(key).unwrap_or("?").to_owned();
    let what = format!("status of {}/{}", name(CLUSTER_NAME), name(RESOURCE_ID));
    let status: Value = serde_json::from_slice(event.data.as_deref().unwrap_or_default())
        .map_err(|e| Error::Invalid(format!("{what} is not JSON: {e}")))?;
    if !status.is_object() || !(status["conditions"].is_array() || status["conditions"].is_null()) {
        return Err(Error::Invalid(format!(
            "{what} is not a status (want an object with a `conditions` list)"
        )));
    }
    Ok(status)
}

/// Whether the agent reports the resource deleted: the condition `Deleted=True`.
pub fn is_deleted(status: &Value) -> bool {
    is_true(status, DELETED)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_status_is_an_object_with_a_conditions_list() {
        let mut e = CloudEvent::new("1", "cluster1-work-agent", "a.v1.things.status.update_request");
        e.set_extension(CLUSTER_NAME, "cluster1");
        e.set_extension(RESOURCE_ID, "web-id");
        for (data, ok) in [
            (&br#"{"conditions":[]}"#[..], true),
            (b"{}", true),
            (b"[1]", false),
            (b"{", false),
        ] {
            e.data = Some(data.to_vec());
            assert_eq!(status_of(&e).is_ok(), ok, "{}", String::from_utf8_lossy(data));
        }
        e.data = Some(br#"{"conditions": 3}"#.to_vec());
        assert_eq!(
            status_of(&e),
            Err(Error::Invalid(
                "status of cluster1/web-id is not a status (want an object with a `conditions` list)".into()
            ))
        );
        e.data = None;
        assert!(
            matches!(status_of(&e), Err(Error::Invalid(m)) if m.starts_with("status of cluster1/web-id is not JSON"))
        );
    }

    #[test]
    fn deleted_only_when_the_condition_is_true() {
        assert!(is_deleted(
            &json!({"conditions": [{"type": "Applied", "status": "True"}, {"type": "Deleted", "status": "True"}]})
        ));
        assert!(!is_deleted(
            &json!({"conditions": [{"type": "Deleted", "status": "False"}]})
        ));
        assert!(!is_deleted(
            &json!({"conditions": [{"type": "Applied", "status": "True"}]})
        ));
        assert!(!is_deleted(&json!({"conditions": "Deleted"})));
        assert!(!is_deleted(&json!(null)));
    }
}
