//! The maestro source writes agents' status updates that wait together in one transaction
//! (`plugins/maestro/src/status_batch.rs`): what it writes must be what one update at a time would
//! have written (`docs/maestro-database.md` §5.2) — every status, every status event.

#[path = "support/maestro.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use conductor_blackbox_tests::{Conductor, Form, proto, publish, scraped};
use serde_json::Value;
use support::{MaestroDb, advisory_key, config_with, status_update};
use tonic::Code;

const WAIT: Duration = Duration::from_secs(30);

/// conductor with one instance of the maestro component (requests wait for it together), and
/// `extra` limits.
fn one_instance(db: &MaestroDb, limits: &str) -> Conductor {
    let config = format!(
        "{}[plugins.maestro.limits]\n{limits}\n",
        config_with(&db.url(), "1m", Form::Component, 4, 1)
    );
    Conductor::start(&config).unwrap()
}

/// Waits until a session waits for a lock.
async fn someone_waits_for_a_lock(db: &MaestroDb) {
    support::eventually(WAIT, "a session waiting for a lock", async || {
        let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_locks WHERE NOT granted")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        waiting > 0
    })
    .await;
}

/// A transaction holding resource `id`'s `resource_status` lock, as Maestro's status writes take
/// it, until it ends.
async fn hold_status_lock(db: &MaestroDb, id: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
        .bind(advisory_key(id))
        .bind(advisory_key("resource_status"))
        .execute(&mut *holder)
        .await
        .unwrap();
    holder
}

type Sent = tokio::task::JoinHandle<Result<(), tonic::Status>>;

/// Publishes `event` on `agent`'s connection, without waiting for the answer; then waits a
/// moment, so that what is sent next arrives after it.
async fn send(agent: &Conductor, event: proto::CloudEvent) -> Sent {
    let mut client = agent.client().await.unwrap();
    let sent = tokio::spawn(async move { publish(&mut client, event).await.map(drop) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    sent
}

/// Seven updates wait together behind an eighth that holds the plugin's only instance: that
/// call takes them in once it goes on (`requests.take-waiting`), one transaction for all eight,
/// each judged as it would be alone and in order —
/// two newer statuses of one resource both written, an older one between them skipped; another
/// cluster's update refused alone; a `Deleted` condition deleting its resource after the update
/// before it; an update after that finding nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_commits_once_and_judges_each_update_as_if_alone_in_order() {
    let db = MaestroDb::start().await;
    let (x, _) = db.create("cluster1", "x", true).await;
    let (y, _) = db.create("cluster1", "y", true).await;
    let (z, _) = db.create("cluster2", "z", true).await;
    let c = one_instance(&db, "");
    let mut maestro = db.listen_status_events().await;

    // Maestro holds x's status lock: the update of x holds the plugin's one instance.
    let holder = hold_status_lock(&db, &x).await;
    let first = send(&c, status_update("cluster1", &x, 1, 10, "Applied")).await;
    someone_waits_for_a_lock(&db).await;

    let batch = [
        send(&c, status_update("cluster1", &y, 1, 10, "Applied")).await,
        send(&c, status_update("cluster1", &y, 1, 5, "Progressing")).await,
        send(&c, status_update("cluster1", &y, 1, 20, "Available")).await,
        send(&c, status_update("cluster2", &y, 1, 30, "Applied")).await,
        send(&c, status_update("cluster2", &z, 1, 10, "Applied")).await,
        send(&c, status_update("cluster2", &z, 1, 11, "Deleted")).await,
        send(&c, status_update("cluster2", &z, 1, 12, "Applied")).await,
    ];
    holder.commit().await.unwrap();
    first.await.unwrap().unwrap();
    let mut answers = Vec::new();
    for sent in batch {
        answers.push(sent.await.unwrap());
    }
    for (n, answer) in answers.iter().enumerate() {
        if n == 3 {
            let refused = answer.as_ref().unwrap_err();
            assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
            assert!(refused.message().contains("unmatched consumer name"), "{refused:?}");
        } else {
            assert!(answer.is_ok(), "update {n}: {answer:?}");
        }
    }

    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert_eq!(
        scraped(&metrics, r#"conductor_plugin_batched_requests_total{plugin="maestro"}"#),
        8.0,
        "the seven went into the eighth's batch"
    );
    assert_eq!(
        scraped(
            &metrics,
            r#"conductor_plugin_calls_total{call="handle-batch",outcome="error",plugin="maestro"}"#
        ),
        1.0,
        "one call, with the refused update"
    );

    // What one at a time writes: x once; y at 10 and at 20 (5 is older than 10), y's status the
    // one of 20; z's update, then its StatusDelete, and the row gone; nothing for z after.
    let y_status = db.resource(&y).await.unwrap().status.unwrap();
    assert_eq!(y_status["data"]["conditions"][0]["type"], "Available");
    assert_eq!(y_status["sequenceid"], support::sequence(20).as_str());
    assert!(db.resource(&z).await.is_none(), "z deleted by its agent");
    let mut kinds: BTreeMap<(String, String), usize> = BTreeMap::new();
    for e in db.status_events().await {
        *kinds.entry((e.resource_id, e.kind)).or_default() += 1;
    }
    let expected: BTreeMap<(String, String), usize> = [
        ((x.clone(), "StatusUpdate".to_owned()), 1),
        ((y.clone(), "StatusUpdate".to_owned()), 2),
        ((z.clone(), "StatusUpdate".to_owned()), 1),
        ((z.clone(), "StatusDelete".to_owned()), 1),
    ]
    .into();
    assert_eq!(kinds, expected);
    // One NOTIFY per status event, Maestro's listener reading one id from each.
    for _ in 0..5 {
        tokio::time::timeout(WAIT, maestro.recv()).await.unwrap().unwrap();
    }
}

/// An update the running batch takes in, whose resource's status lock another transaction
/// holds, is not waited for under the batch's locks (they were taken in key order; waiting out of
/// order could deadlock against Maestro or another replica): the batch commits without it, and
/// it is written after, with every later update of its resource, in a transaction of its own
/// that waits for the lock.
#[tokio::test(flavor = "multi_thread")]
async fn a_taken_update_whose_lock_is_held_is_written_after_the_batch_commits() {
    let db = MaestroDb::start().await;
    let (x, _) = db.create("cluster1", "x", true).await;
    let (y, _) = db.create("cluster1", "y", true).await;
    let (z, _) = db.create("cluster1", "z", true).await;
    // The call lasts until y's lock is let go.
    let c = one_instance(&db, "call_timeout = \"60s\"");
    let holds_x = hold_status_lock(&db, &x).await;
    let holds_y = hold_status_lock(&db, &y).await;
    let first = send(&c, status_update("cluster1", &x, 1, 10, "Applied")).await;
    someone_waits_for_a_lock(&db).await;
    let y_older = send(&c, status_update("cluster1", &y, 1, 10, "Applied")).await;
    let z_update = send(&c, status_update("cluster1", &z, 1, 10, "Applied")).await;
    let y_newer = send(&c, status_update("cluster1", &y, 1, 20, "Available")).await;

    // x's lock free: the batch takes the three in, writes z's beside x's and commits; y's two
    // wait for y's lock in a transaction of their own.
    holds_x.commit().await.unwrap();
    support::eventually(WAIT, "x and z written", async || {
        db.resource(&x).await.unwrap().status.is_some() && db.resource(&z).await.unwrap().status.is_some()
    })
    .await;
    someone_waits_for_a_lock(&db).await;
    assert!(db.resource(&y).await.unwrap().status.is_none(), "y waits for its lock");
    assert!(
        !y_older.is_finished() && !y_newer.is_finished(),
        "y's agents wait for their answers"
    );
    assert!(
        !first.is_finished() && !z_update.is_finished(),
        "the call answers all it carries at once, after y's"
    );

    holds_y.commit().await.unwrap();
    for sent in [first, y_older, z_update, y_newer] {
        sent.await.unwrap().unwrap();
    }
    let y_status = db.resource(&y).await.unwrap().status.unwrap();
    assert_eq!(y_status["data"]["conditions"][0]["type"], "Available", "in order");
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for e in db.status_events().await {
        assert_eq!(e.kind, "StatusUpdate");
        *kinds.entry(e.resource_id).or_default() += 1;
    }
    assert_eq!(kinds, [(x, 1), (y, 2), (z, 1)].into());
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert_eq!(
        scraped(&metrics, r#"conductor_plugin_batched_requests_total{plugin="maestro"}"#),
        4.0,
        "one call carried the four"
    );
}

/// What a run of agents wrote, keyed by resource name: its row's status (`None`: the row is gone;
/// ids made names), and its status events by kind.
#[derive(Debug, PartialEq)]
struct Written {
    statuses: BTreeMap<String, Option<Option<Value>>>,
    events: BTreeMap<(String, String), usize>,
}

const CLUSTERS: usize = 8;
const RESOURCES: usize = 6;

/// The updates of resource `r` of a cluster, in the order its agent sends them: newer statuses,
/// a repeat, an older one, one for another version, and — for every third resource — the
/// `Deleted` condition and one more after it.
fn script(r: usize) -> Vec<(i32, i64, &'static str)> {
    let mut steps = vec![
        (1, 10, "Applied"),
        (1, 10, "Applied"),
        (1, 20, "Available"),
        (1, 15, "Progressing"),
        (2, 30, "Applied"),
        (1, 40, "Degraded"),
    ];
    if r.is_multiple_of(3) {
        steps.push((1, 50, "Deleted"));
        steps.push((1, 60, "Applied"));
    }
    steps
}

/// Every cluster's agent, on its own connection, sends the scripts of its resources — one update
/// of a resource at a time, the resources side by side — and the run's writes are read back.
async fn run(db: &MaestroDb, c: &Conductor) -> Written {
    let mut names = BTreeMap::new();
    let mut agents = tokio::task::JoinSet::new();
    for k in 0..CLUSTERS {
        let cluster = format!("cluster{k}");
        let client = c.client().await.unwrap();
        let mut ids = Vec::new();
        for r in 0..RESOURCES {
            let name = format!("{cluster}-r{r}");
            let (id, _) = db.create(&cluster, &name, true).await;
            names.insert(id.clone(), name.clone());
            ids.push((r, id, name));
        }
        for (r, id, name) in ids {
            // The cluster's one connection, shared by its resources' updates.
            let (cluster, mut client) = (cluster.clone(), client.clone());
            agents.spawn(async move {
                for (n, (version, tick, condition)) in script(r).into_iter().enumerate() {
                    let mut update = status_update(&cluster, &id, version, tick, condition);
                    update.id = format!("{name}-{n}");
                    publish(&mut client, update).await.unwrap();
                }
            });
        }
    }
    while let Some(done) = agents.join_next().await {
        done.unwrap();
    }
    let named = |text: String| {
        names
            .iter()
            .fold(text, |text, (id, name)| text.replace(id.as_str(), name))
    };
    let mut statuses = BTreeMap::new();
    for (id, name) in &names {
        let row = db.resource(id).await;
        let status = row.map(|r| r.status.map(|s| serde_json::from_str(&named(s.to_string())).unwrap()));
        statuses.insert(name.clone(), status);
    }
    let mut events = BTreeMap::new();
    for e in db.status_events().await {
        *events.entry((named(e.resource_id), e.kind)).or_default() += 1;
    }
    Written { statuses, events }
}

/// Eight agents at once, each resource's updates in order: the batches (one instance, so
/// requests wait together) write exactly what the same run writes one update at a time
/// (`limits.request_batch = 1`, every update its own transaction).
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_agents_write_what_one_update_at_a_time_writes() {
    let batched_db = MaestroDb::start().await;
    let batched = one_instance(&batched_db, "");
    let alone_db = MaestroDb::start().await;
    let alone = one_instance(&alone_db, "request_batch = 1");

    let with_batches = run(&batched_db, &batched).await;
    let one_at_a_time = run(&alone_db, &alone).await;

    let metrics = batched.admin_get("/metrics").await.unwrap().1;
    let in_batches = scraped(&metrics, r#"conductor_plugin_batched_requests_total{plugin="maestro"}"#);
    assert!(in_batches > 0.0, "requests went in batches");
    let metrics = alone.admin_get("/metrics").await.unwrap().1;
    assert_eq!(
        scraped(&metrics, r#"conductor_plugin_batched_requests_total{plugin="maestro"}"#),
        0.0,
        "request_batch = 1: one at a time"
    );
    let updates = (0..RESOURCES).map(|r| script(r).len()).sum::<usize>() * CLUSTERS;
    println!("{in_batches} of {updates} updates went in batches");
    assert_eq!(with_batches.statuses.len(), CLUSTERS * RESOURCES);
    assert_eq!(with_batches, one_at_a_time);
}
