//! `conductor-load`: sizes a hub. N simulated agents, each on its own TCP connection and HTTP/2
//! session as every klusterlet has, subscribe to an OCM CloudEvents gRPC server (conductor or
//! OCM's own); a hub driver writes resources the way the real hub side does (the in-memory
//! source over gRPC, a Maestro database, or ManifestWorks in a Kubernetes API); the tool measures
//! how long each write takes to reach its agent, what went missing or arrived out of order, and
//! the server's CPU and memory.

pub mod agents;
pub mod connect;
pub mod fd_limit;
pub mod hub;
pub mod process;
pub mod receipts;
pub mod report;
pub mod run;
pub mod shards;
pub mod wire;

pub mod proto {
    tonic::include_proto!("io.cloudevents.v1");
}

/// OCM's manifest bundle data type, what work agents subscribe to.
pub const MANIFEST_BUNDLES: &str = "io.open-cluster-management.works.v1alpha1.manifestbundles";
/// The heartbeat event type (`docs/protocol.md` §4.4), skipped by the agents.
pub const HEARTBEAT: &str = "io.open-cluster-management.cloudevents.heartbeat";
