//! A plugin author's first hour, as a new user goes through it, once per language: `conductor
//! plugins new NAME --lang rust|python|js` writes a project outside the repository, with the SDK
//! the binary carries and no checkout named; its `build.sh` builds it and passes its unit tests as
//! generated (cargo offline, pip and npm kept off any registry); `conductor
//! plugins test plugin-test.toml` replays the scripted agent conversation against the built
//! component and reports every call as expected — and fails, naming the difference, on a script
//! expecting something else, a Python traceback printed once, naming the project's file and
//! showing the line; then `conductor serve` with the project's own `conductor.toml`
//! serves an agent: its resync gets the configured work, its status update is kept in the
//! plugin's `kv` (seen through `/inspect/plugins/<name>`), a malformed one is refused; and a
//! second copy of the plugin, configured with a source of its own (`config.source`) and routed to
//! it, gets its own agents' status updates, with no source reported routed to another plugin.
//!
//! The Python and JavaScript builds use the pinned componentize-py, componentize-js and rolldown
//! that `scripts/build-polyglot-plugins.sh` installs (scripts/test.sh runs it first) in the
//! folders `conductor plugins tools install` installs them in; the Rust build keeps a target
//! folder of its own in conductor's cache folder (`~/.cache/conductor/plugins-new-target`), so
//! after the first run it compiles the SDK and the plugin only.

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

/// Where the Rust project builds: `$XDG_CACHE_HOME/conductor/plugins-new-target`, else
/// `~/.cache/conductor/…`, else beside the workspace's build.
fn rust_target_dir() -> PathBuf {
    let cache = |var: &str, under: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(|v| PathBuf::from(v).join(under))
    };
    cache("XDG_CACHE_HOME", "conductor")
        .or_else(|| cache("HOME", ".cache/conductor"))
        .unwrap_or_else(target_dir)
        .join("plugins-new-target")
}

/// Runs `command` in `dir`; panics with its output unless it succeeds (when `ok`) or fails.
fn run(dir: &Path, command: &mut Command, ok: bool) -> String {
    let out = command
        .current_dir(dir)
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

/// The project holds the SDK conductor wrote into it, of the contract's version, and names
/// nothing outside itself; once built, the SDK it runs is that one.
fn the_sdk_is_the_projects(project: &Path, lang: &str, built: bool) {
    let version = conductor_plugin_sdk::SDK_VERSION;
    let repo = std::fs::canonicalize(repo()).unwrap();
    for file in [
        "Cargo.toml",
        "requirements.txt",
        "package.json",
        "build.sh",
        "conductor.toml",
        "plugin-test.toml",
    ] {
        if let Ok(text) = std::fs::read_to_string(project.join(file)) {
            assert!(
                !text.contains(repo.to_str().unwrap())
                    && !text.contains("plugin-sdk/python")
                    && !text.contains("plugin-sdk/js"),
                "{lang}: {file} names the checkout:\n{text}"
            );
        }
    }
    if lang == "rust" {
        let read = |path: &str| std::fs::read_to_string(project.join(path)).unwrap();
        let manifest = read("Cargo.toml");
        for dependency in [
            format!("conductor-plugin-sdk = {{ version = \"{version}\", path = \"sdk/conductor-plugin-sdk\" }}"),
            format!(
                "conductor-plugin-sdk = {{ version = \"{version}\", path = \"sdk/conductor-plugin-sdk\", features = [\"fakes\"] }}"
            ),
        ] {
            assert!(
                manifest.lines().any(|l| l == dependency),
                "no {dependency} in\n{manifest}"
            );
        }
        let sdk = read("sdk/conductor-plugin-sdk/Cargo.toml");
        assert!(sdk.contains(&format!("\nversion = \"{version}\"\n")), "{sdk}");
        if built {
            // cargo locked the SDK as a path dependency: a package with no source.
            let lock = read("Cargo.lock");
            let locked = lock
                .split("[[package]]")
                .find(|p| p.contains("\nname = \"conductor-plugin-sdk\"\n"))
                .unwrap_or_else(|| panic!("no conductor-plugin-sdk in\n{lock}"));
            assert!(
                locked.contains(&format!("\nversion = \"{version}\"\n")) && !locked.contains("source ="),
                "{locked}"
            );
        }
    } else if lang == "python" {
        let wheel = format!("sdk/conductor_plugin_sdk-{version}-py3-none-any.whl");
        assert!(project.join(&wheel).is_file(), "no {wheel}");
        let requirements = std::fs::read_to_string(project.join("requirements.txt")).unwrap();
        assert!(
            requirements.lines().any(|l| l == format!("./{wheel}")),
            "{requirements}"
        );
        if built {
            // pip records where it installed the SDK from: the project's wheel.
            let lib = std::fs::read_dir(project.join(".venv/lib"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            let from = std::fs::read_to_string(lib.join(format!(
                "site-packages/conductor_plugin_sdk-{version}.dist-info/direct_url.json"
            )))
            .unwrap();
            let project = std::fs::canonicalize(project).unwrap();
            assert!(from.contains(&format!("{}/{wheel}", project.display())), "{from}");
        }
    } else {
        let package: Value =
            serde_json::from_str(&std::fs::read_to_string(project.join("package.json")).unwrap()).unwrap();
        assert_eq!(
            package["dependencies"]["conductor-plugin-sdk"],
            "file:sdk/conductor-plugin-sdk"
        );
        let sdk: Value = serde_json::from_str(
            &std::fs::read_to_string(project.join("sdk/conductor-plugin-sdk/package.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(sdk["version"], version);
        if built {
            assert_eq!(
                std::fs::canonicalize(project.join("node_modules/conductor-plugin-sdk")).unwrap(),
                std::fs::canonicalize(project.join("sdk/conductor-plugin-sdk")).unwrap()
            );
        }
    }
}

/// The project's plugin with a bug: a status about the resource `crash` raises (throws) what it
/// does not catch. Returns the file and the line of the raise.
fn add_a_bug(project: &Path, lang: &str) -> (String, usize) {
    let (file, after, bug) = match lang {
        "python" => (
            "src/app.py",
            "        cluster, resource = ocm.cluster_name(event), ocm.resource_id(event)\n",
            "        if resource == \"crash\":\n            raise RuntimeError(\"a deliberate bug\")\n",
        ),
        _ => (
            "plugin.js",
            "    const resource = ocm.resourceId(event);\n",
            "    if (resource === 'crash') throw new Error('a deliberate bug');\n",
        ),
    };
    let path = project.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(after).count(), 1, "{lang}: {after:?} in\n{text}");
    let changed = text.replace(after, &format!("{after}{bug}"));
    std::fs::write(&path, &changed).unwrap();
    let line = changed[..changed.find(bug).unwrap()].lines().count() + bug.lines().count();
    (file.to_owned(), line)
}

async fn new_build_test_serve(lang: &str) {
    let name = format!("hello-{lang}");
    let work = tempfile::tempdir().unwrap();
    let project = work.path().join(&name);

    // 1. A new project, outside the repository, with the SDK the binary carries.
    let mut new = Command::new(conductor_bin());
    new.args(["plugins", "new", &name, "--lang", lang]);
    let printed = run(work.path(), &mut new, true);
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

    the_sdk_is_the_projects(&project, lang, false);
    // Python and JavaScript: a bug for the traceback (below), where the unit tests and the
    // script do not go.
    let bug = (lang != "rust").then(|| add_a_bug(&project, lang));

    // 2. It builds, and passes its unit tests, as generated: with no registry (cargo takes the
    // SDK's dependencies from its own cache, where the workspace's build put them).
    let built = run(
        &project,
        Command::new("./build.sh")
            .env("CARGO_TARGET_DIR", rust_target_dir())
            .env("CARGO_NET_OFFLINE", "true")
            .env("PIP_NO_INDEX", "1")
            .env("npm_config_offline", "true"),
        true,
    );
    let wasm = project.join(format!("{}.wasm", name.replace('-', "_")));
    assert!(wasm.is_file(), "{lang}: no {} after:\n{built}", wasm.display());
    let passed = match lang {
        "rust" => "test result: ok. 5 passed",
        "python" => "Ran 5 tests",
        _ => "# pass 5",
    };
    assert!(built.contains(passed), "{lang}: its unit tests:\n{built}");
    the_sdk_is_the_projects(&project, lang, true);

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

    // … and a script expecting otherwise fails, saying how the answers differ (with Python and
    // JavaScript, a status that runs into the bug too).
    let script = std::fs::read_to_string(project.join("plugin-test.toml")).unwrap();
    let mut wrong = script
        .replace(
            "expect = { names = [\"web\"], kv_keys = [] }",
            "expect = { names = [\"db\"] }",
        )
        .replace(
            "expect = { error = \"invalid\", message = \"is not JSON\" }",
            "expect = {}",
        );
    assert_ne!(wrong, script);
    if bug.is_some() {
        wrong += "\n[[step]]\ncall = \"status\"\nresource_id = \"crash\"\nstatus = { conditions = [] }\nexpect = {}\n";
    }
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
        if bug.is_some() {
            "5 steps, 2 as expected, 3 not"
        } else {
            "4 steps, 2 as expected, 2 not"
        },
        "wrong-test.toml: a call answered otherwise than the script expects",
    ] {
        assert!(reported.contains(expected), "{lang}: no {expected:?} in\n{reported}");
    }
    if let Some((file, line)) = &bug {
        // The bug answers `internal`: its traceback (its stack) printed once, naming the
        // project's file.
        let crash = &reported[reported.find("5. status cluster1/crash").expect("the step")..];
        assert!(
            crash.contains("→ error internal: uncaught exception in handle:")
                && crash.contains(
                    "✗ expected success, got internal: uncaught exception in handle: … (the whole error above)"
                ),
            "{lang}: {crash}"
        );
        let python = lang == "python";
        let error = if python {
            "RuntimeError: a deliberate bug"
        } else {
            "Error: a deliberate bug"
        };
        assert_eq!(reported.matches(error).count(), 1, "{lang}: printed once:\n{reported}");
        if python {
            assert_eq!(
                reported.matches("Traceback (most recent call last)").count(),
                1,
                "{reported}"
            );
            let frame = format!("File \"{file}\", line {line}, in handle\n");
            let source = "raise RuntimeError(\"a deliberate bug\")\n";
            assert!(crash.contains(&frame), "no {frame:?} in\n{crash}");
            assert!(
                crash[crash.find(&frame).unwrap()..].contains(source),
                "no source line in\n{crash}"
            );
        } else {
            // A stack names no source line: its frame names the bundle by its path in the
            // project, at the line of the throw, and ends at the export.
            let bundle = std::fs::read_to_string(project.join("build/plugin.bundle.js")).unwrap();
            let at = bundle
                .lines()
                .position(|l| l.contains("throw new Error(\"a deliberate bug\")"))
                .unwrap();
            let frame = format!("\n     handle@build/plugin.bundle.js:{}:", at + 1);
            assert!(crash.contains(&frame), "no {frame:?} in\n{crash}");
            assert!(
                !crash.contains("conductorGuarded") && !crash.contains("initializer.js"),
                "{crash}"
            );
        }
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

/// `conductor plugins tools install --lang python|js`: one language's pinned tools, through the
/// machine's own python3 and pip, or npm — stand-ins here, which record what they are asked —
/// into a folder named by the pin, an earlier pin's removed, the commands linked in `bin/` where
/// the projects' build scripts look; the same pin is not installed twice, and nothing of the
/// other language is touched.
#[test]
fn plugins_tools_install_installs_one_languages_pinned_tools() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let fakes = dir.path().join("fake-bin");
    let log = dir.path().join("asked.log");
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&fakes).unwrap();
    let script = |name: &str, body: &str| {
        let path = fakes.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(
        "python3",
        r#"echo "python3 $*" >>"$ASKED"
[ "$1 $2" = "-m venv" ] || exit 1
mkdir -p "$3/bin"
printf '#!/bin/sh\necho "pip $*" >>"$ASKED"\n: >"$(dirname "$0")/componentize-py"\n' >"$3/bin/pip"
chmod +x "$3/bin/pip"
"#,
    );
    script(
        "npm",
        r#"echo "npm $* in $PWD" >>"$ASKED"
mkdir -p node_modules/.bin && : >node_modules/.bin/componentize-js && : >node_modules/.bin/rolldown
"#,
    );
    let earlier = tools.join("componentize-py-000000000000");
    std::fs::create_dir_all(&earlier).unwrap();
    let path = format!("{}:{}", fakes.display(), std::env::var("PATH").unwrap_or_default());
    let install = |lang: &str| {
        let out = Command::new(conductor_bin())
            .args(["plugins", "tools", "install", "--lang", lang, "--dir"])
            .arg(&tools)
            .env("PATH", &path)
            .env("ASKED", &log)
            .output()
            .unwrap();
        assert!(out.status.success(), "{lang}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let asked = || std::fs::read_to_string(&log).unwrap_or_default();
    let only = |prefix: &str| -> PathBuf {
        let found: Vec<PathBuf> = std::fs::read_dir(&tools)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .collect();
        assert_eq!(found.len(), 1, "{prefix}: {found:?}");
        found[0].clone()
    };

    let printed = install("python");
    let venv = only("componentize-py-");
    let pin = &venv.file_name().unwrap().to_string_lossy()["componentize-py-".len()..];
    assert!(pin.len() == 12 && pin.bytes().all(|b| b.is_ascii_hexdigit()), "{pin}");
    assert_eq!(
        asked(),
        format!(
            "python3 -m venv {v}\npip install --quiet --disable-pip-version-check -r {v}/requirements.txt\n",
            v = venv.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(venv.join("requirements.txt")).unwrap(),
        std::fs::read_to_string(repo().join("plugin-sdk/python/requirements.txt")).unwrap()
    );
    assert!(!earlier.exists(), "an earlier pin's install is removed");
    assert_eq!(
        std::fs::read_link(tools.join("bin/componentize-py")).unwrap(),
        venv.join("bin/componentize-py")
    );
    assert!(!tools.join("bin/componentize-js").exists() && !tools.join("bin/rolldown").exists());
    for expected in [
        format!(
            "componentize-py=={}: installed in {}",
            pin_of("componentize-py"),
            venv.display()
        ),
        format!("export COMPONENTIZE_PY={}/bin/componentize-py", tools.display()),
    ] {
        assert!(printed.contains(&expected), "no {expected:?} in\n{printed}");
    }

    let printed = install("js");
    let js = only("js-plugin-tools-");
    assert_eq!(
        asked().lines().skip(2).collect::<Vec<_>>(),
        [format!(
            "npm ci --ignore-scripts --no-audit --no-fund --loglevel=error in {}",
            js.display()
        )]
    );
    for pins in ["package.json", "package-lock.json"] {
        assert_eq!(
            std::fs::read(js.join(pins)).unwrap(),
            std::fs::read(repo().join("plugin-sdk/js/tools").join(pins)).unwrap()
        );
    }
    for command in ["componentize-js", "rolldown"] {
        assert_eq!(
            std::fs::read_link(tools.join("bin").join(command)).unwrap(),
            js.join("node_modules/.bin").join(command)
        );
    }
    assert!(
        printed.contains("componentize-js==") && printed.contains("rolldown=="),
        "{printed}"
    );
    assert_eq!(only("componentize-py-"), venv, "Python's tools untouched");

    // Again: found, nothing asked.
    let before = asked();
    assert!(install("python").contains("already installed in"));
    assert_eq!(asked(), before);
}

/// The version `plugin-sdk/python/requirements.txt` pins `package` to.
fn pin_of(package: &str) -> String {
    std::fs::read_to_string(repo().join("plugin-sdk/python/requirements.txt"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{package}==")).map(str::to_owned))
        .unwrap()
}
