//! A real Kubernetes API server for CRDs: upstream apiextensions-apiserver on etcd, built and cached
//! by `scripts/setup-kube-apiserver.sh`, with client-certificate authentication (a test CA, a
//! serving certificate for 127.0.0.1 and an admin in `system:masters`), and every CRD of
//! `tests/crds` loaded: OCM's, and the built-in kinds the plugins use (CSRs, leases, events)
//! registered as CRDs of the same group/version/kind; and conductor's own `SourcePlugin` CRD from
//! `deploy/components/source-plugins`.
//!
//! [`Front`] puts an HTTP front before it for conductor: everything is forwarded to the API server
//! with the admin's credentials, except the few built-in APIs that server does not have, which
//! small doubles answer as the real API does (TokenRequest).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::free_port;
use serde_json::Value;

/// The finalizer the kube plugin keeps on a ManifestWork until its agent reports it deleted.
pub const FINALIZER: &str = "cluster.open-cluster-management.io/manifest-work-cleanup";

pub struct KubeApi {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub kubeconfig: PathBuf,
    etcd_ports: (u16, u16),
    etcd: Child,
    apiserver: Child,
}

fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONDUCTOR_KUBE_BIN") {
        return dir.into();
    }
    let home = std::env::var_os("HOME").expect("HOME");
    let dir = Path::new(&home).join(".cache/conductor/kube/bin");
    assert!(
        dir.join("apiextensions-apiserver").exists(),
        "no test API server in {}: run scripts/setup-kube-apiserver.sh (the README's test command does)",
        dir.display()
    );
    dir
}

/// A test CA, a serving certificate for 127.0.0.1 and an admin client certificate in
/// `system:masters`.
pub fn certificates(dir: &Path) {
    let pki = conductor_blackbox_tests::certs::Pki::new(dir, "ca");
    pki.server("server", "127.0.0.1");
    pki.client("admin", "admin", &["system:masters"]);
}

/// etcd on `d`'s data, serving once this returns.
fn spawn_etcd(d: &Path, (client, peer): (u16, u16)) -> Child {
    let url = format!("http://127.0.0.1:{client}");
    let mut etcd = Command::new(bin_dir().join("etcd"))
        .args(["--data-dir", &d.join("etcd").display().to_string(), "--unsafe-no-fsync"])
        .args(["--listen-client-urls", &url, "--advertise-client-urls", &url])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args(["--initial-cluster", &format!("default=http://127.0.0.1:{peer}")])
        .stdout(Stdio::null())
        .stderr(log_file(d, "etcd.log"))
        .spawn()
        .expect("etcd starts");
    // The API server gives up on an etcd it has not reached within seconds: etcd serves first.
    let health = format!("http://127.0.0.1:{client}/health");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !Command::new("curl")
        .args(["-sf", &health])
        .output()
        .is_ok_and(|out| out.status.success())
    {
        let exited = etcd.try_wait().ok().flatten();
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "etcd did not serve ({exited:?}); its log:\n{}",
            log_tail(d, "etcd.log")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    etcd
}

/// The last lines of the log `name` in `d`.
fn log_tail(d: &Path, name: &str) -> String {
    let log = std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// `name` in `d`, opened for appending: a restarted process logs after the first one.
fn log_file(d: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(d.join(name))
        .unwrap()
}

fn spawn_apiserver(d: &Path, etcd_port: u16, port: u16) -> Child {
    let kc = d.join("kubeconfig").display().to_string();
    Command::new(bin_dir().join("apiextensions-apiserver"))
        .args(["--etcd-servers", &format!("http://127.0.0.1:{etcd_port}"), "--bind-address=127.0.0.1"])
        .args(["--secure-port", &port.to_string(), "--cert-dir", &d.join("serving").display().to_string()])
        .args(["--tls-cert-file", &d.join("server.crt").display().to_string()])
        .args(["--tls-private-key-file", &d.join("server.key").display().to_string()])
        .args(["--client-ca-file", &d.join("ca.crt").display().to_string()])
        .args(["--authentication-kubeconfig", &kc, "--authorization-kubeconfig", &kc, "--kubeconfig", &kc])
        .args(["--authentication-skip-lookup", "--enable-priority-and-fairness=false"])
        .args(["--disable-admission-plugins=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy"])
        .stdout(Stdio::null())
        .stderr(log_file(d, "apiserver.log"))
        .spawn()
        .expect("apiextensions-apiserver starts")
}

impl KubeApi {
    /// etcd and the API server on free ports, with every CRD of `tests/crds` established.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        certificates(d);
        let (etcd_ports, port) = ((free_port(), free_port()), free_port());
        let etcd = spawn_etcd(d, etcd_ports);
        let kubeconfig = d.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {d}/ca.crt\nusers:\n- name: admin\n  user:\n    client-certificate: {d}/admin.crt\n    client-key: {d}/admin.key\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\ncurrent-context: test\n",
                d = d.display()
            ),
        )
        .unwrap();
        let apiserver = spawn_apiserver(d, etcd_ports.0, port);
        let api = Self {
            dir,
            port,
            kubeconfig,
            etcd_ports,
            etcd,
            apiserver,
        };
        api.wait_for("the API server", |api| api.request("GET", "/livez", None).0 == 200);
        let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
        let mut names = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(&crds).unwrap().flatten().map(|e| e.path()).collect();
        files.sort();
        // conductor's own, as deploy/ ships it.
        files.push(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/components/source-plugins/sourceplugins.crd.yaml"),
        );
        for file in files {
            let crd = std::fs::read_to_string(&file).unwrap();
            let name = crd
                .lines()
                .skip_while(|l| !l.starts_with("metadata:"))
                .find_map(|l| l.trim().strip_prefix("name: "))
                .unwrap()
                .to_owned();
            let (status, body) = api.request_typed(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                "application/yaml",
                &crd,
            );
            assert_eq!(status, 201, "{}: {body}", file.display());
            names.push(name);
        }
        for name in names {
            api.wait_for(&format!("the CRD {name} established"), |api| {
                let (_, body) = api.request(
                    "GET",
                    &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
                    None,
                );
                serde_json::from_str::<Value>(&body).ok().is_some_and(|crd| {
                    crd["status"]["conditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
                })
            });
        }
        api
    }

    /// Stops the API server and etcd (their data stays).
    pub fn stop(&mut self) {
        for child in [&mut self.apiserver, &mut self.etcd] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts them again on the same data and ports, and waits until the API server serves.
    pub fn restart(&mut self) {
        let d = self.dir.path().to_owned();
        self.etcd = spawn_etcd(&d, self.etcd_ports);
        self.apiserver = spawn_apiserver(&d, self.etcd_ports.0, self.port);
        self.wait_for("the API server after its restart", |api| {
            api.request("GET", "/apis/work.open-cluster-management.io/v1/manifestworks", None)
                .0
                == 200
        });
    }

    fn wait_for(&self, what: &str, ready: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; etcd log:\n{}\nAPI server log:\n{}",
                log_tail(self.dir.path(), "etcd.log"),
                log_tail(self.dir.path(), "apiserver.log")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `method path` with a JSON body: (HTTP status, body).
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
        let body = body.map(Value::to_string).unwrap_or_default();
        let content_type = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        self.request_typed(method, path, content_type, &body)
    }

    pub fn request_typed(&self, method: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
        let d = self.dir.path();
        let mut c = Command::new("curl");
        c.args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method])
            .arg("--cacert")
            .arg(d.join("ca.crt"))
            .arg("--cert")
            .arg(d.join("admin.crt"))
            .arg("--key")
            .arg(d.join("admin.key"))
            .args(["-H", &format!("Content-Type: {content_type}")]);
        if !body.is_empty() {
            c.args(["--data-binary", body]);
        }
        let out = c
            .arg(format!("https://127.0.0.1:{}{path}", self.port))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An HTTP front of the test API server, for conductor's `[kubernetes]`: forwards every request
/// to the API server with the admin's credentials, except those of built-in APIs that server
/// lacks, which doubles answer as the real API does:
/// - `POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token` (`authentication.k8s.io/v1`
///   TokenRequest): checks the request and answers it with a token.
pub struct Front {
    /// A kubeconfig reaching the front (plain HTTP on loopback, no credentials).
    pub kubeconfig: PathBuf,
    /// The TokenRequests answered: (namespace, service account, request body).
    pub token_requests: std::sync::Arc<std::sync::Mutex<Vec<(String, String, Value)>>>,
    /// Every request the front received, answered by a double or forwarded: (method, path with
    /// its query).
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Front {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct FrontState {
    client: kube::Client,
    token_requests: std::sync::Arc<std::sync::Mutex<Vec<(String, String, Value)>>>,
}

fn status(code: u16, reason: &str, message: String) -> axum::response::Response {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (
        axum::http::StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

use axum::response::IntoResponse;

/// The TokenRequest double: the request must be an `authentication.k8s.io/v1` TokenRequest.
fn token_request(state: &FrontState, namespace: &str, account: &str, body: &[u8]) -> axum::response::Response {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the body is not JSON".into());
    };
    if request["apiVersion"] != "authentication.k8s.io/v1" || request["kind"] != "TokenRequest" {
        return status(
            400,
            "BadRequest",
            format!(
                "want an authentication.k8s.io/v1 TokenRequest, got {}/{}",
                request["apiVersion"], request["kind"]
            ),
        );
    }
    let seconds = request["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
    let expires = chrono::Utc::now() + chrono::Duration::seconds(seconds);
    let answer = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "metadata": {"name": account, "namespace": namespace, "creationTimestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)},
        "spec": request["spec"],
        "status": {"token": format!("token-of-{namespace}-{account}"), "expirationTimestamp": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)},
    });
    state
        .token_requests
        .lock()
        .unwrap()
        .push((namespace.to_owned(), account.to_owned(), request));
    (
        axum::http::StatusCode::CREATED,
        [("content-type", "application/json")],
        answer.to_string(),
    )
        .into_response()
}

async fn forward(
    axum::extract::State(state): axum::extract::State<FrontState>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return status(400, "BadRequest", "unreadable body".into());
    };
    let path: Vec<&str> = parts.uri.path().trim_matches('/').split('/').collect();
    if parts.method == axum::http::Method::POST
        && let ["api", "v1", "namespaces", ns, "serviceaccounts", account, "token"] = path.as_slice()
    {
        return token_request(&state, ns, account, &body);
    }
    let mut out = axum::http::Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"));
    for name in ["content-type", "accept"] {
        if let Some(v) = parts.headers.get(name) {
            out = out.header(name, v);
        }
    }
    let Ok(out) = out.body(kube::client::Body::from(body.to_vec())) else {
        return status(400, "BadRequest", "bad request".into());
    };
    match state.client.send(out).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            axum::response::Response::from_parts(parts, axum::body::Body::new(body))
        }
        Err(e) => status(502, "InternalError", format!("the API server: {e}")),
    }
}

impl KubeApi {
    /// Starts an HTTP front of this API server (see [`Front`]).
    pub async fn front(&self) -> Front {
        self.front_with(axum::Router::new()).await
    }

    /// A front that serves `doubles`' routes itself (e.g. the auth double's TokenReview and
    /// SubjectAccessReview) and forwards the rest.
    pub async fn front_with(&self, doubles: axum::Router) -> Front {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let state = FrontState {
            client: kube::Client::try_from(config).unwrap(),
            token_requests: Default::default(),
        };
        let token_requests = std::sync::Arc::clone(&state.token_requests);
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = std::sync::Arc::clone(&requests);
        let app = doubles
            .merge(axum::Router::new().fallback(forward).with_state(state))
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let uri = request
                        .uri()
                        .path_and_query()
                        .map(|p| p.to_string())
                        .unwrap_or_default();
                    recorded.lock().unwrap().push((request.method().to_string(), uri));
                    next.run(request)
                },
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let kubeconfig = self.dir.path().join(format!("front-{port}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: front\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: conductor\n  user: {{}}\ncontexts:\n- name: front\n  context:\n    cluster: front\n    user: conductor\ncurrent-context: front\n"
            ),
        )
        .unwrap();
        Front {
            kubeconfig,
            token_requests,
            requests,
            task,
        }
    }
}

/// The kube plugin's entry of the documented hub configuration (`examples/config/hub.toml`),
/// loaded in `form`, reaching the API server through `front`.
pub fn kube_config(front: &Front, form: conductor_blackbox_tests::Form) -> String {
    let hub =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/config/hub.toml")).unwrap();
    let start = hub.find("[plugins.kube]").unwrap();
    let end = hub[start + 1..].find("\n[").map_or(hub.len(), |i| start + 1 + i);
    let plugin = hub[start..end]
        .replace("kind = \"component\"", &format!("kind = \"{}\"", form.kind()))
        .replace(
            "\"../../plugins/dist/kube.wasm\"",
            &format!(
                "\"{}\"",
                conductor_blackbox_tests::plugin_artifact("kube-plugin", form).display()
            ),
        );
    format!(
        "[kubernetes]\nkubeconfig = \"{}\"\n{plugin}\n",
        front.kubeconfig.display()
    )
}
