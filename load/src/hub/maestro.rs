//! Maestro's database behind the server under test, written as Maestro writes it
//! (`docs/maestro-database.md` §3–§4): the resource row, then an `events` row and `pg_notify('events', id)`,
//! each in autocommit; updates under Maestro's `resources` advisory lock.

use anyhow::{Context, Result};
use serde_json::{Value, json};
use sqlx::PgPool;

use super::Resource;

/// Maestro's advisory-lock key of a string (`docs/maestro-database.md` §4.1), as the maestro plugin computes it.
use maestro_plugin::store::fnv1a;

/// The spec CloudEvent Maestro stores for a Deployment `name` with `replicas`.
pub fn spec_payload(id: &str, cluster: &str, name: &str, version: i64, replicas: i64) -> Value {
    json!({
        "specversion": "1.0", "id": format!("ce-{id}-{version}"), "source": "source-work-client",
        "time": "2025-06-01T12:00:00Z", "datacontenttype": "application/json",
        "type": "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
        "data": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": replicas}}]},
        "metadata": {"name": name, "namespace": cluster, "uid": id},
        "resourceid": id, "clustername": cluster, "resourceversion": version, "originalsource": "",
    })
}

pub struct MaestroHub {
    pool: PgPool,
}

impl MaestroHub {
    pub async fn connect(url: &str, connections: u32) -> Result<Self> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(connections.max(1))
            .connect(url)
            .await
            .context("cannot connect to the Maestro database")?;
        Ok(Self { pool })
    }

    /// A consumer per cluster (Maestro's `consumers`), if not there yet.
    pub async fn prepare(&self, clusters: &[String]) -> Result<()> {
        sqlx::query(
            "INSERT INTO consumers (id, created_at, updated_at, name) \
             SELECT gen_random_uuid()::text, now(), now(), name FROM unnest($1::text[]) AS name \
             ON CONFLICT DO NOTHING",
        )
        .bind(clusters)
        .execute(&self.pool)
        .await
        .context("cannot create the consumers")?;
        Ok(())
    }

    /// Maestro's `events` row and doorbell; the event's id.
    async fn event(&self, resource: &str, kind: &str) -> Result<String> {
        let id = uuid::Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO events (id, created_at, updated_at, source, source_id, event_type) VALUES ($1, now(), now(), 'Resources', $2, $3)",
        )
        .bind(&id)
        .bind(resource)
        .bind(kind)
        .execute(&self.pool)
        .await
        .context("insert into events")?;
        sqlx::query("SELECT pg_notify('events', $1)")
            .bind(&id)
            .execute(&self.pool)
            .await
            .context("pg_notify")?;
        Ok(id)
    }

    /// Creates `name` for `cluster`: its id and version.
    pub async fn create(&self, cluster: &str, name: &str) -> Result<(String, i64)> {
        self.create_announced(cluster, name).await.map(|(id, _)| (id, 1))
    }

    /// Creates `name` for `cluster` (version 1): its id, and the id of the event announcing it.
    pub async fn create_announced(&self, cluster: &str, name: &str) -> Result<(String, String)> {
        let id = uuid::Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO resources (id, name, created_at, updated_at, source, consumer_name, version, type, payload) \
             VALUES ($1, $1, now(), now(), 'source-work-client', $2, 1, '', $3::json)",
        )
        .bind(&id)
        .bind(cluster)
        .bind(spec_payload(&id, cluster, name, 1, 1).to_string())
        .execute(&self.pool)
        .await
        .context("insert into resources")?;
        let event = self.event(&id, "Create").await?;
        Ok((id, event))
    }

    /// Under the `resources` lock: version + 1 and the new payload; then the event.
    pub async fn update(&self, r: &Resource) -> Result<i64> {
        self.update_announced(r).await.map(|(version, _)| version)
    }

    /// [`Self::update`]: the new version, and the id of the event announcing it.
    pub async fn update_announced(&self, r: &Resource) -> Result<(i64, String)> {
        // `BEGIN` in a round trip of its own, as Maestro's Go client sends it (sqlx's `begin()`
        // does the same: it waits for the answer).
        let mut tx = self.pool.begin_with("BEGIN").await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(fnv1a(&r.id))
            .bind(fnv1a("resources"))
            .execute(&mut *tx)
            .await?;
        let version: i64 = sqlx::query_scalar("SELECT version FROM resources WHERE id = $1")
            .bind(&r.id)
            .fetch_one(&mut *tx)
            .await
            .with_context(|| format!("resource {}", r.id))?;
        let next = version + 1;
        sqlx::query("UPDATE resources SET version = $1, payload = $2::json, updated_at = now() WHERE id = $3")
            .bind(next)
            .bind(spec_payload(&r.id, &r.cluster, &r.name, next, next).to_string())
            .bind(&r.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        let event = self.event(&r.id, "Update").await?;
        Ok((next, event))
    }
}
