//! Checking a configuration changes nothing (issue: operational safety). `check-config` and
//! `plugins list` on a configuration with the maestro plugin and the consumer controller, against
//! a real PostgreSQL holding Maestro's schema and rows and a real API server with a joined
//! ManagedCluster: every table is as before, no session of conductor's stays, and the database
//! never saw a LISTEN (or anything else) from conductor. `check-config --connect` reaches the
//! database read-only: still no write, no LISTEN.

#[path = "support/kube.rs"]
mod kube_api;
#[path = "support/maestro.rs"]
mod support;

use std::process::Command;

use conductor_blackbox_tests::{Form, conductor_bin, plugin_artifact};
use kube_api::KubeApi;
use serde_json::json;
use support::MaestroDb;

const CLUSTERS: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";

/// Every row of every table of the `maestro` database, as `pg_dump` writes them.
fn dump(db: &MaestroDb) -> String {
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap()
        .flatten()
        .map(|e| e.path().join("bin/pg_dump"))
        .find(|p| p.exists())
        .expect("pg_dump beside the server binaries");
    let out = Command::new(bin)
        .args(["--data-only", "--no-owner", "-d"])
        .arg(db.url())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Leave out the random key of `\restrict`/`\unrestrict` (a pg_dump safety line).
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn run(args: &[&str], file: &std::path::Path) -> String {
    let out = Command::new(conductor_bin()).args(args).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The statements the database ran for conductor (its sessions are named `conductor`).
fn conductor_statements(db: &MaestroDb) -> Vec<String> {
    let log = std::fs::read_to_string(db.pg.data_dir().join("server.log")).unwrap();
    log.lines()
        .filter(|l| l.contains("app=conductor ") && (l.contains("statement:") || l.contains("execute")))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn checking_a_configuration_writes_listens_and_watches_nothing() {
    let db = MaestroDb::start().await;
    for sql in [
        "ALTER SYSTEM SET log_statement = 'all'",
        "ALTER SYSTEM SET log_line_prefix = '%m app=%a '",
        "SELECT pg_reload_conf()",
    ] {
        sqlx::query(sql).execute(&db.pool).await.unwrap();
    }
    // Maestro's rows: a resource with an unreconciled event and a reconciled one (which the
    // maestro plugin's start would purge), and a consumer.
    let (resource, _unreconciled) = db.create("cluster0", "nginx", false).await;
    let reconciled = db.insert_event(&resource, "Update", false).await;
    sqlx::query("UPDATE events SET reconciled_date = now() WHERE id = $1")
        .bind(&reconciled)
        .execute(&db.pool)
        .await
        .unwrap();
    // A joined ManagedCluster (the consumer controller would give it a consumer).
    let kube = tokio::task::spawn_blocking(KubeApi::start).await.unwrap();
    let cluster = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "cluster1"}, "spec": {"hubAcceptsClient": true}});
    assert_eq!(kube.request("POST", CLUSTERS, Some(&cluster)).0, 201);
    let joined = json!({"status": {"conditions": [{"type": "ManagedClusterJoined", "status": "True",
        "reason": "Joined", "message": "joined", "lastTransitionTime": "2026-11-30T10:00:00Z"}]}});
    assert_eq!(
        kube.request("PATCH", &format!("{CLUSTERS}/cluster1/status"), Some(&joined))
            .0,
        200
    );
    let (_, cluster_before) = kube.request("GET", &format!("{CLUSTERS}/cluster1"), None);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conductor.toml");
    std::fs::write(
        &file,
        format!(
            r#"{base}
[kubernetes]
kubeconfig = "{kubeconfig}"
{maestro}
[plugins.consumers]
kind = "component"
file = "{consumers}"
grants = ["log", "timer", "kv", "pg", "kube"]
databases = ["maestro"]
kube_resources = [{{ resource = "managedclusters.cluster.open-cluster-management.io", verbs = ["watch"] }}]
config = {{ database = "maestro" }}
"#,
            base = conductor_blackbox_tests::BASE_CONFIG,
            kubeconfig = kube.kubeconfig.display(),
            maestro = support::config(&db.url(), "1s"),
            consumers = plugin_artifact("consumer-controller-plugin", Form::Component).display(),
        ),
    )
    .unwrap();
    let before = dump(&db);
    assert!(
        before.contains("cluster0") && before.contains(&reconciled),
        "the dump holds the rows"
    );

    let summary = run(&["check-config"], &file);
    assert!(
        summary.contains(": ok")
            && summary.contains("plugin maestro: maestro")
            && summary.contains("plugin consumers: consumer-controller"),
        "{summary}"
    );
    assert!(summary.contains("route maestro -> maestro"), "{summary}");
    let listed = run(&["plugins", "list", "--config"], &file);
    assert!(
        listed.contains("maestro: would load") && listed.contains("consumers: would load"),
        "{listed}"
    );
    // Give a stray session time to show.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        conductor_statements(&db).is_empty(),
        "check-config reached the database: {:?}",
        conductor_statements(&db)
    );

    // --connect: reaches the database, read-only.
    let reached = run(&["check-config", "--connect"], &file);
    assert!(reached.contains("plugin maestro: reached"), "{reached}");
    let statements = conductor_statements(&db);
    assert!(
        statements.iter().any(|s| s.contains("BEGIN READ ONLY")),
        "--connect reached the database: {statements:?}"
    );
    assert!(
        !statements.iter().any(|s| s.to_uppercase().contains("LISTEN")),
        "no LISTEN: {statements:?}"
    );
    for write in ["INSERT", "UPDATE", "DELETE"] {
        assert!(
            !statements.iter().any(|s| s.contains(write)),
            "no {write}: {statements:?}"
        );
    }

    assert_eq!(dump(&db), before, "every table as before");
    let sessions = db
        .count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'conductor'")
        .await;
    assert_eq!(sessions, 0, "no session of conductor's stays");
    let (_, cluster_after) = kube.request("GET", &format!("{CLUSTERS}/cluster1"), None);
    assert_eq!(cluster_after, cluster_before, "the ManagedCluster is untouched");
}

/// The development configuration the repository ships listens on loopback only (plaintext,
/// allow-all and an open admin endpoint are for this machine); the same settings on an address
/// other hosts reach are warned about, naming the key.
#[test]
fn the_development_configuration_listens_on_loopback_and_exposure_is_warned_about() {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../conductor.toml");
    let text = std::fs::read_to_string(&shipped).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The shipped file, without its plugins (nothing of them is needed to read the listeners).
    let mut keep = false;
    let listeners: String = text
        .lines()
        .filter(|line| {
            if line.starts_with('[') {
                keep = ["[server]", "[auth]", "[admin]", "[broker]", "[log]"].contains(&line.trim());
            }
            keep
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let file = dir.path().join("conductor.toml");
    std::fs::write(&file, &listeners).unwrap();
    let out = run(&["check-config"], &file);
    assert!(out.contains("gRPC: 127.0.0.1:8090 (plaintext"), "{out}");
    assert!(
        out.contains("admin: 127.0.0.1:9090 (HTTP, open to anyone who reaches it)"),
        "{out}"
    );
    // No exposure warning (the open-file limit's is this machine's, checked below).
    assert!(
        !out.lines()
            .any(|l| l.contains("warning:") && !l.contains("warning: server.max_connections:")),
        "{out}"
    );

    let exposed = listeners.replace("127.0.0.1", "0.0.0.0");
    std::fs::write(&file, &exposed).unwrap();
    let out = run(&["check-config"], &file);
    for key in ["server.plaintext", "auth.authorization", "admin.authorization"] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("warning: {key}: ")) && l.contains("0.0.0.0")),
            "a warning naming {key} and the address\n{out}"
        );
    }
}

/// `check-config` says how many connections the open-file limit leaves room for, and warns,
/// naming the key, when `server.max_connections` asks for more (a shell lowers the limit to 1,000
/// before it runs conductor).
#[test]
fn a_connection_limit_beyond_the_open_file_limit_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conductor.toml");
    let check = |max_connections: usize| {
        let config = conductor_blackbox_tests::BASE_CONFIG.replace(
            "[server]\n",
            &format!("[server]\nmax_connections = {max_connections}\n"),
        );
        std::fs::write(&file, config).unwrap();
        let out = Command::new("sh")
            .args(["-c", "ulimit -n 1000 && exec \"$0\" check-config \"$1\""])
            .arg(conductor_bin())
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = check(5000);
    assert!(
        out.contains("open files: 1000 (hard 1000): room for about 744 connections (server.max_connections 5000)"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l
            .trim_start()
            .starts_with("warning: server.max_connections: 5000 connections asked for")
            && l.contains("room for about 744")),
        "{out}"
    );
    let out = check(700);
    assert!(!out.contains("warning: server.max_connections"), "700 fit: {out}");
}

/// `[oci] registries` is the operator's allow-list: a plugin from any other registry is refused at
/// load (and so at reload), naming its key, before any connection is made.
#[test]
fn a_plugin_outside_the_allowed_registries_is_refused_before_any_connection() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conductor.toml");
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    std::fs::write(
        &file,
        format!(
            "{}\n[oci]\nregistries = [\"registry.example/platform/\"]\n[plugins.p]\nkind = \"component\"\nfile = \"oci://127.0.0.1:1/platform/p@{digest}\"\ngrants = [\"emit\"]\n",
            conductor_blackbox_tests::BASE_CONFIG
        ),
    )
    .unwrap();
    let out = Command::new(conductor_blackbox_tests::conductor_bin())
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("plugins.p.file: 127.0.0.1:1/platform/p is not in a registry conductor.toml allows"),
        "refused by the list, not by a failed connection: {stderr}"
    );
}
