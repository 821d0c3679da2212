//! conductor: a CloudEvents conductor for Open Cluster Management hubs.
//!
//! The host serves OCM's CloudEvents-over-gRPC protocol to managed-cluster agents and routes each
//! request, by the event's source, to a plugin:
//!
//! - [`wire`] decodes and encodes the OCM binding of CloudEvents;
//! - [`broker`] keeps the subscriptions, fans events out and answers spec resync;
//! - [`registry`] picks the source plugin for a request;
//! - [`grpc`] is the `io.cloudevents.v1.CloudEventService` server and its options;
//! - [`plugins`] loads source plugins (WebAssembly components, native libraries);
//! - [`sources`] holds the built-in sources;
//! - [`database`] runs the embedded development PostgreSQL;
//! - [`config`] reads `conductor.toml`; [`telemetry`] logs, metrics and health.

pub mod app;
pub mod auth;
pub mod broker;
pub mod config;
pub mod database;
pub mod grpc;
pub mod inspect;
pub mod kube;
pub mod plugins;
pub mod proto;
pub mod registry;
pub mod sources;
pub mod telemetry;
pub mod wire;
