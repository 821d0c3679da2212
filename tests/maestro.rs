//! The maestro source against a real PostgreSQL holding Maestro's schema, driven the way Maestro
//! drives it, with a Subscribe/Publish client playing the work agent: the black-box scenarios of
//! `docs/maestro-database.md` §10.5 (scenario 1, the consumer row of a joined cluster, belongs to the consumer
//! controller).

#[path = "support/kube.rs"]
mod kube_api;
#[path = "support/maestro.rs"]
mod support;

use std::time::Duration;

use conductor_blackbox_tests::events::{self, attr, attr_str};
use conductor_blackbox_tests::proto::cloud_event::Data;
use conductor_blackbox_tests::{Conductor, Form, WORKS, conductor_bin, proto, publish, subscribe};
use serde_json::{Value, json};
use support::{MaestroDb, config, config_with, eventually, is_spec_of, next_where, status_update, version};
use tonic::Code;

const WAIT: Duration = Duration::from_secs(10);

fn data(e: &proto::CloudEvent) -> Option<Value> {
    match &e.data {
        Some(Data::BinaryData(b)) => Some(serde_json::from_slice(b).unwrap()),
        _ => None,
    }
}

/// §10.5 scenarios 2, 3 (no NOTIFY), 4, 5 and 11: create, update, a missed notification, soft
/// delete and the agent's confirmation, as the agent sees them and as the database shows them.
#[tokio::test(flavor = "multi_thread")]
async fn spec_events_reach_the_agent_and_the_agents_deletion_removes_the_resource() {
    let db = MaestroDb::start().await;
    let c = Conductor::start(&config(&db.url(), "1s")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();

    // 2: a resource row + event + NOTIFY → the spec, then reconciled, with no lock left behind.
    let (id, created) = db.create("cluster1", "nginx", true).await;
    let e = next_where(&mut sub, "the created spec", |e| is_spec_of(e, &id, 1)).await;
    assert_eq!(e.source, "maestro");
    assert_eq!(e.r#type, format!("{WORKS}.spec.create_request"));
    assert_eq!(attr_str(&e, "ce-clustername"), Some("cluster1"));
    let meta: Value = serde_json::from_str(attr_str(&e, "ce-metadata").unwrap()).unwrap();
    assert_eq!(meta["name"], "nginx");
    assert!(meta["creationTimestamp"].is_string(), "{meta}");
    assert_eq!(data(&e).unwrap()["manifests"][0]["spec"]["replicas"], 1);
    assert!(attr(&e, "ce-deletiontimestamp").is_none());
    eventually(WAIT, "the create event reconciled", async || {
        db.reconciled(&created).await
    })
    .await;
    db.locks_released().await;

    // 4: Maestro's update (version + 1) → the new spec.
    let updated = db.update(&id, 2).await;
    // The update event's own spec: an update request. (A late NOTIFY of the create event — its
    // event already reconciled by the startup catch-up, so sent again for this replica's agents —
    // may come first with the current row, version 2, as a create request: a duplicate the agent
    // applies the same way.)
    let update = format!("{WORKS}.spec.update_request");
    let e = next_where(&mut sub, "the updated spec", |e| {
        is_spec_of(e, &id, 2) && e.r#type == update
    })
    .await;
    assert_eq!(data(&e).unwrap()["manifests"][0]["spec"]["replicas"], 2);
    eventually(WAIT, "the update event reconciled", async || {
        db.reconciled(&updated).await
    })
    .await;

    // 3: an event whose NOTIFY never came is delivered by the periodic catch-up.
    let silent = db.insert_event(&id, "Update", false).await;
    eventually(WAIT, "the silent event reconciled", async || {
        db.reconciled(&silent).await
    })
    .await;
    next_where(&mut sub, "the spec of the silent event", |e| is_spec_of(e, &id, 2)).await;

    // 5: soft delete → a deleting spec without data; the agent's Deleted → StatusDelete + NOTIFY,
    // then the row is gone.
    let deleted = db.soft_delete(&id).await;
    let e = next_where(&mut sub, "the deleting spec", |e| {
        attr_str(e, "ce-resourceid") == Some(id.as_str()) && attr(e, "ce-deletiontimestamp").is_some()
    })
    .await;
    assert_eq!(e.r#type, format!("{WORKS}.spec.delete_request"));
    assert!(e.data.is_none(), "a deleting spec carries no manifests");
    eventually(WAIT, "the delete event reconciled", async || {
        db.reconciled(&deleted).await
    })
    .await;
    let mut maestro = db.listen_status_events().await;
    publish(&mut client, status_update("cluster1", &id, 2, 10, "Deleted"))
        .await
        .unwrap();
    let rung = tokio::time::timeout(WAIT, maestro.recv()).await.unwrap().unwrap();
    let rows = db.status_events().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(rung.payload(), row.id);
    assert_eq!(
        (
            row.kind.as_str(),
            row.resource_id.as_str(),
            row.resource_source.as_str()
        ),
        ("StatusDelete", id.as_str(), "source-work-client")
    );
    let payload = row.payload.as_ref().expect("StatusDelete carries the spec payload");
    assert_eq!(payload["data"]["manifests"][0]["spec"]["replicas"], 2);
    let status = row.status.as_ref().expect("StatusDelete carries the status");
    assert_eq!(status["data"]["conditions"][0]["type"], "Deleted");
    assert_eq!(status["metadata"]["name"], "nginx", "the spec's metadata, as an object");
    assert_eq!(db.resource(&id).await, None, "hard-deleted after the agent confirmed");

    // 11: Maestro's own bookkeeping is untouched.
    assert_eq!(db.count("SELECT count(*) FROM server_instances").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM event_instances").await, 0);
    db.locks_released().await;
}

/// §10.5 scenarios 6, 7 and 8: which status updates are stored, verbatim and with the spec's
/// metadata; which write nothing; and column-targeted writes beside Maestro's own spec update.
#[tokio::test(flavor = "multi_thread")]
async fn status_updates_are_ordered_stored_verbatim_and_never_clobber_the_spec() {
    let db = MaestroDb::start().await;
    let c = Conductor::start(&config(&db.url(), "1m")).unwrap();
    let mut client = c.client().await.unwrap();
    let (id, _) = db.create("cluster1", "nginx", true).await;
    let mut maestro = db.listen_status_events().await;

    // 6: the first status → stored as sent, with the spec's metadata object; StatusUpdate + NOTIFY.
    let applied = status_update("cluster1", &id, 1, 10, "Applied");
    publish(&mut client, applied.clone()).await.unwrap();
    let rung = tokio::time::timeout(WAIT, maestro.recv()).await.unwrap().unwrap();
    let status = db.resource(&id).await.unwrap().status.expect("status stored");
    assert_eq!(status["id"], applied.id.as_str());
    assert_eq!(status["source"], "cluster1-work-agent");
    assert_eq!(status["type"], format!("{WORKS}.status.update_request"));
    assert_eq!(status["resourceid"], id.as_str());
    assert_eq!(status["resourceversion"], 1);
    assert_eq!(status["sequenceid"], support::sequence(10).as_str());
    assert_eq!(status["originalsource"], "maestro");
    assert_eq!(status["data"]["conditions"][0]["type"], "Applied");
    assert_eq!(
        status["metadata"],
        json!({"name": "nginx", "namespace": "cluster1", "uid": id}),
        "metadata is the spec's, stored as an object"
    );
    let rows = db.status_events().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].kind.as_str(), rows[0].id.as_str()),
        ("StatusUpdate", rung.payload())
    );
    assert_eq!((rows[0].payload.as_ref(), rows[0].status.as_ref()), (None, None));

    // The same status again, an older one, and one for another version: nothing written.
    publish(&mut client, applied).await.unwrap();
    publish(&mut client, status_update("cluster1", &id, 1, 5, "Available"))
        .await
        .unwrap();
    publish(&mut client, status_update("cluster1", &id, 7, 20, "Available"))
        .await
        .unwrap();
    assert_eq!(db.status_events().await.len(), 1);
    assert_eq!(db.resource(&id).await.unwrap().status, Some(status));

    // A newer one replaces it.
    publish(&mut client, status_update("cluster1", &id, 1, 20, "Available"))
        .await
        .unwrap();
    let status = db.resource(&id).await.unwrap().status.unwrap();
    assert_eq!(status["data"]["conditions"][0]["type"], "Available");
    assert_eq!(db.status_events().await.len(), 2);

    // 7: an unknown resource succeeds and writes nothing; another cluster's is refused.
    publish(
        &mut client,
        status_update("cluster1", "no-such-resource", 1, 30, "Applied"),
    )
    .await
    .unwrap();
    let refused = publish(&mut client, status_update("cluster2", &id, 1, 30, "Applied"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains("unmatched consumer name"), "{refused:?}");
    assert_eq!(db.status_events().await.len(), 2);
    assert_eq!(db.resource(&id).await.unwrap().status, Some(status));

    // 8: Maestro updates the spec (holding the row) while the agent's status arrives: each
    // column keeps its writer's value.
    let mut spec = db.pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
        .bind(support::advisory_key(&id))
        .bind(support::advisory_key("resources"))
        .execute(&mut *spec)
        .await
        .unwrap();
    sqlx::query("UPDATE resources SET version = 2, payload = $1::json, updated_at = now() WHERE id = $2")
        .bind(support::spec_payload(&id, "cluster1", "nginx", 2, 5).to_string())
        .bind(&id)
        .execute(&mut *spec)
        .await
        .unwrap();
    let status_write = {
        let mut client = c.client().await.unwrap();
        let event = status_update("cluster1", &id, 1, 40, "Progressing");
        tokio::spawn(async move { publish(&mut client, event).await })
    };
    // The status write is waiting for the spec's lock before the spec commits.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_locks WHERE NOT granted")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the status write never waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    spec.commit().await.unwrap();
    status_write.await.unwrap().unwrap();
    let row = db.resource(&id).await.unwrap();
    assert_eq!(row.version, 2);
    assert_eq!(
        row.payload["data"]["manifests"][0]["spec"]["replicas"], 5,
        "Maestro's spec kept"
    );
    assert_eq!(
        row.status.unwrap()["data"]["conditions"][0]["type"],
        "Progressing",
        "the agent's status kept"
    );
    db.locks_released().await;
}

/// §10.5 scenario 9: resync answers every resource of the cluster, soft-deleted ones as deletes,
/// and a database error answers nothing rather than a list that would make the agent delete.
#[tokio::test(flavor = "multi_thread")]
async fn resync_lists_every_resource_and_a_database_error_deletes_nothing() {
    let db = MaestroDb::start().await;
    let c = Conductor::start(&config(&db.url(), "1m")).unwrap();
    let (live, _) = db.create("cluster1", "web", false).await;
    let (deleting, _) = db.create("cluster1", "old", false).await;
    db.soft_delete(&deleting).await;
    db.create("cluster2", "elsewhere", false).await;
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();

    let held = [(deleting.as_str(), 1), ("gone-from-maestro", 3)];
    publish(&mut client, events::resync_request(WORKS, "cluster1", &held))
        .await
        .unwrap();
    // Events of the setup's NOTIFYs may come first, in any order with the answer: only the
    // answer's count.
    let resync_response = format!("{WORKS}.spec.resync_response");
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < 3 {
        let e = sub.next_event().await.unwrap();
        if e.r#type == resync_response {
            answers.insert(attr_str(&e, "ce-resourceid").unwrap().to_owned(), e);
        }
    }
    assert_eq!(version(&answers[&live]), Some(1));
    assert!(attr(&answers[&live], "ce-deletiontimestamp").is_none());
    assert!(data(&answers[&live]).is_some());
    // Soft-deleted in Maestro, and unknown to Maestro: both deletes for the agent.
    assert!(attr(&answers[&deleting], "ce-deletiontimestamp").is_some());
    assert!(attr(&answers["gone-from-maestro"], "ce-deletiontimestamp").is_some());

    // The resources table unreadable: the resync fails, and the agent hears nothing.
    sqlx::query("ALTER TABLE resources RENAME TO resources_away")
        .execute(&db.pool)
        .await
        .unwrap();
    let failed = publish(
        &mut client,
        events::resync_request(WORKS, "cluster1", &[(live.as_str(), 1)]),
    )
    .await;
    assert!(failed.is_err(), "the resync fails");
    // No answer within 2 s (a heartbeat, or a late spec event of the setup's NOTIFYs, may come).
    let quiet_until = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let left = quiet_until.saturating_duration_since(tokio::time::Instant::now());
        match sub.next_raw(left).await {
            Ok(Some(e)) => assert_ne!(e.r#type, resync_response, "the failed resync answered: {e:?}"),
            Ok(None) => panic!("stream ended"),
            Err(_) => break, // nothing more
        }
    }
    sqlx::query("ALTER TABLE resources_away RENAME TO resources")
        .execute(&db.pool)
        .await
        .unwrap();
    publish(
        &mut client,
        events::resync_request(WORKS, "cluster1", &[(live.as_str(), 0)]),
    )
    .await
    .unwrap();
    next_where(&mut sub, "the resync answer", |e| is_spec_of(e, &live, 1)).await;
}

/// §10.5 scenarios 3 (written while conductor was down) and 10 (startup purge), and the startup
/// checks: a database without Maestro's schema, or out of reach, stops conductor with the reason.
#[tokio::test(flavor = "multi_thread")]
async fn startup_purges_reconciled_events_catches_up_and_checks_the_schema() {
    let db = MaestroDb::start().await;
    let (done_id, done) = db.create("cluster1", "done", false).await;
    sqlx::query("UPDATE events SET reconciled_date = now() WHERE id = $1")
        .bind(&done)
        .execute(&db.pool)
        .await
        .unwrap();
    let (id, pending) = db.create("cluster1", "pending", true).await;

    let c = Conductor::start(&config(&db.url(), "1s")).unwrap();
    eventually(WAIT, "the startup purge", async || {
        db.count_for("SELECT count(*) FROM events WHERE id = $1", &done).await == 0
    })
    .await;
    // The plugin logs once its DELETE returned: the row can be gone a moment before the line is.
    c.wait_for_log("purged 1 reconciled events").await;
    assert_eq!(
        db.count_for("SELECT count(*) FROM events WHERE id = $1", &pending)
            .await,
        1
    );
    // No agent was connected when it was handled at startup: it stays pending until one is.
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    next_where(&mut sub, "the pending spec", |e| is_spec_of(e, &id, 1)).await;
    eventually(WAIT, "the pending event reconciled", async || {
        db.reconciled(&pending).await
    })
    .await;
    assert!(
        db.resource(&done_id).await.is_some(),
        "purging events leaves resources alone"
    );

    // A database without Maestro's schema, and one out of reach: conductor refuses to start.
    sqlx::query("CREATE DATABASE empty").execute(&db.pool).await.unwrap();
    let port = db.port;
    for (url, reason) in [
        (
            format!("postgres://postgres@127.0.0.1:{port}/empty"),
            "has no Maestro schema (migration 202412181141 not found)",
        ),
        (
            format!("postgres://postgres@127.0.0.1:{}/maestro", support::free_port()),
            "database \"maestro\"",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("conductor.toml");
        std::fs::write(
            &file,
            format!("{}{}", conductor_blackbox_tests::BASE_CONFIG, config(&url, "1m")),
        )
        .unwrap();
        // check-config touches no database; --connect reaches it, read-only.
        let out = std::process::Command::new(conductor_bin())
            .args(["check-config"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{url}: {}", String::from_utf8_lossy(&out.stderr));
        let out = std::process::Command::new(conductor_bin())
            .args(["check-config", "--connect"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{url}: {stderr}");
        assert!(stderr.contains("plugins.maestro"), "{stderr}");
        assert!(stderr.contains(reason), "{url}: {stderr}");
    }
}

/// The same plugin built as a native library: its `pg` calls take the native ABI (the plugin runs
/// in place and the host lends its thread to the database call) with the same results.
#[tokio::test(flavor = "multi_thread")]
async fn the_native_library_form_serves_the_same_flows() {
    let db = MaestroDb::start().await;
    let c = Conductor::start(&config_with(&db.url(), "1s", Form::Native, 4, 2)).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let (id, created) = db.create("cluster1", "nginx", true).await;
    next_where(&mut sub, "the created spec", |e| is_spec_of(e, &id, 1)).await;
    eventually(WAIT, "the create event reconciled", async || {
        db.reconciled(&created).await
    })
    .await;
    publish(&mut client, status_update("cluster1", &id, 1, 10, "Applied"))
        .await
        .unwrap();
    let status = db.resource(&id).await.unwrap().status.expect("status stored");
    assert_eq!(status["metadata"]["name"], "nginx");
    assert_eq!(db.status_events().await.len(), 1);
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    next_where(&mut sub, "the resync answer", |e| {
        e.r#type.ends_with("spec.resync_response") && is_spec_of(e, &id, 1)
    })
    .await;
    db.locks_released().await;
}

/// `tls = "verify-full"` with the database's CA: conductor's connections are encrypted and the
/// server verified; with another CA, conductor refuses to start and says why.
#[tokio::test(flavor = "multi_thread")]
async fn database_tls_verifies_the_server() {
    let mut db = MaestroDb::start().await;
    let (certs, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    kube_api::certificates(certs.path());
    kube_api::certificates(other.path());
    db.stop().await;
    let data = db.pg.data_dir().to_owned();
    for file in ["server.crt", "server.key"] {
        std::fs::copy(certs.path().join(file), data.join(file)).unwrap();
    }
    let conf = data.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
    std::fs::write(&conf, text).unwrap();
    let owner = std::process::Command::new("stat")
        .args(["-c", "%U"])
        .arg(&data)
        .output()
        .unwrap();
    let owner = String::from_utf8_lossy(&owner.stdout).trim().to_owned();
    for step in [
        vec![
            "chown".to_owned(),
            format!("{owner}:"),
            data.join("server.crt").display().to_string(),
            data.join("server.key").display().to_string(),
        ],
        vec![
            "chmod".to_owned(),
            "600".to_owned(),
            data.join("server.key").display().to_string(),
        ],
    ] {
        assert!(
            std::process::Command::new(&step[0])
                .args(&step[1..])
                .status()
                .unwrap()
                .success()
        );
    }
    db.restart().await;

    let tls = |ca: &std::path::Path| {
        config(&db.url(), "1m").replace(
            "pool_size = 4\n",
            &format!(
                "pool_size = 4\ntls = \"verify-full\"\nca_file = \"{}\"\n",
                ca.join("ca.crt").display()
            ),
        )
    };
    let c = Conductor::start(&tls(certs.path())).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let (id, _) = db.create("cluster1", "nginx", true).await;
    next_where(&mut sub, "the spec over TLS", |e| is_spec_of(e, &id, 1)).await;
    let encrypted = db
        .count("SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'conductor' AND s.ssl")
        .await;
    let plain = db
        .count("SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'conductor' AND NOT s.ssl")
        .await;
    assert!(encrypted >= 1 && plain == 0, "{encrypted} encrypted, {plain} plain");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conductor.toml");
    std::fs::write(
        &file,
        format!("{}{}", conductor_blackbox_tests::BASE_CONFIG, tls(other.path())),
    )
    .unwrap();
    let out = std::process::Command::new(conductor_bin())
        .args(["check-config", "--connect"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("plugins.maestro"), "{stderr}");
    assert!(
        stderr.contains("invalid peer certificate"),
        "the reason is the certificate: {stderr}"
    );
}

/// A burst of notifications larger than the plugin's event queue: the queue stays within its
/// bound (the LISTEN waits for room), and every resource still reaches the agent at its last
/// version.
#[tokio::test(flavor = "multi_thread")]
async fn a_notification_flood_stays_within_the_queue_and_loses_no_final_state() {
    let db = MaestroDb::start().await;
    let limited = config(&db.url(), "1h").replace(
        "pool_size = 2\n",
        "pool_size = 2\nlimits = { event_queue = 8, event_batch = 4 }\n",
    );
    let c = Conductor::start(&limited).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(db.create("cluster1", &format!("w{i}"), false).await.0);
    }
    // Five updates of each, their events written without NOTIFY, then every NOTIFY in one
    // transaction: they arrive at once when it commits.
    let mut events = Vec::new();
    for id in &ids {
        for _ in 0..5 {
            sqlx::query("UPDATE resources SET version = version + 1 WHERE id = $1")
                .bind(id)
                .execute(&db.pool)
                .await
                .unwrap();
            events.push(db.insert_event(id, "Update", false).await);
        }
    }
    let metrics = async || c.admin_get("/metrics").await.unwrap().1;
    let mut tx = db.pool.begin().await.unwrap();
    for e in &events {
        sqlx::query("SELECT pg_notify('events', $1)")
            .bind(e)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();

    let mut deepest = 0;
    let mut latest = std::collections::HashMap::new();
    while ids.iter().any(|id| latest.get(id) != Some(&6)) {
        let e = tokio::time::timeout(Duration::from_secs(30), sub.next_event())
            .await
            .expect("the flood drains")
            .unwrap();
        let (id, v) = (attr_str(&e, "ce-resourceid").unwrap().to_owned(), version(&e).unwrap());
        let before = latest.insert(id, v).unwrap_or(0);
        assert!(v >= before, "never an older version after a newer one");
        let text = metrics().await;
        let depth: i64 = gauge(&text, "conductor_plugin_event_queue_depth{plugin=\"maestro\"}");
        deepest = deepest.max(depth);
    }
    assert!(deepest <= 8, "the queue stayed within its bound: {deepest}");
    let text = metrics().await;
    assert!(
        gauge(&text, "conductor_plugin_event_queue_full_total{plugin=\"maestro\"}") > 0,
        "the LISTEN waited for room:\n{text}"
    );
    eventually(Duration::from_secs(10), "every notified event reconciled", async || {
        db.count("SELECT count(*) FROM events WHERE event_type = 'Update' AND reconciled_date IS NULL")
            .await
            == 0
    })
    .await;
}

/// The value of a metric line in Prometheus text, whole (0 when absent).
fn gauge(text: &str, series: &str) -> i64 {
    conductor_blackbox_tests::scraped(text, series) as i64
}

/// A resource updated 100 times in a burst while others change beside it: the agent never gets
/// an older version after a newer one, its last event carries the last version, and exactly the
/// delivered events are reconciled (those of a cluster with no agent stay for the catch-up).
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_updates_keeps_each_resources_order_and_reconciles_what_was_delivered() {
    let db = std::sync::Arc::new(MaestroDb::start().await);
    let c = Conductor::start(&config(&db.url(), "1h")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let hot = db.create("cluster1", "hot", true).await.0;
    let mut others = Vec::new();
    for i in 0..4 {
        others.push(db.create("cluster1", &format!("other{i}"), true).await.0);
    }
    let unseen = db.create("cluster2", "nobody-listens", true).await.0;
    let mut latest = std::collections::HashMap::new();
    while latest.len() < 5 {
        let e = next_where(&mut sub, "the creates", |_| true).await;
        latest.insert(attr_str(&e, "ce-resourceid").unwrap().to_owned(), version(&e).unwrap());
    }

    let mut writers = Vec::new();
    let burst = |id: String, times: i64| {
        let db = std::sync::Arc::clone(&db);
        tokio::spawn(async move {
            for r in 0..times {
                db.update(&id, r).await;
            }
        })
    };
    writers.push(burst(hot.clone(), 100));
    for id in others.iter().chain([&unseen]) {
        writers.push(burst(id.clone(), 25));
    }
    let expected: std::collections::HashMap<&str, i32> = std::iter::once((hot.as_str(), 101))
        .chain(others.iter().map(|id| (id.as_str(), 26)))
        .collect();
    while expected.iter().any(|(id, v)| latest.get(*id) != Some(v)) {
        let e = next_where(&mut sub, "the burst", |_| true).await;
        let (id, v) = (attr_str(&e, "ce-resourceid").unwrap().to_owned(), version(&e).unwrap());
        let before = latest.insert(id.clone(), v).unwrap_or(0);
        assert!(v >= before, "{id}: version {v} after {before}");
    }
    for w in writers {
        w.await.unwrap();
    }
    eventually(Duration::from_secs(10), "cluster1's events reconciled", async || {
        db.count_for(
            "SELECT count(*) FROM events e JOIN resources r ON r.id = e.source_id \
             WHERE r.consumer_name = $1 AND e.reconciled_date IS NULL",
            "cluster1",
        )
        .await
            == 0
    })
    .await;
    assert_eq!(
        db.count_for(
            "SELECT count(*) FROM events WHERE source_id = $1 AND reconciled_date IS NULL",
            &unseen
        )
        .await,
        26,
        "no agent of cluster2 received its events: none is reconciled"
    );
}

/// A batch held up by a locked row gives way: the plugin's batches run one at a time, and a
/// batch waits for a lock at most `lock_timeout` (250 ms), then fails and is tried again with
/// backoff. The test holds the row of one resource's event locked, so the batch that sends it
/// waits when it marks the event reconciled; an update of another resource is still delivered
/// meanwhile, and the held event is reconciled once the row is free.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_held_up_holds_up_only_itself() {
    let db = MaestroDb::start().await;
    let c = Conductor::start(&config(&db.url(), "1h")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let held = db.create("cluster1", "held", true).await.0;
    let free = db.create("cluster1", "free", true).await.0;
    next_where(&mut sub, "the held resource's create", |e| is_spec_of(e, &held, 1)).await;
    next_where(&mut sub, "the free resource's create", |e| is_spec_of(e, &free, 1)).await;
    eventually(WAIT, "the creates reconciled", async || {
        db.count("SELECT count(*) FROM events WHERE reconciled_date IS NULL")
            .await
            == 0
    })
    .await;

    let held_event = db.update_then(&held, 2, false).await;
    let mut row = db.pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM events WHERE id = $1 FOR UPDATE")
        .bind(&held_event)
        .execute(&mut *row)
        .await
        .unwrap();
    db.exec("SELECT pg_notify('events', $1)", &[&held_event]).await;
    next_where(&mut sub, "the held resource's update", |e| is_spec_of(e, &held, 2)).await;
    eventually(WAIT, "its batch waits for the event's row", async || {
        db.count("SELECT count(*) FROM pg_locks WHERE NOT granted").await > 0
    })
    .await;

    db.update(&free, 3).await;
    // The other resource moves while the row stays locked (well before the held call's 5 s
    // timeout would end it: were a batch's lock waits not bounded, it would wait for that).
    tokio::time::timeout(
        Duration::from_secs(2),
        next_where(&mut sub, "the free resource's update", |e| is_spec_of(e, &free, 2)),
    )
    .await
    .expect("the free resource's update arrives while the held row stays locked");
    assert!(!db.reconciled(&held_event).await, "the held event waits for its row");
    eventually(
        WAIT,
        "the held batch tried again, waiting for the row again",
        async || db.count("SELECT count(*) FROM pg_locks WHERE NOT granted").await > 0,
    )
    .await;

    row.commit().await.unwrap();
    eventually(WAIT, "both updates reconciled", async || {
        db.count("SELECT count(*) FROM events WHERE reconciled_date IS NULL")
            .await
            == 0
    })
    .await;
}

/// The batch statements find each event by its primary key, so a batch costs the same however
/// many events the table holds. (A plain join with the JSON list let the planner, which cannot
/// see how few ids the list holds, scan all of `events`: 3.5 ms a batch at 11,000 events, growing
/// with the table, until the next restart purged it.)
#[tokio::test(flavor = "multi_thread")]
async fn batch_statements_look_events_up_by_key_however_large_the_table() {
    use maestro_plugin::sql::{CONSUMERS_OF_EVENTS, LOCK_AND_READ_EVENTS, MARK_RECONCILED, READ_RESOURCES_OF_EVENTS};
    let db = MaestroDb::start().await;
    for sql in [
        "INSERT INTO consumers (id, created_at, updated_at, name) VALUES ('c1', now(), now(), 'cluster1')",
        "INSERT INTO resources (id, name, created_at, updated_at, source, consumer_name, version, type, payload) \
         SELECT 'r' || i, 'r' || i, now(), now(), 'source-work-client', 'cluster1', 1, '', '{}'::json \
         FROM generate_series(1, 2000) i",
        "INSERT INTO events (id, created_at, updated_at, source, source_id, event_type, reconciled_date) \
         SELECT 'e' || i, now(), now(), 'Resources', 'r' || (i % 2000 + 1), 'Update', now() \
         FROM generate_series(1, 20000) i",
        "ANALYZE events, resources",
    ] {
        sqlx::query(sql).execute(&db.pool).await.unwrap();
    }
    let batch = json!([
        {"n": 0, "id": "e5", "a": 1, "b": 2, "s": true},
        {"n": 1, "id": "e17", "a": 3, "b": 2, "s": true}
    ]);
    let explain = |sql: &str| format!("EXPLAIN (FORMAT JSON) {sql}");
    let plans: Vec<(&str, Value)> = vec![
        (
            "LOCK_AND_READ_EVENTS",
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain(LOCK_AND_READ_EVENTS)))
                .bind(sqlx::types::Json(&batch))
                .bind(7_i64)
                .fetch_one(&db.pool)
                .await
                .unwrap(),
        ),
        (
            "READ_RESOURCES_OF_EVENTS",
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain(READ_RESOURCES_OF_EVENTS)))
                .bind(sqlx::types::Json(json!(["e5", "e17"])))
                .fetch_one(&db.pool)
                .await
                .unwrap(),
        ),
        (
            "CONSUMERS_OF_EVENTS",
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain(CONSUMERS_OF_EVENTS)))
                .bind(sqlx::types::Json(json!(["e5", "e17"])))
                .fetch_one(&db.pool)
                .await
                .unwrap(),
        ),
        (
            "MARK_RECONCILED",
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain(MARK_RECONCILED)))
                .bind(chrono::Utc::now())
                .bind(sqlx::types::Json(json!(["e5", "e17"])))
                .fetch_one(&db.pool)
                .await
                .unwrap(),
        ),
    ];
    fn scans<'v>(node: &'v Value, out: &mut Vec<&'v str>) {
        if node["Node Type"] == "Seq Scan" {
            out.push(node["Relation Name"].as_str().unwrap_or("?"));
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            scans(child, out);
        }
    }
    for (name, plan) in &plans {
        let mut scanned = Vec::new();
        scans(&plan[0]["Plan"], &mut scanned);
        assert!(
            !scanned.contains(&"events") && !scanned.contains(&"resources"),
            "{name} scans {scanned:?}: {plan:#}"
        );
    }
}

/// Every event on `sub` (heartbeats skipped) until `until` passes or `stop` holds for one.
async fn events_until(
    sub: &mut conductor_blackbox_tests::Sub,
    until: std::time::Instant,
    stop: impl Fn(&proto::CloudEvent) -> bool,
) -> Vec<proto::CloudEvent> {
    let mut got = Vec::new();
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match tokio::time::timeout(left, sub.stream.message()).await {
            Err(_) => return got,
            Ok(Ok(Some(e))) if e.r#type == conductor_blackbox_tests::HEARTBEAT => {}
            Ok(Ok(Some(e))) => {
                let done = stop(&e);
                got.push(e);
                if done {
                    return got;
                }
            }
            Ok(other) => panic!("the agent's stream ended: {other:?}"),
        }
    }
}

/// `conductor inspect undelivered [--output json]` against `c`: (success, stdout, stderr).
fn inspect_undelivered(c: &Conductor, json: bool) -> (bool, String, String) {
    let admin = format!("http://{}", c.admin_addr.as_deref().expect("admin endpoint on"));
    let mut command = std::process::Command::new(conductor_bin());
    command.args(["inspect", "undelivered", "--admin", &admin]);
    if json {
        command.args(["--output", "json"]);
    }
    let out = command.output().expect("conductor runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 46, point 3: a resource whose first delivery the agent dropped (it sent no status) is
/// sent again on its open stream after `broker.undelivered_after` — once, the same event at the
/// same version — counted and listed until the agent answers it; a resource the agent answered at
/// once is never sent again.
#[tokio::test(flavor = "multi_thread")]
async fn work_the_agent_never_answered_is_sent_again_once_and_counted_until_answered() {
    const AFTER: Duration = Duration::from_secs(3);
    let undelivered = "conductor_undelivered_resources{plugin=\"maestro\"} ";
    let resent = "conductor_undelivered_resent_total{plugin=\"maestro\"} ";
    let db = MaestroDb::start().await;
    let c = Conductor::start(&format!(
        "{}\n[broker]\nundelivered_after = \"3s\"\n",
        config(&db.url(), "1h")
    ))
    .unwrap();
    let metrics = async || c.admin_get("/metrics").await.unwrap().1;
    let text = metrics().await;
    assert!(
        text.contains(&format!("{undelivered}0")) && text.contains(&format!("{resent}0")),
        "the series exist at 0 from the start:\n{text}"
    );

    // The agent, on its own connection, subscribes and resyncs as the work agent does.
    let mut agent = c.client().await.unwrap();
    let mut sub = subscribe(&mut agent, "cluster1", WORKS).await.unwrap();
    publish(&mut agent, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    // One work it answers at once, one whose spec it drops.
    let (answered, _) = db.create("cluster1", "answered", true).await;
    next_where(&mut sub, "the answered work's spec", |e| is_spec_of(e, &answered, 1)).await;
    publish(&mut agent, status_update("cluster1", &answered, 1, 1, "Applied"))
        .await
        .unwrap();
    let (lost, _) = db.create("cluster1", "lost", true).await;
    let first = next_where(&mut sub, "the lost work's spec", |e| is_spec_of(e, &lost, 1)).await;
    let dropped_at = std::time::Instant::now();

    // After the deadline, the same event again, on the open stream.
    let got = events_until(&mut sub, dropped_at + Duration::from_secs(30), |e| {
        is_spec_of(e, &lost, 1)
    })
    .await;
    let again = got
        .last()
        .filter(|e| is_spec_of(e, &lost, 1))
        .unwrap_or_else(|| panic!("the dropped spec was not sent again within 30 s; the agent got {got:?}"));
    let waited = dropped_at.elapsed();
    assert_eq!(got.len(), 1, "nothing else was sent: {got:?}");
    assert!(
        waited >= AFTER - Duration::from_millis(500),
        "sent again after {waited:?}, before the deadline"
    );
    assert_eq!(again, &first, "the same event, the same version");
    eventually(WAIT, "the undelivered work counted", async || {
        let text = metrics().await;
        gauge(&text, undelivered) == 1 && gauge(&text, resent) == 1
    })
    .await;
    let (ok, listed, err) = inspect_undelivered(&c, true);
    assert!(ok, "{err}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let rows = listed.as_array().expect("a list");
    assert_eq!(rows.len(), 1, "{listed:#}");
    let row = &rows[0];
    assert_eq!(
        (
            &row["plugin"],
            &row["cluster"],
            &row["data_type"],
            &row["resource_id"],
            &row["resource_version"]
        ),
        (
            &json!("maestro"),
            &json!("cluster1"),
            &json!(WORKS),
            &json!(lost),
            &json!(1)
        ),
        "{listed:#}"
    );
    assert!(row["sent_at"].is_string() && row["resent_at"].is_string(), "{listed:#}");
    let (ok, table, err) = inspect_undelivered(&c, false);
    assert!(ok, "{err}");
    let line = table.lines().nth(1).unwrap_or_default();
    assert!(
        table.starts_with("PLUGIN") && line.starts_with("maestro") && line.contains(&lost) && line.contains(" ago"),
        "{table}"
    );

    // Never a third copy, and nothing of the answered work, over three more deadlines.
    let more = events_until(&mut sub, std::time::Instant::now() + AFTER * 3, |_| false).await;
    assert!(more.is_empty(), "sent again more than once: {more:?}");
    assert_eq!(gauge(&metrics().await, undelivered), 1, "counted until answered");

    // The agent answers: no longer counted or listed.
    publish(&mut agent, status_update("cluster1", &lost, 1, 2, "Applied"))
        .await
        .unwrap();
    eventually(WAIT, "the answered work no longer counted", async || {
        gauge(&metrics().await, undelivered) == 0
    })
    .await;
    let (ok, listed, err) = inspect_undelivered(&c, true);
    assert!(ok, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&listed).unwrap(), json!([]));
    assert_eq!(gauge(&metrics().await, resent), 1);
    let after = events_until(&mut sub, std::time::Instant::now() + AFTER * 2, |_| false).await;
    assert!(after.is_empty(), "{after:?}");
}
