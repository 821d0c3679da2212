//! The maestro source under load, with 1,000 connected work agents (see BENCHMARKS.md):
//!
//! - spec delivery latency: Maestro's write (resource row, `events` row, NOTIFY) → the agent's
//!   receipt, p50/p99, beside the same NOTIFY received by a bare LISTEN session (the floor);
//! - status updates persisted per second: every agent publishes status updates at once, beside
//!   `pgbench` running the same transaction on the same database (the ceiling).
//!
//! `DB_DELAY_MS` puts the database that far from conductor: its connections go through a proxy
//! that holds every chunk that long in each direction (tokio's timer: 1–2 ms for 1), as a
//! database in another zone is; the writes, the bare LISTEN and pgbench stay direct.
//!
//! `cargo build --release -p conductor && scripts/build-plugins.sh && \
//!  cargo bench -p conductor-blackbox-tests --bench maestro`

#[path = "../support/maestro.rs"]
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::attr_str;
use conductor_blackbox_tests::{
    CloudEventServiceClient, Conductor, Form, WORKS, env_usize, median, publish, subscribe,
};
use support::{MaestroDb, config_with, maestro_create, pgbench_status, seed, status_update};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// A TCP proxy to `upstream` on a port of its own that holds every chunk `delay` in each
/// direction, in order: a database `delay` away.
async fn delay_proxy(upstream: u16, delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    return;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let ((client_read, client_write), (server_read, server_write)) =
                    (client.into_split(), server.into_split());
                tokio::spawn(delayed(client_read, server_write, delay));
                tokio::spawn(delayed(server_read, client_write, delay));
            });
        }
    });
    port
}

/// Copies `from` to `to`, each chunk written `delay` after it was read.
async fn delayed(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((read_at, bytes)) = rx.recv().await {
            tokio::time::sleep_until((read_at + delay).into()).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
            return;
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The agents: one subscription per cluster over `connections` channels; every spec event's
/// resource id and arrival time go to the returned receiver.
async fn connect_agents(
    c: &Conductor,
    agents: usize,
    connections: usize,
) -> (
    Vec<CloudEventServiceClient<Channel>>,
    mpsc::UnboundedReceiver<(String, Instant)>,
) {
    let mut clients = Vec::new();
    for _ in 0..connections {
        clients.push(c.client().await.unwrap());
    }
    let (tx, rx) = mpsc::unbounded_channel();
    for i in 0..agents {
        let mut client = clients[i % connections].clone();
        let mut sub = subscribe(&mut client, &format!("cluster-{i}"), WORKS).await.unwrap();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(e)) = sub.stream.message().await {
                if let Some(id) = attr_str(&e, "ce-resourceid") {
                    let _ = tx.send((id.to_owned(), Instant::now()));
                }
            }
        });
    }
    (clients, rx)
}

/// Spec delivery: `events` creates paced every `pace`, each for the next agent's cluster.
async fn spec_latency(
    db: &MaestroDb,
    rx: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    n: usize,
    agents: usize,
    pace: Duration,
) -> Vec<Duration> {
    let mut written = HashMap::new();
    let mut latencies = Vec::new();
    for i in 0..n {
        let (id, at) = maestro_create(db, &format!("cluster-{}", i % agents)).await;
        written.insert(id, at);
        while let Ok((id, at)) = rx.try_recv() {
            if let Some(w) = written.remove(&id) {
                latencies.push(at - w);
            }
        }
        tokio::time::sleep(pace).await;
    }
    while !written.is_empty() {
        let (id, at) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("every spec delivered")
            .unwrap();
        if let Some(w) = written.remove(&id) {
            latencies.push(at - w);
        }
    }
    latencies.sort();
    latencies
}

/// The floor: a bare LISTEN session receiving the same NOTIFYs, paced the same.
async fn notify_latency(db: &MaestroDb, n: usize, pace: Duration) -> Vec<Duration> {
    let mut listener = sqlx::postgres::PgListener::connect_with(&db.pool).await.unwrap();
    listener.listen("bench").await.unwrap();
    let mut latencies = Vec::new();
    for i in 0..n {
        let written = Instant::now();
        sqlx::query("SELECT pg_notify('bench', $1)")
            .bind(i.to_string())
            .execute(&db.pool)
            .await
            .unwrap();
        listener.recv().await.unwrap();
        latencies.push(written.elapsed());
        tokio::time::sleep(pace).await;
    }
    latencies.sort();
    latencies
}

/// Status: every agent publishes `per_agent` newer statuses for its resource, all agents at once.
/// Returns statuses persisted per second (checked against `status_events`).
async fn status_throughput(
    db: &MaestroDb,
    clients: &[CloudEventServiceClient<Channel>],
    agents: usize,
    per_agent: usize,
    round: usize,
) -> f64 {
    let before = db.count("SELECT count(*) FROM status_events").await;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..agents {
        let mut client = clients[i % clients.len()].clone();
        tasks.push(tokio::spawn(async move {
            for k in 0..per_agent {
                let tick = (round * per_agent + k + 1) as i64;
                let update = status_update(&format!("cluster-{i}"), &format!("res-{i}"), 1, tick, "Applied");
                publish(&mut client, update).await.expect("status accepted");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    let written = db.count("SELECT count(*) FROM status_events").await - before;
    assert_eq!(written as usize, agents * per_agent, "every status persisted once");
    written as f64 / elapsed.as_secs_f64()
}

fn main() {
    let agents = env_usize("AGENTS", 1000);
    let connections = env_usize("CONNECTIONS", 50);
    let spec_events = env_usize("SPEC_EVENTS", 1000);
    let per_agent = env_usize("STATUS_PER_AGENT", 5);
    let runs = env_usize("RUNS", 3);
    let instances = env_usize("INSTANCES", 8);
    // The shipped configurations' `limits.request_calls` for the maestro plugin.
    let request_calls = env_usize("REQUEST_CALLS", 1);
    let pace = Duration::from_millis(env_usize("PACE_MS", 10) as u64);
    let db_delay = Duration::from_millis(env_usize("DB_DELAY_MS", 0) as u64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let db = MaestroDb::start().await;
        seed(&db, agents).await;
        let url = if db_delay.is_zero() {
            db.url()
        } else {
            let port = delay_proxy(db.port, db_delay).await;
            let url = db.url().replace(&format!(":{}/", db.port), &format!(":{port}/"));
            let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await.unwrap();
            let mut trips = Vec::new();
            for _ in 0..20 {
                let started = Instant::now();
                sqlx::query("SELECT 1").execute(&mut conn).await.unwrap();
                trips.push(ms(started.elapsed()));
            }
            println!("database {db_delay:?} away: a round trip through the proxy takes {:.2} ms (median of 20)", median(trips));
            url
        };
        let config = format!(
            "{}limits = {{ request_calls = {request_calls} }}\n",
            config_with(&url, "5m", Form::Component, instances as u32 * 2, instances)
        );
        let c = Conductor::start(&config).unwrap();
        let (clients, mut rx) = connect_agents(&c, agents, connections).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        while rx.try_recv().is_ok() {}
        println!(
            "maestro source: {agents} agents over {connections} connections, {instances} plugin instances, {request_calls} agent calls at once"
        );

        let (mut spec50, mut spec99, mut raw50, mut raw99, mut status, mut bench) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for run in 0..runs {
            let raw = notify_latency(&db, spec_events, pace).await;
            let spec = spec_latency(&db, &mut rx, spec_events, agents, pace).await;
            let persisted = status_throughput(&db, &clients, agents, per_agent, run).await;
            let tps = pgbench_status(&db, agents, instances, 10, false).tps;
            println!(
                "run {run}: spec delivery p50 {:.2} ms p99 {:.2} ms (bare NOTIFY p50 {:.2} ms p99 {:.2} ms); status {persisted:.0}/s persisted (pgbench {tps:.0} tps)",
                ms(percentile(&spec, 0.5)),
                ms(percentile(&spec, 0.99)),
                ms(percentile(&raw, 0.5)),
                ms(percentile(&raw, 0.99)),
            );
            spec50.push(ms(percentile(&spec, 0.5)));
            spec99.push(ms(percentile(&spec, 0.99)));
            raw50.push(ms(percentile(&raw, 0.5)));
            raw99.push(ms(percentile(&raw, 0.99)));
            status.push(persisted);
            bench.push(tps);
        }
        let (status, bench) = (median(status), median(bench));
        println!(
            "median of {runs}: spec delivery p50 {:.2} ms, p99 {:.2} ms (bare NOTIFY {:.2} / {:.2} ms); status updates persisted {status:.0}/s, pgbench {bench:.0} tps, ratio {:.2}",
            median(spec50),
            median(spec99),
            median(raw50),
            median(raw99),
            status / bench
        );
    });
}
