//! Conditions in a status as the work agent reports it (`{"conditions": [{"type", "status", …}]}`).

use serde_json::Value;

/// The condition a work agent sets once it has deleted a resource from its cluster.
pub const DELETED: &str = "Deleted";

/// Whether `status` (an object with a `conditions` list) holds the condition `kind` with status
/// `"True"`.
pub fn is_true(status: &Value, kind: &str) -> bool {
    status["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
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
