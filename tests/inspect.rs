//! The inspector, against the real binary: agents connect and plugins load, then every field
//! that `conductor inspect subscribers|plugins|plugin <name>|routes` prints (JSON and table) is
//! checked against what the test did — a plugin's `kv` included; `conductor reload` applies a changed configuration and reports a
//! refused one.

use std::net::SocketAddr;
use std::process::Command;

use chrono::{DateTime, Utc};
use conductor_blackbox_tests::events::{self, attr_str};
use conductor_blackbox_tests::{Conductor, Form, LEASES, WORKS, conductor_bin, plugin_artifact, publish, subscribe};
use serde_json::Value;

/// static-works (a component, two instances; granted more than it uses, which is allowed: a
/// database and a Kubernetes resource) serving cluster1's works, and a memory source for leases;
/// subscriber queues of 77. Nothing connects to the database or the API server.
fn config(pool_size: usize) -> String {
    format!(
        r#"
[broker]
subscriber_queue_size = 77
[plugins.static]
kind = "component"
file = "{file}"
grants = ["emit", "log", "timer", "kv", "pg", "kube"]
databases = ["inventory"]
kube_resources = [{{ resource = "leases.coordination.k8s.io", verbs = ["get", "list"] }}]
pool_size = {pool_size}
[plugins.static.config.clusters.cluster1.web]
manifests = [{{ apiVersion = "v1", kind = "ConfigMap", metadata = {{ name = "web", namespace = "default" }} }}]
[databases.inventory]
url = "postgres://nobody@127.0.0.1:1/none"
[plugins.leases]
kind = "memory"
config = {{ data_types = ["{LEASES}"] }}
[routes]
leases = "leases"
"#,
        file = plugin_artifact("static-works", Form::Component).display(),
    )
}

/// `conductor <args> --admin http://<admin>`: (success, stdout, stderr).
fn cli(c: &Conductor, args: &[&str]) -> (bool, String, String) {
    let admin = format!("http://{}", c.admin_addr.as_deref().expect("admin endpoint on"));
    let out = Command::new(conductor_bin())
        .args(args)
        .args(["--admin", &admin])
        .output()
        .expect("conductor runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn inspect_json(c: &Conductor, what: &str) -> Value {
    inspect_json_of(c, &[what])
}

/// `conductor inspect <what…> --output json`, parsed.
fn inspect_json_of(c: &Conductor, what: &[&str]) -> Value {
    let args: Vec<&str> = ["inspect"]
        .iter()
        .chain(what)
        .chain(&["--output", "json"])
        .copied()
        .collect();
    let (ok, out, err) = cli(c, &args);
    assert!(ok, "inspect {what:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("inspect {what:?} printed no JSON ({e}):\n{out}"))
}

/// What `conductor inspect plugin <name>` shows of a plugin's `kv`: (keys, bytes, [(key, bytes,
/// text)]).
fn kv_of(detail: &Value) -> (u64, u64, Vec<(String, u64, String)>) {
    let kv = &detail["kv"];
    let entries = kv["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no kv entries in {detail}"))
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_owned(),
                e["bytes"].as_u64().unwrap(),
                e["text"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (kv["keys"].as_u64().unwrap(), kv["bytes"].as_u64().unwrap(), entries)
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a timestamp: {v}"))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// The table's row whose first cell is `first`, split into cells (no cell here has spaces).
fn row<'a>(table: &'a str, first: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row {first:?} in\n{table}"))
        .split_whitespace()
        .collect()
}

#[tokio::test]
async fn inspect_shows_subscribers_plugins_and_routes_as_they_are() {
    let started = Utc::now();
    let c = Conductor::start(&config(2)).unwrap();

    // Two agents, each on its own connection; the first also watches leases on the same one.
    let mut agent1 = c.client().await.unwrap();
    let mut agent2 = c.client().await.unwrap();
    let mut works = subscribe(&mut agent1, "cluster1", WORKS).await.unwrap();
    let mut leases = subscribe(&mut agent1, "cluster1", LEASES).await.unwrap();
    let _quiet = subscribe(&mut agent2, "cluster2", WORKS).await.unwrap();
    // cluster1 resyncs its works (static-works answers with one) and is sent two leases.
    publish(&mut agent1, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let work = works.next_event().await.unwrap();
    let work_id = attr_str(&work, "ce-resourceid").unwrap().to_owned();
    for id in ["l1", "l2"] {
        publish(&mut agent1, events::create(LEASES, "cluster1", id, id))
            .await
            .unwrap();
        assert_eq!(attr_str(&leases.next_event().await.unwrap(), "ce-resourceid"), Some(id));
    }
    // One good status and one the plugin refuses.
    let status = |body: Value| {
        events::with_id(
            events::agent_event(
                &format!("{WORKS}.status.update_request"),
                "cluster1",
                "static",
                Some(body),
            ),
            &work_id,
        )
    };
    publish(&mut agent1, status(serde_json::json!({"conditions": []})))
        .await
        .unwrap();
    publish(&mut agent1, status(serde_json::json!(["not", "a", "status"])))
        .await
        .unwrap_err();

    // Subscribers.
    let subs = inspect_json(&c, "subscribers");
    let subs = subs.as_array().unwrap();
    assert_eq!(subs.len(), 3, "{subs:?}");
    let find = |cluster: &str, data_type: &str| {
        subs.iter()
            .find(|s| s["cluster"] == cluster && s["data_type"] == data_type)
            .unwrap_or_else(|| panic!("no {cluster}/{data_type} in {subs:?}"))
    };
    let (w1, l1, w2) = (
        find("cluster1", WORKS),
        find("cluster1", LEASES),
        find("cluster2", WORKS),
    );
    assert_eq!(w1["id"], works.subscription_id[0].as_str(), "the id the agent received");
    assert_eq!(l1["id"], leases.subscription_id[0].as_str());
    assert_eq!(
        (&w1["events_sent"], &l1["events_sent"], &w2["events_sent"]),
        (&1.into(), &2.into(), &0.into())
    );
    let remote = |s: &Value| -> SocketAddr { s["remote"].as_str().unwrap().parse().unwrap() };
    assert!(remote(w1).ip().is_loopback());
    assert_eq!(remote(w1), remote(l1), "one connection, one address");
    assert_ne!(remote(w1), remote(w2), "two connections");
    assert_ne!(remote(w1).to_string(), c.grpc_addr, "the agent's address, not ours");
    for s in [w1, l1, w2] {
        assert_eq!(s["user"], "system:anonymous", "no authenticator configured");
        assert_eq!(s["queue_capacity"], 77);
        assert_eq!(s["queue_depth"], 0, "every event was taken by the stream");
        let since = time(&s["connected_since"]);
        assert!(started <= since && since <= Utc::now(), "{since}");
    }
    let (ok, table, err) = cli(&c, &["inspect", "subscribers"]);
    assert!(ok, "{err}");
    assert_eq!(table.lines().count(), 4, "a header and three rows:\n{table}");
    let cells: Vec<Vec<&str>> = table.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let lease_row = cells.iter().find(|r| r[1] == LEASES).unwrap();
    assert_eq!(lease_row[0], "cluster1");
    assert_eq!(lease_row[2], "system:anonymous");
    assert_eq!(lease_row[3], remote(l1).to_string());
    assert_eq!(lease_row[5..], ["2", "0/77", leases.subscription_id[0].as_str()]);

    // Plugins.
    let plugins = inspect_json(&c, "plugins");
    let by_name = |name: &str| {
        plugins
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no plugin {name} in {plugins}"))
            .clone()
    };
    let sw = by_name("static");
    assert_eq!(sw["form"], "component");
    assert_eq!(sw["declared_name"], "static-works");
    assert_eq!(
        sw["version"],
        env!("CARGO_PKG_VERSION"),
        "static-works shares the workspace version"
    );
    assert_eq!(sw["contract"], conductor_plugin_sdk::SDK_VERSION);
    assert_eq!(
        sw["file"],
        plugin_artifact("static-works", Form::Component).display().to_string()
    );
    assert_eq!(strings(&sw["grants"]), ["emit", "log", "timer", "kv", "pg", "kube"]);
    assert_eq!(strings(&sw["databases"]), ["inventory"]);
    assert_eq!(strings(&sw["kube_resources"]), ["leases.coordination.k8s.io: get,list"]);
    assert_eq!(strings(&sw["capabilities"]), ["emit", "log", "timer", "kv"]);
    assert_eq!(strings(&sw["sources"]), ["static"]);
    assert_eq!(strings(&sw["data_types"]), [WORKS]);
    // Instances are made as calls need them: calls one after another used the first only.
    assert_eq!(
        (&sw["pool_size"], &sw["instances"], &sw["queued_events"]),
        (&2.into(), &1.into(), &0.into())
    );
    // start, the resync's list, two statuses.
    let calls = &sw["calls"];
    assert_eq!((&calls["total"], &calls["errors"]), (&4.into(), &1.into()), "{calls}");
    let (p50, p99) = (calls["p50_ms"].as_f64().unwrap(), calls["p99_ms"].as_f64().unwrap());
    let mean = calls["mean_ms"].as_f64().unwrap();
    assert!(0.0 < p50 && p50 <= p99 && mean <= p99, "{calls}");
    let last = &calls["last_error"];
    assert!(
        last["message"].as_str().unwrap().contains("not a ManifestBundleStatus"),
        "{last}"
    );
    let loaded = time(&sw["loaded_at"]);
    assert!(started <= loaded && loaded <= time(&last["at"]), "{sw}");
    // The same counts on /metrics, by call and outcome.
    let (_, metrics) = c.admin_get("/metrics").await.unwrap();
    for (call, outcome, n) in [
        ("start", "ok", 1),
        ("list", "ok", 1),
        ("handle", "ok", 1),
        ("handle", "error", 1),
    ] {
        let series =
            format!("conductor_plugin_calls_total{{call=\"{call}\",outcome=\"{outcome}\",plugin=\"static\"}} {n}");
        assert!(metrics.lines().any(|l| l == series), "no {series} in\n{metrics}");
    }
    assert!(metrics.contains("conductor_plugin_call_duration_seconds_count{call=\"handle\",plugin=\"static\"} 2"));
    let mem = by_name("leases");
    assert_eq!(mem["form"], "memory");
    assert_eq!(mem["calls"], Value::Null, "the memory source's calls are not counted");
    for none in ["file", "declared_name", "version", "contract"] {
        assert_eq!(mem[none], Value::Null, "{none}");
    }
    assert_eq!(
        (&mem["pool_size"], &mem["instances"], &mem["queued_events"]),
        (&1.into(), &1.into(), &0.into())
    );
    assert_eq!(strings(&mem["sources"]), ["leases"]);
    assert_eq!(strings(&mem["data_types"]), [LEASES]);
    let (ok, table, err) = cli(&c, &["inspect", "plugins"]);
    assert!(ok, "{err}");
    let r = row(&table, "static");
    assert_eq!(
        r[..6],
        ["static", "component", env!("CARGO_PKG_VERSION"), "1/2", "4", "1"]
    );
    assert_eq!(r[6], format!("{p50:.2}ms"));
    assert_eq!(r[7], format!("{p99:.2}ms"));
    assert_eq!(r[8..11], ["0", "static", "emit,log,timer,kv,pg,kube"]);
    assert_eq!(row(&table, "leases")[..6], ["leases", "memory", "-", "1/1", "-", "-"]);
    assert!(
        table.contains("static: last error") && table.contains("not a ManifestBundleStatus"),
        "{table}"
    );

    // One plugin, with what it keeps in `kv`: the status static-works stored (the refused one is
    // not kept), as JSON and as a table; the memory source keeps none; an unknown name is a 404.
    let detail = inspect_json_of(&c, &["plugin", "static"]);
    assert_eq!(
        (&detail["name"], &detail["form"]),
        (&"static".into(), &"component".into())
    );
    assert_eq!(detail["calls"]["total"], 4, "the row of `inspect plugins`: {detail}");
    let stored = r#"{"conditions":[]}"#;
    let key = "status/cluster1/web";
    assert_eq!(
        kv_of(&detail),
        (
            1,
            (key.len() + stored.len()) as u64,
            vec![(key.to_owned(), stored.len() as u64, stored.to_owned())]
        ),
        "{detail}"
    );
    assert_eq!(
        detail["kv"]["entries"][0]["base64"],
        Value::Null,
        "a UTF-8 value is shown as text"
    );
    let (ok, table, err) = cli(&c, &["inspect", "plugin", "static"]);
    assert!(ok, "{err}");
    assert_eq!(
        row(&table, "static")[..6],
        ["static", "component", env!("CARGO_PKG_VERSION"), "1/2", "4", "1"]
    );
    assert!(
        table.contains(&format!("kv: 1 keys, {} bytes", key.len() + stored.len())),
        "{table}"
    );
    assert_eq!(row(&table, key), [key, "17", stored], "{table}");
    let memory = inspect_json_of(&c, &["plugin", "leases"]);
    assert_eq!(memory["kv"], Value::Null, "{memory}");
    let (ok, table, err) = cli(&c, &["inspect", "plugin", "leases"]);
    assert!(ok && table.contains("kv: none"), "{table}{err}");
    let (ok, _, err) = cli(&c, &["inspect", "plugin", "nope"]);
    assert!(!ok);
    assert!(err.contains("404") && err.contains("no plugin named \"nope\""), "{err}");
    let (code, _) = c.admin_get("/inspect/plugins/nope").await.unwrap();
    assert_eq!(code, 404);

    // Routes.
    let routes = inspect_json(&c, "routes");
    let listed: Vec<(&str, &str)> = routes["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["source"].as_str().unwrap(), r["plugin"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [("leases", "leases"), ("static", "static")]);
    assert_eq!(strings(&routes["routes"][1]["data_types"]), [WORKS]);
    assert_eq!(routes["config_file"], c.config_path().display().to_string());
    assert_eq!(routes["last_reload"], Value::Null);

    // A reload that changes the pool: applied, reported, and the plugin's counters start anew.
    c.rewrite_config(&config(3));
    let (ok, out, err) = cli(&c, &["reload"]);
    assert!(ok, "{err}");
    let changes: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(strings(&changes["replaced"]), ["static"]);
    assert_eq!(strings(&changes["kept"]), ["leases"]);
    let sw = inspect_json(&c, "plugins")[1].clone();
    assert_eq!(sw["name"], "static");
    assert_eq!((&sw["pool_size"], &sw["instances"]), (&3.into(), &1.into()));
    assert_eq!(sw["calls"]["total"], 1, "only its start so far");
    assert!(time(&sw["loaded_at"]) > loaded);
    assert_eq!(
        kv_of(&inspect_json_of(&c, &["plugin", "static"])).2[0].0,
        key,
        "kv is kept across the reload"
    );
    let reload = &inspect_json(&c, "routes")["last_reload"];
    assert_eq!(reload["applied"], true);
    assert_eq!(strings(&reload["changes"]["replaced"]), ["static"]);
    let (_, table, _) = cli(&c, &["inspect", "routes"]);
    assert!(
        table.contains("s ago, applied") || table.contains("0s ago, applied"),
        "{table}"
    );

    // A broken configuration: refused, the command fails, the routes say why.
    std::fs::write(c.config_path(), "[server]\nlisen = 1\n").unwrap();
    let (ok, _, err) = cli(&c, &["reload"]);
    assert!(!ok);
    assert!(err.contains("422") && err.contains("server.lisen"), "{err}");
    let reload = &inspect_json(&c, "routes")["last_reload"];
    assert_eq!(reload["applied"], false);
    assert!(reload["error"].as_str().unwrap().contains("server.lisen"), "{reload}");
    assert_eq!(
        inspect_json(&c, "plugins")[1]["pool_size"],
        3,
        "the running plugins stay"
    );
}

#[test]
fn an_unreachable_admin_endpoint_is_a_clear_error() {
    let out = Command::new(conductor_bin())
        .args(["inspect", "plugins", "--admin", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the admin endpoint at 127.0.0.1:1"), "{err}");
    let out = Command::new(conductor_bin())
        .args(["reload", "--admin", "ftp://x:1"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid admin URL"));
}
