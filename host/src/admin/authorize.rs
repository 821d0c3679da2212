//! Who may use the admin endpoint (`[admin] authorization = "sar"`), as Kubernetes controllers
//! protect their metrics: a bearer token checked with a TokenReview, then a SubjectAccessReview
//! on the request's non-resource URL (`get` for `GET /metrics` and `/inspect/*`, `post` for
//! `POST /reload`). `/healthz` and `/readyz` stay open, for probes.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::AuthError;
use crate::auth::sar::{Denied, SarAuthorizer};
use crate::auth::token::TokenAuthenticator;
use crate::telemetry::SecurityMetrics;

/// Paths anyone may read.
const OPEN: [&str; 2] = ["/healthz", "/readyz"];

/// The checks of every request but the open ones.
pub struct AdminAuth {
    tokens: TokenAuthenticator,
    reviews: SarAuthorizer,
    metrics: SecurityMetrics,
}

/// The verb of a non-resource request, as the API server's own request filter makes it (and
/// controller-runtime's metrics filter): the HTTP method in lower case.
fn verb(method: &Method) -> String {
    method.as_str().to_ascii_lowercase()
}

impl AdminAuth {
    pub fn new(tokens: TokenAuthenticator, reviews: SarAuthorizer, metrics: SecurityMetrics) -> Self {
        Self {
            tokens,
            reviews,
            metrics,
        }
    }

    /// `Ok` when `method` on `path` with the `authorization` header may go on; else the answer
    /// to send.
    async fn check(
        &self,
        method: &Method,
        path: &str,
        authorization: Option<&str>,
    ) -> Result<(), (StatusCode, String)> {
        if OPEN.contains(&path) {
            return Ok(());
        }
        let identity = self.tokens.authenticate(authorization).await.map_err(|e| match e {
            AuthError::Unauthenticated(why) => (StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}\n")),
            AuthError::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        })?;
        let verb = verb(method);
        self.reviews
            .authorize_path(&identity, &verb, path)
            .await
            .map_err(|e| match e {
                Denied::Denied(why) => (StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")),
                Denied::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
            })
    }
}

/// The middleware: requests that fail the checks are answered here, and counted.
pub async fn guard(State(auth): State<std::sync::Arc<AdminAuth>>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match auth.check(&method, &path, authorization.as_deref()).await {
        Ok(()) => next.run(request).await,
        Err((status, body)) => {
            auth.metrics.admin_refused(status.as_u16());
            tracing::info!(%path, status = status.as_u16(), reason = body.trim_end(), "admin request refused");
            let mut response = (status, body).into_response();
            if status == StatusCode::UNAUTHORIZED {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}
