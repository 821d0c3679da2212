//! A Kubernetes API behind the server under test (conductor's kube source, OCM's own gRPC
//! server): ManifestWorks created and changed in each cluster's namespace. The version an agent
//! sees is the work's `generation`, its id the work's `uid` (`docs/protocol.md` §7.3).

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

use super::Resource;

pub struct KubeHub {
    client: kube::Client,
    works: ApiResource,
}

fn manifests(n: i64) -> serde_json::Value {
    json!([{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "conductor-load", "namespace": "default"},
            "data": {"n": n.to_string()}}])
}

impl KubeHub {
    /// The cluster's kubeconfig (`KUBECONFIG`, `~/.kube/config` or in-cluster).
    pub async fn connect() -> Result<Self> {
        let client = kube::Client::try_default()
            .await
            .context("cannot reach the Kubernetes API (KUBECONFIG)")?;
        let gvk = GroupVersionKind::gvk("work.open-cluster-management.io", "v1", "ManifestWork");
        Ok(Self {
            client,
            works: ApiResource::from_gvk_with_plural(&gvk, "manifestworks"),
        })
    }

    fn api(&self, cluster: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), cluster, &self.works)
    }

    /// The clusters' namespaces, if not there yet. An API server that serves no namespaces (a
    /// bare apiextensions-apiserver, where namespaced objects need none) gets a warning; where
    /// namespaces are needed, creating a work then fails naming its namespace.
    pub async fn prepare(&self, clusters: &[String]) -> Result<()> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        for cluster in clusters {
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": cluster}}))?;
            match namespaces.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    eprintln!("warning: cannot create namespace {cluster} ({e}); going on without");
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn key(work: &DynamicObject) -> Result<(String, i64)> {
        let uid = work
            .metadata
            .uid
            .clone()
            .context("the API server returned a work without uid")?;
        Ok((uid, work.metadata.generation.unwrap_or(1)))
    }

    /// Creates `name` for `cluster`: its id and version.
    pub async fn create(&self, cluster: &str, name: &str) -> Result<(String, i64)> {
        let work: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": name, "namespace": cluster},
            "spec": {"workload": {"manifests": manifests(1)}},
        }))?;
        let created = self
            .api(cluster)
            .create(&PostParams::default(), &work)
            .await
            .with_context(|| format!("create ManifestWork {cluster}/{name}"))?;
        let (id, version) = Self::key(&created)?;
        Ok((id, version))
    }

    pub async fn update(&self, r: &Resource) -> Result<i64> {
        let patch = json!({"spec": {"workload": {"manifests": manifests(r.version + 1)}}});
        let patched = self
            .api(&r.cluster)
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patch ManifestWork {}/{}", r.cluster, r.name))?;
        Ok(Self::key(&patched)?.1)
    }
}
