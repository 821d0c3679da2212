//! Bearer tokens checked with a Kubernetes TokenReview (`docs/protocol.md` §9.1); answers
//! are kept, keyed by the token's SHA-256 rather than the token, and reviews are bounded
//! ([`Reviews`]).

use std::time::Duration;

use conductor_plugin_sdk::Identity;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

use super::AuthError;
use super::reviews::Reviews;
use crate::telemetry::SecurityMetrics;

pub struct TokenAuthenticator {
    api: Api<TokenReview>,
    reviews: Reviews<[u8; 32], Result<Identity, String>>,
    ttl: Duration,
    negative_ttl: Duration,
}

/// The token of an `authorization` metadata value: the value without a leading `Bearer `.
pub fn bearer(value: &str) -> &str {
    value.strip_prefix("Bearer ").unwrap_or(value).trim()
}

impl TokenAuthenticator {
    /// Reviews tokens with `client`, at most `concurrency` at once; answers are kept for `ttl`
    /// (a refused token for `negative_ttl`), `capacity` of them at most (the least recently used
    /// go first).
    pub fn new(
        client: kube::Client,
        ttl: Duration,
        negative_ttl: Duration,
        concurrency: usize,
        capacity: usize,
        metrics: SecurityMetrics,
    ) -> Self {
        Self {
            api: Api::all(client),
            reviews: Reviews::new("TokenReview", capacity, concurrency, metrics),
            ttl,
            negative_ttl,
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
        let answer = self
            .reviews
            .answer(key, || self.review(token))
            .await
            .map_err(|e| AuthError::Unavailable(format!("cannot check the token with a TokenReview: {e}")))?;
        answer.map_err(AuthError::Unauthenticated)
    }

    /// One TokenReview: who the token belongs to (or why it is refused), and how long to keep
    /// that answer.
    async fn review(&self, token: &str) -> Result<(Result<Identity, String>, Duration), String> {
        let review = TokenReview {
            metadata: Default::default(),
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            status: None,
        };
        let answer = self
            .api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| e.to_string())?;
        let status = answer.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        Ok(match (status.authenticated, user.username) {
            (Some(true), Some(username)) if !username.is_empty() => (
                Ok(Identity {
                    user: username,
                    groups: user.groups.unwrap_or_default(),
                }),
                self.ttl,
            ),
            _ => (
                Err(match status.error.filter(|e| !e.is_empty()) {
                    Some(error) => format!("token not authenticated: {error}"),
                    None => "token not authenticated".to_owned(),
                }),
                self.negative_ttl,
            ),
        })
    }
}
