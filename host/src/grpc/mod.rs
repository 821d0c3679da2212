//! The gRPC server agents connect to.

pub mod codec;
pub mod connection;
pub mod keepalive;
pub mod limits;
pub mod server;
pub mod service;

pub use server::{ServerParts, serve};
pub use service::CloudEventService;
