//! The `maestro` source: Maestro's resources, read from and written to Maestro's PostgreSQL as
//! `../shared/spec/maestro-db.md` describes. This crate holds the contract logic — how rows become
//! spec events, how an agent's status is judged and stored — as pure functions over the SDK
//! types, so it is tested without a database. The plugin wiring (the host's `pg` capability,
//! LISTEN on `events`, the advisory locks) builds on it.

pub mod payload;
pub mod sequence;
pub mod spec;
pub mod sql;
pub mod status;

/// The source name agents see on Maestro's resources (hard-coded upstream, independent of
/// Maestro's own `--source-id`).
pub const SOURCE: &str = "maestro";
