//! The consumer controller against a real API server and a real PostgreSQL holding Maestro's schema
//! (`docs/maestro-database.md` §10.5 scenario 1): a joined ManagedCluster gets a consumer row that Maestro's
//! REST API shows; repeating is a no-op; two controllers racing make one row.

#[path = "support/kube.rs"]
mod kube_api;
#[path = "support/maestro.rs"]
mod support;

use std::time::Duration;

use conductor_blackbox_tests::{Conductor, Form, plugin_artifact};
use kube_api::KubeApi;
use serde_json::{Value, json};
use support::{MaestroDb, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(20);
const CLUSTERS: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";

fn config(db: &MaestroDb, kube: &KubeApi, form: Form) -> String {
    format!(
        r#"
[kubernetes]
kubeconfig = "{kubeconfig}"
[databases.maestro]
url = "{url}"
[plugins.consumers]
kind = "{kind}"
file = "{file}"
grants = ["log", "timer", "kv", "pg", "kube"]
databases = ["maestro"]
kube_resources = [{{ resource = "managedclusters.cluster.open-cluster-management.io", verbs = ["watch"] }}]
config = {{ database = "maestro" }}
"#,
        kubeconfig = kube.kubeconfig.display(),
        url = db.url(),
        kind = form.kind(),
        file = plugin_artifact("consumer-controller-plugin", form).display(),
    )
}

/// Creates ManagedCluster `name`; with `joined`, then sets its ManagedClusterJoined condition as
/// the hub's registration controller does (status subresource).
fn create_cluster(kube: &KubeApi, name: &str, joined: bool) {
    let cluster = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": name}, "spec": {"hubAcceptsClient": true},
    });
    let (status, body) = kube.request("POST", CLUSTERS, Some(&cluster));
    assert_eq!(status, 201, "{body}");
    if joined {
        join(kube, name);
    }
}

fn join(kube: &KubeApi, name: &str) {
    let condition = |t: &str| {
        json!({"type": t, "status": "True", "reason": t, "message": t,
               "lastTransitionTime": "2026-11-30T10:00:00Z"})
    };
    let patch =
        json!({"status": {"conditions": [condition("HubAcceptedManagedCluster"), condition("ManagedClusterJoined")]}});
    let (status, body) = kube.request("PATCH", &format!("{CLUSTERS}/{name}/status"), Some(&patch));
    assert_eq!(status, 200, "{body}");
}

/// A double of Maestro's REST server for the one call the scenario makes: `GET
/// /api/maestro/v1/consumers`, rendered from the database as Maestro's presenter renders it (a
/// row it could not render — no `created_at`, labels that are not an object — is a 500).
async fn maestro_rest(pool: sqlx::PgPool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut request = vec![0; 4096];
                let n = socket.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..n]);
                let (code, body) = if request.starts_with("GET /api/maestro/v1/consumers ") {
                    render_consumers(&pool).await
                } else {
                    (404, json!({"kind": "Error", "reason": "not found"}))
                };
                let body = body.to_string();
                let response = format!(
                    "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

async fn render_consumers(pool: &sqlx::PgPool) -> (u16, Value) {
    type Time = Option<chrono::DateTime<chrono::Utc>>;
    let rows: Vec<(String, String, Option<String>, Time, Time)> =
        sqlx::query_as("SELECT id, name, labels::text, created_at, updated_at FROM consumers WHERE deleted_at IS NULL ORDER BY created_at")
            .fetch_all(pool)
            .await
            .unwrap();
    let mut items = Vec::new();
    for (id, name, labels, created, updated) in rows {
        let (Some(created), Some(updated)) = (created, updated) else {
            return (
                500,
                json!({"kind": "Error", "reason": format!("consumer {id} has no timestamps")}),
            );
        };
        let mut item = json!({"id": id, "kind": "Consumer", "href": format!("/api/maestro/v1/consumers/{id}"),
                              "name": name, "created_at": created.to_rfc3339(), "updated_at": updated.to_rfc3339()});
        if let Some(labels) = labels {
            match serde_json::from_str::<Value>(&labels) {
                Ok(l) if l.is_object() => item["labels"] = l,
                _ => {
                    return (
                        500,
                        json!({"kind": "Error", "reason": format!("consumer {id} has bad labels")}),
                    );
                }
            }
        }
        items.push(item);
    }
    let n = items.len();
    (
        200,
        json!({"kind": "ConsumerList", "page": 1, "size": n, "total": n, "items": items}),
    )
}

/// A controller started with `extra` (the harness's base configuration and it) logging at debug,
/// so that what it found is in its log ("consumer … exists").
fn debug_logging(extra: &str) -> Conductor {
    let config = format!("{}\n{extra}", conductor_blackbox_tests::BASE_CONFIG);
    Conductor::start_with_config(&config.replace("level = \"info\"", "level = \"debug\"")).unwrap()
}

async fn consumer_rows(db: &MaestroDb, name: &str) -> i64 {
    db.count_for("SELECT count(*) FROM consumers WHERE name = $1", name)
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn joined_clusters_get_one_consumer_each_that_maestros_api_lists() {
    let db = MaestroDb::start().await;
    let kube = tokio::task::spawn_blocking(KubeApi::start).await.unwrap();
    let rest = maestro_rest(db.pool.clone()).await;
    let c = debug_logging(&config(&db, &kube, Form::Component));
    eventually(WAIT, "the controller watching", async || c.logs().contains("watching")).await;

    // Not joined yet: nothing — told once a joined cluster made after it has its consumer (the
    // controller has seen both). Joined: its consumer, listed by Maestro's REST API.
    create_cluster(&kube, "cluster1", false);
    create_cluster(&kube, "cluster0", true);
    eventually(WAIT, "cluster0's consumer", async || {
        consumer_rows(&db, "cluster0").await == 1
    })
    .await;
    assert_eq!(consumer_rows(&db, "cluster1").await, 0, "{}", c.logs());
    join(&kube, "cluster1");
    eventually(WAIT, "cluster1's consumer", async || {
        consumer_rows(&db, "cluster1").await == 1
    })
    .await;
    let (code, body) = conductor_blackbox_tests::http_get(&rest, "/api/maestro/v1/consumers")
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "ConsumerList");
    assert_eq!(list["total"], 2);
    let cluster1 = |list: &Value| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "cluster1")
            .cloned()
            .unwrap_or_else(|| panic!("no cluster1 in {list}"))
    };
    assert!(cluster1(&list).get("labels").is_none(), "labels are left unset");
    let id = cluster1(&list)["id"].clone();

    // Repeating is a no-op: the cluster changes again, and a second controller (the native
    // library form) starts, lists the joined cluster and finds its consumer.
    let (status, body) = kube.request(
        "PATCH",
        &format!("{CLUSTERS}/cluster1"),
        Some(&json!({"metadata": {"labels": {"env": "test"}}})),
    );
    assert_eq!(status, 200, "{body}");
    let second = debug_logging(&config(&db, &kube, Form::Native));
    eventually(WAIT, "the second controller finding cluster1's consumer", async || {
        second.logs().contains("consumer cluster1 exists")
    })
    .await;
    let (_, body) = conductor_blackbox_tests::http_get(&rest, "/api/maestro/v1/consumers")
        .await
        .unwrap();
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((list["total"].clone(), cluster1(&list)["id"].clone()), (json!(2), id));

    // Two controllers racing for a newly joined cluster: one row, once both have settled it.
    create_cluster(&kube, "cluster2", true);
    let settled = |c: &Conductor| {
        let logs = c.logs();
        logs.contains("consumer cluster2 created") || logs.contains("consumer cluster2 exists")
    };
    eventually(WAIT, "both controllers settling cluster2", async || {
        settled(&c) && settled(&second)
    })
    .await;
    assert_eq!(consumer_rows(&db, "cluster2").await, 1);

    // A name Maestro would refuse (a DNS subdomain, not a label): reported, no row.
    create_cluster(&kube, "cluster.three", true);
    eventually(WAIT, "the refusal in the log", async || {
        c.logs().contains("not an RFC 1123 label")
    })
    .await;
    assert_eq!(consumer_rows(&db, "cluster.three").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM consumers").await, 3);
    drop(second);
}
