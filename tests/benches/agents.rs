//! Agents per replica (see BENCHMARKS.md), each agent on its own connection with TLS and a client
//! certificate of its own, SubjectAccessReview authorization against the review double, heartbeats
//! on (every 10 s, the default):
//!
//! - `memory`: `COUNTS` (1000,5000,19000) agents driven by `conductor-load` (a work each, then
//!   1,000 updates at 50/s: two heartbeats go to every agent meanwhile), their connections spread
//!   over 127.0.0.2 and 127.0.0.3; the server's resident memory per agent. Floor in the same run:
//!   the same load on a plaintext conductor that authorizes nothing.
//! - `storm`: `STORM_AGENTS` (10,000) agents on replica A, each holding its work at version 1;
//!   replica B holds version 2. A is killed (SIGKILL); every agent reconnects to B at once,
//!   subscribes and resyncs. Figures: the time until all are resynced, connect rate, resync p50 /
//!   p99, B's CPU and memory, refusals by status, and the SubjectAccessReviews B asked per
//!   (identity, cluster, verb). Floor in the same run: the same storm between plaintext replicas
//!   that authorize nothing.
//!
//! `cargo build --release -p conductor -p conductor-load && \
//!  cargo bench -p conductor-blackbox-tests --bench agents [-- memory|storm]`
//!
//! `RUNS` (3) runs each, a fresh server per run; medians. `CONSUMER_LABEL=false` runs both
//! conductors with `[admin] consumer_label = false`.

#[path = "../support/auth.rs"]
mod auth_api;
#[path = "../support/many_certs.rs"]
mod many_certs;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use auth_api::{AuthApi, HUB_WRITERS};
use conductor_blackbox_tests::proto::{PublishRequest, SubscriptionRequest};
use conductor_blackbox_tests::{
    CloudEventServiceClient, Conductor, MEMORY_SOURCE, WORKS, env_usize, events, load_bin, median,
};
use many_certs::ManyCerts;
use serde_json::Value;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Security {
    /// The floor: plaintext, every caller anonymous and allowed.
    Plaintext,
    /// As deployed: TLS 1.3, a client certificate per agent, SubjectAccessReview.
    Tls,
}

impl Security {
    fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "plaintext, allow-all",
            Self::Tls => "TLS + client certificate per agent + SubjectAccessReview",
        }
    }
}

struct Fixture {
    certs: ManyCerts,
    auth: AuthApi,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// Certificates for `agents` clusters `load-<n>` and the hub's writer.
    async fn new(agents: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let certs = ManyCerts::new(dir.path());
        let started = Instant::now();
        for i in 0..agents {
            certs.agent(&format!("load-{i}"));
        }
        certs.client("hub", "load-hub", &[HUB_WRITERS]);
        println!(
            "{agents} client certificates made in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Self {
            certs,
            auth: AuthApi::start(Vec::new()).await,
            _dir: dir,
        }
    }

    fn config(&self, security: Security) -> String {
        // `CONSUMER_LABEL=false`: the broker's series without each cluster's name (`[admin]`).
        let label = std::env::var("CONSUMER_LABEL").map_or(true, |v| v != "false");
        let common = format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\nconsumer_label = {label}\n[log]\nformat = \"json\"\nlevel = \"info\"\n[reload]\nwatch = false\n"
        );
        let server = match security {
            Security::Plaintext => "[server]\nlisten = \"127.0.0.1:0\"\nplaintext = true\n[auth]\nauthenticators = []\nauthorization = \"allow-all\"\n".to_owned(),
            Security::Tls => format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert_file = \"{d}/server.crt\"\nkey_file = \"{d}/server.key\"\nclient_ca_file = \"{d}/ca.crt\"\n[auth]\nauthenticators = [\"mtls\"]\nauthorization = \"sar\"\n[kubernetes]\nkubeconfig = \"{kc}\"\n",
                d = self.certs.dir.display(),
                kc = self.auth.kubeconfig.display()
            ),
        };
        format!("{server}{common}{MEMORY_SOURCE}")
    }

    fn start(&self, security: Security) -> Conductor {
        Conductor::start_with_config(&self.config(security)).expect("conductor starts")
    }

    /// The load tool's arguments to reach `c`.
    fn load_args(&self, c: &Conductor, security: Security) -> Vec<String> {
        let port = c.grpc_addr.rsplit(':').next().unwrap();
        let d = self.certs.dir.display();
        let mut args: Vec<String> = vec!["--source-addresses".into(), "127.0.0.2,127.0.0.3".into()];
        match security {
            Security::Plaintext => args.extend(["--server".into(), c.url()]),
            Security::Tls => args.extend([
                "--server".to_owned(),
                format!("https://localhost:{port}"),
                "--ca-file".into(),
                format!("{d}/ca.crt"),
                "--client-cert".into(),
                self.certs.per_cluster("crt"),
                "--client-key".into(),
                self.certs.per_cluster("key"),
                "--hub-client-cert".into(),
                format!("{d}/hub.crt"),
                "--hub-client-key".into(),
                format!("{d}/hub.key"),
            ]),
        }
        args
    }

    /// An agent's way to `c`: over TLS with the agent of `cluster`'s certificate, from `from`.
    fn endpoint(&self, c: &Conductor, security: Security, cluster: &str, from: std::net::IpAddr) -> Endpoint {
        let port = c.grpc_addr.rsplit(':').next().unwrap();
        let endpoint = match security {
            Security::Plaintext => Endpoint::from_shared(c.url()).unwrap(),
            Security::Tls => {
                let read = |f: &str| std::fs::read(self.certs.dir.join(f)).unwrap();
                let tls = ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(read("ca.crt")))
                    .identity(Identity::from_pem(
                        read(&format!("{cluster}.crt")),
                        read(&format!("{cluster}.key")),
                    ))
                    .domain_name("localhost");
                Endpoint::from_shared(format!("https://localhost:{port}"))
                    .unwrap()
                    .tls_config(tls)
                    .unwrap()
            }
        };
        endpoint
            .local_address(Some(from))
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(60))
    }
}

// ---------------------------------------------------------------------------------------------
// memory

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter().fold(v, |v, k| &v[*k]).as_f64().unwrap_or(f64::NAN)
}

/// One load run against a fresh conductor: (bytes per agent, MB at the end, connect seconds).
fn memory_run(fixture: &Fixture, security: Security, agents: usize) -> [f64; 3] {
    let c = fixture.start(security);
    let out = Command::new(load_bin())
        .args(fixture.load_args(&c, security))
        .args(["--pid", &c.pid().to_string(), "--progress", "false"])
        .args([
            "--agents",
            &agents.to_string(),
            "--create-rate",
            "2000",
            "--rate",
            "50",
            "--updates",
            "1000",
        ])
        .args(["--connect-concurrency", "200", "--drain-timeout", "60s"])
        .stderr(Stdio::inherit())
        .output()
        .expect("conductor-load runs");
    assert!(out.status.success(), "conductor-load failed");
    let r: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    for phase in ["creates", "updates"] {
        assert_eq!(r[phase]["missing"], 0, "{phase} went missing: {r:#}");
    }
    assert_eq!(r["agents"], agents, "{r:#}");
    let p = &r["server_process"];
    let end = f(p, &["rss_end_bytes"]);
    [
        (end - f(p, &["rss_before_agents_bytes"])) / agents as f64,
        end / 1e6,
        f(&r, &["connect_seconds"]),
    ]
}

fn memory(rt: &tokio::runtime::Runtime) {
    let counts: Vec<usize> = std::env::var("COUNTS")
        .unwrap_or_else(|_| "1000,5000,19000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("COUNTS: numbers"))
        .collect();
    let runs = env_usize("RUNS", 3);
    let fixture = rt.block_on(Fixture::new(counts.iter().copied().max().unwrap_or(0)));
    let _rt = rt.enter();
    println!(
        "memory: agents on their own connections (127.0.0.2, 127.0.0.3), a work each, 1,000 updates at 50/s, heartbeats every 10 s; median of {runs} runs"
    );
    println!(
        "  | agents | {} B/agent | {} B/agent | TLS / plaintext | TLS MB at the end | TLS connect s |",
        Security::Plaintext.name(),
        Security::Tls.name()
    );
    for agents in counts {
        let mut medians = Vec::new();
        for security in [Security::Plaintext, Security::Tls] {
            let all: Vec<[f64; 3]> = (0..runs).map(|_| memory_run(&fixture, security, agents)).collect();
            println!("    {agents} agents, {}: runs {all:.1?}", security.name());
            medians.push(std::array::from_fn::<f64, 3, _>(|i| {
                median(all.iter().map(|r| r[i]).collect())
            }));
        }
        let (plain, tls) = (medians[0], medians[1]);
        println!(
            "  | {agents} | {:.0} | {:.0} | {:.2} | {:.0} | {:.1} |",
            plain[0],
            tls[0],
            tls[0] / plain[0],
            tls[1],
            tls[2]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// storm

/// What one storm measured.
struct Storm {
    /// From the kill until every agent was resynced on B.
    all_resynced: f64,
    /// Agents subscribed on B per second, from the kill until the last one was.
    connect_rate: f64,
    /// Per agent, from the kill until its resync answer arrived: p50, p99.
    resync_p50: f64,
    resync_p99: f64,
    /// B's CPU seconds from the kill until all were resynced, and in % of one core.
    cpu_seconds: f64,
    cpu_percent: f64,
    /// B's resident memory growth per agent, and its resident memory then (MB).
    bytes_per_agent: f64,
    rss_mb: f64,
    /// Failed attempts by what failed (a status code, or `connect`).
    failures: HashMap<String, u64>,
    /// SubjectAccessReviews B asked, distinct (identity, cluster, verb, resource), and the most
    /// asked for one of them.
    reviews: usize,
    distinct: usize,
    most_per_question: usize,
}

fn sample(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let cpu = (fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap()) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap()
        * 1024.0;
    (cpu, rss)
}

/// Publishes `action` of cluster `cluster`'s work `id` through `hub`.
async fn write(hub: &mut CloudEventServiceClient<Channel>, action: &str, cluster: &str, id: &str) {
    let mut e = events::create(WORKS, cluster, id, &format!("work-{cluster}"));
    e.r#type = format!("{WORKS}.spec.{action}");
    hub.publish(PublishRequest { event: Some(e) }).await.unwrap();
}

/// The hub's connection to `c`.
async fn hub(fixture: &Fixture, c: &Conductor, security: Security) -> CloudEventServiceClient<Channel> {
    let mut endpoint = fixture.endpoint(c, security, "hub", "127.0.0.1".parse().unwrap());
    if security == Security::Plaintext {
        endpoint = Endpoint::from_shared(c.url()).unwrap();
    }
    CloudEventServiceClient::new(endpoint.connect().await.unwrap())
}

fn version(e: &conductor_blackbox_tests::proto::CloudEvent) -> Option<i64> {
    match events::attr(e, "ce-resourceversion")? {
        conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr::CeInteger(v) => Some(i64::from(*v)),
        _ => None,
    }
}

/// Subscribes on `endpoint` (then calls `subscribed`) and resyncs holding `held` (none, or the
/// work at version 1); returns the stream once the work's version `want` arrived, or what failed.
async fn subscribe_and_resync(
    endpoint: &Endpoint,
    cluster: &str,
    id: &str,
    held: Option<i64>,
    want: i64,
    subscribed: impl FnOnce(),
) -> Result<tonic::Streaming<conductor_blackbox_tests::proto::CloudEvent>, String> {
    let channel = endpoint.connect().await.map_err(|_| "connect".to_owned())?;
    let mut client = CloudEventServiceClient::new(channel);
    let mut stream = client
        .subscribe(SubscriptionRequest {
            source: String::new(),
            cluster_name: cluster.into(),
            data_type: WORKS.into(),
        })
        .await
        .map_err(|s| format!("subscribe {:?}", s.code()))?
        .into_inner();
    subscribed();
    let versions: Vec<(&str, i64)> = held.map(|v| (id, v)).into_iter().collect();
    client
        .publish(PublishRequest {
            event: Some(events::resync_request(WORKS, cluster, &versions)),
        })
        .await
        .map_err(|s| format!("resync {:?}", s.code()))?;
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.message()).await {
            Ok(Ok(Some(e))) if version(&e) == Some(want) => return Ok(stream),
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => return Err("stream ended".into()),
            Ok(Err(s)) => return Err(format!("stream {:?}", s.code())),
            Err(_) => return Err("no resync answer in 30 s".into()),
        }
    }
}

async fn storm_run(fixture: &Fixture, security: Security, agents: usize) -> Storm {
    let mut a = fixture.start(security);
    let b = fixture.start(security);
    let clusters: Vec<String> = (0..agents).map(|i| format!("load-{i}")).collect();
    let ids: Vec<String> = (0..agents).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    // Both replicas hold every cluster's work; B has seen one more change of it (version 2).
    let (mut hub_a, mut hub_b) = (hub(fixture, &a, security).await, hub(fixture, &b, security).await);
    for (cluster, id) in clusters.iter().zip(&ids) {
        write(&mut hub_a, "create_request", cluster, id).await;
        write(&mut hub_b, "create_request", cluster, id).await;
        write(&mut hub_b, "update_request", cluster, id).await;
    }
    drop((hub_a, hub_b));

    // Every agent on A, holding version 1.
    let sources: [std::net::IpAddr; 2] = ["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
    let failures: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let resynced_at: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let subscribed_on_b = Arc::new(AtomicU64::new(0));
    let last_subscribed: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (on_a_tx, mut on_a_rx) = tokio::sync::mpsc::channel::<()>(agents);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(agents);
    let started = Instant::now();
    for (i, (cluster, id)) in clusters.iter().zip(&ids).enumerate() {
        let from = sources[i % sources.len()];
        let (to_a, to_b) = (
            fixture.endpoint(&a, security, cluster, from),
            fixture.endpoint(&b, security, cluster, from),
        );
        let (cluster, id) = (cluster.clone(), id.clone());
        let (failures, resynced_at, subscribed_on_b, last_subscribed) = (
            Arc::clone(&failures),
            Arc::clone(&resynced_at),
            Arc::clone(&subscribed_on_b),
            Arc::clone(&last_subscribed),
        );
        let (on_a, done) = (on_a_tx.clone(), done_tx.clone());
        tokio::spawn(async move {
            let fail = |what: String| *failures.lock().unwrap().entry(what).or_default() += 1;
            let mut stream = loop {
                match subscribe_and_resync(&to_a, &cluster, &id, None, 1, || {}).await {
                    Ok(s) => break s,
                    Err(e) => fail(format!("on A: {e}")),
                }
            };
            let _ = on_a.send(()).await;
            // Until A goes away.
            while let Ok(Some(_)) = stream.message().await {}
            drop(stream);
            // At once to B, as often as it takes.
            loop {
                let attempt = subscribe_and_resync(&to_b, &cluster, &id, Some(1), 2, || {
                    subscribed_on_b.fetch_add(1, Ordering::Relaxed);
                    *last_subscribed.lock().unwrap() = Some(Instant::now());
                });
                match attempt.await {
                    Ok(kept) => {
                        resynced_at.lock().unwrap().push(Instant::now());
                        let _ = done.send(()).await;
                        // Stay connected until the run ends.
                        std::future::pending::<()>().await;
                        drop(kept);
                    }
                    Err(e) => fail(e),
                }
            }
        });
    }
    for _ in 0..agents {
        on_a_rx.recv().await.unwrap();
    }
    println!(
        "    {agents} agents subscribed and resynced on A in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reviews_before = fixture.auth.reviews().access_reviews().len();
    let (cpu_before, rss_before) = sample(b.pid());
    let killed = Instant::now();
    let _ = Command::new("kill").args(["-KILL", &a.pid().to_string()]).status();
    for _ in 0..agents {
        tokio::time::timeout(Duration::from_secs(120), done_rx.recv())
            .await
            .expect("every agent resynced on B within 120 s");
    }
    let all_resynced = killed.elapsed().as_secs_f64();
    let (cpu_after, rss_after) = sample(b.pid());
    let _ = a.terminate();

    let mut latencies: Vec<f64> = resynced_at
        .lock()
        .unwrap()
        .iter()
        .map(|t| t.duration_since(killed).as_secs_f64())
        .collect();
    latencies.sort_by(f64::total_cmp);
    let at = |p: f64| latencies[((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1];
    let last_subscribed = last_subscribed.lock().unwrap().expect("agents subscribed on B");
    // B's reviews: the ones asked after the kill (A asked none then).
    let reviews: Vec<Value> = fixture.auth.reviews().access_reviews()[reviews_before..].to_vec();
    let mut per_question: HashMap<String, usize> = HashMap::new();
    for r in &reviews {
        let s = &r["spec"];
        let a = &s["resourceAttributes"];
        let key = format!(
            "{} {} {} {} {}/{}",
            s["user"], s["groups"], a["namespace"], a["verb"], a["resource"], a["subresource"]
        );
        *per_question.entry(key).or_default() += 1;
    }
    let storm = Storm {
        all_resynced,
        connect_rate: subscribed_on_b.load(Ordering::Relaxed) as f64
            / last_subscribed.duration_since(killed).as_secs_f64(),
        resync_p50: at(0.5),
        resync_p99: at(0.99),
        cpu_seconds: cpu_after - cpu_before,
        cpu_percent: 100.0 * (cpu_after - cpu_before) / all_resynced,
        bytes_per_agent: (rss_after - rss_before) / agents as f64,
        rss_mb: rss_after / 1e6,
        failures: failures.lock().unwrap().clone(),
        reviews: reviews.len(),
        distinct: per_question.len(),
        most_per_question: per_question.values().copied().max().unwrap_or(0),
    };
    drop(b);
    storm
}

fn storm(rt: &tokio::runtime::Runtime) {
    let agents = env_usize("STORM_AGENTS", 10_000);
    let runs = env_usize("RUNS", 3);
    let fixture = rt.block_on(Fixture::new(agents));
    println!(
        "storm: {agents} agents on replica A (each its own connection, 127.0.0.2/127.0.0.3), A killed, all reconnect to B at once and resync; median of {runs} runs"
    );
    let mut results = Vec::new();
    for security in [Security::Plaintext, Security::Tls] {
        let mut all = Vec::new();
        for _ in 0..runs {
            let s = rt.block_on(storm_run(&fixture, security, agents));
            println!(
                "    {}: all resynced {:.2} s, {:.0} agents/s subscribed, resync p50 {:.2} s p99 {:.2} s, B CPU {:.1} s ({:.0} %), B +{:.0} B/agent ({:.0} MB), failures {:?}, reviews {} ({} distinct, at most {} per question)",
                security.name(),
                s.all_resynced,
                s.connect_rate,
                s.resync_p50,
                s.resync_p99,
                s.cpu_seconds,
                s.cpu_percent,
                s.bytes_per_agent,
                s.rss_mb,
                s.failures,
                s.reviews,
                s.distinct,
                s.most_per_question
            );
            all.push(s);
        }
        let m = |f: fn(&Storm) -> f64| median(all.iter().map(f).collect());
        results.push((
            security,
            [
                m(|s| s.all_resynced),
                m(|s| s.connect_rate),
                m(|s| s.resync_p50),
                m(|s| s.resync_p99),
                m(|s| s.cpu_seconds),
                m(|s| s.cpu_percent),
                m(|s| s.bytes_per_agent),
                m(|s| s.rss_mb),
            ],
            all.iter().map(|s| s.most_per_question).max().unwrap_or(0),
            // Failed attempts in the storm, on B (not while the agents first joined A).
            all.iter()
                .map(|s| {
                    s.failures
                        .iter()
                        .filter(|(k, _)| !k.starts_with("on A"))
                        .map(|(_, n)| n)
                        .sum::<u64>()
                })
                .sum::<u64>(),
        ));
    }
    println!(
        "  | | all resynced (s) | subscribed/s | resync p50 (s) | resync p99 (s) | B CPU s | B CPU % | B B/agent | B MB | most reviews per question | failed attempts on B (all runs) |"
    );
    for (security, m, most, failed) in results {
        println!(
            "  | {} | {:.2} | {:.0} | {:.2} | {:.2} | {:.1} | {:.0} | {:.0} | {:.0} | {most} | {failed} |",
            security.name(),
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            m[6],
            m[7]
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let only = |name: &str| !args.iter().any(|a| a == "memory" || a == "storm") || args.iter().any(|a| a == name);
    if only("memory") {
        memory(&rt);
    }
    if only("storm") {
        storm(&rt);
    }
}
