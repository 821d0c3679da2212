//! The databases named in `conductor.toml`, by name: a pool each, and the LISTEN connections the
//! plugins ask for, whose health shows in the logs, the metrics and `/readyz`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use conductor_plugin_sdk::HostEvent;
use conductor_plugin_sdk::pg::{Listening, Notification};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgSslMode};
use tokio_util::sync::CancellationToken;

use super::kept::Kept;
use super::pipeline::Named;
use super::postgres::{self, DbEvent, DbEvents};
use crate::config::{DatabaseConfig, TlsMode};
use crate::host_events::{EventKey, EventQueue};
use crate::telemetry::Metrics;
use crate::telemetry::metrics::ListenerSeries;
use crate::telemetry::{Readiness, readiness};

/// A pooled connection idle longer than this is pinged before it is handed out.
const PING_IF_IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// How many connections a database of `pool_size` keeps between uses (`kept`): half its pool,
/// at most four (the maestro plugin's spec batch, its status calls and the consumer controller).
fn kept_at_most(pool_size: u32) -> usize {
    (pool_size as usize / 2).min(4)
}

/// A plugin's LISTEN on one channel: its notifications and (re)connects queued for the plugin,
/// its health in the logs, the metrics and `/readyz`.
struct IntoQueue {
    plugin: String,
    database: String,
    channel: String,
    events: Arc<EventQueue>,
    /// Its series, shared with a successor's on the same channel (given up when dropped).
    series: ListenerSeries,
    /// Its `/readyz` entry, apart from a successor's of the same name (gone when dropped).
    readiness: readiness::Entry,
}

impl IntoQueue {
    /// Holds a LISTEN of `plugin` on `channel` of `database`: reported until dropped, when the
    /// plugin's tasks stop.
    fn new(plugin: &str, database: &str, channel: &str, events: Arc<EventQueue>, databases: &Databases) -> Self {
        Self {
            plugin: plugin.to_owned(),
            database: database.to_owned(),
            channel: channel.to_owned(),
            events,
            series: databases.metrics.listener_series(database, channel),
            readiness: databases
                .readiness
                .entry(format!("database {database:?} LISTEN {channel:?} (plugin {plugin})")),
        }
    }
}

impl DbEvents for IntoQueue {
    async fn deliver(&mut self, event: DbEvent) -> bool {
        let event = match event {
            DbEvent::Notification { channel, payload } => HostEvent::Notification(Notification {
                database: self.database.clone(),
                channel,
                payload,
            }),
            DbEvent::Listening { reconnected } => {
                self.series.set(true);
                self.readiness.set_down(None);
                HostEvent::Listening(Listening {
                    database: self.database.clone(),
                    channel: self.channel.clone(),
                    reconnected,
                })
            }
            DbEvent::Lost(reason) => {
                let (plugin, database, channel) = (&self.plugin, &self.database, &self.channel);
                tracing::warn!(%plugin, %database, %channel, %reason, "database LISTEN connection lost; reconnecting");
                self.series.set(false);
                self.readiness
                    .set_down(Some(format!("connection lost ({reason}); reconnecting")));
                return true;
            }
        };
        let Some(key) = EventKey::of(&event) else { return true };
        self.events.push(key, event).await
    }
}

/// How conductor pools a database's connections: at most `size`, a borrower waiting at most
/// `acquire_timeout`.
///
/// sqlx pings every connection it hands out by default: a round trip per transaction. A
/// connection in steady use proves itself (sqlx also pings each one as it comes back, which
/// flushes the `ROLLBACK` of a transaction a cancelled call left, and drops it when that fails);
/// only one that sat idle (where a restart or an idle timeout of the server may have closed it) is
/// pinged before use.
pub fn pool_options(size: u32, acquire_timeout: std::time::Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(acquire_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_IF_IDLE_FOR {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// The configured databases.
pub struct Databases {
    pools: BTreeMap<String, PgPool>,
    /// Connections kept between uses, per database.
    kept: BTreeMap<String, Arc<Kept>>,
    /// The statements prepared in sessions for the calls that send several at once.
    named: Named,
    metrics: Metrics,
    readiness: Arc<Readiness>,
}

/// Why a database's settings are unusable: the key under `databases.<name>` and the reason.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct DatabaseConfigError {
    pub key: String,
    pub reason: String,
}

/// The URL kept in `file` (a mounted Secret), without surrounding whitespace.
fn read_url(name: &str, file: &Path) -> Result<String, DatabaseConfigError> {
    let fail = |reason: String| DatabaseConfigError {
        key: format!("databases.{name}.url_file"),
        reason,
    };
    let text = std::fs::read_to_string(file).map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
    let url = text.trim();
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(fail(format!(
            "{} must hold a URL starting with postgres:// or postgresql://",
            file.display()
        )));
    }
    Ok(url.to_owned())
}

/// The connection options of `config`, reaching `url`.
fn connect_options(name: &str, config: &DatabaseConfig, url: &str) -> Result<PgConnectOptions, DatabaseConfigError> {
    let mut options: PgConnectOptions = url.parse().map_err(|e| DatabaseConfigError {
        key: format!("databases.{name}.url"),
        reason: format!("invalid URL: {e}"),
    })?;
    if let Some(mode) = config.tls {
        options = options.ssl_mode(match mode {
            TlsMode::Disable => PgSslMode::Disable,
            TlsMode::Prefer => PgSslMode::Prefer,
            TlsMode::Require => PgSslMode::Require,
            TlsMode::VerifyCa => PgSslMode::VerifyCa,
            TlsMode::VerifyFull => PgSslMode::VerifyFull,
        });
    }
    if let Some(ca) = &config.ca_file {
        options = options.ssl_root_cert(ca);
    }
    let timeout_ms = config.statement_timeout.0.as_millis().to_string();
    Ok(options
        .application_name("conductor")
        .options([("statement_timeout", timeout_ms.as_str())]))
}

impl Databases {
    /// Pools for `configs` (connected on first use). `urls` has the URL of each embedded database;
    /// `resolve` makes configured paths relative to the configuration file.
    pub fn new(
        configs: &BTreeMap<String, DatabaseConfig>,
        urls: &BTreeMap<String, String>,
        resolve: impl Fn(&Path) -> std::path::PathBuf,
        metrics: Metrics,
        readiness: Arc<Readiness>,
    ) -> Result<Arc<Self>, DatabaseConfigError> {
        let mut pools = BTreeMap::new();
        let mut kept = BTreeMap::new();
        for (name, config) in configs {
            let url = match (&config.url, &config.url_file) {
                (Some(url), _) => url.clone(),
                (None, Some(file)) => read_url(name, &resolve(file))?,
                (None, None) => urls.get(name).cloned().ok_or_else(|| DatabaseConfigError {
                    key: format!("databases.{name}"),
                    reason: "the embedded database did not start".to_owned(),
                })?,
            };
            let mut config = config.clone();
            config.ca_file = config.ca_file.as_deref().map(&resolve);
            let options = connect_options(name, &config, &url)?;
            let pool = pool_options(config.pool_size, config.connect_timeout.0).connect_lazy_with(options);
            pools.insert(name.clone(), pool);
            kept.insert(name.clone(), Kept::new(kept_at_most(config.pool_size)));
        }
        Ok(Arc::new(Self {
            pools,
            kept,
            named: Named::default(),
            metrics,
            readiness,
        }))
    }

    /// No databases (a host that runs none).
    pub fn none() -> Arc<Self> {
        Arc::new(Self {
            pools: BTreeMap::new(),
            kept: BTreeMap::new(),
            named: Named::default(),
            metrics: Metrics::new(),
            readiness: Arc::default(),
        })
    }

    pub fn pool(&self, name: &str) -> Option<&PgPool> {
        self.pools.get(name)
    }

    /// The statements named for sending several at once (`pipeline`), the same in every database.
    pub fn named(&self) -> &Named {
        &self.named
    }

    /// The connections `name` keeps between uses.
    pub fn kept(&self, name: &str) -> Option<&Arc<Kept>> {
        self.kept.get(name)
    }

    /// LISTENs on `channel` of `database` for `plugin`: the first connection is made now (so an
    /// unreachable database or a role that cannot LISTEN is an error here); the returned task
    /// then delivers notifications and every (re)connect to `events` until `stop`.
    pub async fn listen(
        &self,
        plugin: &str,
        database: &str,
        channel: &str,
        events: Arc<EventQueue>,
        stop: CancellationToken,
    ) -> Result<impl Future<Output = ()> + Send + 'static, String> {
        let pool = self
            .pool(database)
            .ok_or_else(|| format!("no database {database:?}"))?
            .clone();
        let channels = vec![channel.to_owned()];
        let first = postgres::listener(&pool, &channels)
            .await
            .map_err(|e| format!("cannot LISTEN on {channel:?} in database {database:?}: {e}"))?;
        let mut into_queue = IntoQueue::new(plugin, database, channel, events, self);
        Ok(async move {
            // Ends when the plugin stops: on `stop`, or when its queue closes.
            postgres::listen(pool, channels, Some(first), &mut into_queue, stop).await;
        })
    }

    /// Closes every pool: their connections end.
    pub async fn close(&self) {
        for kept in self.kept.values() {
            kept.release_all();
        }
        for pool in self.pools.values() {
            pool.close().await;
        }
    }
}
