//! Scale, measured with the shipped load tool (`conductor-load`, one connection per agent) against
//! a baseline in the same run (see BENCHMARKS.md):
//!
//! - `memory`: 10,000 agents subscribed to manifest bundles, 50 updates/s in all; the server's
//!   resident memory per agent, conductor against a raw tonic server doing the least an OCM
//!   memory broker can (route each spec request to its cluster's subscribers);
//! - `cpu`: 1,000 agents, 500 updates/s; server CPU seconds per 1,000 delivered events and p99
//!   delivery, conductor against the same raw tonic server;
//! - `maestro`: 1,000 agents, Maestro writing 1,000 events/s (conductor with one batch at a time
//!   and with its default four at once), p99 delivery beside a bare
//!   LISTEN/NOTIFY at the same rate; and a burst of 10,000 creates, drained per second.
//!
//! `cargo build --release -p conductor -p conductor-load && scripts/build-plugins.sh && \
//!  cargo bench -p conductor-blackbox-tests --bench scale [-- memory|cpu|maestro]`
//!
//! `RUNS` (3) runs each, a fresh server per run; medians.

#[path = "../support/maestro.rs"]
mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::proto::{
    self, CloudEvent, PublishRequest, SubscriptionRequest,
    cloud_event_attribute_value::Attr,
    cloud_event_service_server::{CloudEventService, CloudEventServiceServer},
};
use conductor_blackbox_tests::{Conductor, Form, cpu_seconds, env_usize, load_bin, median};
use serde_json::Value;
use support::MaestroDb;
use tokio::sync::mpsc;

// ---------------------------------------------------------------------------------------------
// The raw tonic baseline: an OCM memory broker in its least form.

type Subscribers = HashMap<String, Vec<mpsc::Sender<Result<CloudEvent, tonic::Status>>>>;

#[derive(Default)]
struct RawBroker {
    subscribers: Mutex<Subscribers>,
    versions: Mutex<HashMap<String, i32>>,
}

fn string_attr(e: &CloudEvent, key: &str) -> Option<String> {
    match e.attributes.get(key)?.attr.as_ref()? {
        Attr::CeString(s) => Some(s.clone()),
        _ => None,
    }
}

#[tonic::async_trait]
impl CloudEventService for RawBroker {
    /// A spec request: its version counted per resource, sent to the cluster's subscribers.
    async fn publish(&self, request: tonic::Request<PublishRequest>) -> Result<tonic::Response<()>, tonic::Status> {
        let Some(mut e) = request.into_inner().event else {
            return Err(tonic::Status::invalid_argument("no event"));
        };
        let (Some(cluster), Some(id)) = (string_attr(&e, "ce-clustername"), string_attr(&e, "ce-resourceid")) else {
            return Err(tonic::Status::invalid_argument("no cluster or resource"));
        };
        let version = {
            let mut versions = self.versions.lock().unwrap();
            let v = versions.entry(id).or_insert(0);
            *v += 1;
            *v
        };
        e.attributes.insert(
            "ce-resourceversion".into(),
            proto::CloudEventAttributeValue {
                attr: Some(Attr::CeInteger(version)),
            },
        );
        let targets = self
            .subscribers
            .lock()
            .unwrap()
            .get(&cluster)
            .cloned()
            .unwrap_or_default();
        for tx in targets {
            let _ = tx.send(Ok(e.clone())).await;
        }
        Ok(tonic::Response::new(()))
    }

    type SubscribeStream = tokio_stream::wrappers::ReceiverStream<Result<CloudEvent, tonic::Status>>;

    async fn subscribe(
        &self,
        request: tonic::Request<SubscriptionRequest>,
    ) -> Result<tonic::Response<Self::SubscribeStream>, tonic::Status> {
        let (tx, rx) = mpsc::channel(64);
        let cluster = request.into_inner().cluster_name;
        self.subscribers.lock().unwrap().entry(cluster).or_default().push(tx);
        Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }
}

async fn run_raw_server() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("{}", listener.local_addr().unwrap());
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(CloudEventServiceServer::new(RawBroker::default()))
        .serve_with_incoming(incoming)
        .await
        .unwrap();
}

struct Raw(Child, String);

impl Raw {
    fn start() -> Self {
        let (child, addr) = conductor_blackbox_tests::spawn_raw_server();
        Self(child, format!("http://{addr}"))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Driving the load tool.

/// Runs `conductor-load` against `server` (process `pid`) and returns its JSON report.
fn load(server: &str, pid: u32, args: &[&str]) -> Value {
    let out = Command::new(load_bin())
        .args(["--server", server, "--pid", &pid.to_string(), "--progress", "false"])
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("conductor-load runs");
    assert!(out.status.success(), "conductor-load failed");
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    for phase in ["creates", "updates"] {
        assert_eq!(report[phase]["missing"], 0, "{phase} went missing: {report:#}");
    }
    assert_eq!(report["out_of_order"], 0, "{report:#}");
    report
}

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter().fold(v, |v, k| &v[*k]).as_f64().unwrap_or(f64::NAN)
}

/// conductor with a memory source; `consumer_label` as `[admin] consumer_label`.
fn conductor_memory(consumer_label: bool) -> Conductor {
    let admin = "[admin]\nlisten = \"127.0.0.1:0\"\n";
    let config = format!(
        "{}[broker]\nheartbeat_disabled = true\n{}",
        conductor_blackbox_tests::BASE_CONFIG.replace(admin, &format!("{admin}consumer_label = {consumer_label}\n")),
        conductor_blackbox_tests::MEMORY_SOURCE
    );
    Conductor::start_with_config(&config).expect("conductor starts")
}

/// `RUNS` runs against the raw tonic broker, then against conductor (`consumer_label` on):
/// the medians of what `measure` takes from each report.
fn raw_and_conductor<const N: usize>(args: &[&str], measure: impl Fn(&Value) -> [f64; N]) -> ([f64; N], [f64; N]) {
    let (raw, _) = runs("raw tonic", || {
        let s = Raw::start();
        measure(&load(&s.1, s.0.id(), args))
    });
    let (ours, _) = runs("conductor", || {
        let c = conductor_memory(true);
        measure(&load(&c.url(), c.pid(), args))
    });
    (raw, ours)
}

/// `RUNS` runs of `one` → the median of each figure it returns, and the runs.
fn runs<const N: usize>(label: &str, mut one: impl FnMut() -> [f64; N]) -> ([f64; N], Vec<[f64; N]>) {
    let all: Vec<[f64; N]> = (0..env_usize("RUNS", 3)).map(|_| one()).collect();
    let medians = std::array::from_fn(|i| median(all.iter().map(|r| r[i]).collect()));
    println!("  {label}: runs {all:.3?}");
    (medians, all)
}

fn memory(rt: &tokio::runtime::Runtime) {
    let agents = env_usize("AGENTS", 10_000);
    println!("memory: {agents} agents, one connection each, 1 work each, then 1,000 updates at 50/s");
    let args = format!(
        "--agents {agents} --create-rate 2000 --rate 50 --updates 1000 --connect-concurrency 200 --drain-timeout 30s"
    );
    let args: Vec<&str> = args.split(' ').collect();
    let measure = |r: &Value| {
        let p = &r["server_process"];
        let end = f(p, &["rss_end_bytes"]);
        [
            end / 1e6,
            (end - f(p, &["rss_before_agents_bytes"])) / agents as f64,
            f(r, &["updates", "latency_ms", "p99"]),
        ]
    };
    let _rt = rt.enter();
    let (raw, ours) = raw_and_conductor(&args, measure);
    let (unlabelled, _) = runs("conductor, consumer_label = false", || {
        let c = conductor_memory(false);
        measure(&load(&c.url(), c.pid(), &args))
    });
    println!("  | | raw tonic | conductor | conductor / raw | conductor, consumer_label = false | / raw |");
    let row = |name: &str, i: usize, scale: f64| {
        println!(
            "  | {name} | {:.0} | {:.0} | {:.2} | {:.0} | {:.2} |",
            raw[i] * scale,
            ours[i] * scale,
            ours[i] / raw[i],
            unlabelled[i] * scale,
            unlabelled[i] / raw[i]
        );
    };
    row("resident memory at steady state (MB)", 0, 1.0);
    row("bytes per agent", 1, 1.0);
    row("update delivery p99 (µs)", 2, 1000.0);
}

fn cpu(rt: &tokio::runtime::Runtime) {
    let agents = env_usize("AGENTS_CPU", 1000);
    println!("cpu: {agents} agents, one connection each, 1 work each, then 10,000 updates at 500/s");
    let args = format!("--agents {agents} --create-rate 2000 --rate 500 --updates 10000");
    let args: Vec<&str> = args.split(' ').collect();
    let measure = |r: &Value| {
        [
            f(r, &["server_process", "cpu_seconds_per_1000_deliveries"]),
            f(r, &["server_process", "update_phase_cpu_percent"]),
            f(r, &["updates", "latency_ms", "p50"]),
            f(r, &["updates", "latency_ms", "p99"]),
        ]
    };
    let _rt = rt.enter();
    let (raw, ours) = raw_and_conductor(&args, measure);
    println!("  | | raw tonic | conductor | conductor / raw |");
    println!(
        "  | CPU seconds per 1,000 delivered events | {:.4} | {:.4} | {:.2} |",
        raw[0],
        ours[0],
        ours[0] / raw[0]
    );
    println!(
        "  | server CPU (% of one core) | {:.1} | {:.1} | {:.2} |",
        raw[1],
        ours[1],
        ours[1] / raw[1]
    );
    println!(
        "  | update delivery p50 / p99 (ms) | {:.2} / {:.2} | {:.2} / {:.2} | |",
        raw[2], raw[3], ours[2], ours[3]
    );
}

/// The floor of the Maestro path: NOTIFYs at `rate` to a bare LISTEN session, p99 in ms.
async fn bare_notify_p99(db: &MaestroDb, n: usize, rate: f64) -> f64 {
    let mut listener = sqlx::postgres::PgListener::connect_with(&db.pool).await.unwrap();
    listener.listen("bench").await.unwrap();
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let writer = {
        let (pool, sent) = (db.pool.clone(), Arc::clone(&sent));
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for i in 0..n {
                tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
                let id = i.to_string();
                sent.lock().unwrap().insert(id.clone(), Instant::now());
                sqlx::query("SELECT pg_notify('bench', $1)")
                    .bind(id)
                    .execute(&pool)
                    .await
                    .unwrap();
            }
        })
    };
    let mut latencies = Vec::with_capacity(n);
    while latencies.len() < n {
        let note = listener.recv().await.unwrap();
        let at = sent.lock().unwrap().remove(note.payload()).unwrap();
        latencies.push(at.elapsed());
    }
    writer.await.unwrap();
    latencies.sort();
    latencies[(latencies.len() * 99).div_ceil(100) - 1].as_secs_f64() * 1e3
}

/// How busy the machine's CPUs are from now until the returned function is called, in % (from
/// `/proc/stat`; NaN where it cannot be read).
fn machine_busy() -> impl FnOnce() -> f64 {
    fn times() -> Option<(f64, f64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<f64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let idle = fields.get(3)? + fields.get(4).unwrap_or(&0.0);
        Some((fields.iter().sum(), idle))
    }
    let before = times();
    move || match (before, times()) {
        (Some((t0, i0)), Some((t1, i1))) if t1 > t0 => 100.0 * (1.0 - (i1 - i0) / (t1 - t0)),
        _ => f64::NAN,
    }
}

/// The maestro plugin's calls so far (`/inspect/plugins`): how many, and how long they took.
async fn print_plugin_calls(c: &Conductor, when: &str) {
    let Ok((200, body)) = c.admin_get("/inspect/plugins").await else {
        return println!("    (no /inspect/plugins {when})");
    };
    let plugins: Value = serde_json::from_str(&body).unwrap_or_default();
    for p in plugins.as_array().into_iter().flatten() {
        let calls = &p["calls"];
        println!(
            "    plugin {} {when}: {} calls, mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms",
            p["name"],
            calls["total"],
            calls["mean_ms"].as_f64().unwrap_or(0.0),
            calls["p50_ms"].as_f64().unwrap_or(0.0),
            calls["p99_ms"].as_f64().unwrap_or(0.0)
        );
    }
}

/// What the maestro plugin's batches cost so far, from `/metrics`: notification calls (batches),
/// the events they were given, the database statements of the plugin (status updates' included)
/// and the time spent in each.
#[derive(Clone, Copy, Debug, Default)]
struct BatchCosts {
    batches: f64,
    batch_seconds: f64,
    events: f64,
    handles: f64,
    statements: f64,
    statement_seconds: f64,
}

impl BatchCosts {
    async fn read(c: &Conductor) -> Self {
        let Ok((200, text)) = c.admin_get("/metrics").await else {
            return Self::default();
        };
        // The sum over the series of `name` whose labels contain every one of `labels`.
        let sum = |name: &str, labels: &[&str]| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
                .filter(|l| labels.iter().all(|want| l.contains(want)))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        let on_events = ["plugin=\"maestro\"", "call=\"on-events\""];
        Self {
            batches: sum("conductor_plugin_call_duration_seconds_count", &on_events),
            batch_seconds: sum("conductor_plugin_call_duration_seconds_sum", &on_events),
            events: sum("conductor_plugin_events_queued_total", &["plugin=\"maestro\""]),
            handles: sum(
                "conductor_plugin_call_duration_seconds_count",
                &["plugin=\"maestro\"", "call=\"handle\""],
            ),
            statements: sum(
                "conductor_database_statement_duration_seconds_count",
                &["plugin=\"maestro\""],
            ),
            statement_seconds: sum(
                "conductor_database_statement_duration_seconds_sum",
                &["plugin=\"maestro\""],
            ),
        }
    }

    /// Prints what happened between `before` and `self`.
    fn print_since(&self, before: &Self, when: &str) {
        let ran = self.batches - before.batches;
        let per_batch = ran.max(1.0);
        println!(
            "    batches {when}: {ran:.0} batches, {:.1} events each, {:.2} ms each of which {:.2} ms in {:.1} statements; {:.0} status calls beside",
            (self.events - before.events) / per_batch,
            1e3 * (self.batch_seconds - before.batch_seconds) / per_batch,
            1e3 * (self.statement_seconds - before.statement_seconds) / per_batch,
            (self.statements - before.statements) / per_batch,
            self.handles - before.handles,
        );
    }
}

/// Maestro's own writes, as the load tool makes them, with nothing but a LISTEN session at the
/// other end: the floor under conductor's figures on the same database and machine. `updates`
/// updates of `resources` resources at `rate` (from each write's start until its NOTIFY arrived:
/// p50, p99 in ms, and writes/s achieved), then `creates` creates as fast as 32 writers can
/// (NOTIFYs received per second).
async fn maestro_floor(db: &MaestroDb, resources: usize, updates: usize, rate: f64, creates: usize) -> [f64; 4] {
    use conductor_load::hub::{Resource, maestro::MaestroHub};
    const WRITERS: usize = 32;
    let hub = Arc::new(MaestroHub::connect(&db.url(), WRITERS as u32).await.unwrap());
    let clusters: Vec<String> = (0..resources).map(|n| format!("floor-{n}")).collect();
    hub.prepare(&clusters).await.unwrap();
    let mut listener = sqlx::postgres::PgListener::connect_with(&db.pool).await.unwrap();
    listener.listen("events").await.unwrap();
    let (received_tx, mut received_rx) = mpsc::unbounded_channel::<(String, Instant)>();
    let receiver = tokio::spawn(async move {
        while let Ok(note) = listener.recv().await {
            if received_tx.send((note.payload().to_owned(), Instant::now())).is_err() {
                break;
            }
        }
    });
    // The load tool's pacing, each write also giving the id of the event announcing it and when
    // it started.
    async fn paced<T, F, Fut>(count: usize, rate: f64, write: F) -> Vec<(T, String, Instant)>
    where
        T: Send + 'static,
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = (T, String)> + Send + 'static,
    {
        let timed = |i| {
            let write = write(i);
            async move {
                let began = Instant::now();
                let (out, event) = write.await;
                Ok((out, event, began))
            }
        };
        let done = conductor_load::run::paced(count, rate, WRITERS, |e| panic!("a write failed: {e:#}"), timed).await;
        done.into_iter().map(|w| w.expect("every write succeeded")).collect()
    }
    // Waits for the NOTIFY of each write: (latencies, sorted; when the last one arrived).
    async fn arrivals<T>(
        received: &mut mpsc::UnboundedReceiver<(String, Instant)>,
        written: &[(T, String, Instant)],
    ) -> (Vec<Duration>, Instant) {
        let mut wanted: HashMap<&str, Instant> = written.iter().map(|(_, e, t)| (e.as_str(), *t)).collect();
        let (mut latencies, mut last) = (Vec::with_capacity(written.len()), Instant::now());
        while !wanted.is_empty() {
            let (event, at) = tokio::time::timeout(Duration::from_secs(60), received.recv())
                .await
                .expect("every NOTIFY arrives")
                .unwrap();
            if let Some(began) = wanted.remove(event.as_str()) {
                latencies.push(at - began);
                last = at;
            }
        }
        latencies.sort();
        (latencies, last)
    }
    let created = paced(resources, f64::INFINITY, |i| {
        let (hub, cluster) = (Arc::clone(&hub), clusters[i].clone());
        async move {
            let (id, event) = hub.create_announced(&cluster, "floor").await.unwrap();
            let resource = Resource {
                cluster,
                name: "floor".into(),
                id,
                version: 1,
            };
            (resource, event)
        }
    })
    .await;
    arrivals(&mut received_rx, &created).await;
    let resources: Arc<Vec<Resource>> = Arc::new(created.into_iter().map(|(r, _, _)| r).collect());
    let began = Instant::now();
    let written = paced(updates, rate, |i| {
        let (hub, resources) = (Arc::clone(&hub), Arc::clone(&resources));
        async move {
            let (_, event) = hub.update_announced(&resources[i % resources.len()]).await.unwrap();
            ((), event)
        }
    })
    .await;
    let achieved = updates as f64 / began.elapsed().as_secs_f64();
    let (latencies, _) = arrivals(&mut received_rx, &written).await;
    let quantile = |q: usize| latencies[(latencies.len() * q).div_ceil(100) - 1].as_secs_f64() * 1e3;
    let (p50, p99) = (quantile(50), quantile(99));
    let (busy, postgres, writers) = (machine_busy(), db.postgres_cpu(), cpu_seconds(std::process::id()));
    let began = Instant::now();
    let burst = paced(creates, f64::INFINITY, |i| {
        let (hub, cluster) = (Arc::clone(&hub), clusters[i % clusters.len()].clone());
        async move {
            (
                (),
                hub.create_announced(&cluster, &format!("burst-{i}")).await.unwrap().1,
            )
        }
    })
    .await;
    let (_, last) = arrivals(&mut received_rx, &burst).await;
    let per_create = |seconds: f64| seconds * 1e6 / creates as f64;
    println!(
        "    floor burst: the machine {:.0} % busy; per create: PostgreSQL {:.0} µs, the writers (this process) {:.0} µs",
        busy(),
        per_create(db.postgres_cpu() - postgres),
        per_create(cpu_seconds(std::process::id()) - writers),
    );
    receiver.abort();
    // conductor starts on an empty database, as it would without the floor.
    sqlx::query("TRUNCATE events, resources, consumers CASCADE")
        .execute(&db.pool)
        .await
        .unwrap();
    [p50, p99, achieved, creates as f64 / (last - began).as_secs_f64()]
}

fn maestro(rt: &tokio::runtime::Runtime) {
    let agents = env_usize("AGENTS_MAESTRO", 1000);
    let events = env_usize("MAESTRO_EVENTS", 10_000);
    println!("maestro: {agents} agents; {events} updates at 1,000/s; a burst of {events} creates");
    // Maestro's writes for `agents` clusters named `<prefix>-<n>`, plus `extra` arguments.
    let maestro_load = |db: &MaestroDb, c: &Conductor, prefix: &str, extra: &[&str]| {
        let agents = agents.to_string();
        let url = db.url();
        let mut args = vec!["--hub", "maestro", "--database-url", &url, "--cluster-prefix", prefix];
        args.extend(["--agents", &agents, "--writers", "32", "--drain-timeout", "120s"]);
        args.extend(extra);
        load(&c.url(), c.pid(), &args)
    };
    let updates = events.to_string();
    let per_agent = (events / agents).max(1).to_string();
    let steady = |db: &MaestroDb, c: &Conductor, prefix: &str| {
        let timing = ["--create-rate", "1000", "--rate", "1000", "--updates", &updates];
        maestro_load(db, c, prefix, &timing)
    };
    let burst = |db: &MaestroDb, c: &Conductor, prefix: &str| {
        let timing = [
            "--resources-per-agent",
            &per_agent,
            "--create-rate",
            "1000000",
            "--updates",
            "0",
        ];
        maestro_load(db, c, prefix, &timing)
    };
    // conductor with its default pool of 4 instances, with one batch at a time
    // (`limits.concurrent_notifications = 1`) and with 4 at once (what the plugin declares), each
    // on a fresh database.
    let conductor = |lanes: usize| {
        rt.block_on(async {
            let db = MaestroDb::start().await;
            let config = format!(
                "{}limits = {{ concurrent_notifications = {lanes} }}\n",
                support::config_with(&db.url(), "1h", Form::Component, 10, 4)
            );
            let c = Conductor::start(&config).expect("conductor starts");
            let busy = machine_busy();
            let start = BatchCosts::read(&c).await;
            let s = tokio::task::block_in_place(|| steady(&db, &c, "steady"));
            let after_steady = BatchCosts::read(&c).await;
            after_steady.print_since(&start, &format!("{lanes} at once, steady phase"));
            println!(
                "    {lanes} at once, steady phase: conductor {:.0} % of a core, the machine {:.0} % busy",
                f(&s, &["server_process", "update_phase_cpu_percent"]),
                busy()
            );
            print_plugin_calls(&c, &format!("{lanes} at once, after the steady phase")).await;
            let (busy, server, postgres) = (machine_busy(), cpu_seconds(c.pid()), db.postgres_cpu());
            let b = tokio::task::block_in_place(|| burst(&db, &c, "burst"));
            let per_event = |seconds: f64| seconds * 1e6 / events as f64;
            println!(
                "    {lanes} at once, burst (with the load tool's 1,000 connects): the machine {:.0} % busy; per event: conductor {:.0} µs, PostgreSQL {:.0} µs",
                busy(),
                per_event(cpu_seconds(c.pid()) - server),
                per_event(db.postgres_cpu() - postgres),
            );
            print_plugin_calls(&c, &format!("{lanes} at once, after the burst")).await;
            BatchCosts::read(&c)
                .await
                .print_since(&after_steady, &format!("{lanes} at once, burst"));
            [
                f(&s, &["updates", "latency_ms", "p50"]),
                f(&s, &["updates", "latency_ms", "p99"]),
                f(&s, &["update_rate_achieved"]),
                f(&b, &["creates", "delivered_per_second"]),
                f(&b, &["creates", "latency_ms", "p99"]),
            ]
        })
    };
    let (figures, _) = runs("maestro", || {
        let (floor, writes) = rt.block_on(async {
            let db = MaestroDb::start().await;
            let floor = bare_notify_p99(&db, events, 1000.0).await;
            (floor, maestro_floor(&db, agents, events, 1000.0, events).await)
        });
        let serial = conductor(1);
        let concurrent = conductor(4);
        let all: Vec<f64> = [floor]
            .into_iter()
            .chain(writes)
            .chain(serial)
            .chain(concurrent)
            .collect();
        <[f64; 15]>::try_from(all).expect("15 figures")
    });
    println!(
        "  | | bare NOTIFY → LISTEN | Maestro's writes → LISTEN | conductor, one batch at a time | conductor, 4 batches at once |"
    );
    println!(
        "  | at 1,000 events/s: p50 / p99 (ms) | — / {:.2} | {:.2} / {:.2} ({:.0} writes/s) | {:.2} / {:.2} ({:.0} writes/s) | {:.2} / {:.2} ({:.0} writes/s) |",
        figures[0],
        figures[1],
        figures[2],
        figures[3],
        figures[5],
        figures[6],
        figures[7],
        figures[10],
        figures[11],
        figures[12]
    );
    println!(
        "  | burst of creates, events/s | | {:.0} | {:.0} (p99 {:.0} ms) | {:.0} (p99 {:.0} ms) |",
        figures[4], figures[8], figures[9], figures[13], figures[14]
    );
}

fn main() {
    let Some(rt) = conductor_blackbox_tests::bench_runtime(run_raw_server) else {
        return;
    };
    let args: Vec<String> = std::env::args().collect();
    let only: Vec<&str> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let wanted = |name: &str| only.is_empty() || only.contains(&name);
    println!("load tool: {}", load_bin().display());
    if wanted("memory") {
        memory(&rt);
    }
    if wanted("cpu") {
        cpu(&rt);
    }
    if wanted("maestro") {
        maestro(&rt);
    }
}
