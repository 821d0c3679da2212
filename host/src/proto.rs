//! The generated `io.cloudevents.v1` messages and service.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("io.cloudevents.v1");

/// The encoded file descriptor set, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("cloudevent_descriptor");

/// The full gRPC service name, as used in metrics and health.
pub const SERVICE_NAME: &str = "io.cloudevents.v1.CloudEventService";
