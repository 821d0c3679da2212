//! conductor as a drop-in for OCM's hub gRPC server (and the Go conductor): the image's staged
//! root run exactly as OCM's ClusterManager operator runs its gRPC server's image — the
//! operator's argv (`/server grpc --server-config=/var/run/secrets/hub/grpc/config/config.yaml`,
//! hosted mode's `--kubeconfig=/var/run/secrets/hub/kubeconfig`), the three mounts at their paths,
//! only `POD_NAME` and `POD_NAMESPACE` in the environment, a read-only root with a writable
//! `/tmp`, the image's user — with OCM's flat configuration, the Go conductor's nested one and
//! none. Agents connect with the `config.yaml` OCM's import controller gives them (a bootstrap
//! token, then the client certificate registration got them); the operator's HTTPS health probe
//! answers; a rotated serving certificate is served to the next connection. And every request
//! the drop-in sends the API server through registration and the ManifestWork lifecycle is one
//! the ClusterRole OCM grants its gRPC server allows.
//!
//! The operator's mounts are made in a mount namespace of the test's own (`unshare`, as root):
//! nothing is written outside the test's temporary folders.

#[path = "support/auth.rs"]
mod auth;
#[path = "support/kube.rs"]
mod kube_api;
#[path = "support/maestro.rs"]
mod maestro;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use conductor_blackbox_tests::certs::Pki;
use conductor_blackbox_tests::events::{self, attr_str};
use conductor_blackbox_tests::proto::{PublishRequest, SubscriptionRequest};
use conductor_blackbox_tests::{CLUSTERS, CloudEventServiceClient, Conductor, LEASES, Sub, WORKS, conductor_bin};
use kube_api::KubeApi;
use serde_json::{Value, json};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const AGENT_USER: &str = "system:open-cluster-management:cluster1:agent1";
const CLUSTER1: &str = "system:open-cluster-management:cluster1";
const BOOTSTRAP_TOKEN: &str = "bootstrap-token-cluster1";
/// OCM's ports: gRPC (the Service's target port) and the health probe's.
const GRPC_PORT: u16 = 8090;
const HEALTH_PORT: u16 = 8443;

/// The folder deploy/stage.sh staged the image into (scripts/test.sh sets it).
fn image_root() -> PathBuf {
    PathBuf::from(
        std::env::var_os("CONDUCTOR_IMAGE_ROOT")
            .expect("CONDUCTOR_IMAGE_ROOT: the folder deploy/stage.sh staged the image into (scripts/test.sh sets it)"),
    )
}

/// What the operator mounts, in a folder of the test's: `config/` (ConfigMap grpc-server-config,
/// optional: empty when the hub has none), `ca/ca-bundle.crt` (ConfigMap ca-bundle-configmap),
/// `serving-cert/tls.{crt,key}` (Secret grpc-server-serving-cert), and `kubeconfig` (hosted
/// mode's Secret).
struct Mounts {
    dir: tempfile::TempDir,
    pki: Pki,
}

impl Mounts {
    fn new(config_yaml: Option<&str>, kubeconfig: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = &dir.path().to_owned();
        std::fs::create_dir(d.join("pki")).unwrap();
        let pki = Pki::new(&d.join("pki"), "ca");
        pki.client("agent1", AGENT_USER, &[CLUSTER1]);
        for sub in ["config", "ca", "serving-cert"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        std::fs::copy(pki.ca(), d.join("ca/ca-bundle.crt")).unwrap();
        let mounts = Self { dir, pki };
        mounts.rotate_serving_cert("cluster-manager-grpc-server");
        if let Some(text) = config_yaml {
            std::fs::write(d.join("config/config.yaml"), text).unwrap();
        }
        std::fs::copy(kubeconfig, d.join("kubeconfig")).unwrap();
        // Readable by the image's user, as a Secret's or ConfigMap's files are.
        for path in walk(d) {
            let mode = if path.is_dir() { 0o755 } else { 0o644 };
            std::fs::set_permissions(&path, PermissionsExt::from_mode(mode)).unwrap();
        }
        std::fs::set_permissions(d, PermissionsExt::from_mode(0o755)).unwrap();
        mounts
    }

    /// A new serving certificate with subject CN `cn`, written as the operator rotates it (each
    /// file replaced whole).
    fn rotate_serving_cert(&self, cn: &str) {
        let (cert, key) = self.pki.server(&format!("serving-{cn}"), cn);
        for (from, to) in [(key, "tls.key"), (cert, "tls.crt")] {
            let target = self.dir.path().join("serving-cert").join(to);
            let tmp = target.with_extension("new");
            std::fs::copy(&from, &tmp).unwrap();
            std::fs::set_permissions(&tmp, PermissionsExt::from_mode(0o644)).unwrap();
            std::fs::rename(&tmp, &target).unwrap();
        }
    }

    /// The image's `/server` with `args`, as the operator's Deployment runs it: in a mount
    /// namespace of its own, the mounts at the operator's paths (read-only), an empty writable
    /// `/tmp`, the root read-only, the image's user, only the Deployment's environment.
    fn operator_command(&self, args: &[&str]) -> Command {
        let script = r#"set -e
run=$(readlink -f /var/run)
mount -t tmpfs -o mode=0755 tmpfs "$run"
hub="$run/secrets/hub"
mkdir -p "$hub/grpc/config" "$hub/grpc/ca" "$hub/grpc/serving-cert" "$run/image"
cp "$MOUNTS/kubeconfig" "$hub/kubeconfig"
for m in config ca serving-cert; do
    mount --bind "$MOUNTS/$m" "$hub/grpc/$m"
    mount -o remount,bind,ro "$hub/grpc/$m"
done
mount --bind "$IMAGE" "$run/image"
mount -o remount,bind,ro "$run/image"
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -o remount,bind,ro /
exec setpriv --reuid=65532 --regid=65532 --clear-groups \
    env -i POD_NAME=cluster-manager-grpc-server-7d9f POD_NAMESPACE=open-cluster-management-hub \
    "$run/image/server" "$@"
"#;
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"])
            .args(args)
            .env("MOUNTS", self.dir.path())
            .env("IMAGE", image_root());
        command
    }

    /// The `config.yaml` of an agent's bootstrap Secret: the server's address, its CA, and a
    /// bootstrap token; after registration, the agent's signed certificate instead.
    fn agent_config(&self, registered: bool) -> String {
        let b64 = |p: PathBuf| base64::engine::general_purpose::STANDARD.encode(std::fs::read(p).unwrap());
        let mut yaml = format!(
            "url: localhost:{GRPC_PORT}\ncaData: {}\nkeepAliveConfig:\n  enable: true\n  time: 30s\n",
            b64(self.pki.ca())
        );
        if registered {
            let dir = self.dir.path().join("pki");
            yaml += &format!(
                "clientCertData: {}\nclientKeyData: {}\n",
                b64(dir.join("agent1.crt")),
                b64(dir.join("agent1.key"))
            );
        } else {
            yaml += &format!("token: {BOOTSTRAP_TOKEN}\n");
        }
        yaml
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

/// An agent as sdk-go connects one from its `config.yaml`.
struct Agent {
    client: CloudEventServiceClient<Channel>,
    token: Option<String>,
}

impl Agent {
    async fn connect(config_yaml: &str) -> Self {
        let config: Value = serde_saphyr::from_str(config_yaml).unwrap();
        let decode = |key: &str| {
            config[key]
                .as_str()
                .map(|v| base64::engine::general_purpose::STANDARD.decode(v).unwrap())
        };
        let url = config["url"].as_str().unwrap();
        let host = url.rsplit_once(':').map_or(url, |(host, _)| host);
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(decode("caData").unwrap()))
            .domain_name(host);
        if let (Some(cert), Some(key)) = (decode("clientCertData"), decode("clientKeyData")) {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        let channel = Channel::from_shared(format!("https://{url}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .expect("the agent connects");
        Self {
            client: CloudEventServiceClient::new(channel),
            token: config["token"].as_str().map(str::to_owned),
        }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(token) = &self.token {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        request
    }

    async fn subscribe(&mut self, cluster: &str, data_type: &str) -> Sub {
        let request = self.request(SubscriptionRequest {
            source: String::new(),
            cluster_name: cluster.into(),
            data_type: data_type.into(),
        });
        let response = self.client.subscribe(request).await.expect("subscribed");
        Sub {
            subscription_id: vec![],
            stream: response.into_inner(),
        }
    }

    async fn publish(&mut self, event: conductor_blackbox_tests::proto::CloudEvent) -> Result<(), tonic::Status> {
        let request = self.request(PublishRequest { event: Some(event) });
        self.client.publish(request).await.map(drop)
    }
}

fn tokens() -> Vec<auth::KnownToken> {
    vec![auth::KnownToken {
        token: BOOTSTRAP_TOKEN,
        user: "system:serviceaccount:open-cluster-management-agent:cluster1-bootstrap",
        groups: &[CLUSTER1],
    }]
}

/// OCM's ports must be free: the operator's command line names no other.
fn ports_are_free() {
    for port in [GRPC_PORT, HEALTH_PORT] {
        if let Err(e) = std::net::TcpListener::bind(("0.0.0.0", port)) {
            panic!("port {port} is taken ({e}): the drop-in test serves on OCM's ports");
        }
    }
}

fn manifest_work(cluster: &str, name: &str) -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": cluster},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}]}},
    })
}

fn create_work(api: &KubeApi, cluster: &str, name: &str) -> String {
    let (code, body) = api.request(
        "POST",
        &format!("/apis/work.open-cluster-management.io/v1/namespaces/{cluster}/manifestworks"),
        Some(&manifest_work(cluster, name)),
    );
    assert_eq!(code, 201, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `curl` on the health endpoint (HTTPS, its self-signed certificate not checked, as the
/// kubelet's probe): (status, body).
fn health(path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "-o", "-", "-w", "\n%{http_code}"])
        .arg(format!("https://127.0.0.1:{HEALTH_PORT}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// The subject CN of the certificate the gRPC port serves to a new connection.
fn served_cn() -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{GRPC_PORT} -alpn h2 </dev/null 2>/dev/null | openssl x509 -noout -subject -nameopt multiline"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("commonName")
                .map(|v| v.trim_start_matches([' ', '=']).to_owned())
        })
        .unwrap_or_default()
}

/// What every variant must do: a bootstrap-token agent and a registered (client certificate)
/// agent each get cluster1's ManifestWork, the operator's HTTPS probe answers, metrics need a
/// token.
async fn serves_agents_as_ocms_server(c: &Conductor, mounts: &Mounts, api: &KubeApi, work: &str) {
    let mut bootstrap = Agent::connect(&mounts.agent_config(false)).await;
    let mut works = bootstrap.subscribe("cluster1", WORKS).await;
    bootstrap
        .publish(events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let uid = create_work(api, "cluster1", work);
    maestro::next_where(&mut works, "the work, on the bootstrap agent's stream", |e| {
        attr_str(e, "ce-resourceid") == Some(uid.as_str())
    })
    .await;

    let mut registered = Agent::connect(&mounts.agent_config(true)).await;
    let mut works = registered.subscribe("cluster1", WORKS).await;
    registered
        .publish(events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    maestro::next_where(&mut works, "the work, resynced to the registered agent", |e| {
        attr_str(e, "ce-resourceid") == Some(uid.as_str())
    })
    .await;

    assert_eq!(health("/healthz"), (200, "ok".to_owned()), "{}", c.logs());
    let (code, _) = health("/metrics");
    assert_eq!(
        code, 401,
        "metrics need a token, as the operator's Prometheus sends one"
    );
}

/// The image, run as the operator runs it, with each form of configuration the hubs have: OCM's
/// flat file (with a serving certificate rotated while it serves), the Go conductor's nested file
/// (Maestro's database beside Kubernetes), and no file at all.
#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_as_ocms_operator_runs_its_grpc_server() {
    ports_are_free();
    let api = tokio::task::spawn_blocking(KubeApi::start).await.unwrap();
    let (doubles, reviews) = auth::routes(tokens());
    let front = api.front_with(doubles).await;
    // The operator's argv: `--tls-min-version` is always there (its TLS profile's minimum,
    // TLS 1.2 by default).
    let hosted = [
        "grpc",
        "--server-config=/var/run/secrets/hub/grpc/config/config.yaml",
        "--kubeconfig=/var/run/secrets/hub/kubeconfig",
        "--tls-min-version=VersionTLS12",
    ];

    // OCM's flat format, as a hub's ConfigMap grpc-server-config holds it, and a library flag
    // conductor ignores.
    let flat = "tls_cert_file: /var/run/secrets/hub/grpc/serving-cert/tls.crt\ntls_key_file: /var/run/secrets/hub/grpc/serving-cert/tls.key\nclient_ca_file: /var/run/secrets/hub/grpc/ca/ca-bundle.crt\nserver_bind_port: \"8090\"\ntls_min_version: 771\ncert_watch_interval: 1s\nmax_receive_message_size: 4194304\nread_buffer_size: 32768\n";
    let mounts = Mounts::new(Some(flat), &front.kubeconfig);
    let mut args = hosted.to_vec();
    args.push("--kube-api-qps=50");
    let c = Conductor::start_raw(mounts.operator_command(&args)).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{}/status", c.pid())).unwrap();
    assert!(
        status.lines().any(|l| l.starts_with("Uid:") && l.contains("65532")),
        "{status}"
    );
    serves_agents_as_ocms_server(&c, &mounts, &api, "flat").await;
    for needle in [
        "read OCM's gRPC server configuration",
        "\"flag\":\"--kube-api-qps\"",
        "\"key\":\"read_buffer_size\"",
    ] {
        c.wait_for_log(needle).await;
    }
    // The operator rotates the serving certificate in its Secret: the next connection gets it.
    assert_eq!(served_cn(), "cluster-manager-grpc-server");
    mounts.rotate_serving_cert("rotated");
    let deadline = Instant::now() + Duration::from_secs(20);
    while served_cn() != "rotated" {
        assert!(
            Instant::now() < deadline,
            "the rotated certificate is not served: {}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut after = Agent::connect(&mounts.agent_config(true)).await;
    after.subscribe("cluster1", WORKS).await;
    after
        .publish(events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    drop(c);

    // The Go conductor's nested format: Maestro's database beside the kube source.
    let db = maestro::MaestroDb::start().await;
    let nested = format!(
        "grpc_config:\n  tls_cert_file: /var/run/secrets/hub/grpc/serving-cert/tls.crt\n  tls_key_file: /var/run/secrets/hub/grpc/serving-cert/tls.key\n  client_ca_file: /var/run/secrets/hub/grpc/ca/ca-bundle.crt\ndb_config:\n  host: 127.0.0.1\n  port: {}\n  name: maestro\n  username: postgres\n  password: \"\"\n  sslmode: \"disable\"\n",
        db.port
    );
    let mounts = Mounts::new(Some(&nested), &front.kubeconfig);
    let mut args = hosted.to_vec();
    args.extend(["--disable-leader-election=true", "--v=2"]);
    let c = Conductor::start_raw(mounts.operator_command(&args)).unwrap();
    serves_agents_as_ocms_server(&c, &mounts, &api, "nested").await;
    c.wait_for_log("read the Go conductor's configuration").await;
    // Maestro's resource, to the same agent, by the maestro source.
    let mut agent = Agent::connect(&mounts.agent_config(true)).await;
    let mut works = agent.subscribe("cluster1", WORKS).await;
    let (id, _) = db.create("cluster1", "from-maestro", true).await;
    maestro::next_where(&mut works, "Maestro's resource", |e| {
        attr_str(e, "ce-resourceid") == Some(id.as_str()) && e.source == "maestro"
    })
    .await;
    // The consumer controller: a joined ManagedCluster gets its Maestro consumer.
    let cluster = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "cluster7"}, "spec": {"hubAcceptsClient": true}});
    let (code, body) = api.request(
        "POST",
        "/apis/cluster.open-cluster-management.io/v1/managedclusters",
        Some(&cluster),
    );
    assert_eq!(code, 201, "{body}");
    let joined = json!({"status": {"conditions": [{"type": "ManagedClusterJoined", "status": "True", "reason": "Joined", "message": "joined", "lastTransitionTime": "2026-11-30T10:00:00Z"}]}});
    let (code, body) = api.request(
        "PATCH",
        "/apis/cluster.open-cluster-management.io/v1/managedclusters/cluster7/status",
        Some(&joined),
    );
    assert_eq!(code, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while db
        .count_for("SELECT count(*) FROM consumers WHERE name = $1", "cluster7")
        .await
        != 1
    {
        assert!(Instant::now() < deadline, "no consumer for cluster7: {}", c.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(c);

    // No file (the ConfigMap is optional): OCM's defaults, in-cluster paths and ports.
    let mounts = Mounts::new(None, &front.kubeconfig);
    let c = Conductor::start_raw(mounts.operator_command(&hosted)).unwrap();
    serves_agents_as_ocms_server(&c, &mounts, &api, "defaults").await;
    c.wait_for_log("the server configuration file does not exist").await;
    drop(c);

    assert!(reviews.refused().is_empty(), "{:?}", reviews.refused());
    assert!(
        reviews.access_reviews().iter().any(|r| r["spec"]["user"] == AGENT_USER),
        "the registered agent was authorized as itself"
    );
}

/// `--print-config` prints the conductor.toml the drop-in runs, which `conductor serve` takes.
#[test]
fn print_config_is_a_configuration_conductor_serves_with() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, "server_bind_port: \"9443\"\ntls_min_version: VersionTLS13\n").unwrap();
    let out = Command::new(conductor_bin())
        .args(["grpc", &format!("--server-config={}", file.display()), "--print-config"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let toml = String::from_utf8(out.stdout).unwrap();
    assert!(toml.contains("listen = \"0.0.0.0:9443\""), "{toml}");
    assert!(toml.contains("min_version = \"1.3\""), "{toml}");
    let native = dir.path().join("conductor.toml");
    std::fs::write(&native, &toml).unwrap();
    let out = Command::new(conductor_bin())
        .args(["plugins", "list", "--config"])
        .arg(&native)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("kube: "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // A value of the wrong type stops it, naming the file and the key.
    std::fs::write(&file, "grpc_config:\n  server_bind_port: eighty\n").unwrap();
    let out = Command::new(conductor_bin())
        .args(["grpc", &format!("--server-config={}", file.display())])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}: grpc_config.server_bind_port:", file.display())),
        "{stderr}"
    );
}

/// `conductor grpc` outside its image, where the bundled plugins are not at the image's path,
/// stops naming the plugin's file and `CONDUCTOR_PLUGIN_FOLDER`, which points it at them.
#[test]
fn a_plugin_missing_from_the_plugin_folder_names_the_variable_that_sets_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "ca");
    let (cert, key) = pki.server("serving", "cluster-manager-grpc-server");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "tls_cert_file: {}\ntls_key_file: {}\nclient_ca_file: {}\nserver_bind_port: \"{}\"\n",
            cert.display(),
            key.display(),
            pki.ca().display(),
            conductor_blackbox_tests::free_port()
        ),
    )
    .unwrap();
    // The auth layer needs an API server to be named; it is not reached before the plugins load.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: hub\n  cluster:\n    server: https://127.0.0.1:1\n\
         contexts:\n- name: hub\n  context: {cluster: hub, user: grpc}\ncurrent-context: hub\n\
         users:\n- name: grpc\n  user: {token: unused}\n",
    )
    .unwrap();
    let plugins = dir.path().join("no-plugins");
    std::fs::create_dir(&plugins).unwrap();
    let out = Command::new(conductor_bin())
        .args(["grpc", &format!("--server-config={}", config.display())])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--listen=127.0.0.1:0"])
        .env("CONDUCTOR_PLUGIN_FOLDER", &plugins)
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kube = plugins.join("kube.wasm");
    assert!(
        stderr.contains(&format!("plugins.kube.file: cannot read {}", kube.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "looked up in the plugin folder, {}, which CONDUCTOR_PLUGIN_FOLDER sets",
            plugins.display()
        )),
        "{stderr}"
    );
}

/// The resource version an event carries.
fn version(e: &conductor_blackbox_tests::proto::CloudEvent) -> i32 {
    match events::attr(e, "ce-resourceversion") {
        Some(conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr::CeInteger(v)) => *v,
        other => panic!("no integer ce-resourceversion: {other:?}"),
    }
}

/// One rule of a ClusterRole.
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
}

/// The rules of the ClusterRole OCM binds to its gRPC server (tests/fixtures).
fn ocm_grpc_server_rules() -> Vec<Rule> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/ocm-grpc-server-clusterrole.yaml"),
    )
    .unwrap();
    let role: Value = serde_saphyr::from_str(&text).unwrap();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Rule {
            groups: strings(&r["apiGroups"]),
            resources: strings(&r["resources"]),
            verbs: strings(&r["verbs"]),
        })
        .collect()
}

/// A request to the API server as RBAC sees it (the API server's request info): verb, group,
/// resource (with `/subresource`).
fn request_attributes(method: &str, uri: &str) -> (String, String, String) {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => panic!("not a resource request: {method} {uri}"),
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub] => (*resource, Some(*name), Some(*sub)),
        _ => panic!("not a resource request: {method} {uri}"),
    };
    let watch = query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, name) {
        ("GET", _) if watch => "watch",
        ("GET", Some(_)) => "get",
        ("GET", None) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", Some(_)) => "delete",
        ("DELETE", None) => "deletecollection",
        _ => panic!("unexpected method: {method} {uri}"),
    };
    let resource = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    (verb.to_owned(), group.to_owned(), resource)
}

/// Registration and the ManifestWork lifecycle through the drop-in: every request it sends the
/// API server (forwarded, or answered by the review doubles) is one OCM's ClusterRole for its
/// gRPC server allows.
#[tokio::test(flavor = "multi_thread")]
async fn the_drop_in_needs_nothing_beyond_ocms_clusterrole() {
    let api = tokio::task::spawn_blocking(KubeApi::start).await.unwrap();
    let (doubles, _reviews) = auth::routes(tokens());
    let front = api.front_with(doubles).await;
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "ca");
    let (cert, key) = pki.server("serving", "cluster-manager-grpc-server");
    pki.client("agent1", AGENT_USER, &[CLUSTER1]);
    let port = conductor_blackbox_tests::free_port();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "tls_cert_file: {}\ntls_key_file: {}\nclient_ca_file: {}\nserver_bind_port: \"{port}\"\n",
            cert.display(),
            key.display(),
            pki.ca().display()
        ),
    )
    .unwrap();
    let mut command = Command::new(conductor_bin());
    command
        .args(["grpc", &format!("--server-config={}", config.display())])
        .arg(format!("--kubeconfig={}", front.kubeconfig.display()))
        .args(["--listen=127.0.0.1:0"])
        .env(
            "CONDUCTOR_PLUGIN_FOLDER",
            image_root().join("usr/lib/conductor/plugins"),
        )
        .env("TMPDIR", dir.path());
    let c = Conductor::start_raw(command).unwrap();
    let mut agent = pki.agent(&c, Some("agent1")).await;
    let spec = |dt: &str, action: &str, data: Value| {
        let mut e = events::agent_event(&format!("{dt}.spec.{action}"), "cluster1", "", Some(data));
        e.source = "cluster1".into();
        e
    };
    let status_of = |dt: &str, data: Value| {
        events::agent_event(&format!("{dt}.status.update_request"), "cluster1", "kube", Some(data))
    };
    let publisher = agent.clone();
    let publish = move |event| {
        let mut publisher = publisher.clone();
        async move { conductor_blackbox_tests::publish(&mut publisher, event).await }
    };

    // A bootstrap agent, with its token.
    let mut bootstrap = Agent {
        client: pki.agent(&c, None).await,
        token: Some(BOOTSTRAP_TOKEN.to_owned()),
    };
    bootstrap.subscribe("cluster1", CLUSTERS).await;

    // Registration: the cluster, its status, a CSR, the lease, an add-on's status, an event, a
    // token for an add-on.
    let mut clusters = conductor_blackbox_tests::subscribe(&mut agent, "cluster1", CLUSTERS)
        .await
        .unwrap();
    let cluster = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "cluster1"}, "spec": {"hubAcceptsClient": false}});
    publish(spec(CLUSTERS, "create_request", cluster)).await.unwrap();
    let heard = clusters.next_event().await.unwrap();
    let mut object: Value = events::data_json(&heard);
    object["status"] = json!({"conditions": [{"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "ok", "message": "ok", "lastTransitionTime": "2026-11-30T10:00:00Z"}]});
    publish(status_of(CLUSTERS, object)).await.unwrap();
    let csr_type = "certificates.k8s.io.v1.certificatesigningrequests";
    let csr = json!({"metadata": {"name": "cluster1-csr", "labels": {"open-cluster-management.io/cluster-name": "cluster1"}},
        "spec": {"signerName": "open-cluster-management.io/grpc", "request": "cmVx", "usages": ["client auth"]}});
    let mut csrs = conductor_blackbox_tests::subscribe(&mut agent, "cluster1", csr_type)
        .await
        .unwrap();
    publish(spec(csr_type, "create_request", csr)).await.unwrap();
    csrs.next_event().await.unwrap();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "managed-cluster-lease", "namespace": "cluster1", "labels": {"open-cluster-management.io/cluster-name": "cluster1"}},
        "spec": {"leaseDurationSeconds": 60}});
    let (code, body) = api.request(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/cluster1/leases",
        Some(&lease),
    );
    assert_eq!(code, 201, "{body}");
    let mut leases = conductor_blackbox_tests::subscribe(&mut agent, "cluster1", LEASES)
        .await
        .unwrap();
    publish(events::resync_request(LEASES, "cluster1", &[])).await.unwrap();
    let mut renewed: Value = events::data_json(&leases.next_event().await.unwrap());
    renewed["spec"]["renewTime"] = "2026-11-30T10:01:00.000000Z".into();
    publish(spec(LEASES, "update_request", renewed)).await.unwrap();
    let addon = json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": "helloworld", "namespace": "cluster1"}, "spec": {}});
    let (code, body) = api.request(
        "POST",
        "/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster1/managedclusteraddons",
        Some(&addon),
    );
    assert_eq!(code, 201, "{body}");
    let addons_type = "addon.open-cluster-management.io.v1alpha1.managedclusteraddons";
    let mut addons = conductor_blackbox_tests::subscribe(&mut agent, "cluster1", addons_type)
        .await
        .unwrap();
    publish(events::resync_request(addons_type, "cluster1", &[]))
        .await
        .unwrap();
    let mut current: Value = events::data_json(&addons.next_event().await.unwrap());
    current["status"] = json!({"conditions": [{"type": "Available", "status": "True", "reason": "ok", "message": "ok", "lastTransitionTime": "2026-11-30T10:00:00Z"}]});
    publish(status_of(addons_type, current)).await.unwrap();
    let event = json!({"metadata": {"name": "cluster1.joined", "namespace": "cluster1"}, "reason": "Joined", "note": "first",
        "eventTime": "2026-11-30T10:00:00.000000Z", "reportingController": "registration", "reportingInstance": "agent", "action": "Join", "type": "Normal"});
    publish(spec("events.k8s.io.v1.events", "create_request", event.clone()))
        .await
        .unwrap();
    let mut again = event;
    again["series"] = json!({"count": 2, "lastObservedTime": "2026-11-30T10:05:00.000000Z"});
    publish(spec("events.k8s.io.v1.events", "update_request", again))
        .await
        .unwrap();
    let token_type = "authentication.k8s.io.v1.tokenrequests";
    let mut tokens = conductor_blackbox_tests::subscribe(&mut agent, "cluster1", token_type)
        .await
        .unwrap();
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "metadata": {"name": "helloworld-agent", "namespace": "cluster1", "uid": "request-1"},
        "spec": {"audiences": ["helloworld"], "expirationSeconds": 600}});
    publish(spec(token_type, "create_request", request)).await.unwrap();
    tokens.next_event().await.unwrap();

    // The ManifestWork lifecycle: delivered, its status written back, deleted.
    let mut works = conductor_blackbox_tests::subscribe(&mut agent, "cluster1", WORKS)
        .await
        .unwrap();
    publish(events::resync_request(WORKS, "cluster1", &[])).await.unwrap();
    let uid = create_work(&api, "cluster1", "lifecycle");
    let delivered = loop {
        let e = works.next_event().await.unwrap();
        if attr_str(&e, "ce-resourceid") == Some(uid.as_str()) {
            break e;
        }
    };
    publish(events::work_status(
        "cluster1",
        &uid,
        version(&delivered),
        events::condition("Applied"),
    ))
    .await
    .unwrap();
    let (code, body) = api.request(
        "DELETE",
        "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks/lifecycle",
        None,
    );
    assert_eq!(code, 200, "{body}");
    let deleting = loop {
        let e = works.next_event().await.unwrap();
        if attr_str(&e, "ce-resourceid") == Some(uid.as_str()) && events::attr(&e, "ce-deletiontimestamp").is_some() {
            break e;
        }
    };
    publish(events::work_status(
        "cluster1",
        &uid,
        version(&deleting),
        events::condition("Deleted"),
    ))
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, _) = api.request(
            "GET",
            "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks/lifecycle",
            None,
        );
        if code == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "the work was not released: {}", c.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Every request, against the ClusterRole.
    let rules = ocm_grpc_server_rules();
    let requests = front.requests.lock().unwrap().clone();
    assert!(requests.len() > 10, "{requests:?}");
    let mut seen = std::collections::BTreeSet::new();
    for (method, uri) in &requests {
        let (verb, group, resource) = request_attributes(method, uri);
        let allowed = rules
            .iter()
            .any(|r| r.groups.contains(&group) && r.resources.contains(&resource) && r.verbs.contains(&verb));
        assert!(
            allowed,
            "{method} {uri} ({verb} {resource}.{group}) is not in OCM's ClusterRole for its gRPC server"
        );
        seen.insert(format!("{verb} {resource}.{group}"));
    }
    for needed in [
        "create tokenreviews.authentication.k8s.io",
        "create subjectaccessreviews.authorization.k8s.io",
        "create certificatesigningrequests.certificates.k8s.io",
        "patch manifestworks/status.work.open-cluster-management.io",
        "create serviceaccounts/token.",
    ] {
        assert!(seen.contains(needed), "{needed} was not exercised: {seen:?}");
    }
}

#[test]
fn request_attributes_follow_the_api_servers_request_info() {
    let cases = [
        (
            "GET",
            "/apis/work.open-cluster-management.io/v1/manifestworks?watch=true&resourceVersion=1",
            ("watch", "work.open-cluster-management.io", "manifestworks"),
        ),
        (
            "GET",
            "/apis/work.open-cluster-management.io/v1/manifestworks?limit=500",
            ("list", "work.open-cluster-management.io", "manifestworks"),
        ),
        (
            "PATCH",
            "/apis/work.open-cluster-management.io/v1/namespaces/c/manifestworks/w/status",
            ("patch", "work.open-cluster-management.io", "manifestworks/status"),
        ),
        (
            "POST",
            "/api/v1/namespaces/c/serviceaccounts/sa/token",
            ("create", "", "serviceaccounts/token"),
        ),
        (
            "PUT",
            "/apis/cluster.open-cluster-management.io/v1/managedclusters/c1/status",
            ("update", "cluster.open-cluster-management.io", "managedclusters/status"),
        ),
        (
            "GET",
            "/apis/events.k8s.io/v1/namespaces/c/events/e",
            ("get", "events.k8s.io", "events"),
        ),
    ];
    for (method, uri, (verb, group, resource)) in cases {
        assert_eq!(
            request_attributes(method, uri),
            (verb.to_owned(), group.to_owned(), resource.to_owned()),
            "{method} {uri}"
        );
    }
}
