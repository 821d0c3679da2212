//! OCM's own Kubernetes resources, as the `kube` capability names them.

use crate::kube::ApiResource;

/// `ManagedCluster` (cluster-scoped): a cluster registered with the hub.
pub fn managed_clusters() -> ApiResource {
    ApiResource::new(
        "cluster.open-cluster-management.io",
        "v1",
        "ManagedCluster",
        "managedclusters",
    )
}

/// `ManifestWork` (in the cluster's namespace): what the work agent applies.
pub fn manifest_works() -> ApiResource {
    ApiResource::new("work.open-cluster-management.io", "v1", "ManifestWork", "manifestworks")
}
