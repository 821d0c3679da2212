//! The maestro source's statements and decisions against a real PostgreSQL holding Maestro's
//! schema, driven the way Maestro drives it (rows + events + NOTIFY): the database half of
//! `maestro-db.md` §10.5 scenarios 2, 5, 6, 7, 10 and 11.

mod common;

use chrono::{DateTime, Utc};
use conductor::database::EmbeddedPostgres;
use conductor::database::postgres::{self, advisory_keys};
use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::OcmExtensions;
use maestro_plugin::spec::{Read, ResourceRow, spec_event};
use maestro_plugin::sql;
use maestro_plugin::status::{Decision, Skip, decide};
use serde_json::{Value, json};
use sqlx::{PgPool, Row};

async fn database() -> (tempfile::TempDir, EmbeddedPostgres, PgPool) {
    let (dir, pg) = tokio::task::spawn_blocking(common::start_embedded).await.unwrap();
    let pool = postgres::connect(&pg.url(), 4).await.unwrap();
    postgres::check_maestro(&pool).await.unwrap();
    (dir, pg, pool)
}

/// What Maestro writes for a new resource: the row, then an event, then NOTIFY (autocommit each).
async fn maestro_creates(pool: &PgPool, id: &str, cluster: &str) -> String {
    let payload = json!({
        "specversion": "1.0", "id": "ce-1", "source": "source-work-client", "time": "2025-06-01T12:00:00Z",
        "type": "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
        "datacontenttype": "application/json", "data": {"manifests": [{"kind": "Deployment", "metadata": {"name": "nginx"}}]},
        "metadata": {"name": "nginx", "namespace": cluster}, "resourceid": id, "clustername": cluster, "resourceversion": 1,
    });
    sqlx::query(
        "INSERT INTO consumers (id, created_at, updated_at, name) VALUES ($1, now(), now(), $2) ON CONFLICT DO NOTHING",
    )
    .bind(format!("consumer-{cluster}"))
    .bind(cluster)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("INSERT INTO resources (id, name, created_at, updated_at, source, consumer_name, version, type, payload) VALUES ($1, $1, now(), now(), 'source-work-client', $2, 1, '', $3::json)")
        .bind(id)
        .bind(cluster)
        .bind(payload.to_string())
        .execute(pool)
        .await
        .unwrap();
    let event_id = uuid::Uuid::new_v4().to_string();
    sqlx::query("INSERT INTO events (id, created_at, updated_at, source, source_id, event_type) VALUES ($1, now(), now(), 'Resources', $2, 'Create')")
        .bind(&event_id)
        .bind(id)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("SELECT pg_notify('events', $1)")
        .bind(&event_id)
        .execute(pool)
        .await
        .unwrap();
    event_id
}

async fn read_resource(pool: &PgPool, id: &str) -> Option<ResourceRow> {
    let row = sqlx::query(sql::READ_RESOURCE)
        .bind(id)
        .fetch_optional(pool)
        .await
        .unwrap()?;
    let json = |s: Option<String>| s.map(|s| serde_json::from_str::<Value>(&s).unwrap());
    Some(ResourceRow {
        id: row.get(0),
        consumer_name: row.get(1),
        version: row.get(2),
        source: row.get(3),
        payload: json(row.get(4)).unwrap(),
        status: json(row.get(5)),
        created_at: row.get::<Option<DateTime<Utc>>, _>(6),
        deleted_at: row.get::<Option<DateTime<Utc>>, _>(7),
    })
}

fn status_event(id: &str, cluster: &str, version: i32, sequence: i64, condition: &str) -> CloudEvent {
    let mut e = CloudEvent::new(
        uuid::Uuid::new_v4().to_string(),
        format!("{cluster}-work-agent"),
        "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request",
    );
    e.set_extension("clustername", cluster);
    e.set_extension("resourceid", id);
    e.set_extension("resourceversion", version);
    e.set_extension("originalsource", "maestro");
    e.set_extension("sequenceid", (sequence << 22 | 1 << 12).to_string());
    e.set_json_data(&json!({"conditions": [{"type": condition, "status": "True"}], "resourceStatus": []}))
        .unwrap();
    e
}

/// The status path: lock `resource_status`, read, decide, write — in one transaction.
async fn handle_status(pool: &PgPool, event: &CloudEvent) -> Decision {
    let id = event.resource_id().unwrap().to_owned();
    let (k1, k2) = advisory_keys(&id, "resource_status");
    let mut tx = pool.begin().await.unwrap();
    sqlx::query(sql::LOCK)
        .bind(k1)
        .bind(k2)
        .execute(&mut *tx)
        .await
        .unwrap();
    let found = read_resource(pool, &id).await;
    let decision = decide(event, found.as_ref()).unwrap();
    let now = Utc::now();
    let status_event_id = uuid::Uuid::new_v4().to_string();
    match &decision {
        Decision::Update { status } => {
            sqlx::query(sql::UPDATE_STATUS)
                .bind(status.to_string())
                .bind(now)
                .bind(&id)
                .execute(&mut *tx)
                .await
                .unwrap();
            sqlx::query(sql::INSERT_STATUS_UPDATE)
                .bind(&status_event_id)
                .bind(now)
                .bind(&id)
                .execute(&mut *tx)
                .await
                .unwrap();
            notify_status(&mut tx, &status_event_id).await;
        }
        Decision::Delete { status } => {
            let row = found.unwrap();
            sqlx::query(sql::INSERT_STATUS_DELETE)
                .bind(&status_event_id)
                .bind(now)
                .bind(&id)
                .bind(&row.source)
                .bind(row.payload.to_string())
                .bind(status.to_string())
                .execute(&mut *tx)
                .await
                .unwrap();
            notify_status(&mut tx, &status_event_id).await;
            sqlx::query(sql::HARD_DELETE).bind(&id).execute(&mut *tx).await.unwrap();
        }
        Decision::UnknownResource | Decision::Skip(_) => {}
    }
    tx.commit().await.unwrap();
    decision
}

async fn notify_status(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>, status_event_id: &str) {
    sqlx::query(sql::NOTIFY_STATUS)
        .bind(status_event_id.to_owned())
        .execute(&mut **tx)
        .await
        .unwrap();
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn spec_and_status_flows_against_maestros_schema() {
    let (_dir, _pg, pool) = database().await;
    let id = "3f9c1a52-0000-4000-8000-000000000001";
    let event_id = maestro_creates(&pool, id, "cluster1").await;

    // Spec (scenario 2): try-lock the event, read it, read the resource, encode, mark reconciled.
    let (k1, k2) = advisory_keys(&event_id, "events");
    let mut tx = pool.begin().await.unwrap();
    let locked: bool = sqlx::query_scalar(sql::TRY_LOCK)
        .bind(k1)
        .bind(k2)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert!(locked);
    let event = sqlx::query(sql::READ_EVENT)
        .bind(&event_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(event.get::<String, _>(0), "Resources");
    assert_eq!(event.get::<String, _>(1), id);
    assert!(!event.get::<bool, _>(3), "not reconciled yet");
    let row = read_resource(&pool, id).await.unwrap();
    let spec = spec_event(&row, "create_request", Read::Get).unwrap();
    assert_eq!(spec.source, "maestro");
    assert_eq!(spec.resource_id(), Ok(id));
    assert_eq!(spec.resource_version(), Ok(1));
    assert_eq!(spec.cluster_name(), Ok("cluster1"));
    sqlx::query(sql::MARK_RECONCILED)
        .bind(Utc::now())
        .bind(&event_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        count(&pool, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").await,
        0,
        "lock released"
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM events WHERE reconciled_date IS NOT NULL").await,
        1
    );

    // Status (scenarios 6, 7): newer → stored verbatim with the spec's metadata object; identical,
    // older or other-version → nothing written; unknown resource → nothing written.
    let first = status_event(id, "cluster1", 1, 10, "Applied");
    assert!(matches!(handle_status(&pool, &first).await, Decision::Update { .. }));
    let stored = read_resource(&pool, id).await.unwrap().status.unwrap();
    assert_eq!(stored["metadata"], json!({"name": "nginx", "namespace": "cluster1"}));
    assert_eq!(stored["source"], "cluster1-work-agent");
    assert_eq!(stored["data"]["conditions"][0]["type"], "Applied");
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM status_events WHERE status_event_type = 'StatusUpdate'"
        )
        .await,
        1
    );
    assert_eq!(handle_status(&pool, &first).await, Decision::Skip(Skip::Unchanged));
    assert_eq!(
        handle_status(&pool, &status_event(id, "cluster1", 1, 9, "Available")).await,
        Decision::Skip(Skip::OlderSequence)
    );
    assert_eq!(
        handle_status(&pool, &status_event(id, "cluster1", 2, 11, "Available")).await,
        Decision::Skip(Skip::OtherVersion)
    );
    assert_eq!(
        handle_status(&pool, &status_event("no-such", "cluster1", 1, 12, "Applied")).await,
        Decision::UnknownResource
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM status_events").await,
        1,
        "nothing more written"
    );

    // Soft delete → deleting spec; agent's Deleted → StatusDelete with source/payload/status, row gone (scenario 5).
    sqlx::query("UPDATE resources SET deleted_at = now() WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let deleting = spec_event(&read_resource(&pool, id).await.unwrap(), "delete_request", Read::Get).unwrap();
    assert!(deleting.deletion_timestamp().is_some() && deleting.data.is_none());
    assert!(matches!(
        handle_status(&pool, &status_event(id, "cluster1", 1, 13, "Deleted")).await,
        Decision::Delete { .. }
    ));
    assert_eq!(count(&pool, "SELECT count(*) FROM resources").await, 0);
    let del = sqlx::query("SELECT resource_source, payload::text, status::text FROM status_events WHERE status_event_type = 'StatusDelete'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(del.get::<String, _>(0), "source-work-client");
    assert!(del.get::<String, _>(1).contains("nginx"));
    assert!(del.get::<String, _>(2).contains("Deleted"));

    // Startup purge (scenario 10) and Maestro's bookkeeping untouched (scenario 11).
    let pending = maestro_creates(&pool, "3f9c1a52-0000-4000-8000-000000000002", "cluster1").await;
    sqlx::query(sql::PURGE_RECONCILED).execute(&pool).await.unwrap();
    let unreconciled: Vec<String> = sqlx::query_scalar(sql::UNRECONCILED).fetch_all(&pool).await.unwrap();
    assert_eq!(unreconciled, [pending]);
    assert_eq!(count(&pool, "SELECT count(*) FROM server_instances").await, 0);
    assert_eq!(count(&pool, "SELECT count(*) FROM event_instances").await, 0);
    let listed = sqlx::query(sql::LIST_RESOURCES)
        .bind("cluster1")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    pool.close().await;
}
