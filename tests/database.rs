//! The embedded development database: conductor runs a real PostgreSQL from the machine's
//! binaries, loads Maestro's schema once, keeps the data across restarts and stops it on exit.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use conductor_blackbox_tests::{Conductor, MEMORY_SOURCE, free_port};

/// `psql -tAc <sql>` against the embedded database: Ok(output) or Err(stderr).
fn psql(port: u16, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([
            "-X",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-d",
            "maestro",
            "-tAc",
            sql,
        ])
        .output()
        .expect("psql runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn embedded_postgres_serves_maestros_schema_and_stops_with_conductor() {
    let dir = tempfile::tempdir().unwrap();
    // The server runs as `postgres` when the tests run as root: let it reach its folder.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let port = free_port();
    let config = format!(
        "[databases.maestro]\nembedded = {{ data_dir = \"{}\", port = {port} }}\n{MEMORY_SOURCE}",
        dir.path().join("pg").display()
    );

    let mut c = Conductor::start(&config).unwrap();
    assert!(c.logs().contains("embedded database ready"), "{}", c.logs());
    assert!(c.logs().contains("loaded Maestro's schema"), "{}", c.logs());
    assert_eq!(psql(port, "SELECT max(id) FROM migrations").unwrap(), "202412181141");
    for table in [
        "events",
        "resources",
        "consumers",
        "status_events",
        "server_instances",
        "event_instances",
    ] {
        assert_eq!(
            psql(port, &format!("SELECT to_regclass('public.{table}') IS NOT NULL")).unwrap(),
            "t",
            "{table}"
        );
    }
    psql(port, "INSERT INTO consumers (id, name) VALUES ('c-1', 'cluster1')").unwrap();
    assert!(c.terminate().unwrap().success(), "{}", c.logs());
    assert!(psql(port, "SELECT 1").is_err(), "the server stopped with conductor");

    // Started again on the same folder: no second initialisation, the data is still there.
    let mut c = Conductor::start(&config).unwrap();
    assert!(!c.logs().contains("loaded Maestro's schema"), "{}", c.logs());
    assert_eq!(psql(port, "SELECT name FROM consumers").unwrap(), "cluster1");
    assert!(c.terminate().unwrap().success());
    assert!(psql(port, "SELECT 1").is_err());
}

#[test]
fn a_database_that_cannot_start_is_a_startup_error_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[databases.maestro]\nembedded = {{ data_dir = \"{}\", bin_dir = \"/nonexistent/bin\" }}\n",
        conductor_blackbox_tests::BASE_CONFIG,
        dir.path().join("pg").display()
    );
    let err = Conductor::start_with_config(&config)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("databases.maestro.embedded"), "{err}");
}
