//! An HTTP double of the two Kubernetes APIs conductor's auth layer calls, speaking them as the
//! real API server does: `authentication.k8s.io/v1` TokenReview and `authorization.k8s.io/v1`
//! SubjectAccessReview. Every request body is checked field by field (a request the real API
//! server would refuse is answered 400 and recorded as such) and kept for the tests to read.
//!
//! Its RBAC is OCM's in miniature: a subject may act in namespace `<cluster>` when one of its
//! groups is `system:open-cluster-management:<cluster>`. On non-resource URLs (the admin
//! endpoint's), group [`ADMINS`] may do anything and group [`METRICS_READERS`] may `get /metrics`.
//! Group [`HUB_WRITERS`] (a hub-side writer, as the load tool's memory hub) may act in every
//! namespace.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

/// The group allowed every verb on every non-resource URL.
pub const ADMINS: &str = "conductor:admins";
/// The group allowed `get /metrics` (a Prometheus scraper's).
pub const METRICS_READERS: &str = "conductor:metrics-readers";

/// The group allowed every resource request in every namespace.
pub const HUB_WRITERS: &str = "conductor:hub-writers";

/// A token the double knows: the token, its user and groups.
pub struct KnownToken {
    pub token: &'static str,
    pub user: &'static str,
    pub groups: &'static [&'static str],
}

#[derive(Default)]
struct Recorded {
    token_reviews: Vec<Value>,
    access_reviews: Vec<Value>,
    refused: Vec<String>,
}

#[derive(Clone)]
struct State {
    tokens: Arc<Vec<KnownToken>>,
    recorded: Arc<Mutex<Recorded>>,
    /// How long a TokenReview takes to answer, as an API server under load would.
    token_review_delay: Duration,
    token_reviews: Arc<InFlight>,
}

/// TokenReviews being answered now, and the most there ever were at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

pub struct AuthApi {
    /// A kubeconfig reaching the double (plain HTTP on loopback).
    pub kubeconfig: PathBuf,
    reviews: Reviews,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AuthApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn bad_request(state: &State, message: String) -> axum::response::Response {
    state.recorded.lock().unwrap().refused.push(message.clone());
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "BadRequest", "code": 400});
    (
        StatusCode::BAD_REQUEST,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn created(body: Value) -> axum::response::Response {
    (
        StatusCode::CREATED,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The keys of `object`, sorted.
fn keys(object: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = object
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

async fn token_review(
    axum::extract::State(state): axum::extract::State<State>,
    body: String,
) -> axum::response::Response {
    let Ok(review) = serde_json::from_str::<Value>(&body) else {
        return bad_request(&state, format!("TokenReview: not JSON: {body}"));
    };
    if review["apiVersion"] != "authentication.k8s.io/v1" || review["kind"] != "TokenReview" {
        return bad_request(
            &state,
            format!("want an authentication.k8s.io/v1 TokenReview: {review}"),
        );
    }
    let spec = &review["spec"];
    let token = spec["token"].as_str().unwrap_or_default();
    if token.is_empty() || keys(spec).iter().any(|k| !["token", "audiences"].contains(k)) {
        return bad_request(&state, format!("TokenReview spec: {spec}"));
    }
    state.recorded.lock().unwrap().token_reviews.push(review.clone());
    let now = state.token_reviews.now.fetch_add(1, Ordering::SeqCst) + 1;
    state.token_reviews.most.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(state.token_review_delay).await;
    state.token_reviews.now.fetch_sub(1, Ordering::SeqCst);
    let status = match state.tokens.iter().find(|t| t.token == token) {
        Some(t) => json!({"authenticated": true, "user": {"username": t.user, "uid": "1", "groups": t.groups}}),
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    created(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "metadata": {"creationTimestamp": null}, "spec": spec, "status": status}))
}

async fn access_review(
    axum::extract::State(state): axum::extract::State<State>,
    body: String,
) -> axum::response::Response {
    let Ok(review) = serde_json::from_str::<Value>(&body) else {
        return bad_request(&state, format!("SubjectAccessReview: not JSON: {body}"));
    };
    if review["apiVersion"] != "authorization.k8s.io/v1" || review["kind"] != "SubjectAccessReview" {
        return bad_request(
            &state,
            format!("want an authorization.k8s.io/v1 SubjectAccessReview: {review}"),
        );
    }
    let spec = &review["spec"];
    if !spec["nonResourceAttributes"].is_null() {
        // A non-resource URL (the admin endpoint's): path and verb only.
        let attributes = &spec["nonResourceAttributes"];
        if keys(spec) != ["groups", "nonResourceAttributes", "user"]
            || spec["user"].as_str().is_none_or(str::is_empty)
            || keys(attributes) != ["path", "verb"]
        {
            return bad_request(&state, format!("SubjectAccessReview spec: {spec}"));
        }
        state.recorded.lock().unwrap().access_reviews.push(review.clone());
        let in_group = |group: &str| {
            spec["groups"]
                .as_array()
                .is_some_and(|groups| groups.iter().any(|g| g.as_str() == Some(group)))
        };
        let allowed = in_group(ADMINS)
            || (in_group(METRICS_READERS) && attributes["verb"] == "get" && attributes["path"] == "/metrics");
        let status = if allowed {
            json!({"allowed": true, "reason": "RBAC: allowed by a ClusterRoleBinding"})
        } else {
            json!({"allowed": false, "reason": format!("no ClusterRole grants {} on {}", attributes["verb"], attributes["path"])})
        };
        return created(
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "metadata": {"creationTimestamp": null}, "spec": spec, "status": status}),
        );
    }
    let attributes = &spec["resourceAttributes"];
    let allowed_keys = ["group", "name", "namespace", "resource", "subresource", "verb"];
    if keys(spec) != ["groups", "resourceAttributes", "user"]
        || spec["user"].as_str().is_none_or(str::is_empty)
        || keys(attributes).iter().any(|k| !allowed_keys.contains(k))
        || attributes
            .as_object()
            .is_some_and(|o| o.values().any(|v| v.as_str().is_none_or(str::is_empty)))
        || attributes["verb"].is_null()
    {
        return bad_request(&state, format!("SubjectAccessReview spec: {spec}"));
    }
    state.recorded.lock().unwrap().access_reviews.push(review.clone());
    let namespace = attributes["namespace"].as_str().unwrap_or_default();
    let wanted = format!("system:open-cluster-management:{namespace}");
    let allowed = spec["groups"].as_array().is_some_and(|groups| {
        groups
            .iter()
            .any(|g| g.as_str() == Some(wanted.as_str()) || g.as_str() == Some(HUB_WRITERS))
    });
    let status = if allowed {
        json!({"allowed": true, "reason": "RBAC: allowed by the cluster's role binding"})
    } else {
        json!({"allowed": false, "reason": format!("no role binding in {namespace} for this subject")})
    };
    created(
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "metadata": {"creationTimestamp": null}, "spec": spec, "status": status}),
    )
}

/// The double's routes, for a server of its own or another's (the kube test front): the router,
/// and the requests it records.
pub fn routes(tokens: Vec<KnownToken>) -> (axum::Router, Reviews) {
    routes_answering_in(tokens, Duration::ZERO)
}

/// As [`routes`], with every TokenReview taking `token_review_delay`.
pub fn routes_answering_in(tokens: Vec<KnownToken>, token_review_delay: Duration) -> (axum::Router, Reviews) {
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let token_reviews = Arc::new(InFlight::default());
    let state = State {
        tokens: Arc::new(tokens),
        recorded: Arc::clone(&recorded),
        token_review_delay,
        token_reviews: Arc::clone(&token_reviews),
    };
    let router = axum::Router::new()
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            axum::routing::post(token_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            axum::routing::post(access_review),
        )
        .with_state(state);
    (router, Reviews(recorded, token_reviews))
}

/// What the double was asked.
#[derive(Clone)]
pub struct Reviews(Arc<Mutex<Recorded>>, Arc<InFlight>);

impl Reviews {
    /// The most TokenReviews that were ever being answered at once.
    pub fn most_token_reviews_at_once(&self) -> usize {
        self.1.most.load(Ordering::SeqCst)
    }

    pub fn token_reviews(&self) -> Vec<Value> {
        self.0.lock().unwrap().token_reviews.clone()
    }

    pub fn access_reviews(&self) -> Vec<Value> {
        self.0.lock().unwrap().access_reviews.clone()
    }

    /// Requests that the real API server would have refused (none, if conductor is right).
    pub fn refused(&self) -> Vec<String> {
        self.0.lock().unwrap().refused.clone()
    }
}

impl AuthApi {
    pub async fn start(tokens: Vec<KnownToken>) -> Self {
        Self::start_answering_in(tokens, Duration::ZERO).await
    }

    /// A double whose TokenReviews each take `token_review_delay`.
    pub async fn start_answering_in(tokens: Vec<KnownToken>, token_review_delay: Duration) -> Self {
        let (app, reviews) = routes_answering_in(tokens, token_review_delay);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: auth\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: conductor\n  user: {{}}\ncontexts:\n- name: auth\n  context:\n    cluster: auth\n    user: conductor\ncurrent-context: auth\n"
            ),
        )
        .unwrap();
        Self {
            kubeconfig,
            reviews,
            _dir: dir,
            task,
        }
    }
}

impl AuthApi {
    /// What the double was asked.
    pub fn reviews(&self) -> &Reviews {
        &self.reviews
    }
}
