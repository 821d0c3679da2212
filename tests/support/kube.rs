//! A real Kubernetes API server for CRDs: upstream apiextensions-apiserver on etcd, built and cached
//! by `scripts/setup-kube-apiserver.sh`, with client-certificate authentication (a test CA, a
//! serving certificate for 127.0.0.1 and an admin in `system:masters`), and OCM's CRDs loaded.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::free_port;
use serde_json::Value;

pub struct KubeApi {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub kubeconfig: PathBuf,
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

fn run(dir: &Path, args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test CA, a serving certificate for 127.0.0.1 and an admin client certificate (X.509 v3:
/// rustls refuses v1).
pub fn certificates(dir: &Path) {
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    run(
        dir,
        &[
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=conductor-test-ca",
        ],
    );
    for (name, subject, ext) in [
        ("server", "/CN=127.0.0.1", "server.ext"),
        ("admin", "/O=system:masters/CN=admin", "client.ext"),
    ] {
        let (key, csr, crt) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"));
        run(
            dir,
            &[
                "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject,
            ],
        );
        run(
            dir,
            &[
                "openssl",
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                ext,
            ],
        );
    }
}

impl KubeApi {
    /// etcd and the API server on free ports, with ManagedCluster's CRD established.
    pub fn start() -> Self {
        let bin = bin_dir();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        certificates(d);
        let (etcd_port, peer_port, port) = (free_port(), free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd = Command::new(bin.join("etcd"))
            .args(["--data-dir", &d.join("etcd").display().to_string(), "--unsafe-no-fsync"])
            .args(["--listen-client-urls", &etcd_url, "--advertise-client-urls", &etcd_url])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer_port}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer_port}"),
            ])
            .args(["--initial-cluster", &format!("default=http://127.0.0.1:{peer_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd starts");
        let kubeconfig = d.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {d}/ca.crt\nusers:\n- name: admin\n  user:\n    client-certificate: {d}/admin.crt\n    client-key: {d}/admin.key\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\ncurrent-context: test\n",
                d = d.display()
            ),
        )
        .unwrap();
        let kc = kubeconfig.display().to_string();
        let apiserver = Command::new(bin.join("apiextensions-apiserver"))
            .args(["--etcd-servers", &etcd_url, "--bind-address=127.0.0.1"])
            .args(["--secure-port", &port.to_string(), "--cert-dir", &d.join("serving").display().to_string()])
            .args(["--tls-cert-file", &d.join("server.crt").display().to_string()])
            .args(["--tls-private-key-file", &d.join("server.key").display().to_string()])
            .args(["--client-ca-file", &d.join("ca.crt").display().to_string()])
            .args(["--authentication-kubeconfig", &kc, "--authorization-kubeconfig", &kc, "--kubeconfig", &kc])
            .args(["--authentication-skip-lookup", "--enable-priority-and-fairness=false"])
            .args(["--disable-admission-plugins=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("apiserver.log")).unwrap())
            .spawn()
            .expect("apiextensions-apiserver starts");
        let api = Self {
            dir,
            port,
            kubeconfig,
            etcd,
            apiserver,
        };
        api.wait_for("the API server", |api| api.request("GET", "/livez", None).0 == 200);
        let crd = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("crds/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml"),
        )
        .unwrap();
        let (status, body) = api.request_typed(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "application/yaml",
            &crd,
        );
        assert_eq!(status, 201, "{body}");
        api.wait_for("ManagedCluster's CRD established", |api| {
            let (_, body) = api.request(
                "GET",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/managedclusters.cluster.open-cluster-management.io",
                None,
            );
            serde_json::from_str::<Value>(&body).ok().is_some_and(|crd| {
                crd["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
            })
        });
        api
    }

    fn wait_for(&self, what: &str, ready: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; API server log:\n{}",
                std::fs::read_to_string(self.dir.path().join("apiserver.log")).unwrap_or_default()
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

    fn request_typed(&self, method: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
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
        for child in [&mut self.apiserver, &mut self.etcd] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
