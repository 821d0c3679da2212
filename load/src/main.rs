//! `conductor-load`: N simulated agents against an OCM CloudEvents gRPC server; see the crate
//! documentation and `conductor-load --help`.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use conductor_load::agents::Target;
use conductor_load::hub::{Hub, kube::KubeHub, maestro::MaestroHub, memory::MemoryHub};
use conductor_load::run::{Options, run};

/// Sizes a hub: simulated agents, each on its own connection, subscribe to an OCM CloudEvents
/// gRPC server; the hub side writes resources for them; prints delivery latency, what went
/// missing or out of order, and the server's CPU and memory as one JSON document.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// The server's gRPC address.
    #[arg(long, default_value = "http://127.0.0.1:8090")]
    server: String,
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

async fn load(cli: Cli) -> Result<()> {
    let target = Target {
        server: cli.server.clone(),
        data_type: cli.data_type.clone(),
        token: cli.token.clone(),
    };
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
        },
        hub,
    )
    .await?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
