//! The embedded development database: conductor runs a real PostgreSQL from the machine's
//! binaries, runs the SQL files its config names once (here the schema the maestro plugin ships),
//! keeps the data across restarts and stops it on exit; by default it listens on a Unix socket
//! only, so a busy TCP port cannot stop it.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use conductor_blackbox_tests::{Conductor, MEMORY_SOURCE, free_port};

/// `psql -tAc <sql>` against the embedded database (`host`: 127.0.0.1 or the socket folder):
/// Ok(output) or Err(stderr).
fn psql(host: &str, port: u16, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([
            "-X",
            "-h",
            host,
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
        "[databases.maestro]\nembedded = {{ data_dir = \"{}\", database = \"maestro\", init_sql = [\"{}\"], port = {port} }}\n{MEMORY_SOURCE}",
        dir.path().join("pg").display(),
        schema().display(),
    );
    let psql = |sql: &str| psql("127.0.0.1", port, sql);

    let mut c = Conductor::start(&config).unwrap();
    assert!(c.logs().contains("embedded database ready"), "{}", c.logs());
    assert!(
        c.logs().contains("ran SQL into the new embedded database"),
        "{}",
        c.logs()
    );
    assert_eq!(psql("SELECT max(id) FROM migrations").unwrap(), "202412181141");
    for table in [
        "events",
        "resources",
        "consumers",
        "status_events",
        "server_instances",
        "event_instances",
    ] {
        assert_eq!(
            psql(&format!("SELECT to_regclass('public.{table}') IS NOT NULL")).unwrap(),
            "t",
            "{table}"
        );
    }
    psql("INSERT INTO consumers (id, name) VALUES ('c-1', 'cluster1')").unwrap();
    assert!(c.terminate().unwrap().success(), "{}", c.logs());
    assert!(psql("SELECT 1").is_err(), "the server stopped with conductor");

    // Started again on the same folder: no second initialisation, the data is still there.
    let mut c = Conductor::start(&config).unwrap();
    assert!(!c.logs().contains("ran SQL"), "{}", c.logs());
    assert_eq!(psql("SELECT name FROM consumers").unwrap(), "cluster1");
    assert!(c.terminate().unwrap().success());
    assert!(psql("SELECT 1").is_err());
}

fn schema() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/maestro/schema/maestro-schema.sql")
}

/// The default `conductor.toml` (its embedded database in a folder of the test's own, its
/// listeners on free ports) starts while another process holds TCP port 55432 on loopback: the
/// embedded database listens on a Unix socket in its folder only.
#[tokio::test]
async fn the_default_run_starts_while_port_55432_is_taken() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("maestro-pg");
    let default = std::fs::read_to_string(repo.join("conductor.toml")).unwrap();
    let embedded = default.lines().find(|l| l.starts_with("embedded = ")).unwrap();
    assert!(
        embedded.contains("/var/tmp/conductor/maestro-pg") && !embedded.contains("port"),
        "{embedded}"
    );
    let config = default
        .replace("/var/tmp/conductor/maestro-pg", &data.to_string_lossy())
        .replace("\"plugins/", &format!("\"{}/plugins/", repo.display()))
        .replace("0.0.0.0:8090", "127.0.0.1:0")
        .replace("0.0.0.0:9090", "127.0.0.1:0")
        .replace("format = \"human\"", "format = \"json\"");
    let _held = std::net::TcpListener::bind("127.0.0.1:55432");
    let mut c = Conductor::start_with_config(&config).unwrap();
    c.wait_for_log("listening on events; purged 0 reconciled events").await;
    let socket = data.to_string_lossy().into_owned();
    assert_eq!(
        psql(&socket, 5432, "SELECT max(id) FROM migrations").unwrap(),
        "202412181141"
    );
    assert!(c.terminate().unwrap().success(), "{}", c.logs());
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
