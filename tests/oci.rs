//! Plugins from an OCI registry, against a real one (the CNCF distribution server with TLS and
//! basic auth): pushed with `conductor plugins push` (signed; refused, saying why, without the
//! registry's CA or with a file that is not WebAssembly) and by skopeo, signed by conductor and
//! independently with openssl over cosign's payload; loaded by digest and serving an agent, its
//! reference and digests shown by `conductor inspect plugins`, restarted from the cache with the
//! registry down (the log saying the registry was not contacted); and everything that must be
//! refused — a tag without digest, a digest the registry lacks, an unsigned or wrongly signed or
//! tampered artifact, a registry that is down — refused with the reason while the running plugin
//! serves.

#[path = "support/blob_store.rs"]
mod blob_store;
#[path = "support/registry.rs"]
mod registry;

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use blob_store::{BlobStore, Serving};
use conductor_blackbox_tests::events::{self, attr_str};
use conductor_blackbox_tests::{
    Conductor, Form, Sub, WORKS, conductor_bin, http_post, plugin_artifact, publish, subscribe,
};
use registry::{Registry, key_pair, write_layout};

fn component() -> std::path::PathBuf {
    plugin_artifact("static-works", Form::Component)
}

/// Runs `conductor <args>`: (success, stdout + stderr).
fn conductor(args: &[&str]) -> (bool, String) {
    let out = Command::new(conductor_bin()).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `conductor plugins push` of static-works to `<path>:<tag>`, signed with `key` if given;
/// returns the digest.
fn push(registry: &Registry, path: &str, tag: &str, key: Option<&Path>) -> String {
    push_file(registry, &component(), path, tag, key)
}

fn push_file(registry: &Registry, file: &Path, path: &str, tag: &str, key: Option<&Path>) -> String {
    let reference = format!("{}:{tag}", registry.reference(path));
    let (auth, ca) = (
        registry.auth_file.display().to_string(),
        registry.ca.display().to_string(),
    );
    let file = file.display().to_string();
    let mut args = vec![
        "plugins",
        "push",
        &file,
        &reference,
        "--auth-file",
        &auth,
        "--ca-file",
        &ca,
    ];
    let key = key.map(|k| k.display().to_string());
    if let Some(k) = &key {
        args.extend(["--sign-key", k]);
    }
    let (ok, out) = conductor(&args);
    assert!(ok, "{out}");
    let digest = out
        .lines()
        .find_map(|l| l.strip_prefix("digest:"))
        .unwrap_or_else(|| panic!("no digest in {out}"))
        .trim()
        .to_owned();
    assert!(
        out.contains(&format!(
            "load it with: file = \"{}@{digest}\"",
            registry.reference(path)
        )),
        "{out}"
    );
    digest
}

/// The plugin `works` (static-works, as every example configures it) from `file`, verified with
/// `public_key` if given, pulled with the registry's credentials into `cache`.
fn config(registry: &Registry, file: &str, public_key: Option<&Path>, cache: &Path) -> String {
    let verify = public_key
        .map(|k| format!("verify = {{ public_key_file = \"{}\" }}\n", k.display()))
        .unwrap_or_default();
    format!(
        r#"
[oci]
cache = "{cache}"
auth_file = "{auth}"
ca_file = "{ca}"
timeout = "3s"

[plugins.works]
kind = "component"
file = "{file}"
{verify}grants = ["emit", "log", "timer", "kv"]
pool_size = 1
[plugins.works.config]
announce_after_ms = 300
[plugins.works.config.clusters.cluster1.web]
generation = 3
manifests = [{{ apiVersion = "v1", kind = "ConfigMap", metadata = {{ name = "web", namespace = "default" }} }}]
"#,
        cache = cache.display(),
        auth = registry.auth_file.display(),
        ca = registry.ca.display(),
    )
}

/// `conductor check-config` of `config` (the harness's base configuration and it): (success,
/// output).
fn check(config: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conductor.toml");
    std::fs::write(&file, format!("{}\n{config}", conductor_blackbox_tests::BASE_CONFIG)).unwrap();
    conductor(&["check-config", &file.display().to_string()])
}

/// A resync of cluster1's works answers the configured work from static-works.
async fn served(c: &Conductor) {
    let mut client = c.client().await.unwrap();
    let mut sub: Sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let e = sub.next_from("resync_response", "static").await.unwrap();
    assert!(attr_str(&e, "ce-resourceid").is_some(), "{e:?}");
}

#[tokio::test]
async fn a_signed_plugin_pushed_to_a_registry_loads_by_digest_serves_and_restarts_from_the_cache() {
    let mut registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(keys.path(), "cosign");

    // Without --ca-file the registry's certificate (of the test CA) is not trusted: the push says
    // so and names the option; a file that is not WebAssembly is refused in one line.
    let (tagged, auth) = (
        format!("{}:v1", registry.reference("conductor/static-works")),
        registry.auth_file.display().to_string(),
    );
    let file = component().display().to_string();
    let (ok, out) = conductor(&["plugins", "push", &file, &tagged, "--auth-file", &auth]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "registry {}: TLS: the registry's certificate is not trusted (UnknownIssuer); pass the CA that signed it with --ca-file",
            registry.host()
        )),
        "{out}"
    );
    assert!(!out.contains("cannot log in"), "{out}");
    let scratch = tempfile::tempdir().unwrap();
    let text = scratch.path().join("plugin.txt");
    std::fs::write(&text, "hello world\n").unwrap();
    let ca = registry.ca.display().to_string();
    let text_file = text.display().to_string();
    let (ok, out) = conductor(&[
        "plugins",
        "push",
        &text_file,
        &tagged,
        "--auth-file",
        &auth,
        "--ca-file",
        &ca,
    ]);
    assert!(!ok, "{out}");
    assert_eq!(
        out.trim(),
        format!(r#"error: {text_file} is not a plugin: not a WebAssembly component (it starts with "hello wo")"#),
        "one line"
    );

    let digest = push(&registry, "conductor/static-works", "v1", Some(&private));
    let pinned = format!("{}@{digest}", registry.reference("conductor/static-works"));
    let cache = tempfile::tempdir().unwrap();

    let c = Conductor::start(&config(&registry, &pinned, Some(&public), cache.path())).unwrap();
    let line = c.wait_for_log("plugin artifact pulled").await;
    assert!(line.contains(r#""signed":true"#), "{line}");
    served(&c).await;
    // The inspector shows the reference and the digests it runs, as JSON and as a table.
    let (_, plugins) = c.admin_get("/inspect/plugins").await.unwrap();
    let plugins: serde_json::Value = serde_json::from_str(&plugins).unwrap();
    let oci = &plugins[0]["oci"];
    assert_eq!(
        (&oci["reference"], &oci["digest"]),
        (&pinned.as_str().into(), &digest.as_str().into()),
        "{plugins}"
    );
    assert_eq!(oci["from_cache"], false, "{plugins}");
    assert_eq!(plugins[0]["digest"], digest.as_str(), "{plugins}");
    let admin = format!("http://{}", c.admin_addr.as_deref().unwrap());
    let (ok, table) = conductor(&["inspect", "plugins", "--admin", &admin]);
    assert!(ok, "{table}");
    let component_digest = oci["component_digest"].as_str().unwrap();
    assert!(
        table.contains(&format!("works: {pinned} (component {component_digest})")),
        "{table}"
    );
    drop(c);

    // `plugins pull` describes it without loading it.
    let pulled = tempfile::tempdir().unwrap();
    let (ok, out) = conductor(&[
        "plugins",
        "pull",
        &pinned,
        "--verify-key",
        &public.display().to_string(),
        "--cache",
        &pulled.path().display().to_string(),
        "--auth-file",
        &registry.auth_file.display().to_string(),
        "--ca-file",
        &registry.ca.display().to_string(),
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("name:          static-works"), "{out}");
    assert!(out.contains("signature:     verified with the key sha256:"), "{out}");
    assert!(out.contains("org.opencontainers.image.version=0.1.0"), "{out}");

    // The registry down: a restart loads what it pulled before from the cache.
    registry.stop();
    let c = Conductor::start(&config(&registry, &pinned, Some(&public), cache.path())).unwrap();
    served(&c).await;
    assert!(
        !c.logs().contains("plugin artifact pulled"),
        "not pulled again: {}",
        c.logs()
    );
    assert!(
        c.logs().contains(&format!(
            "plugin works: loaded {pinned} from the cache; the registry was not contacted"
        )),
        "{}",
        c.logs()
    );
    let (_, plugins) = c.admin_get("/inspect/plugins").await.unwrap();
    assert!(plugins.contains(r#""from_cache":true"#), "{plugins}");
}

#[tokio::test]
async fn what_is_not_pinned_not_there_unsigned_or_signed_by_another_key_is_refused_and_the_running_plugin_serves_on() {
    let mut registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(keys.path(), "cosign");
    let (_, other_public) = key_pair(keys.path(), "other");
    let signed = push(&registry, "conductor/signed", "v1", Some(&private));
    // Another component, so that its digest is another (the same bytes pushed twice in one second
    // are the same artifact, signed or not).
    let other_component = plugin_artifact("misbehaving-plugin", Form::Component);
    let unsigned = push_file(&registry, &other_component, "conductor/unsigned", "v1", None);
    let at = |path: &str, digest: &str| format!("{}@{digest}", registry.reference(path));
    let fresh = || tempfile::tempdir().unwrap();
    // A well-formed digest the registry does not have.
    let absent = format!(
        "sha256:{}",
        signed.trim_start_matches("sha256:").chars().rev().collect::<String>()
    );

    let refused =
        |file: &str, key: Option<&Path>, reason: &'static str| (config(&registry, file, key, fresh().path()), reason);
    let cases = [
        refused(
            &format!("{}:v1", registry.reference("conductor/signed")),
            None,
            "is not pinned by digest",
        ),
        refused(
            &at("conductor/signed", &absent),
            None,
            "the registry has no such manifest",
        ),
        refused(
            &at("conductor/unsigned", &unsigned),
            Some(&public),
            "is not signed: the repository has no sha256-",
        ),
        refused(
            &at("conductor/signed", &signed),
            Some(&other_public),
            "the signature does not verify with the public key",
        ),
    ];
    for (config, reason) in &cases {
        let (ok, out) = check(config);
        assert!(!ok, "accepted: {config}\n{out}");
        assert!(
            out.contains("plugins.works.file: ") && out.contains(reason),
            "want {reason}:\n{out}"
        );
    }
    // Without credentials, the registry refuses.
    let anonymous = config(&registry, &at("conductor/signed", &signed), None, fresh().path())
        .replace(&format!("auth_file = \"{}\"\n", registry.auth_file.display()), "");
    let (ok, out) = check(&anonymous);
    assert!(!ok && out.contains(&format!("registry {}", registry.host())), "{out}");

    // A running plugin stays when the next one cannot be had.
    let cache = fresh();
    let c = Conductor::start(&config(
        &registry,
        &at("conductor/signed", &signed),
        Some(&public),
        cache.path(),
    ))
    .unwrap();
    served(&c).await;
    let admin = c.admin_addr.clone().unwrap();
    c.rewrite_config(&config(
        &registry,
        &at("conductor/unsigned", &unsigned),
        Some(&public),
        cache.path(),
    ));
    let (code, body) = http_post(&admin, "/reload").await.unwrap();
    assert_ne!(code, 200, "{body}");
    assert!(body.contains("is not signed"), "{body}");
    served(&c).await;
    let unsigned_ref = at("conductor/unsigned", &unsigned);
    registry.stop();
    c.rewrite_config(&config(&registry, &unsigned_ref, None, cache.path()));
    let (code, body) = http_post(&admin, "/reload").await.unwrap();
    assert_ne!(code, 200, "signed {signed} unsigned {unsigned}: {body}\n{}", c.logs());
    assert!(body.contains(&format!("registry {}", registry.host())), "{body}");
    served(&c).await;
}

/// cosign's simple-signing payload for `digest` in `repository`, written here independently of
/// conductor's code.
fn cosign_payload(repository: &str, digest: &str) -> Vec<u8> {
    format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{repository}"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    )
    .into_bytes()
}

/// The base64 of openssl's ECDSA signature (SHA-256, DER) over `payload` with `private`.
fn openssl_sign(private: &Path, payload: &[u8], scratch: &Path) -> String {
    let file = scratch.join("payload.json");
    std::fs::write(&file, payload).unwrap();
    let out = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(private)
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    base64::engine::general_purpose::STANDARD.encode(&out.stdout)
}

/// Pushes, with skopeo, a signature layout for the artifact `digest` of `path`: `payload` in a
/// simple-signing layer annotated with `signature`.
fn push_signature(registry: &Registry, path: &str, digest: &str, payload: &[u8], signature: &str) {
    let layout = tempfile::tempdir().unwrap();
    let tag = format!("{}.sig", digest.replacen(':', "-", 1));
    let config = br#"{"architecture":"","config":{},"created":"0001-01-01T00:00:00Z","os":"","rootfs":{"type":"layers","diff_ids":[]}}"#;
    write_layout(
        layout.path(),
        &tag,
        ("application/vnd.oci.image.config.v1+json", config),
        &[(
            "application/vnd.dev.cosign.simplesigning.v1+json",
            payload,
            Some(serde_json::json!({ "dev.cosignproject.cosign/signature": signature })),
        )],
    );
    registry.skopeo_push(layout.path(), path, &tag);
}

#[tokio::test]
async fn an_artifact_pushed_by_skopeo_with_a_signature_made_by_openssl_verifies_and_a_tampered_one_does_not() {
    let registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(keys.path(), "cosign");
    let wasm = std::fs::read(component()).unwrap();
    let layout = tempfile::tempdir().unwrap();
    let layer_digest = conductor::oci::sha256_digest(&wasm);
    let config = format!(r#"{{"architecture":"wasm","os":"wasip2","layerDigests":["{layer_digest}"]}}"#);
    let digest = write_layout(
        layout.path(),
        "v1",
        ("application/vnd.wasm.config.v0+json", config.as_bytes()),
        &[("application/wasm", &wasm, None)],
    );
    registry.skopeo_push(layout.path(), "others/static-works", "v1");
    let pinned = format!("{}@{digest}", registry.reference("others/static-works"));

    // Unsigned, it loads without a key.
    let (ok, out) = check(&self::config(
        &registry,
        &pinned,
        None,
        tempfile::tempdir().unwrap().path(),
    ));
    assert!(ok, "{out}");

    // Signed with openssl over cosign's payload: verifies.
    let payload = cosign_payload(&format!("{}/others/static-works", registry.host()), &digest);
    let signature = openssl_sign(&private, &payload, keys.path());
    push_signature(&registry, "others/static-works", &digest, &payload, &signature);
    let (ok, out) = check(&self::config(
        &registry,
        &pinned,
        Some(&public),
        tempfile::tempdir().unwrap().path(),
    ));
    assert!(ok, "{out}");

    // The same signature over a payload changed by one byte: refused.
    let mut tampered = payload.clone();
    let at = tampered.len() - 2;
    tampered.insert(at, b' ');
    push_signature(&registry, "others/static-works", &digest, &tampered, &signature);
    let (ok, out) = check(&self::config(
        &registry,
        &pinned,
        Some(&public),
        tempfile::tempdir().unwrap().path(),
    ));
    assert!(!ok, "{out}");
    assert!(
        out.contains("the signature does not verify with the public key"),
        "{out}"
    );

    // A valid signature of another artifact's digest: refused too.
    let other = cosign_payload(&format!("{}/others/static-works", registry.host()), &layer_digest);
    let signed_other = openssl_sign(&private, &other, keys.path());
    push_signature(&registry, "others/static-works", &digest, &other, &signed_other);
    let (ok, out) = check(&self::config(
        &registry,
        &pinned,
        Some(&public),
        tempfile::tempdir().unwrap().path(),
    ));
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("the signature is for \"{layer_digest}\"")),
        "{out}"
    );
}

/// The component's descriptor size in the registry: static-works' bytes.
fn component_size() -> u64 {
    std::fs::metadata(component()).unwrap().len()
}

/// Blobs left in a cache folder, finished or not.
fn cached_blobs(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache.join("blobs/sha256"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

// Multi-threaded: the store serves while the test waits for conductor's commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_follows_a_few_redirects_to_a_blob_store_and_refuses_whatever_is_larger_than_declared_or_allowed() {
    let scratch = tempfile::tempdir().unwrap();
    let store = BlobStore::start(scratch.path()).await;
    let registry = Registry::start_redirecting_to(&store.base_url());
    store.serve_from(&registry.storage());
    let cas = scratch.path().join("cas.pem");
    let bundle = [std::fs::read(&registry.ca).unwrap(), std::fs::read(store.ca()).unwrap()].concat();
    std::fs::write(&cas, bundle).unwrap();
    let digest = push(&registry, "plugins/static-works", "v1", None);
    let pinned = format!("{}@{digest}", registry.reference("plugins/static-works"));
    let with = |oci: &str, cache: &Path| {
        config(&registry, &pinned, None, cache)
            .replace(
                &format!("ca_file = \"{}\"", registry.ca.display()),
                &format!("ca_file = \"{}\"", cas.display()),
            )
            .replace("[oci]\n", &format!("[oci]\n{oci}"))
    };

    // The registry sends the component to its store, which may redirect again: up to 3
    // redirects in all are followed, and the store never sees the registry's credentials.
    for hops in [0, 2] {
        store.set_hops(hops);
        store.forget_requests();
        let (ok, out) = check(&with("", tempfile::tempdir().unwrap().path()));
        assert!(ok, "{} redirect(s): {out}", hops + 1);
        let requests = store.requests();
        assert_eq!(requests.len(), hops + 1, "{requests:?}");
        assert!(requests.iter().all(|(_, authorized)| !authorized), "{requests:?}");
    }
    let cache = scratch.path().join("cache");
    store.set_hops(3);
    let (ok, out) = check(&with("", &cache));
    assert!(!ok, "{out}");
    assert!(out.contains("redirected 4 times: conductor follows at most 3"), "{out}");
    store.set_hops(0);

    // A store that sends more than the manifest declares is refused on its Content-Length or on
    // the bytes received, and nothing of it stays in the cache.
    let size = component_size();
    store.set_serving(Serving::LongerAnnounced);
    let (ok, out) = check(&with("", &cache));
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "is {} bytes (Content-Length), more than the {size} bytes its manifest declares",
            size + 1
        )),
        "{out}"
    );
    store.set_serving(Serving::LongerUnannounced);
    let (ok, out) = check(&with("", &cache));
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "sent more than the {size} bytes its manifest declares: refused after"
        )),
        "{out}"
    );
    assert_eq!(cached_blobs(&cache), Vec::<String>::new(), "no partial blob is left");
    store.set_serving(Serving::Honestly);

    // A component larger than [oci] max_plugin_size is refused before a byte of it is asked for.
    store.forget_requests();
    let (ok, out) = check(&with("max_plugin_size = \"64KiB\"\n", &cache));
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "is {size} bytes (its manifest says), more than the 65536 bytes a plugin may have ([oci] max_plugin_size)"
        )),
        "{out}"
    );
    assert_eq!(store.requests(), vec![], "nothing is downloaded");
    let (ok, out) = check(&with("", &cache));
    assert!(ok, "the same cache pulls it whole: {out}");
    assert_eq!(cached_blobs(&cache).len(), 1, "{:?}", cached_blobs(&cache));
}
