//! A plugin author's first hour, as a new user goes through it, once per language: `conductor
//! plugins new NAME --lang rust|python|js --sdk-path <repo>/plugin-sdk` writes a project outside
//! the repository; its `build.sh` builds it and passes its unit tests as generated; `conductor
//! plugins test plugin-test.toml` replays the scripted agent conversation against the built
//! component and reports every call as expected — and fails, naming the difference, on a script
//! expecting something else; then `conductor serve` with the project's own `conductor.toml`
//! serves an agent: its resync gets the configured work, its status update is kept in the
//! plugin's `kv` (seen through `/inspect/plugins/<name>`), a malformed one is refused; and a
//! second copy of the plugin, configured with a source of its own (`config.source`) and routed to
//! it, gets its own agents' status updates, with no source reported routed to another plugin.
//!
//! The Python and JavaScript builds use the pinned componentize-py, componentize-js and rolldown
//! that `scripts/build-polyglot-plugins.sh` installs (scripts/test.sh runs it first); the Rust
//! build shares the workspace's target folder, so it compiles the SDK and the plugin only.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use conductor_blackbox_tests::events::{self, attr_str};
use conductor_blackbox_tests::{
    Conductor, Form, WORKS, conductor_bin, plugin_artifact, polyglot_artifact, publish, subscribe,
};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The target folder the test binaries (and conductor) were built in.
fn target_dir() -> PathBuf {
    conductor_bin()
        .parent()
        .and_then(Path::parent)
        .expect("the target folder")
        .to_owned()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `command` in `dir`; panics with its output unless it succeeds (when `ok`) or fails.
fn run(dir: &Path, command: &mut Command, ok: bool) -> String {
    let out = command
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let printed = text(&out);
    assert_eq!(out.status.success(), ok, "{command:?} in {}:\n{printed}", dir.display());
    printed
}

/// The project's conductor.toml, on ports of the system's choosing and logging JSON (what the
/// harness reads its addresses from); everything else, the plugin's table included, as
/// generated.
fn on_free_ports(config: &Path) {
    let generated = std::fs::read_to_string(config).unwrap();
    let changed = generated
        .replace("listen = \"127.0.0.1:8090\"", "listen = \"127.0.0.1:0\"")
        .replace("listen = \"127.0.0.1:9090\"", "listen = \"127.0.0.1:0\"")
        .replace("format = \"human\"", "format = \"json\"");
    assert_eq!(changed.matches("127.0.0.1:0").count(), 2, "{generated}");
    assert!(changed.contains("format = \"json\""), "{generated}");
    std::fs::write(config, changed + "\n[reload]\nwatch = false\n").unwrap();
}

async fn new_build_test_serve(lang: &str) {
    let name = format!("hello-{lang}");
    let work = tempfile::tempdir().unwrap();
    let project = work.path().join(&name);

    // 1. A new project, outside the repository.
    let printed = run(
        work.path(),
        Command::new(conductor_bin())
            .args(["plugins", "new", &name, "--lang", lang, "--sdk-path"])
            .arg(repo().join("plugin-sdk")),
        true,
    );
    assert!(
        printed.contains("./build.sh") && printed.contains("plugins test plugin-test.toml"),
        "{printed}"
    );
    for file in [
        "build.sh",
        "conductor.toml",
        "plugin-test.toml",
        "README.md",
        ".gitignore",
    ] {
        assert!(project.join(file).is_file(), "{lang}: no {file}");
    }

    // 2. It builds, and passes its unit tests, as generated.
    let built = run(&project, &mut Command::new("./build.sh"), true);
    let wasm = project.join(format!("{}.wasm", name.replace('-', "_")));
    assert!(wasm.is_file(), "{lang}: no {} after:\n{built}", wasm.display());
    let passed = match lang {
        "rust" => "test result: ok. 5 passed",
        "python" => "Ran 5 tests",
        _ => "# pass 5",
    };
    assert!(built.contains(passed), "{lang}: its unit tests:\n{built}");

    // 3. The real component replays the scripted conversation: every answer as expected.
    let replayed = run(
        &project,
        Command::new(conductor_bin()).args(["plugins", "test", "plugin-test.toml"]),
        true,
    );
    for expected in [
        "1. resync cluster1 io.open-cluster-management.works.v1alpha1.manifestbundles",
        "→ ok: 1 event",
        "spec.create_request web resourceid=",
        "kv     set   status/cluster1/web",
        "log    info  status of cluster1/web stored",
        "→ error invalid: status of cluster1/",
        "kv     del   status/cluster1/web",
        "cluster1/web deleted by its agent",
        "4 steps, 4 as expected",
    ] {
        assert!(replayed.contains(expected), "{lang}: no {expected:?} in\n{replayed}");
    }
    assert_eq!(replayed.matches("✓ as expected").count(), 4, "{replayed}");

    // … and a script expecting otherwise fails, saying how the answers differ.
    let script = std::fs::read_to_string(project.join("plugin-test.toml")).unwrap();
    let wrong = script
        .replace(
            "expect = { names = [\"web\"], kv_keys = [] }",
            "expect = { names = [\"db\"] }",
        )
        .replace(
            "expect = { error = \"invalid\", message = \"is not JSON\" }",
            "expect = {}",
        );
    assert_ne!(wrong, script);
    std::fs::write(project.join("wrong-test.toml"), wrong).unwrap();
    let out = Command::new(conductor_bin())
        .args(["plugins", "test", "wrong-test.toml"])
        .current_dir(&project)
        .output()
        .unwrap();
    let reported = text(&out);
    assert_eq!(out.status.code(), Some(1), "{lang}: {reported}");
    for expected in [
        "✗ expected the events [\"db\"], got [\"web\"]",
        "✗ expected success, got invalid: status of cluster1/",
        "4 steps, 2 as expected, 2 not",
        "wrong-test.toml: a call answered otherwise than the script expects",
    ] {
        assert!(reported.contains(expected), "{lang}: no {expected:?} in\n{reported}");
    }

    // 4. conductor serves an agent with the project's own configuration, beside a second copy
    // of the plugin (the same file) with a source of its own, both sources routed.
    let config = project.join("conductor.toml");
    on_free_ports(&config);
    let copy = format!("{name}-2");
    let copy_tables = format!(
        r#"
[plugins.{copy}]
kind = "component"
file = "./{wasm}"
grants = ["log", "kv"]
[plugins.{copy}.config]
source = "{copy}"
[plugins.{copy}.config.clusters.cluster2.db]
manifests = []
[routes]
"{name}" = "{name}"
"{copy}" = "{copy}"
"#,
        wasm = wasm.file_name().unwrap().to_str().unwrap(),
    );
    std::fs::write(&config, std::fs::read_to_string(&config).unwrap() + &copy_tables).unwrap();
    let c = Conductor::start_file(&config).unwrap();
    let mut agent = c.client().await.unwrap();
    let mut sub = subscribe(&mut agent, "cluster1", WORKS).await.unwrap();
    publish(&mut agent, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let served = sub.next_event().await.unwrap();
    assert_eq!(served.source, name);
    assert_eq!(served.r#type, format!("{WORKS}.spec.resync_response"));
    let meta: Value = serde_json::from_str(attr_str(&served, "ce-metadata").unwrap()).unwrap();
    assert_eq!((&meta["name"], &meta["namespace"]), (&json!("web"), &json!("cluster1")));
    let id = attr_str(&served, "ce-resourceid").unwrap().to_owned();
    let status = |data: Value| {
        events::with_id(
            events::agent_event(&format!("{WORKS}.status.update_request"), "cluster1", &name, Some(data)),
            &id,
        )
    };
    let applied = json!({"conditions": [{"type": "Applied", "status": "True"}]});
    publish(&mut agent, status(applied.clone())).await.unwrap();
    let refused = publish(&mut agent, status(json!(["not", "a", "status"])))
        .await
        .unwrap_err();
    assert!(refused.message().contains("is not a status"), "{lang}: {refused:?}");
    let (code, body) = c.admin_get(&format!("/inspect/plugins/{name}")).await.unwrap();
    assert_eq!(code, 200, "{body}");
    let detail: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(detail["kv"]["entries"][0]["key"], "status/cluster1/web", "{detail}");
    let kept: Value = serde_json::from_str(detail["kv"]["entries"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(kept, applied, "{lang}: the agent's status, as it sent it");
    assert_eq!(detail["calls"]["errors"], 1, "{detail}");

    // The copy sends its works from its own source, so its agents' status updates reach it.
    let mut sub = subscribe(&mut agent, "cluster2", WORKS).await.unwrap();
    publish(&mut agent, events::resync_request(WORKS, "cluster2", &[]))
        .await
        .unwrap();
    let served = sub.next_event().await.unwrap();
    assert_eq!(served.source, copy, "{lang}");
    let id = attr_str(&served, "ce-resourceid").unwrap().to_owned();
    let update = events::agent_event(
        &format!("{WORKS}.status.update_request"),
        "cluster2",
        &copy,
        Some(applied.clone()),
    );
    publish(&mut agent, events::with_id(update, &id)).await.unwrap();
    let (_, body) = c.admin_get(&format!("/inspect/plugins/{copy}")).await.unwrap();
    let detail: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        detail["kv"]["entries"][0]["key"], "status/cluster2/db",
        "{lang}: {detail}"
    );
    assert!(
        !c.logs().contains("which routes to plugin"),
        "{lang}: no source routes elsewhere:\n{}",
        c.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_plugin_from_plugins_new_builds_passes_plugins_test_and_serves() {
    new_build_test_serve("rust").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_plugin_from_plugins_new_builds_passes_plugins_test_and_serves() {
    new_build_test_serve("python").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_plugin_from_plugins_new_builds_passes_plugins_test_and_serves() {
    new_build_test_serve("js").await;
}

/// A script that cannot be replayed names the file, the key and the reason, and nothing loads.
#[test]
fn a_bad_script_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("t.toml");
    std::fs::write(
        &script,
        "[plugin]\nname = \"x\"\nkind = \"component\"\nfile = \"x.wasm\"\n[[step]]\ncall = \"resinc\"\n",
    )
    .unwrap();
    let out = Command::new(conductor_bin())
        .args(["plugins", "test"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out);
    assert!(err.contains("t.toml: step[0].call: unknown variant `resinc`"), "{err}");
    std::fs::write(
        &script,
        "[plugin]\nname = \"x\"\nkind = \"component\"\nfile = \"x.wasm\"\n[[step]]\ncall = \"resync\"\n",
    )
    .unwrap();
    let out = Command::new(conductor_bin())
        .args(["plugins", "test"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("x.wasm: cannot read"), "{}", text(&out));
}

/// `plugins test` with the plugin's table inline, on a native library: a timer the script fires
/// makes the plugin emit (recorded, counted against `emitted`), a status is kept; a component that
/// imports a capability `plugins test` does not fake (`pg`) is refused, saying so.
#[test]
fn plugins_test_fires_timers_counts_emitted_events_and_refuses_what_it_cannot_fake() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("static-test.toml");
    let native = plugin_artifact("static-works", Form::Native);
    std::fs::write(
        &script,
        format!(
            r#"
[plugin]
name = "static"
kind = "native"
file = "{file}"
grants = ["emit", "log", "timer", "kv"]
[plugin.config]
announce_after_ms = 60000
[plugin.config.clusters.cluster1.web]
manifests = []
[plugin.config.clusters.cluster1.db]
manifests = []

[[step]]
call = "resync"
expect = {{ names = ["db", "web"], events = 2 }}

[[step]]
call = "timer"
timer = "announce"
expect = {{ emitted = 2 }}

[[step]]
call = "status"
resource = "web"
status = {{ conditions = [] }}
expect = {{ kv_keys = ["status/cluster1/web"], emitted = 0 }}
"#,
            file = native.display()
        ),
    )
    .unwrap();
    let out = Command::new(conductor_bin())
        .args(["plugins", "test"])
        .arg(&script)
        .output()
        .unwrap();
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    for expected in [
        "plugin:        static-works",
        "2. timer announce",
        "emit         spec.update_request web",
        "log    info  announced 2 works to 2 subscribers",
        "3 steps, 3 as expected",
    ] {
        assert!(printed.contains(expected), "no {expected:?} in\n{printed}");
    }

    let with_pg = polyglot_artifact("python_works_pg");
    std::fs::write(
        &script,
        format!(
            "[plugin]\nname = \"p\"\nkind = \"component\"\nfile = \"{}\"\ngrants = [\"emit\", \"log\", \"timer\", \"kv\"]\n[[step]]\ncall = \"resync\"\n",
            with_pg.display()
        ),
    )
    .unwrap();
    let out = Command::new(conductor_bin())
        .args(["plugins", "test"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out).contains("the plugin imports `pg`, which plugins test does not fake"),
        "{}",
        text(&out)
    );
}
