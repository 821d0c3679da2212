//! The `maestro` source plugin: Maestro's resources, read from and written to Maestro's
//! PostgreSQL as `docs/maestro-database.md` describes, through the host's `pg` capability.
//!
//! - [`payload`], [`spec`], [`status`], [`sequence`]: the contract logic (how rows become spec
//!   events, how an agent's status is judged), pure functions unit-tested without a database;
//! - [`sql`] and [`store`]: the statements, and running them through the host;
//! - [`status_batch`]: agents' status updates written a batch at a time, in one transaction;
//! - [`waiting`]: the events waiting to be sent, one line per consumer, taken in turns;
//! - [`plugin`]: the flows (LISTEN on `events`, catch-up, status writes, resync).
//!
//! Built as a WebAssembly component (the shipped form) or a native library.

pub mod payload;
pub mod plugin;
pub mod sequence;
pub mod spec;
pub mod sql;
pub mod status;
pub mod status_batch;
pub mod store;
pub mod waiting;

conductor_plugin_sdk::export_plugin!(plugin::Maestro);

/// The source name agents see on Maestro's resources (hard-coded upstream, independent of
/// Maestro's own `--source-id`).
pub const SOURCE: &str = "maestro";
