//! The gRPC server agents connect to.

pub mod server;
pub mod service;

pub use server::serve;
pub use service::CloudEventService;
