//! Databases named in `conductor.toml`: a PostgreSQL URL, or an embedded development database;
//! pools, Maestro's advisory-lock keys, startup checks and LISTEN streams.

pub mod embedded;
pub mod kept;
pub mod pipeline;
pub mod pools;
pub mod postgres;
pub mod session;

pub use embedded::EmbeddedPostgres;
pub use pools::Databases;
