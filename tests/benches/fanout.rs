//! Fan-out throughput and memory per idle subscriber, conductor against a raw tonic baseline
//! measured in the same run (see BENCHMARKS.md).
//!
//! `cargo build --release -p conductor && cargo bench -p conductor-blackbox-tests --bench fanout`
//!
//! - fan-out: `SUBSCRIBERS` (1000) subscriptions of one (cluster, data type) over `CONNECTIONS`
//!   (100) HTTP/2 connections; `PUBLISHERS` (4) tasks publish `EVENTS` (2000) events; the figure
//!   is events delivered per second (events × subscribers ÷ time until the last one arrived).
//! - memory: `IDLE_STREAMS` (10000) idle subscriptions; the figure is the server's resident
//!   memory growth divided by the number of streams.
//!
//! The baseline is the same service in ~40 lines of plain tonic: Publish puts the event into a
//! `tokio::sync::broadcast`, Subscribe streams from it. It runs as a child process (this binary
//! re-executed with `--raw-server`) so its memory is measured the same way.

use std::{
    process::Child,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use conductor_blackbox_tests::proto::{
    self, PublishRequest, SubscriptionRequest,
    cloud_event_service_server::{CloudEventService, CloudEventServiceServer},
};
use conductor_blackbox_tests::{CloudEventServiceClient, Conductor, WORKS, env_usize, events, median};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

// ---------------------------------------------------------------------------------------------
// The raw tonic baseline server.

struct RawService {
    tx: tokio::sync::broadcast::Sender<proto::CloudEvent>,
}

#[tonic::async_trait]
impl CloudEventService for RawService {
    async fn publish(&self, request: tonic::Request<PublishRequest>) -> Result<tonic::Response<()>, tonic::Status> {
        if let Some(e) = request.into_inner().event {
            let _ = self.tx.send(e);
        }
        Ok(tonic::Response::new(()))
    }

    type SubscribeStream =
        std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<proto::CloudEvent, tonic::Status>> + Send>>;

    async fn subscribe(
        &self,
        _request: tonic::Request<SubscriptionRequest>,
    ) -> Result<tonic::Response<Self::SubscribeStream>, tonic::Status> {
        let stream = tokio_stream::wrappers::BroadcastStream::new(self.tx.subscribe())
            .filter_map(|r| r.ok())
            .map(Ok);
        let mut response = tonic::Response::new(Box::pin(stream) as Self::SubscribeStream);
        response
            .metadata_mut()
            .insert("subscription-id", uuid::Uuid::new_v4().to_string().parse().unwrap());
        Ok(response)
    }
}

async fn run_raw_server() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("{}", listener.local_addr().unwrap());
    // Large enough that no subscriber lags (a lagging one would lose events).
    let (tx, _) = tokio::sync::broadcast::channel(1 << 16);
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(CloudEventServiceServer::new(RawService { tx }))
        .serve_with_incoming(incoming)
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// The servers under test.

/// Starts one of the servers under test.
type StartServer = fn() -> Server;

enum Server {
    Conductor(Conductor),
    Raw(Child, String),
}

impl Server {
    fn conductor() -> Self {
        let config = format!(
            "[broker]\nheartbeat_disabled = true\nsubscriber_queue_size = 1000\n{}",
            conductor_blackbox_tests::MEMORY_SOURCE
        );
        Self::Conductor(Conductor::start(&config).expect("conductor starts"))
    }

    fn raw() -> Self {
        let (child, addr) = conductor_blackbox_tests::spawn_raw_server();
        Self::Raw(child, addr)
    }

    fn addr(&self) -> String {
        match self {
            Self::Conductor(c) => c.grpc_addr.clone(),
            Self::Raw(_, addr) => addr.clone(),
        }
    }

    fn pid(&self) -> u32 {
        match self {
            Self::Conductor(c) => c.pid(),
            Self::Raw(child, _) => child.id(),
        }
    }

    fn rss_kib(&self) -> u64 {
        conductor_blackbox_tests::resident_kib(self.pid())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Self::Raw(child, _) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn channels(addr: &str, n: usize) -> Vec<CloudEventServiceClient<Channel>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        out.push(CloudEventServiceClient::new(channel).max_decoding_message_size(64 << 20));
    }
    out
}

async fn open_streams(
    clients: &mut [CloudEventServiceClient<Channel>],
    n: usize,
) -> Vec<tonic::Streaming<proto::CloudEvent>> {
    let per = n.div_ceil(clients.len());
    let mut streams = Vec::with_capacity(n);
    for client in clients.iter_mut() {
        let batch: Vec<_> = (0..per.min(n - streams.len()))
            .map(|_| {
                let mut c = client.clone();
                async move {
                    c.subscribe(SubscriptionRequest {
                        source: String::new(),
                        cluster_name: "cluster1".into(),
                        data_type: WORKS.into(),
                    })
                    .await
                    .unwrap()
                    .into_inner()
                }
            })
            .collect();
        streams.extend(futures::future::join_all(batch).await);
    }
    streams
}

/// One fan-out run: returns deliveries per second.
async fn fanout_run(server: &Server, subscribers: usize, connections: usize, events: usize, publishers: usize) -> f64 {
    let addr = server.addr();
    let mut clients = channels(&addr, connections).await;
    let streams = open_streams(&mut clients, subscribers).await;
    let received = Arc::new(AtomicU64::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let total = (events * subscribers) as u64;
    for mut s in streams {
        let received = Arc::clone(&received);
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut mine = 0;
            while let Ok(Some(_)) = s.message().await {
                mine += 1;
                if received.fetch_add(1, Ordering::Relaxed) + 1 == total {
                    done.notify_one();
                }
                if mine == events {
                    break;
                }
            }
        });
    }
    let run = uuid::Uuid::new_v4().to_string();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..publishers {
        let mut client = clients[p % clients.len()].clone();
        let run = run.clone();
        tasks.push(tokio::spawn(async move {
            for i in (p..events).step_by(publishers) {
                let e = events::create(WORKS, "cluster1", &format!("{run}-{i}"), "bench-work");
                client.publish(PublishRequest { event: Some(e) }).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    if tokio::time::timeout(Duration::from_secs(120), done.notified())
        .await
        .is_err()
    {
        panic!(
            "{}: only {} of {total} deliveries arrived",
            server.addr(),
            received.load(Ordering::Relaxed)
        );
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// Resident memory per idle subscription, in bytes.
async fn idle_memory(server: &Server, streams: usize, connections: usize) -> (f64, u64, u64) {
    let mut clients = channels(&server.addr(), connections).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = server.rss_kib();
    let open = open_streams(&mut clients, streams).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = server.rss_kib();
    drop(open);
    (
        (after.saturating_sub(before) * 1024) as f64 / streams as f64,
        before,
        after,
    )
}

fn main() {
    let Some(rt) = conductor_blackbox_tests::bench_runtime(run_raw_server) else {
        return;
    };
    let subscribers = env_usize("SUBSCRIBERS", 1000);
    let connections = env_usize("CONNECTIONS", 100);
    let events = env_usize("EVENTS", 2000);
    let publishers = env_usize("PUBLISHERS", 4);
    let runs = env_usize("RUNS", 5);
    let idle = env_usize("IDLE_STREAMS", 10_000);
    println!(
        "conductor binary: {}",
        conductor_blackbox_tests::conductor_bin().display()
    );
    println!(
        "fan-out: {subscribers} subscribers on {connections} connections, {events} events from {publishers} publishers, {runs} runs"
    );
    rt.block_on(async {
        let mut results = Vec::new();
        let servers: [(&str, StartServer); 2] = [("raw tonic", Server::raw), ("conductor", Server::conductor)];
        for (name, make) in servers {
            let mut rates = Vec::new();
            for _ in 0..runs {
                let server = make();
                rates.push(fanout_run(&server, subscribers, connections, events, publishers).await);
            }
            let m = median(rates.clone());
            println!(
                "  {name:<10} median {m:>12.0} events/s delivered   (runs: {})",
                rates.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(", ")
            );
            results.push(m);
        }
        println!("  conductor / raw tonic = {:.2}", results[1] / results[0]);

        println!("memory: {idle} idle subscriptions on {connections} connections");
        let mut per = Vec::new();
        for (name, make) in servers {
            let server = make();
            let (bytes, before, after) = idle_memory(&server, idle, connections).await;
            println!("  {name:<10} {bytes:>8.0} bytes per idle subscription   (RSS {before} KiB → {after} KiB)");
            per.push(bytes);
        }
        println!("  conductor / raw tonic = {:.2}", per[1] / per[0]);
    });
}
