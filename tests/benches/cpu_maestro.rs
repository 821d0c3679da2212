//! CPU per event on the maestro paths, beside the least work each could do (issue 37;
//! see BENCHMARKS.md):
//!
//! - **maestro status**: `AGENTS` (100) work agents, each on its own gRPC connection, publish
//!   `STATUS_PER_AGENT` (50) status updates each, all agents at once, each update with a newer
//!   sequence id so that it is stored (`resources.status`, a `status_events` row, `pg_notify`).
//!   Figure: conductor's CPU-µs per update persisted. Floors in the same run: the floor binary
//!   (`tests/floors/maestro.rs`, `floor-maestro status`: plain tonic + sqlx running the same
//!   transaction), and PostgreSQL's own CPU per transaction while pgbench runs that transaction
//!   (`PGBENCH_SECONDS`, 5 s, 8 clients, prepared statements), beside PostgreSQL's CPU per update
//!   while conductor (and the floor) write them.
//! - **maestro spec**: Maestro's write (resource row, `events` row, NOTIFY) → the agent's
//!   stream, `AGENTS` agents subscribed on their own connections, `SPEC_WRITES` (3,000) writes
//!   paced at `SPEC_RATE` (200) per second, each for the next agent's cluster. Figure: conductor's
//!   CPU-µs per event delivered. Floor: `floor-maestro spec` (LISTEN, one SELECT, tonic send), or
//!   the floor modes `SPEC_FLOOR` names, separated by commas, each in every run (ratios against the
//!   first): `spec-transaction` (the maestro plugin's transaction for a batch of one, five round
//!   trips), `spec-unpipelined` (the same through tokio-postgres) or `spec-pipelined` (the same
//!   in two round trips, tokio-postgres pipelining).
//!
//! CPU is user + system time from `/proc/<pid>/stat`, read just before and just after the measured
//! phase (never over start-up), beside the server's context switches per event (summed over its
//! threads: how often a thread parked and was woken again, the hand-overs an event took);
//! PostgreSQL's is the sum over the postmaster and its children (`ppid`), reaped children
//! included (the postmaster's `cutime`/`cstime`). Each run starts
//! conductor and the floors afresh and alternates which goes first; the figures are the medians of
//! `RUNS` (3). `INSTANCES` (8) plugin instances, `REQUEST_CALLS` (1, the shipped configurations'
//! `limits.request_calls`) agent calls at once, twice as many pooled connections (the floors
//! pool as many). Only one scenario: `-- status` or `-- spec`.
//!
//! `cargo build --release -p conductor && scripts/build-plugins.sh && \
//!  cargo bench -p conductor-blackbox-tests --bench cpu_maestro`
//!
//! `CONDUCTOR_BIN_B=<dir>/release/conductor` runs a second build (its maestro component in
//! `<dir>/wasm32-wasip2/plugin/`) beside the first in every run, in turns that put each build
//! first, second and third equally often, and prints each build's medians and the median of the
//! runs' B / A: the way to measure a change against the build before it on this noisy machine.
//!
//! `PLUGIN_FORM=native` loads the maestro plugin as a native library instead (`cargo build
//! --release -p maestro-plugin --lib`, beside the binary): the difference is what the component
//! boundary costs.
//!
//! `PROFILE=1` profiles conductor alone instead (no figures): `PROFILE_SECONDS` (10) of each
//! scenario's load under `scripts/profile.sh`, flame graphs `cpu-maestro-{status,spec}.svg` in
//! `PROFILE_DIR`, by default `docs/benchmarks/` (as `cpu_kube`).

#[path = "../support/maestro.rs"]
mod support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::builds::{self, Build};
use conductor_blackbox_tests::context_switches as switches;
use conductor_blackbox_tests::cpu_seconds as cpu;
use conductor_blackbox_tests::events::{attr, attr_str};
use conductor_blackbox_tests::proto::cloud_event::Data;
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::{
    CloudEventServiceClient, Conductor, Form, HEARTBEAT, WORKS, env_usize, median, proto, publish, subscribe,
};
use serde_json::{Value, json};
use support::{MaestroDb, config_with, maestro_create, pgbench_status, seed, status_update};
use tokio::sync::mpsc;
use tonic::transport::Channel;

type Client = CloudEventServiceClient<Channel>;
type Delivered = mpsc::UnboundedReceiver<(proto::CloudEvent, Instant)>;

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A phase's events and the CPU spent over it: the server's and PostgreSQL's, seconds.
#[derive(Debug, Clone, Copy)]
struct Phase {
    events: usize,
    server: f64,
    postgres: f64,
    /// The server's context switches.
    switches: u64,
    /// Wall-clock seconds the phase took.
    seconds: f64,
}

impl Phase {
    fn server_us(&self) -> f64 {
        self.server * 1e6 / self.events as f64
    }

    fn switches_per_event(&self) -> f64 {
        self.switches as f64 / self.events as f64
    }

    fn postgres_us(&self) -> f64 {
        self.postgres * 1e6 / self.events as f64
    }

    fn per_second(&self) -> f64 {
        self.events as f64 / self.seconds
    }
}

/// Measures `work` (which returns how many events it made): CPU and context switches of `pid`,
/// CPU of PostgreSQL.
async fn measured(pid: u32, postmaster: u32, work: impl std::future::Future<Output = usize>) -> Phase {
    let (server, switched, postgres) = (cpu(pid), switches(pid), support::postgres_cpu(postmaster));
    let started = Instant::now();
    let events = work.await;
    Phase {
        events,
        server: cpu(pid) - server,
        switches: switches(pid) - switched,
        postgres: support::postgres_cpu(postmaster) - postgres,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// A floor server (`floor-maestro <mode>`), killed when dropped.
struct FloorServer {
    child: Child,
    url: String,
}

impl FloorServer {
    fn start(mode: &str, db: &MaestroDb, pool: usize) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_floor-maestro"))
            .args([mode, &db.url(), &pool.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("the floor starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("its address");
        assert!(!line.trim().is_empty(), "floor-maestro {mode} printed no address");
        Self {
            child,
            url: format!("http://{}", line.trim()),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for FloorServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `agents` agents on their own connections to `url`; with `subscribe`, each subscribed to its
/// cluster's manifest bundles, every event it receives (heartbeats aside) sent to the receiver.
async fn connect(url: &str, agents: usize, subscribe_too: bool) -> (Vec<Client>, Delivered) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut clients = Vec::with_capacity(agents);
    for i in 0..agents {
        let mut client = Client::connect(url.to_owned()).await.expect("an agent connects");
        if subscribe_too {
            let mut sub = subscribe(&mut client, &format!("cluster-{i}"), WORKS)
                .await
                .expect("an agent subscribes");
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Ok(Some(e)) = sub.stream.message().await {
                    if e.r#type != HEARTBEAT {
                        let _ = tx.send((e, Instant::now()));
                    }
                }
            });
        }
        clients.push(client);
    }
    (clients, rx)
}

/// Every agent publishes status updates for its resource `res-<i>`, ticks `base + 1`, `base + 2`,
/// …, `per_agent` each or until `until`, all agents at once. Returns how many were published.
async fn publish_statuses(clients: &[Client], base: i64, per_agent: usize, until: Option<Instant>) -> usize {
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let mut client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut sent = 0;
            while sent < per_agent && until.is_none_or(|t| Instant::now() < t) {
                let update = status_update(
                    &format!("cluster-{i}"),
                    &format!("res-{i}"),
                    1,
                    base + sent as i64 + 1,
                    "Applied",
                );
                publish(&mut client, update).await.expect("status accepted");
                sent += 1;
            }
            sent
        }));
    }
    let mut sent = 0;
    for t in tasks {
        sent += t.await.unwrap();
    }
    sent
}

/// Maestro's creates, `rate` per second, each for the next agent's cluster, `writes` of them or
/// until `until`; waits until each is delivered. Returns how many were written.
async fn write_specs(
    db: &MaestroDb,
    delivered: &mut Delivered,
    agents: usize,
    writes: usize,
    rate: usize,
    until: Option<Instant>,
    first: &mut Option<proto::CloudEvent>,
) -> usize {
    let mut waiting = HashSet::new();
    let mut arrived = |e: proto::CloudEvent, waiting: &mut HashSet<String>| {
        if let Some(id) = attr_str(&e, "ce-resourceid")
            && waiting.remove(id)
            && first.is_none()
        {
            *first = Some(e);
        }
    };
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    let mut written = 0;
    while written < writes && until.is_none_or(|t| Instant::now() < t) {
        tick.tick().await;
        let (id, _) = maestro_create(db, &format!("cluster-{}", written % agents)).await;
        waiting.insert(id);
        written += 1;
        while let Ok((e, _)) = delivered.try_recv() {
            arrived(e, &mut waiting);
        }
    }
    while !waiting.is_empty() {
        let (e, _) = tokio::time::timeout(Duration::from_secs(30), delivered.recv())
            .await
            .unwrap_or_else(|_| panic!("{} of {written} spec events not delivered within 30 s", waiting.len()))
            .expect("the agents' streams");
        arrived(e, &mut waiting);
    }
    written
}

/// What a status comes to apart from the event's own id and sequence id (for comparing the
/// floor's writes with conductor's).
fn status_shape(db_status: Option<Value>) -> Value {
    let mut s = db_status.expect("a stored status");
    if let Some(m) = s.as_object_mut() {
        m.remove("id");
        m.remove("sequenceid");
    }
    s
}

/// What a spec event comes to apart from its resource's own id and creation time.
fn spec_shape(e: &proto::CloudEvent) -> Value {
    let mut attributes = serde_json::Map::new();
    for key in e.attributes.keys() {
        let value = match attr(e, key) {
            Some(Attr::CeString(s)) if key == "ce-metadata" => {
                let meta: Value = serde_json::from_str(s).expect("metadata is JSON");
                let keys: Vec<&String> = meta.as_object().expect("an object").keys().collect();
                json!({ "metadata keys": keys, "name": meta["name"] })
            }
            _ if key == "ce-resourceid" => json!("<id>"),
            Some(a) => json!(format!("{a:?}")),
            None => Value::Null,
        };
        attributes.insert(key.clone(), value);
    }
    let data = match &e.data {
        Some(Data::BinaryData(b)) => serde_json::from_slice(b).expect("JSON data"),
        _ => Value::Null,
    };
    json!({"type": e.r#type, "source": e.source, "specversion": e.spec_version, "attributes": attributes, "data": data})
}

#[derive(Default)]
struct Figures {
    conductor: Vec<f64>,
    floor: Vec<f64>,
    pg_conductor: Vec<f64>,
    pg_floor: Vec<f64>,
    pg_bench: Vec<f64>,
    /// Context switches per event of conductor and of the floor.
    switches: Vec<f64>,
    floor_switches: Vec<f64>,
    /// Status only: conductor's updates per second, its commits per update, pgbench's tps.
    rate: Vec<f64>,
    commits: Vec<f64>,
    pg_tps: Vec<f64>,
}

/// The maestro plugin's configuration, `instances` instances and twice as many pooled
/// connections: the component, or with `PLUGIN_FORM=native` the native library of the release
/// build beside the conductor binary.
fn plugin_config(url: &str, instances: usize) -> String {
    let component = config_with(url, "5m", Form::Component, instances as u32 * 2, instances);
    conductor_blackbox_tests::in_bench_form(&component, "maestro-plugin")
}

struct Bench {
    db: MaestroDb,
    postmaster: u32,
    agents: usize,
    per_agent: usize,
    writes: usize,
    rate: usize,
    instances: usize,
    /// The plugin's `limits.request_calls`.
    request_calls: usize,
    /// The last status tick used: every phase's updates are newer than all before.
    tick: i64,
}

impl Bench {
    /// `build` (A, or B with `CONDUCTOR_BIN_B`) serving the bench; `a` is build A.
    fn conductor(&self, build: &Build, a: &Build) -> Conductor {
        let config = format!(
            "[broker]\nheartbeat_disabled = true\n{}limits = {{ request_calls = {} }}\n",
            plugin_config(&self.db.url(), self.instances),
            self.request_calls
        );
        build
            .start(&format!("{}\n{config}", conductor_blackbox_tests::BASE_CONFIG), a)
            .expect("conductor starts")
    }

    async fn status(&mut self, url: &str, pid: u32) -> Phase {
        let (clients, _) = connect(url, self.agents, false).await;
        self.status_on(&clients, pid).await.0
    }

    /// The status phase, and the database's commits per update meanwhile.
    async fn status_on(&mut self, clients: &[Client], pid: u32) -> (Phase, f64) {
        let before = self.db.count("SELECT count(*) FROM status_events").await;
        let commits = self.commits().await;
        let (base, per_agent) = (self.tick, self.per_agent);
        let phase = measured(pid, self.postmaster, publish_statuses(clients, base, per_agent, None)).await;
        let commits = self.commits().await - commits;
        self.tick += per_agent as i64;
        let written = self.db.count("SELECT count(*) FROM status_events").await - before;
        assert_eq!(written as usize, phase.events, "every status persisted once");
        let per_update = commits as f64 / phase.events as f64;
        (phase, per_update)
    }

    /// The next transaction id PostgreSQL will assign: every transaction that writes takes one
    /// (a read takes none, and this reading takes none), so the difference of two readings is the
    /// writing transactions between them — a batch's commit. Exact at once, where
    /// `pg_stat_database.xact_commit` counts what backends report when idle, up to ten seconds
    /// late (its 0.006 commits per update at 8 agents could not be true with batches of at most
    /// 100).
    async fn commits(&self) -> i64 {
        self.db
            .count("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::int8")
            .await
    }

    async fn spec(&self, delivered: &mut Delivered, pid: u32, first: &mut Option<proto::CloudEvent>) -> Phase {
        tokio::time::sleep(Duration::from_millis(500)).await;
        while delivered.try_recv().is_ok() {}
        let phase = measured(pid, self.postmaster, async {
            let n = write_specs(&self.db, delivered, self.agents, self.writes, self.rate, None, first).await;
            // Whatever the server does right after sending (conductor marks the events).
            tokio::time::sleep(Duration::from_millis(200)).await;
            n
        })
        .await;
        // The floor reconciles nothing: no event is left for conductor's catch-up at its next start.
        self.db
            .exec(
                "UPDATE events SET reconciled_date = now() WHERE reconciled_date IS NULL",
                &[],
            )
            .await;
        phase
    }

    /// PostgreSQL's CPU per transaction while pgbench runs the status transaction.
    fn pgbench(&self, seconds: u64) -> (f64, f64) {
        let before = support::postgres_cpu(self.postmaster);
        let run = pgbench_status(&self.db, self.agents, 8, seconds, true);
        // Its backends exit with it: let the postmaster reap them.
        std::thread::sleep(Duration::from_millis(300));
        let used = support::postgres_cpu(self.postmaster) - before;
        (used * 1e6 / run.transactions as f64, run.tps)
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b
}

fn print_status(f: &Figures) {
    let (c, fl) = (median(f.conductor.clone()), median(f.floor.clone()));
    println!(
        "maestro status: conductor {c:.0} µs/update, floor (tonic+sqlx) {fl:.0} µs ({:.1}×), PostgreSQL {:.0} µs/update under conductor ({:.0} under the floor), {:.0} µs/tx under pgbench",
        ratio(c, fl),
        median(f.pg_conductor.clone()),
        median(f.pg_floor.clone()),
        median(f.pg_bench.clone()),
    );
    print_switches("status", "update", f);
    let (rate, tps) = (median(f.rate.clone()), median(f.pg_tps.clone()));
    println!(
        "maestro status: conductor {rate:.0} updates/s, {:.3} commits/update; pgbench (8 clients, one update a transaction) {tps:.0} tps ({:.2}×)",
        median(f.commits.clone()),
        ratio(rate, tps),
    );
}

/// Who runs in turn `run`'s places: a build (its index and itself) or the floor (`None`). With one
/// build, conductor first in even runs and the floor first in odd ones; with two, the builds swap
/// places every other run as well (A B floor, floor B A, B A floor, floor A B), so each build runs
/// first, second and third as often as the other.
fn turns(builds: &[Build], run: usize) -> Vec<Option<(usize, &Build)>> {
    let mut order: Vec<Option<(usize, &Build)>> = builds::in_turn(builds, run / 2).into_iter().map(Some).collect();
    if run % 2 == 1 {
        order.reverse();
        order.insert(0, None);
    } else {
        order.push(None);
    }
    order
}

/// B against A ([`builds::compared`]; each build's figures hold the same floor's).
fn compared(a: &Figures, b: &Figures) -> String {
    builds::compared(&a.conductor, &b.conductor, &a.floor)
}

/// The floor modes of the spec scenario: `SPEC_FLOOR` (separated by commas), else `spec`. The
/// first is the floor conductor's ratio is taken against.
fn spec_floors() -> Vec<String> {
    let modes = std::env::var("SPEC_FLOOR").unwrap_or_default();
    let modes: Vec<String> = modes
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .collect();
    if modes.is_empty() {
        vec!["spec".to_owned()]
    } else {
        modes
    }
}

/// Each run's figures of a floor mode after the first: µs/event, PostgreSQL µs/event,
/// switches/event.
#[derive(Default)]
struct OtherFloor {
    server_us: Vec<f64>,
    postgres_us: Vec<f64>,
    switches: Vec<f64>,
}

fn print_switches(scenario: &str, event: &str, f: &Figures) {
    println!(
        "maestro {scenario}: context switches per {event}: conductor {:.1}, floor {:.1}",
        median(f.switches.clone()),
        median(f.floor_switches.clone()),
    );
}

fn print_spec(f: &Figures) {
    let (c, fl) = (median(f.conductor.clone()), median(f.floor.clone()));
    println!(
        "maestro spec: conductor {c:.0} µs/event, floor ({}) {fl:.0} µs ({:.1}×), PostgreSQL {:.0} µs/event under conductor ({:.0} under the floor; Maestro's writes included)",
        match spec_floors()[0].as_str() {
            "spec" => "LISTEN+SELECT+tonic".to_owned(),
            other => other.to_owned(),
        },
        ratio(c, fl),
        median(f.pg_conductor.clone()),
        median(f.pg_floor.clone()),
    );
    print_switches("spec", "event", f);
}

/// `PROFILE=1`: conductor alone under each scenario's load for `seconds`, profiled.
async fn profile(bench: &mut Bench, status: bool, spec: bool, seconds: u64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::var_os("PROFILE_DIR").map_or_else(|| root.join("docs/benchmarks"), PathBuf::from);
    let a = &builds::builds()[0];
    let c = bench.conductor(a, a);
    let (clients, mut delivered) = connect(&c.url(), bench.agents, true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = |name: &str, title: &str| -> Child {
        let out = dir.join(format!("cpu-maestro-{name}.svg"));
        Command::new(root.join("scripts/profile.sh"))
            .arg(c.pid().to_string())
            .arg(seconds.to_string())
            .arg(out)
            .arg(title)
            .current_dir(&root)
            .spawn()
            .expect("scripts/profile.sh runs")
    };
    // The load runs a little longer than perf records, which starts within a moment.
    let until = || Some(Instant::now() + Duration::from_secs(seconds + 2));
    if status {
        let mut profiler = start("status", "maestro status: conductor");
        let sent = publish_statuses(&clients, bench.tick, usize::MAX, until()).await;
        bench.tick += sent as i64; // more than any agent sent: newer than all
        assert!(
            profiler.wait().expect("the profiler").success(),
            "scripts/profile.sh failed"
        );
        println!("profiled maestro status: {sent} updates in {}s of load", seconds + 2);
    }
    if spec {
        while delivered.try_recv().is_ok() {}
        let mut profiler = start("spec", "maestro spec: conductor");
        let mut first = None;
        let (agents, rate) = (bench.agents, bench.rate);
        let sent = write_specs(&bench.db, &mut delivered, agents, usize::MAX, rate, until(), &mut first).await;
        assert!(
            profiler.wait().expect("the profiler").success(),
            "scripts/profile.sh failed"
        );
        println!("profiled maestro spec: {sent} events in {}s of load", seconds + 2);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let all = args.is_empty();
    let (status, spec) = (
        all || args.iter().any(|a| a == "status"),
        all || args.iter().any(|a| a == "spec"),
    );
    let runs = env_usize("RUNS", 3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let db = MaestroDb::start().await;
        let agents = env_usize("AGENTS", 100);
        seed(&db, agents).await;
        let mut bench = Bench {
            postmaster: db.postmaster(),
            db,
            agents,
            per_agent: env_usize("STATUS_PER_AGENT", 50),
            writes: env_usize("SPEC_WRITES", 3000),
            rate: env_usize("SPEC_RATE", 200),
            instances: env_usize("INSTANCES", 8),
            request_calls: env_usize("REQUEST_CALLS", 1),
            tick: 0,
        };
        let pgbench_seconds = env_usize("PGBENCH_SECONDS", 5) as u64;
        println!(
            "cpu_maestro: {agents} agents on their own connections; status {} updates ({} per agent); spec {} writes at {}/s; {} plugin instances ({}); load average {}",
            agents * bench.per_agent,
            bench.per_agent,
            bench.writes,
            bench.rate,
            bench.instances,
            conductor_blackbox_tests::bench_form().kind(),
            load_average()
        );
        if std::env::var("PROFILE").is_ok_and(|v| v == "1") {
            profile(&mut bench, status, spec, env_usize("PROFILE_SECONDS", 10) as u64).await;
            return;
        }
        let builds = builds::builds();
        // Each build's figures; the floor's are kept in each.
        let (mut st, mut sp): (Vec<Figures>, Vec<Figures>) = builds.iter().map(|_| Default::default()).unzip();
        let (mut conductor_status, mut floor_status, mut conductor_spec) = (None, None, None);
        // The first event each spec floor sent, and the floor modes after the first.
        let mut floor_specs: Vec<proto::CloudEvent> = Vec::new();
        let mut other_floors: std::collections::BTreeMap<String, OtherFloor> = Default::default();
        for run in 0..runs {
            let load_before = load_average();
            for turn in turns(&builds, run) {
                if let Some((b, build)) = turn {
                    let name_b = build.named(&builds);
                    let (st, sp) = (&mut st[b], &mut sp[b]);
                    let c = bench.conductor(build, &builds[0]);
                    let (clients, mut delivered) = connect(&c.url(), bench.agents, spec).await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if status {
                        let (p, commits) = bench.status_on(&clients, c.pid()).await;
                        conductor_status.get_or_insert(bench.db.resource("res-0").await.and_then(|r| r.status));
                        println!(
                            "run {run}: status, conductor{name_b}: {} updates, {:.0} µs/update (PostgreSQL {:.0} µs), {:.0} updates/s, {commits:.3} commits/update, {:.1} switches/update",
                            p.events,
                            p.server_us(),
                            p.postgres_us(),
                            p.per_second(),
                            p.switches_per_event(),
                        );
                        st.conductor.push(p.server_us());
                        st.switches.push(p.switches_per_event());
                        st.pg_conductor.push(p.postgres_us());
                        st.rate.push(p.per_second());
                        st.commits.push(commits);
                    }
                    if spec {
                        let mut first = None;
                        let p = bench.spec(&mut delivered, c.pid(), &mut first).await;
                        conductor_spec = conductor_spec.or(first);
                        println!(
                            "run {run}: spec, conductor{name_b}: {} events, {:.0} µs/event (PostgreSQL {:.0} µs), {:.1} switches/event",
                            p.events,
                            p.server_us(),
                            p.postgres_us(),
                            p.switches_per_event(),
                        );
                        sp.conductor.push(p.server_us());
                        sp.switches.push(p.switches_per_event());
                        sp.pg_conductor.push(p.postgres_us());
                    }
                } else {
                    let pool = bench.instances * 2;
                    if status {
                        let floor = FloorServer::start("status", &bench.db, pool);
                        let p = bench.status(&floor.url, floor.pid()).await;
                        floor_status.get_or_insert(bench.db.resource("res-0").await.and_then(|r| r.status));
                        println!(
                            "run {run}: status, floor: {} updates, {:.0} µs/update (PostgreSQL {:.0} µs), {:.1} switches/update",
                            p.events,
                            p.server_us(),
                            p.postgres_us(),
                            p.switches_per_event(),
                        );
                        for f in st.iter_mut() {
                            f.floor.push(p.server_us());
                            f.floor_switches.push(p.switches_per_event());
                            f.pg_floor.push(p.postgres_us());
                        }
                    }
                    let spec_floors = if spec { spec_floors() } else { Vec::new() };
                    for (n, mode) in spec_floors.iter().enumerate() {
                        let floor = FloorServer::start(mode, &bench.db, pool);
                        let (_clients, mut delivered) = connect(&floor.url, bench.agents, true).await;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        let mut first = None;
                        let p = bench.spec(&mut delivered, floor.pid(), &mut first).await;
                        floor_specs.extend(first);
                        println!(
                            "run {run}: spec, floor {mode}: {} events, {:.0} µs/event (PostgreSQL {:.0} µs), {:.1} switches/event",
                            p.events,
                            p.server_us(),
                            p.postgres_us(),
                            p.switches_per_event(),
                        );
                        if n > 0 {
                            let other = other_floors.entry(mode.clone()).or_default();
                            other.server_us.push(p.server_us());
                            other.postgres_us.push(p.postgres_us());
                            other.switches.push(p.switches_per_event());
                            continue;
                        }
                        for f in sp.iter_mut() {
                            f.floor.push(p.server_us());
                            f.floor_switches.push(p.switches_per_event());
                            f.pg_floor.push(p.postgres_us());
                        }
                    }
                }
            }
            if status {
                let (per_tx, tps) = tokio::task::block_in_place(|| bench.pgbench(pgbench_seconds));
                println!("run {run}: pgbench {tps:.0} tps, PostgreSQL {per_tx:.0} µs/tx");
                for f in st.iter_mut() {
                    f.pg_bench.push(per_tx);
                    f.pg_tps.push(tps);
                }
            }
            println!("run {run}: load average {load_before} before, {} after", load_average());
            if run == 0 {
                // The floors write and send what conductor does.
                if let (Some(c), Some(f)) = (&conductor_status, &floor_status) {
                    assert_eq!(
                        status_shape(c.clone()),
                        status_shape(f.clone()),
                        "the floor stores the status conductor stores"
                    );
                }
                if let Some(c) = &conductor_spec {
                    for f in &floor_specs {
                        assert_eq!(spec_shape(c), spec_shape(f), "the floor sends the event conductor sends");
                    }
                }
            }
        }
        println!("median of {runs} runs (load average {}):", load_average());
        for (b, build) in builds.iter().enumerate() {
            if builds.len() > 1 {
                println!("build {}: {}", build.label, build.bin.display());
            }
            if status {
                print_status(&st[b]);
            }
            if spec {
                print_spec(&sp[b]);
                for (mode, other) in &other_floors {
                    let us = median(other.server_us.clone());
                    println!(
                        "maestro spec: floor {mode} {us:.0} µs/event (conductor {:.1}× it), PostgreSQL {:.0} µs/event, {:.1} switches/event",
                        ratio(median(sp[b].conductor.clone()), us),
                        median(other.postgres_us.clone()),
                        median(other.switches.clone()),
                    );
                }
            }
        }
        if let [a, b] = &st[..]
            && status
        {
            println!("maestro status: {}", compared(a, b));
        }
        if let [a, b] = &sp[..]
            && spec
        {
            println!("maestro spec: {}", compared(a, b));
        }
    });
}
