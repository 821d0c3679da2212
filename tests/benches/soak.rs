//! A long mixed soak of the maestro source on two replicas (issue 46 part 5; BENCHMARKS.md,
//! "soak"). A bench, not a test: it runs for an hour by default and prints its figures.
//!
//! **Set-up.** A real PostgreSQL with Maestro's schema; two conductor replicas (two processes,
//! A and B, each with the maestro component, both on that database, each on its own gRPC port);
//! `SOAK_CLUSTERS` (1,000) clusters, each with its own work agent on its own gRPC connection.
//! The agents of even clusters start on A, of odd ones on B.
//!
//! **An agent** subscribes to its cluster's manifest bundles and sends its spec resync request
//! with the versions it holds, as the work agent does. It applies a spec newer than what it holds
//! and answers it with an `Applied` status update; it answers a delete (a spec carrying
//! `deletiontimestamp`) with the `Deleted` condition, which makes conductor hard-delete the row;
//! a version it already holds it ignores, as the work agent does. Status updates wait in order
//! and are published until conductor accepts them (the work agent retries its status updates).
//! When its stream ends it reconnects to whichever replica is up, trying the other one first, as
//! an agent behind a Service would, and resyncs; it never goes back by itself.
//!
//! **The load.** For `SOAK_SECONDS` (3,600), `SOAK_RATE` (50) writes per second as Maestro
//! writes them (`docs/maestro-database.md` §6.1: rows, an `events` row and its NOTIFY, each in
//! autocommit; updates and soft deletes under Maestro's `resources` lock), each for a random
//! cluster (`SOAK_SEED`, 46). During the warm-up (the first tenth) 60 % creates and 40 %
//! updates build the live set; after it 50 % updates and 50 % churn hold it at its size at the
//! warm-up's end: a churn write creates while the live set is below that size and soft-deletes a
//! live resource of its cluster otherwise (a create when the cluster has none). What the replicas
//! hold is then the same at the end as after the warm-up, and resident memory can be judged flat. Creates and updates go through the load tool's Maestro driver
//! (`conductor_load::hub::maestro`).
//!
//! **The fault.** At half time replica B is killed (SIGKILL) and started again `SOAK_DOWN_SECONDS`
//! (10) later on a new port. Its agents move to A and stay there.
//!
//! **The end.** After the writes, up to `SOAK_SETTLE_SECONDS` (120) for everything to arrive, then:
//!
//! - **nothing lost**: every live resource's version reached its agent (the highest version the
//!   agent received is `resources.version`); every soft-deleted resource reached its agent as a
//!   delete and is gone from `resources` (hard-deleted after its agent's `Deleted` status); no
//!   resource vanished otherwise;
//! - **every status in Maestro's tables**: for every live resource, the last status its agent
//!   sent (for the resource's current version) is its `status` column, and a `StatusUpdate` row of
//!   `status_events` exists for it; every deleted resource has its `StatusDelete` row. Statuses
//!   for a version the resource no longer has are dropped by design (§5.2 step 7): they are
//!   reported as "superseded", not lost;
//! - **duplicates**, counted, not failed: deliveries of a resource version (or of a delete) the
//!   agent already received. The protocol allows them, and the agent ignores them by
//!   `resourceversion` (§6.2, §7.3): a resync after a reconnect re-sends every soft-deleted row
//!   of the cluster as a delete, always, and can cross a live event of the same version; an event
//!   notified to both replicas is sent by each to its own agents only, so an agent that moved
//!   from B to A can get from A what B already sent it; the periodic catch-up and the re-handling
//!   after a lost LISTEN re-send events, reading the current row; and two events of one resource
//!   handled in different batches both send the row as it is then, the same version twice.
//!   Deliveries of a version older than one the agent already received are counted apart
//!   (per-resource order, §7.5: expected 0);
//! - **resident memory** of each replica, sampled every `SOAK_SAMPLE_SECONDS` (10) from
//!   `/proc/<pid>/status`: at the end of the warm-up (the first tenth of the run, counted for
//!   B's second life from its restart), at the end, and the least-squares slope in MiB per hour
//!   after the warm-up; B's figures restart with it; A's are also given for each half (it takes
//!   B's agents at the kill), the second from a warm-up after B's restart; every sample is
//!   written to the CSV file `SOAK_SAMPLES` names (replica, life, seconds, MiB, live resources),
//!   if set; each row also gives the live set at its first and last sample;
//! - each write's latency to its agent's first delivery (p50, p99, max, p99 by tenth of the run),
//!   the duplicates by tenth, and the `events` rows not yet reconciled, sampled with the memory:
//!   the events a catch-up would send again;
//! - conductor's CPU (both replicas, user + system, B's killed life up to its kill and its
//!   second life from its start) per write and per delivery.
//!
//! The figures are printed as a table; the bench exits non-zero when anything was lost.
//!
//! `cargo build --release -p conductor && scripts/build-plugins.sh && \
//!  SOAK_SECONDS=3600 cargo bench -p conductor-blackbox-tests --bench soak`

#[path = "../support/maestro.rs"]
mod support;

use std::collections::{HashMap, HashSet, VecDeque};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use conductor_blackbox_tests::events::{self, attr, attr_str};
use conductor_blackbox_tests::{CloudEventServiceClient, Conductor, HEARTBEAT, WORKS, env_usize, proto, publish};
use conductor_load::hub::{Resource, maestro::MaestroHub};
use sqlx::{PgPool, Row};
use support::{MaestroDb, advisory_key, status_update};
use tokio::sync::Semaphore;
use tonic::transport::Channel;

type Client = CloudEventServiceClient<Channel>;

/// The two replicas, by index.
const NAMES: [&str; 2] = ["A", "B"];
/// The replica killed at half time.
const KILLED: usize = 1;

// ---------------------------------------------------------------------------------------------
// Settings.

/// What the environment asks of the run.
#[derive(Debug, Clone)]
struct Settings {
    seconds: u64,
    clusters: usize,
    rate: f64,
    seed: u64,
    down: Duration,
    settle: Duration,
    sample_every: Duration,
    catch_up: String,
}

impl Settings {
    fn from_env() -> Self {
        let rate = std::env::var("SOAK_RATE").ok().and_then(|v| v.parse().ok());
        Self {
            seconds: env_usize("SOAK_SECONDS", 3600) as u64,
            clusters: env_usize("SOAK_CLUSTERS", 1000).max(1),
            rate: rate.filter(|r: &f64| *r > 0.0).unwrap_or(50.0),
            seed: env_usize("SOAK_SEED", 46) as u64,
            down: Duration::from_secs(env_usize("SOAK_DOWN_SECONDS", 10) as u64),
            settle: Duration::from_secs(env_usize("SOAK_SETTLE_SECONDS", 120) as u64),
            sample_every: Duration::from_secs(env_usize("SOAK_SAMPLE_SECONDS", 10).max(1) as u64),
            catch_up: std::env::var("SOAK_CATCH_UP").unwrap_or_else(|_| "5m".into()),
        }
    }

    /// The warm-up: the first tenth of the run.
    fn warm_up(&self) -> f64 {
        self.seconds as f64 / 10.0
    }

    fn cluster(i: usize) -> String {
        format!("soak-{i}")
    }
}

/// SplitMix64: a small seeded generator, so that a run's mix of writes can be repeated.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

// ---------------------------------------------------------------------------------------------
// Maestro's writes.

/// What the writer did.
#[derive(Debug, Default, Clone)]
struct Writes {
    creates: u64,
    updates: u64,
    deletes: u64,
    seconds: f64,
    /// Every resource soft-deleted.
    deleted: HashSet<String>,
}

impl Writes {
    fn total(&self) -> u64 {
        self.creates + self.updates + self.deletes
    }
}

/// Maestro's writes for the clusters: creates and updates through the load tool's driver, soft
/// deletes here (the driver has none), each announced by an `events` row and its NOTIFY.
struct Writer {
    hub: MaestroHub,
    pool: PgPool,
    clusters: Vec<String>,
    /// The live resources of each cluster.
    live: Vec<Vec<Resource>>,
    /// How many there are in all.
    live_total: usize,
    /// The live set's size at the warm-up's end, which the steady mix holds.
    steady_size: Option<usize>,
    mix: Mix,
    done: Writes,
    /// Where each write's time is told.
    ledger: Arc<Ledger>,
}

impl Writer {
    async fn connect(url: &str, clusters: Vec<String>, seed: u64, ledger: Arc<Ledger>) -> Result<Self> {
        let hub = MaestroHub::connect(url, 2).await?;
        hub.prepare(&clusters).await?;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(url)
            .await
            .context("the writer's connection to the Maestro database")?;
        Ok(Self {
            hub,
            pool,
            live: vec![Vec::new(); clusters.len()],
            live_total: 0,
            steady_size: None,
            clusters,
            mix: Mix(seed),
            done: Writes::default(),
            ledger,
        })
    }

    /// `rate` writes per second for `seconds`, paced from the start (a late write does not delay
    /// the next ones).
    async fn run(mut self, seconds: u64, rate: f64) -> Result<Writes> {
        let started = tokio::time::Instant::now();
        let _ = self.ledger.timeline.start.set(started.into_std());
        let total = (seconds as f64 * rate).round() as u64;
        for i in 0..total {
            tokio::time::sleep_until(started + Duration::from_secs_f64(i as f64 / rate)).await;
            self.write_one(i < total / 10).await?;
        }
        self.done.seconds = started.elapsed().as_secs_f64();
        Ok(self.done)
    }

    /// One write for a random cluster: while `warming`, 60 % creates and 40 % updates; then 50 %
    /// updates and 50 % churn (a create or a soft delete) that holds the live set's size.
    async fn write_one(&mut self, warming: bool) -> Result<()> {
        let c = self.mix.below(self.clusters.len());
        let roll = self.mix.below(100);
        let began = Instant::now();
        let written = |id: &str, version: i32| self.ledger.timeline.written((id.to_owned(), version), began);
        let create = if warming {
            roll < 60
        } else {
            // Half of the steady writes are churn: a create while the live set is below its size
            // at the warm-up's end, a soft delete otherwise, so that it stays that size.
            let size = *self.steady_size.get_or_insert(self.live_total);
            roll >= 50 && self.live_total < size
        };
        let update = !create && (warming || roll < 50);
        if self.live[c].is_empty() || create {
            let (cluster, name) = (self.clusters[c].clone(), format!("work-{}", self.done.creates));
            let (id, version) = self.hub.create(&cluster, &name).await?;
            written(&id, version as i32);
            self.live[c].push(Resource {
                cluster,
                name,
                id,
                version,
            });
            self.done.creates += 1;
            self.live_total += 1;
        } else if update {
            let i = self.mix.below(self.live[c].len());
            let (version, _) = self.hub.update_announced(&self.live[c][i]).await?;
            written(&self.live[c][i].id, version as i32);
            self.live[c][i].version = version;
            self.done.updates += 1;
        } else {
            let i = self.mix.below(self.live[c].len());
            let resource = self.live[c].swap_remove(i);
            self.soft_delete(&resource.id).await?;
            written(&resource.id, DELETE);
            self.done.deleted.insert(resource.id);
            self.done.deletes += 1;
            self.live_total -= 1;
        }
        self.ledger.live.store(self.live_total, Ordering::Relaxed);
        Ok(())
    }

    /// Maestro's MarkAsDeleting: under the resource's `resources` lock, `deleted_at`; then the
    /// `Delete` event and its NOTIFY, each in autocommit.
    async fn soft_delete(&self, id: &str) -> Result<()> {
        let mut tx = self.pool.begin_with("BEGIN").await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(advisory_key(id))
            .bind(advisory_key("resources"))
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE resources SET deleted_at = now(), updated_at = now() WHERE id = $1 AND deleted_at IS NULL")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        let event = uuid::Uuid::new_v4().to_string();
        sqlx::query("INSERT INTO events (id, created_at, updated_at, source, source_id, event_type) VALUES ($1, now(), now(), 'Resources', $2, 'Delete')")
            .bind(&event)
            .bind(id)
            .execute(&self.pool)
            .await?;
        sqlx::query("SELECT pg_notify('events', $1)")
            .bind(&event)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The replicas.

/// One replica: its process while it is up, and what its earlier lives used.
struct Replica {
    process: Option<Conductor>,
    /// 0 for the first life, 1 after a restart.
    life: u32,
    /// When this life started.
    started: Instant,
    /// CPU seconds of the lives that ended.
    retired_cpu: f64,
}

/// The two replicas, on one configuration.
struct Replicas {
    config: String,
    slots: [Mutex<Replica>; 2],
}

impl Replicas {
    fn start(config: String) -> Result<Self> {
        let one = |config: &str| -> Result<Mutex<Replica>> {
            Ok(Mutex::new(Replica {
                process: Some(Conductor::start(config)?),
                life: 0,
                started: Instant::now(),
                retired_cpu: 0.0,
            }))
        };
        let slots = [one(&config)?, one(&config)?];
        Ok(Self { config, slots })
    }

    fn slot(&self, i: usize) -> std::sync::MutexGuard<'_, Replica> {
        self.slots[i].lock().expect("the replica table")
    }

    /// The gRPC address of replica `i`, while it is up.
    fn url(&self, i: usize) -> Option<String> {
        self.slot(i).process.as_ref().map(Conductor::url)
    }

    /// Replica `i`'s process and life, while it is up.
    fn pid(&self, i: usize) -> Option<(u32, u32)> {
        let slot = self.slot(i);
        slot.process.as_ref().map(|c| (c.pid(), slot.life))
    }

    /// SIGKILLs replica `i` (dropping a `Conductor` kills it with SIGKILL and reaps it), keeping
    /// the CPU its life used.
    fn kill(&self, i: usize) {
        let mut slot = self.slot(i);
        if let Some(c) = slot.process.take() {
            slot.retired_cpu += cpu_of(c.pid());
            drop(c);
        }
    }

    /// Starts replica `i` again, on a new port (blocking: it waits until the replica serves).
    fn restart(&self, i: usize) -> Result<()> {
        let process = Conductor::start(&self.config)?;
        let mut slot = self.slot(i);
        slot.process = Some(process);
        slot.life += 1;
        slot.started = Instant::now();
        Ok(())
    }

    /// CPU seconds used by every life of both replicas so far.
    fn cpu(&self) -> f64 {
        (0..2)
            .map(|i| {
                let slot = self.slot(i);
                slot.retired_cpu + slot.process.as_ref().map_or(0.0, |c| cpu_of(c.pid()))
            })
            .sum()
    }

    /// When replica `i`'s current life started.
    fn started(&self, i: usize) -> Instant {
        self.slot(i).started
    }
}

/// CPU seconds of process `pid`; 0 when it is gone.
fn cpu_of(pid: u32) -> f64 {
    conductor_load::process::sample(pid).map_or(0.0, |s| s.cpu_seconds)
}

/// Kills replica B at `at`, starts it again `down` later; returns when it serves again.
async fn kill_and_restart(replicas: Arc<Replicas>, at: tokio::time::Instant, down: Duration) -> Result<()> {
    tokio::time::sleep_until(at).await;
    let killed = Instant::now();
    replicas.kill(KILLED);
    println!("  replica B killed (SIGKILL)");
    tokio::time::sleep(down).await;
    let restarting = Arc::clone(&replicas);
    tokio::task::spawn_blocking(move || restarting.restart(KILLED)).await??;
    println!(
        "  replica B started again, {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// What the agents received and sent.

/// What one resource's agent received.
#[derive(Debug, Default)]
struct Received {
    highest: i32,
    versions: HashSet<i32>,
    deletes: u32,
}

/// The last status an agent had accepted for a resource.
#[derive(Debug, Clone)]
struct Sent {
    event_id: String,
    version: i32,
}

/// Counters of the agents, all together.
#[derive(Debug, Default)]
struct Counts {
    deliveries: AtomicU64,
    resync_deliveries: AtomicU64,
    duplicates_live: AtomicU64,
    duplicates_resync: AtomicU64,
    older: AtomicU64,
    statuses_accepted: AtomicU64,
    statuses_refused: AtomicU64,
    /// Statuses waiting to be published (a gauge).
    statuses_waiting: AtomicI64,
    connects: AtomicU64,
    reconnects: AtomicU64,
    /// The longest time from a stream's end to the agent's resync on another stream, ms.
    slowest_resync_ms: AtomicU64,
}

/// A write and the first delivery of what it wrote, by resource id and version (the version a
/// delete wrote is [`DELETE`]).
type WriteKey = (String, i32);

/// The version of a delete in a [`WriteKey`].
const DELETE: i32 = -1;

/// Whichever of a write and its first delivery was seen first.
enum Mark {
    Written(Instant),
    Arrived(Instant),
}

/// When things happened: each write's latency to its agent, and when duplicates came.
#[derive(Default)]
struct Timeline {
    /// When the writes started.
    start: OnceLock<Instant>,
    marks: Mutex<HashMap<WriteKey, Mark>>,
    /// Seconds since the start and latency in ms of each write's first delivery.
    latencies: Mutex<Vec<(f64, f64)>>,
    /// Seconds since the start of each duplicate delivery.
    duplicates: Mutex<Vec<f64>>,
}

impl Timeline {
    fn since_start(&self, at: Instant) -> f64 {
        self.start
            .get()
            .map_or(0.0, |s| at.saturating_duration_since(*s).as_secs_f64())
    }

    /// The write of `key` began at `began` (told once it returned: its delivery may come first).
    fn written(&self, key: WriteKey, began: Instant) {
        self.meet(key, Mark::Written(began));
    }

    /// The first delivery of `key` arrived now.
    fn arrived(&self, key: WriteKey) {
        self.meet(key, Mark::Arrived(Instant::now()));
    }

    fn meet(&self, key: WriteKey, mark: Mark) {
        let mut marks = self.marks.lock().expect("the timeline");
        let (began, arrived) = match (marks.remove(&key), mark) {
            (Some(Mark::Written(began)), Mark::Arrived(arrived))
            | (Some(Mark::Arrived(arrived)), Mark::Written(began)) => (began, arrived),
            (_, mark) => {
                marks.insert(key, mark);
                return;
            }
        };
        drop(marks);
        let latency = arrived.saturating_duration_since(began).as_secs_f64() * 1e3;
        let at = self.since_start(arrived);
        self.latencies.lock().expect("the timeline").push((at, latency));
    }

    fn duplicate(&self) {
        let at = self.since_start(Instant::now());
        self.duplicates.lock().expect("the timeline").push(at);
    }
}

/// Everything the agents received and sent, shared by them and read at the end.
#[derive(Default)]
struct Ledger {
    received: Mutex<HashMap<String, Received>>,
    sent: Mutex<HashMap<String, Sent>>,
    counts: Counts,
    timeline: Timeline,
    /// The next status's sequence tick: increasing across all agents, so per resource too.
    ticks: AtomicI64,
    /// The writer's live resources: what the replicas hold.
    live: AtomicUsize,
}

impl Ledger {
    /// A spec of resource `id` at `version` (a delete when `deleting`) reached its agent.
    fn delivered(&self, id: &str, version: i32, deleting: bool, via_resync: bool) {
        let c = &self.counts;
        c.deliveries.fetch_add(1, Ordering::Relaxed);
        if via_resync {
            c.resync_deliveries.fetch_add(1, Ordering::Relaxed);
        }
        let mut received = self.received.lock().expect("the ledger");
        let r = received.entry(id.to_owned()).or_default();
        let duplicate = if deleting {
            r.deletes += 1;
            r.deletes > 1
        } else if !r.versions.insert(version) {
            true
        } else {
            if version < r.highest {
                c.older.fetch_add(1, Ordering::Relaxed);
            }
            false
        };
        r.highest = r.highest.max(version);
        drop(received);
        if duplicate {
            self.timeline.duplicate();
            let counter = if via_resync {
                &c.duplicates_resync
            } else {
                &c.duplicates_live
            };
            counter.fetch_add(1, Ordering::Relaxed);
        } else {
            let key = (id.to_owned(), if deleting { DELETE } else { version });
            self.timeline.arrived(key);
        }
    }

    fn next_tick(&self) -> i64 {
        self.ticks.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn accepted(&self, status: &proto::CloudEvent) {
        self.counts.statuses_accepted.fetch_add(1, Ordering::Relaxed);
        let (Some(id), Some(version)) = (attr_str(status, "ce-resourceid"), support::version(status)) else {
            return;
        };
        let sent = Sent {
            event_id: status.id.clone(),
            version,
        };
        self.sent.lock().expect("the ledger").insert(id.to_owned(), sent);
    }

    /// A stream ended `ended` ago was replaced by a resynced one.
    fn resynced_after(&self, ended: Instant) {
        self.counts.reconnects.fetch_add(1, Ordering::Relaxed);
        let ms = ended.elapsed().as_millis() as u64;
        self.counts.slowest_resync_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn highest(&self, id: &str) -> Option<(i32, u32)> {
        let received = self.received.lock().expect("the ledger");
        received.get(id).map(|r| (r.highest, r.deletes))
    }

    fn last_sent(&self, id: &str) -> Option<Sent> {
        self.sent.lock().expect("the ledger").get(id).cloned()
    }
}

// ---------------------------------------------------------------------------------------------
// The agents.

/// Reconnection backoff: from `MIN_BACKOFF`, doubling to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A status update conductor answers `Unavailable` (busy, or its replica going away) is tried
/// again this many times on the same stream before the agent reconnects.
const BUSY_RETRIES: u32 = 5;

/// One cluster's work agent.
struct Agent {
    cluster: String,
    home: usize,
    /// The works it holds: resource id → version.
    held: HashMap<String, i64>,
    /// Resources it deleted.
    deleted: HashSet<String>,
    /// Status updates not yet accepted, oldest first.
    waiting: VecDeque<proto::CloudEvent>,
    ledger: Arc<Ledger>,
    replicas: Arc<Replicas>,
}

impl Agent {
    /// Runs until aborted: connects (its first time one of `first`'s permits), serves the stream,
    /// and on its end reconnects to whichever replica is up, the other one tried first.
    async fn run(mut self, first: Arc<Semaphore>) {
        let mut permit = Some(
            first
                .acquire_owned()
                .await
                .expect("the connect semaphore is never closed"),
        );
        let (mut replica, mut backoff, mut ended) = (self.home, MIN_BACKOFF, None::<Instant>);
        loop {
            let connected = match self.replicas.url(replica) {
                Some(url) => self.connect(&url).await.ok(),
                None => None,
            };
            let Some((client, stream)) = connected else {
                replica = 1 - replica;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            };
            drop(permit.take());
            self.ledger.counts.connects.fetch_add(1, Ordering::Relaxed);
            if let Some(at) = ended.take() {
                self.ledger.resynced_after(at);
            }
            backoff = MIN_BACKOFF;
            // However the stream ended (replica killed, stream cut, a status not taken), the
            // agent reconnects and resyncs.
            let _ended_because = self.serve(client, stream).await;
            ended = Some(Instant::now());
            replica = 1 - replica;
        }
    }

    /// A connection of its own, its subscription, and its resync request (the versions it holds).
    async fn connect(&mut self, url: &str) -> Result<(Client, tonic::Streaming<proto::CloudEvent>)> {
        let mut client = Client::connect(url.to_owned()).await?;
        let sub = conductor_blackbox_tests::subscribe(&mut client, &self.cluster, WORKS).await?;
        let held: Vec<(&str, i64)> = self.held.iter().map(|(id, v)| (id.as_str(), *v)).collect();
        publish(&mut client, events::resync_request(WORKS, &self.cluster, &held)).await?;
        Ok((client, sub.stream))
    }

    /// Publishes the waiting statuses, then takes the stream's events, answering each; returns
    /// when the stream ends or conductor cannot take a status.
    async fn serve(&mut self, mut client: Client, mut stream: tonic::Streaming<proto::CloudEvent>) -> Result<()> {
        loop {
            self.publish_waiting(&mut client).await?;
            let Some(event) = stream.message().await? else {
                bail!("the stream ended");
            };
            if event.r#type == HEARTBEAT {
                continue;
            }
            if let Some(status) = self.receive(&event) {
                self.ledger.counts.statuses_waiting.fetch_add(1, Ordering::Relaxed);
                self.waiting.push_back(status);
            }
        }
    }

    /// What the work agent does with a spec event: the status update it answers with, if any.
    fn receive(&mut self, event: &proto::CloudEvent) -> Option<proto::CloudEvent> {
        let id = attr_str(event, "ce-resourceid")?.to_owned();
        let version = support::version(event)?;
        let deleting = attr(event, "ce-deletiontimestamp").is_some();
        let via_resync = event.r#type.ends_with(".spec.resync_response");
        self.ledger.delivered(&id, version, deleting, via_resync);
        if deleting {
            // Deleting is idempotent: a repeated delete is answered again, as the work agent
            // reports a work it no longer has as deleted.
            self.held.remove(&id);
            self.deleted.insert(id.clone());
            return Some(self.status(&id, version, "Deleted"));
        }
        let newer = self.held.get(&id).is_none_or(|held| i64::from(version) > *held);
        if !newer || self.deleted.contains(&id) {
            return None;
        }
        self.held.insert(id.clone(), i64::from(version));
        Some(self.status(&id, version, "Applied"))
    }

    fn status(&self, id: &str, version: i32, condition: &str) -> proto::CloudEvent {
        status_update(&self.cluster, id, version, self.ledger.next_tick(), condition)
    }

    /// Publishes the waiting statuses in order. One conductor refuses (an invalid update) is
    /// counted and dropped; `Unavailable` is tried again a few times; anything else ends the
    /// stream, the statuses kept for the next one.
    async fn publish_waiting(&mut self, client: &mut Client) -> Result<()> {
        let mut busy = 0;
        while let Some(status) = self.waiting.front() {
            match publish(client, status.clone()).await {
                Ok(()) => self.ledger.accepted(status),
                Err(s) if refused(s.code()) => {
                    eprintln!("  a status of {} refused: {s}", self.cluster);
                    self.ledger.counts.statuses_refused.fetch_add(1, Ordering::Relaxed);
                }
                Err(s) if s.code() == tonic::Code::Unavailable && busy < BUSY_RETRIES => {
                    busy += 1;
                    tokio::time::sleep(MIN_BACKOFF).await;
                    continue;
                }
                Err(s) => return Err(s.into()),
            }
            self.waiting.pop_front();
            self.ledger.counts.statuses_waiting.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Whether a status update was refused for what it is (so sending it again changes nothing).
fn refused(code: tonic::Code) -> bool {
    use tonic::Code::*;
    matches!(
        code,
        InvalidArgument | FailedPrecondition | PermissionDenied | Unauthenticated | NotFound
    )
}

/// Starts an agent per cluster, half on each replica, at most 100 connecting at once, and waits
/// until every one has subscribed and resynced.
async fn start_agents(
    clusters: &[String],
    replicas: &Arc<Replicas>,
    ledger: &Arc<Ledger>,
) -> Result<tokio::task::JoinSet<()>> {
    let first = Arc::new(Semaphore::new(100));
    let mut agents = tokio::task::JoinSet::new();
    for (i, cluster) in clusters.iter().enumerate() {
        let agent = Agent {
            cluster: cluster.clone(),
            home: i % 2,
            held: HashMap::new(),
            deleted: HashSet::new(),
            waiting: VecDeque::new(),
            ledger: Arc::clone(ledger),
            replicas: Arc::clone(replicas),
        };
        agents.spawn(agent.run(Arc::clone(&first)));
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while ledger.counts.connects.load(Ordering::Relaxed) < clusters.len() as u64 {
        if Instant::now() > deadline {
            bail!("not every agent connected within 300 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(agents)
}

// ---------------------------------------------------------------------------------------------
// Resident memory.

/// One resident-memory sample of a replica.
#[derive(Debug, Clone, Copy)]
struct MemorySample {
    replica: usize,
    life: u32,
    /// Seconds since the writes started.
    at: f64,
    mib: f64,
    /// The live resources (all clusters') at that moment.
    live: usize,
}

/// Samples each replica that is up every `every`, until aborted.
async fn sample_memory(
    replicas: Arc<Replicas>,
    ledger: Arc<Ledger>,
    start: Instant,
    every: Duration,
    out: Arc<Mutex<Vec<MemorySample>>>,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        for replica in 0..2 {
            let Some((pid, life)) = replicas.pid(replica) else {
                continue;
            };
            // The process may have just been killed.
            if let Ok(s) = conductor_load::process::sample(pid) {
                let at = start.elapsed().as_secs_f64();
                let sample = MemorySample {
                    replica,
                    life,
                    at,
                    mib: s.rss as f64 / (1024.0 * 1024.0),
                    live: ledger.live.load(Ordering::Relaxed),
                };
                out.lock().expect("the samples").push(sample);
            }
        }
    }
}

/// Counts, every `every` until aborted, the `events` rows no replica has marked reconciled yet
/// (seconds since `start`, count): events the periodic catch-up would send again.
async fn sample_unreconciled(pool: PgPool, start: Instant, every: Duration, out: Arc<Mutex<Vec<(f64, i64)>>>) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let counted = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM events WHERE reconciled_date IS NULL")
            .fetch_one(&pool)
            .await;
        if let Ok(n) = counted {
            out.lock()
                .expect("the samples")
                .push((start.elapsed().as_secs_f64(), n));
        }
    }
}

/// The memory figures of one life of a replica.
#[derive(Debug, Clone, Copy)]
struct MemoryFigures {
    warm_mib: f64,
    end_mib: f64,
    warm_live: usize,
    end_live: usize,
    slope_mib_per_hour: f64,
    samples: usize,
}

/// The figures of `samples` (one life's, in time order) after `warm_until` seconds.
fn memory_figures(samples: &[MemorySample], warm_until: f64) -> Option<MemoryFigures> {
    let warm: Vec<&MemorySample> = samples.iter().filter(|s| s.at >= warm_until).collect();
    let (first, last) = (warm.first()?, warm.last()?);
    Some(MemoryFigures {
        warm_mib: first.mib,
        end_mib: last.mib,
        warm_live: first.live,
        end_live: last.live,
        slope_mib_per_hour: slope(&warm) * 3600.0,
        samples: warm.len(),
    })
}

/// The least-squares slope of MiB over seconds; NaN with fewer than two samples.
fn slope(samples: &[&MemorySample]) -> f64 {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return f64::NAN;
    }
    let (mean_t, mean_m) = (
        samples.iter().map(|s| s.at).sum::<f64>() / n,
        samples.iter().map(|s| s.mib).sum::<f64>() / n,
    );
    let covariance: f64 = samples.iter().map(|s| (s.at - mean_t) * (s.mib - mean_m)).sum();
    let variance: f64 = samples.iter().map(|s| (s.at - mean_t).powi(2)).sum();
    covariance / variance
}

// ---------------------------------------------------------------------------------------------
// The checks at the end.

/// What the database and the agents say at the end.
#[derive(Debug, Default)]
struct Outcome {
    live: usize,
    /// Live resources whose version never reached their agent.
    lost_specs: usize,
    /// Soft-deleted resources still in `resources`: the delete, or its `Deleted` status, lost.
    lost_deletes: usize,
    /// Live resources whose agent's last status (for their version) is not their `status`.
    lost_statuses: usize,
    /// Live resources with a stored status and no `StatusUpdate` row, or deleted resources with
    /// no `StatusDelete` row.
    missing_status_events: usize,
    /// Resources gone from `resources` that were never soft-deleted.
    vanished: usize,
    status_updates: usize,
    status_deletes: usize,
    /// Examples of what was lost, for the log.
    examples: Vec<String>,
}

impl Outcome {
    /// Notes an example of what was lost (the first ten).
    fn example(&mut self, what: String) {
        if self.examples.len() < 10 {
            self.examples.push(what);
        }
    }

    fn lost(&self) -> usize {
        self.lost_specs + self.lost_deletes + self.lost_statuses + self.missing_status_events + self.vanished
    }
}

/// One row of `resources`.
struct ResourceRow {
    id: String,
    version: i64,
    deleting: bool,
    status_id: Option<String>,
}

async fn rows(pool: &PgPool) -> Result<Vec<ResourceRow>> {
    let rows = sqlx::query("SELECT id, version, deleted_at IS NOT NULL, status->>'id' FROM resources")
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| ResourceRow {
            id: r.get(0),
            version: r.get(1),
            deleting: r.get(2),
            status_id: r.get(3),
        })
        .collect())
}

/// The resources with a `status_events` row of `kind`.
async fn with_status_event(pool: &PgPool, kind: &str) -> Result<HashSet<String>> {
    let ids = sqlx::query_scalar("SELECT DISTINCT resource_id FROM status_events WHERE status_event_type = $1")
        .bind(kind)
        .fetch_all(pool)
        .await?;
    Ok(ids.into_iter().collect())
}

/// Compares the database with what the agents received and sent.
async fn check(pool: &PgPool, ledger: &Ledger, writes: &Writes) -> Result<Outcome> {
    let rows = rows(pool).await?;
    let updates = with_status_event(pool, "StatusUpdate").await?;
    let deletes = with_status_event(pool, "StatusDelete").await?;
    let mut out = Outcome {
        status_updates: sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM status_events WHERE status_event_type = 'StatusUpdate'",
        )
        .fetch_one(pool)
        .await? as usize,
        status_deletes: sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM status_events WHERE status_event_type = 'StatusDelete'",
        )
        .fetch_one(pool)
        .await? as usize,
        ..Outcome::default()
    };
    let present: HashSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    for row in &rows {
        if row.deleting {
            out.lost_deletes += 1;
            let received = ledger.highest(&row.id);
            out.example(format!(
                "{} soft-deleted, still there (agent received {received:?})",
                row.id
            ));
            continue;
        }
        out.live += 1;
        let highest = ledger.highest(&row.id).map_or(0, |(v, _)| i64::from(v));
        if highest < row.version {
            out.lost_specs += 1;
            out.example(format!("{} at version {}, agent has {highest}", row.id, row.version));
            continue;
        }
        let sent = ledger.last_sent(&row.id);
        let stored = match &sent {
            Some(s) => i64::from(s.version) == row.version && row.status_id.as_deref() == Some(&s.event_id),
            None => false,
        };
        if !stored {
            out.lost_statuses += 1;
            out.example(format!("{}: status {:?}, last sent {sent:?}", row.id, row.status_id));
        } else if !updates.contains(&row.id) {
            out.missing_status_events += 1;
            out.example(format!("{}: no StatusUpdate row", row.id));
        }
    }
    for id in writes.deleted.iter().filter(|id| !present.contains(id.as_str())) {
        if !deletes.contains(id) {
            out.missing_status_events += 1;
            out.example(format!("{id}: deleted, no StatusDelete row"));
        }
    }
    let gone = writes
        .deleted
        .iter()
        .filter(|id| !present.contains(id.as_str()))
        .count();
    out.vanished = (writes.creates as usize).saturating_sub(rows.len() + gone);
    Ok(out)
}

/// Waits until nothing is lost and no status waits, at most `settle`; the last outcome and how
/// long it took.
async fn settle(pool: &PgPool, ledger: &Ledger, writes: &Writes, settle: Duration) -> Result<(Outcome, Duration)> {
    let began = Instant::now();
    loop {
        let outcome = check(pool, ledger, writes).await?;
        let waiting = ledger.counts.statuses_waiting.load(Ordering::Relaxed);
        if (outcome.lost() == 0 && waiting == 0) || began.elapsed() >= settle {
            return Ok((outcome, began.elapsed()));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The report.

/// `/proc/loadavg`'s three averages, as text.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
        .unwrap_or_default()
}

/// `n` with a comma every three digits.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// The `q` quantile of sorted `values` (NaN when empty).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Prints the latency of the writes to their agents, overall and by tenth of the run, and the
/// duplicates by tenth: a backlog that grows, or duplicates bunched after the kill, show here.
fn print_timeline(timeline: &Timeline, seconds: f64) {
    let latencies = timeline.latencies.lock().expect("the timeline").clone();
    let duplicates = timeline.duplicates.lock().expect("the timeline").clone();
    let mut all: Vec<f64> = latencies.iter().map(|(_, ms)| *ms).collect();
    all.sort_by(f64::total_cmp);
    println!(
        "  | write → agent, first delivery of each write: p50 / p99 / max | {:.1} / {:.1} / {:.0} ms ({} writes) |",
        quantile(&all, 0.5),
        quantile(&all, 0.99),
        all.last().copied().unwrap_or(f64::NAN),
        all.len()
    );
    let tenth = |at: f64| ((at / seconds * 10.0) as usize).min(9);
    let mut p99s = Vec::new();
    for t in 0..10 {
        let mut in_tenth: Vec<f64> = latencies
            .iter()
            .filter(|(at, _)| tenth(*at) == t)
            .map(|(_, ms)| *ms)
            .collect();
        in_tenth.sort_by(f64::total_cmp);
        p99s.push(format!("{:.1}", quantile(&in_tenth, 0.99)));
    }
    let mut dups = [0usize; 10];
    for at in duplicates {
        dups[tenth(at)] += 1;
    }
    println!(
        "  | write → agent p99 by tenth of the run (ms; the kill in the 6th) | {} |",
        p99s.join(" ")
    );
    let dups: Vec<String> = dups.iter().map(usize::to_string).collect();
    println!(
        "  | duplicate deliveries by tenth of the run (the last holds the settling too) | {} |",
        dups.join(" ")
    );
}

/// Prints the memory rows: one per life of each replica.
fn print_memory(samples: &[MemorySample], settings: &Settings, restarted_at: Option<f64>) {
    for (replica, name) in NAMES.iter().enumerate() {
        for life in 0..=1u32 {
            let mine: Vec<MemorySample> = samples
                .iter()
                .filter(|s| s.replica == replica && s.life == life)
                .copied()
                .collect();
            if mine.is_empty() {
                continue;
            }
            let life_start = if life == 0 { 0.0 } else { restarted_at.unwrap_or(0.0) };
            let label = match (replica, life) {
                (KILLED, 0) => format!("replica {name} until the kill"),
                (_, 0) => format!("replica {name}"),
                _ => format!("replica {name} after its restart"),
            };
            print_memory_row(&label, &mine, life_start + settings.warm_up(), f64::INFINITY);
            // The replica that stays takes the other's agents at the kill: its memory steps up
            // there, so each half is judged on its own (the second after a warm-up of its own).
            if let (true, 0, Some(restarted)) = (replica != KILLED, life, restarted_at) {
                let kill = restarted - settings.down.as_secs_f64();
                print_memory_row(
                    &format!("replica {name} before the kill (its own agents)"),
                    &mine,
                    settings.warm_up(),
                    kill,
                );
                print_memory_row(
                    &format!("replica {name} after the other's agents came (from a warm-up after the restart)"),
                    &mine,
                    restarted + settings.warm_up(),
                    f64::INFINITY,
                );
            }
        }
    }
}

/// One memory row: the samples of `mine` from `warm_until` until `until` seconds.
fn print_memory_row(label: &str, mine: &[MemorySample], warm_until: f64, until: f64) {
    let within: Vec<MemorySample> = mine.iter().filter(|s| s.at <= until).copied().collect();
    match memory_figures(&within, warm_until) {
        Some(m) => println!(
            "  | {label}: resident MiB at warm-up end / at the end, slope after warm-up (live resources) | {:.1} / {:.1}, {:+.1} MiB/h ({} samples; live {} → {}) |",
            m.warm_mib,
            m.end_mib,
            m.slope_mib_per_hour,
            m.samples,
            thousands(m.warm_live as u64),
            thousands(m.end_live as u64)
        ),
        None => println!("  | {label}: resident memory | no sample after its warm-up |"),
    }
}

/// Everything the run measured, for the report.
struct Run {
    settings: Settings,
    writes: Writes,
    outcome: Outcome,
    settled: Duration,
    cpu_seconds: f64,
    restarted_at: Option<f64>,
    samples: Vec<MemorySample>,
    /// (seconds since the writes started, events not reconciled), every sample period.
    unreconciled: Vec<(f64, i64)>,
}

fn print_report(run: &Run, ledger: &Ledger) {
    let (s, w, o, c) = (&run.settings, &run.writes, &run.outcome, &ledger.counts);
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let deliveries = load(&c.deliveries);
    let accepted = load(&c.statuses_accepted);
    let written = (o.status_updates + o.status_deletes) as u64;
    println!(
        "soak: {} clusters (an agent each, on its own connection), 2 replicas, {} s at {} writes/s (seed {}); replica B killed at half time, down {} s",
        s.clusters,
        s.seconds,
        s.rate,
        s.seed,
        s.down.as_secs()
    );
    println!("  | | figure |");
    println!("  |---|---|");
    println!(
        "  | writes: creates / updates / soft deletes | {} ({} / {} / {}), {:.1} writes/s reached |",
        thousands(w.total()),
        thousands(w.creates),
        thousands(w.updates),
        thousands(w.deletes),
        w.total() as f64 / w.seconds.max(f64::MIN_POSITIVE)
    );
    println!(
        "  | spec deliveries to agents (of which resync answers) | {} ({}) |",
        thousands(deliveries),
        thousands(load(&c.resync_deliveries))
    );
    println!(
        "  | duplicate deliveries: on live events / in resync answers | {} / {} ({:.2} % of deliveries) |",
        thousands(load(&c.duplicates_live)),
        thousands(load(&c.duplicates_resync)),
        100.0 * (load(&c.duplicates_live) + load(&c.duplicates_resync)) as f64 / deliveries.max(1) as f64
    );
    print_timeline(&ledger.timeline, s.seconds as f64);
    println!(
        "  | deliveries older than a version the agent had | {} |",
        load(&c.older)
    );
    println!(
        "  | statuses accepted / refused; written (status_events: StatusUpdate / StatusDelete); superseded (for a version the resource no longer had, or already gone) | {} / {}; {} ({} / {}); {} |",
        thousands(accepted),
        load(&c.statuses_refused),
        thousands(written),
        thousands(o.status_updates as u64),
        thousands(o.status_deletes as u64),
        thousands(accepted.saturating_sub(written))
    );
    println!(
        "  | agent reconnects; slowest from a stream's end to the resync on another | {}; {:.1} s |",
        load(&c.reconnects),
        load(&c.slowest_resync_ms) as f64 / 1e3
    );
    println!(
        "  | lost: specs / deletes / statuses / status_events rows / vanished rows ({} live resources at the end) | {} / {} / {} / {} / {}: {} |",
        thousands(o.live as u64),
        o.lost_specs,
        o.lost_deletes,
        o.lost_statuses,
        o.missing_status_events,
        o.vanished,
        if o.lost() == 0 { "nothing lost" } else { "LOST" }
    );
    let most = run.unreconciled.iter().max_by_key(|(_, n)| *n);
    println!(
        "  | events not reconciled (`reconciled_date IS NULL`): the most seen (when) / at the end | {} ({:.0} s) / {} |",
        most.map_or(0, |(_, n)| *n),
        most.map_or(f64::NAN, |(at, _)| *at),
        run.unreconciled.last().map_or(0, |(_, n)| *n)
    );
    print_memory(&run.samples, s, run.restarted_at);
    println!(
        "  | conductor CPU (both replicas, every life): per write / per delivery | {:.0} / {:.0} µs ({:.1} CPU s) |",
        run.cpu_seconds * 1e6 / w.total().max(1) as f64,
        run.cpu_seconds * 1e6 / deliveries.max(1) as f64,
        run.cpu_seconds
    );
    println!("  | settled after the writes | {:.1} s |", run.settled.as_secs_f64());
    println!(
        "  | the machine's load average at the end (1 / 5 / 15 min) | {} |",
        load_average()
    );
    for example in &o.examples {
        println!("  lost: {example}");
    }
}

// ---------------------------------------------------------------------------------------------
// The run.

async fn soak(settings: Settings) -> Result<(Run, Arc<Ledger>)> {
    let limit = conductor_load::fd_limit::raise()?;
    conductor_load::fd_limit::check(settings.clusters, 1, limit)?;
    let db = MaestroDb::start().await;
    let clusters: Vec<String> = (0..settings.clusters).map(Settings::cluster).collect();
    let ledger = Arc::new(Ledger::default());
    let writer = Writer::connect(&db.url(), clusters.clone(), settings.seed, Arc::clone(&ledger)).await?;
    let config = support::config(&db.url(), &settings.catch_up);
    let replicas = Arc::new(tokio::task::block_in_place(|| Replicas::start(config))?);
    let connecting = Instant::now();
    let agents = start_agents(&clusters, &replicas, &ledger).await?;
    println!(
        "  {} agents subscribed and resynced in {:.1} s",
        clusters.len(),
        connecting.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampler = tokio::spawn(sample_memory(
        Arc::clone(&replicas),
        Arc::clone(&ledger),
        started,
        settings.sample_every,
        Arc::clone(&samples),
    ));
    let unreconciled = Arc::new(Mutex::new(Vec::new()));
    let counter = tokio::spawn(sample_unreconciled(
        db.pool.clone(),
        started,
        settings.sample_every,
        Arc::clone(&unreconciled),
    ));
    let cpu_before = replicas.cpu();
    let kill_at = tokio::time::Instant::now() + Duration::from_secs(settings.seconds) / 2;
    let fault = tokio::spawn(kill_and_restart(Arc::clone(&replicas), kill_at, settings.down));
    let writes = writer.run(settings.seconds, settings.rate).await?;
    fault.await??;
    let restarted_at = Some((replicas.started(KILLED) - started).as_secs_f64());
    println!("  writes done; settling (at most {} s)", settings.settle.as_secs());
    let (outcome, settled) = settle(&db.pool, &ledger, &writes, settings.settle).await?;
    let cpu_seconds = replicas.cpu() - cpu_before;
    sampler.abort();
    counter.abort();
    drop(agents);
    let samples = samples.lock().expect("the samples").clone();
    if let Some(path) = std::env::var_os("SOAK_SAMPLES") {
        let csv: String = samples
            .iter()
            .map(|s| format!("{},{},{:.1},{:.2},{}\n", NAMES[s.replica], s.life, s.at, s.mib, s.live))
            .collect();
        std::fs::write(&path, format!("replica,life,seconds,mib,live\n{csv}")).context("writing SOAK_SAMPLES")?;
    }
    let unreconciled = unreconciled.lock().expect("the samples").clone();
    let run = Run {
        settings,
        writes,
        outcome,
        settled,
        cpu_seconds,
        restarted_at,
        samples,
        unreconciled,
    };
    Ok((run, ledger))
}

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--list") {
        return ExitCode::SUCCESS;
    }
    let settings = Settings::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(soak(settings)) {
        Ok((run, ledger)) => {
            print_report(&run, &ledger);
            if run.outcome.lost() == 0 {
                ExitCode::SUCCESS
            } else {
                eprintln!("soak: something was lost");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("soak failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}
