//! The PostgreSQL layer against a real PostgreSQL (the embedded server, from the machine's
//! binaries): Maestro's schema check, advisory locks in Maestro's two-int4 key space, and LISTEN
//! surviving the loss of its connection.

mod common;

use std::time::Duration;

use conductor::database::postgres::{self, DbError, DbEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// NOTIFYs `events` with `payload` until something arrives (a NOTIFY sent before the LISTEN is in
/// place is lost), and returns what arrived.
async fn notify_until_received(
    pool: &sqlx::PgPool,
    rx: &mut mpsc::Receiver<DbEvent>,
    payload: &'static str,
) -> Option<DbEvent> {
    for _ in 0..100 {
        sqlx::query("SELECT pg_notify('events', $1)")
            .bind(payload)
            .execute(pool)
            .await
            .unwrap();
        if let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
            return Some(e);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn maestro_schema_check_locks_and_listen_against_real_postgres() {
    let (_dir, pg) = common::start_embedded();
    let pool = postgres::connect(&pg.url(), 4).await.unwrap();
    postgres::check_maestro(&pool)
        .await
        .expect("the embedded database has Maestro's schema");

    // A database without the schema is refused with a clear error.
    sqlx::query("CREATE DATABASE empty").execute(&pool).await.unwrap();
    let empty = postgres::connect(&pg.url().replace("/maestro", "/empty"), 1)
        .await
        .unwrap();
    assert!(matches!(postgres::check_maestro(&empty).await, Err(DbError::NoSchema)));
    empty.close().await;

    // Advisory locks: Maestro's keys, visible in pg_locks as (classid, objid, objsubid=2), and
    // exclusive across sessions until the holder's transaction ends.
    let (k1, k2) = postgres::advisory_keys("0b7e6c2a-event", "events");
    let mut holder = pool.begin().await.unwrap();
    let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1, $2)")
        .bind(k1)
        .bind(k2)
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    assert!(got);
    let shown: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int4::oid AND objid = $2::int4::oid AND objsubid = 2",
    )
    .bind(k1)
    .bind(k2)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(shown, 1);
    let other: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1, $2)")
        .bind(k1)
        .bind(k2)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!other, "a second session does not get the lock");
    holder.commit().await.unwrap();

    // LISTEN: notifications arrive; when the listening connection is killed, the stream says
    // it reconnected, and later notifications arrive again.
    let (tx, mut rx) = mpsc::channel(16);
    let stop = CancellationToken::new();
    let task = postgres::listen(pool.clone(), vec!["events".into()], None, tx, stop.clone());
    let next = async |rx: &mut mpsc::Receiver<DbEvent>| {
        tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("an event in time")
            .expect("open")
    };
    assert_eq!(next(&mut rx).await, DbEvent::Listening { reconnected: false });
    let first = notify_until_received(&pool, &mut rx, "id-1").await;
    assert_eq!(
        first,
        Some(DbEvent::Notification {
            channel: "events".into(),
            payload: "id-1".into()
        })
    );
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {}
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()) t",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(killed >= 1, "the listening session was found");
    assert!(matches!(next(&mut rx).await, DbEvent::Lost(_)));
    assert_eq!(next(&mut rx).await, DbEvent::Listening { reconnected: true });
    let after = notify_until_received(&pool, &mut rx, "id-2").await;
    assert_eq!(
        after,
        Some(DbEvent::Notification {
            channel: "events".into(),
            payload: "id-2".into()
        })
    );
    stop.cancel();
    task.await.unwrap();
    pool.close().await;
}
