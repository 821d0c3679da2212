//! The admin HTTP endpoint: `/metrics` (Prometheus), `/healthz` (the process is alive),
//! `/readyz` (the gRPC listener is serving and not shutting down, and no database LISTEN connection
//! is down) and `POST /reload` (re-read `conductor.toml` and apply what changed, as SIGHUP does;
//! answers with what changed, or why the new configuration was refused); and the inspector's
//! JSON views, `/inspect/subscribers`, `/inspect/plugins`, `/inspect/plugins/<name>` (one plugin
//! and what it keeps in `kv`), `/inspect/routes` and `/inspect/undelivered` (work its agents did
//! not answer in time). Over HTTP or
//! HTTPS ([`https`]), open or guarded by token and SubjectAccessReview ([`authorize`]).

pub mod authorize;
pub mod inspector;
pub mod listener;
pub mod views;

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{get, post},
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use authorize::AdminAuth;
pub use inspector::Inspector;
pub use views::ReloadSummary;

use crate::telemetry::{Metrics, Readiness};
use crate::tls::ReloadingTls;

/// A request to re-read the configuration, with where to send the outcome (none for SIGHUP).
pub struct ReloadRequest {
    pub reply: Option<oneshot::Sender<Result<ReloadSummary, String>>>,
    pub trigger: ReloadTrigger,
}

/// What asked for a reload (logged with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadTrigger {
    /// SIGHUP.
    Signal,
    /// `POST /reload` (`conductor reload`).
    Admin,
    /// The configuration file or a plugin file changed (`[reload] watch`).
    FilesChanged,
    /// A `SourcePlugin` resource was created, changed or deleted (`[dynamic] source_plugins`).
    SourcePlugins,
}

impl ReloadTrigger {
    /// Its name in logs and in `conductor_config_reloads_total{trigger}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Signal => "signal",
            Self::Admin => "admin",
            Self::FilesChanged => "files",
            Self::SourcePlugins => "source-plugins",
        }
    }
}

/// What the admin endpoint serves from.
#[derive(Clone)]
pub struct AdminState {
    pub metrics: Metrics,
    pub readiness: Arc<Readiness>,
    pub reload: mpsc::Sender<ReloadRequest>,
    pub inspector: Arc<Inspector>,
}

/// How the admin endpoint is reached: TLS when configured, and who may use it.
#[derive(Default)]
pub struct Access {
    pub tls: Option<Arc<ReloadingTls>>,
    /// `admin.max_connections`.
    pub max_connections: usize,
    /// None: anyone who reaches the port.
    pub auth: Option<Arc<AdminAuth>>,
}

/// Serves the admin endpoint on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    state: AdminState,
    access: Access,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let security = state.metrics.security.clone();
    let mut app = routes(state);
    if let Some(auth) = access.auth {
        app = app.layer(axum::middleware::from_fn_with_state(auth, authorize::guard));
    }
    let shutdown = async move { shutdown.cancelled().await };
    let listener = listener::AdminListener::new(listener, access.tls, access.max_connections, security)?;
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

fn routes(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/reload", post(request_reload))
        .route(
            "/inspect/subscribers",
            get(|State(s): State<AdminState>| async move { Json(s.inspector.subscribers()) }),
        )
        .route(
            "/inspect/plugins",
            get(|State(s): State<AdminState>| async move { Json(s.inspector.plugins()) }),
        )
        .route("/inspect/plugins/{name}", get(plugin_detail))
        .route(
            "/inspect/routes",
            get(|State(s): State<AdminState>| async move { Json(s.inspector.routes()) }),
        )
        .route(
            "/inspect/undelivered",
            get(|State(s): State<AdminState>| async move { Json(s.inspector.undelivered()) }),
        )
        .with_state(state)
}

async fn plugin_detail(
    State(state): State<AdminState>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Result<Json<views::PluginDetail>, (StatusCode, String)> {
    state
        .inspector
        .plugin_detail(&name)
        .map(Json)
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no plugin named {name:?} runs\n")))
}

async fn render_metrics(State(state): State<AdminState>) -> ([(&'static str, &'static str); 1], String) {
    state.metrics.set_ready(readiness(&state).is_ok());
    ([("content-type", "text/plain; version=0.0.4")], state.metrics.render())
}

async fn request_reload(State(state): State<AdminState>) -> (StatusCode, String) {
    let (reply, outcome) = oneshot::channel();
    if state
        .reload
        .try_send(ReloadRequest {
            reply: Some(reply),
            trigger: ReloadTrigger::Admin,
        })
        .is_err()
    {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "a reload is already pending\n".to_owned(),
        );
    }
    match outcome.await {
        Ok(Ok(summary)) => (
            StatusCode::OK,
            serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n",
        ),
        Ok(Err(reason)) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("reload refused; the running configuration stays: {reason}\n"),
        ),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n".to_owned()),
    }
}

/// How long after a plugin's limit refused a host call `/readyz` says so.
const LIMIT_REFUSAL_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the replica is ready: serving, nothing it depends on down, and no plugin's limit
/// refused anything within the last minute (a full `kv` never stops service in silence).
fn readiness(state: &AdminState) -> Result<(), String> {
    let serving = state.readiness.check();
    let limits = state.metrics.plugin_limits_ready(LIMIT_REFUSAL_WINDOW);
    match (serving, limits) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(a), Err(b)) => Err(format!("{a}{b}")),
        (Err(why), Ok(())) | (Ok(()), Err(why)) => Err(why),
    }
}

async fn ready(State(state): State<AdminState>) -> (StatusCode, String) {
    match readiness(&state) {
        Ok(()) => (StatusCode::OK, "ok".to_owned()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}
