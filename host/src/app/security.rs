//! TLS and the auth layer, set up from the configuration before anything else starts, so that
//! a certificate that does not load or an API server that cannot be reached for TokenReviews is
//! a startup error naming its key.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::admin::{self, AdminAuth};
use crate::auth::Auth;
use crate::auth::sar::SarAuthorizer;
use crate::auth::token::TokenAuthenticator;
use crate::config::{AdminAuthorization, Authorization, ConfigError, LoadedConfig};
use crate::kube::Kubernetes;
use crate::telemetry::Metrics;
use crate::tls::{ReloadingTls, TlsFiles};

/// What the listeners need: the gRPC listener's TLS (watched for changes until `stop`) and auth
/// layer, and how the admin endpoint is reached.
pub struct Security {
    pub tls: Option<Arc<ReloadingTls>>,
    pub auth: Arc<Auth>,
    pub admin: admin::Access,
}

/// Sets up TLS and the auth layers of both listeners.
pub async fn start(
    loaded: &LoadedConfig,
    kubernetes: &Kubernetes,
    metrics: &Metrics,
    stop: CancellationToken,
) -> Result<Security, ConfigError> {
    let config = &loaded.config;
    let reloading = |files: TlsFiles| {
        ReloadingTls::start(files, metrics.security.clone(), stop.clone()).map_err(|e| loaded.error(e.key, e.reason))
    };
    let tls = match &config.server.tls {
        Some(tls) => Some(reloading(TlsFiles::new(loaded, tls))?),
        None => {
            tracing::warn!(
                "serving gRPC in plaintext (server.plaintext = true): for development only; agents' credentials cross the network in the clear"
            );
            None
        }
    };
    let admin_reviews = config.admin.enabled && config.admin.authorization == AdminAuthorization::Sar;
    let client = if config.auth.needs_kubernetes(&config.server) || admin_reviews {
        Some(kubernetes.client().await.map_err(|e| {
            loaded.error(
                "kubernetes",
                format!("TokenReviews and SubjectAccessReviews need the API server: {e}"),
            )
        })?)
    } else {
        None
    };
    let auth = Auth::new(&config.auth, &config.server, client.clone(), &metrics.security)
        .map_err(|e| loaded.error("auth", e))?;
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
    for warning in config.exposure_warnings() {
        tracing::warn!("{warning}");
    }
    let admin = admin::Access {
        max_connections: config.admin.max_connections,
        tls: match &config.admin.tls {
            Some(tls) if config.admin.enabled => Some(reloading(TlsFiles::admin(loaded, tls))?),
            _ => None,
        },
        auth: match client {
            Some(client) if admin_reviews => Some(Arc::new(AdminAuth::new(
                TokenAuthenticator::new(
                    client.clone(),
                    config.auth.token_cache_ttl.0,
                    config.auth.token_negative_cache_ttl.0,
                    config.auth.max_concurrent_reviews,
                    crate::auth::token_cache_capacity(&config.server),
                    metrics.security.clone(),
                ),
                SarAuthorizer::new(
                    client,
                    Default::default(),
                    config.auth.authorization_cache_ttl.0,
                    config.auth.max_concurrent_reviews,
                    crate::auth::authorization_cache_capacity(&config.server),
                    metrics.security.clone(),
                ),
                metrics.security.clone(),
            ))),
            _ => None,
        },
    };
    Ok(Security {
        tls,
        auth: Arc::new(auth),
        admin,
    })
}
