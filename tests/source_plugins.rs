//! Source plugins registered at runtime as `SourcePlugin` resources, against the real test API
//! server (with conductor's CRD from deploy/) and a real registry: two replicas load a resource's
//! plugin, both say so in its status, and an agent subscribed all along is served; a changed spec
//! is applied under the live stream; a resource asking for more than `[dynamic.max_grants]` is
//! refused in its status; a deleted one is unloaded.

#[path = "support/kube.rs"]
mod kube_api;
#[path = "support/registry.rs"]
mod registry;

use std::process::Command;
use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::{self, attr};
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::{Conductor, Form, Sub, WORKS, conductor_bin, plugin_artifact, publish, subscribe};
use kube_api::KubeApi;
use registry::Registry;
use serde_json::{Value, json};

const PATH: &str = "/apis/conductor.open-cluster-management.io/v1alpha1/sourceplugins";

/// Pushes static-works signed with the registry's key; returns its pinned reference.
fn pushed(registry: &Registry) -> String {
    push(registry, "static-works", Some(&registry.signing_key().0))
}

/// Pushes the component of `plugin` to `plugins/<plugin>`, signed with `key` if given; returns
/// its pinned reference.
fn push(registry: &Registry, plugin: &str, key: Option<&std::path::Path>) -> String {
    let mut command = Command::new(conductor_bin());
    command
        .args(["plugins", "push"])
        .arg(plugin_artifact(plugin, Form::Component))
        .arg(format!("{}:v1", registry.reference(&format!("plugins/{plugin}"))))
        .arg("--auth-file")
        .arg(&registry.auth_file)
        .arg("--ca-file")
        .arg(&registry.ca);
    if let Some(key) = key {
        command.arg("--sign-key").arg(key);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let digest = text
        .lines()
        .find_map(|l| l.strip_prefix("digest:"))
        .unwrap()
        .trim()
        .to_owned();
    format!("{}@{digest}", registry.reference(&format!("plugins/{plugin}")))
}

/// A replica watching SourcePlugins through `front`.
fn replica(name: &str, kubeconfig: &std::path::Path, registry: &Registry, cache: &std::path::Path) -> Conductor {
    Conductor::start(&replica_config(name, kubeconfig, registry, cache, "")).unwrap()
}

/// A replica's configuration; `dynamic` adds keys to its `[dynamic]` table.
fn replica_config(
    name: &str,
    kubeconfig: &std::path::Path,
    registry: &Registry,
    cache: &std::path::Path,
    dynamic: &str,
) -> String {
    format!(
        r#"
[kubernetes]
kubeconfig = "{kubeconfig}"
[dynamic]
source_plugins = true
replica = "{name}"
verify = {{ public_key_file = "{public_key}" }}
{dynamic}
[oci]
cache = "{cache}"
auth_file = "{auth}"
ca_file = "{ca}"
"#,
        kubeconfig = kubeconfig.display(),
        cache = cache.display(),
        auth = registry.auth_file.display(),
        ca = registry.ca.display(),
        public_key = registry.signing_key().1.display(),
    )
}

fn spec(file: &str, generation: i64, grants: &[&str]) -> Value {
    json!({
        "file": file,
        "sources": ["static"],
        "grants": grants,
        "pool_size": 1,
        "config": {
            "announce_after_ms": 300,
            "clusters": { "cluster1": { "web": {
                "generation": generation,
                "manifests": [{ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "web", "namespace": "default" } }],
            } } },
        },
    })
}

fn source_plugin(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "conductor.open-cluster-management.io/v1alpha1",
        "kind": "SourcePlugin",
        "metadata": { "name": name },
        "spec": spec,
    })
}

/// Waits (at most 30 s) until the entries of `replicas` in `name`'s status satisfy `ok`; returns
/// the resource.
async fn until_status(
    api: &KubeApi,
    name: &str,
    replicas: &[(&str, &Conductor)],
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = api.request("GET", &format!("{PATH}/{name}"), None);
        let resource: Value = serde_json::from_str(&body).unwrap_or_default();
        let entries = resource["status"]["replicas"].as_array().cloned().unwrap_or_default();
        let all = replicas
            .iter()
            .all(|(r, _)| entries.iter().any(|e| e["name"] == *r && ok(e)));
        if all {
            return resource;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = replicas.iter().map(|(r, c)| format!("{r}:\n{}", c.logs())).collect();
            panic!("status of {name} never as expected: {resource:#}\n{}", logs.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn condition<'a>(entry: &'a Value, kind: &str) -> &'a Value {
    entry["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// A resync of cluster1's works on `sub`: the version of the work static-works answers with.
async fn resynced_version(c: &Conductor, sub: &mut Sub) -> i64 {
    let mut client = c.client().await.unwrap();
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let e = sub.next_from("resync_response", "static").await.unwrap();
    let Some(Attr::CeInteger(v)) = attr(&e, "ce-resourceversion") else {
        panic!("no version in {e:?}")
    };
    i64::from(*v)
}

// The API server's front runs on this test's runtime: a second worker serves it while the test
// waits.
#[tokio::test(flavor = "multi_thread")]
async fn source_plugin_resources_are_loaded_by_every_replica_reported_changed_refused_and_removed() {
    let api = KubeApi::start();
    let front = api.front().await;
    let registry = Registry::start();
    let file = pushed(&registry);
    let caches = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r1 = replica("r1", &front.kubeconfig, &registry, caches.0.path());
    let r2 = replica("r2", &front.kubeconfig, &registry, caches.1.path());
    r1.wait_for_log("watching SourcePlugin resources").await;

    // An agent subscribed before anything serves its works (its resync is refused, as
    // upstream refuses a data type no service serves).
    let mut client = r1.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap_err();

    let (code, body) = api.request(
        "POST",
        PATH,
        Some(&source_plugin("works", spec(&file, 3, &["emit", "log", "timer", "kv"]))),
    );
    assert_eq!(code, 201, "{body}");
    let resource = until_status(&api, "works", &[("r1", &r1), ("r2", &r2)], |e| e["loaded"] == true).await;
    let digest = file.rsplit_once('@').unwrap().1;
    for entry in resource["status"]["replicas"].as_array().unwrap() {
        assert_eq!(entry["digest"], digest, "{entry}");
        assert_eq!(entry["observedGeneration"], 1, "{entry}");
        assert_eq!(condition(entry, "Loaded")["status"], "True", "{entry}");
        assert_eq!(condition(entry, "Admitted")["status"], "True", "{entry}");
    }
    assert_eq!(resynced_version(&r1, &mut sub).await, 3);
    let line = r1.wait_for_log("applying the SourcePlugin resources").await;
    assert!(line.contains(r#""trigger":"source-plugins""#), "{line}");

    // A changed spec is applied under the live stream, and reported at its generation.
    let mut changed = source_plugin("works", spec(&file, 4, &["emit", "log", "timer", "kv"]));
    let (_, current) = api.request("GET", &format!("{PATH}/works"), None);
    let current: Value = serde_json::from_str(&current).unwrap();
    changed["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, body) = api.request("PUT", &format!("{PATH}/works"), Some(&changed));
    assert_eq!(code, 200, "{body}");
    until_status(&api, "works", &[("r1", &r1), ("r2", &r2)], |e| {
        e["observedGeneration"] == 2 && e["loaded"] == true
    })
    .await;
    assert_eq!(resynced_version(&r1, &mut sub).await, 4);
    let mut client2 = r2.client().await.unwrap();
    let mut sub2 = subscribe(&mut client2, "cluster1", WORKS).await.unwrap();
    assert_eq!(resynced_version(&r2, &mut sub2).await, 4);

    // A new version that cannot be pulled: reported, and the running one keeps serving.
    let (_, current) = api.request("GET", &format!("{PATH}/works"), None);
    let current: Value = serde_json::from_str(&current).unwrap();
    let hex = digest.trim_start_matches("sha256:");
    let absent = file.replace(hex, &hex.chars().rev().collect::<String>());
    let mut broken = source_plugin("works", spec(&absent, 5, &["emit", "log", "timer", "kv"]));
    broken["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, body) = api.request("PUT", &format!("{PATH}/works"), Some(&broken));
    assert_eq!(code, 200, "{body}");
    let resource = until_status(&api, "works", &[("r1", &r1), ("r2", &r2)], |e| {
        e["observedGeneration"] == 3
    })
    .await;
    for entry in resource["status"]["replicas"].as_array().unwrap() {
        assert_eq!(entry["loaded"], true, "the earlier version serves: {entry}");
        assert_eq!(entry["digest"], digest, "{entry}");
        let loaded = condition(entry, "Loaded");
        assert_eq!(
            (&loaded["status"], &loaded["reason"]),
            (&json!("False"), &json!("LoadFailed")),
            "{entry}"
        );
        let message = loaded["message"].as_str().unwrap();
        assert!(
            message.contains("no such manifest") && message.contains("keeps serving"),
            "{entry}"
        );
    }
    assert_eq!(resynced_version(&r1, &mut sub).await, 4, "still the version before");

    // More than [dynamic.max_grants] allows: refused in its status by both, nothing loaded.
    let (code, body) = api.request(
        "POST",
        PATH,
        Some(&json!({
            "apiVersion": "conductor.open-cluster-management.io/v1alpha1",
            "kind": "SourcePlugin",
            "metadata": { "name": "greedy" },
            "spec": { "file": file, "sources": ["greedy"], "grants": ["emit", "pg"], "databases": ["maestro"] },
        })),
    );
    assert_eq!(code, 201, "{body}");
    let resource = until_status(&api, "greedy", &[("r1", &r1), ("r2", &r2)], |e| e["loaded"] == false).await;
    for entry in resource["status"]["replicas"].as_array().unwrap() {
        let admitted = condition(entry, "Admitted");
        assert_eq!(admitted["status"], "False", "{entry}");
        assert_eq!(admitted["reason"], "GrantsExceeded", "{entry}");
        assert!(
            admitted["message"].as_str().unwrap().contains("[\"pg\"] exceed"),
            "{entry}"
        );
    }
    assert!(!r1.logs().contains(r#""added":"[\"greedy\"]""#), "{}", r1.logs());

    // Deleted: unloaded by both; works are not served any more.
    let (code, body) = api.request("DELETE", &format!("{PATH}/works"), None);
    assert_eq!(code, 200, "{body}");
    for r in [&r1, &r2] {
        r.wait_for_log(r#""removed":"[\"works\"]""#).await;
    }
    let e = events::agent_event(
        &format!("{WORKS}.status.update_request"),
        "cluster1",
        "static",
        Some(json!({"conditions": []})),
    );
    let refused = publish(&mut client, e).await.unwrap_err();
    assert!(refused.message().contains("static"), "{refused:?}");
    let refused = publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap_err();
    assert!(refused.message().contains("failed to find service"), "{refused:?}");
}

/// Patches `name`'s spec (a JSON merge patch).
fn patch_spec(api: &KubeApi, name: &str, spec: Value) {
    let (code, body) = api.request("PATCH", &format!("{PATH}/{name}"), Some(&json!({ "spec": spec })));
    assert_eq!(code, 200, "{body}");
}

/// A refused change never takes down what serves: a spec past a ceiling, a typo in a limit's
/// name, or a ceiling lowered in conductor.toml below what a serving plugin has, each leave the
/// earlier version serving, say so in the status and a metric. A killed replica's status entry
/// is aged out by the others; a deleted plugin's series leave /metrics.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_change_keeps_the_earlier_version_serving() {
    let api = KubeApi::start();
    let front = api.front().await;
    let registry = Registry::start();
    let file = pushed(&registry);
    let caches = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let fast = "replica_timeout = \"3s\"";
    let r1_config = replica_config("r1", &front.kubeconfig, &registry, caches.0.path(), fast);
    let r1 = Conductor::start(&r1_config).unwrap();
    let mut r2 = Conductor::start(&replica_config(
        "r2",
        &front.kubeconfig,
        &registry,
        caches.1.path(),
        fast,
    ))
    .unwrap();
    let (code, body) = api.request(
        "POST",
        PATH,
        Some(&source_plugin("works", spec(&file, 3, &["emit", "log", "timer", "kv"]))),
    );
    assert_eq!(code, 201, "{body}");
    until_status(&api, "works", &[("r1", &r1), ("r2", &r2)], |e| e["loaded"] == true).await;
    let mut client = r1.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    assert_eq!(resynced_version(&r1, &mut sub).await, 3);
    let kept = |reason: &'static str| {
        move |e: &Value| {
            condition(e, "Admitted")["reason"] == reason
                && e["loaded"] == true
                && condition(e, "Loaded")["reason"] == "EarlierVersionServing"
        }
    };
    let refused_series = |reason: &str| {
        format!("conductor_source_plugin_refused{{plugin=\"works\",reason=\"{reason}\",serving=\"true\"}} 1")
    };

    // A ceiling lowered in conductor.toml below what the plugin runs with (the default
    // kv_keys): still serving, refused in its status, counted.
    r1.rewrite_config(&replica_config(
        "r1",
        &front.kubeconfig,
        &registry,
        caches.0.path(),
        &format!("{fast}\n[dynamic.max_grants]\nkv_keys = 10"),
    ));
    r1.hangup();
    let resource = until_status(&api, "works", &[("r1", &r1)], kept("LimitsExceeded")).await;
    let entry = resource["status"]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "r1")
        .unwrap()
        .clone();
    assert!(
        condition(&entry, "Admitted")["message"]
            .as_str()
            .unwrap()
            .contains("spec.limits.kv_keys: 10000 is more than the 10"),
        "{entry}"
    );
    r1.wait_for_log("the earlier version keeps serving").await;
    assert_eq!(resynced_version(&r1, &mut sub).await, 3, "still serving");
    let (_, metrics) = r1.admin_get("/metrics").await.unwrap();
    assert!(metrics.contains(&refused_series("LimitsExceeded")), "{metrics}");
    // Raised again: admitted as before.
    r1.rewrite_config(&r1_config);
    r1.hangup();
    until_status(&api, "works", &[("r1", &r1)], |e| {
        condition(e, "Admitted")["status"] == "True"
    })
    .await;

    // A spec past a ceiling, then a typo in a limit's name: refused, the earlier version serves.
    patch_spec(&api, "works", json!({ "limits": { "kv_bytes": "100GiB" } }));
    until_status(&api, "works", &[("r1", &r1), ("r2", &r2)], kept("LimitsExceeded")).await;
    assert_eq!(resynced_version(&r1, &mut sub).await, 3);
    patch_spec(&api, "works", json!({ "limits": { "kv_bytes": null, "kv_byte": 1 } }));
    until_status(&api, "works", &[("r1", &r1), ("r2", &r2)], kept("InvalidSpec")).await;
    assert_eq!(resynced_version(&r1, &mut sub).await, 3);
    let (_, metrics) = r1.admin_get("/metrics").await.unwrap();
    assert!(metrics.contains(&refused_series("InvalidSpec")), "{metrics}");
    assert!(
        metrics.contains("conductor_plugin_calls_total{call=\"list\",outcome=\"ok\",plugin=\"works\"}"),
        "{metrics}"
    );

    // A version not signed with the configured key: refused at its pull; the earlier serves.
    let unsigned = push(&registry, "flaky-plugin", None);
    patch_spec(
        &api,
        "works",
        json!({ "file": unsigned, "limits": { "kv_byte": null } }),
    );
    let pull_refused = |e: &Value| e["loaded"] == true && condition(e, "Loaded")["reason"] == "LoadFailed";
    let resource = until_status(&api, "works", &[("r1", &r1), ("r2", &r2)], pull_refused).await;
    let message = condition(&resource["status"]["replicas"][0], "Loaded")["message"].to_string();
    assert!(
        message.contains("is not signed") && message.contains("keeps serving"),
        "{message}"
    );
    assert_eq!(resynced_version(&r1, &mut sub).await, 3);
    // No key to verify with: by default ([dynamic] require_signature) every artifact is refused.
    let verify = format!(
        "verify = {{ public_key_file = \"{}\" }}\n",
        registry.signing_key().1.display()
    );
    r1.rewrite_config(&r1_config.replace(&verify, ""));
    r1.hangup();
    until_status(&api, "works", &[("r1", &r1)], kept("SignatureRequired")).await;
    assert_eq!(resynced_version(&r1, &mut sub).await, 3);

    // A replica killed (no chance to take its entries out): the other removes its entry.
    Command::new("kill")
        .args(["-KILL", &r2.pid().to_string()])
        .status()
        .unwrap();
    let _ = r2.terminate();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = api.request("GET", &format!("{PATH}/works"), None);
        let resource: Value = serde_json::from_str(&body).unwrap();
        let names: Vec<Value> = resource["status"]["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].clone())
            .collect();
        if names == [json!("r1")] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "r2's entry stays: {resource:#}\n{}",
            r1.logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    r1.wait_for_log("removing the status entry of a replica that stopped renewing it")
        .await;

    // Deleted: its series leave /metrics.
    let (code, body) = api.request("DELETE", &format!("{PATH}/works"), None);
    assert_eq!(code, 200, "{body}");
    r1.wait_for_log(r#""removed":"[\"works\"]""#).await;
    let (_, metrics) = r1.admin_get("/metrics").await.unwrap();
    assert!(!metrics.contains("plugin=\"works\""), "{metrics}");
}
