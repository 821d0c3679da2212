//! LISTEN against a real PostgreSQL (the embedded server, from the machine's binaries): it
//! survives the loss of its connection and says so. (Statements, advisory locks and transactions
//! are tested with the `pg` capability, in `src/plugins/pg.rs`.)

mod common;

use std::time::Duration;

use conductor::database::postgres::{self, DbEvent, DbEvents};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The LISTEN's events sent on a channel, for the test to read.
struct Sent(mpsc::Sender<DbEvent>);

impl DbEvents for Sent {
    async fn deliver(&mut self, event: DbEvent) -> bool {
        self.0.send(event).await.is_ok()
    }
}

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
async fn listen_survives_the_loss_of_its_connection() {
    let (_dir, pg) = common::start_embedded();
    let pool = sqlx::PgPool::connect(&pg.url()).await.unwrap();

    // LISTEN: notifications arrive; when the listening connection is killed, the stream says
    // it reconnected, and later notifications arrive again.
    let (tx, mut rx) = mpsc::channel(16);
    let stop = CancellationToken::new();
    let (listening, stopping) = (pool.clone(), stop.clone());
    let task = tokio::spawn(async move {
        postgres::listen(listening, vec!["events".into()], None, &mut Sent(tx), stopping).await;
    });
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
