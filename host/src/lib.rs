//! conductor: a CloudEvents conductor for Open Cluster Management hubs.
//!
//! The host serves OCM's CloudEvents-over-gRPC protocol to managed-cluster agents and routes each
//! request, by the event's source, to a plugin (`docs/architecture.md` follows one request
//! through these modules):
//!
//! - [`grpc`]: the `io.cloudevents.v1.CloudEventService` server, its connections and limits;
//! - [`tls`]: TLS serving for the gRPC listener and the admin endpoint, reloaded from disk;
//! - [`net`]: what is known about one connection (peer address, client certificate, open calls);
//! - [`fd_limit`]: the open-file limit those connections count against;
//! - [`auth`]: who is calling (token, client certificate) and whether they may
//!   (SubjectAccessReview);
//! - [`wire`]: the OCM binding of CloudEvents, decoded and encoded;
//! - [`proto`]: the generated types;
//! - [`attributes`]: the attributes' names, and the misspellings of them a refusal names;
//! - [`broker`]: subscriptions, fan-out, spec resync, and work its agent never answered, sent
//!   again;
//! - [`routes`]: the routing table: the source plugin for a request;
//! - [`plugin_set`]: the plugins a configuration runs, as a set: each one's file found (on disk or
//!   pulled from a registry), loaded and started, and on reload only what changed replaced;
//! - [`plugins`]: the plugin runtime (WebAssembly components, native libraries) and the host
//!   side of every capability;
//! - [`host_events`]: each plugin's queue of host events (watch changes, notifications, timers),
//!   taken fairly across clusters (a lane per namespace, in turn);
//! - [`kube`] and [`database`]: the Kubernetes API server and PostgreSQL, as the capabilities and
//!   the auth layer reach them;
//! - [`oci`]: plugins kept in OCI registries (pulled by digest, signatures verified, cached on
//!   disk) and published to them;
//! - [`sources`]: the built-in sources;
//! - [`config`]: `conductor.toml`, one file per section;
//! - [`source_plugins`]: plugins registered at runtime as `SourcePlugin` custom resources
//!   (`[dynamic]`): their watch, admission, reconcile with conductor.toml, and status;
//! - [`telemetry`]: logs, metrics and readiness;
//! - [`admin`]: the admin HTTP endpoint (metrics, health, reload, the inspector);
//! - [`admin_client`]: its client, behind `conductor inspect` and `conductor reload`;
//! - [`app`]: the server — all of these built as one `Server`, then run: reloads and the orderly
//!   shutdown;
//! - [`commands`]: the bodies of the `conductor` commands (`main.rs` parses and dispatches);
//! - [`dropin`]: `conductor grpc`, conductor run as OCM's ClusterManager operator runs its hub
//!   gRPC server, from the same flags and configuration file;
//! - [`authoring`]: what plugin authors run — `conductor plugins new` (with the SDK packages the
//!   binary carries), `conductor plugins tools install` and `conductor plugins test`;
//! - [`agent`]: `conductor agent`, an OCM agent in a terminal (on the client of `conductor-load`);
//! - [`build_info`]: the binary's version, plugin contract and commit (`conductor --version`);
//! - [`errors`]: an error and its causes as one line;
//! - `private_folder`: the caches' folders, private to conductor's user.
//!
//! `tests/reference_docs.rs` checks that this list names every module of the crate and no other,
//! as it checks `docs/architecture.md` and `docs/reference/layout.md`.
//!
//! Modules form an acyclic graph: `scripts/module-cycles.py` checks it in the test command.

pub mod admin;
pub mod admin_client;
pub mod agent;
pub mod app;
pub mod attributes;
pub mod auth;
pub mod authoring;
pub mod broker;
pub mod build_info;
pub mod commands;
pub mod config;
pub mod database;
pub mod dropin;
pub mod errors;
pub mod fd_limit;
pub mod grpc;
pub mod host_events;
pub mod kube;
pub mod net;
pub mod oci;
pub mod plugin_set;
pub mod plugins;
mod private_folder;
pub mod proto;
pub mod routes;
pub mod source_plugins;
pub mod sources;
pub mod telemetry;
pub mod tls;
pub mod wire;
