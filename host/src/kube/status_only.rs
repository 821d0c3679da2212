//! Whether a change of a watched object touched its status alone: what a watch asked to skip
//! status-only changes (`kube.watch-with`) keeps in its cache but does not hand to the plugin.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::object::Object;

/// Whether `after` differs from `before` only in its `status`, `metadata.resourceVersion` and
/// `metadata.managedFields`: what the API server changes when someone writes the status alone.
pub fn only_status_changed(before: &Object, after: &Object) -> bool {
    // Every field of the metadata is named, so a field k8s-openapi adds is compared or left out
    // here on purpose, not forgotten.
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = &before.metadata;
    let now = &after.metadata;
    let same_metadata = *annotations == now.annotations
        && *creation_timestamp == now.creation_timestamp
        && *deletion_grace_period_seconds == now.deletion_grace_period_seconds
        && *deletion_timestamp == now.deletion_timestamp
        && *finalizers == now.finalizers
        && *generate_name == now.generate_name
        && *generation == now.generation
        && *labels == now.labels
        && *name == now.name
        && *namespace == now.namespace
        && *owner_references == now.owner_references
        && *self_link == now.self_link
        && *uid == now.uid;
    same_metadata && before.same_but_status(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(spec: serde_json::Value, status: serde_json::Value, resource_version: &str) -> Object {
        Object::from_json(
            &serde_json::json!({
                "apiVersion": "work.open-cluster-management.io/v1",
                "kind": "ManifestWork",
                "metadata": {
                    "name": "w", "namespace": "c1", "uid": "u1", "generation": 1,
                    "resourceVersion": resource_version, "labels": {"a": "b"},
                    "managedFields": [{"manager": resource_version}],
                },
                "spec": spec,
                "status": status,
            })
            .to_string(),
        )
        .expect("a ManifestWork")
    }

    #[test]
    fn a_new_status_alone_is_a_status_only_change() {
        let before = work(serde_json::json!({"n": 1}), serde_json::json!({}), "1");
        let after = work(
            serde_json::json!({"n": 1}),
            serde_json::json!({"conditions": [{"type": "Applied"}]}),
            "2",
        );
        assert!(only_status_changed(&before, &after));
    }

    #[test]
    fn a_change_of_spec_or_metadata_is_not() {
        let before = work(serde_json::json!({"n": 1}), serde_json::json!({}), "1");
        let spec = work(serde_json::json!({"n": 2}), serde_json::json!({}), "2");
        assert!(!only_status_changed(&before, &spec));
        let mut generation = before.clone();
        generation.metadata.generation = Some(2);
        assert!(!only_status_changed(&before, &generation));
        let mut labels = before.clone();
        labels.metadata.labels = None;
        assert!(!only_status_changed(&before, &labels));
        let mut finalizers = before.clone();
        finalizers.metadata.finalizers = Some(vec!["f".into()]);
        assert!(!only_status_changed(&before, &finalizers));
        let mut deleting = before.clone();
        deleting.metadata.deletion_timestamp = serde_json::from_value(serde_json::json!("2026-12-06T00:00:00Z")).ok();
        assert!(deleting.metadata.deletion_timestamp.is_some());
        assert!(!only_status_changed(&before, &deleting));
        let mut field = serde_json::from_str::<serde_json::Value>(before.json()).unwrap();
        field["extra"] = serde_json::json!(true);
        let field = Object::from_json(&field.to_string()).unwrap();
        assert!(!only_status_changed(&before, &field));
        assert!(!only_status_changed(&field, &before));
    }
}
