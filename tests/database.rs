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
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("maestro-pg");
    let default =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../conductor.toml")).unwrap();
    let embedded = default.lines().find(|l| l.starts_with("embedded = ")).unwrap();
    assert!(
        embedded.contains("/var/tmp/conductor/maestro-pg") && !embedded.contains("port"),
        "{embedded}"
    );
    let config = conductor_blackbox_tests::default_run_config(&data);
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

/// A start that fails after the embedded database came up leaves nothing behind: no PostgreSQL
/// process, no socket — whether a plugin does not load, or the database's own `init_sql` fails
/// once its server runs.
#[test]
fn a_start_that_fails_after_the_database_came_up_leaves_no_server_behind() {
    fails_leaving_nothing(
        |dir, data| {
            format!(
                "[databases.m]\nembedded = {{ data_dir = \"{data}\" }}\n[plugins.broken]\nkind = \"component\"\nfile = \"{missing}\"\ngrants = [\"pg\"]\ndatabases = [\"m\"]\n",
                data = data.display(),
                missing = dir.join("no-such-plugin.wasm").display(),
            )
        },
        "plugins.broken",
    );
    fails_leaving_nothing(
        |dir, data| {
            let sql = dir.join("broken.sql");
            std::fs::write(&sql, "CREATE TABLE fine (id int);\nSELECT no_such_function();\n").unwrap();
            std::fs::set_permissions(&sql, std::fs::Permissions::from_mode(0o644)).unwrap();
            format!(
                "[databases.m]\nembedded = {{ data_dir = \"{data}\", database = \"app\", init_sql = [\"{sql}\"] }}\n",
                data = data.display(),
                sql = sql.display(),
            )
        },
        "databases.m.embedded",
    );
}

/// Starts conductor with `BASE_CONFIG` and `extra(dir, data_dir)`, which must fail naming
/// `key`; then checks that no PostgreSQL runs on `data_dir` and no socket is left in it.
fn fails_leaving_nothing(extra: impl Fn(&std::path::Path, &std::path::Path) -> String, key: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let data = dir.path().join("pg");
    let config = dir.path().join("conductor.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n{}",
            conductor_blackbox_tests::BASE_CONFIG,
            extra(dir.path(), &data)
        ),
    )
    .unwrap();
    // Bounded: a start that does not fail is killed (and fails the test) instead of hanging it.
    let out = Command::new("timeout")
        .arg("60")
        .arg(conductor_blackbox_tests::conductor_bin())
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(key), "{stderr}");
    assert!(
        data.join("PG_VERSION").exists(),
        "the database came up before the plugin failed: {stderr}"
    );
    let running = Command::new("pgrep")
        .args(["-f", &data.display().to_string()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&running.stdout).trim().is_empty(),
        "a PostgreSQL is left running on {}",
        data.display()
    );
    let sockets: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".s.PGSQL"))
        .collect();
    assert!(sockets.is_empty(), "sockets left: {sockets:?}");
    assert!(!data.join("postmaster.pid").exists(), "postmaster.pid left");
}
