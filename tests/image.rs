//! The image: built from `deploy/Containerfile` (`CONDUCTOR_IMAGE`, run with podman, read-only)
//! or, where no container builder runs, as its build steps lay it out — `deploy/stage.sh`, which
//! the Containerfile's build stage runs, staged into `CONDUCTOR_IMAGE_ROOT` (the test command
//! does that). Its binary is started as the image's user (65532) with its bundled plugins and its
//! own `conductor.toml` — the Secrets and the API server where a Deployment would mount them —
//! and serves an agent a ManifestWork over TLS, writing nothing in the image's files. Its SBOMs
//! list the crates each shipped file is built from.

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
const IMAGE_FILES: [&str; 10] = [
    "etc/conductor/conductor.toml",
    "server",
    "usr/lib/conductor/plugins/consumer-controller.wasm",
    "usr/lib/conductor/plugins/kube.wasm",
    "usr/lib/conductor/plugins/maestro.wasm",
    "usr/local/bin/conductor",
    "usr/share/doc/conductor/sbom/conductor.cdx.json",
    "usr/share/doc/conductor/sbom/consumer-controller.cdx.json",
    "usr/share/doc/conductor/sbom/kube.cdx.json",
    "usr/share/doc/conductor/sbom/maestro.cdx.json",
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
                        "/usr/share/doc/conductor",
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
        self.read("etc/conductor/conductor.toml")
    }

    /// One of the image's files, as text.
    fn read(&self, path: &str) -> String {
        match self {
            Self::Built(image) => {
                let out = Command::new("podman")
                    .args(["run", "--rm", "--entrypoint", "cat", image])
                    .arg(format!("/{path}"))
                    .output()
                    .expect("podman runs");
                assert!(out.status.success(), "{path}: {}", String::from_utf8_lossy(&out.stderr));
                String::from_utf8(out.stdout).unwrap()
            }
            Self::Staged(root) => std::fs::read_to_string(root.join(path)).unwrap(),
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

/// The version of each crate in the workspace's lock file (the newest, where there are several).
fn locked_versions() -> BTreeMap<String, Vec<String>> {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap();
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_owned());
        } else if let (Some(v), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            versions.entry(n).or_default().push(v.trim_matches('"').to_owned());
        }
    }
    versions
}

#[test]
fn each_shipped_file_has_an_sbom_of_the_crates_it_is_built_from() {
    let image = Image::from_env();
    let locked = locked_versions();
    // (document, what it describes, crates it must list, crates it must not)
    let expected = [
        (
            "conductor",
            "conductor",
            &["h2", "rustls", "wasmtime", "tonic", "sqlx-postgres", "kube-client"][..],
            // dev-dependencies and plugins are not in the binary
            &["static-works", "tempfile", "kube-plugin"][..],
        ),
        (
            "kube",
            "kube-plugin",
            &["conductor-plugin-sdk", "wit-bindgen", "serde_json"][..],
            &["tokio", "wasmtime", "h2"][..],
        ),
        (
            "maestro",
            "maestro-plugin",
            &["conductor-plugin-sdk", "wit-bindgen"][..],
            &["tokio", "sqlx", "h2"][..],
        ),
        (
            "consumer-controller",
            "consumer-controller-plugin",
            &["conductor-plugin-sdk"][..],
            &["tokio", "h2"][..],
        ),
    ];
    for (file, described, present, absent) in expected {
        let path = format!("usr/share/doc/conductor/sbom/{file}.cdx.json");
        let bom: serde_json::Value = serde_json::from_str(&image.read(&path)).unwrap();
        assert_eq!(bom["bomFormat"], "CycloneDX", "{path}");
        assert_eq!(bom["specVersion"], "1.5", "{path}");
        assert_eq!(bom["metadata"]["component"]["name"], described, "{path}");
        assert_eq!(
            bom["metadata"]["component"]["licenses"][0]["expression"], "Apache-2.0",
            "{path}"
        );
        let components: BTreeMap<&str, Vec<&str>> =
            bom["components"]
                .as_array()
                .unwrap()
                .iter()
                .fold(BTreeMap::new(), |mut all, c| {
                    all.entry(c["name"].as_str().unwrap())
                        .or_default()
                        .push(c["version"].as_str().unwrap());
                    all
                });
        for name in present {
            let listed = components
                .get(name)
                .unwrap_or_else(|| panic!("{path} does not list {name}"));
            for version in listed {
                assert!(
                    locked[*name].iter().any(|v| v == version),
                    "{path}: {name} {version} is not in Cargo.lock"
                );
            }
        }
        for name in absent {
            assert!(
                !components.contains_key(name),
                "{path} lists {name}, which {described} is not built from"
            );
        }
        // Every crate has a license, so the document answers what the image may be shipped under.
        for c in bom["components"].as_array().unwrap() {
            assert!(
                c["licenses"].as_array().is_some_and(|l| !l.is_empty()),
                "{path}: {} has no license",
                c["name"]
            );
        }
    }
    // The patched crates are listed at the version their folder holds.
    let conductor: serde_json::Value =
        serde_json::from_str(&image.read("usr/share/doc/conductor/sbom/conductor.cdx.json")).unwrap();
    for patched in ["h2", "rustls"] {
        let c = conductor["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == patched)
            .unwrap();
        assert!(c["purl"].as_str().unwrap().contains("third_party"), "{patched}: {c}");
    }
}

#[test]
fn the_image_is_labelled_with_the_oci_annotations() {
    let containerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/Containerfile")).unwrap();
    let workspace = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")).unwrap();
    let version = workspace
        .lines()
        .find_map(|l| l.strip_prefix("version = "))
        .unwrap()
        .trim_matches('"');
    // The version a build without arguments labels the image with is the workspace's.
    assert!(
        containerfile.contains(&format!("ARG VERSION={version}\n")),
        "deploy/Containerfile: ARG VERSION is not {version}"
    );
    let labels = match Image::from_env() {
        Image::Built(image) => {
            let out = Command::new("podman")
                .args(["image", "inspect", "--format", "{{json .Labels}}", &image])
                .output()
                .expect("podman runs");
            serde_json::from_slice::<BTreeMap<String, String>>(&out.stdout).unwrap()
        }
        Image::Staged(_) => containerfile
            .lines()
            .filter_map(|l| l.trim().trim_start_matches("LABEL ").split_once('='))
            .filter(|(k, _)| k.starts_with("org.opencontainers.image."))
            .map(|(k, v)| (k.to_owned(), v.trim_end_matches(" \\").trim_matches('"').to_owned()))
            .collect(),
    };
    for key in ["source", "revision", "version", "licenses", "title", "description"] {
        let value = labels.get(&format!("org.opencontainers.image.{key}"));
        assert!(
            value.is_some_and(|v| !v.is_empty()),
            "label org.opencontainers.image.{key}: {labels:?}"
        );
    }
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert!(labels["org.opencontainers.image.source"].starts_with("https://"));
}
