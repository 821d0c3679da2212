//! The command line of `conductor agent` (wired into `conductor`'s in `main.rs`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Subcommand)]
pub enum AgentCommand {
    /// Subscribe as an agent of CLUSTER does, send the spec resync request it sends (the
    /// versions of what it holds), and print each event as it arrives. When the stream ends or
    /// fails it says so on stderr, waits (1 s, doubling up to 1 min), subscribes and resyncs
    /// again, as an agent does; Ctrl-C ends it.
    Watch(WatchArgs),
    /// Publish the status update a work agent sends for a work of CLUSTER: it subscribes and
    /// resyncs to find the work (by name or UID) among what the cluster is served, then publishes
    /// `status.update_request` with the work's resource id and version, a fresh sequence id and
    /// the source to route it back to.
    Status(StatusArgs),
    /// Send the CloudEvent of a JSON file, in the CloudEvents JSON format: `specversion`, `id`,
    /// `source`, `type`, the extensions (`clustername`, `resourceid`, …) as top-level keys and the
    /// payload as `data`. A missing `clustername` or a misspelt attribute (`ce-clustername`,
    /// `clusterName`) is named before anything is sent.
    Publish(PublishArgs),
}

/// How to reach the server.
#[derive(Args, Clone, Debug)]
pub struct ServerArgs {
    /// The server's gRPC address: HOST:PORT (plaintext; TLS with --ca-file), or an `http://` or
    /// `https://` URL.
    #[arg(long, env = "CONDUCTOR_SERVER", default_value = "127.0.0.1:8090")]
    pub server: String,
    /// The CA certificates (PEM) the server's certificate is checked against; connects with TLS.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// The name the server's certificate must carry, when not the address's host.
    #[arg(long, value_name = "NAME", requires = "ca_file")]
    pub tls_server_name: Option<String>,
    /// A client certificate (PEM) to present, with --key: as an agent with a certificate from
    /// OCM's gRPC signer.
    #[arg(long, value_name = "FILE", requires = "key", requires = "ca_file")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// A file holding a bearer token to send (a token the hub's API server accepts).
    #[arg(long, value_name = "FILE", conflicts_with = "cert")]
    pub token_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// The managed cluster to be the agent of.
    #[arg(long)]
    pub cluster: String,
    /// What to subscribe to: works, clusters, csrs, leases, addons, addons-v1beta1, events,
    /// tokenrequests, or a whole data type (`<group>.<version>.<resource>`).
    #[arg(long, default_value = "works")]
    pub data_type: String,
    /// The agent's client id, the source of the resync requests it publishes (default:
    /// CLUSTER-work-agent for works, CLUSTER for the others).
    #[arg(long)]
    pub source: Option<String>,
    /// `line`: a line per event (time, subresource and action, kind, name, resource id, version,
    /// source); `json`: each whole CloudEvent as JSON, one per line.
    #[arg(long, short, value_enum, default_value = "line")]
    pub output: Output,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Line,
    Json,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The managed cluster the work is for.
    #[arg(long)]
    pub cluster: String,
    /// The work: its name, or its UID (the event's `resourceid`).
    #[arg(long)]
    pub work: String,
    /// A condition to report, TYPE=STATUS (`Applied=True`, `Available=False`, `Deleted=True`);
    /// repeat it for several.
    #[arg(long = "condition", value_name = "TYPE=STATUS")]
    pub conditions: Vec<String>,
    /// The agent's client id, the event's source (default: CLUSTER-work-agent).
    #[arg(long)]
    pub source: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Args, Debug)]
pub struct PublishArgs {
    /// The CloudEvent, as JSON (`examples/agent/hello-work.json`).
    pub file: PathBuf,
    #[command(flatten)]
    pub server: ServerArgs,
}
