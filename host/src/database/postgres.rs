//! PostgreSQL for the plugins that share a database with another system (Maestro): Maestro's
//! advisory-lock keys, and LISTEN as a resumable stream of notifications that says when it
//! (re)connected, so a plugin can catch up on what it missed. (Whether a database holds Maestro's
//! schema is the maestro plugin's own startup check.)

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// FNV-1a, 32 bits, reinterpreted as `int4`: Maestro's advisory-lock key of a string.
pub fn advisory_key(s: &str) -> i32 {
    let mut hash: u32 = 2_166_136_261;
    for b in s.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(16_777_619);
    }
    hash as i32
}

/// The two-`int4` advisory lock Maestro takes for `id` of `lock_type` (`events`, `resources`,
/// `resource_status`, …). The `bigint` form is a different lock space: always bind both keys.
pub fn advisory_keys(id: &str, lock_type: &str) -> (i32, i32) {
    (advisory_key(id), advisory_key(lock_type))
}

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

/// Connects a listener and LISTENs on `channels`.
pub async fn listener(pool: &PgPool, channels: &[String]) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen_all(channels.iter().map(String::as_str)).await?;
    Ok(listener)
}

/// Listens on `channels` until `stop`, sending what arrives to `events`, starting with
/// `connected` when the caller already holds a listening connection. A lost connection is
/// re-established with backoff (100 ms doubling to 10 s, logged each time).
pub fn listen(
    pool: PgPool,
    channels: Vec<String>,
    connected: Option<PgListener>,
    events: mpsc::Sender<DbEvent>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
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
            if events.send(DbEvent::Listening { reconnected }).await.is_err() {
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
                        if events.send(event).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break "connection closed".to_owned(),
                    Err(e) => break e.to_string(),
                }
            };
            tracing::warn!(?channels, %reason, "LISTEN connection lost; reconnecting");
            if events.send(DbEvent::Lost(reason)).await.is_err() {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advisory_keys_match_maestros() {
        // maestro-db.md §4.1, computed by Maestro's Go code.
        assert_eq!(advisory_key("events"), 316_203_908);
        assert_eq!(advisory_key("resources"), 1_893_056_498);
        assert_eq!(advisory_key("resource_status"), -1_890_629_248);
        assert_eq!(advisory_key("instances"), 105_446_707);
        assert_eq!(advisory_key("migrations"), 457_026_696);
        assert_eq!(advisory_key("maestro-instances-liveness-check"), -63_087_106);
        assert_eq!(advisory_key("maestro-undelivered-check"), -534_849_769);
        assert_eq!(advisory_key("maestro-stale-delete-check"), -1_780_146_569);
    }
}
