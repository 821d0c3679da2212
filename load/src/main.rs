//! `conductor-load`: N simulated agents against an OCM CloudEvents gRPC server; see the crate
//! documentation and `conductor-load --help`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use conductor_load::connect::{Credentials, PerCluster, Target, Tls, Token};
use conductor_load::hub::{Hub, kube::KubeHub, maestro::MaestroHub, memory::MemoryHub};
use conductor_load::run::{Options, run};
use conductor_load::shards::{self, Shard};

/// Sizes a hub: simulated agents, each on its own connection, subscribe to an OCM CloudEvents
/// gRPC server; the hub side writes resources for them; prints delivery latency, what went
/// missing or out of order, and the server's CPU and memory as one JSON document.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// The server's gRPC address: `http://` (plaintext) or `https://` (TLS; needs --ca-file).
    #[arg(long, default_value = "http://127.0.0.1:8090")]
    server: String,
    /// The CA certificates (PEM) the server's certificate is checked against.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// The name the server's certificate must hold (default: --server's host).
    #[arg(long, value_name = "NAME")]
    tls_server_name: Option<String>,
    /// The agents' client certificate (PEM); `{cluster}` in the path stands for each agent's
    /// cluster name, for a certificate each (`certs/{cluster}.crt`).
    #[arg(long, value_name = "FILE", requires = "client_key")]
    client_cert: Option<String>,
    /// The key of --client-cert (PEM), `{cluster}` as there.
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    client_key: Option<String>,
    /// The memory hub's client certificate and key (default: the agents', unless theirs are one
    /// per cluster).
    #[arg(long, value_name = "FILE", requires = "hub_client_key")]
    hub_client_cert: Option<String>,
    #[arg(long, value_name = "FILE", requires = "hub_client_cert")]
    hub_client_key: Option<String>,
    /// Source addresses the agents' connections leave from in turn, comma-separated
    /// (`127.0.0.2,127.0.0.3`): on loopback, one source address reaches one server port from
    /// about 28,000 ports only.
    #[arg(long, value_name = "ADDRESSES", value_delimiter = ',')]
    source_addresses: Vec<IpAddr>,
    /// What writes the resources: `memory` (spec requests published to the server's memory
    /// source), `maestro` (Maestro's tables + NOTIFY; needs --database-url) or `kube`
    /// (ManifestWorks through KUBECONFIG's API server).
    #[arg(long, value_enum, default_value = "memory")]
    hub: HubKind,
    /// Maestro's database (`--hub maestro`).
    #[arg(long, env = "CONDUCTOR_LOAD_DATABASE_URL")]
    database_url: Option<String>,
    /// Simulated agents, one connection each.
    #[arg(long, default_value_t = 100)]
    agents: usize,
    /// Processes the agents are spread over (each may hold as many sockets as its open-file
    /// limit allows), each with its share of the agents and of the writes, in step; one report.
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// Cluster names are `<prefix>-<n>`.
    #[arg(long, default_value = "load")]
    cluster_prefix: String,
    /// Resources created per agent.
    #[arg(long, default_value_t = 1)]
    resources_per_agent: usize,
    /// Updates in all, round robin over the resources.
    #[arg(long, default_value_t = 1000)]
    updates: usize,
    /// Updates per second.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Creates per second (default: --rate).
    #[arg(long)]
    create_rate: Option<f64>,
    /// Writes in flight at most.
    #[arg(long, default_value_t = 16)]
    writers: usize,
    /// Connections opened at once while the agents connect.
    #[arg(long, default_value_t = 64)]
    connect_concurrency: usize,
    /// The data type the agents subscribe to.
    #[arg(long, default_value = conductor_load::MANIFEST_BUNDLES)]
    data_type: String,
    /// A bearer token the agents and the memory hub send.
    #[arg(long, env = "CONDUCTOR_LOAD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the agents' bearer token instead; `{cluster}` in the path stands for each
    /// agent's cluster name, for a token each.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    token_file: Option<String>,
    /// The memory hub's bearer token (default: the agents', unless theirs is one per cluster).
    #[arg(long, env = "CONDUCTOR_LOAD_HUB_TOKEN", hide_env_values = true)]
    hub_token: Option<String>,
    /// A file holding the memory hub's bearer token.
    #[arg(long, value_name = "FILE", conflicts_with = "hub_token")]
    hub_token_file: Option<String>,
    /// How long to wait for the last writes to arrive (e.g. `10s`).
    #[arg(long, default_value = "10s", value_parser = conductor_plugin_sdk::duration::parse)]
    drain_timeout: Duration,
    /// The server's process id, to report its CPU and memory (same machine).
    #[arg(long)]
    pid: Option<u32>,
    /// Progress on stderr every second (default: when stderr is a terminal).
    #[arg(long)]
    progress: Option<bool>,
}

#[derive(Clone, Copy, ValueEnum)]
enum HubKind {
    Memory,
    Maestro,
    Kube,
}

fn main() -> std::process::ExitCode {
    match tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(load(Cli::parse())))
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Where the agents and the hub connect, and who each of them is.
fn target(cli: &Cli) -> Result<Target> {
    let tls = match &cli.ca_file {
        Some(ca) => Some(Tls {
            ca: Arc::new(std::fs::read(ca).with_context(|| format!("--ca-file {}", ca.display()))?),
            server_name: cli.tls_server_name.clone(),
        }),
        None if cli.tls_server_name.is_some() => anyhow::bail!("--tls-server-name needs --ca-file"),
        None => None,
    };
    let pair = |cert: &Option<String>, key: &Option<String>| {
        cert.clone()
            .zip(key.clone())
            .map(|(c, k)| (PerCluster(c), PerCluster(k)))
    };
    let token = |value: &Option<String>, file: &Option<String>| match (value, file) {
        (Some(t), _) => Some(Token::Value(t.clone())),
        (None, Some(f)) => Some(Token::File(PerCluster(f.clone()))),
        (None, None) => None,
    };
    let agents = Credentials {
        client_cert: pair(&cli.client_cert, &cli.client_key),
        token: token(&cli.token, &cli.token_file),
    };
    // The hub takes what the agents have, unless it has its own or theirs are per cluster.
    let hub = Credentials {
        client_cert: pair(&cli.hub_client_cert, &cli.hub_client_key).or_else(|| {
            agents
                .client_cert
                .clone()
                .filter(|(c, k)| !c.per_agent() && !k.per_agent())
        }),
        token: token(&cli.hub_token, &cli.hub_token_file).or_else(|| {
            agents
                .token
                .clone()
                .filter(|t| !matches!(t, Token::File(f) if f.per_agent()))
        }),
    };
    let target = Target {
        server: cli.server.clone(),
        data_type: cli.data_type.clone(),
        tls,
        source_addresses: cli.source_addresses.clone(),
        agents,
        hub,
    };
    target.validate()?;
    Ok(target)
}

async fn load(cli: Cli) -> Result<()> {
    let target = target(&cli)?;
    let shard = Shard::from_env()?;
    let processes = if shard.is_some() { 1 } else { cli.processes.max(1) };
    let limit = conductor_load::fd_limit::raise().context("the open-file limit")?;
    conductor_load::fd_limit::check(cli.agents, shard.map_or(processes, |s| s.of), limit)?;
    if processes > 1 {
        let report = shards::run(processes, cli.pid).await?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let hub = match cli.hub {
        HubKind::Memory => Hub::Memory(MemoryHub::connect(target.clone(), 4).await?),
        HubKind::Maestro => {
            let url = cli
                .database_url
                .as_deref()
                .context("--hub maestro needs --database-url")?;
            Hub::Maestro(MaestroHub::connect(url, cli.writers as u32).await?)
        }
        HubKind::Kube => Hub::Kube(KubeHub::connect().await?),
    };
    let report = run(
        Options {
            target,
            agents: cli.agents,
            cluster_prefix: cli.cluster_prefix,
            resources_per_agent: cli.resources_per_agent,
            updates: cli.updates,
            rate: cli.rate,
            create_rate: cli.create_rate.unwrap_or(cli.rate),
            writers: cli.writers,
            connect_concurrency: cli.connect_concurrency,
            drain_timeout: cli.drain_timeout,
            pid: cli.pid,
            progress: cli.progress,
            shard,
        },
        hub,
    )
    .await?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
