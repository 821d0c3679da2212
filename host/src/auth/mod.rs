//! Who is calling, and whether they may (`docs/protocol.md` §9): the configured
//! authenticators in order (the first that identifies the caller wins), then the authorizer.
//! Nothing reaches the broker or a plugin before both have said yes.

pub mod cache;
pub mod reviews;
pub mod sar;
pub mod token;

use conductor_plugin_sdk::Identity;
use tonic::Status;

pub use sar::Access;
use sar::{Denied, SarAuthorizer};
use token::TokenAuthenticator;

use crate::config::{AuthConfig, Authenticator, Authorization, ServerConfig};
use crate::net::ConnectionInfo;
use crate::telemetry::SecurityMetrics;

/// Why a caller could not be identified.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    #[error("{0}")]
    Unauthenticated(String),
    /// The API server could not be asked: the caller may retry.
    #[error("{0}")]
    Unavailable(String),
}

impl From<AuthError> for Status {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unauthenticated(m) => Status::unauthenticated(m),
            AuthError::Unavailable(m) => Status::unavailable(m),
        }
    }
}

enum Authenticate {
    Token(Box<TokenAuthenticator>),
    Mtls,
}

enum Authorize {
    Sar(Box<SarAuthorizer>),
    AllowAll,
}

/// The authentication and authorization every call goes through.
pub struct Auth {
    authenticators: Vec<Authenticate>,
    authorizer: Authorize,
}

impl Auth {
    /// The configured layers; `kube` is the hub's API server, required when the configuration
    /// uses TokenReview or SubjectAccessReview (`AuthConfig::needs_kubernetes`).
    pub fn new(
        config: &AuthConfig,
        server: &ServerConfig,
        kube: Option<kube::Client>,
        metrics: &SecurityMetrics,
    ) -> Result<Self, String> {
        let client = || {
            kube.clone()
                .ok_or_else(|| "the Kubernetes API server is not configured".to_owned())
        };
        let authenticators = config
            .authenticators(server)
            .into_iter()
            .map(|a| {
                Ok(match a {
                    Authenticator::Token => Authenticate::Token(Box::new(TokenAuthenticator::new(
                        client()?,
                        config.token_cache_ttl.0,
                        config.token_negative_cache_ttl.0,
                        config.max_concurrent_reviews,
                        token_cache_capacity(server),
                        metrics.clone(),
                    ))),
                    Authenticator::Mtls => Authenticate::Mtls,
                })
            })
            .collect::<Result<_, String>>()?;
        let authorizer = match config.authorization {
            Authorization::Sar => Authorize::Sar(Box::new(SarAuthorizer::new(
                client()?,
                config.data_types.clone(),
                config.authorization_cache_ttl.0,
                config.max_concurrent_reviews,
                authorization_cache_capacity(server),
                metrics.clone(),
            ))),
            Authorization::AllowAll => Authorize::AllowAll,
        };
        Ok(Self {
            authenticators,
            authorizer,
        })
    }

    /// Everyone is anonymous and allowed everything (tests and development).
    pub fn allow_all() -> Self {
        Self {
            authenticators: Vec::new(),
            authorizer: Authorize::AllowAll,
        }
    }

    /// Whether callers are identified at all (with no authenticator everyone is anonymous).
    pub fn identifies(&self) -> bool {
        !self.authenticators.is_empty()
    }

    /// The caller of a request: from its `authorization` metadata value or from its
    /// connection's client certificate, in the configured order.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        connection: Option<&ConnectionInfo>,
    ) -> Result<Identity, AuthError> {
        if self.authenticators.is_empty() {
            return Ok(Identity::anonymous());
        }
        let mut failures = Vec::new();
        let mut unavailable = false;
        for authenticator in &self.authenticators {
            let (name, outcome) = match authenticator {
                Authenticate::Token(token) => ("token", token.authenticate(authorization).await),
                Authenticate::Mtls => ("mtls", client_certificate(connection)),
            };
            match outcome {
                Ok(identity) => return Ok(identity),
                Err(e) => {
                    unavailable |= matches!(e, AuthError::Unavailable(_));
                    failures.push(format!("{name}: {e}"));
                }
            }
        }
        // Every authenticator's reason, not only the last one's; a review that could not be
        // made is worth a retry.
        let message = failures.join("; ");
        Err(if unavailable {
            AuthError::Unavailable(message)
        } else {
            AuthError::Unauthenticated(message)
        })
    }

    /// Whether `identity` may do `access`: `PermissionDenied` naming what was denied.
    pub async fn authorize(&self, identity: &Identity, access: &Access<'_>) -> Result<(), Status> {
        match &self.authorizer {
            Authorize::AllowAll => Ok(()),
            Authorize::Sar(sar) => sar.authorize(identity, access).await.map_err(|e| match e {
                Denied::Denied(_) => Status::permission_denied(e.to_string()),
                Denied::Unavailable(_) => Status::unavailable(e.to_string()),
            }),
        }
    }
}

/// The identity of the verified client certificate: user = CN, groups = O.
/// Token reviews kept: one per agent the server may hold (`server.max_connections`), so that every
/// agent's token is reviewed once per TTL however many agents there are; at least 16,384.
pub fn token_cache_capacity(server: &ServerConfig) -> usize {
    server.max_connections.max(16_384)
}

/// Authorization decisions kept: a few per agent (its data types and verbs); at least 65,536.
pub fn authorization_cache_capacity(server: &ServerConfig) -> usize {
    server.max_connections.saturating_mul(4).max(65_536)
}

fn client_certificate(connection: Option<&ConnectionInfo>) -> Result<Identity, AuthError> {
    let peer = connection.and_then(|c| c.peer.as_deref()).ok_or_else(|| {
        AuthError::Unauthenticated("could not verify peer certificate: the client presented none".into())
    })?;
    let user = peer
        .common_name
        .clone()
        .filter(|cn| !cn.is_empty())
        .ok_or_else(|| AuthError::Unauthenticated("the client certificate has no subject common name".into()))?;
    Ok(Identity {
        user,
        groups: peer.organizations.clone(),
    })
}
