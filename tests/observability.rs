//! The monitoring assets of `deploy/observability` against the real thing: every metric the
//! Grafana dashboard and the Prometheus rules read is exported by a running conductor that serves
//! agents over TLS with the kube source (a real API server), the maestro source (a real
//! PostgreSQL) and plugins that fail, time out and hit their limits; a real Prometheus (Debian's
//! package) scrapes conductor as the ServiceMonitor does (HTTPS, a bearer token checked with a
//! TokenReview and a SubjectAccessReview) and evaluates the repository's rules against live data;
//! the dashboard is well formed; every alert has its runbook section.

#[path = "support/auth.rs"]
mod auth_api;
#[path = "support/kube.rs"]
mod kube_api;
#[path = "support/maestro.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use auth_api::KnownToken;
use conductor_blackbox_tests::certs::Pki;
use conductor_blackbox_tests::events::{self, attr_str};
use conductor_blackbox_tests::proto::{PublishRequest, SubscriptionRequest};
use conductor_blackbox_tests::{
    CloudEventServiceClient, Conductor, Form, LEASES, MEMORY_SOURCE, WORKS, free_port, http_get, plugin_artifact,
    proto, publish, subscribe,
};
use futures::StreamExt as _;
use kube_api::{KubeApi, kube_config};
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;

const AGENT1: &str = "system:open-cluster-management:cluster1:agent1";
const CLUSTER1: &str = "system:open-cluster-management:cluster1";
const CLUSTER2_TOKEN: &str = "token-of-cluster2";
const SCRAPER_TOKEN: &str = "token-of-prometheus";
const WORK_PATH: &str = "/apis/work.open-cluster-management.io/v1";
const CLUSTER_PATH: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
/// The alerts' runbooks, a section (`## AlertName`) each.
const RUNBOOKS: &str = "docs/how-to/alerts.md";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository")
        .to_owned()
}

fn observability(file: &str) -> PathBuf {
    repo().join("deploy/observability").join(file)
}

/// `check_dashboard.py` on the dashboard and the rules, with `args`: (success, stdout, stderr).
fn check_dashboard(args: &[&str]) -> (bool, String, String) {
    let out = Command::new("python3")
        .arg(observability("check_dashboard.py"))
        .arg(observability("grafana-dashboard.json"))
        .arg(observability("rules.yml"))
        .args(args)
        .output()
        .expect("python3 runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One sample of the Prometheus text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap_or((line, ""));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let mut map = BTreeMap::new();
        let mut rest = labels;
        while let Some((key, after)) = rest.split_once("=\"") {
            // Label values here hold no escaped quotes.
            let (value, after) = after.split_once('"').unwrap_or((after, ""));
            map.insert(key.trim_start_matches(',').to_owned(), value.to_owned());
            rest = after;
        }
        out.push(Sample {
            name: name.to_owned(),
            labels: map,
            value: value.parse().unwrap_or(f64::NAN),
        });
    }
    out
}

/// The sum of the samples of `name` whose labels include `labels`.
fn total(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text)
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

/// Whether `/metrics` has a sample of `name` whose labels include `labels`.
fn has(text: &str, name: &str, labels: &[(&str, &str)]) -> bool {
    samples(text).iter().any(|s| {
        s.name == name
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

/// Scrapes conductor's plain admin endpoint until `ready` holds (at most `within`).
async fn scrape_until(c: &Conductor, what: &str, within: Duration, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + within;
    loop {
        let (status, text) = c.admin_get("/metrics").await.expect("the admin endpoint answers");
        assert_eq!(status, 200, "{text}");
        if ready(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; metrics:\n{text}\nlogs:\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A serving certificate mounted the way a Kubernetes Secret volume is (files that are symlinks
/// into `..data`), so that a later [`rotate`] swaps it atomically: (tls.crt, tls.key).
fn mounted_certificate(pki: &Pki, name: &str) -> (PathBuf, PathBuf) {
    let secret = pki.dir.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::create_dir(secret.join("..v1")).unwrap();
    for (ext, to) in [("crt", "tls.crt"), ("key", "tls.key")] {
        std::fs::copy(pki.dir.join(format!("{name}.{ext}")), secret.join("..v1").join(to)).unwrap();
        std::os::unix::fs::symlink(format!("..data/{to}"), secret.join(to)).unwrap();
    }
    std::os::unix::fs::symlink("..v1", secret.join("..data")).unwrap();
    (secret.join("tls.crt"), secret.join("tls.key"))
}

/// The mounted Secret now holds `name`'s certificate and key.
fn rotate(pki: &Pki, name: &str) {
    let secret = pki.dir.join("secret");
    std::fs::create_dir(secret.join("..v2")).unwrap();
    for (ext, to) in [("crt", "tls.crt"), ("key", "tls.key")] {
        std::fs::copy(pki.dir.join(format!("{name}.{ext}")), secret.join("..v2").join(to)).unwrap();
    }
    std::os::unix::fs::symlink("..v2", secret.join("..data_tmp")).unwrap();
    std::fs::rename(secret.join("..data_tmp"), secret.join("..data")).unwrap();
}

/// An agent with `client`'s certificate on a connection of its own whose HTTP/2 windows are
/// grpc-go's defaults (64 KiB): when it stops reading, its stream fills up.
async fn slow_agent(pki: &Pki, c: &Conductor, client: &str) -> CloudEventServiceClient<Channel> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let read = |file: String| std::fs::read(pki.dir.join(file)).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(pki.ca()).unwrap()))
        .domain_name("localhost")
        .identity(Identity::from_pem(
            read(format!("{client}.crt")),
            read(format!("{client}.key")),
        ));
    let port = c.grpc_addr.rsplit(':').next().unwrap();
    let channel = Channel::from_shared(format!("https://localhost:{port}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .initial_stream_window_size(Some(65_535))
        .initial_connection_window_size(Some(65_535))
        .connect()
        .await
        .unwrap();
    CloudEventServiceClient::new(channel)
}

fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

/// A lease create for the memory source (the kube source serves leases too: the agent names the
/// source it means in `originalsource`).
fn lease(cluster: &str, id: &str, name: &str) -> proto::CloudEvent {
    let mut e = events::create(LEASES, cluster, id, name);
    e.attributes
        .insert("ce-originalsource".into(), events::string("memory"));
    e
}

/// A work status update for resource `id` of the source `original`, as the work agent sends it.
fn work_status(id: &str, original: &str, generation: i32) -> proto::CloudEvent {
    let mut e = events::with_id(
        events::agent_event(
            &format!("{WORKS}.status.update_request"),
            "cluster1",
            original,
            Some(
                json!({"conditions": [{"type": "Applied", "status": "True", "reason": "Applied", "message": "applied",
                "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": generation}], "resourceStatus": []}),
            ),
        ),
        id,
    );
    e.attributes
        .insert("ce-resourceversion".into(), events::integer(generation));
    e.attributes
        .insert("ce-sequenceid".into(), events::string("7000000000000000001"));
    e
}

/// Every metric name the dashboard and the rules read is exported by a conductor that serves what
/// a hub serves and meets what the panels and alerts watch for: agents subscribing, publishing and
/// resyncing over TLS (a client certificate, a token, a forged token), the kube source writing to a
/// real API server and counting joined ManagedClusters, the maestro source on a real PostgreSQL
/// (catch-ups every second, a lost LISTEN), plugins that fail, time out and hit their limits, host
/// events coalesced, a slow subscriber cut off, a certificate rotated, and the connection limit
/// and the TLS handshake timeout biting. The same scrape is checked against the metrics reference
/// (`docs/reference/metrics.md`): every metric it exports is documented there with its type and
/// labels, and every metric documented is exported or documented as appearing only under a
/// condition.
#[tokio::test(flavor = "multi_thread")]
async fn every_metric_the_dashboard_and_the_rules_read_is_exported() {
    let (ok, names, stderr) = check_dashboard(&["--metric-names"]);
    assert!(ok, "check_dashboard.py --metric-names failed: {stderr}");
    let used: BTreeSet<String> = names.lines().map(str::to_owned).collect();
    assert!(used.len() > 40, "the dashboard and the rules read {used:?}");
    // The reference is well formed before anything is started.
    documented_families(&std::fs::read_to_string(repo().join(METRICS_REFERENCE)).unwrap());

    let api = tokio::task::spawn_blocking(KubeApi::start).await.unwrap();
    let (auth_routes, reviews) = auth_api::routes(vec![KnownToken {
        token: CLUSTER2_TOKEN,
        user: "system:serviceaccount:open-cluster-management-agent:cluster2-agent",
        groups: &["system:open-cluster-management:cluster2", "system:serviceaccounts"],
    }]);
    let front = api.front_with(auth_routes).await;
    let mut db = support::MaestroDb::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "ca");
    pki.server("server1", "conductor-1");
    pki.server("server2", "conductor-2");
    pki.client("agent1", AGENT1, &[CLUSTER1]);
    let (cert, key) = mounted_certificate(&pki, "server1");
    // Token and client-certificate authentication and SubjectAccessReviews ([auth] defaults).
    // The admin endpoint stays plain HTTP on loopback here: the Prometheus test below scrapes it
    // over HTTPS with a token.
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:0"
max_connections = 8
tls_handshake_timeout = "1s"
[server.tls]
cert_file = "{cert}"
key_file = "{key}"
client_ca_file = "{ca}"
reload_interval = "200ms"
[broker]
heartbeat_interval = "100ms"
subscriber_queue_size = 16
subscriber_stall_timeout = "1s"
[admin]
listen = "127.0.0.1:0"
[log]
format = "json"
level = "info"
{kube}
{maestro}
[plugins.greedy]
kind = "component"
file = "{greedy}"
grants = ["log", "timer", "kv", "metrics"]
limits = {{ kv_keys = 20, timers = 5, metric_series = 5 }}
[plugins.chaos]
kind = "component"
file = "{chaos}"
pool_size = 2
limits = {{ call_timeout = "500ms" }}
[plugins.memory]
kind = "memory"
config = {{ data_types = ["{LEASES}"] }}
[routes]
memory = "memory"
"#,
        cert = cert.display(),
        key = key.display(),
        ca = pki.ca().display(),
        kube = kube_config(&front, Form::Component),
        maestro = support::config(&db.url(), "1s"),
        greedy = plugin_artifact("greedy-plugin", Form::Component).display(),
        chaos = plugin_artifact("misbehaving-plugin", Form::Component).display(),
    );
    let c = Conductor::start_with_config(&config).unwrap();

    // An agent with a client certificate gets a ManifestWork and a Maestro resource, and reports
    // their status (the kube source patches the API server; the maestro source writes PostgreSQL).
    let mut agent1 = pki.agent(&c, Some("agent1")).await;
    let mut works = subscribe(&mut agent1, "cluster1", WORKS).await.unwrap();
    let work = json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "observed", "namespace": "cluster1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "observed", "namespace": "default"}}]}},
    });
    let (code, body) = api.request(
        "POST",
        &format!("{WORK_PATH}/namespaces/cluster1/manifestworks"),
        Some(&work),
    );
    assert_eq!(code, 201, "{body}");
    let uid = serde_json::from_str::<Value>(&body).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    support::next_where(&mut works, "the ManifestWork", |e| {
        attr_str(e, "ce-resourceid") == Some(uid.as_str())
    })
    .await;
    publish(&mut agent1, work_status(&uid, "kube", 1)).await.unwrap();
    let (resource, _) = db.create("cluster1", "from-maestro", true).await;
    support::next_where(&mut works, "the Maestro resource", support::spec_of(&resource, 1)).await;
    publish(
        &mut agent1,
        support::status_update("cluster1", &resource, 1, 1, "Applied"),
    )
    .await
    .unwrap();
    // A resync: every source of works answers.
    publish(&mut agent1, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    support::next_where(&mut works, "a resync answer", |e| {
        e.r#type.ends_with(".spec.resync_response")
    })
    .await;

    // A ManagedCluster joins: the kube source counts it.
    let cluster = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "cluster1"}, "spec": {"hubAcceptsClient": true}});
    let (code, body) = api.request("POST", CLUSTER_PATH, Some(&cluster));
    assert_eq!(code, 201, "{body}");
    let joined = json!({"status": {"conditions": [{"type": "ManagedClusterJoined", "status": "True",
        "reason": "ManagedClusterJoined", "message": "joined", "lastTransitionTime": "2026-11-30T10:00:00Z"}]}});
    let (code, body) = api.request("PATCH", &format!("{CLUSTER_PATH}/cluster1/status"), Some(&joined));
    assert_eq!(code, 200, "{body}");

    // Plugins that take more than their limits allow, fail, and run past their call timeout.
    for what in ["kv-keys", "timers", "metrics"] {
        let refused = publish(&mut agent1, work_status(what, "greedy", 1)).await.unwrap_err();
        assert_eq!(refused.code(), Code::FailedPrecondition, "{what}: {refused:?}");
    }
    for what in ["panic", "loop"] {
        let failed = publish(&mut agent1, work_status(what, "chaos", 1)).await.unwrap_err();
        assert_eq!(failed.code(), Code::FailedPrecondition, "{what}: {failed:?}");
    }
    // A limit that refused is loud: /readyz says which plugin and which limit (log lines aside),
    // and the inspector lists the refusals.
    let (code, why) = c.admin_get("/readyz").await.unwrap();
    assert_eq!(code, 503, "{why}");
    for limit in ["kv_keys", "timers", "metric_series"] {
        assert!(
            why.contains(&format!("plugin \"greedy\": limits.{limit} refused")),
            "{why}"
        );
    }
    let (_, plugins) = c.admin_get("/inspect/plugins").await.unwrap();
    let plugins: Value = serde_json::from_str(&plugins).unwrap();
    let greedy = plugins
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "greedy")
        .unwrap();
    for limit in ["kv_keys", "timers", "metric_series"] {
        assert!(greedy["limits_refused"][limit]["count"].as_u64() >= Some(1), "{greedy}");
    }

    // An agent with a token (a TokenReview), and one with a forged token.
    let mut agent2 = pki.agent(&c, None).await;
    agent2
        .publish(with_token(
            PublishRequest {
                event: Some(lease("cluster2", "lease2", "lease2")),
            },
            CLUSTER2_TOKEN,
        ))
        .await
        .unwrap();
    let refused = agent2
        .publish(with_token(
            PublishRequest {
                event: Some(lease("cluster2", "lease3", "lease3")),
            },
            "forged",
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(reviews.refused().is_empty(), "{:?}", reviews.refused());

    // A burst of one NOTIFY, each in a transaction of its own: those that arrive while the first
    // waits for the plugin are coalesced into it.
    let payload = uuid::Uuid::new_v4().to_string();
    let burst: String = (0..200)
        .map(|_| format!("BEGIN; SELECT pg_notify('events', '{payload}'); COMMIT; "))
        .collect();
    let coalesced = |m: &str| has(m, "conductor_plugin_events_coalesced_total", &[("plugin", "maestro")]);
    for _ in 0..5 {
        sqlx::raw_sql(sqlx::AssertSqlSafe(burst.clone()))
            .execute(&db.pool)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        if coalesced(&c.admin_get("/metrics").await.unwrap().1) {
            break;
        }
    }
    scrape_until(&c, "coalesced notifications", Duration::from_secs(10), coalesced).await;

    // A subscriber that stops reading while its events pile up is cut off after the stall
    // timeout.
    let mut slow = slow_agent(&pki, &c, "agent1").await;
    let stuck = slow
        .subscribe(SubscriptionRequest {
            source: String::new(),
            cluster_name: "cluster1".into(),
            data_type: LEASES.into(),
        })
        .await
        .unwrap();
    let pad = "x".repeat(4096);
    for i in 0..150 {
        let mut e = lease("cluster1", &format!("lease-{i}"), "lease");
        e.data = Some(proto::cloud_event::Data::BinaryData(
            serde_json::to_vec(&json!({"metadata": {"name": format!("lease-{i}")}, "pad": pad})).unwrap(),
        ));
        publish(&mut agent1, e).await.unwrap();
    }
    scrape_until(&c, "the slow subscriber cut off", Duration::from_secs(20), |m| {
        total(m, "conductor_subscribers_cut_off_total", &[("data_type", LEASES)]) >= 1.0
    })
    .await;
    drop(stuck);

    // The serving certificate is renewed on disk.
    rotate(&pki, "server2");
    scrape_until(&c, "the certificate reloaded", Duration::from_secs(10), |m| {
        total(m, "conductor_tls_reloads_total", &[("result", "ok")]) >= 1.0
    })
    .await;

    // PostgreSQL goes away and comes back: the LISTEN connection is lost, then made again.
    db.stop().await;
    scrape_until(&c, "the LISTEN connection lost", Duration::from_secs(20), |m| {
        total(m, "conductor_database_listener_lost_total", &[("database", "maestro")]) >= 1.0
    })
    .await;
    db.restart().await;

    // More connections than server.max_connections, none finishing its TLS handshake: the ones
    // over the limit are refused at once, the others dropped after the handshake timeout; one
    // sends what is not TLS.
    let mut idle = Vec::new();
    for _ in 0..10 {
        idle.push(tokio::net::TcpStream::connect(&c.grpc_addr).await.unwrap());
    }
    let mut garbage = tokio::net::TcpStream::connect(&c.grpc_addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut garbage, b"GET / HTTP/1.1\r\nHost: conductor\r\n\r\n")
        .await
        .unwrap();
    scrape_until(
        &c,
        "refused connections and failed handshakes",
        Duration::from_secs(10),
        |m| {
            total(m, "conductor_grpc_connections_refused_total", &[("reason", "limit")]) >= 1.0
                && total(m, "conductor_tls_handshake_failures_total", &[("reason", "timeout")]) >= 1.0
        },
    )
    .await;
    drop((idle, garbage));

    // What the driving above must have counted.
    let metrics = scrape_until(
        &c,
        "the Maestro catch-ups and the joined cluster",
        Duration::from_secs(30),
        |m| {
            total(
                m,
                "conductor_maestro_catch_up_runs_total",
                &[("plugin", "maestro"), ("outcome", "ok")],
            ) >= 1.0
                && total(m, "conductor_kube_managed_clusters_joined", &[("plugin", "kube")]) == 1.0
        },
    )
    .await;
    for (name, labels, what) in [
        (
            "conductor_plugin_call_timeouts_total",
            &[("plugin", "chaos"), ("call", "handle"), ("limit", "call_timeout")][..],
            "the looping call",
        ),
        (
            "conductor_plugin_calls_total",
            &[("plugin", "chaos"), ("call", "handle"), ("outcome", "error")],
            "the failed calls",
        ),
        (
            "conductor_plugin_limit_refusals_total",
            &[("plugin", "greedy"), ("limit", "kv_keys")],
            "the greedy plugin's kv keys",
        ),
        (
            "conductor_plugin_limit_refusals_total",
            &[("plugin", "greedy"), ("limit", "timers")],
            "the greedy plugin's timers",
        ),
        (
            "conductor_plugin_limit_refusals_total",
            &[("plugin", "greedy"), ("limit", "metric_series")],
            "the greedy plugin's series",
        ),
        (
            "conductor_kube_requests_total",
            &[("plugin", "kube"), ("verb", "patch"), ("code", "200")],
            "the status written to the API server",
        ),
        (
            "conductor_database_statements_total",
            &[("plugin", "maestro"), ("database", "maestro"), ("outcome", "ok")],
            "the maestro source's statements",
        ),
        (
            "conductor_auth_reviews_total",
            &[("review", "TokenReview"), ("outcome", "reviewed")],
            "the tokens reviewed",
        ),
        (
            "conductor_grpc_auth_refused_total",
            &[("grpc_code", "Unauthenticated")],
            "the forged token",
        ),
        (
            "conductor_resyncs_total",
            &[("data_type", WORKS), ("outcome", "ok")],
            "the resync",
        ),
        ("conductor_heartbeats_sent_total", &[("data_type", WORKS)], "heartbeats"),
    ] {
        assert!(
            total(&metrics, name, labels) >= 1.0,
            "{what}: {name}{labels:?}\n{metrics}"
        );
    }

    let exported: BTreeSet<String> = samples(&metrics).into_iter().map(|s| s.name).collect();
    let missing: Vec<&String> = used.iter().filter(|name| !exported.contains(*name)).collect();
    assert!(
        missing.is_empty(),
        "read by the dashboard or the rules, not exported: {missing:?}\n{metrics}"
    );
    let problems = metrics_reference_problems(&metrics);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    drop(works);
}

/// The metrics reference: one row per metric, `| metric | type | labels | meaning |`.
const METRICS_REFERENCE: &str = "docs/reference/metrics.md";

/// A metric family of a scrape, or of the reference: its type and its labels.
#[derive(Debug, PartialEq)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
}

/// The families a scrape exports (`# TYPE` lines), with the labels their samples carry (a
/// histogram's `le` aside).
fn exported_families(text: &str) -> BTreeMap<String, Family> {
    let mut families = BTreeMap::new();
    for line in text.lines() {
        if let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|rest| rest.split_once(' ')) {
            families.insert(
                name.to_owned(),
                Family {
                    kind: kind.to_owned(),
                    labels: BTreeSet::new(),
                },
            );
        }
    }
    for sample in samples(text) {
        let family = ["", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                sample
                    .name
                    .strip_suffix(suffix)
                    .filter(|name| families.contains_key(*name))
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| panic!("sample {} of no # TYPE", sample.name));
        let labels = &mut families.get_mut(&family).unwrap().labels;
        labels.extend(sample.labels.into_keys().filter(|l| l != "le" && l != "quantile"));
    }
    families
}

/// The backquoted names of a cell (`` `a`, `b` `` → a, b).
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// Each documented metric: its family, whether it appears only under a condition (its meaning
/// starts with `*Only …`), and the line it is documented on.
fn documented_families(text: &str) -> BTreeMap<String, (Family, bool, usize)> {
    let mut documented = BTreeMap::new();
    let mut in_table = false;
    for (i, line) in text.lines().enumerate() {
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        if cells.first() == Some(&"metric") {
            assert_eq!(
                cells,
                ["metric", "type", "labels", "meaning"],
                "{METRICS_REFERENCE}:{}: a metric table's columns are metric, type, labels, meaning",
                i + 1
            );
            in_table = true;
            continue;
        }
        if !in_table || line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')) {
            continue;
        }
        let names = quoted(cells[0]);
        assert_eq!(
            names.len(),
            1,
            "{METRICS_REFERENCE}:{}: one metric a row: {line}",
            i + 1
        );
        let family = Family {
            kind: cells[1].to_owned(),
            labels: quoted(cells[2]).into_iter().collect(),
        };
        let conditional = cells.get(3).is_some_and(|m| m.starts_with("*Only "));
        let previous = documented.insert(names[0].clone(), (family, conditional, i + 1));
        assert!(previous.is_none(), "{METRICS_REFERENCE}:{}: {} twice", i + 1, names[0]);
    }
    documented
}

/// What the metrics reference and a scrape disagree on.
fn metrics_reference_problems(scrape: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(METRICS_REFERENCE)).unwrap();
    let documented = documented_families(&text);
    let exported = exported_families(scrape);
    let mut problems = Vec::new();
    for (name, family) in &exported {
        // The test plugin's own metric (`greedy_things`): not one conductor or its plugins ship.
        if name.starts_with("conductor_greedy_") {
            continue;
        }
        match documented.get(name) {
            None => problems.push(format!(
                "{name} ({}, labels {:?}) is exported but not in {METRICS_REFERENCE}",
                family.kind, family.labels
            )),
            Some((doc, _, line)) if doc != family => problems.push(format!(
                "{METRICS_REFERENCE}:{line}: {name} is documented as {} with labels {:?}; it is exported as {} with labels {:?}",
                doc.kind, doc.labels, family.kind, family.labels
            )),
            Some(_) => {}
        }
    }
    for (name, (_, conditional, line)) in &documented {
        if !conditional && !exported.contains_key(name) {
            problems.push(format!(
                "{METRICS_REFERENCE}:{line}: {name} is documented but not exported; if it appears only under a condition, start its meaning with *Only …*"
            ));
        }
    }
    problems
}

/// A Prometheus server started in a test, killed when dropped.
struct Prometheus {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Debian's `prometheus` (`$CONDUCTOR_PROMETHEUS`) on 127.0.0.1 with `config`, its data in a
    /// temporary folder; returns once it answers.
    async fn start(config: &str) -> Self {
        let binary = std::env::var_os("CONDUCTOR_PROMETHEUS")
            .expect("CONDUCTOR_PROMETHEUS is not set: run scripts/setup-test-env.sh (the README's test command does)");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let prometheus = Self { child, addr, dir };
        prometheus
            .eventually("Prometheus ready", Duration::from_secs(30), async |p| {
                matches!(http_get(&p.addr, "/-/ready").await, Ok((200, _)))
            })
            .await;
        prometheus
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET path` of the HTTP API: its `data`, after checking `status` is `success`.
    async fn api(&self, path: &str) -> Value {
        let (code, body) = http_get(&self.addr, path).await.unwrap();
        let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert!(code == 200 && answer["status"] == "success", "{path}: {code} {body}");
        answer["data"].clone()
    }

    /// The instant vector `query` evaluates to now.
    async fn query(&self, query: &str) -> Vec<Value> {
        let data = self.api(&format!("/api/v1/query?query={}", url_encode(query))).await;
        data["result"].as_array().cloned().unwrap_or_default()
    }

    async fn eventually<F: AsyncFn(&Self) -> bool>(&self, what: &str, within: Duration, check: F) {
        let deadline = Instant::now() + within;
        while !check(self).await {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; Prometheus's log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// `s` percent-encoded for a URL's query.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// rules.yml, parsed.
fn rules() -> Value {
    let text = std::fs::read_to_string(observability("rules.yml")).unwrap();
    serde_saphyr::from_str(&text).expect("rules.yml is YAML")
}

/// The expression of the rule that records or alerts as `name`.
fn rule_expr(rules: &Value, name: &str) -> String {
    rules["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .find(|r| r["alert"] == name || r["record"] == name)
        .and_then(|r| r["expr"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no rule {name} in rules.yml"))
}

/// The value of one sample of a query's answer.
fn sample_value(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Debian's Prometheus scrapes a running conductor as the ServiceMonitor does — HTTPS, the CA of
/// the serving certificate, the server name it carries, a bearer token that conductor checks with
/// a TokenReview and a SubjectAccessReview for `get /metrics` — under the job name the rules
/// expect, loads the repository's rules.yml, and evaluates them against live data: the target is
/// up, every rule evaluates without error, a recording rule has the Publish rate of the data type
/// agents publish, and the alert on expiring certificates sees the test certificate (valid for two
/// days) and is pending.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_scrapes_conductor_and_evaluates_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "ca");
    let (cert, key) = pki.server("server", "conductor");
    let auth = auth_api::AuthApi::start(vec![KnownToken {
        token: SCRAPER_TOKEN,
        user: "system:serviceaccount:monitoring:prometheus-k8s",
        groups: &[auth_api::METRICS_READERS, "system:serviceaccounts"],
    }])
    .await;
    let c = Conductor::start_with_config(&format!(
        r#"
[server]
listen = "127.0.0.1:0"
[server.tls]
cert_file = "{cert}"
key_file = "{key}"
[auth]
authenticators = []
authorization = "allow-all"
[kubernetes]
kubeconfig = "{kubeconfig}"
[admin]
listen = "127.0.0.1:0"
authorization = "sar"
[admin.tls]
cert_file = "{cert}"
key_file = "{key}"
[log]
format = "json"
level = "info"
{MEMORY_SOURCE}"#,
        cert = cert.display(),
        key = key.display(),
        kubeconfig = auth.kubeconfig.display(),
    ))
    .unwrap();
    let admin = c.admin_addr.clone().expect("the admin endpoint");
    let prometheus = Prometheus::start(&format!(
        r#"
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: conductor-metrics
    scheme: https
    authorization:
      type: Bearer
      credentials: {SCRAPER_TOKEN}
    tls_config:
      ca_file: {ca}
      server_name: localhost
    static_configs:
      - targets: ["{admin}"]
        labels:
          namespace: open-cluster-management-hub
          pod: conductor-0
"#,
        rules = observability("rules.yml").display(),
        ca = pki.ca().display(),
    ))
    .await;

    // The target is up.
    prometheus
        .eventually("the conductor target up", Duration::from_secs(30), async |p| {
            let targets = p.api("/api/v1/targets").await;
            targets["activeTargets"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["labels"]["job"] == "conductor-metrics" && t["health"] == "up")
        })
        .await;
    assert!(
        auth.reviews().access_reviews().iter().any(|r| {
            r["spec"]["nonResourceAttributes"] == json!({"path": "/metrics", "verb": "get"})
                && r["spec"]["user"] == "system:serviceaccount:monitoring:prometheus-k8s"
        }),
        "Prometheus's scrapes were authorized with a SubjectAccessReview: {:?}",
        auth.reviews().access_reviews()
    );
    let up = prometheus.query("up{job=\"conductor-metrics\"}").await;
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(sample_value(&up[0]), 1.0, "{up:?}");

    // Agents publish (every 200 ms while the test waits for the rules to see it).
    let mut agent = pki.agent(&c, None).await;
    let publishing = tokio::spawn(async move {
        for i in 0.. {
            publish(
                &mut agent,
                events::create(LEASES, "cluster1", &format!("lease-{i}"), "lease"),
            )
            .await
            .unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    // A recording rule over live data: the Publish rate of the leases agents publish.
    let rules = rules();
    let record = "data_type:conductor_publish_requests:rate5m";
    rule_expr(&rules, record);
    prometheus
        .eventually("the Publish rate recorded", Duration::from_secs(60), async |p| {
            p.query(record).await.iter().any(|s| {
                s["metric"]["data_type"] == LEASES
                    && s["metric"]["job"] == "conductor-metrics"
                    && s["metric"]["namespace"] == "open-cluster-management-hub"
                    && sample_value(s) > 0.0
            })
        })
        .await;
    publishing.abort();
    // No Publish failed: no error ratio above 0 (with no failed call at all there is no series of
    // errors, and so no ratio).
    let ratio = prometheus
        .query("data_type:conductor_publish_errors:ratio_rate5m")
        .await;
    assert!(ratio.iter().all(|s| sample_value(s) == 0.0), "{ratio:?}");

    // Alert expressions over live data: the test certificate expires within two days, on both
    // listeners (the gRPC server's and the admin endpoint's); conductor is ready and scraped.
    let expiring = prometheus
        .query(&rule_expr(&rules, "ConductorTLSCertificateExpiringSoon"))
        .await;
    let listeners: BTreeSet<&str> = expiring
        .iter()
        .filter_map(|s| s["metric"]["listener"].as_str())
        .collect();
    assert_eq!(listeners, BTreeSet::from(["admin.tls", "server.tls"]), "{expiring:?}");
    for s in &expiring {
        let left = sample_value(s);
        assert!(left > 0.0 && left <= 2.0 * 86_400.0, "{s}");
    }
    for quiet in ["ConductorDown", "ConductorMetricsAbsent", "ConductorNotReady"] {
        let fired = prometheus.query(&rule_expr(&rules, quiet)).await;
        assert!(fired.is_empty(), "{quiet}: {fired:?}");
    }
    let ready = prometheus.query("conductor_ready").await;
    assert_eq!(ready.iter().map(sample_value).collect::<Vec<_>>(), [1.0], "{ready:?}");

    // Every rule of rules.yml evaluates against this data without an error, and the expiry
    // alert is pending (its `for:` has not run out).
    prometheus
        .eventually("every rule evaluated", Duration::from_secs(30), async |p| {
            let groups = p.api("/api/v1/rules").await["groups"].clone();
            let rules: Vec<Value> = groups
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                .collect();
            for r in &rules {
                assert_ne!(r["health"], "err", "{}: {}", r["name"], r["lastError"]);
            }
            !rules.is_empty() && rules.iter().all(|r| r["health"] == "ok")
        })
        .await;
    let alerts = prometheus.api("/api/v1/alerts").await["alerts"].clone();
    let pending: BTreeSet<(&str, &str)> = alerts
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "pending")
        .filter_map(|a| Some((a["labels"]["alertname"].as_str()?, a["labels"]["listener"].as_str()?)))
        .collect();
    assert!(
        pending.contains(&("ConductorTLSCertificateExpiringSoon", "server.tls")),
        "{alerts}"
    );
    let firing: Vec<&Value> = alerts
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing")
        .collect();
    assert!(firing.is_empty(), "{firing:?}");
}

/// A plugin driven past a small `kv_keys` makes its replica unready, naming the plugin and the
/// limit, and fires `ConductorPluginLimitReached`'s expression in a real Prometheus that scrapes
/// it; a plugin that drops log lines over its rate does neither.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_past_its_limit_is_loud() {
    let c = Conductor::start(&format!(
        r#"
[plugins.greedy]
kind = "component"
file = "{greedy}"
grants = ["log", "timer", "kv", "metrics"]
limits = {{ kv_keys = 5, log_lines_per_second = 10 }}
"#,
        greedy = plugin_artifact("greedy-plugin", Form::Component).display(),
    ))
    .unwrap();
    assert_eq!(c.admin_get("/readyz").await.unwrap().0, 200);
    let mut agent = c.client().await.unwrap();
    // Log lines dropped over the rate: counted, and the replica stays ready.
    publish(&mut agent, work_status("log", "greedy", 1)).await.unwrap();
    let (code, why) = c.admin_get("/readyz").await.unwrap();
    assert_eq!(code, 200, "{why}");
    let prometheus = Prometheus::start(&format!(
        r#"
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: conductor-metrics
    static_configs:
      - targets: ["{admin}"]
        labels:
          namespace: open-cluster-management-hub
          pod: conductor-0
"#,
        admin = c.admin_addr.clone().unwrap(),
    ))
    .await;
    let rules = rules();
    let alert = rule_expr(&rules, "ConductorPluginLimitReached");
    // The refusals counted at 0 first, then the plugin takes more keys than it may.
    prometheus
        .eventually("the limit series scraped", Duration::from_secs(30), async |p| {
            !p.query("conductor_plugin_limit_refusals_total{plugin=\"greedy\"}")
                .await
                .is_empty()
        })
        .await;
    assert!(
        prometheus.query(&alert).await.is_empty(),
        "log lines alone fire nothing"
    );
    let refused = publish(&mut agent, work_status("kv-keys", "greedy", 1))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    let (code, why) = c.admin_get("/readyz").await.unwrap();
    assert_eq!(code, 503, "{why}");
    assert!(why.contains("plugin \"greedy\": limits.kv_keys refused"), "{why}");
    prometheus
        .eventually("the alert's expression", Duration::from_secs(30), async |p| {
            p.query(&alert).await.iter().any(|s| {
                s["metric"]["plugin"] == "greedy" && s["metric"]["limit"] == "kv_keys" && sample_value(s) > 0.0
            })
        })
        .await;
}

/// The dashboard passes its structural check (panels, queries, variables, rows) and has the
/// variables and rows the issue asks for.
#[test]
fn the_dashboard_is_well_formed() {
    let (ok, stdout, stderr) = check_dashboard(&[]);
    assert!(ok, "check_dashboard.py: {stdout}{stderr}");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(observability("grafana-dashboard.json")).unwrap()).unwrap();
    let variables: BTreeSet<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for name in ["datasource", "cluster"] {
        assert!(variables.contains(name), "variable {name}: {variables:?}");
    }
    let datasource = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "datasource")
        .unwrap();
    assert_eq!(
        (datasource["type"].as_str(), datasource["query"].as_str()),
        (Some("datasource"), Some("prometheus"))
    );
    let panels = dashboard["panels"].as_array().unwrap();
    let rows: Vec<&str> = panels
        .iter()
        .filter(|p| p["type"] == "row")
        .filter_map(|p| p["title"].as_str())
        .collect();
    for row in ["Agents", "Requests", "Plugins", "Security", "Sources", "Process"] {
        assert!(rows.contains(&row), "row {row}: {rows:?}");
    }
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        assert!(
            panel["description"].as_str().is_some_and(|d| !d.is_empty()),
            "panel {} says what it shows",
            panel["title"]
        );
    }
}

/// Every alert links to a section of the alerts' runbook page of its own name, and that section
/// exists.
#[test]
fn every_alert_has_its_runbook_section() {
    let runbooks = std::fs::read_to_string(repo().join(RUNBOOKS)).unwrap();
    let headings: BTreeSet<&str> = runbooks.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    let rules = rules();
    let alerts: Vec<&Value> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter(|r| r["alert"].is_string())
        .collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    for alert in alerts {
        let name = alert["alert"].as_str().unwrap();
        let annotations = &alert["annotations"];
        for key in ["summary", "description"] {
            assert!(
                annotations[key].as_str().is_some_and(|s| !s.trim().is_empty()),
                "{name}: {key}"
            );
        }
        assert_eq!(
            annotations["runbook_url"].as_str(),
            Some(
                format!(
                    "https://github.com/conductor-rs/conductor/blob/main/{RUNBOOKS}#{}",
                    name.to_lowercase()
                )
                .as_str()
            ),
            "{name}"
        );
        assert!(headings.contains(name), "{RUNBOOKS} has no section ## {name}");
    }
}

/// Clusters that come and go leave nothing behind: 100,000 clusters call in ten waves and leave;
/// once each wave's clusters have been gone for `[admin] forget_idle_consumers_after`, their
/// broker series leave `/metrics`, and resident memory over the last three waves (their median)
/// is within 25 % of the most it reached in the first five. The allocator settles over the first
/// waves (from ~60 MiB after one to 83–92 MiB) and then wanders: three runs here on 2026-12-04
/// ended 13–14 % above the first half's most, one wave reaching +27 % and falling back. With the
/// series kept (the window set to an hour), the same run grew from 75 MiB after the first wave to
/// 659 MiB after the tenth, ≈ 6.6 KB per cluster: a leak of a tenth of that would end ≈ 30 %
/// above.
#[tokio::test(flavor = "multi_thread")]
async fn the_series_of_clusters_that_left_are_forgotten_and_memory_comes_back() {
    const WAVES: usize = 10;
    const PER_WAVE: usize = 10_000;
    // Longer than a wave of calls takes on a loaded machine (1 s was not: a wave's first clusters
    // were forgotten before the scrape that counts them).
    let base =
        conductor_blackbox_tests::BASE_CONFIG.replace("[admin]\n", "[admin]\nforget_idle_consumers_after = \"5s\"\n");
    let c = Conductor::start_with_config(&format!("{base}\n{MEMORY_SOURCE}")).unwrap();
    let mut clients = Vec::new();
    for _ in 0..16 {
        clients.push(c.client().await.unwrap());
    }
    let series_of = |metrics: &str, wave: usize| {
        metrics
            .lines()
            .filter(|l| l.contains(&format!("consumer=\"wave{wave}-")))
            .count()
    };
    let mut settled = 0;
    let mut residents = Vec::new();
    for wave in 0..WAVES {
        let calls = (0..PER_WAVE).map(|n| {
            let mut client = clients[n % clients.len()].clone();
            async move {
                let cluster = format!("wave{wave}-cluster{n}");
                publish(&mut client, events::resync_request(LEASES, &cluster, &[])).await
            }
        });
        let answers: Vec<_> = futures::stream::iter(calls).buffer_unordered(64).collect().await;
        assert!(
            answers.iter().all(Result::is_ok),
            "{:?}",
            answers.iter().find(|a| a.is_err())
        );
        let (_, metrics) = c.admin_get("/metrics").await.unwrap();
        assert!(series_of(&metrics, wave) >= PER_WAVE, "wave {wave}'s series are there");
        conductor_blackbox_tests::eventually(Duration::from_secs(30), "the wave's series forgotten", async || {
            let (_, metrics) = c.admin_get("/metrics").await.unwrap();
            series_of(&metrics, wave) == 0
        })
        .await;
        let resident = conductor_blackbox_tests::resident_kib(c.pid());
        println!("wave {wave}: resident {resident} KiB");
        if wave < WAVES / 2 {
            settled = settled.max(resident);
        }
        residents.push(resident);
    }
    let mut last = residents[WAVES - 3..].to_vec();
    last.sort_unstable();
    let at_the_end = last[1];
    assert!(
        at_the_end <= settled + settled / 4,
        "resident memory grew from at most {settled} KiB in the first half of the waves to {at_the_end} KiB \
         (the median of the last three) after all {WAVES} of {PER_WAVE} clusters: {residents:?}"
    );
}
