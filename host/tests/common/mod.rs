//! Shared by the host's database tests: a real PostgreSQL (the embedded server) in a fresh folder.

use std::os::unix::fs::PermissionsExt;

use conductor::config::EmbeddedDatabase;
use conductor::database::EmbeddedPostgres;

/// Starts an embedded PostgreSQL with Maestro's schema on a free port; stopped when dropped.
pub fn start_embedded() -> (tempfile::TempDir, EmbeddedPostgres) {
    let dir = tempfile::tempdir().unwrap();
    // The server runs as `postgres` when the tests run as root: let it reach its folder.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pg = EmbeddedPostgres::start(&EmbeddedDatabase {
        data_dir: dir.path().join("pg"),
        port,
        bin_dir: None,
    })
    .expect("the embedded PostgreSQL starts");
    (dir, pg)
}
