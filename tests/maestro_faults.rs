//! The maestro source when things go wrong: PostgreSQL restarted under connected agents, conductor
//! cut off from the database while Maestro keeps writing, notifications never sent, two conductor
//! replicas sharing one database, and the maestro plugin reloaded under its LISTEN.

#[path = "support/maestro.rs"]
mod support;

use std::time::{Duration, Instant};

use conductor_blackbox_tests::{Conductor, WORKS, proto, publish, subscribe};
use support::{MaestroDb, config, eventually, is_spec_of, next_where, spec_of, status_update};

const WAIT: Duration = Duration::from_secs(30);

/// Publishes `event` until it is accepted (the agent retries failed status updates).
async fn publish_until_accepted(c: &Conductor, event: proto::CloudEvent) -> usize {
    let mut client = c.client().await.unwrap();
    let deadline = Instant::now() + WAIT;
    let mut attempts = 0;
    loop {
        attempts += 1;
        match publish(&mut client, event.clone()).await {
            Ok(()) => return attempts,
            Err(e) => assert!(Instant::now() < deadline, "still refused: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn ready(c: &Conductor) -> (u16, String) {
    c.admin_get("/readyz").await.unwrap()
}

/// PostgreSQL restarted while an agent is connected, then conductor cut off from it while Maestro
/// goes on writing: status updates refused meanwhile succeed on retry, events written meanwhile
/// are delivered after it (by the catch-up on reconnect: the periodic one is an hour away), and
/// `resources` ends with exactly what was written.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_outages_lose_and_duplicate_nothing() {
    let mut db = MaestroDb::start().await;
    for statement in [
        "CREATE ROLE conductor LOGIN",
        "GRANT ALL ON ALL TABLES IN SCHEMA public TO conductor",
    ] {
        sqlx::query(statement).execute(&db.pool).await.unwrap();
    }
    let url = format!("postgres://conductor@127.0.0.1:{}/maestro", db.port);
    let c = Conductor::start(&config(&url, "1h")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let (first, _) = db.create("cluster1", "first", true).await;
    next_where(&mut sub, "the first spec", spec_of(&first, 1)).await;
    assert_eq!(ready(&c).await.0, 200);
    let lost = r#"conductor_database_listener_lost_total{channel="events",database="maestro"}"#;
    let (_, metrics) = c.admin_get("/metrics").await.unwrap();
    assert!(metrics.contains(&format!("{lost} 0")), "no loss yet, at 0: {metrics}");

    // A real restart: the LISTEN connection drops (visible in /readyz and the metrics); a status
    // update meanwhile is refused, and accepted once PostgreSQL is back.
    db.stop().await;
    let refused = publish(&mut client, status_update("cluster1", &first, 1, 10, "Applied")).await;
    assert!(refused.is_err(), "no database, no status write");
    eventually(WAIT, "/readyz reporting the lost LISTEN", async || {
        ready(&c).await.0 == 503
    })
    .await;
    let (_, why) = ready(&c).await;
    assert!(why.contains("LISTEN \"events\""), "{why}");
    let (_, metrics) = c.admin_get("/metrics").await.unwrap();
    assert!(
        metrics.contains(r#"conductor_database_listener_up{channel="events",database="maestro"} 0"#),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("{lost} 1")), "{metrics}");
    db.restart().await;
    publish_until_accepted(&c, status_update("cluster1", &first, 1, 10, "Applied")).await;
    eventually(WAIT, "/readyz ready again", async || ready(&c).await.0 == 200).await;
    let (second, _) = db.create("cluster1", "second", true).await;
    next_where(&mut sub, "the spec written after the restart", spec_of(&second, 1)).await;

    // Conductor cut off while Maestro writes: a new resource and an update, NOTIFYs sent to no
    // one, and the agent's status for the second resource refused.
    sqlx::query("ALTER ROLE conductor NOLOGIN")
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'conductor'")
        .execute(&db.pool)
        .await
        .unwrap();
    eventually(WAIT, "/readyz reporting the lost LISTEN", async || {
        ready(&c).await.0 == 503
    })
    .await;
    let (third, _) = db.create("cluster1", "third", true).await;
    db.update(&first, 3).await;
    let refused = publish(&mut client, status_update("cluster1", &second, 1, 20, "Applied")).await;
    assert!(refused.is_err(), "cut off, no status write");
    sqlx::query("ALTER ROLE conductor LOGIN")
        .execute(&db.pool)
        .await
        .unwrap();
    // The catch-up sends what was missed in the order of the events' ids: each resource's
    // current state, whichever comes first.
    let (mut third_seen, mut first_seen) = (false, false);
    while !(third_seen && first_seen) {
        let e = next_where(&mut sub, "the spec and the update written during the outage", |e| {
            is_spec_of(e, &third, 1) || is_spec_of(e, &first, 2)
        })
        .await;
        third_seen |= is_spec_of(&e, &third, 1);
        first_seen |= is_spec_of(&e, &first, 2);
    }
    publish_until_accepted(&c, status_update("cluster1", &second, 1, 20, "Applied")).await;
    // Logged before the catch-up; read from conductor's stderr by another thread, so waited for.
    c.wait_for_log("LISTEN on events re-established; catching up").await;

    // Exactly what was written: three resources, each status once.
    assert_eq!(db.count("SELECT count(*) FROM resources").await, 3);
    assert_eq!(db.resource(&first).await.unwrap().version, 2);
    let statuses = db.status_events().await;
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    for id in [&first, &second] {
        let status = db.resource(id).await.unwrap().status.expect("status stored");
        assert_eq!(status["data"]["conditions"][0]["type"], "Applied");
        assert_eq!(statuses.iter().filter(|s| &s.resource_id == id).count(), 1);
    }
    db.locks_released().await;
}

/// Events whose NOTIFY was never sent are delivered by the periodic catch-up.
#[tokio::test(flavor = "multi_thread")]
async fn missed_notifications_are_delivered_by_the_periodic_catch_up() {
    let db = MaestroDb::start().await;
    let c = Conductor::start(&config(&db.url(), "1s")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let started = Instant::now();
    let (id, event) = db.create("cluster1", "silent", false).await;
    next_where(&mut sub, "the silent spec", spec_of(&id, 1)).await;
    eventually(WAIT, "the silent event reconciled", async || {
        db.reconciled(&event).await
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

/// Two replicas on one database: each delivers every event to the agents connected to it, the
/// event is reconciled once, and a status sent to both is written once.
#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_deliver_to_their_own_agents_and_write_status_once() {
    let db = MaestroDb::start().await;
    let one = Conductor::start(&config(&db.url(), "1m")).unwrap();
    let two = Conductor::start(&config(&db.url(), "1m")).unwrap();
    let (mut c1, mut c2) = (one.client().await.unwrap(), two.client().await.unwrap());
    let mut agent1_on_one = subscribe(&mut c1, "cluster1", WORKS).await.unwrap();
    let mut agent1_on_two = subscribe(&mut c2, "cluster1", WORKS).await.unwrap();
    let mut agent2_on_two = subscribe(&mut c2, "cluster2", WORKS).await.unwrap();

    let mut rounds = Vec::new();
    for n in 0..5 {
        let (a, ea) = db.create("cluster1", &format!("a{n}"), true).await;
        let (b, eb) = db.create("cluster2", &format!("b{n}"), true).await;
        next_where(&mut agent1_on_one, "cluster1's spec on replica one", spec_of(&a, 1)).await;
        next_where(&mut agent1_on_two, "cluster1's spec on replica two", spec_of(&a, 1)).await;
        next_where(&mut agent2_on_two, "cluster2's spec on replica two", spec_of(&b, 1)).await;
        rounds.push((a, ea, eb));
    }
    for (_, ea, eb) in &rounds {
        eventually(WAIT, "both events reconciled", async || {
            db.reconciled(ea).await && db.reconciled(eb).await
        })
        .await;
    }
    db.locks_released().await;

    // The same status update reaches both replicas at once: one write, one doorbell.
    let (a, _, _) = &rounds[0];
    let update = status_update("cluster1", a, 1, 10, "Applied");
    let (r1, r2) = tokio::join!(publish(&mut c1, update.clone()), publish(&mut c2, update));
    r1.unwrap();
    r2.unwrap();
    let statuses = db.status_events().await;
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert_eq!(db.count("SELECT count(*) FROM server_instances").await, 0);
}

/// conductor cancels a plugin's database call at its deadline by dropping it, wherever it is: a
/// transaction whose `BEGIN` is cancelled that way must not leave its pooled connection inside a
/// transaction for the next borrower (the statements of the next call would run in a transaction
/// nobody commits). Deadlines of 0–200 µs land before, during and after the `BEGIN`; the calls go
/// on until 200 were cancelled (how many a deadline cancels depends on the machine's speed). The
/// pool is made as conductor makes its pools.
#[tokio::test]
async fn a_cancelled_begin_never_leaves_the_pooled_connection_in_a_transaction() {
    let db = MaestroDb::start().await;
    let pool = conductor::database::pools::pool_options(1, Duration::from_secs(10))
        .connect(&db.url())
        .await
        .unwrap();
    let mut cancelled = 0;
    for i in 0..20_000u64 {
        if cancelled == 200 {
            break;
        }
        let call = async {
            let mut tx = pool.begin().await?;
            sqlx::query("SELECT 1").execute(&mut *tx).await?;
            tx.commit().await
        };
        if tokio::time::timeout(Duration::from_micros(i % 200), call)
            .await
            .is_err()
        {
            cancelled += 1;
        }
        // A savepoint is refused outside a transaction block, and taken inside one.
        let left_open = sqlx::raw_sql("SAVEPOINT probe").execute(&pool).await.is_ok();
        assert!(
            !left_open,
            "call {i}: the next borrower found the connection inside a transaction"
        );
    }
    assert_eq!(cancelled, 200, "the deadlines cancelled calls: {cancelled}");
}

/// A LISTEN is reported in `/metrics` for as long as a plugin holds it. Each reload that
/// replaces the maestro plugin starts the new plugin's LISTEN before the old plugin stops, and
/// the old one going does not take the series of the new one with it; a reload that unloads the
/// plugin takes its series out.
#[tokio::test(flavor = "multi_thread")]
async fn a_listen_stays_reported_through_reloads_and_leaves_with_its_plugin() {
    let db = MaestroDb::start().await;
    let c = Conductor::start(&config(&db.url(), "1h")).unwrap();
    let series = r#"conductor_database_listener_up{channel="events",database="maestro"}"#;
    let up = format!("{series} 1");
    eventually(WAIT, "the LISTEN reported up", async || {
        c.admin_get("/metrics").await.unwrap().1.contains(&up)
    })
    .await;
    for (reloads, catch_up) in (1..).zip(["2h", "3h", "4h", "5h", "6h", "7h"]) {
        c.rewrite_config(&config(&db.url(), catch_up));
        c.hangup();
        // The replaced plugin is stopped, its LISTEN with it, before the reload is logged.
        let line = c.wait_for_logs("configuration reloaded", reloads).await;
        assert!(line.contains(r#""replaced":"[\"maestro\"]""#), "{line}");
        let (_, metrics) = c.admin_get("/metrics").await.unwrap();
        assert!(
            metrics.contains(&up),
            "reload {reloads}: the new plugin's LISTEN is not reported: {metrics}"
        );
    }
    c.rewrite_config(&format!("[databases.maestro]\nurl = \"{}\"\npool_size = 4\n", db.url()));
    c.hangup();
    let line = c.wait_for_logs("configuration reloaded", 7).await;
    assert!(line.contains(r#""removed":"[\"maestro\"]""#), "{line}");
    let (_, metrics) = c.admin_get("/metrics").await.unwrap();
    assert!(
        !metrics.contains(series),
        "the unloaded plugin's LISTEN is still reported: {metrics}"
    );
}
