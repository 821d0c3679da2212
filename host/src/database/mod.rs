//! Databases named in `conductor.toml`: a PostgreSQL URL, or an embedded development database.

pub mod embedded;

pub use embedded::EmbeddedPostgres;
