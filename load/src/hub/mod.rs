//! The hub side: what writes resources for the agents. Each driver writes the way the real hub
//! side does, so that the server under test does all of its work.

pub mod kube;
pub mod maestro;
pub mod memory;

use anyhow::Result;

/// A resource the tool wrote, and the version its last write gave it.
#[derive(Debug, Clone)]
pub struct Resource {
    pub cluster: String,
    pub name: String,
    pub id: String,
    pub version: i64,
}

pub enum Hub {
    Memory(memory::MemoryHub),
    Maestro(maestro::MaestroHub),
    Kube(kube::KubeHub),
}

impl Hub {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            Self::Maestro(_) => "maestro",
            Self::Kube(_) => "kube",
        }
    }

    /// Makes what the clusters need before any write (Maestro consumers, namespaces).
    pub async fn prepare(&self, clusters: &[String]) -> Result<()> {
        match self {
            Self::Memory(_) => Ok(()),
            Self::Maestro(h) => h.prepare(clusters).await,
            Self::Kube(h) => h.prepare(clusters).await,
        }
    }

    /// Creates resource `name` for `cluster`.
    pub async fn create(&self, cluster: &str, name: &str) -> Result<Resource> {
        let (id, version) = match self {
            Self::Memory(h) => h.create(cluster, name).await?,
            Self::Maestro(h) => h.create(cluster, name).await?,
            Self::Kube(h) => h.create(cluster, name).await?,
        };
        Ok(Resource {
            cluster: cluster.to_owned(),
            name: name.to_owned(),
            id,
            version,
        })
    }

    /// Changes the resource's spec; returns its new version.
    pub async fn update(&self, resource: &Resource) -> Result<i64> {
        match self {
            Self::Memory(h) => h.update(resource).await,
            Self::Maestro(h) => h.update(resource).await,
            Self::Kube(h) => h.update(resource).await,
        }
    }
}
