//! Issue 46 on the maestro source: what broke Maestro in production — a mass delete queued ahead
//! of every other cluster's work, a backlog replayed while new work waited — cannot break conductor.
//! A real PostgreSQL with Maestro's schema, driven as Maestro drives it; every agent on a gRPC
//! connection of its own. The tests of this file run one at a time: each measures latency against
//! a quiet baseline taken in the same test, which another test's burst would spoil.

#[path = "support/maestro.rs"]
mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::{attr, attr_str};
use conductor_blackbox_tests::latency::assert_within_three_times;
use conductor_blackbox_tests::{Conductor, Sub, WORKS, assert_no_work_agent_cut_off, scraped, subscribe};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use support::{MaestroDb, config, eventually, maestro_create};
use tokio::sync::Mutex;

/// One test at a time (see the module's doc).
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// `count` resources for each of `clusters` (consumer rows, resource rows at version 1), written
/// at once with no events: works their agents already hold.
async fn seed_resources(db: &MaestroDb, clusters: &[String], count: i64) {
    sqlx::query("INSERT INTO consumers (id, created_at, updated_at, name) SELECT gen_random_uuid()::text, now(), now(), c FROM unnest($1::text[]) AS c ON CONFLICT DO NOTHING")
        .bind(clusters)
        .execute(&db.pool)
        .await
        .unwrap();
    for cluster in clusters {
        let template = support::spec_payload("ID", cluster, "NAME", 1, 1).to_string();
        sqlx::query(
            "INSERT INTO resources (id, name, created_at, updated_at, source, consumer_name, version, type, payload)
             SELECT r.id, r.id, now(), now(), 'source-work-client', $1, 1, '', replace(replace($2, 'ID', r.id), 'NAME', r.id)::json
             FROM (SELECT gen_random_uuid()::text AS id FROM generate_series(1, $3)) AS r",
        )
        .bind(cluster)
        .bind(&template)
        .bind(count)
        .execute(&db.pool)
        .await
        .unwrap();
    }
}

/// Maestro's MarkAsDeleting for every resource of `clusters`, in one transaction: the rows
/// soft-deleted, an `events` row each, a NOTIFY each. Returns how many.
async fn soft_delete_all(db: &MaestroDb, clusters: &[String]) -> i64 {
    sqlx::query_scalar(
        "WITH deleted AS (UPDATE resources SET deleted_at = now() WHERE consumer_name = ANY($1) AND deleted_at IS NULL RETURNING id),
              written AS (INSERT INTO events (id, created_at, updated_at, source, source_id, event_type)
                          SELECT gen_random_uuid()::text, now(), now(), 'Resources', id, 'Delete' FROM deleted RETURNING id)
         SELECT count(pg_notify('events', id)) FROM written",
    )
    .bind(clusters)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

/// Reads `sub` until it has seen a deleting spec of `expected` resources; fails if the stream
/// ends or errs first. Returns the ids.
async fn read_deletes(mut sub: Sub, expected: usize, cluster: String) -> (Sub, HashSet<String>) {
    let mut deleted = HashSet::new();
    while deleted.len() < expected {
        let e = tokio::time::timeout(Duration::from_secs(120), sub.next_event())
            .await
            .unwrap_or_else(|_| panic!("{cluster}: {} of {expected} deletes in 120 s", deleted.len()))
            .unwrap_or_else(|e| {
                panic!(
                    "{cluster}: the stream ended after {} of {expected} deletes: {e}",
                    deleted.len()
                )
            });
        if attr(&e, "ce-deletiontimestamp").is_some() {
            deleted.insert(attr_str(&e, "ce-resourceid").unwrap().to_owned());
        }
    }
    (sub, deleted)
}

/// A create of the eleventh cluster: its resource, when its NOTIFY was sent, and how long its
/// spec took to reach the agent.
struct Timed {
    id: String,
    written: Instant,
    latency: Duration,
}

fn latencies(timed: &[Timed]) -> Vec<Duration> {
    timed.iter().map(|t| t.latency).collect()
}

/// Maestro creates for `cluster`, one every 100 ms whether or not the last has arrived (as a
/// source writes: a create that waits holds up none after it, so every one that lands in a slow
/// moment counts), each timed from its NOTIFY to its spec on the agent's stream: at least
/// `at_least`, and on until `until` is set.
async fn timed_creates(
    db: &MaestroDb,
    sub: &mut Sub,
    cluster: &str,
    at_least: usize,
    until: &AtomicBool,
) -> Vec<Timed> {
    let mut written: HashMap<String, Instant> = HashMap::new();
    let mut arrived: HashMap<String, Instant> = HashMap::new();
    let mut creating = FuturesUnordered::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut started = 0;
    loop {
        let more = started < at_least || !until.load(Ordering::Relaxed);
        if !more && creating.is_empty() && written.keys().all(|id| arrived.contains_key(id)) {
            break;
        }
        tokio::select! {
            _ = tick.tick(), if more => {
                started += 1;
                creating.push(maestro_create(db, cluster));
            }
            Some((id, at)) = creating.next(), if !creating.is_empty() => {
                written.insert(id, at);
            }
            e = tokio::time::timeout(Duration::from_secs(60), sub.next_event()) => {
                let e = e
                    .unwrap_or_else(|_| panic!("{cluster}: no spec within 60 s"))
                    .expect("the eleventh cluster's stream stays open");
                if let Some(id) = attr_str(&e, "ce-resourceid") {
                    arrived.entry(id.to_owned()).or_insert_with(Instant::now);
                }
            }
        }
    }
    let mut timed: Vec<Timed> = written
        .into_iter()
        .map(|(id, written)| Timed {
            latency: arrived[&id].duration_since(written),
            id,
            written,
        })
        .collect();
    timed.sort_by_key(|t| t.written);
    timed
}

/// The issue's case: ten clusters hold 1,000 resources each; a source soft-deletes all 10,000 in
/// one transaction while an eleventh cluster gets a new resource every 100 ms. No stream ends,
/// every delete reaches its agent on its open stream, and the eleventh cluster's creates keep
/// within 3× of their quiet p99.
#[tokio::test(flavor = "multi_thread")]
async fn a_mass_delete_ends_no_stream_and_delays_no_other_cluster() {
    const CLUSTERS: usize = 10;
    const PER_CLUSTER: i64 = 1_000;
    /// Creates timed at rest, and at least as many while the deletes drain (p99 of 100: the
    /// second slowest).
    const CREATES: usize = 100;
    let _one = ONE_AT_A_TIME.lock().await;
    let db = MaestroDb::start().await;
    let burst: Vec<String> = (0..CLUSTERS).map(|i| format!("burst-{i}")).collect();
    seed_resources(&db, &burst, PER_CLUSTER).await;
    seed_resources(&db, &["quiet".to_owned()], 0).await;
    let c = Conductor::start(&config(&db.url(), "1h")).unwrap();
    let mut agents = Vec::new();
    for cluster in &burst {
        let mut client = c.client().await.unwrap();
        agents.push((subscribe(&mut client, cluster, WORKS).await.unwrap(), client));
    }
    let mut client = c.client().await.unwrap();
    let mut quiet_agent = subscribe(&mut client, "quiet", WORKS).await.unwrap();

    let quiet = latencies(&timed_creates(&db, &mut quiet_agent, "quiet", CREATES, &AtomicBool::new(true)).await);

    let readers: Vec<_> = agents
        .into_iter()
        .zip(&burst)
        .map(|((sub, client), cluster)| {
            let cluster = cluster.clone();
            tokio::spawn(async move {
                let (sub, deleted) = read_deletes(sub, PER_CLUSTER as usize, cluster).await;
                (sub, client, deleted)
            })
        })
        .collect();
    let started = Instant::now();
    let drained = AtomicBool::new(false);
    let committed = std::sync::OnceLock::new();
    let (written, during, subs) = tokio::join!(
        async {
            let n = soft_delete_all(&db, &burst).await;
            committed.get_or_init(Instant::now);
            n
        },
        timed_creates(&db, &mut quiet_agent, "quiet", CREATES, &drained),
        async {
            let mut subs = Vec::new();
            for (reader, cluster) in readers.into_iter().zip(&burst) {
                let (sub, client, deleted) = reader.await.unwrap();
                subs.push((sub, client, deleted, cluster.clone()));
            }
            drained.store(true, Ordering::Relaxed);
            subs
        }
    );
    assert_eq!(written, CLUSTERS as i64 * PER_CLUSTER);
    eprintln!("{written} deletes on open streams in {:?}", started.elapsed());
    let mut subs = subs;
    for (_, _, deleted, cluster) in &subs {
        let expected: HashSet<String> = sqlx::query_scalar("SELECT id FROM resources WHERE consumer_name = $1")
            .bind(cluster)
            .fetch_all(&db.pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(deleted, &expected, "{cluster}: every delete of its own resources");
    }
    assert_within_three_times(&quiet, &latencies(&during), "a mass delete of 10,000 resources");

    // Fair, however fast the machine: the eleventh cluster's first resource written after the
    // burst was sent before most of the burst (one queue in arrival order sends it after all).
    let committed = *committed.get().expect("the burst committed");
    let first_after = during
        .iter()
        .find(|t| t.written > committed)
        .expect("a create after the burst");
    let overtaken: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events b, events c WHERE c.source_id = $1 AND b.event_type = 'Delete' \
         AND b.reconciled_date > c.reconciled_date",
    )
    .bind(&first_after.id)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    eprintln!("the eleventh cluster's first create after the burst went ahead of {overtaken} of its deletes");
    assert!(
        overtaken >= written / 2,
        "the eleventh cluster's create waited behind the burst: only {overtaken} of {written} deletes went out after it"
    );

    // Still the streams they were: a new resource of a burst cluster arrives on its open stream,
    // and nobody was cut off or resynced.
    let (id, _) = maestro_create(&db, &burst[0]).await;
    let (sub, ..) = &mut subs[0];
    support::next_where(sub, "a create after the burst", |e| {
        attr_str(e, "ce-resourceid") == Some(id.as_str())
    })
    .await;
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert_no_work_agent_cut_off(&metrics);
    let resyncs: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("conductor_resyncs_total"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert_eq!(resyncs, 0.0, "no agent resynced:\n{metrics}");
    eventually(Duration::from_secs(60), "every delete event reconciled", async || {
        db.count("SELECT count(*) FROM events WHERE reconciled_date IS NULL")
            .await
            == 0
    })
    .await;
}

/// `per_cluster` resources for each of `clusters`, each with a `Create` event nobody reconciled
/// and no NOTIFY: what Maestro wrote while conductor was away. Returns how many events.
async fn seed_backlog(db: &MaestroDb, clusters: &[String], per_cluster: i64) -> i64 {
    seed_resources(db, clusters, per_cluster).await;
    let written = sqlx::query(
        "INSERT INTO events (id, created_at, updated_at, source, source_id, event_type)
         SELECT gen_random_uuid()::text, now(), now(), 'Resources', id, 'Create' FROM resources",
    )
    .execute(&db.pool)
    .await
    .unwrap()
    .rows_affected() as i64;
    // What autovacuum does to a table that grew this much while conductor was away.
    sqlx::query("ANALYZE events, resources")
        .execute(&db.pool)
        .await
        .unwrap();
    written
}

/// Reads `sub` until it has seen a spec of each of `expected` resources.
async fn read_specs(mut sub: Sub, expected: usize, cluster: String) -> Sub {
    let mut seen = HashSet::new();
    while seen.len() < expected {
        let e = tokio::time::timeout(Duration::from_secs(300), sub.next_event())
            .await
            .unwrap_or_else(|_| panic!("{cluster}: {} of {expected} resources in 300 s", seen.len()))
            .unwrap_or_else(|e| panic!("{cluster}: the stream ended after {} of {expected}: {e}", seen.len()));
        seen.insert(attr_str(&e, "ce-resourceid").unwrap().to_owned());
    }
    sub
}

/// After downtime: 100,000 events Maestro wrote while conductor was away wait in the database.
/// conductor is ready at once (readiness does not wait for the backlog), the backlog's size and
/// drain rate are in its metrics, every event reaches its agent and is reconciled, and an
/// eleventh cluster's new resources keep within 3× of their quiet p99 meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_backlog_drains_without_starving_new_events() {
    const CLUSTERS: usize = 10;
    const PER_CLUSTER: i64 = 10_000;
    const CREATES: usize = 100;
    let _one = ONE_AT_A_TIME.lock().await;
    let db = MaestroDb::start().await;
    let backlog: Vec<String> = (0..CLUSTERS).map(|i| format!("away-{i}")).collect();
    let waiting = seed_backlog(&db, &backlog, PER_CLUSTER).await;
    assert_eq!(waiting, CLUSTERS as i64 * PER_CLUSTER);
    seed_resources(&db, &["quiet".to_owned()], 0).await;

    // The agents are there first, as a hub's agents reconnect while conductor restarts; the
    // catch-up runs every few seconds, so events sent before an agent was back go again.
    let c = Conductor::start(&config(&db.url(), "5s")).unwrap();
    let (status, _) = c.admin_get("/readyz").await.unwrap();
    assert_eq!(status, 200, "ready with the backlog still waiting");
    let started = Instant::now();
    let mut readers = Vec::new();
    for cluster in &backlog {
        let mut client = c.client().await.unwrap();
        let sub = subscribe(&mut client, cluster, WORKS).await.unwrap();
        let cluster = cluster.clone();
        readers.push(tokio::spawn(async move {
            let sub = read_specs(sub, PER_CLUSTER as usize, cluster).await;
            (sub, client)
        }));
    }
    let mut client = c.client().await.unwrap();
    let mut quiet_agent = subscribe(&mut client, "quiet", WORKS).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the backlog's size in the metrics",
        async || {
            let metrics = c.admin_get("/metrics").await.unwrap().1;
            scraped(&metrics, "conductor_maestro_unreconciled_events{plugin=\"maestro\"}") >= waiting as f64 / 2.0
        },
    )
    .await;

    let drained = AtomicBool::new(false);
    let (during, _) = tokio::join!(
        timed_creates(&db, &mut quiet_agent, "quiet", CREATES, &drained),
        async {
            for reader in readers {
                reader.await.unwrap();
            }
            eventually(Duration::from_secs(300), "every backlog event reconciled", async || {
                db.count("SELECT count(*) FROM events WHERE reconciled_date IS NULL")
                    .await
                    == 0
            })
            .await;
            drained.store(true, Ordering::Relaxed);
        }
    );
    let took = started.elapsed();
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    let handled = scraped(&metrics, "conductor_maestro_events_handled_total{plugin=\"maestro\"}");
    assert!(
        handled >= waiting as f64,
        "the drain is counted ({handled} handled of {waiting}):\n{metrics}"
    );
    eprintln!(
        "{waiting} events drained in {took:?} ({:.0} a second)",
        waiting as f64 / took.as_secs_f64()
    );
    let quiet = latencies(&timed_creates(&db, &mut quiet_agent, "quiet", CREATES, &AtomicBool::new(true)).await);
    assert_within_three_times(&quiet, &latencies(&during), "a backlog of 100,000 events");
}
