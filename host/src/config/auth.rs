//! `[auth]`: how callers are identified and what they may do (`docs/protocol.md` §9).

use std::{collections::BTreeMap, time::Duration};

use serde::Deserialize;

use super::{HumanDuration, Invalid, ServerConfig, invalid};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Tried in this order; the first that identifies the caller wins. Unset: `token`, then
    /// `mtls` when `server.tls.client_ca_file` is set.
    pub authenticators: Option<Vec<Authenticator>>,
    pub authorization: Authorization,
    /// How long a TokenReview's answer is kept: an authenticated token, and a refused one.
    pub token_cache_ttl: HumanDuration,
    pub token_negative_cache_ttl: HumanDuration,
    /// How long a SubjectAccessReview's decision is kept.
    pub authorization_cache_ttl: HumanDuration,
    /// TokenReviews (and, apart, SubjectAccessReviews) in flight at once; callers past it wait.
    /// Identical questions in flight are asked once.
    pub max_concurrent_reviews: usize,
    /// Data types beyond OCM's (served by other plugins), each with the Kubernetes resource
    /// (`<plural>.<group>`, or `<plural>` for the core group) its SubjectAccessReviews name.
    pub data_types: BTreeMap<String, String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            authenticators: None,
            authorization: Authorization::Sar,
            token_cache_ttl: HumanDuration(Duration::from_secs(30)),
            token_negative_cache_ttl: HumanDuration(Duration::from_secs(5)),
            authorization_cache_ttl: HumanDuration(Duration::from_secs(5)),
            max_concurrent_reviews: 32,
            data_types: BTreeMap::new(),
        }
    }
}

impl AuthConfig {
    /// The authenticators in the order they are tried.
    pub fn authenticators(&self, server: &ServerConfig) -> Vec<Authenticator> {
        match &self.authenticators {
            Some(list) => list.clone(),
            None => {
                let mut list = vec![Authenticator::Token];
                if server.tls.as_ref().is_some_and(|t| t.client_ca_file.is_some()) {
                    list.push(Authenticator::Mtls);
                }
                list
            }
        }
    }

    /// Whether the Kubernetes API server is needed (TokenReview, SubjectAccessReview) for the
    /// gRPC calls.
    pub fn needs_kubernetes(&self, server: &ServerConfig) -> bool {
        self.authorization == Authorization::Sar || self.authenticators(server).contains(&Authenticator::Token)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Authenticator {
    /// A bearer token in the `authorization` metadata, checked with a TokenReview.
    Token,
    /// The client certificate the TLS handshake verified (user = CN, groups = O).
    Mtls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Authorization {
    /// A SubjectAccessReview per request (cached briefly).
    Sar,
    /// Everything is allowed: development only (a warning is logged at startup).
    AllowAll,
}

impl AuthConfig {
    pub(crate) fn validate(&self, server: &ServerConfig) -> Result<(), Invalid> {
        let authenticators = self.authenticators(server);
        for (i, a) in authenticators.iter().enumerate() {
            let key = format!("auth.authenticators[{i}]");
            if authenticators[..i].contains(a) {
                return invalid(key, format!("{a:?} is listed twice"));
            }
            if *a == Authenticator::Mtls && server.tls.as_ref().is_none_or(|t| t.client_ca_file.is_none()) {
                return invalid(
                    key,
                    "\"mtls\" needs server.tls.client_ca_file to verify client certificates against",
                );
            }
        }
        if authenticators.is_empty() && self.authorization == Authorization::Sar {
            return invalid(
                "auth.authenticators",
                "empty: every caller would be anonymous and SubjectAccessReview would refuse them all; list \"token\" and/or \"mtls\", or set authorization = \"allow-all\" (development)",
            );
        }
        for (data_type, resource) in &self.data_types {
            let key = format!("auth.data_types.\"{data_type}\"");
            if conductor_plugin_sdk::ocm::DataType::parse(data_type).is_err() {
                return invalid(key, "not a data type: <group>.<version>.<resource>");
            }
            if resource.is_empty() || resource.contains(['/', ' ']) {
                return invalid(
                    key,
                    format!("{resource:?} is not a Kubernetes resource: <plural>.<group>"),
                );
            }
        }
        if self.max_concurrent_reviews == 0 {
            return invalid("auth.max_concurrent_reviews", "must be at least 1");
        }
        for (key, d) in [
            ("auth.token_cache_ttl", self.token_cache_ttl),
            ("auth.token_negative_cache_ttl", self.token_negative_cache_ttl),
            ("auth.authorization_cache_ttl", self.authorization_cache_ttl),
        ] {
            if d.0 > Duration::from_secs(600) {
                return invalid(
                    key,
                    format!("{d} is too long: at most 10m (a revoked credential would be honoured that long)"),
                );
            }
        }
        Ok(())
    }
}
