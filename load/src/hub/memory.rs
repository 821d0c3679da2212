//! A memory source behind the server under test (conductor's `kind = "memory"` plugin, or the
//! in-memory source of OCM's own broker): `spec.create_request` and `spec.update_request`
//! published over gRPC, which the source stores and turns into spec events for the agents.

use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};

use super::Resource;
use crate::connect::{Connection, Target};
use crate::proto::PublishRequest;
use crate::wire::spec_request;

pub struct MemoryHub {
    data_type: String,
    connections: Vec<Connection>,
    next: AtomicUsize,
}

impl MemoryHub {
    /// Publishes over `connections` connections of its own.
    pub async fn connect(target: Target, connections: usize) -> Result<Self> {
        let mut opened = Vec::new();
        for i in 0..connections.max(1) {
            opened.push(
                Connection::open(&target, &target.hub, None, i)
                    .await
                    .context("the memory hub's connection")?,
            );
        }
        Ok(Self {
            data_type: target.data_type,
            connections: opened,
            next: AtomicUsize::new(0),
        })
    }

    async fn publish(&self, action: &str, cluster: &str, id: &str, name: &str) -> Result<()> {
        let connection = &self.connections[self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len()];
        let event = spec_request(&self.data_type, action, cluster, id, name);
        connection
            .client
            .clone()
            .publish(connection.request(PublishRequest { event: Some(event) }))
            .await
            .with_context(|| format!("publish {action} of {id} for {cluster}"))?;
        Ok(())
    }

    /// Creates `name` for `cluster`: its id and version.
    pub async fn create(&self, cluster: &str, name: &str) -> Result<(String, i64)> {
        let id = uuid::Uuid::new_v4().to_string();
        self.publish("create_request", cluster, &id, name).await?;
        Ok((id, 1))
    }

    /// The memory source adds one to the version at every update.
    pub async fn update(&self, r: &Resource) -> Result<i64> {
        self.publish("update_request", &r.cluster, &r.id, &r.name).await?;
        Ok(r.version + 1)
    }
}
