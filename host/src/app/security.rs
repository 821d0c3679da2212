//! TLS and the auth layer, set up from the configuration before anything else starts, so that
//! a certificate that does not load or an API server that cannot be reached for TokenReviews is
//! a startup error naming its key.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::auth::Auth;
use crate::config::{Authorization, ConfigError, LoadedConfig};
use crate::grpc::tls::{ReloadingTls, TlsFiles};
use crate::kube::Kubernetes;
use crate::telemetry::Metrics;

/// The TLS configuration (watched for changes until `stop`) and the auth layer.
pub async fn start(
    loaded: &LoadedConfig,
    kubernetes: &Kubernetes,
    metrics: &Metrics,
    stop: CancellationToken,
) -> Result<(Option<Arc<ReloadingTls>>, Arc<Auth>), ConfigError> {
    let config = &loaded.config;
    let tls = match &config.server.tls {
        Some(tls) => Some(
            ReloadingTls::start(TlsFiles::new(loaded, tls), metrics.security.clone(), stop)
                .map_err(|e| loaded.error(e.key, e.reason))?,
        ),
        None => {
            tracing::warn!(
                "serving gRPC in plaintext (server.plaintext = true): for development only; agents' credentials cross the network in the clear"
            );
            None
        }
    };
    let client = if config.auth.needs_kubernetes(&config.server) {
        Some(kubernetes.client().await.map_err(|e| {
            loaded.error(
                "kubernetes",
                format!("TokenReviews and SubjectAccessReviews need the API server: {e}"),
            )
        })?)
    } else {
        None
    };
    let auth =
        Auth::new(&config.auth, &config.server, client, &metrics.security).map_err(|e| loaded.error("auth", e))?;
    let authenticators = config.auth.authenticators(&config.server);
    if config.auth.authorization == Authorization::AllowAll {
        tracing::warn!(
            ?authenticators,
            "authorization = \"allow-all\": every caller may read and write every cluster's resources; for development only"
        );
    } else {
        tracing::info!(
            ?authenticators,
            "callers are authenticated and authorized with SubjectAccessReviews"
        );
    }
    Ok((tls, Arc::new(auth)))
}
