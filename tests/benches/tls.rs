//! What security costs: the same fan-out through conductor over plaintext, over TLS with client
//! certificates, and over TLS with client certificates and SubjectAccessReview authorization, in
//! one run (see BENCHMARKS.md).
//!
//! `cargo build --release -p conductor && cargo bench -p conductor-blackbox-tests --bench tls`
//!
//! `SUBSCRIBERS` (1000) agents, each on its own connection (as every klusterlet has), subscribe
//! to one cluster's manifest bundles; one publisher sends `EVENTS` (500) events. Figures, median
//! of `RUNS` (3): deliveries per second (events × subscribers ÷ time until the last one arrived),
//! the time to connect and subscribe all agents (TLS handshakes, authentication, authorization),
//! and the server's resident memory per connected agent.

#[path = "../support/auth.rs"]
mod auth_api;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use auth_api::AuthApi;
use conductor_blackbox_tests::certs::Pki;
use conductor_blackbox_tests::proto::{PublishRequest, SubscriptionRequest};
use conductor_blackbox_tests::{CloudEventServiceClient, Conductor, WORKS, env_usize, events, median};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const AGENT_GROUP: &str = "system:open-cluster-management:cluster1";

#[derive(Clone, Copy)]
enum Mode {
    Plaintext,
    Tls,
    TlsSar,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "plaintext, allow-all",
            Self::Tls => "TLS 1.3 + client certificates, allow-all",
            Self::TlsSar => "TLS 1.3 + client certificates + SubjectAccessReview",
        }
    }
}

struct Fixture {
    pki: Pki,
    auth: AuthApi,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn config(&self, mode: Mode) -> String {
        let common = "[broker]\nheartbeat_disabled = true\nsubscriber_queue_size = 1000\n[admin]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\nlevel = \"info\"\n";
        let memory = "[plugins.memory]\nkind = \"memory\"\nconfig = { data_types = [\"io.open-cluster-management.works.v1alpha1.manifestbundles\"] }\n[routes]\nmemory = \"memory\"\n";
        let security = match mode {
            Mode::Plaintext => "[server]\nlisten = \"127.0.0.1:0\"\nplaintext = true\n[auth]\nauthenticators = []\nauthorization = \"allow-all\"\n".to_owned(),
            Mode::Tls | Mode::TlsSar => format!(
                "[server]\nlisten = \"127.0.0.1:0\"\nmax_subscriptions_per_identity = 100000\n[server.tls]\ncert_file = \"{d}/server.crt\"\nkey_file = \"{d}/server.key\"\nclient_ca_file = \"{d}/ca.crt\"\n[auth]\nauthenticators = [\"mtls\"]\nauthorization = \"{authz}\"\n[kubernetes]\nkubeconfig = \"{kc}\"\n",
                d = self.pki.dir.display(),
                authz = if matches!(mode, Mode::TlsSar) { "sar" } else { "allow-all" },
                kc = self.auth.kubeconfig.display()
            ),
        };
        format!("{security}{common}{memory}")
    }

    fn endpoint(&self, mode: Mode, addr: &str) -> Endpoint {
        let port = addr.rsplit(':').next().unwrap();
        match mode {
            Mode::Plaintext => Endpoint::from_shared(format!("http://{addr}")).unwrap(),
            Mode::Tls | Mode::TlsSar => {
                let read = |f: &str| std::fs::read(self.pki.dir.join(f)).unwrap();
                let tls = ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(read("ca.crt")))
                    .identity(Identity::from_pem(read("agent.crt"), read("agent.key")))
                    .domain_name("localhost");
                Endpoint::from_shared(format!("https://localhost:{port}"))
                    .unwrap()
                    .tls_config(tls)
                    .unwrap()
            }
        }
    }
}

struct Run {
    rate: f64,
    connect: Duration,
    bytes_per_agent: f64,
}

async fn run(fixture: &Fixture, mode: Mode, subscribers: usize, events: usize) -> Run {
    let c = Conductor::start_with_config(&fixture.config(mode)).expect("conductor starts");
    let endpoint = fixture.endpoint(mode, &c.grpc_addr);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = conductor_blackbox_tests::resident_kib(c.pid());
    let started = Instant::now();
    // Agents connect and subscribe concurrently, 50 at a time.
    let mut streams = Vec::with_capacity(subscribers);
    for chunk in (0..subscribers).collect::<Vec<_>>().chunks(50) {
        let batch = chunk.iter().map(|_| {
            let endpoint = endpoint.clone();
            async move {
                let channel: Channel = endpoint.connect().await.unwrap();
                let mut client = CloudEventServiceClient::new(channel);
                client
                    .subscribe(SubscriptionRequest {
                        source: String::new(),
                        cluster_name: "cluster1".into(),
                        data_type: WORKS.into(),
                    })
                    .await
                    .unwrap()
                    .into_inner()
            }
        });
        streams.extend(futures::future::join_all(batch).await);
    }
    let connect = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = conductor_blackbox_tests::resident_kib(c.pid());

    let received = Arc::new(AtomicU64::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let total = (events * subscribers) as u64;
    for mut s in streams {
        let (received, done) = (Arc::clone(&received), Arc::clone(&done));
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
    let mut publisher = CloudEventServiceClient::new(endpoint.connect().await.unwrap());
    let run = uuid::Uuid::new_v4().to_string();
    let started = Instant::now();
    for i in 0..events {
        let e = events::create(WORKS, "cluster1", &format!("{run}-{i}"), "bench-work");
        publisher.publish(PublishRequest { event: Some(e) }).await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(120), done.notified())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "only {} of {total} deliveries arrived",
                received.load(Ordering::Relaxed)
            )
        });
    Run {
        rate: total as f64 / started.elapsed().as_secs_f64(),
        connect,
        bytes_per_agent: (after.saturating_sub(before) * 1024) as f64 / subscribers as f64,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let subscribers = env_usize("SUBSCRIBERS", 1000);
    let events = env_usize("EVENTS", 500);
    let runs = env_usize("RUNS", 3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path(), "ca");
        pki.server("server", "conductor");
        pki.client("agent", "system:open-cluster-management:cluster1:agent", &[AGENT_GROUP]);
        let fixture = Fixture {
            pki,
            auth: AuthApi::start(Vec::new()).await,
            _dir: dir,
        };
        println!(
            "conductor binary: {}\n{subscribers} agents, one connection each, subscribed to one cluster's works; {events} events; median of {runs} runs",
            conductor_blackbox_tests::conductor_bin().display()
        );
        let mut baseline = None;
        for mode in [Mode::Plaintext, Mode::Tls, Mode::TlsSar] {
            let mut results = Vec::new();
            for _ in 0..runs {
                results.push(run(&fixture, mode, subscribers, events).await);
            }
            let rate = median(results.iter().map(|r| r.rate).collect());
            let connect = median(results.iter().map(|r| r.connect.as_secs_f64()).collect());
            let memory = median(results.iter().map(|r| r.bytes_per_agent).collect());
            let base = *baseline.get_or_insert(rate);
            println!(
                "  {:<52} {rate:>10.0} deliveries/s ({:.2}× plaintext)   connect+subscribe all {connect:>6.2}s   {:>6.1} KiB RSS per agent",
                mode.name(),
                rate / base,
                memory / 1024.0
            );
        }
        println!("  SubjectAccessReviews answered by the double: {}", fixture.auth.reviews().access_reviews().len());
    });
}
