//! What the plugins reach besides the broker: the configured databases (embedded ones started
//! first, off the async workers) and the Kubernetes API server.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{ConfigError, LoadedConfig};
use crate::database::{Databases, EmbeddedPostgres};
use crate::kube::Kubernetes;
use crate::telemetry::{Metrics, Readiness};

/// The embedded databases a configuration started, by name.
pub type Embedded = Vec<(String, EmbeddedPostgres)>;

/// Starts every `embedded` database (initialising its folder and running its `init_sql` when
/// new); a failure names the database's key and stops those already started.
pub async fn start_embedded(loaded: &LoadedConfig) -> Result<Embedded, ConfigError> {
    let mut started = Vec::new();
    for (name, db) in &loaded.config.databases {
        let Some(embedded) = &db.embedded else { continue };
        let mut embedded = embedded.clone();
        embedded.data_dir = loaded.resolve(&embedded.data_dir);
        embedded.init_sql = embedded.init_sql.iter().map(|f| loaded.resolve(f)).collect();
        let key = format!("databases.{name}.embedded");
        let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&embedded)).await;
        let pg = match pg {
            Ok(Ok(pg)) => pg,
            Ok(Err(e)) => {
                stop_embedded(started).await;
                return Err(loaded.error(key, e.to_string()));
            }
            Err(e) => {
                stop_embedded(started).await;
                return Err(loaded.error(key, e.to_string()));
            }
        };
        tracing::info!(database = %name, url = %pg.url(), data_dir = %pg.data_dir().display(), "embedded database ready");
        started.push((name.clone(), pg));
    }
    Ok(started)
}

/// Stops the embedded databases, off the async workers.
pub async fn stop_embedded(databases: Embedded) {
    for (_, mut pg) in databases {
        let stopped = tokio::task::spawn_blocking(move || pg.stop()).await;
        if let Ok(Err(e)) = stopped {
            tracing::warn!(error = %e, "embedded database did not stop cleanly");
        }
    }
}

/// Pools for the configured databases (connected on first use); `embedded` has the URL of each
/// embedded one. With `skip_embedded`, embedded databases get no pool.
pub fn open_databases(
    loaded: &LoadedConfig,
    embedded: &BTreeMap<String, String>,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    skip_embedded: bool,
) -> Result<Arc<Databases>, ConfigError> {
    let configs = loaded
        .config
        .databases
        .iter()
        .filter(|(_, db)| !(skip_embedded && db.embedded.is_some()))
        .map(|(n, db)| (n.clone(), db.clone()))
        .collect();
    Databases::new(&configs, embedded, |p| loaded.resolve(p), metrics, readiness)
        .map_err(|e| loaded.error(e.key, e.reason))
}

/// The URLs of the embedded databases, by name.
pub fn embedded_urls(embedded: &Embedded) -> BTreeMap<String, String> {
    embedded.iter().map(|(name, pg)| (name.clone(), pg.url())).collect()
}

/// The Kubernetes API server of `[kubernetes]` (a client made on first use).
pub fn kubernetes(loaded: &LoadedConfig) -> Arc<Kubernetes> {
    let kubeconfig = loaded
        .config
        .kubernetes
        .kubeconfig
        .as_deref()
        .map(|p| loaded.resolve(p));
    Arc::new(Kubernetes::new(kubeconfig))
}
