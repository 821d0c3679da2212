//! Shared by the host's database tests: a real PostgreSQL (the embedded server) in a fresh folder.

use std::os::unix::fs::PermissionsExt;

use conductor::config::EmbeddedDatabase;
use conductor::database::EmbeddedPostgres;

/// Starts an embedded PostgreSQL (a Unix socket in its folder); stopped when dropped.
pub fn start_embedded() -> (tempfile::TempDir, EmbeddedPostgres) {
    let dir = tempfile::tempdir().unwrap();
    // The server runs as `postgres` when the tests run as root: let it reach its folder.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let pg = EmbeddedPostgres::start(&EmbeddedDatabase {
        data_dir: dir.path().join("pg"),
        database: "postgres".into(),
        init_sql: vec![],
        port: None,
        bin_dir: None,
    })
    .expect("the embedded PostgreSQL starts");
    (dir, pg)
}
