//! The generated `io.cloudevents.v1` messages and service.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("io.cloudevents.v1");

/// The service, generated with `CloudEvent` as [`crate::wire::WireEvent`] (see `build.rs`).
pub mod server {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/server/io.cloudevents.v1.rs"));
}

/// The encoded file descriptor set, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("cloudevent_descriptor");

/// The full gRPC service name, as used in metrics and health.
pub const SERVICE_NAME: &str = "io.cloudevents.v1.CloudEventService";
