//! The image: built from `deploy/Containerfile` (`CONDUCTOR_IMAGE`, run with podman, read-only)
//! or, where no container builder runs, as its build steps lay it out — `deploy/stage.sh`, which
//! the Containerfile's build stage runs, staged into `CONDUCTOR_IMAGE_ROOT` (the test command
//! does that). Its binary is started as the image's user (65532) with its bundled plugins and its
//! own `conductor.toml` — the Secrets and the API server where a Deployment would mount them —
//! and serves an agent a ManifestWork over TLS, writing nothing in the image's files.

#[path = "support/auth.rs"]
mod auth;
#[path = "support/kube.rs"]
mod kube_api;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use conductor_blackbox_tests::certs::Pki;
use conductor_blackbox_tests::events::{self, attr_str};
use conductor_blackbox_tests::{Conductor, WORKS, publish, subscribe};
use serde_json::json;

const AGENT: &str = "system:open-cluster-management:cluster1:agent1";
const CLUSTER1: &str = "system:open-cluster-management:cluster1";

/// The image under test.
enum Image {
    /// Built; run with podman.
    Built(String),
    /// Staged by its build steps into this folder; run from there.
    Staged(PathBuf),
}

/// The files the image adds to its base.
const IMAGE_FILES: [&str; 6] = [
    "etc/conductor/conductor.toml",
    "server",
    "usr/lib/conductor/plugins/consumer-controller.wasm",
    "usr/lib/conductor/plugins/kube.wasm",
    "usr/lib/conductor/plugins/maestro.wasm",
    "usr/local/bin/conductor",
];

impl Image {
    fn from_env() -> Self {
        if let Ok(image) = std::env::var("CONDUCTOR_IMAGE") {
            return Self::Built(image);
        }
        let root = std::env::var_os("CONDUCTOR_IMAGE_ROOT").expect(
            "CONDUCTOR_IMAGE (a built image) or CONDUCTOR_IMAGE_ROOT (the folder deploy/stage.sh staged it into; scripts/test.sh sets it)",
        );
        Self::Staged(PathBuf::from(root))
    }

    /// The image's own files (those it adds to its base), with their sizes and, when staged,
    /// modification times.
    fn files(&self) -> BTreeMap<String, (u64, Option<SystemTime>)> {
        match self {
            Self::Built(image) => {
                let out = Command::new("podman")
                    .args(["run", "--rm", "--entrypoint", "find", image])
                    .args([
                        "-L",
                        "/server",
                        "/usr/local/bin",
                        "/usr/lib/conductor",
                        "/etc/conductor",
                        "-type",
                        "f",
                        "-printf",
                        "%p %s\\n",
                    ])
                    .output()
                    .expect("podman runs");
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(|line| {
                        let (path, size) = line.rsplit_once(' ').unwrap();
                        (path.trim_start_matches('/').to_owned(), (size.parse().unwrap(), None))
                    })
                    .collect()
            }
            Self::Staged(root) => staged_files(root),
        }
    }

    fn config(&self) -> String {
        match self {
            Self::Built(image) => {
                let out = Command::new("podman")
                    .args([
                        "run",
                        "--rm",
                        "--entrypoint",
                        "cat",
                        image,
                        "/etc/conductor/conductor.toml",
                    ])
                    .output()
                    .expect("podman runs");
                String::from_utf8(out.stdout).unwrap()
            }
            Self::Staged(root) => std::fs::read_to_string(root.join("etc/conductor/conductor.toml")).unwrap(),
        }
    }

    /// The image's conductor as the image's user, seeing `mounted` (the test's Secrets and
    /// configuration) at the same path.
    fn command(&self, mounted: &Path) -> Command {
        match self {
            Self::Built(image) => {
                let mut command = Command::new("podman");
                // The test's temporary folder holds the Secrets' files and the configuration
                // (the harness writes it there), at the same paths inside, read-only.
                let tmp = std::env::temp_dir();
                assert!(mounted.starts_with(&tmp));
                command
                    .args([
                        "run",
                        "--rm",
                        "--read-only",
                        "--user",
                        "65532:65532",
                        "--network",
                        "host",
                    ])
                    .arg("-v")
                    .arg(format!("{0}:{0}:ro", tmp.display()))
                    .arg(image);
                command
            }
            Self::Staged(root) => {
                let tmp = mounted.join("tmp");
                std::fs::create_dir(&tmp).unwrap();
                std::fs::set_permissions(&tmp, PermissionsExt::from_mode(0o777)).unwrap();
                let mut command = Command::new("setpriv");
                command
                    .args(["--reuid=65532", "--regid=65532", "--clear-groups"])
                    .arg(root.join("usr/local/bin/conductor"))
                    .env_clear()
                    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                    .env("TMPDIR", &tmp)
                    // Where the image has its plugins (the configuration's plugin_folder).
                    .env("CONDUCTOR_PLUGIN_FOLDER", root.join("usr/lib/conductor/plugins"));
                command
            }
        }
    }
}

/// Every file under `root`, with its size and modification time.
fn staged_files(root: &Path) -> BTreeMap<String, (u64, Option<SystemTime>)> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                dirs.push(entry.path());
            } else {
                let name = entry.path().strip_prefix(root).unwrap().display().to_string();
                out.insert(name, (meta.len(), Some(meta.modified().unwrap())));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_image_serves_an_agent_with_its_bundled_plugins_and_configuration() {
    let image = Image::from_env();
    let before = image.files();
    let names: Vec<&str> = before.keys().map(String::as_str).collect();
    assert_eq!(names, IMAGE_FILES);
    let image_config = image.config();
    assert!(image_config.contains("plugin_folder = \"/usr/lib/conductor/plugins\""));

    // What the Deployment mounts: the serving certificate, the client CA, and (in-cluster) the
    // API server — here the test API server, with the auth double's reviews.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "ca");
    let (cert, key) = pki.server("serving", "conductor");
    pki.client("agent1", AGENT, &[CLUSTER1]);
    // Readable by the image's user, as a Secret volume's files are.
    for file in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::set_permissions(file.unwrap().path(), PermissionsExt::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let api = tokio::task::spawn_blocking(kube_api::KubeApi::start).await.unwrap();
    let (doubles, reviews) = auth::routes(vec![]);
    let front = api.front_with(doubles).await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::copy(&front.kubeconfig, &kubeconfig).unwrap();
    let config = image_config
        .replace(
            "/var/run/secrets/conductor/serving-cert/tls.crt",
            &cert.display().to_string(),
        )
        .replace(
            "/var/run/secrets/conductor/serving-cert/tls.key",
            &key.display().to_string(),
        )
        .replace(
            "/var/run/secrets/conductor/client-ca/ca.crt",
            &pki.ca().display().to_string(),
        )
        .replace(
            "[kubernetes]\n",
            &format!("[kubernetes]\nkubeconfig = \"{}\"\n", kubeconfig.display()),
        )
        .replace("0.0.0.0:8090", "127.0.0.1:0")
        .replace("0.0.0.0:9090", "127.0.0.1:0");
    assert!(
        !config.contains("/var/run/secrets"),
        "every mounted file is placed:\n{config}"
    );

    // The image's binary, as the image's user.
    let c = Conductor::start_command(image.command(dir.path()), &config).unwrap();
    if let Image::Staged(_) = image {
        let status = std::fs::read_to_string(format!("/proc/{}/status", c.pid())).unwrap();
        assert!(
            status.lines().any(|l| l.starts_with("Uid:") && l.contains("65532")),
            "{status}"
        );
    }

    // An agent with its client certificate gets cluster1's ManifestWork.
    let mut agent = pki.agent(&c, Some("agent1")).await;
    let mut sub = subscribe(&mut agent, "cluster1", WORKS).await.unwrap();
    publish(&mut agent, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let work = json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "web", "namespace": "cluster1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "default"}}]}},
    });
    let (code, body) = api.request(
        "POST",
        "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks",
        Some(&work),
    );
    assert_eq!(code, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    let event = sub.next_event().await.unwrap();
    assert_eq!(attr_str(&event, "ce-resourceid"), created["metadata"]["uid"].as_str());
    assert_eq!(event.source, "kube");

    // Every call was authorized with a SubjectAccessReview, which the double found well-formed.
    let sars = reviews.access_reviews();
    assert!(!sars.is_empty());
    assert!(sars.iter().all(|r| r["spec"]["user"] == AGENT), "{sars:?}");
    assert!(reviews.refused().is_empty(), "{:?}", reviews.refused());

    // Stopped cleanly, having written nothing in the image's files (it runs as a user that
    // could not; a built image runs with a read-only root filesystem, as the Deployment does).
    // SIGTERM while the agent is connected: its stream ends with OK (so it reconnects to another
    // replica) and the process exits. (Waiting for the exit off this thread, which drives the
    // agent's connection.)
    let (stopped, c) = tokio::task::spawn_blocking(move || {
        let mut c = c;
        (c.terminate(), c)
    })
    .await
    .unwrap();
    assert!(stopped.as_ref().is_ok_and(|s| s.success()), "{stopped:?}: {}", c.logs());
    assert!(
        sub.stream.message().await.unwrap().is_none(),
        "the stream ended with OK"
    );
    assert_eq!(image.files(), before);
}
