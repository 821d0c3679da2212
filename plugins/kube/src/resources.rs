//! The Kubernetes resources behind each data type the kube source serves
//! (`docs/protocol.md` §3.2), and what is watched for each.

use conductor_plugin_sdk::kube::{ApiResource, Selector};
use conductor_plugin_sdk::ocm::data_types;
pub use conductor_plugin_sdk::ocm::resources::{managed_clusters, manifest_works};

/// What the watch events of works name their resource: `manifest_works().name()`, not made again
/// for every event.
pub const MANIFEST_WORKS: &str = "manifestworks.work.open-cluster-management.io";

/// The label naming a CSR's or lease's cluster.
pub const CLUSTER_NAME_LABEL: &str = "open-cluster-management.io/cluster-name";

pub fn csrs() -> ApiResource {
    ApiResource::new(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
    )
}

pub fn leases() -> ApiResource {
    ApiResource::new("coordination.k8s.io", "v1", "Lease", "leases")
}

pub fn addons(version: &str) -> ApiResource {
    ApiResource::new(
        "addon.open-cluster-management.io",
        version,
        "ManagedClusterAddOn",
        "managedclusteraddons",
    )
}

pub fn events() -> ApiResource {
    ApiResource::new("events.k8s.io", "v1", "Event", "events")
}

/// A watched kind of registration object: its data type, resource, and the label selector of
/// its watch (OCM's informers watch only CSRs and leases labelled with a cluster name).
pub struct Watched {
    pub data_type: &'static str,
    pub resource: ApiResource,
    pub selector: Selector,
}

/// The registration objects the kube source watches, one watch each (add-ons once per version:
/// agents subscribe to one or the other).
pub fn watched_registration() -> Vec<Watched> {
    let labelled = || Selector::labels(CLUSTER_NAME_LABEL);
    vec![
        Watched {
            data_type: data_types::MANAGED_CLUSTERS,
            resource: managed_clusters(),
            selector: Selector::default(),
        },
        Watched {
            data_type: data_types::CSRS,
            resource: csrs(),
            selector: labelled(),
        },
        Watched {
            data_type: data_types::LEASES,
            resource: leases(),
            selector: labelled(),
        },
        Watched {
            data_type: data_types::ADDONS_V1ALPHA1,
            resource: addons("v1alpha1"),
            selector: Selector::default(),
        },
        Watched {
            data_type: data_types::ADDONS_V1BETA1,
            resource: addons("v1beta1"),
            selector: Selector::default(),
        },
    ]
}

/// The data type of a watch event's resource (`<plural>.<group>`) at `version`.
pub fn data_type_of(resource: &str, object_api_version: &str) -> Option<&'static str> {
    let all = watched_registration();
    all.into_iter()
        .find(|w| w.resource.name() == resource && w.resource.api_version() == object_api_version)
        .map(|w| w.data_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn works_are_named_as_their_resource_names_itself() {
        assert_eq!(MANIFEST_WORKS, manifest_works().name());
    }
}
