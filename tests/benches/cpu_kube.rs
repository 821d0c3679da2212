//! CPU per event on the kube paths, conductor beside a floor measured in the same run (issue 37,
//! BENCHMARKS.md "CPU per event"). Only the server's own process counts: user + system CPU from
//! `/proc/<pid>/stat`, sampled just before and just after the measured phase (not during start-up,
//! the initial list or the agents' subscriptions).
//!
//! - **kube delivery**: `CLUSTERS` (100) work agents, each on its own gRPC connection subscribed
//!   to its own cluster; ManifestWorks (each with the cleanup finalizer and an agent's status
//!   from the start, as on a hub, so every phase reads objects of the same size) changed in the
//!   API server at `RATES` (100 and 500) changes/s, `CHANGES` (3,000) each, paced; the figure is CPU per delivered event, once every
//!   change arrived, beside the server's context switches per event (summed over its threads: how
//!   often a thread parked and was woken again, the hand-overs an event took). Floor:
//!   `floor-kube deliver` (tests/floors/kube.rs): a plain kube-rs watcher, the SDK's
//!   ManifestWork → CloudEvent conversion, tonic, no plugin, no authorization.
//! - **kube status**: the agents publish `STATUS_UPDATES` (3,000) status updates at `STATUS_RATE`
//!   (100/s) in all, each agent one at a time; the figure is CPU per status written. Floor:
//!   `floor-kube status`: the same merge patches of the status subresource, straight to the API
//!   server with kube-rs, at the same rate from as many tasks. The floor that is asked:
//!   `floor-kube serve-status`, a plain tonic server the same agents publish the same updates to,
//!   which judges each against its own watch of the works and sends the same patch: what conductor
//!   spends beyond it is its own (the plugin, the broker, the watch cache), where the first floor
//!   also leaves out the agents' requests and the watch.
//!
//! conductor and the floor reach the API server the same way (the test API server's plain-HTTP
//! front, in this process). Each figure is the median of `RUNS` (3) runs. With `PROFILE=1` (into
//! `docs/benchmarks/`) or `PROFILE_DIR`, the first run also records a flame graph of conductor
//! during each measured phase (`scripts/profile.sh`: `cpu-kube-delivery-<rate>.svg`,
//! `cpu-kube-status.svg`); perf costs CPU of its own, so take figures from a run without it.
//!
//! `cargo build --release -p conductor && scripts/build-plugins.sh && \
//!  cargo bench -p conductor-blackbox-tests --bench cpu_kube`
//!
//! `CONDUCTOR_BIN=<dir>/release/conductor` measures another build, to compare: the host there and
//! the kube component in `<dir>/wasm32-wasip2/plugin/`. `CONDUCTOR_BIN_B=<dir>/release/conductor`
//! runs a second build beside it in every run (A B in even runs, B A in odd ones, then the
//! floors) and prints each build's medians and the median of the runs' B / A: the way to measure a
//! change against the build before it on this noisy machine. `PLUGIN_FORM=native` loads the kube
//! plugin as a native library instead (`cargo build --release -p kube-plugin`, beside the
//! binary): the difference is what the component boundary costs.

#[path = "../floors/kube_common.rs"]
mod common;
#[path = "../support/kube.rs"]
mod kube_api;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::builds;
use conductor_blackbox_tests::context_switches as switches;
use conductor_blackbox_tests::cpu_seconds as cpu;
use conductor_blackbox_tests::events::{self, attr_str, integer, string};
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::{
    CloudEventServiceClient, Conductor, Form, WORKS, env_usize, median, publish, subscribe,
};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube_api::{KubeApi, kube_config};
use serde_json::json;
use tonic::transport::Channel;

fn works_resource() -> kube::api::ApiResource {
    let gvk = GroupVersionKind::gvk("work.open-cluster-management.io", "v1", "ManifestWork");
    kube::api::ApiResource::from_gvk_with_plural(&gvk, "manifestworks")
}

async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn work(cluster: &str, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": cluster, "labels": {"app": name},
                     "finalizers": [kube_api::FINALIZER]},
        "spec": {"workload": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}]}},
    }))
    .unwrap()
}

/// `<namespace>/<name>@<generation>` of each change that reached its agent.
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

fn key(namespace: &str, name: &str, generation: i64) -> String {
    format!("{namespace}/{name}@{generation}")
}

/// The one-minute load average.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}

/// A server under test: conductor, or the floor program.
enum Server {
    Conductor(Conductor),
    Floor(Child, String),
}

impl Server {
    fn pid(&self) -> u32 {
        match self {
            Self::Conductor(c) => c.pid(),
            Self::Floor(child, _) => child.id(),
        }
    }

    fn url(&self) -> String {
        match self {
            Self::Conductor(c) => c.url(),
            Self::Floor(_, addr) => format!("http://{addr}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Self::Floor(child, _) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn floor_command(mode: &str, kubeconfig: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_floor-kube"));
    c.arg(mode).arg(kubeconfig);
    c
}

/// A floor program in a mode that serves gRPC (`deliver`, `serve-status`), once it printed its
/// address.
fn serving_floor(mode: &str, kubeconfig: &std::path::Path) -> Server {
    let mut child = floor_command(mode, kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .expect("floor-kube starts");
    let mut addr = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut addr)
        .unwrap();
    Server::Floor(child, addr.trim().to_owned())
}

/// The agents: one connection and one subscription per cluster; what they receive is recorded.
struct Agents {
    clients: Vec<CloudEventServiceClient<Channel>>,
    arrivals: Arrivals,
    received: Arc<std::sync::atomic::AtomicUsize>,
}

async fn connect_agents(server: &Server, clusters: usize) -> Agents {
    let arrivals: Arrivals = Arc::default();
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for cl in 0..clusters {
        let mut client = CloudEventServiceClient::connect(server.url()).await.unwrap();
        let mut sub = subscribe(&mut client, &format!("cluster-{cl}"), WORKS).await.unwrap();
        let (arrivals, received) = (Arc::clone(&arrivals), Arc::clone(&received));
        tokio::spawn(async move {
            while let Ok(Some(e)) = sub.stream.message().await {
                let arrived = Instant::now();
                received.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(meta) = attr_str(&e, "ce-metadata") else {
                    continue;
                };
                let meta: serde_json::Value = serde_json::from_str(meta).unwrap();
                let version = match events::attr(&e, "ce-resourceversion") {
                    Some(Attr::CeInteger(v)) => i64::from(*v),
                    _ => 0,
                };
                let k = key(
                    meta["namespace"].as_str().unwrap_or_default(),
                    meta["name"].as_str().unwrap_or_default(),
                    version,
                );
                arrivals.lock().unwrap().entry(k).or_insert(arrived);
            }
        });
        clients.push(client);
    }
    Agents {
        clients,
        arrivals,
        received,
    }
}

impl Agents {
    /// Waits until the initial list reached the agents (at least `works` events) and nothing more
    /// arrived for a second.
    async fn settle(&self, works: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut last = usize::MAX;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = self.received.load(std::sync::atomic::Ordering::Relaxed);
            if (now >= works && now == last) || Instant::now() > deadline {
                return;
            }
            last = now;
        }
    }
}

/// The kube plugin's configuration: the component, or with `PLUGIN_FORM=native` the native
/// library of the release build beside the conductor binary.
fn plugin_entry(front: &kube_api::Front) -> String {
    conductor_blackbox_tests::in_bench_form(&kube_config(front, Form::Component), "kube-plugin")
}

/// Records a flame graph of `pid` for `seconds` into `PROFILE_DIR/<name>.svg`, if asked.
fn profile(pid: u32, seconds: f64, name: &str, title: &str) -> Option<Child> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = match std::env::var_os("PROFILE_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None if std::env::var("PROFILE").is_ok_and(|v| v == "1") => root.join("docs/benchmarks"),
        None => return None,
    };
    let out = dir.join(format!("{name}.svg"));
    Command::new(root.join("scripts/profile.sh"))
        .arg(pid.to_string())
        .arg(format!("{}", seconds.ceil().max(1.0) as u64))
        .arg(out)
        .arg(title)
        .spawn()
        .ok()
}

/// What one delivery phase measured of the server, from the first write to the last arrival.
struct Delivered {
    /// CPU seconds.
    cpu: f64,
    /// Context switches of the server's threads.
    switches: u64,
    /// Changes that never reached their agent.
    missing: usize,
    /// The rate the writes reached, per second.
    reached: f64,
}

/// One delivery phase: `changes` spec changes written at `rate`/s, each a new generation of one
/// work.
async fn delivery(
    admin: &kube::Client,
    agents: &Agents,
    pid: u32,
    (clusters, per_cluster): (usize, usize),
    (changes, rate): (usize, f64),
    serial: usize,
    profile_as: Option<(&str, &str)>,
) -> Delivered {
    let ar = works_resource();
    let apis: Vec<Api<DynamicObject>> = (0..clusters)
        .map(|c| Api::namespaced_with(admin.clone(), &format!("cluster-{c}"), &ar))
        .collect();
    let written: Arc<Mutex<Vec<String>>> = Arc::default();
    let limit = Arc::new(tokio::sync::Semaphore::new(64));
    let profiler = profile_as.and_then(|(name, title)| profile(pid, changes as f64 / rate, name, title));
    let (before, switched) = (cpu(pid), switches(pid));
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::with_capacity(changes);
    for i in 0..changes {
        tick.tick().await;
        let (cl, w) = (i % clusters, (i / clusters) % per_cluster);
        let api = apis[cl].clone();
        let (written, permit) = (Arc::clone(&written), Arc::clone(&limit).acquire_owned().await.unwrap());
        let replicas = 2 + serial * changes + i;
        tasks.push(tokio::spawn(async move {
            let name = format!("w{w}");
            let patch = json!({"spec": {"workload": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}]}}});
            let after = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
            drop(permit);
            written.lock().unwrap().push(key(
                &format!("cluster-{cl}"),
                &name,
                after.metadata.generation.unwrap_or(0),
            ));
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let reached = changes as f64 / started.elapsed().as_secs_f64();
    let written = std::mem::take(&mut *written.lock().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let missing = loop {
        let missing = {
            let arrivals = agents.arrivals.lock().unwrap();
            written.iter().filter(|k| !arrivals.contains_key(*k)).count()
        };
        if missing == 0 || Instant::now() > deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let (used, took) = (cpu(pid) - before, switches(pid) - switched);
    if let Some(mut p) = profiler {
        let _ = p.wait();
    }
    Delivered {
        cpu: used,
        switches: took,
        missing,
        reached,
    }
}

/// One status phase through a gRPC server (conductor, or the floor that is asked): every agent
/// publishes its share of `updates` status updates, one at a time, `rate`/s in all; returns (CPU
/// seconds, failed publishes).
async fn status_through_grpc(
    agents: &Agents,
    uids: &[Vec<String>],
    pid: u32,
    (updates, rate): (usize, f64),
    tag: &str,
    profile_as: Option<(&str, &str)>,
) -> (f64, usize) {
    let n = agents.clients.len();
    let profiler = profile_as.and_then(|(name, title)| profile(pid, updates as f64 / rate, name, title));
    let before = cpu(pid);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (agent, client) in agents.clients.iter().enumerate() {
        let (mut client, mine, tag) = (client.clone(), uids[agent].clone(), tag.to_owned());
        let share = updates / n + usize::from(agent < updates % n);
        tasks.push(tokio::spawn(async move {
            let ns = format!("cluster-{agent}");
            let mut failed = 0;
            for k in 0..share {
                tokio::time::sleep_until(common::due(start, agent, k, n, rate).into()).await;
                let (conditions, manifests) = common::status(&tag, k);
                let mut e = events::with_id(
                    events::agent_event(
                        &format!("{WORKS}.status.update_request"),
                        &ns,
                        "kube",
                        Some(json!({"conditions": conditions, "resourceStatus": manifests})),
                    ),
                    &mine[k % mine.len()],
                );
                e.attributes.insert("ce-resourceversion".into(), integer(1_000_000));
                e.attributes
                    .insert("ce-sequenceid".into(), string("7000000000000000001"));
                if publish(&mut client, e).await.is_err() {
                    failed += 1;
                }
            }
            failed
        }));
    }
    let mut failed = 0;
    for t in tasks {
        failed += t.await.unwrap();
    }
    let used = cpu(pid) - before;
    if let Some(mut p) = profiler {
        let _ = p.wait();
    }
    (used, failed)
}

/// The works of each cluster (`cluster-<i>`), sorted by name: (name, uid).
async fn works_by_cluster(admin: &kube::Client, clusters: usize) -> Vec<Vec<(String, String)>> {
    let ar = works_resource();
    let mut all = Vec::new();
    for c in 0..clusters {
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &format!("cluster-{c}"), &ar);
        let mut works: Vec<(String, String)> = api
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| (o.metadata.name.unwrap(), o.metadata.uid.unwrap()))
            .collect();
        works.sort();
        all.push(works);
    }
    all
}

/// How many works hold the status of the last update sent for them in the phase tagged `tag`, and
/// how many were updated.
async fn written_last(admin: &kube::Client, clusters: usize, per_agent: usize, tag: &str) -> String {
    let ar = works_resource();
    let all: Api<DynamicObject> = Api::all_with(admin.clone(), &ar);
    let works = all.list(&Default::default()).await.unwrap().items;
    let (mut ok, mut updated) = (0, 0);
    for c in 0..clusters {
        let ns = format!("cluster-{c}");
        let mut mine: Vec<&DynamicObject> = works
            .iter()
            .filter(|w| w.metadata.namespace.as_deref() == Some(&ns))
            .collect();
        mine.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        // The last update for work j is the largest k < per_agent with k % len == j.
        for (j, w) in mine.iter().enumerate() {
            let Some(k) = (0..per_agent).rev().find(|k| k % mine.len() == j) else {
                continue;
            };
            updated += 1;
            let want = format!("Apply manifest work complete {tag}-{k}");
            if w.data["status"]["conditions"][0]["message"] == want.as_str() {
                ok += 1;
            }
        }
    }
    format!("{ok} of the {updated} works updated hold their last status")
}

struct Row {
    /// Each build's figures (A, then B with `CONDUCTOR_BIN_B`), a figure per run.
    conductor: Vec<Vec<f64>>,
    floor: Vec<f64>,
    /// Context switches per event of each build and of the floor (deliveries only).
    conductor_switches: Vec<Vec<f64>>,
    floor_switches: Vec<f64>,
    /// The status floor that is asked (`floor-kube serve-status`); not kept for deliveries.
    served: Vec<f64>,
}

impl Row {
    fn new(builds: usize) -> Self {
        Self {
            conductor: vec![vec![]; builds],
            floor: vec![],
            conductor_switches: vec![vec![]; builds],
            floor_switches: vec![],
            served: vec![],
        }
    }

    /// With two builds, B against A ([`builds::compared`]).
    fn compared(&self) -> Option<String> {
        let [a, b] = &self.conductor[..] else { return None };
        Some(builds::compared(a, b, &self.floor))
    }
}

/// What every delivery phase of a run shares: the API server, the works, the changes to write at
/// each rate.
struct Deliveries<'a> {
    admin: &'a kube::Client,
    /// Clusters, and works per cluster.
    works: (usize, usize),
    changes: usize,
    rates: &'a [usize],
}

impl Deliveries<'_> {
    /// Connects an agent per cluster to `server`, waits until each has its works, then runs a
    /// delivery phase per rate, printed as `who`'s in `run`: the agents, and each rate's CPU µs
    /// and context switches per event. `profiling` records a flame graph of each (`PROFILE`).
    async fn through(
        &self,
        server: &Server,
        serial: &mut usize,
        (run, who, profiling): (usize, &str, bool),
    ) -> (Agents, Vec<(f64, f64)>) {
        let ((clusters, per_cluster), changes) = (self.works, self.changes);
        let agents = connect_agents(server, clusters).await;
        agents.settle(clusters * per_cluster).await;
        let mut measured = vec![];
        for rate in self.rates {
            let name = format!("cpu-kube-delivery-{rate}");
            let title = format!("{who}: kube delivery, {rate} changes/s, {clusters} agents");
            let profile_as = profiling.then_some((name.as_str(), title.as_str()));
            let pace = (changes, *rate as f64);
            let d = delivery(self.admin, &agents, server.pid(), self.works, pace, *serial, profile_as).await;
            *serial += 1;
            let (per, switched) = (us(d.cpu, changes), d.switches as f64 / changes as f64);
            println!(
                "  run {run}: {who} delivery {rate}/s: {per:.1} µs/event ({:.2} CPU s, {switched:.1} switches/event, {} missing, writes {:.0}/s, load {})",
                d.cpu,
                d.missing,
                d.reached,
                load_average()
            );
            measured.push((per, switched));
        }
        (agents, measured)
    }
}

fn us(cpu_seconds: f64, events: usize) -> f64 {
    cpu_seconds * 1e6 / events as f64
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let clusters = env_usize("CLUSTERS", 100);
    let per_cluster = env_usize("WORKS_PER_CLUSTER", 10);
    let changes = env_usize("CHANGES", 3000);
    let rates: Vec<usize> = std::env::var("RATES")
        .ok()
        .map(|r| r.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 500]);
    let updates = env_usize("STATUS_UPDATES", 3000);
    let status_rate = env_usize("STATUS_RATE", 100) as f64;
    let runs = env_usize("RUNS", 3);

    let api = tokio::task::spawn_blocking(KubeApi::start).await.unwrap();
    let front = api.front().await;
    let admin = client(&api.kubeconfig).await;
    let ar = works_resource();
    for c in 0..clusters {
        let ns = format!("cluster-{c}");
        let works: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &ar);
        for w in 0..per_cluster {
            let name = format!("w{w}");
            let created = works.create(&PostParams::default(), &work(&ns, &name)).await.unwrap();
            // As on a hub, every work carries its agent's status from the start (the kube
            // plugin's patch), so every delivery phase, conductor's and the floor's, reads
            // objects of the same size.
            let (conditions, manifests) = common::status("initial", w);
            let (uid, version) = (
                created.metadata.uid.unwrap(),
                created.metadata.resource_version.unwrap(),
            );
            let status = common::status_patch(&uid, &version, &conditions, &manifests);
            works
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap();
        }
    }
    let sample: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "cluster-0", &ar);
    let size = serde_json::to_string(&sample.get("w0").await.unwrap()).map_or(0, |j| j.len());
    let total = clusters * per_cluster;
    println!(
        "cpu_kube: {total} works across {clusters} clusters ({size} bytes of JSON each, with a status), \
         one agent (connection + subscription) per cluster; delivery: {changes} changes at {rates:?}/s; status: {updates} updates at {status_rate}/s; {runs} runs; \
         the kube plugin: {}; load average {}",
        conductor_blackbox_tests::bench_form().kind(),
        load_average()
    );
    let conductor_config = format!(
        "{}[broker]\nheartbeat_disabled = true\n{}",
        conductor_blackbox_tests::BASE_CONFIG,
        plugin_entry(&front)
    );

    let builds = builds::builds();
    let mut delivery_rows: Vec<Row> = rates.iter().map(|_| Row::new(builds.len())).collect();
    let mut status_row = Row::new(builds.len());
    let deliveries = Deliveries {
        admin: &admin,
        works: (clusters, per_cluster),
        changes,
        rates: &rates,
    };
    let mut serial = 0;
    for run in 0..runs {
        let uids: Vec<Vec<String>> = works_by_cluster(&admin, clusters)
            .await
            .into_iter()
            .map(|w| w.into_iter().map(|(_, uid)| uid).collect())
            .collect();
        for (b, build) in builds::in_turn(&builds, run) {
            let profiling = run == 0 && b == 0;
            let name_b = build.named(&builds);
            // conductor: delivery at each rate, then status.
            let server = Server::Conductor(build.start(&conductor_config, &builds[0]).unwrap());
            let pid = server.pid();
            let who = format!("conductor{name_b}");
            let (agents, measured) = deliveries.through(&server, &mut serial, (run, &who, profiling)).await;
            for (i, (per, switched)) in measured.into_iter().enumerate() {
                delivery_rows[i].conductor[b].push(per);
                delivery_rows[i].conductor_switches[b].push(switched);
            }
            // Warm-up: one update per work through this server, before the measured updates.
            let tag = format!("c{run}{b}w");
            status_through_grpc(&agents, &uids, pid, (total, 200.0), &tag, None).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let tag = format!("c{run}{b}");
            let (used, failed) = status_through_grpc(
                &agents,
                &uids,
                pid,
                (updates, status_rate),
                &tag,
                profiling.then_some(("cpu-kube-status", "conductor: kube status updates written")),
            )
            .await;
            let ok = written_last(&admin, clusters, updates / clusters, &tag).await;
            let per = us(used, updates);
            println!(
                "  run {run}: conductor{name_b} status: {per:.1} µs/status ({used:.2} CPU s, {failed} failed, {ok}, load {})",
                load_average()
            );
            status_row.conductor[b].push(per);
            drop(agents);
            drop(server);
        }

        // The floor: delivery at each rate.
        let server = serving_floor("deliver", &front.kubeconfig);
        let (agents, measured) = deliveries.through(&server, &mut serial, (run, "floor", false)).await;
        for (i, (per, switched)) in measured.into_iter().enumerate() {
            delivery_rows[i].floor.push(per);
            delivery_rows[i].floor_switches.push(switched);
        }
        drop(agents);
        drop(server);

        // The floor: status.
        let mut child = floor_command("status", &front.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("floor-kube starts");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        let mut stdin: ChildStdin = child.stdin.take().unwrap();
        let pid = child.id();
        let tag = format!("f{run}");
        let before = cpu(pid);
        writeln!(stdin, "{tag} {status_rate} {updates} {clusters}").unwrap();
        line.clear();
        let done = tokio::task::spawn_blocking(move || {
            out.read_line(&mut line).unwrap();
            line
        })
        .await
        .unwrap();
        let used = cpu(pid) - before;
        let ok = written_last(&admin, clusters, updates / clusters, &tag).await;
        let per = us(used, updates);
        println!(
            "  run {run}: floor status: {per:.1} µs/status ({used:.2} CPU s, {}, {ok})",
            done.trim()
        );
        status_row.floor.push(per);
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();

        // The floor that is asked: the same agents' updates, answered by a plain tonic server that
        // judges each against its own watch of the works and patches it.
        let server = serving_floor("serve-status", &front.kubeconfig);
        let pid = server.pid();
        let agents = connect_agents(&server, clusters).await;
        let tag = format!("s{run}w");
        status_through_grpc(&agents, &uids, pid, (total, 200.0), &tag, None).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let tag = format!("s{run}");
        let (used, failed) = status_through_grpc(&agents, &uids, pid, (updates, status_rate), &tag, None).await;
        let ok = written_last(&admin, clusters, updates / clusters, &tag).await;
        let per = us(used, updates);
        println!("  run {run}: served floor status: {per:.1} µs/status ({used:.2} CPU s, {failed} failed, {ok})");
        status_row.served.push(per);
    }
    println!("median of {runs} runs (CPU µs per event, conductor / floor = ratio):");
    for (rate, row) in rates.iter().zip(delivery_rows) {
        let f = median(row.floor.clone());
        for (b, build) in builds.iter().enumerate() {
            let c = median(row.conductor[b].clone());
            println!(
                "  kube delivery {rate}/s: conductor{} {c:.1} µs, floor {f:.1} µs, {:.2}×; context switches per event: conductor {:.1}, floor {:.1}",
                build.named(&builds),
                c / f,
                median(row.conductor_switches[b].clone()),
                median(row.floor_switches.clone())
            );
        }
        if let Some(compared) = row.compared() {
            println!("  kube delivery {rate}/s: {compared}");
        }
    }
    let (f, served) = (median(status_row.floor.clone()), median(status_row.served.clone()));
    for (b, build) in builds.iter().enumerate() {
        let c = median(status_row.conductor[b].clone());
        println!(
            "  kube status: conductor{} {c:.1} µs, floor {f:.1} µs, {:.2}×; the floor that is asked {served:.1} µs, {:.2}×",
            build.named(&builds),
            c / f,
            c / served
        );
    }
    if let Some(compared) = status_row.compared() {
        println!("  kube status: {compared}");
    }
    println!("load average at the end: {}", load_average());
}
