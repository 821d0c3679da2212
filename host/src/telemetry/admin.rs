//! The admin HTTP endpoint: `/metrics` (Prometheus), `/healthz` (the process is alive),
//! `/readyz` (the gRPC listener is serving and not shutting down, and no database LISTEN connection
//! is down) and `POST /reload` (re-read `conductor.toml` and apply what changed, as SIGHUP does;
//! answers with what changed, or why the new configuration was refused); and the inspector's
//! JSON views, `/inspect/subscribers`, `/inspect/plugins` and `/inspect/routes`.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{get, post},
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::Metrics;
use crate::app::{Inspector, ReloadRequest};

/// Whether the process should receive traffic: it is serving, and nothing it depends on (a
/// database LISTEN connection) is down.
#[derive(Debug, Default)]
pub struct Readiness {
    serving: AtomicBool,
    /// What is down, by name, with the reason.
    down: parking_lot::Mutex<BTreeMap<String, String>>,
}

impl Readiness {
    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::SeqCst);
    }

    pub fn is_serving(&self) -> bool {
        self.serving.load(Ordering::SeqCst)
    }

    /// Marks `what` down (with the reason) or up again (`None`).
    pub fn set_down(&self, what: &str, reason: Option<String>) {
        let mut down = self.down.lock();
        match reason {
            Some(reason) => down.insert(what.to_owned(), reason),
            None => down.remove(what),
        };
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), String> {
        if !self.is_serving() {
            return Err("not serving".to_owned());
        }
        let down = self.down.lock();
        if down.is_empty() {
            return Ok(());
        }
        Err(down.iter().map(|(what, why)| format!("{what}: {why}\n")).collect())
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

/// Binds the admin listener; the returned future serves until `shutdown` is cancelled.
pub async fn serve(
    addr: SocketAddr,
    state: AdminState,
    shutdown: CancellationToken,
) -> std::io::Result<impl Future<Output = std::io::Result<()>>> {
    let app = Router::new()
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
        .route(
            "/inspect/routes",
            get(|State(s): State<AdminState>| async move { Json(s.inspector.routes()) }),
        )
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "admin endpoint listening (/metrics, /healthz, /readyz, /reload, /inspect/…)");
    Ok(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    })
}

async fn render_metrics(State(state): State<AdminState>) -> ([(&'static str, &'static str); 1], String) {
    ([("content-type", "text/plain; version=0.0.4")], state.metrics.render())
}

async fn request_reload(State(state): State<AdminState>) -> (StatusCode, String) {
    let (reply, outcome) = oneshot::channel();
    if state.reload.try_send(ReloadRequest { reply: Some(reply) }).is_err() {
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

async fn ready(State(state): State<AdminState>) -> (StatusCode, String) {
    match state.readiness.check() {
        Ok(()) => (StatusCode::OK, "ok".to_owned()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}
