//! Bearer tokens checked with a Kubernetes TokenReview (`docs/protocol.md` §9.1); answers
//! are cached, keyed by the token's SHA-256 rather than the token.

use std::time::Duration;

use conductor_plugin_sdk::Identity;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

use super::AuthError;
use super::cache::TtlCache;
use crate::telemetry::SecurityMetrics;

pub struct TokenAuthenticator {
    api: Api<TokenReview>,
    cache: TtlCache<[u8; 32], Result<Identity, String>>,
    ttl: Duration,
    negative_ttl: Duration,
    metrics: SecurityMetrics,
}

/// The token of an `authorization` metadata value: the value without a leading `Bearer `.
pub fn bearer(value: &str) -> &str {
    value.strip_prefix("Bearer ").unwrap_or(value).trim()
}

impl TokenAuthenticator {
    pub fn new(client: kube::Client, ttl: Duration, negative_ttl: Duration, metrics: SecurityMetrics) -> Self {
        Self {
            api: Api::all(client),
            cache: TtlCache::new(16_384),
            ttl,
            negative_ttl,
            metrics,
        }
    }

    /// Who `authorization` (the metadata value, if any) belongs to.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Identity, AuthError> {
        let token = authorization.map(bearer).unwrap_or_default();
        if token.is_empty() {
            return Err(AuthError::Unauthenticated(
                "invalid token: no bearer token in the authorization metadata".into(),
            ));
        }
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        if let Some(answer) = self.cache.get(&key) {
            self.metrics.review("TokenReview", "cached");
            return answer.map_err(AuthError::Unauthenticated);
        }
        let review = TokenReview {
            metadata: Default::default(),
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            status: None,
        };
        let answer = match self.api.create(&PostParams::default(), &review).await {
            Ok(answer) => answer,
            Err(e) => {
                self.metrics.review("TokenReview", "error");
                return Err(AuthError::Unavailable(format!(
                    "cannot check the token with a TokenReview: {e}"
                )));
            }
        };
        self.metrics.review("TokenReview", "reviewed");
        let status = answer.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        let answer = match (status.authenticated, user.username) {
            (Some(true), Some(username)) if !username.is_empty() => Ok(Identity {
                user: username,
                groups: user.groups.unwrap_or_default(),
            }),
            _ => Err(match status.error.filter(|e| !e.is_empty()) {
                Some(error) => format!("token not authenticated: {error}"),
                None => "token not authenticated".to_owned(),
            }),
        };
        let ttl = if answer.is_ok() { self.ttl } else { self.negative_ttl };
        self.cache.put(key, answer.clone(), ttl);
        answer.map_err(AuthError::Unauthenticated)
    }
}
