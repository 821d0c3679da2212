//! Plugins, against the real binary: the example source loaded as a WebAssembly component and as
//! a native library behaves the same for agents; bad plugins fail alone; plugins reload under
//! live streams.

use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::{self, attr, attr_str};
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::{
    BASE_CONFIG, CloudEventServiceClient, Conductor, Form, LEASES, WORKS, conductor_bin, plugin_artifact, publish,
    subscribe,
};
use tonic::Code;
use tonic::transport::Channel;

/// A memory source for leases beside the plugin under test, to show the host serves it.
const LEASES_SOURCE: &str = r#"
[plugins.leases]
kind = "memory"
config = { data_types = ["coordination.k8s.io.v1.leases"] }
[routes]
leases = "leases"
"#;

/// Configuration for the example plugin, loaded in `form`, next to a memory source for leases.
fn static_works(form: Form, file: &std::path::Path, grants: &str) -> String {
    format!(
        r#"
[plugins.static]
kind = "{kind}"
file = "{file}"
grants = [{grants}]
pool_size = 2
[plugins.static.config]
announce_after_ms = 300
[plugins.static.config.clusters.cluster1.web]
generation = 3
manifests = [{{ apiVersion = "v1", kind = "ConfigMap", metadata = {{ name = "web", namespace = "default" }} }}]
[plugins.static.config.clusters.cluster2.db]
manifests = []

{LEASES_SOURCE}"#,
        kind = form.kind(),
        file = file.display(),
    )
}

const ALL_GRANTS: &str = r#""emit", "log", "timer", "kv""#;

async fn status_update(
    client: &mut CloudEventServiceClient<Channel>,
    id: &str,
    original: &str,
) -> Result<(), tonic::Status> {
    let e = events::with_id(
        events::agent_event(
            &format!("{WORKS}.status.update_request"),
            "cluster1",
            original,
            Some(serde_json::json!({"conditions": [{"type": "Applied", "status": "True"}]})),
        ),
        id,
    );
    publish(client, e).await
}

/// The memory source still answers: a lease create reaches its subscriber.
async fn memory_source_serves(client: &mut CloudEventServiceClient<Channel>, id: &str) {
    let mut sub = subscribe(client, "cluster9", LEASES).await.unwrap();
    publish(client, events::create(LEASES, "cluster9", id, id))
        .await
        .unwrap();
    assert_eq!(attr_str(&sub.next_event().await.unwrap(), "ce-resourceid"), Some(id));
}

#[tokio::test]
async fn the_example_behaves_the_same_as_component_and_native_library() {
    for form in Form::BOTH {
        let file = plugin_artifact("static-works", form);
        let c = Conductor::start(&static_works(form, &file, ALL_GRANTS)).unwrap();
        let mut client = c.client().await.unwrap();
        let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();

        // Resync: the plugin lists cluster1's work.
        publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
            .await
            .unwrap();
        let work = sub.next_event().await.unwrap();
        assert_eq!(work.r#type, format!("{WORKS}.spec.resync_response"), "{form:?}");
        assert_eq!(work.source, "static", "{form:?}");
        assert_eq!(attr(&work, "ce-resourceversion"), Some(&Attr::CeInteger(3)), "{form:?}");
        let meta: serde_json::Value = serde_json::from_str(attr_str(&work, "ce-metadata").unwrap()).unwrap();
        assert_eq!(meta["name"], "web", "{form:?}");
        let id = attr_str(&work, "ce-resourceid").unwrap().to_owned();

        // The announce timer emits the work to subscribers (the plugin's own event).
        let announced = sub.next_event().await.unwrap();
        assert_eq!(announced.r#type, format!("{WORKS}.spec.update_request"), "{form:?}");
        assert_eq!(attr_str(&announced, "ce-resourceid"), Some(id.as_str()));

        // Status goes to the plugin by originalsource; a status for a work it does not serve is
        // answered OK (as OCM's work service does), a malformed one is refused with the
        // plugin's own message.
        status_update(&mut client, &id, "static").await.unwrap();
        status_update(&mut client, "no-such-work", "static").await.unwrap();
        let bad = events::with_id(
            events::agent_event(
                &format!("{WORKS}.status.update_request"),
                "cluster1",
                "static",
                Some(serde_json::json!(["not", "a", "status"])),
            ),
            &id,
        );
        let s = publish(&mut client, bad).await.unwrap_err();
        assert_eq!(s.code(), Code::FailedPrecondition, "{form:?}");
        let body: serde_json::Value = serde_json::from_str(s.message()).unwrap();
        assert_eq!(body["ErrStatus"]["reason"], "Invalid", "{form:?}");
        assert_eq!(body["ErrStatus"]["code"], 422, "{form:?}");
        assert!(
            body["ErrStatus"]["message"]
                .as_str()
                .unwrap()
                .contains("not a ManifestBundleStatus"),
            "{form:?}: {body}"
        );
        // The plugin's log lines reach conductor's stderr, read by another thread: wait for them.
        let stored = c.wait_for_log("status of cluster1/web stored").await;
        assert!(
            stored.contains("\"plugin\":\"static\""),
            "{form:?}: log not attributed to the plugin: {stored}"
        );
        c.wait_for_log("status of unknown work no-such-work in cluster1 ignored")
            .await;
    }
}

fn chaos(form: Form, call_timeout: &str) -> String {
    format!(
        r#"
[plugins.chaos]
kind = "{kind}"
file = "{file}"
pool_size = 2
limits = {{ memory = "32MiB", call_timeout = "{call_timeout}" }}

{LEASES_SOURCE}"#,
        kind = form.kind(),
        file = plugin_artifact("misbehaving-plugin", form).display(),
    )
}

#[tokio::test]
async fn a_misbehaving_component_fails_only_its_own_calls() {
    let c = Conductor::start(&chaos(Form::Component, "1s")).unwrap();
    let mut client = c.client().await.unwrap();
    for (mode, expect) in [
        ("panic", "trapped"),
        ("trap", "trapped"),
        ("alloc", "trapped"),
        ("loop", "call timeout"),
    ] {
        let started = Instant::now();
        // The other source serves while the bad call runs.
        let bad = {
            let mut client = client.clone();
            tokio::spawn(async move { status_update(&mut client, mode, "chaos").await })
        };
        memory_source_serves(&mut client, &format!("during-{mode}")).await;
        if mode == "loop" {
            // The pool (pool_size = 2) serves the same plugin's other callers meanwhile.
            status_update(&mut client, "ok", "chaos").await.unwrap();
            assert!(!bad.is_finished(), "the looping call is still running");
        }
        let s = bad.await.unwrap().unwrap_err();
        assert_eq!(s.code(), Code::FailedPrecondition, "{mode}: {s:?}");
        let body: serde_json::Value = serde_json::from_str(s.message()).unwrap();
        assert_eq!(body["ErrStatus"]["code"], 500, "{mode}");
        let message = body["ErrStatus"]["message"].as_str().unwrap();
        assert!(message.contains(expect), "{mode}: {message}");
        if mode == "loop" {
            let took = started.elapsed();
            assert!(
                took >= Duration::from_millis(900) && took < Duration::from_secs(10),
                "{took:?}"
            );
        }
        // After: the plugin itself still serves (a fresh instance), and so does the other source.
        status_update(&mut client, "ok", "chaos").await.unwrap();
        memory_source_serves(&mut client, &format!("after-{mode}")).await;
    }
}

#[tokio::test]
async fn a_panicking_native_plugin_is_caught() {
    let c = Conductor::start(&chaos(Form::Native, "1s")).unwrap();
    let mut client = c.client().await.unwrap();
    let s = status_update(&mut client, "panic", "chaos").await.unwrap_err();
    let body: serde_json::Value = serde_json::from_str(s.message()).unwrap();
    assert_eq!(body["ErrStatus"]["code"], 500);
    assert!(
        body["ErrStatus"]["message"]
            .as_str()
            .unwrap()
            .contains("panicked on purpose"),
        "{body}"
    );
    status_update(&mut client, "ok", "chaos").await.unwrap();
    memory_source_serves(&mut client, "after-native-panic").await;
}

/// A native call that never returns keeps its thread; at `limits.max_abandoned_calls` such calls
/// the plugin's calls are refused `Unavailable` with no thread started for them, the gauge and
/// the limit's refusals count, /readyz names it, and everyone else is served.
#[tokio::test]
async fn hanging_native_calls_hold_at_most_max_abandoned_calls_threads() {
    let c = Conductor::start(&format!(
        r#"
[plugins.chaos]
kind = "native"
file = "{file}"
pool_size = 2
limits = {{ call_timeout = "200ms", max_abandoned_calls = 2 }}

{LEASES_SOURCE}"#,
        file = plugin_artifact("misbehaving-plugin", Form::Native).display(),
    ))
    .unwrap();
    let mut client = c.client().await.unwrap();
    let threads = || std::fs::read_dir(format!("/proc/{}/task", c.pid())).unwrap().count();
    for _ in 0..2 {
        let s = status_update(&mut client, "hang", "chaos").await.unwrap_err();
        assert!(s.message().contains("call timeout"), "{s:?}");
    }
    let held = threads();
    for mode in ["hang", "hang", "hang", "ok"] {
        let s = status_update(&mut client, mode, "chaos").await.unwrap_err();
        assert_eq!(s.code(), Code::Unavailable, "{mode}: {s:?}");
        assert!(
            s.message()
                .contains("2 calls still running past their call timeout (limits.max_abandoned_calls = 2)"),
            "{mode}: {}",
            s.message()
        );
    }
    assert_eq!(threads(), held, "no thread is started for a refused call");
    memory_source_serves(&mut client, "while-chaos-is-refused").await;
    let (_, metrics) = c.admin_get("/metrics").await.unwrap();
    assert!(
        metrics.contains("conductor_plugin_abandoned_calls{plugin=\"chaos\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("conductor_plugin_limit_refusals_total{limit=\"max_abandoned_calls\",plugin=\"chaos\"} 4"),
        "{metrics}"
    );
    let (code, body) = c.admin_get("/readyz").await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("chaos") && body.contains("max_abandoned_calls"), "{body}");
}

/// `conductor check-config` on a configuration with one plugin: (success, stderr).
fn check_config(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conductor.toml");
    std::fs::write(&path, format!("{BASE_CONFIG}\n{text}")).unwrap();
    let out = std::process::Command::new(conductor_bin())
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn incompatible_and_ungranted_plugins_are_refused_at_load() {
    for form in Form::BOTH {
        let file = plugin_artifact("wrong-version-plugin", form);
        let (ok, err) = check_config(&format!(
            "[plugins.future]\nkind = \"{}\"\nfile = \"{}\"\n",
            form.kind(),
            file.display()
        ));
        assert!(!ok, "{form:?}");
        assert!(
            err.contains("plugins.future") && err.contains("incompatible plugin"),
            "{form:?}: {err}"
        );

        let file = plugin_artifact("static-works", form);
        let (ok, err) = check_config(&static_works(form, &file, r#""emit", "log""#));
        assert!(!ok, "{form:?}");
        assert!(err.contains("plugins.static"), "{form:?}: {err}");
        assert!(
            err.contains("not granted") && err.contains("kv") && err.contains("timer"),
            "{form:?}: {err}"
        );

        let (ok, err) = check_config(&static_works(form, &file, ALL_GRANTS));
        assert!(ok, "{form:?}: {err}");
    }
    let (ok, err) = check_config("[plugins.x]\nkind = \"component\"\nfile = \"/nonexistent.wasm\"\n");
    assert!(
        !ok && err.contains("plugins.x") && err.contains("/nonexistent.wasm"),
        "{err}"
    );
}

#[test]
fn plugins_inspect_and_list_say_what_would_load() {
    for form in Form::BOTH {
        let file = plugin_artifact("static-works", form);
        let out = std::process::Command::new(conductor_bin())
            .args(["plugins", "inspect"])
            .arg(&file)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{form:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("name:          static-works"), "{text}");
        assert!(text.contains("sources:       static"), "{text}");
        assert!(
            text.contains(&format!(
                "contract:      conductor:plugin@{}",
                conductor_plugin_sdk::SDK_VERSION
            )),
            "{text}"
        );
        let from = match form {
            Form::Component => "read from its imports",
            Form::Native => "declared",
        };
        assert!(
            text.contains(&format!("capabilities:  emit, log, timer, kv ({from})")),
            "{text}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conductor.toml");
    let mut config = static_works(
        Form::Native,
        &plugin_artifact("static-works", Form::Native),
        r#""emit""#,
    );
    config = config.replace(
        "[plugins.leases]",
        &format!(
            "[plugins.future]\nkind = \"component\"\nfile = \"{}\"\n\n[plugins.leases]",
            plugin_artifact("wrong-version-plugin", Form::Component).display()
        ),
    );
    std::fs::write(&path, format!("{BASE_CONFIG}\n{config}")).unwrap();
    let out = std::process::Command::new(conductor_bin())
        .args(["plugins", "list", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("static: would NOT load") && text.contains("not granted"),
        "{text}"
    );
    assert!(
        text.contains("future: would NOT load") && text.contains("9.0.0"),
        "{text}"
    );
    assert!(text.contains("leases: built-in"), "{text}");
}

#[tokio::test]
async fn a_replaced_plugin_file_is_reloaded_without_dropping_streams() {
    for form in Form::BOTH {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(match form {
            Form::Component => "plugin.wasm",
            Form::Native => "plugin.so",
        });
        std::fs::copy(plugin_artifact("static-works", form), &file).unwrap();
        let (c, mut client, mut sub, _) = start_static_works(form, &file).await;
        let admin = c.admin_addr.clone().unwrap();

        // Nothing changed: nothing is replaced.
        let (code, body) = conductor_blackbox_tests::http_post(&admin, "/reload").await.unwrap();
        assert_eq!(code, 200, "{body}");
        let summary: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(summary["kept"], serde_json::json!(["leases", "static"]), "{body}");
        assert_eq!(summary["replaced"], serde_json::json!([]), "{body}");

        // A broken file: the reload is refused, the running plugin stays.
        std::fs::write(&file, b"not a plugin").unwrap();
        let (code, body) = conductor_blackbox_tests::http_post(&admin, "/reload").await.unwrap();
        assert_eq!(code, 422, "{body}");
        assert!(
            body.contains("plugins.static") && body.contains("running configuration stays"),
            "{body}"
        );
        publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
            .await
            .unwrap();
        assert_eq!(sub.next_event().await.unwrap().source, "static", "{form:?}");

        // Another plugin in its place, signalled with SIGHUP: the same stream sees the new behaviour.
        std::fs::copy(plugin_artifact("misbehaving-plugin", form), &file).unwrap();
        c.hangup();
        let line = c.wait_for_logs(r#""message":"configuration reloaded""#, 2).await;
        assert!(line.contains(r#""replaced":"[\"static\"]""#), "{line}");
        publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
            .await
            .unwrap();
        let e = sub.next_event().await.unwrap();
        assert_eq!(e.source, "chaos", "{form:?}");
        assert_eq!(attr_str(&e, "ce-resourceid"), Some("chaos-work"));
    }
}

/// The plugins of the reload test: static-works, the memory source for leases, and what `extra`
/// adds.
fn reload_config(static_grants: &str, extra: &str) -> String {
    let file = plugin_artifact("static-works", Form::Component);
    static_works(Form::Component, &file, static_grants).replace("announce_after_ms = 300", "") + extra
}

fn chaos_plugin(grants: &str) -> String {
    format!(
        "\n[plugins.chaos]\nkind = \"component\"\nfile = \"{}\"\ngrants = [{grants}]\n",
        plugin_artifact("misbehaving-plugin", Form::Component).display()
    )
}

/// The sources of the works a resync brings to `sub`, sorted.
async fn resynced_sources(
    client: &mut CloudEventServiceClient<Channel>,
    sub: &mut conductor_blackbox_tests::Sub,
    expect: usize,
) -> Vec<String> {
    publish(client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let mut sources = Vec::new();
    for _ in 0..expect {
        sources.push(sub.next_event().await.unwrap().source);
    }
    sources.sort();
    sources
}

/// Reload re-reads conductor.toml and applies the difference — a plugin added, a route moved,
/// grants changed, a plugin removed — without restarting what did not change, while an agent's
/// stream stays open; a broken configuration changes nothing.
#[tokio::test]
async fn reload_applies_what_changed_in_conductor_toml_under_a_live_stream() {
    let c = Conductor::start(&reload_config(ALL_GRANTS, "")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    assert_eq!(resynced_sources(&mut client, &mut sub, 1).await, ["static"]);
    let reloaded = r#""message":"configuration reloaded""#;

    // A plugin added, with a route of its own: resync answers from both.
    c.rewrite_config(
        &reload_config(ALL_GRANTS, &chaos_plugin(""))
            .replace("leases = \"leases\"", "leases = \"leases\"\nlegacy = \"static\""),
    );
    c.hangup();
    let line = c.wait_for_logs(reloaded, 1).await;
    assert!(line.contains(r#""added":"[\"chaos\"]""#), "{line}");
    assert!(line.contains(r#""kept":"[\"leases\", \"static\"]""#), "{line}");
    assert_eq!(resynced_sources(&mut client, &mut sub, 2).await, ["chaos", "static"]);
    // `legacy` routes to static-works, which ignores an unknown work.
    status_update(&mut client, "panic", "legacy").await.unwrap();

    // The route moved to the misbehaving plugin: the same status now reaches it.
    c.rewrite_config(
        &reload_config(ALL_GRANTS, &chaos_plugin(""))
            .replace("leases = \"leases\"", "leases = \"leases\"\nlegacy = \"chaos\""),
    );
    c.hangup();
    let line = c.wait_for_logs(reloaded, 2).await;
    assert!(
        line.contains(r#""replaced":"[]""#),
        "routes alone replace no plugin: {line}"
    );
    let s = status_update(&mut client, "panic", "legacy").await.unwrap_err();
    assert!(
        s.message().contains("panicked") || s.message().contains("trapped"),
        "{s:?}"
    );

    // Grants changed: the plugin is replaced, the others kept.
    c.rewrite_config(
        &reload_config(ALL_GRANTS, &chaos_plugin(r#""log""#))
            .replace("leases = \"leases\"", "leases = \"leases\"\nlegacy = \"chaos\""),
    );
    c.hangup();
    let line = c.wait_for_logs(reloaded, 3).await;
    assert!(line.contains(r#""replaced":"[\"chaos\"]""#), "{line}");
    assert!(line.contains(r#""kept":"[\"leases\", \"static\"]""#), "{line}");
    // Grants taken away from a plugin that needs them: refused whole, nothing changes.
    c.rewrite_config(&reload_config(r#""emit", "log""#, &chaos_plugin("")));
    c.hangup();
    let refused = c.wait_for_log("reload refused").await;
    assert!(
        refused.contains("plugins.static") && refused.contains("not granted"),
        "{refused}"
    );
    assert_eq!(resynced_sources(&mut client, &mut sub, 2).await, ["chaos", "static"]);

    // A broken configuration: refused, nothing changes.
    std::fs::write(c.config_path(), "[server]\nlisen = 1\n").unwrap();
    c.hangup();
    let refused = c.wait_for_logs("reload refused", 2).await;
    assert!(refused.contains("server.lisen"), "{refused}");
    assert_eq!(resynced_sources(&mut client, &mut sub, 2).await, ["chaos", "static"]);

    // A plugin removed (with its route): resync answers from static-works alone.
    c.rewrite_config(&reload_config(ALL_GRANTS, ""));
    c.hangup();
    let line = c.wait_for_logs(reloaded, 4).await;
    assert!(line.contains(r#""removed":"[\"chaos\"]""#), "{line}");
    assert_eq!(resynced_sources(&mut client, &mut sub, 1).await, ["static"]);
    let s = status_update(&mut client, "ok", "legacy").await.unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument, "the route is gone: {s:?}");
    memory_source_serves(&mut client, "after-reloads").await;
    // Every source went to the plugin sending it: nothing was reported routed elsewhere.
    assert!(!c.logs().contains("which routes to plugin"), "{}", c.logs());
}

#[tokio::test]
async fn kv_state_survives_a_reload() {
    let file = plugin_artifact("static-works", Form::Component);
    let (c, mut client, _sub, id) = start_static_works(Form::Component, &file).await;
    status_update(&mut client, &id, "static").await.unwrap();
    c.wait_for_log("status of cluster1/web stored").await;
    // A changed pool size replaces the plugin.
    let config = static_works(Form::Component, &file, ALL_GRANTS)
        .replace("announce_after_ms = 300", "")
        .replace("pool_size = 2", "pool_size = 3");
    c.rewrite_config(&config);
    let (code, body) = conductor_blackbox_tests::http_post(c.admin_addr.as_deref().unwrap(), "/reload")
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"replaced\": [\n    \"static\""), "{body}");
    // The reloaded plugin finds the status its predecessor stored.
    status_update(&mut client, &id, "static").await.unwrap();
    c.wait_for_log("status of cluster1/web unchanged").await;
}

/// Starts static-works (no announce timer) from `file`, subscribes to cluster1's works and
/// resyncs: returns the conductor, the client, the subscription and the served work's id.
async fn start_static_works(
    form: Form,
    file: &std::path::Path,
) -> (
    Conductor,
    CloudEventServiceClient<Channel>,
    conductor_blackbox_tests::Sub,
    String,
) {
    let config = static_works(form, file, ALL_GRANTS).replace("announce_after_ms = 300", "");
    let c = Conductor::start(&config).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let work = sub.next_event().await.unwrap();
    assert_eq!(work.source, "static", "{form:?}");
    let id = attr_str(&work, "ce-resourceid").unwrap().to_owned();
    (c, client, sub, id)
}

/// How often the epoch thread has woken in `c` so far.
fn epoch_ticks(c: &Conductor) -> u64 {
    conductor_blackbox_tests::thread_context_switches(c.pid(), "wasm-epoch")
}

/// While no component call runs the epoch thread looks every 50 ms, not every 5 ms: a host with
/// components loaded is not woken 200 times a second for nothing.
#[tokio::test]
async fn an_idle_host_is_not_woken_by_the_epoch_every_5ms() {
    let file = plugin_artifact("static-works", Form::Component);
    let (c, ..) = start_static_works(Form::Component, &file).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (idle, ticks) = (Instant::now(), epoch_ticks(&c));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ticks_per_second = (epoch_ticks(&c) - ticks) as f64 / idle.elapsed().as_secs_f64();
    println!("idle, the epoch ticked {ticks_per_second:.0} times a second");
    assert!(
        ticks_per_second < 40.0,
        "the epoch ticked {ticks_per_second:.0} times a second"
    );
}

/// Nor is a host serving a steady stream of short calls, 100 a second: a call is seldom running
/// when the epoch thread looks, so it keeps the quiet pace instead of ticking every 5 ms.
#[tokio::test]
async fn short_calls_at_a_steady_rate_do_not_make_the_epoch_tick_every_5ms() {
    let file = plugin_artifact("static-works", Form::Component);
    let (c, mut client, _sub, id) = start_static_works(Form::Component, &file).await;
    let (started, ticks, mut calls) = (Instant::now(), epoch_ticks(&c), 0);
    let mut pace = tokio::time::interval(Duration::from_millis(10));
    while started.elapsed() < Duration::from_secs(2) {
        pace.tick().await;
        status_update(&mut client, &id, "static").await.unwrap();
        calls += 1;
    }
    let ticks_per_second = (epoch_ticks(&c) - ticks) as f64 / started.elapsed().as_secs_f64();
    println!("{calls} calls in 2 s; the epoch ticked {ticks_per_second:.0} times a second");
    assert!(calls >= 100, "only {calls} calls in 2 s");
    assert!(
        ticks_per_second < 60.0,
        "the epoch ticked {ticks_per_second:.0} times a second"
    );
}

/// Two component calls looping forever (every instance of their plugin busy) hold no runtime
/// thread: they yield at every epoch tick (the first within 50 ms, then every 5 ms while they
/// run) until their deadline, so another plugin's calls on the same (two-thread) runtime go on.
/// Without the yields both threads would be stuck until the deadline, 3 s away.
#[tokio::test]
async fn endless_loops_in_components_do_not_delay_other_plugins() {
    let config = format!(
        "{}{}",
        static_works(
            Form::Component,
            &plugin_artifact("static-works", Form::Component),
            ALL_GRANTS
        )
        .replace("announce_after_ms = 300", ""),
        chaos_plugin("").replace(
            "grants = []",
            "grants = []\npool_size = 2\nlimits = { call_timeout = \"3s\", acquire_timeout = \"200ms\" }"
        )
    );
    let c = Conductor::start(&config).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let id = attr_str(&sub.next_event().await.unwrap(), "ce-resourceid")
        .unwrap()
        .to_owned();

    let loops: Vec<_> = (0..2)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move { status_update(&mut client, "loop", "chaos").await })
        })
        .collect();
    // Both loops hold an instance: the plugin's next call finds none free.
    conductor_blackbox_tests::eventually(Duration::from_secs(5), "both chaos instances looping", async || {
        status_update(&mut client.clone(), "ok", "chaos")
            .await
            .is_err_and(|s| s.code() == Code::Unavailable)
    })
    .await;
    let (mut latencies, measuring, ticks) = (Vec::new(), Instant::now(), epoch_ticks(&c));
    while latencies.len() < 100 && !loops.iter().all(|l| l.is_finished()) {
        let started = Instant::now();
        status_update(&mut client, &id, "static").await.unwrap();
        latencies.push(started.elapsed());
    }
    let ticks_per_second = (epoch_ticks(&c) - ticks) as f64 / measuring.elapsed().as_secs_f64();
    println!(
        "measured {} calls; the epoch ticked {ticks_per_second:.0} times a second",
        latencies.len()
    );
    // Every 5 ms while a call runs (200 a second).
    assert!(
        ticks_per_second > 80.0,
        "the epoch ticked {ticks_per_second:.0} times a second"
    );
    assert!(
        loops.iter().all(|l| !l.is_finished()),
        "the loops ran during the measurement"
    );
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    println!(
        "static-works status update while two calls loop: {} calls, p50 {:?}, p99 {p99:?}",
        latencies.len(),
        latencies[latencies.len() / 2]
    );
    assert!(
        p99 < Duration::from_millis(500),
        "p99 {p99:?}: the loops held the runtime"
    );
    for l in loops {
        let s = l.await.unwrap().unwrap_err();
        assert!(s.message().contains("call timeout"), "{s:?}");
    }
}

/// With every instance busy, an agent's call waits `limits.acquire_timeout` and fails as
/// `Unavailable` naming the plugin, instead of waiting forever.
#[tokio::test]
async fn a_call_finding_every_instance_busy_is_unavailable_within_the_acquire_timeout() {
    let config = format!(
        "{}{LEASES_SOURCE}",
        chaos_plugin("").replace(
            "grants = []",
            "grants = []\npool_size = 1\nlimits = { call_timeout = \"2s\", acquire_timeout = \"300ms\" }"
        )
    );
    let c = Conductor::start(&config).unwrap();
    let mut client = c.client().await.unwrap();
    let busy = {
        let mut client = client.clone();
        tokio::spawn(async move { status_update(&mut client, "loop", "chaos").await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let s = status_update(&mut client, "ok", "chaos").await.unwrap_err();
    let waited = started.elapsed();
    assert_eq!(s.code(), Code::Unavailable, "{s:?}");
    let body: serde_json::Value = serde_json::from_str(s.message()).unwrap();
    assert_eq!(body["ErrStatus"]["code"], 503);
    assert!(
        body["ErrStatus"]["message"]
            .as_str()
            .unwrap()
            .contains("\"chaos\" is busy"),
        "{body}"
    );
    assert!(
        waited >= Duration::from_millis(280) && waited < Duration::from_millis(1500),
        "{waited:?}"
    );
    assert!(!busy.is_finished());
    busy.await.unwrap().unwrap_err();
    // Free again: served.
    status_update(&mut client, "ok", "chaos").await.unwrap();
}

/// What the host keeps for a plugin is bounded (`[plugins.<name>.limits]`): a plugin that keeps
/// taking `kv` keys or bytes, timers or metric series gets an error naming the limit once it
/// reaches it (and the agent the plugin's refusal), a flood of log lines is cut to the rate, and
/// every refusal is counted. The same for a component and a native library.
#[tokio::test]
async fn a_greedy_plugin_meets_its_limits() {
    for form in [Form::Component, Form::Native] {
        let c = Conductor::start(&format!(
            r#"
[plugins.greedy]
kind = "{kind}"
file = "{file}"
grants = ["log", "timer", "kv", "metrics"]
limits = {{ kv_keys = 100, kv_bytes = "1MiB", timers = 10, log_lines_per_second = 50, metric_series = 20 }}
[routes]
greedy = "greedy"
"#,
            kind = form.kind(),
            file = plugin_artifact("greedy-plugin", form).display(),
        ))
        .unwrap();
        let mut client = c.client().await.unwrap();
        for (what, took, limit) in [
            // 64 KiB values and their keys: the 16th would pass 1 MiB.
            ("kv-bytes", "took 15 kv values", "limits.kv_bytes = 1048576"),
            // 15 keys are taken already.
            ("kv-keys", "took 85 kv keys", "limits.kv_keys = 100"),
            ("timers", "took 10 timers", "limits.timers"),
            ("metrics", "took 20 metric series", "limits.metric_series"),
        ] {
            let refused = status_update(&mut client, what, "greedy").await.unwrap_err();
            assert_eq!(refused.code(), Code::FailedPrecondition, "{form:?} {what}: {refused:?}");
            for needle in [took, limit] {
                assert!(
                    refused.message().contains(needle),
                    "{form:?} {what}: {needle:?} in {}",
                    refused.message()
                );
            }
        }
        // Lines below the log level cost nothing: a warning after 10,000 debug lines is written.
        status_update(&mut client, "debug-log", "greedy").await.unwrap();
        c.wait_for_log("greedy warning after the debug lines").await;
        assert!(
            !c.logs().contains("dropping log lines"),
            "{form:?}: nothing was dropped"
        );
        status_update(&mut client, "log", "greedy").await.unwrap();
        let dropped = c.wait_for_log("dropping log lines of the plugin").await;
        assert!(dropped.contains("\"limit\":50"), "{dropped}");
        assert_eq!(
            c.logs().matches("dropping log lines of the plugin").count(),
            1,
            "{form:?}: dropped lines are reported once per interval, with their count"
        );
        let written = c.logs().matches("greedy log line").count();
        assert!(
            (50..=60).contains(&written),
            "{form:?}: a burst of one second's worth, not 10,000: {written}"
        );

        let (_, metrics) = c.admin_get("/metrics").await.unwrap();
        let refusals = |limit: &str| -> f64 {
            let series = format!("conductor_plugin_limit_refusals_total{{limit=\"{limit}\",plugin=\"greedy\"}}");
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
                .unwrap_or(0.0)
        };
        for limit in ["kv_keys", "kv_bytes", "timers", "metric_series"] {
            assert!(refusals(limit) >= 1.0, "{form:?}: {limit} counted\n{metrics}");
        }
        assert!(refusals("log_lines_per_second") >= 9_000.0, "{form:?}\n{metrics}");
        assert!(
            metrics.contains("conductor_greedy_things{n=\"19\",plugin=\"greedy\"} 1"),
            "{form:?}: the plugin's own metric is exported\n{metrics}"
        );
    }
}

/// A second copy of a plugin that kept the first one's source (static-works twice, `static`
/// routed to `first`): the agents' status updates about the copy's works go to `first`. conductor
/// warns at start and at every reload, naming the copy, the source and the plugin it routes to;
/// warns the first time the copy sends an event with that source; and counts those events. Without
/// the copy, nothing is said.
#[tokio::test]
async fn a_plugin_whose_source_routes_to_another_plugin_is_reported_and_counted() {
    let file = plugin_artifact("static-works", Form::Component);
    let plugin = |name: &str, work: &str| {
        format!(
            "\n[plugins.{name}]\nkind = \"component\"\nfile = \"{}\"\ngrants = [{ALL_GRANTS}]\npool_size = 1\n[plugins.{name}.config.clusters.cluster1.{work}]\nmanifests = []\n",
            file.display()
        )
    };
    let c = Conductor::start(&format!(
        "{}{}\n[routes]\nstatic = \"first\"\n",
        plugin("first", "web"),
        plugin("second", "db")
    ))
    .unwrap();
    let declared = "declares source";
    let line = c.wait_for_log(declared).await;
    for field in [r#""plugin":"second""#, r#""source":"static""#, r#""routed_to":"first""#] {
        assert!(line.contains(field), "{field} in {line}");
    }
    assert_eq!(c.logs().matches(declared).count(), 1, "only the copy: {}", c.logs());
    let series = r#"conductor_plugin_foreign_source_events_total{plugin="second",routed_to="first",source="static"}"#;
    let counted = async || -> Option<f64> {
        let (_, metrics) = c.admin_get("/metrics").await.unwrap();
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    };
    assert_eq!(counted().await, Some(0.0), "the series exists from the start");

    // Both answer a resync from `static`; the copy's status update goes to `first`, which does
    // not know the work.
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let mut db = None;
    for _ in 0..2 {
        publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
            .await
            .unwrap();
        for _ in 0..2 {
            let work = sub.next_event().await.unwrap();
            assert_eq!(work.source, "static");
            let meta: serde_json::Value = serde_json::from_str(attr_str(&work, "ce-metadata").unwrap()).unwrap();
            if meta["name"] == "db" {
                db = attr_str(&work, "ce-resourceid").map(str::to_owned);
            }
        }
    }
    let db = db.expect("the copy's work");
    assert_eq!(counted().await, Some(2.0), "one event of the copy per resync");
    let sent = "sends events with source";
    let line = c.wait_for_log(sent).await;
    assert!(line.contains(r#""plugin":"second""#), "{line}");
    assert_eq!(c.logs().matches(sent).count(), 1, "logged the first time only");
    status_update(&mut client, &db, "static").await.unwrap();
    let ignored = c
        .wait_for_log(&format!("status of unknown work {db} in cluster1 ignored"))
        .await;
    assert!(ignored.contains(r#""plugin":"first""#), "{ignored}");

    // Reloaded as it is: said again.
    c.hangup();
    c.wait_for_logs(declared, 2).await;

    // Without the copy: nothing more is said, and its series go.
    let reloaded = r#""message":"configuration reloaded""#;
    c.rewrite_config(&plugin("first", "web"));
    c.hangup();
    c.wait_for_logs(reloaded, 2).await;
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    assert_eq!(sub.next_event().await.unwrap().source, "static");
    assert_eq!(c.logs().matches(declared).count(), 2, "{}", c.logs());
    assert_eq!(c.logs().matches(sent).count(), 1, "{}", c.logs());
    assert_eq!(counted().await, None);
}
