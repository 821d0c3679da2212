//! A real OCI registry for the tests: the CNCF distribution server (Debian's `docker-registry`)
//! on 127.0.0.1 with TLS (a test CA) and basic auth (an htpasswd file made with `htpasswd -B`),
//! and Debian's `skopeo` to push to it as another client does. `setup-test-env.sh` installs both.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::free_port;

pub const USER: &str = "alice";
pub const PASSWORD: &str = "s3cret";

pub struct Registry {
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The CA the registry's certificate is signed by.
    pub ca: PathBuf,
    /// A Docker config file with the registry's credentials.
    pub auth_file: PathBuf,
    child: Option<Child>,
}

fn bin(var: &str, name: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(name))
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Registry {
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// A registry whose blobs are served by `store` (the `redirect` storage middleware).
    pub fn start_redirecting_to(store: &str) -> Self {
        Self::start_with(&format!(
            "middleware:\n  storage:\n    - name: redirect\n      options: {{baseurl: \"{store}\"}}\n"
        ))
    }

    /// The folder where the registry keeps what is pushed (its storage's root).
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A registry with `extra` appended to its configuration file.
    pub fn start_with(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let pki = conductor_blackbox_tests::certs::Pki::new(d, "registry-ca");
        let (cert, key) = pki.server("registry", "127.0.0.1");
        let htpasswd = run(Command::new(bin("CONDUCTOR_HTPASSWD", "htpasswd")).args(["-Bbn", USER, PASSWORD]));
        std::fs::write(d.join("htpasswd"), htpasswd).unwrap();
        let port = free_port();
        std::fs::write(
            d.join("config.yml"),
            format!(
                "version: 0.1\nlog: {{level: warn}}\nstorage: {{filesystem: {{rootdirectory: {data}}}, delete: {{enabled: true}}}}\nhttp:\n  addr: 127.0.0.1:{port}\n  tls: {{certificate: {cert}, key: {key}}}\nauth:\n  htpasswd: {{realm: test, path: {htpasswd}}}\n{extra}",
                data = d.join("data").display(),
                cert = cert.display(),
                key = key.display(),
                htpasswd = d.join("htpasswd").display(),
            ),
        )
        .unwrap();
        let auth_file = d.join("docker-config.json");
        std::fs::write(
            &auth_file,
            serde_json::json!({ "auths": { format!("127.0.0.1:{port}"): { "username": USER, "password": PASSWORD } } })
                .to_string(),
        )
        .unwrap();
        // skopeo reads the CA from a folder of *.crt files.
        std::fs::create_dir(d.join("certs.d")).unwrap();
        std::fs::copy(pki.ca(), d.join("certs.d/ca.crt")).unwrap();
        let mut registry = Self {
            ca: pki.ca(),
            auth_file,
            port,
            dir,
            child: None,
        };
        registry.start_again();
        registry
    }

    /// A cosign key pair of this registry's publisher, made on first use: (private, public).
    pub fn signing_key(&self) -> (PathBuf, PathBuf) {
        let (private, public) = (self.dir.path().join("cosign.key"), self.dir.path().join("cosign.pub"));
        if !public.exists() {
            key_pair(self.dir.path(), "cosign");
        }
        (private, public)
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `oci://127.0.0.1:<port>/<path>`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.host())
    }

    /// Stops the registry (its data stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it (again) and waits until it answers.
    pub fn start_again(&mut self) {
        let d = self.dir.path();
        let log = std::fs::File::create(d.join("registry.log")).unwrap();
        self.child = Some(
            Command::new(bin("CONDUCTOR_REGISTRY", "docker-registry"))
                .arg("serve")
                .arg(d.join("config.yml"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("docker-registry starts (scripts/setup-test-env.sh installs it)"),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
                .arg(&self.ca)
                .arg(format!("https://{}/v2/", self.host()))
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout) == "401" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the registry does not answer: {}",
                std::fs::read_to_string(d.join("registry.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Copies the OCI layout at `layout` (its only manifest) to `<path>:<tag>` with skopeo,
    /// keeping its digest.
    pub fn skopeo_push(&self, layout: &Path, path: &str, tag: &str) {
        run(Command::new(bin("CONDUCTOR_SKOPEO", "skopeo"))
            .args([
                "copy",
                "--quiet",
                "--preserve-digests",
                "--dest-creds",
                &format!("{USER}:{PASSWORD}"),
            ])
            .arg("--dest-cert-dir")
            .arg(self.dir.path().join("certs.d"))
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{path}:{tag}", self.host())));
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An OCI image layout in `dir` holding one manifest (tagged `tag`) made of `config` and
/// `layers` (media type, bytes, annotations); returns the manifest's digest.
pub fn write_layout(
    dir: &Path,
    tag: &str,
    config: (&str, &[u8]),
    layers: &[(&str, &[u8], Option<serde_json::Value>)],
) -> String {
    let digest = conductor::oci::sha256_digest;
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let put = |bytes: &[u8]| {
        let d = digest(bytes);
        std::fs::write(blobs.join(d.trim_start_matches("sha256:")), bytes).unwrap();
        d
    };
    let descriptor = |media: &str, bytes: &[u8], d: String, annotations: &Option<serde_json::Value>| {
        let mut v = serde_json::json!({ "mediaType": media, "digest": d, "size": bytes.len() });
        if let Some(a) = annotations {
            v["annotations"] = a.clone();
        }
        v
    };
    let config_digest = put(config.1);
    let layer_descriptors: Vec<serde_json::Value> = layers
        .iter()
        .map(|(media, bytes, annotations)| {
            let d = put(bytes);
            descriptor(media, bytes, d, annotations)
        })
        .collect();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptor(config.0, config.1, config_digest, &None),
        "layers": layer_descriptors,
    })
    .to_string();
    let manifest_digest = put(manifest.as_bytes());
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    std::fs::write(
        dir.join("index.json"),
        serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": manifest.len(),
                "annotations": { "org.opencontainers.image.ref.name": tag },
            }],
        })
        .to_string(),
    )
    .unwrap();
    manifest_digest
}

/// An ECDSA P-256 key pair made with openssl, as cosign's default keys are: (private key in
/// PKCS#8 PEM, public key in PEM).
pub fn key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (private, public) = (dir.join(format!("{name}.key")), dir.join(format!("{name}.pub")));
    run(Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&private));
    run(Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(&private)
        .arg("-out")
        .arg(&public));
    (private, public)
}
