//! LISTEN as a resumable stream of notifications that says when it (re)connected, so a plugin can
//! catch up on what it missed.

use std::future::Future;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio_util::sync::CancellationToken;

/// What a LISTEN stream delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbEvent {
    Notification {
        channel: String,
        payload: String,
    },
    /// The LISTEN is in place: the first time (`reconnected` false), and again after every lost
    /// connection is re-established, when notifications sent meanwhile are gone, so catch up
    /// from the tables.
    Listening {
        reconnected: bool,
    },
    /// The listening connection was lost (the reason); reconnecting with backoff.
    Lost(String),
}

/// Where a LISTEN's events go, taken in the listening task itself: a notification is handed on
/// without waking another task.
pub trait DbEvents: Send {
    /// Takes `event`, waiting for room; false once nothing takes events any more, which ends the
    /// LISTEN.
    fn deliver(&mut self, event: DbEvent) -> impl Future<Output = bool> + Send;
}

/// Connects a listener and LISTENs on `channels`.
pub async fn listener(pool: &PgPool, channels: &[String]) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen_all(channels.iter().map(String::as_str)).await?;
    Ok(listener)
}

/// Listens on `channels` until `stop`, delivering what arrives to `events`, starting with
/// `connected` when the caller already holds a listening connection. A lost connection is
/// re-established with backoff (100 ms doubling to 10 s, logged each time). While `events` has
/// no room, the connection is not read.
pub async fn listen(
    pool: PgPool,
    channels: Vec<String>,
    connected: Option<PgListener>,
    events: &mut impl DbEvents,
    stop: CancellationToken,
) {
    {
        let mut backoff = Duration::from_millis(100);
        let mut reconnected = false;
        let mut connected = connected;
        loop {
            let mut listener = match connected.take() {
                Some(l) => l,
                None => tokio::select! {
                    _ = stop.cancelled() => return,
                    r = listener(&pool, &channels) => match r {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::warn!(?channels, error = %e, retry_in = ?backoff, "LISTEN failed; retrying");
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                _ = tokio::time::sleep(backoff) => {}
                            }
                            backoff = (backoff * 2).min(Duration::from_secs(10));
                            continue;
                        }
                    },
                },
            };
            backoff = Duration::from_millis(100);
            if reconnected {
                tracing::info!(?channels, "LISTEN connection re-established");
            }
            if !events.deliver(DbEvent::Listening { reconnected }).await {
                return;
            }
            reconnected = true;
            let reason = loop {
                let next = tokio::select! {
                    _ = stop.cancelled() => return,
                    n = listener.try_recv() => n,
                };
                match next {
                    Ok(Some(n)) => {
                        let event = DbEvent::Notification {
                            channel: n.channel().to_owned(),
                            payload: n.payload().to_owned(),
                        };
                        if !events.deliver(event).await {
                            return;
                        }
                    }
                    Ok(None) => break "connection closed".to_owned(),
                    Err(e) => break e.to_string(),
                }
            };
            tracing::warn!(?channels, %reason, "LISTEN connection lost; reconnecting");
            if !events.deliver(DbEvent::Lost(reason)).await {
                return;
            }
        }
    }
}
