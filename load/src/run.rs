//! One load run: connect the agents, create resources at the configured rate, update them at
//! the configured rate, wait for every write to arrive, and report.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::agents::Agents;
use crate::connect::Target;
use crate::hub::{Hub, Resource};
use crate::process;
use crate::receipts::{Kind, Receipts, Sent};
use crate::report::{Latencies, Report, Samples, ServerProcess};
use crate::shards::{self, Shard};

#[derive(Debug, Clone)]
pub struct Options {
    pub target: Target,
    pub agents: usize,
    /// Cluster `i` is named `<prefix>-<i>`.
    pub cluster_prefix: String,
    pub resources_per_agent: usize,
    /// Updates in all, spread round robin over the resources.
    pub updates: usize,
    /// Updates per second.
    pub rate: f64,
    /// Creates per second.
    pub create_rate: f64,
    /// Writes in flight at most.
    pub writers: usize,
    /// Connections opened at once.
    pub connect_concurrency: usize,
    /// How long to wait for the last writes to arrive.
    pub drain_timeout: Duration,
    /// The server's process, to report its CPU and memory (same machine).
    pub pid: Option<u32>,
    /// Progress on stderr every second (default: when stderr is a terminal).
    pub progress: Option<bool>,
    /// This process runs one share of the agents and of the writes, in step with the others
    /// (`--processes`).
    pub shard: Option<Shard>,
}

struct Counters {
    connected: AtomicU64,
    write_errors: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Counters {
    fn error(&self, e: &anyhow::Error) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self
            .first_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        first.get_or_insert_with(|| format!("{e:#}"));
    }
}

pub async fn run(options: Options, hub: Hub) -> Result<Report> {
    if options.agents == 0 || options.rate <= 0.0 || options.create_rate <= 0.0 {
        bail!("--agents, --rate and --create-rate must be above zero");
    }
    let hub = Arc::new(hub);
    // A shard has its share of the agents (named and numbered as in one process) and of the
    // writes; its parent measures the server.
    let share = options.shard.unwrap_or(Shard { index: 0, of: 1 });
    let first = share.range(options.agents).start;
    let clusters: Vec<String> = share
        .range(options.agents)
        .map(|i| format!("{}-{i}", options.cluster_prefix))
        .collect();
    let options = Options {
        rate: options.rate / share.of as f64,
        create_rate: options.create_rate / share.of as f64,
        writers: (options.writers / share.of).max(1),
        updates: share.range(options.updates).len(),
        pid: options.pid.filter(|_| options.shard.is_none()),
        ..options
    };
    hub.prepare(&clusters).await?;
    let receipts = Arc::new(Receipts::default());
    let counters = Arc::new(Counters {
        connected: AtomicU64::new(0),
        write_errors: AtomicU64::new(0),
        first_error: std::sync::Mutex::new(None),
    });
    let progress = options
        .progress
        .unwrap_or_else(|| std::io::stderr().is_terminal())
        .then(|| tokio::spawn(report_progress(Arc::clone(&receipts), Arc::clone(&counters))));

    let sample = || options.pid.map(process::sample).transpose();
    let before = sample()?;
    let started = Instant::now();
    let agents = Agents::connect(
        &options.target,
        &clusters,
        first,
        options.connect_concurrency,
        &receipts,
        &counters.connected,
    )
    .await?;
    let connect_seconds = started.elapsed().as_secs_f64();
    // Let the server settle what the connections allocated before measuring it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let connected = sample()?;
    if options.shard.is_some() {
        shards::barrier("connected").await?;
    }

    let creates: Vec<(String, String)> = (0..options.resources_per_agent)
        .flat_map(|n| clusters.iter().map(move |c| (c.clone(), format!("load-{n}"))))
        .collect();
    let resources = paced(
        creates.len(),
        options.create_rate,
        options.writers,
        |e| counters.error(e),
        |i| {
            let (hub, receipts) = (Arc::clone(&hub), Arc::clone(&receipts));
            let (cluster, name) = creates[i].clone();
            async move {
                let at = Instant::now();
                let r = hub.create(&cluster, &name).await?;
                receipts.sent(Sent {
                    kind: Kind::Create,
                    id: r.id.clone(),
                    version: r.version,
                    at,
                });
                Ok(r)
            }
        },
    )
    .await;
    drain(&receipts, options.drain_timeout).await;
    if options.shard.is_some() {
        shards::barrier("created").await?;
    }

    let mut resources: Vec<Resource> = resources.into_iter().flatten().collect();
    let update_start = (sample()?, receipts.events(), Instant::now());
    let mut updated = 0;
    if !resources.is_empty() && options.updates > 0 {
        // One write at a time per resource, in rounds: each round updates every resource once.
        let per_round = resources.len();
        let mut left = options.updates;
        while left > 0 {
            let round = left.min(per_round);
            let batch: Vec<Resource> = resources[..round].to_vec();
            let versions = paced(
                round,
                options.rate,
                options.writers,
                |e| counters.error(e),
                |i| {
                    let (hub, receipts) = (Arc::clone(&hub), Arc::clone(&receipts));
                    let r = batch[i].clone();
                    async move {
                        let at = Instant::now();
                        let version = hub.update(&r).await?;
                        receipts.sent(Sent {
                            kind: Kind::Update,
                            id: r.id.clone(),
                            version,
                            at,
                        });
                        Ok(version)
                    }
                },
            )
            .await;
            for (r, v) in resources.iter_mut().zip(versions) {
                if let Some(v) = v {
                    r.version = v;
                    updated += 1;
                }
            }
            left -= round;
        }
    }
    let update_seconds = update_start.2.elapsed().as_secs_f64();
    drain(&receipts, options.drain_timeout).await;
    let end = sample()?;
    let delivered_in_phase = receipts.events() - update_start.1;
    let phase_seconds = update_start.2.elapsed().as_secs_f64();
    if let Some(p) = progress {
        p.abort();
    }

    let samples = Samples {
        before,
        connected,
        updating: update_start.0,
        end,
    };
    let server_process =
        ServerProcess::from_samples(options.pid, samples, options.agents, delivered_in_phase, phase_seconds);
    Ok(Report {
        server: options.target.server.clone(),
        hub: hub.name().to_owned(),
        agents: agents.len(),
        connect_seconds,
        rate_per_second: options.rate,
        update_rate_achieved: if update_seconds > 0.0 {
            updated as f64 / update_seconds
        } else {
            0.0
        },
        summary: receipts.summary(),
        write_errors: counters.write_errors.load(Ordering::Relaxed),
        first_write_error: counters
            .first_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
        stream_errors: agents.stream_errors.load(Ordering::Relaxed),
        server_process,
        latencies_ms: options.shard.map(|_| Latencies {
            creates: receipts.latencies_ms(Kind::Create),
            updates: receipts.latencies_ms(Kind::Update),
        }),
    })
}

/// Runs `write(i)` for `i` in `0..count`, started `rate` times per second (as fast as a writer
/// is free when `rate` is infinite) with at most `writers` in flight; returns each result, `None`
/// for a failed write, which is handed to `failed`.
pub async fn paced<T, F, Fut>(
    count: usize,
    rate: f64,
    writers: usize,
    failed: impl Fn(&anyhow::Error),
    write: F,
) -> Vec<Option<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(writers.max(1)));
    let start = tokio::time::Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..count {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let write = write(i);
        tasks.spawn(async move {
            let result = write.await;
            drop(slot);
            (i, result)
        });
    }
    let mut out: Vec<Option<T>> = (0..count).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((i, Ok(v))) => out[i] = Some(v),
            Ok((_, Err(e))) => failed(&e),
            Err(e) => failed(&anyhow::Error::new(e)),
        }
    }
    out
}

/// Waits until every write so far is delivered, or `timeout`. (Each check looks at every write:
/// checked every 100 ms, not in a tight loop, so that it does not take the server's CPU.)
async fn drain(receipts: &Receipts, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while receipts.outstanding().1 > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn report_progress(receipts: Arc<Receipts>, counters: Arc<Counters>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let (sent, missing) = receipts.outstanding();
        eprintln!(
            "agents connected {:>6} | writes {:>8} (errors {}) | events received {:>9} | not yet delivered {:>6}",
            counters.connected.load(Ordering::Relaxed),
            sent,
            counters.write_errors.load(Ordering::Relaxed),
            receipts.events(),
            missing
        );
    }
}
