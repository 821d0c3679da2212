//! Cluster registration (`docs/protocol.md` §3.4, §6.3, §7.3): ManagedClusters, CSRs,
//! leases, add-ons, events and token requests, each served to the registration agent from the
//! hub's API server and written back as OCM's own services write them.

use conductor_plugin_sdk::kube::{ApiResource, Selector};
use conductor_plugin_sdk::ocm::{
    DataType, EventType, OcmExtensions, SubResource, actions, codec, conditions, data_types,
};
use conductor_plugin_sdk::{CloudEvent, Error, Host, Identity, Status};
use serde_json::{Value, json};

use crate::SOURCE;
use crate::resources::{CLUSTER_NAME_LABEL, addons, csrs, events, leases, managed_clusters};

/// The annotation the hub's gRPC CSR approver reads the agent's identity from.
pub const CSR_USER_ANNOTATION: &str = "open-cluster-management.io/csr-user";

fn seen_key(data_type: &str, uid: &str) -> String {
    format!("seen/{data_type}/{uid}")
}

/// The metric of the ManagedClusters that joined the hub (exported as
/// `conductor_kube_managed_clusters_joined{plugin}`): with no agent connected while it is above 0,
/// agents cannot reach conductor.
pub const JOINED_CLUSTERS: &str = "kube_managed_clusters_joined";

/// How many ManagedClusters are joined, and which (by uid), kept in `kv` across reloads.
const JOINED_COUNT: conductor_plugin_sdk::KvKey<u64> = conductor_plugin_sdk::KvKey::new("joined-count");

/// Counts the ManagedCluster `uid` as joined or not, and exports the count.
fn count_joined(host: &Host, uid: &str, joined: bool) -> Result<(), Error> {
    let key = format!("joined/{uid}");
    let was = host.kv_get(&key).is_some();
    if was == joined {
        return Ok(());
    }
    let count = JOINED_COUNT.get(host).unwrap_or(0);
    let count = if joined {
        host.kv_set(&key, b"1")?;
        count + 1
    } else {
        host.kv_delete(&key);
        count.saturating_sub(1)
    };
    JOINED_COUNT.set(host, &count)?;
    if let Err(e) = host.gauge_set(JOINED_CLUSTERS, &[], count as f64) {
        host.debug(&format!("metric not updated: {e}"));
    }
    Ok(())
}

fn encode(data_type: &str, object: &Value, action: &str) -> Result<CloudEvent, Error> {
    let dt = DataType::parse(data_type).map_err(|e| Error::Internal(e.to_string()))?;
    codec::kube_object_event(&dt, object, SOURCE, action).map_err(|e| Error::Invalid(format!("{data_type}: {e}")))
}

/// A watched registration object appeared or changed (`deleted` false) or went away: the spec
/// event its cluster's agent hears, if any (a ManagedCluster's removal is not sent, as upstream).
pub fn watched(host: &Host, data_type: &str, object: &Value, deleted: bool) -> Result<Option<CloudEvent>, Error> {
    let Some(uid) = object["metadata"]["uid"].as_str() else {
        return Ok(None);
    };
    if data_type == data_types::MANAGED_CLUSTERS {
        let joined = !deleted && conditions::is_true(&object["status"], "ManagedClusterJoined");
        count_joined(host, uid, joined)?;
    }
    let key = seen_key(data_type, uid);
    let action = if deleted {
        host.kv_delete(&key);
        if data_type == data_types::MANAGED_CLUSTERS {
            return Ok(None);
        }
        actions::DELETE_REQUEST
    } else if host.kv_get(&key).is_some() {
        actions::UPDATE_REQUEST
    } else {
        host.kv_set(&key, b"1")?;
        actions::CREATE_REQUEST
    };
    match encode(data_type, object, action) {
        Ok(e) => Ok(Some(e)),
        // An object no agent can be told about (a CSR without its cluster label): skipped.
        Err(e) => {
            host.debug(&format!("not sent: {e}"));
            Ok(None)
        }
    }
}

/// Every object of `data_type` for `cluster`, as spec events (resync), from the watch caches.
pub fn list(host: &Host, data_type: &str, cluster: &str) -> Result<Vec<CloudEvent>, Error> {
    let by_label = || Selector::labels(format!("{CLUSTER_NAME_LABEL}={cluster}"));
    let (resource, namespace, selector) = match data_type {
        data_types::MANAGED_CLUSTERS => (
            managed_clusters(),
            None,
            Selector::fields(format!("metadata.name={cluster}")),
        ),
        data_types::CSRS => (csrs(), None, by_label()),
        data_types::LEASES => (leases(), Some(cluster), by_label()),
        data_types::ADDONS_V1ALPHA1 => (addons("v1alpha1"), Some(cluster), Selector::default()),
        data_types::ADDONS_V1BETA1 => (addons("v1beta1"), Some(cluster), Selector::default()),
        data_types::TOKEN_REQUESTS => return Ok(vec![]),
        data_types::EVENTS => {
            return Err(Error::from(Status::failure(
                405,
                "MethodNotAllowed",
                "the list operation is not supported for events.k8s.io.v1.events",
            )));
        }
        other => return Err(Error::Invalid(format!("the kube source does not serve {other}"))),
    };
    host.kube()
        .list(&resource, namespace, &selector)?
        .iter()
        .map(|o| encode(data_type, o, actions::CREATE_REQUEST))
        .collect()
}

/// The object an agent sent: a JSON object with `metadata`, stamped with the resource's
/// `apiVersion` and `kind`.
fn object(event: &CloudEvent, resource: &ApiResource) -> Result<Value, Error> {
    let invalid = |why: String| Error::Invalid(format!("{} {}: {why}", resource.plural, event.id));
    let mut object: Value = match event.data.as_deref() {
        Some(d) if !d.is_empty() => serde_json::from_slice(d).map_err(|e| invalid(format!("not JSON: {e}")))?,
        _ => return Err(invalid("no object in the event".into())),
    };
    if !object["metadata"].is_object() || object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        return Err(invalid("the object has no metadata.name".into()));
    }
    object["apiVersion"] = resource.api_version().into();
    object["kind"] = resource.kind.clone().into();
    Ok(object)
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The object's namespace, which must be the agent's cluster (set to it when absent).
fn in_cluster(object: &mut Value, cluster: &str, what: &str) -> Result<(), Error> {
    match object["metadata"]["namespace"].as_str() {
        None | Some("") => {
            object["metadata"]["namespace"] = cluster.into();
            Ok(())
        }
        Some(ns) if ns == cluster => Ok(()),
        Some(ns) => Err(Error::Invalid(format!(
            "{what} {}/{} is not in cluster {cluster:?}'s namespace",
            ns,
            name(object)
        ))),
    }
}

fn unsupported(ty: &EventType, object: &str) -> Error {
    Error::Invalid(format!(
        "unsupported action {} on {} for {object}",
        ty.action, ty.subresource
    ))
}

/// An agent → hub registration event (§6.3).
pub fn handle(host: &Host, identity: &Identity, event: &CloudEvent, ty: &EventType) -> Result<(), Error> {
    let cluster = event
        .cluster_name()
        .map_err(|e| Error::Invalid(format!("event {}: {e}", event.id)))?
        .to_owned();
    let kube = host.kube();
    let data_type = ty.data_type.to_string();
    match (data_type.as_str(), ty.subresource, ty.action.as_str()) {
        (data_types::MANAGED_CLUSTERS, sub, action) => {
            let resource = managed_clusters();
            let cluster_object = object(event, &resource)?;
            if name(&cluster_object) != cluster {
                return Err(Error::Invalid(format!(
                    "ManagedCluster {:?} in an event of cluster {cluster:?}",
                    name(&cluster_object)
                )));
            }
            match (sub, action) {
                (SubResource::Spec, actions::CREATE_REQUEST) => kube.create(&resource, None, &cluster_object).map(drop),
                (SubResource::Status, actions::UPDATE_REQUEST) => {
                    kube.update(&resource, None, &cluster_object, Some("status")).map(drop)
                }
                (SubResource::Spec, actions::UPDATE_REQUEST) => {
                    kube.update(&resource, None, &cluster_object, None).map(drop)
                }
                _ => Err(unsupported(ty, &format!("managedcluster {cluster}"))),
            }
        }
        (data_types::CSRS, SubResource::Spec, actions::CREATE_REQUEST) => {
            let resource = csrs();
            let mut csr = object(event, &resource)?;
            match csr["metadata"]["labels"][CLUSTER_NAME_LABEL].as_str() {
                None => csr["metadata"]["labels"][CLUSTER_NAME_LABEL] = cluster.as_str().into(),
                Some(c) if c == cluster => {}
                Some(c) => {
                    return Err(Error::Invalid(format!(
                        "CSR {} is labelled for cluster {c:?}, not {cluster:?}",
                        name(&csr)
                    )));
                }
            }
            // The approver derives the agent's identity from this annotation: it replaces any.
            csr["metadata"]["annotations"] = json!({ CSR_USER_ANNOTATION: identity.user });
            kube.create(&resource, None, &csr).map(drop)
        }
        (data_types::LEASES, SubResource::Spec, actions::UPDATE_REQUEST) => {
            let resource = leases();
            let mut lease = object(event, &resource)?;
            in_cluster(&mut lease, &cluster, "lease")?;
            kube.update(&resource, Some(&cluster), &lease, None).map(drop)
        }
        (data_types::ADDONS_V1ALPHA1 | data_types::ADDONS_V1BETA1, SubResource::Status, actions::UPDATE_REQUEST) => {
            let resource = addons(&ty.data_type.version);
            let mut addon = object(event, &resource)?;
            in_cluster(&mut addon, &cluster, "managedclusteraddon")?;
            kube.update(&resource, Some(&cluster), &addon, Some("status")).map(drop)
        }
        (data_types::EVENTS, SubResource::Spec, actions::CREATE_REQUEST) => {
            let resource = events();
            let mut e = object(event, &resource)?;
            in_cluster(&mut e, &cluster, "event")?;
            kube.create(&resource, Some(&cluster), &e).map(drop)
        }
        (data_types::EVENTS, SubResource::Spec, actions::UPDATE_REQUEST) => {
            // Only `series` is applied, onto the event as it is; one that is gone is fine.
            let resource = events();
            let mut e = object(event, &resource)?;
            in_cluster(&mut e, &cluster, "event")?;
            let Some(mut current) = kube.get(&resource, Some(&cluster), name(&e))? else {
                return Ok(());
            };
            current["series"] = e["series"].clone();
            kube.update(&resource, Some(&cluster), &current, None).map(drop)
        }
        (data_types::TOKEN_REQUESTS, SubResource::Spec, actions::CREATE_REQUEST) => {
            token_request(host, event, &cluster)
        }
        _ => Err(unsupported(ty, &data_type)),
    }
}

/// A TokenRequest for a ServiceAccount of the cluster's namespace: the token is sent on the
/// agent's stream, carrying its request id, before the Publish returns.
fn token_request(host: &Host, event: &CloudEvent, cluster: &str) -> Result<(), Error> {
    let mut request: Value = match event.data.as_deref() {
        Some(d) if !d.is_empty() => serde_json::from_slice(d)
            .map_err(|e| Error::Invalid(format!("tokenrequest {}: not JSON: {e}", event.id)))?,
        _ => {
            return Err(Error::Invalid(format!(
                "tokenrequest {}: no object in the event",
                event.id
            )));
        }
    };
    let request_id = request["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    let account = request["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    if request_id.is_empty() || account.is_empty() {
        return Err(Error::Invalid(format!(
            "tokenrequest {}: metadata.uid (the request id) and metadata.name (the service account) are required",
            event.id
        )));
    }
    let namespace = match request["metadata"]["namespace"].as_str() {
        None | Some("") => cluster.to_owned(),
        Some(ns) if ns == cluster => ns.to_owned(),
        Some(ns) => {
            return Err(Error::Invalid(format!(
                "tokenrequest for {ns}/{account} is not in cluster {cluster:?}'s namespace"
            )));
        }
    };
    if let Some(meta) = request["metadata"].as_object_mut() {
        meta.remove("uid");
        meta.insert("namespace".into(), namespace.clone().into());
    }
    request["apiVersion"] = "authentication.k8s.io/v1".into();
    request["kind"] = "TokenRequest".into();
    let mut answer = host.kube().create_token(&namespace, &account, &request)?;
    answer["metadata"]["uid"] = request_id.into();
    answer["metadata"]["namespace"] = namespace.into();
    answer["metadata"]["name"] = account.into();
    let response = encode(data_types::TOKEN_REQUESTS, &answer, actions::CREATE_REQUEST)?;
    host.emit(&response)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use conductor_plugin_sdk::fakes::FakeHost;

    use super::*;

    fn event(data_type: &str, sub: &str, action: &str, cluster: &str, data: Value) -> (CloudEvent, EventType) {
        let ty = format!("{data_type}.{sub}.{action}");
        let mut e = CloudEvent::new("e1", cluster, &ty);
        e.set_extension("clustername", cluster);
        e.set_json_data(&data).unwrap();
        let parsed = EventType::parse(&ty).unwrap();
        (e, parsed)
    }

    fn agent() -> Identity {
        Identity {
            user: "system:open-cluster-management:cluster1:agent".into(),
            groups: vec![],
        }
    }

    /// The joined clusters are counted as their ManagedClusters change, once each.
    #[test]
    fn joined_clusters_are_counted() {
        let fake = FakeHost::new();
        let host = fake.host();
        let cluster = |uid: &str, joined: &str| {
            json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                   "metadata": {"name": uid, "uid": uid},
                   "status": {"conditions": [{"type": "ManagedClusterJoined", "status": joined}]}})
        };
        let joined = || fake.metric(JOINED_CLUSTERS, &[]);
        watched(&host, data_types::MANAGED_CLUSTERS, &cluster("c1", "False"), false).unwrap();
        assert_eq!(joined(), None, "none joined yet");
        watched(&host, data_types::MANAGED_CLUSTERS, &cluster("c1", "True"), false).unwrap();
        watched(&host, data_types::MANAGED_CLUSTERS, &cluster("c1", "True"), false).unwrap();
        watched(&host, data_types::MANAGED_CLUSTERS, &cluster("c2", "True"), false).unwrap();
        assert_eq!(joined(), Some(2.0));
        watched(&host, data_types::MANAGED_CLUSTERS, &cluster("c1", "True"), true).unwrap();
        assert_eq!(joined(), Some(1.0), "a deleted cluster no longer counts");
    }

    #[test]
    fn a_cluster_registers_and_reports_status() {
        let fake = FakeHost::new();
        let host = fake.host();
        let cluster = json!({"metadata": {"name": "cluster1"}, "spec": {"hubAcceptsClient": true}});
        let (e, ty) = event(
            data_types::MANAGED_CLUSTERS,
            "spec",
            "create_request",
            "cluster1",
            cluster.clone(),
        );
        handle(&host, &agent(), &e, &ty).unwrap();
        // Again: the API server's AlreadyExists, passed through (the agent treats it as done).
        let err = handle(&host, &agent(), &e, &ty).unwrap_err();
        assert!(err.is_already_exists(), "{err}");
        let mut stored = fake.object(&managed_clusters(), None, "cluster1").unwrap();
        stored["status"] = json!({"conditions": [{"type": "ManagedClusterConditionAvailable", "status": "True"}]});
        let (e, ty) = event(
            data_types::MANAGED_CLUSTERS,
            "status",
            "update_request",
            "cluster1",
            stored,
        );
        handle(&host, &agent(), &e, &ty).unwrap();
        assert_eq!(
            fake.object(&managed_clusters(), None, "cluster1").unwrap()["status"]["conditions"][0]["status"],
            "True"
        );
        // Another cluster's ManagedCluster: refused.
        let (e, ty) = event(
            data_types::MANAGED_CLUSTERS,
            "spec",
            "create_request",
            "cluster2",
            cluster,
        );
        assert!(matches!(handle(&host, &agent(), &e, &ty), Err(Error::Invalid(_))));
    }

    #[test]
    fn a_csr_carries_the_agents_identity_and_its_cluster_label() {
        let fake = FakeHost::new();
        let host = fake.host();
        let csr = json!({"metadata": {"name": "csr-1", "annotations": {"x": "y"}}, "spec": {"signerName": "open-cluster-management.io/grpc"}});
        let (e, ty) = event(data_types::CSRS, "spec", "create_request", "cluster1", csr);
        handle(&host, &agent(), &e, &ty).unwrap();
        let stored = fake.object(&csrs(), None, "csr-1").unwrap();
        assert_eq!(
            stored["metadata"]["annotations"],
            json!({CSR_USER_ANNOTATION: agent().user})
        );
        assert_eq!(stored["metadata"]["labels"][CLUSTER_NAME_LABEL], "cluster1");
        let update = watched(&host, data_types::CSRS, &stored, false).unwrap().unwrap();
        assert_eq!(update.cluster_name(), Ok("cluster1"));
        assert!(update.ty.ends_with(".spec.create_request"));
        assert!(
            watched(&host, data_types::CSRS, &stored, false)
                .unwrap()
                .unwrap()
                .ty
                .ends_with(".spec.update_request")
        );
        assert!(
            watched(&host, data_types::CSRS, &stored, true)
                .unwrap()
                .unwrap()
                .ty
                .ends_with(".spec.delete_request")
        );
    }

    #[test]
    fn a_token_request_is_answered_on_the_stream_with_the_request_id() {
        let fake = FakeHost::new();
        let host = fake.host();
        let request = json!({"metadata": {"name": "addon-sa", "namespace": "cluster1", "uid": "req-7"},
            "spec": {"audiences": ["a"], "expirationSeconds": 3600}});
        let (e, ty) = event(
            data_types::TOKEN_REQUESTS,
            "spec",
            "create_request",
            "cluster1",
            request,
        );
        handle(&host, &agent(), &e, &ty).unwrap();
        assert_eq!(fake.recorded().tokens, [("cluster1".to_owned(), "addon-sa".to_owned())]);
        let emitted = fake.take_emitted();
        assert_eq!(emitted.len(), 1);
        assert_eq!(emitted[0].resource_id(), Ok("req-7"));
        assert_eq!(emitted[0].cluster_name(), Ok("cluster1"));
        let answer: Value = emitted[0].data_json().unwrap();
        assert_eq!(answer["metadata"]["uid"], "req-7");
        assert_eq!(answer["status"]["token"], "token-cluster1-addon-sa");
    }

    #[test]
    fn an_event_update_copies_only_the_series() {
        let fake = FakeHost::new();
        let host = fake.host();
        let created = json!({"metadata": {"name": "ev"}, "reason": "Registered", "note": "first"});
        let (e, ty) = event(data_types::EVENTS, "spec", "create_request", "cluster1", created);
        handle(&host, &agent(), &e, &ty).unwrap();
        let update = json!({"metadata": {"name": "ev"}, "note": "changed", "series": {"count": 2}});
        let (e, ty) = event(data_types::EVENTS, "spec", "update_request", "cluster1", update);
        handle(&host, &agent(), &e, &ty).unwrap();
        let stored = fake.object(&events(), Some("cluster1"), "ev").unwrap();
        assert_eq!(
            (stored["note"].clone(), stored["series"]["count"].clone()),
            (json!("first"), json!(2))
        );
        let gone = json!({"metadata": {"name": "gone"}, "series": {"count": 1}});
        let (e, ty) = event(data_types::EVENTS, "spec", "update_request", "cluster1", gone);
        handle(&host, &agent(), &e, &ty).unwrap();
        assert!(
            list(&host, data_types::EVENTS, "cluster1")
                .unwrap_err()
                .to_status()
                .code
                == 405
        );
    }

    #[test]
    fn unsupported_actions_and_foreign_namespaces_are_refused() {
        let fake = FakeHost::new();
        let host = fake.host();
        let lease = json!({"metadata": {"name": "l", "namespace": "cluster2"}});
        let (e, ty) = event(data_types::LEASES, "spec", "update_request", "cluster1", lease.clone());
        assert!(
            handle(&host, &agent(), &e, &ty)
                .unwrap_err()
                .to_string()
                .contains("not in cluster")
        );
        let (e, ty) = event(data_types::LEASES, "spec", "delete_request", "cluster1", lease);
        assert!(
            handle(&host, &agent(), &e, &ty)
                .unwrap_err()
                .to_string()
                .contains("unsupported action")
        );
        assert!(fake.recorded().kube_calls.is_empty(), "nothing reached the API server");
    }
}
