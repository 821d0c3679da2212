//! Shared by the maestro tests: a real PostgreSQL holding Maestro's schema, driven the way Maestro
//! drives it (rows + events + NOTIFY, each in autocommit), conductor configured with the maestro
//! component, and the work agent's status updates.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use conductor::config::EmbeddedDatabase;
use conductor::database::EmbeddedPostgres;
use conductor_blackbox_tests::events::{self, integer, string};
pub use conductor_blackbox_tests::free_port;
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::{Form, Sub, WORKS, plugin_artifact, proto};
pub use conductor_load::hub::maestro::spec_payload;
pub use maestro_plugin::store::fnv1a as advisory_key;
use serde_json::{Value, json};
use sqlx::{PgPool, Row};

/// A PostgreSQL server with Maestro's schema in database `maestro`, on a free port.
pub struct MaestroDb {
    pub dir: tempfile::TempDir,
    pub pg: EmbeddedPostgres,
    pub pool: PgPool,
    pub port: u16,
}

/// Maestro's schema, as the maestro plugin ships it.
pub fn maestro_schema() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/maestro/schema/maestro-schema.sql")
}

fn start_server(dir: &std::path::Path, port: u16) -> EmbeddedPostgres {
    EmbeddedPostgres::start(&EmbeddedDatabase {
        data_dir: dir.join("pg"),
        database: "maestro".into(),
        init_sql: vec![maestro_schema()],
        port: Some(port),
        bin_dir: None,
    })
    .expect("PostgreSQL starts")
}

impl MaestroDb {
    /// The server's postmaster (the first line of `postmaster.pid`).
    pub fn postmaster(&self) -> u32 {
        let file = self.pg.data_dir().join("postmaster.pid");
        std::fs::read_to_string(&file)
            .expect("postmaster.pid")
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("the postmaster's pid")
    }

    /// CPU seconds the server has used so far ([`postgres_cpu`]).
    pub fn postgres_cpu(&self) -> f64 {
        postgres_cpu(self.postmaster())
    }

    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // The server runs as `postgres` when the tests run as root: let it reach its folder.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let port = free_port();
        let path = dir.path().to_owned();
        let pg = tokio::task::spawn_blocking(move || start_server(&path, port))
            .await
            .unwrap();
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect(&pg.tcp_url().expect("a TCP port"))
            .await
            .unwrap();
        Self { dir, pg, pool, port }
    }

    /// The server on 127.0.0.1 (TLS tests need TCP: PostgreSQL does not encrypt a Unix socket).
    pub fn url(&self) -> String {
        self.pg.tcp_url().expect("a TCP port")
    }

    /// Stops the server (fast shutdown: every session ends).
    pub async fn stop(&mut self) {
        self.pool.close().await;
        tokio::task::block_in_place(|| self.pg.stop()).unwrap();
    }

    /// Starts the stopped server again on the same folder and port.
    pub async fn restart(&mut self) {
        tokio::task::block_in_place(|| self.pg.resume()).unwrap();
        self.pool = PgPool::connect(&self.url()).await.unwrap();
    }

    pub async fn exec(&self, sql: &'static str, args: &[&str]) {
        let mut q = sqlx::query(sql);
        for a in args {
            q = q.bind(*a);
        }
        q.execute(&self.pool).await.unwrap();
    }

    /// Maestro's `events` insert (+ NOTIFY when `notify`), autocommit; returns the event id.
    pub async fn insert_event(&self, resource: &str, kind: &str, notify: bool) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        self.exec(
            "INSERT INTO events (id, created_at, updated_at, source, source_id, event_type) VALUES ($1, now(), now(), 'Resources', $2, $3)",
            &[&id, resource, kind],
        )
        .await;
        if notify {
            self.exec("SELECT pg_notify('events', $1)", &[&id]).await;
        }
        id
    }

    /// Maestro's create: the consumer if new, the resource row (version 1), then the event.
    pub async fn create(&self, cluster: &str, name: &str, notify: bool) -> (String, String) {
        self.exec(
            "INSERT INTO consumers (id, created_at, updated_at, name) VALUES (gen_random_uuid()::text, now(), now(), $1) ON CONFLICT DO NOTHING",
            &[cluster],
        )
        .await;
        let id = uuid::Uuid::new_v4().to_string();
        let payload = spec_payload(&id, cluster, name, 1, 1);
        sqlx::query("INSERT INTO resources (id, name, created_at, updated_at, source, consumer_name, version, type, payload) VALUES ($1, $1, now(), now(), 'source-work-client', $2, 1, '', $3::json)")
            .bind(&id)
            .bind(cluster)
            .bind(payload.to_string())
            .execute(&self.pool)
            .await
            .unwrap();
        let event = self.insert_event(&id, "Create", notify).await;
        (id, event)
    }

    /// Maestro's update: under the `resources` lock, version+1 and the new payload (column
    /// targeted), then the event.
    pub async fn update(&self, id: &str, replicas: i64) -> String {
        self.update_then(id, replicas, true).await
    }

    /// The same, with the NOTIFY only if `notify`.
    pub async fn update_then(&self, id: &str, replicas: i64, notify: bool) -> String {
        // `BEGIN` in a round trip of its own, as Maestro's Go client sends it (sqlx's `begin()`
        // does the same: it waits for the answer).
        let mut tx = self.pool.begin_with("BEGIN").await.unwrap();
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(advisory_key(id))
            .bind(advisory_key("resources"))
            .execute(&mut *tx)
            .await
            .unwrap();
        let (cluster, version): (String, i64) =
            sqlx::query_as("SELECT consumer_name, version FROM resources WHERE id = $1")
                .bind(id)
                .fetch_one(&mut *tx)
                .await
                .unwrap();
        let payload = spec_payload(id, &cluster, "nginx", version + 1, replicas);
        sqlx::query("UPDATE resources SET version = $1, payload = $2::json, updated_at = now() WHERE id = $3")
            .bind(version + 1)
            .bind(payload.to_string())
            .bind(id)
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        self.insert_event(id, "Update", notify).await
    }

    /// Maestro's MarkAsDeleting: soft delete, then the event.
    pub async fn soft_delete(&self, id: &str) -> String {
        self.exec(
            "UPDATE resources SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL",
            &[id],
        )
        .await;
        self.insert_event(id, "Delete", true).await
    }

    pub async fn count(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }

    pub async fn count_for(&self, sql: &'static str, arg: &str) -> i64 {
        sqlx::query_scalar(sql).bind(arg).fetch_one(&self.pool).await.unwrap()
    }

    pub async fn reconciled(&self, event: &str) -> bool {
        self.count_for(
            "SELECT count(*) FROM events WHERE id = $1 AND reconciled_date IS NOT NULL",
            event,
        )
        .await
            == 1
    }

    /// `resources` row `id`: version, payload, status, whether soft-deleted.
    pub async fn resource(&self, id: &str) -> Option<Resource> {
        let row = sqlx::query(
            "SELECT version, payload::text, status::text, deleted_at IS NOT NULL FROM resources WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .unwrap()?;
        let json = |s: Option<String>| s.map(|s| serde_json::from_str::<Value>(&s).unwrap());
        Some(Resource {
            version: row.get(0),
            payload: json(row.get(1)).unwrap(),
            status: json(row.get(2)),
            deleting: row.get(3),
        })
    }

    /// Every `status_events` row, oldest first.
    pub async fn status_events(&self) -> Vec<StatusEvent> {
        sqlx::query(
            "SELECT id, resource_id, status_event_type, resource_source, payload::text, status::text FROM status_events ORDER BY created_at",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap()
        .into_iter()
        .map(|r| StatusEvent {
            id: r.get(0),
            resource_id: r.get(1),
            kind: r.get(2),
            resource_source: r.get(3),
            payload: r.get::<Option<String>, _>(4).map(|s| serde_json::from_str(&s).unwrap()),
            status: r.get::<Option<String>, _>(5).map(|s| serde_json::from_str(&s).unwrap()),
        })
        .collect()
    }

    /// Waits (up to 5 s) until no session holds an advisory lock. PostgreSQL makes a commit
    /// visible a moment before it releases the transaction's locks, so a test that saw the
    /// commit may still see its lock for that moment.
    pub async fn locks_released(&self) {
        eventually(Duration::from_secs(5), "every advisory lock released", async || {
            self.advisory_locks().await == 0
        })
        .await;
    }

    /// Advisory locks anyone holds.
    pub async fn advisory_locks(&self) -> i64 {
        self.count("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
            .await
    }

    /// A LISTEN on `status_events`, as every Maestro replica has.
    pub async fn listen_status_events(&self) -> sqlx::postgres::PgListener {
        let mut l = sqlx::postgres::PgListener::connect_with(&self.pool).await.unwrap();
        l.listen("status_events").await.unwrap();
        l
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub version: i64,
    pub payload: Value,
    pub status: Option<Value>,
    pub deleting: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatusEvent {
    pub id: String,
    pub resource_id: String,
    pub kind: String,
    pub resource_source: String,
    pub payload: Option<Value>,
    pub status: Option<Value>,
}

/// Consumers `cluster-<i>` and one resource `res-<i>` each (version 1, no event), for the benches.
pub async fn seed(db: &MaestroDb, agents: usize) {
    for i in 0..agents {
        let (cluster, id) = (format!("cluster-{i}"), format!("res-{i}"));
        sqlx::query("INSERT INTO consumers (id, created_at, updated_at, name) VALUES (gen_random_uuid()::text, now(), now(), $1)")
            .bind(&cluster)
            .execute(&db.pool)
            .await
            .unwrap();
        sqlx::query("INSERT INTO resources (id, name, created_at, updated_at, source, consumer_name, version, type, payload) VALUES ($1, $1, now(), now(), 'source-work-client', $2, 1, '', $3::json)")
            .bind(&id)
            .bind(&cluster)
            .bind(spec_payload(&id, &cluster, "nginx", 1, 1).to_string())
            .execute(&db.pool)
            .await
            .unwrap();
    }
}

/// One Maestro create for `cluster` (resource row, `events` row, NOTIFY, each in autocommit):
/// returns the resource id and when the NOTIFY was sent.
pub async fn maestro_create(db: &MaestroDb, cluster: &str) -> (String, Instant) {
    let id = uuid::Uuid::new_v4().to_string();
    sqlx::query("INSERT INTO resources (id, name, created_at, updated_at, source, consumer_name, version, type, payload) VALUES ($1, $1, now(), now(), 'source-work-client', $2, 1, '', $3::json)")
        .bind(&id)
        .bind(cluster)
        .bind(spec_payload(&id, cluster, "nginx", 1, 1).to_string())
        .execute(&db.pool)
        .await
        .unwrap();
    let event = db.insert_event(&id, "Create", false).await;
    let written = Instant::now();
    sqlx::query("SELECT pg_notify('events', $1)")
        .bind(&event)
        .execute(&db.pool)
        .await
        .unwrap();
    (id, written)
}

/// What a pgbench run did.
#[derive(Debug, Clone, Copy)]
pub struct PgBench {
    pub tps: f64,
    pub transactions: u64,
}

/// pgbench running the status transaction conductor runs (for the resources `res-0` …
/// `res-<agents-1>`), `clients` at once for `seconds`; with `prepared`, over prepared statements
/// (`-M prepared`, as conductor's sqlx sends them) rather than pgbench's simple protocol.
pub fn pgbench_status(db: &MaestroDb, agents: usize, clients: usize, seconds: u64, prepared: bool) -> PgBench {
    let status = json!({"specversion": "1.0", "id": "x", "source": "cluster-work-agent", "type": "status",
        "data": {"conditions": [{"type": "Applied", "status": "True", "reason": "AppliedManifestComplete", "message": "Apply manifest complete"}], "resourceStatus": []},
        "metadata": {"name": "nginx", "namespace": "cluster", "uid": "res"}, "sequenceid": sequence(0), "resourceversion": 1});
    let script = format!(
        r#"\set i random(0, {last})
BEGIN;
SELECT pg_advisory_xact_lock(hashtext('res-' || :i), -1890629248);
SELECT id, consumer_name, version, source, payload::text, status::text, created_at, deleted_at FROM resources WHERE id = 'res-' || :i LIMIT 1;
WITH stored AS (UPDATE resources SET status = '{status}'::json, updated_at = now() WHERE id = 'res-' || :i), e AS (INSERT INTO status_events (id, created_at, updated_at, deleted_at, resource_id, resource_source, resource_type, payload, status, status_event_type, reconciled_date) VALUES (gen_random_uuid()::text, now(), now(), NULL, 'res-' || :i, '', '', NULL, NULL, 'StatusUpdate', NULL) RETURNING id) SELECT pg_notify('status_events', id) FROM e;
COMMIT;
"#,
        last = agents - 1
    );
    let file = db.dir.path().join("status.sql");
    std::fs::write(&file, script).unwrap();
    let out = std::process::Command::new("pgbench")
        .args(["-n", "-h", "127.0.0.1", "-U", "postgres", "-p"])
        .arg(db.port.to_string())
        .args(["-c", &clients.to_string(), "-j", "2", "-T", &seconds.to_string()])
        .args(["-M", if prepared { "prepared" } else { "simple" }, "-f"])
        .arg(&file)
        .arg("maestro")
        .output()
        .expect("pgbench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pgbench: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |prefix: &str| -> Option<f64> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|t| t.split('/').next()?.parse().ok())
    };
    PgBench {
        tps: field("tps = ").expect("pgbench reports tps"),
        transactions: field("number of transactions actually processed: ").expect("pgbench reports transactions")
            as u64,
    }
}

/// conductor's configuration: the maestro component on `url`, catching up every `catch_up`.
pub fn config(url: &str, catch_up: &str) -> String {
    config_with(url, catch_up, Form::Component, 4, 2)
}

/// The same, with the plugin in `form`, `connections` pooled and `instances` plugin instances.
pub fn config_with(url: &str, catch_up: &str, form: Form, connections: u32, instances: usize) -> String {
    format!(
        r#"
[databases.maestro]
url = "{url}"
pool_size = {connections}
[plugins.maestro]
kind = "{kind}"
file = "{file}"
grants = ["emit", "log", "timer", "kv", "pg", "metrics"]
databases = ["maestro"]
pool_size = {instances}
config = {{ catch_up_interval = "{catch_up}" }}
"#,
        kind = form.kind(),
        file = plugin_artifact("maestro-plugin", form).display()
    )
}

/// A snowflake sequence id from node 1 (the work agent's), at `tick`.
pub fn sequence(tick: i64) -> String {
    ((1_700_000_000_000i64 + tick - 1_288_834_974_657) << 22 | 1 << 12).to_string()
}

/// The work agent's status update for resource `id` at `version`, with one condition.
pub fn status_update(cluster: &str, id: &str, version: i32, tick: i64, condition: &str) -> proto::CloudEvent {
    let mut e = events::with_id(
        events::agent_event(
            &format!("{WORKS}.status.update_request"),
            cluster,
            "maestro",
            Some(json!({
                "conditions": [{"type": condition, "status": "True", "observedGeneration": version}],
                "resourceStatus": [],
            })),
        ),
        id,
    );
    e.attributes.insert("ce-resourceversion".into(), integer(version));
    e.attributes.insert("ce-sequenceid".into(), string(&sequence(tick)));
    e.attributes
        .insert("ce-metadata".into(), string(r#"{"name":"agent-side-name"}"#));
    e
}

/// The resourceversion of a spec event (an integer on the wire for manifest bundles).
pub fn version(e: &proto::CloudEvent) -> Option<i32> {
    match events::attr(e, "ce-resourceversion") {
        Some(Attr::CeInteger(v)) => Some(*v),
        _ => None,
    }
}

/// Whether `e` is the spec of resource `id` at `version`.
pub fn is_spec_of(e: &proto::CloudEvent, id: &str, v: i32) -> bool {
    events::attr_str(e, "ce-resourceid") == Some(id) && version(e) == Some(v)
}

pub fn spec_of(id: &str, v: i32) -> impl Fn(&proto::CloudEvent) -> bool + '_ {
    move |e| is_spec_of(e, id, v)
}

/// The next event on `sub` for which `pick` holds, within 30 s (earlier deliveries may repeat:
/// sending a spec again is harmless, the agent orders by resourceversion).
pub async fn next_where(sub: &mut Sub, what: &str, pick: impl Fn(&proto::CloudEvent) -> bool) -> proto::CloudEvent {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = tokio::time::timeout(left, sub.next_event())
            .await
            .unwrap_or_else(|_| panic!("no {what} within 30 s"))
            .unwrap_or_else(|e| panic!("waiting for {what}: {e}"));
        if pick(&e) {
            return e;
        }
    }
}

pub use conductor_blackbox_tests::eventually;

/// The fields of `/proc/<pid>/stat` after the command name (field 3 is index 0).
fn stat_fields(pid: &str) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // The state (field 3) is a letter: keep the numbers' positions by reading it as 0.
    Some(rest.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect())
}

/// CPU seconds of the PostgreSQL server: the postmaster's own, its live children's, and those of
/// the children it has reaped (`cutime` + `cstime`), so a backend that exits in between counts.
pub fn postgres_cpu(postmaster: u32) -> f64 {
    // After the name: ppid is field 4 (index 1); utime, stime, cutime, cstime fields 14–17.
    let (ppid, utime, stime, cutime, cstime) = (1, 11, 12, 13, 14);
    let own = stat_fields(&postmaster.to_string()).expect("the postmaster's stat");
    let mut ticks = own[utime] + own[stime] + own[cutime] + own[cstime];
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        if let Some(f) = stat_fields(pid).filter(|f| f.len() > cstime && f[ppid] == u64::from(postmaster)) {
            ticks += f[utime] + f[stime] + f[cutime] + f[cstime];
        }
    }
    ticks as f64 / 100.0
}
