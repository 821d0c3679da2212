//! The client side of OCM's CloudEvents-over-gRPC protocol (`docs/protocol.md`), shared by the
//! load tool (`conductor-load`) and the terminal agent (`conductor agent`):
//!
//! - [`proto`]: the generated `io.cloudevents.v1` client and messages;
//! - [`connect`]: one connection to the server, plaintext or TLS, with the client certificate and
//!   bearer token of whoever it is for;
//! - [`events`]: the events the clients build (a hub-side spec request, an agent's spec resync
//!   request) and read (a spec event's resource id and version).

pub mod connect;
pub mod events;

pub mod proto {
    tonic::include_proto!("io.cloudevents.v1");
}

/// OCM's manifest bundle data type, what work agents subscribe to.
pub const MANIFEST_BUNDLES: &str = "io.open-cluster-management.works.v1alpha1.manifestbundles";
/// The heartbeat event type (`docs/protocol.md` §4.4), skipped by agents.
pub const HEARTBEAT: &str = "io.open-cluster-management.cloudevents.heartbeat";
