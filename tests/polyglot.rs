//! The example source in three languages — static-works (Rust), python-works (Python,
//! componentize-py) and js-works (JavaScript, componentize-js) — against the real binary, through
//! one scenario: each is swapped in under a live agent stream, answers the agent's resync with the
//! configured work, announces it from a timer, keeps the agent's status in `kv` (reading what
//! its predecessor stored, and stored for its successor), and refuses a malformed status with
//! its own message. Each loads with the limits its example configuration names, and a build
//! that imports a capability it was not granted does not load. An exception the Python or
//! JavaScript plugin does not catch answers the agent with the `internal` error holding its
//! traceback (the SDK's glue), is logged and counted, and the instance serves the next call.
//! Status updates that wait for the plugin together go to it in one `handle-batch` call, which the
//! SDK's default answers request by request: each agent hears its own answer.
//!
//! The components are built by `scripts/build-polyglot-plugins.sh` (scripts/test.sh runs it).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::{self, attr, attr_str};
use conductor_blackbox_tests::proto::CloudEvent;
use conductor_blackbox_tests::proto::cloud_event::Data;
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::{
    CloudEventServiceClient, Conductor, Form, Sub, WORKS, conductor_bin, http_post, plugin_artifact, polyglot_artifact,
    publish, subscribe,
};
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;

/// One of the three plugins.
#[derive(Debug, Clone, Copy)]
struct Lang {
    /// The plugin's name (and its example's folder).
    plugin: &'static str,
    /// The source it declares (agents echo it as `originalsource`).
    source: &'static str,
}

const STATIC: Lang = Lang {
    plugin: "static-works",
    source: "static",
};
const PYTHON: Lang = Lang {
    plugin: "python-works",
    source: "python",
};
const JS: Lang = Lang {
    plugin: "js-works",
    source: "js",
};

impl Lang {
    fn component(self) -> PathBuf {
        match self.plugin {
            "static-works" => plugin_artifact("static-works", Form::Component),
            other => polyglot_artifact(&other.replace('-', "_")),
        }
    }

    /// The same plugin built with the `pg` capability as well.
    fn component_with_pg(self) -> PathBuf {
        polyglot_artifact(&format!("{}_pg", self.plugin.replace('-', "_")))
    }

    fn example_dir(self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(self.plugin)
    }

    /// The `limits = { … }` line of the plugin in its example's conductor.toml (static-works'
    /// README names none: the defaults).
    fn example_limits(self) -> String {
        if self.plugin == "static-works" {
            return String::new();
        }
        let path = self.example_dir().join("conductor.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("limits = "))
            .unwrap_or_else(|| panic!("{} names no limits", path.display()));
        assert!(line.contains("memory = "), "{line}");
        line.to_owned()
    }
}

/// The plugin `works` loaded from `file`, configured as every example takes it.
fn works(file: &Path, pool_size: usize, limits: &str) -> String {
    format!(
        r#"
[plugins.works]
kind = "component"
file = "{file}"
grants = ["emit", "log", "timer", "kv"]
pool_size = {pool_size}
{limits}
[plugins.works.config]
announce_after_ms = 300
[plugins.works.config.clusters.cluster1.web]
generation = 3
manifests = [{{ apiVersion = "v1", kind = "ConfigMap", metadata = {{ name = "web", namespace = "default" }} }}]
[plugins.works.config.clusters.cluster2.db]
manifests = []
"#,
        file = file.display()
    )
}

fn status(condition: &str) -> Value {
    json!({"conditions": [{"type": condition, "status": "True"}]})
}

async fn status_update(
    client: &mut CloudEventServiceClient<Channel>,
    id: &str,
    original: &str,
    data: Value,
) -> Result<(), tonic::Status> {
    let e = events::agent_event(
        &format!("{WORKS}.status.update_request"),
        "cluster1",
        original,
        Some(data),
    );
    publish(client, events::with_id(e, id)).await
}

/// The next event on `sub` of type `<WORKS>.spec.<action>` from `source` (others are skipped:
/// an announce of the plugin swapped out may still be on its way).
async fn next_from(sub: &mut Sub, action: &str, source: &str) -> CloudEvent {
    let ty = format!("{WORKS}.spec.{action}");
    for _ in 0..10 {
        let e = sub.next_event().await.unwrap();
        if e.r#type == ty && e.source == source {
            return e;
        }
    }
    panic!("no {ty} from {source}");
}

/// Swaps the file under the running plugin (and its pool size, so even the same file is a
/// change) and reloads; returns once the new plugin serves.
async fn swap(c: &Conductor, file: &Path, lang: Lang, pool_size: usize, limits: &str) {
    std::fs::copy(lang.component(), file).unwrap();
    c.rewrite_config(&works(file, pool_size, limits));
    let (code, body) = http_post(c.admin_addr.as_deref().unwrap(), "/reload").await.unwrap();
    assert_eq!(code, 200, "{lang:?}: {body}");
    let summary: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(summary["replaced"], json!(["works"]), "{lang:?}: {body}");
}

/// The scenario every language passes: `lang` swapped in for static-works under a live stream,
/// then swapped out for it again.
async fn serves_agents_like_static_works(lang: Lang) {
    let limits = lang.example_limits();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("works.wasm");
    std::fs::copy(STATIC.component(), &file).unwrap();
    let c = Conductor::start(&works(&file, 2, &limits)).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let id = attr_str(&next_from(&mut sub, "resync_response", "static").await, "ce-resourceid")
        .unwrap()
        .to_owned();
    // Its announce (300 ms after it started) is through before anything is swapped.
    next_from(&mut sub, "update_request", "static").await;
    // static-works keeps the agent's first status.
    status_update(&mut client, &id, "static", status("Applied"))
        .await
        .unwrap();
    c.wait_for_log("status of cluster1/web stored").await;

    // `lang` swapped in under the live stream.
    swap(&c, &file, lang, 3, &limits).await;
    // Its `start` set the announce timer; the timer's event emits the work to the stream.
    let announced = next_from(&mut sub, "update_request", lang.source).await;
    assert_eq!(attr_str(&announced, "ce-resourceid"), Some(id.as_str()), "{lang:?}");

    // Resync: the configured work, encoded as OCM's work agents read it, with the id every
    // language derives the same way.
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let work = next_from(&mut sub, "resync_response", lang.source).await;
    assert_eq!(attr_str(&work, "ce-resourceid"), Some(id.as_str()), "{lang:?}");
    assert_eq!(attr(&work, "ce-resourceversion"), Some(&Attr::CeInteger(3)), "{lang:?}");
    assert_eq!(attr_str(&work, "ce-clustername"), Some("cluster1"), "{lang:?}");
    let meta: Value = serde_json::from_str(attr_str(&work, "ce-metadata").unwrap()).unwrap();
    assert_eq!(
        (&meta["name"], &meta["namespace"]),
        (&json!("web"), &json!("cluster1")),
        "{lang:?}"
    );
    assert_eq!(meta["labels"]["app.kubernetes.io/managed-by"], lang.plugin, "{lang:?}");
    let Some(Data::BinaryData(data)) = &work.data else {
        panic!("{lang:?}: no data in {work:?}")
    };
    let bundle: Value = serde_json::from_slice(data).unwrap();
    assert_eq!(bundle["manifests"][0]["metadata"]["name"], "web", "{lang:?}: {bundle}");

    // The status static-works stored is in kv: the same status is unchanged for `lang`.
    status_update(&mut client, WEB_UID, lang.source, status("Applied"))
        .await
        .unwrap();
    let line = c.wait_for_log("status of cluster1/web unchanged").await;
    assert!(line.contains(r#""plugin":"works""#), "{lang:?}: not attributed: {line}");
    // A new one is stored.
    status_update(&mut client, &id, lang.source, status("Available"))
        .await
        .unwrap();
    c.wait_for_logs("status of cluster1/web stored", 2).await;
    // A status for a work it does not serve is answered OK, as OCM's work service does.
    status_update(&mut client, "no-such-work", lang.source, status("Applied"))
        .await
        .unwrap();
    c.wait_for_log("status of unknown work no-such-work in cluster1 ignored")
        .await;
    // A malformed one is refused with the plugin's own message.
    let s = status_update(&mut client, &id, lang.source, json!(["not", "a", "status"]))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::FailedPrecondition, "{lang:?}: {s:?}");
    let body: Value = serde_json::from_str(s.message()).unwrap();
    assert_eq!(body["ErrStatus"]["reason"], "Invalid", "{lang:?}");
    assert_eq!(body["ErrStatus"]["code"], 422, "{lang:?}");
    let message = body["ErrStatus"]["message"].as_str().unwrap();
    assert!(
        message.contains("status of cluster1/web is not a ManifestBundleStatus"),
        "{lang:?}: {message}"
    );

    // static-works swapped back in: what `lang` stored is in kv.
    swap(&c, &file, STATIC, 2, &limits).await;
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    next_from(&mut sub, "resync_response", "static").await;
    status_update(&mut client, &id, "static", status("Available"))
        .await
        .unwrap();
    c.wait_for_logs("status of cluster1/web unchanged", 2).await;
}

#[tokio::test]
async fn python_works_serves_agents_like_static_works() {
    serves_agents_like_static_works(PYTHON).await;
}

#[tokio::test]
async fn js_works_serves_agents_like_static_works() {
    serves_agents_like_static_works(JS).await;
}

/// The reference: static-works through the same scenario (swapped for a new instance of itself).
#[tokio::test]
async fn static_works_passes_the_same_scenario() {
    serves_agents_like_static_works(STATIC).await;
}

/// `config.raise_uncaught_for`: a status update for that resource raises an exception the
/// plugin does not catch. The SDK's glue answers the agent with the contract's `internal` error
/// (InternalError, 500) whose message is the traceback; the host logs it and counts it in the
/// inspector's last error; the instance is not replaced and serves the next call; what the
/// plugin printed reaches its log.
async fn an_uncaught_exception_is_an_internal_error(lang: Lang, traceback: &[&str]) {
    let config = works(&lang.component(), 1, &lang.example_limits()).replace(
        "announce_after_ms = 300\n",
        "announce_after_ms = 300\nraise_uncaught_for = \"boom\"\n",
    );
    let c = Conductor::start(&config).unwrap();
    let mut client = c.client().await.unwrap();

    let s = status_update(&mut client, "boom", lang.source, status("Applied"))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::FailedPrecondition, "{lang:?}: {s:?}");
    let body: Value = serde_json::from_str(s.message()).unwrap();
    assert_eq!(body["ErrStatus"]["reason"], "InternalError", "{lang:?}: {body}");
    assert_eq!(body["ErrStatus"]["code"], 500, "{lang:?}: {body}");
    let message = body["ErrStatus"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("uncaught exception in handle:\n"),
        "{lang:?}: {message}"
    );
    for expected in traceback {
        assert!(message.contains(expected), "{lang:?}: no {expected:?} in {message}");
    }
    assert!(!message.contains("wasm trap"), "{lang:?}: trapped: {message}");

    // What the plugin printed before it raised is in its log, and so is the error, with the
    // traceback, under the plugin's name.
    let printed = c.wait_for_log("raise_uncaught_for: raising for boom").await;
    assert!(
        printed.contains(r#""plugin":"works""#) && printed.contains(r#""stream":"stdout""#),
        "{lang:?}: {printed}"
    );
    let line = c.wait_for_log("plugin call failed with an internal error").await;
    assert!(
        line.contains(r#""plugin":"works""#) && line.contains("a deliberate bug for boom"),
        "{lang:?}: {line}"
    );
    assert!(
        !c.logs().contains("replacing the instance"),
        "{lang:?}: the instance trapped:\n{}",
        c.logs()
    );

    // The same instance serves the next call.
    status_update(&mut client, WEB_UID, lang.source, status("Applied"))
        .await
        .unwrap();
    c.wait_for_log("status of cluster1/web stored").await;

    // Counted: the inspector's last error is the traceback.
    let (code, body) = c.admin_get("/inspect/plugins").await.unwrap();
    assert_eq!(code, 200, "{body}");
    let plugins: Value = serde_json::from_str(&body).unwrap();
    let works = plugins
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "works"))
        .unwrap_or_else(|| panic!("no plugin `works` in {body}"));
    assert_eq!(works["instances"], 1, "{lang:?}: {works}");
    let calls = &works["calls"];
    assert_eq!(calls["errors"], 1, "{lang:?}: {calls}");
    let last = calls["last_error"]["message"].as_str().unwrap_or_default();
    assert!(
        last.contains("uncaught exception in handle") && last.contains("a deliberate bug for boom"),
        "{lang:?}: {calls}"
    );
}

/// The id every example derives for cluster1's work `web`: the name-based UUID of
/// "cluster1/web" in the examples' namespace (the examples' unit tests pin it too).
const WEB_UID: &str = "41c88e70-99b2-599a-8b94-e770d3a8540f";

#[tokio::test]
async fn an_uncaught_python_exception_is_an_internal_error_with_its_traceback() {
    an_uncaught_exception_is_an_internal_error(
        PYTHON,
        &[
            "Traceback (most recent call last):",
            // The example's file as the repository names it, and the line itself.
            "File \"examples/python-works/app.py\", line ",
            "in deliberate_bug\n    raise RuntimeError(f\"a deliberate bug for {resource} (config.raise_uncaught_for)\")\n",
            "RuntimeError: a deliberate bug for boom (config.raise_uncaught_for)",
        ],
    )
    .await;
}

#[tokio::test]
async fn an_uncaught_javascript_exception_is_an_internal_error_with_its_stack() {
    an_uncaught_exception_is_an_internal_error(
        JS,
        &[
            "Error: a deliberate bug for boom (config.raise_uncaught_for)",
            "deliberateBug@",
            "plugin.js:",
        ],
    )
    .await;
}

/// The sum of the series of `name` carrying every label of `labels` (`plugin="works"`) in a
/// Prometheus scrape; 0 when there is none.
fn series_sum(metrics: &str, name: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Agents that publish at once, each on its own connection.
const AGENTS: usize = 12;

/// Status updates that wait for the plugin together — one instance (`pool_size = 1`), twelve
/// agents publishing at the same moment — go to it in `handle-batch` calls, which the SDK's
/// default (no override in the example) answers by handing each to `handle`: every agent hears
/// its own answer. Agent 0 sends a malformed status each round: it alone is refused, with the
/// plugin's own message, while the statuses batched with it are stored or ignored as they are
/// when they come one by one. Rounds go on until a batch carried the refused status (a
/// `handle-batch` call with an error), so the proof does not hang on the machine's speed.
async fn requests_that_wait_together_are_each_answered_in_a_batch(lang: Lang) {
    let c = Conductor::start(&works(&lang.component(), 1, &lang.example_limits())).unwrap();
    let mut clients = Vec::new();
    for _ in 0..AGENTS {
        clients.push(c.client().await.unwrap());
    }
    let works_label = r#"plugin="works""#;
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut rounds, mut stored) = (0, 0);
    loop {
        let round = rounds;
        rounds += 1;
        let start = Arc::new(tokio::sync::Barrier::new(AGENTS));
        let agents: Vec<_> = clients
            .drain(..)
            .enumerate()
            .map(|(n, mut client)| {
                let start = Arc::clone(&start);
                tokio::spawn(async move {
                    // Agent 0 malformed; the other even ones a new status of `web` (stored), the
                    // odd ones a status of a work not served (ignored, named in the log).
                    let (id, data) = match n {
                        0 => (WEB_UID.to_owned(), json!(["not", "a", "status"])),
                        n if n % 2 == 0 => (WEB_UID.to_owned(), status(&format!("Applied-{round}-{n}"))),
                        n => (format!("unknown-{round}-{n}"), status("Applied")),
                    };
                    start.wait().await;
                    let answer = status_update(&mut client, &id, lang.source, data).await;
                    (client, answer)
                })
            })
            .collect();
        for (n, agent) in agents.into_iter().enumerate() {
            let (client, answer) = agent.await.unwrap();
            clients.push(client);
            if n != 0 {
                if let Err(s) = answer {
                    panic!("{lang:?}: round {round}, agent {n} was refused: {s:?}");
                }
                continue;
            }
            let Err(s) = answer else {
                panic!("{lang:?}: round {round}: the malformed status was accepted")
            };
            assert_eq!(s.code(), Code::FailedPrecondition, "{lang:?}: {s:?}");
            let body: Value = serde_json::from_str(s.message()).unwrap();
            assert_eq!(body["ErrStatus"]["reason"], "Invalid", "{lang:?}: {body}");
            let message = body["ErrStatus"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("status of cluster1/web is not a ManifestBundleStatus"),
                "{lang:?}: {message}"
            );
        }
        // Each request reached `handle`: the odd agents' works are named in the log, the even
        // ones' statuses (each new) stored.
        stored += AGENTS / 2 - 1;
        for n in (1..AGENTS).step_by(2) {
            c.wait_for_log(&format!(
                "status of unknown work unknown-{round}-{n} in cluster1 ignored"
            ))
            .await;
        }
        c.wait_for_logs("status of cluster1/web stored", stored).await;

        let (_, metrics) = c.admin_get("/metrics").await.unwrap();
        let batched = series_sum(&metrics, "conductor_plugin_batched_requests_total", &[works_label]);
        let refused_in_a_batch = series_sum(
            &metrics,
            "conductor_plugin_calls_total",
            &[works_label, r#"call="handle-batch""#, r#"outcome="error""#],
        );
        if batched > 0.0 && refused_in_a_batch > 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{lang:?}: no batch carried the refused status in {rounds} rounds of {AGENTS} agents \
             (batched requests: {batched})\n{metrics}"
        );
    }
    assert!(
        !c.logs().contains("replacing the instance"),
        "{lang:?}: the instance trapped:\n{}",
        c.logs()
    );
}

#[tokio::test]
async fn python_works_answers_each_request_of_a_batch() {
    requests_that_wait_together_are_each_answered_in_a_batch(PYTHON).await;
}

#[tokio::test]
async fn js_works_answers_each_request_of_a_batch() {
    requests_that_wait_together_are_each_answered_in_a_batch(JS).await;
}

/// `conductor check-config` (with `--connect`: one instance made, `init` run under the memory
/// limit the example names), `conductor plugins inspect`: (success, stdout, stderr).
fn conductor(args: &[&str], path: &Path) -> (bool, String, String) {
    let out = std::process::Command::new(conductor_bin())
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The example's own conductor.toml loads, with the plugin folder the build writes to.
fn example_configuration_loads(lang: Lang) {
    let folder = lang.component().parent().unwrap().to_owned();
    let config = lang.example_dir().join("conductor.toml");
    let (ok, out, err) = conductor(
        &["check-config", "--connect", "--plugin-folder", folder.to_str().unwrap()],
        &config,
    );
    assert!(ok, "{lang:?}: {err}");
    assert!(
        out.contains(&format!(
            r#"{} 0.1.0 (Component, contract {}), data types ["{WORKS}"], capabilities ["emit", "log", "timer", "kv"]"#,
            lang.plugin,
            conductor_plugin_sdk::SDK_VERSION
        )),
        "{lang:?}: {out}"
    );
    assert!(out.contains(&format!("route {} ->", lang.source)), "{lang:?}: {out}");
}

#[test]
fn the_python_example_configuration_loads() {
    example_configuration_loads(PYTHON);
}

#[test]
fn the_js_example_configuration_loads() {
    example_configuration_loads(JS);
}

/// The same plugin built with `pg` as well: `plugins inspect` reads the capability from its
/// imports, and the host refuses it without the grant, naming what is missing.
fn a_build_importing_an_ungranted_capability_does_not_load(lang: Lang) {
    let file = lang.component_with_pg();
    let (ok, out, err) = conductor(&["plugins", "inspect"], &file);
    assert!(ok, "{lang:?}: {err}");
    assert!(out.contains(&format!("name:          {}", lang.plugin)), "{out}");
    assert!(
        out.contains(&format!(
            "contract:      conductor:plugin@{}",
            conductor_plugin_sdk::SDK_VERSION
        )),
        "{out}"
    );
    assert!(
        out.contains("capabilities:  emit, log, timer, kv, pg (read from its imports)"),
        "{lang:?}: {out}"
    );

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("conductor.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n{}",
            conductor_blackbox_tests::BASE_CONFIG,
            works(&file, 1, &lang.example_limits())
        ),
    )
    .unwrap();
    let (ok, _, err) = conductor(&["check-config"], &config);
    assert!(!ok, "{lang:?}: loaded without the pg grant");
    assert!(
        err.contains("plugins.works") && err.contains("not granted") && err.contains("pg"),
        "{lang:?}: {err}"
    );
}

#[test]
fn python_works_importing_pg_does_not_load_without_the_grant() {
    a_build_importing_an_ungranted_capability_does_not_load(PYTHON);
}

#[test]
fn js_works_importing_pg_does_not_load_without_the_grant() {
    a_build_importing_an_ungranted_capability_does_not_load(JS);
}

/// Memory an instance keeps over calls comes back: under a 64 MiB limit, status updates of
/// 100 KiB (each stored) never fail for memory — an instance past `limits.recycle_above` is
/// replaced after its call, and one that runs out of memory runs its call again on a fresh
/// instance. (Before, Python failed from about the 535th such call, JavaScript from the 264th.)
async fn memory_kept_over_calls_comes_back(lang: Lang, calls: usize) {
    let c = Conductor::start(&works(
        &lang.component(),
        2,
        "limits = { memory = \"64MiB\", call_timeout = \"5s\" }",
    ))
    .unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let id = attr_str(
        &next_from(&mut sub, "resync_response", lang.source).await,
        "ce-resourceid",
    )
    .unwrap()
    .to_owned();
    drop(sub);
    let message = "m".repeat(100 << 10);
    for n in 0..calls {
        let data = json!({"conditions": [{"type": "Applied", "status": "True", "message": format!("{n} {message}")}]});
        if let Err(e) = status_update(&mut client, &id, lang.source, data).await {
            panic!("{lang:?}: status update {n} of {calls} failed: {e:?}");
        }
    }
    let (_, metrics) = c.admin_get("/metrics").await.unwrap();
    let recycled = |reason: &str| -> f64 {
        let series = format!("conductor_plugin_instances_recycled_total{{plugin=\"works\",reason=\"{reason}\"}}");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
    };
    assert!(
        recycled("memory") + recycled("out_of_memory") >= 1.0,
        "{lang:?}: no instance was replaced in {calls} calls\n{metrics}"
    );
}

#[tokio::test]
async fn a_python_instance_gives_back_the_memory_it_keeps_over_calls() {
    memory_kept_over_calls_comes_back(PYTHON, 1_500).await;
}

#[tokio::test]
async fn a_javascript_instance_gives_back_the_memory_it_keeps_over_calls() {
    memory_kept_over_calls_comes_back(JS, 1_000).await;
}
