//! `conductor-load` against a conductor it is pointed at: every figure it prints must agree with
//! what it sent and with what an independent agent of one of its clusters received; over TLS, its
//! agents present the client certificate or the token of their own cluster from the source
//! addresses given, as conductor sees them.

#[path = "support/auth.rs"]
mod auth_api;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use auth_api::{AuthApi, KnownToken};
use conductor_blackbox_tests::certs::Pki;
use conductor_blackbox_tests::{Conductor, MEMORY_SOURCE, WORKS, load_bin, subscribe};
use serde_json::Value;

const AGENTS: usize = 20;
const RESOURCES_PER_AGENT: usize = 2;
const UPDATES: usize = 60;

#[tokio::test(flavor = "multi_thread")]
async fn the_load_tool_reports_what_it_sent_and_what_arrived() {
    let conductor = Conductor::start(MEMORY_SOURCE).unwrap();
    // An agent of our own for the tool's first cluster, on its own connection.
    let mut client = conductor.client().await.unwrap();
    let mut witness = subscribe(&mut client, "load-0", WORKS).await.unwrap();

    let (url, pid) = (conductor.url(), conductor.pid().to_string());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(load_bin())
            .args([
                "--server",
                &url,
                "--hub",
                "memory",
                "--pid",
                &pid,
                "--progress",
                "false",
            ])
            .args(["--agents", &AGENTS.to_string()])
            .args(["--resources-per-agent", &RESOURCES_PER_AGENT.to_string()])
            .args(["--updates", &UPDATES.to_string(), "--rate", "400"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();

    let creates = (AGENTS * RESOURCES_PER_AGENT) as u64;
    assert_eq!(report["hub"], "memory");
    assert_eq!(report["agents"], AGENTS);
    for (phase, sent) in [("creates", creates), ("updates", UPDATES as u64)] {
        let p = &report[phase];
        assert_eq!(p["sent"], sent, "{phase}: {report:#}");
        assert_eq!(p["delivered"], sent, "{phase}: {report:#}");
        assert_eq!(p["missing"], 0, "{phase}: {report:#}");
        let l = &p["latency_ms"];
        let [p50, p90, p99, max] = ["p50", "p90", "p99", "max"].map(|k| l[k].as_f64().unwrap());
        assert!(0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max, "{phase}: {l}");
        assert!(max < 10_000.0, "{phase}: {l}");
    }
    // The memory source sends each write once, in order, to the one agent of its cluster.
    assert_eq!(report["events_received"], creates + UPDATES as u64, "{report:#}");
    assert_eq!(report["out_of_order"], 0);
    assert_eq!(report["duplicates"], 0);
    assert_eq!(report["write_errors"], 0);
    assert_eq!(report["stream_errors"], 0);
    let server = &report["server_process"];
    assert_eq!(server["pid"], conductor.pid());
    assert!(server["rss_connected_bytes"].as_u64().unwrap() > 0);
    assert!(server["rss_peak_bytes"].as_u64() >= server["rss_end_bytes"].as_u64());
    assert!(server["update_phase_cpu_seconds"].as_f64().unwrap() >= 0.0);
    assert!(server["cpu_seconds_per_1000_deliveries"].is_number());

    // Cluster load-0 holds resources 0 and 20 (one per round of creates); the 60 updates go
    // round robin over the 40 resources, so each of load-0's gets one in the first round and
    // resource 0 another in the second: 2 creates + 3 updates, which the witness saw too.
    let mut seen = BTreeSet::new();
    while seen.len() < 5 {
        let e = tokio::time::timeout(Duration::from_secs(10), witness.next_event())
            .await
            .expect("the witness receives load-0's events")
            .unwrap();
        let id = conductor_blackbox_tests::events::attr_str(&e, "ce-resourceid")
            .unwrap()
            .to_owned();
        seen.insert((id, format!("{:?}", e.attributes.get("ce-resourceversion"))));
    }
    assert!(
        witness.next_raw(Duration::from_millis(500)).await.is_err(),
        "nothing more for load-0"
    );
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let out = std::process::Command::new(load_bin())
        .args(["--hub", "maestro"])
        .env_remove("CONDUCTOR_LOAD_DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--hub maestro needs --database-url"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(load_bin())
        .args(["--server", "http://127.0.0.1:1", "--agents", "1", "--progress", "false"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot connect to http://127.0.0.1:1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `load-<n>`'s group: the SubjectAccessReview double lets it act in namespace `load-<n>`.
fn group(cluster: &str) -> String {
    format!("system:open-cluster-management:{cluster}")
}

/// conductor over TLS (client certificates verified against `pki`'s CA) with `authenticators`
/// and SubjectAccessReview authorization against `auth`.
fn tls_conductor(pki: &Pki, auth: &AuthApi, authenticators: &str) -> Conductor {
    let d = pki.dir.display();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert_file = \"{d}/server.crt\"\nkey_file = \"{d}/server.key\"\nclient_ca_file = \"{d}/ca.crt\"\n\
         [auth]\nauthenticators = {authenticators}\nauthorization = \"sar\"\n[kubernetes]\nkubeconfig = \"{}\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\nlevel = \"info\"\n[reload]\nwatch = false\n{MEMORY_SOURCE}",
        auth.kubeconfig.display()
    );
    Conductor::start_with_config(&config).expect("conductor starts")
}

/// Runs the load tool against `c` with `args` while reading `/inspect/subscribers` every 50 ms;
/// returns its report and the largest set of the tool's subscribers seen at once, cluster →
/// (user, remote address).
async fn load_while_inspecting(c: &Conductor, args: Vec<String>) -> (Value, BTreeMap<String, (String, String)>) {
    let pid = c.pid().to_string();
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(load_bin())
            .args(["--hub", "memory", "--pid", &pid, "--progress", "false"])
            .args(&args)
            .output()
            .unwrap()
    });
    let mut seen = BTreeMap::new();
    while !run.is_finished() {
        let (_, body) = c.admin_get("/inspect/subscribers").await.unwrap();
        let now: BTreeMap<String, (String, String)> = serde_json::from_str::<Vec<Value>>(&body)
            .unwrap()
            .iter()
            .filter(|s| s["cluster"].as_str().is_some_and(|c| c.starts_with("load-")))
            .map(|s| {
                let field = |k: &str| s[k].as_str().unwrap_or_default().to_owned();
                (field("cluster"), (field("user"), field("remote")))
            })
            .collect();
        if now.len() > seen.len() {
            seen = now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = run.await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    for phase in ["creates", "updates"] {
        assert_eq!(report[phase]["missing"], 0, "{phase}: {report:#}");
    }
    assert_eq!(report["write_errors"], 0, "{report:#}");
    assert_eq!(report["stream_errors"], 0, "{report:#}");
    assert_eq!(report["agents"], AGENTS, "{report:#}");
    (report, seen)
}

/// The arguments every TLS run shares: `https://localhost:<port>`, the CA, 20 agents with a
/// work each and updates slow enough (2 s) for the inspector to see them all connected.
fn tls_args(c: &Conductor, pki: &Pki) -> Vec<String> {
    let port = c.grpc_addr.rsplit(':').next().unwrap();
    [
        "--server",
        &format!("https://localhost:{port}"),
        "--ca-file",
        &pki.ca().display().to_string(),
        "--agents",
        &AGENTS.to_string(),
        "--updates",
        "40",
        "--rate",
        "20",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Over TLS each agent presents its own cluster's client certificate (`{cluster}` in the path),
/// its connections leave from 127.0.0.2 and 127.0.0.3 in turn, and the hub presents a certificate
/// of its own: conductor authenticates every agent as its certificate's subject, sees half of
/// them from each address, and asks the API server about each one's cluster.
#[tokio::test(flavor = "multi_thread")]
async fn over_tls_each_agent_presents_its_own_client_certificate_from_the_source_addresses_given() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "ca");
    pki.server("server", "conductor");
    let clusters: Vec<String> = (0..AGENTS).map(|i| format!("load-{i}")).collect();
    for cluster in &clusters {
        pki.client(cluster, &format!("agent-of-{cluster}"), &[&group(cluster)]);
    }
    let groups: Vec<String> = clusters.iter().map(|c| group(c)).collect();
    pki.client(
        "hub",
        "load-hub",
        &groups.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let auth = AuthApi::start(Vec::new()).await;
    let c = tls_conductor(&pki, &auth, "[\"mtls\"]");

    let d = pki.dir.display();
    let mut args = tls_args(&c, &pki);
    args.extend(
        [
            "--client-cert",
            &format!("{d}/{{cluster}}.crt"),
            "--client-key",
            &format!("{d}/{{cluster}}.key"),
            "--hub-client-cert",
            &format!("{d}/hub.crt"),
            "--hub-client-key",
            &format!("{d}/hub.key"),
            "--source-addresses",
            "127.0.0.2,127.0.0.3",
        ]
        .map(str::to_owned),
    );
    let (report, seen) = load_while_inspecting(&c, args).await;
    assert_eq!(report["creates"]["delivered"], AGENTS, "{report:#}");

    assert_eq!(seen.len(), AGENTS, "every agent subscribed at once: {seen:?}");
    let mut per_address: BTreeMap<String, usize> = BTreeMap::new();
    for (cluster, (user, remote)) in &seen {
        assert_eq!(
            user,
            &format!("agent-of-{cluster}"),
            "authenticated by its own certificate"
        );
        let ip = remote.rsplit_once(':').map(|(ip, _)| ip.to_owned()).unwrap();
        *per_address.entry(ip).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = [
        ("127.0.0.2".to_owned(), AGENTS / 2),
        ("127.0.0.3".to_owned(), AGENTS / 2),
    ]
    .into();
    assert_eq!(per_address, expected, "{seen:?}");

    // Every agent's subscription and the hub's writes were reviewed for the cluster they are for.
    let reviews = auth.reviews().access_reviews();
    assert!(auth.reviews().refused().is_empty(), "{:?}", auth.reviews().refused());
    for cluster in &clusters {
        let by = |user: &str| {
            reviews
                .iter()
                .any(|r| r["spec"]["user"] == user && r["spec"]["resourceAttributes"]["namespace"] == cluster.as_str())
        };
        assert!(
            by(&format!("agent-of-{cluster}")),
            "the agent of {cluster} reviewed: {reviews:?}"
        );
        assert!(by("load-hub"), "the hub's writes for {cluster} reviewed");
    }
}

/// Over TLS with tokens: each agent sends its own cluster's token (`--token-file` with
/// `{cluster}`), the hub its own (`--hub-token`), and conductor authenticates each through a
/// TokenReview of that token.
#[tokio::test(flavor = "multi_thread")]
async fn over_tls_each_agent_sends_its_own_token() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "ca");
    pki.server("server", "conductor");
    let clusters: Vec<String> = (0..AGENTS).map(|i| format!("load-{i}")).collect();
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let mut tokens: Vec<KnownToken> = clusters
        .iter()
        .map(|cluster| {
            std::fs::write(
                dir.path().join(format!("{cluster}.token")),
                format!("token-of-{cluster}\n"),
            )
            .unwrap();
            KnownToken {
                token: leak(format!("token-of-{cluster}")),
                user: leak(format!("agent-of-{cluster}")),
                groups: Box::leak(vec![leak(group(cluster))].into_boxed_slice()),
            }
        })
        .collect();
    tokens.push(KnownToken {
        token: "hub-token",
        user: "load-hub",
        groups: Box::leak(
            clusters
                .iter()
                .map(|c| leak(group(c)))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        ),
    });
    let auth = AuthApi::start(tokens).await;
    let c = tls_conductor(&pki, &auth, "[\"token\"]");

    let mut args = tls_args(&c, &pki);
    args.extend(
        [
            "--token-file",
            &format!("{}/{{cluster}}.token", dir.path().display()),
            "--hub-token",
            "hub-token",
        ]
        .map(str::to_owned),
    );
    let (_, seen) = load_while_inspecting(&c, args).await;
    assert_eq!(seen.len(), AGENTS, "{seen:?}");
    for (cluster, (user, _)) in &seen {
        assert_eq!(user, &format!("agent-of-{cluster}"), "authenticated by its own token");
    }
    let reviewed: BTreeSet<String> = auth
        .reviews()
        .token_reviews()
        .iter()
        .map(|r| r["spec"]["token"].as_str().unwrap().to_owned())
        .collect();
    let mut expected: BTreeSet<String> = clusters.iter().map(|c| format!("token-of-{c}")).collect();
    expected.insert("hub-token".into());
    assert_eq!(reviewed, expected);
}

/// Settings that do not go together are refused before anything connects.
#[test]
fn tls_settings_that_do_not_go_together_are_refused() {
    for (args, reason) in [
        (vec!["--server", "https://localhost:1"], "is https: --ca-file is needed"),
        (
            vec!["--server", "http://127.0.0.1:1", "--ca-file", "/dev/null"],
            "which is not https",
        ),
        (
            vec!["--server", "ftp://127.0.0.1:1"],
            "must start with http:// or https://",
        ),
        (
            vec!["--token-file", "{cluster}.token", "--hub-token-file", "{cluster}.hub"],
            "the hub's credentials cannot name a file per cluster",
        ),
        (vec!["--agents", "1000000"], "do not fit in its open-file limit"),
    ] {
        let out = std::process::Command::new(load_bin())
            .args(&args)
            .args(["--progress", "false"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

/// More agents than one process's open-file limit holds: refused in one process, run in two
/// (`--processes 2`), each holding its share, with one report that adds up.
#[tokio::test(flavor = "multi_thread")]
async fn agents_beyond_one_processs_open_file_limit_run_in_several_processes() {
    let conductor = Conductor::start(MEMORY_SOURCE).unwrap();
    let (url, pid) = (conductor.url(), conductor.pid().to_string());
    // 200 descriptors leave room for 136 agents in a process: 150 need two.
    let run = move |processes: &str| {
        let (url, pid, processes) = (url.clone(), pid.clone(), processes.to_owned());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new("sh")
                .args(["-c", "ulimit -n 200 && exec \"$0\" \"$@\""])
                .arg(load_bin())
                .args(["--server", &url, "--pid", &pid, "--progress", "false"])
                .args([
                    "--agents",
                    "150",
                    "--updates",
                    "75",
                    "--rate",
                    "300",
                    "--processes",
                    &processes,
                ])
                .output()
                .unwrap()
        })
    };
    let one = run("1").await.unwrap();
    assert!(!one.status.success());
    let stderr = String::from_utf8_lossy(&one.stderr);
    assert!(
        stderr.contains("150 agents in one process do not fit in its open-file limit (200: room for 136)")
            && stderr.contains("--processes 2"),
        "{stderr}"
    );

    let two = run("2").await.unwrap();
    assert!(two.status.success(), "{}", String::from_utf8_lossy(&two.stderr));
    let report: Value = serde_json::from_slice(&two.stdout).unwrap();
    assert_eq!(report["agents"], 150, "{report:#}");
    for (phase, sent) in [("creates", 150), ("updates", 75)] {
        let p = &report[phase];
        assert_eq!(p["sent"], sent, "{phase}: {report:#}");
        assert_eq!(p["delivered"], sent, "{phase}: {report:#}");
        let l = &p["latency_ms"];
        let [p50, p99, max] = ["p50", "p99", "max"].map(|k| l[k].as_f64().unwrap());
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{phase}: {l}");
    }
    assert_eq!(report["events_received"], 225, "{report:#}");
    assert_eq!(report["stream_errors"], 0);
    assert!(
        report.get("latencies_ms").is_none(),
        "the shards' raw latencies are merged away"
    );
    let server = &report["server_process"];
    assert_eq!(server["pid"], conductor.pid());
    assert!(
        server["rss_connected_bytes"].as_u64() > server["rss_before_agents_bytes"].as_u64(),
        "measured with every shard's agents connected: {server}"
    );
    assert!(server["cpu_seconds_per_1000_deliveries"].is_number(), "{server}");
}
