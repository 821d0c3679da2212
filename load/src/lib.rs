//! `conductor-load`: sizes a hub. N simulated agents, each on its own TCP connection and HTTP/2
//! session as every klusterlet has, subscribe to an OCM CloudEvents gRPC server (conductor or
//! OCM's own); a hub driver writes resources the way the real hub side does (the in-memory
//! source over gRPC, a Maestro database, or ManifestWorks in a Kubernetes API); the tool measures
//! how long each write takes to reach its agent, what went missing or arrived out of order, and
//! the server's CPU and memory.

pub mod agents;
pub mod fd_limit;
pub mod hub;
pub mod process;
pub mod receipts;
pub mod report;
pub mod run;
pub mod shards;

/// The client side, shared with `conductor agent`: the generated client, connections, and the
/// events the tool builds and reads (`wire`).
pub use conductor_client::{HEARTBEAT, MANIFEST_BUNDLES, connect, events as wire, proto};
