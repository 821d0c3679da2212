//! Interoperability with a second gRPC/protobuf implementation: the Python grpcio agent
//! (`tests/python/ocm_agent.py`) subscribes and publishes against the real binary.

use serde_json::{Value, json};

use conductor_blackbox_tests::{Conductor, MEMORY_SOURCE, WORKS, python_agent};

fn event_json(ty: &str, id: &str, data: Value) -> String {
    json!({
        "id": uuid::Uuid::new_v4().to_string(),
        "source": "cluster1-work-agent",
        "spec_version": "1.0",
        "type": ty,
        "attributes": {
            "ce-clustername": {"ce_string": "cluster1"},
            "ce-originalsource": {"ce_string": ""},
            "ce-resourceid": {"ce_string": id},
            "contenttype": {"ce_string": "application/json"},
            "ce-time": {"ce_timestamp": "2025-06-01T12:00:00.123456789Z"}
        },
        "binary_data_json": data,
    })
    .to_string()
}

#[tokio::test]
async fn python_agent_subscribes_publishes_and_reads_errors() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let addr = c.grpc_addr.clone();
    let subscriber = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            python_agent(&[
                "subscribe",
                "--addr",
                &addr,
                "--cluster",
                "cluster1",
                "--data-type",
                WORKS,
                "--max-events",
                "1",
                "--timeout",
                "20",
                "--skip-heartbeats",
            ])
        })
    };
    // Wait until the Python subscriber is registered (the gauge shows it), then publish.
    let gauge = format!("grpc_server_ce_subscribers{{consumer=\"cluster1\",data_type=\"{WORKS}\"}} 1");
    for _ in 0..200 {
        if c.admin_get("/metrics").await.unwrap().1.contains(&gauge) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let create = event_json(
        &format!("{WORKS}.spec.create_request"),
        "py-1",
        json!({"manifests": [], "metadata": {"name": "py-work"}}),
    );
    let out = python_agent(&["publish", "--addr", &addr, "--event-json", &create]).unwrap();
    assert_eq!(out[0]["code"], "OK", "{out:?}");

    let lines = subscriber.join().unwrap().unwrap();
    assert_eq!(lines[0]["kind"], "header", "the header comes first: {lines:?}");
    let ids = lines[0]["metadata"]["subscription-id"].as_array().unwrap();
    assert_eq!(ids.len(), 1);
    let event = &lines[1]["event"];
    assert_eq!(event["type"], format!("{WORKS}.spec.create_request"));
    assert_eq!(event["source"], "memory");
    assert_eq!(event["spec_version"], "1.0");
    assert_eq!(event["attributes"]["ce-resourceid"]["ce_string"], "py-1");
    assert_eq!(event["attributes"]["ce-resourceversion"]["ce_integer"], 1);
    assert_eq!(event["attributes"]["ce-clustername"]["ce_string"], "cluster1");
    assert_eq!(event["attributes"]["contenttype"]["ce_string"], "application/json");
    assert!(event["attributes"]["ce-time"]["ce_timestamp"].is_string());
    assert_eq!(event["data_case"], "binary_data");
    let data: Value = serde_json::from_str(event["binary_data_utf8"].as_str().unwrap()).unwrap();
    assert_eq!(data["metadata"]["name"], "py-work");
    assert_eq!(lines[2]["kind"], "end");
    assert_eq!(lines[2]["code"], "OK");

    // The same create again: the agent reads a Kubernetes AlreadyExists status.
    let out = python_agent(&["publish", "--addr", &addr, "--event-json", &create]).unwrap();
    assert_eq!(out[0]["code"], "FAILED_PRECONDITION");
    let status: Value = serde_json::from_str(out[0]["details"].as_str().unwrap()).unwrap();
    assert_eq!(status["ErrStatus"]["reason"], "AlreadyExists");

    // A request with no event: InvalidArgument.
    let out = python_agent(&["publish", "--addr", &addr, "--no-event"]).unwrap();
    assert_eq!(out[0]["code"], "INVALID_ARGUMENT");

    // An invalid subscription surfaces its error to a grpcio client too.
    let lines = python_agent(&[
        "subscribe",
        "--addr",
        &addr,
        "--cluster",
        "",
        "--data-type",
        WORKS,
        "--timeout",
        "5",
    ])
    .unwrap();
    let end = lines.last().unwrap();
    assert_eq!(end["code"], "UNKNOWN", "{lines:?}");
    assert_eq!(end["details"], "invalid subscription request: missing cluster name");
}

#[tokio::test]
async fn python_agent_receives_heartbeats() {
    let c = Conductor::start(&format!("[broker]\nheartbeat_interval = \"200ms\"\n{MEMORY_SOURCE}")).unwrap();
    let lines = python_agent(&[
        "subscribe",
        "--addr",
        &c.grpc_addr,
        "--cluster",
        "cluster1",
        "--data-type",
        WORKS,
        "--max-events",
        "2",
        "--timeout",
        "10",
    ])
    .unwrap();
    assert_eq!(lines[0]["kind"], "header");
    for hb in &lines[1..3] {
        assert_eq!(hb["event"]["type"], "io.open-cluster-management.cloudevents.heartbeat");
        assert_eq!(hb["event"]["spec_version"], "1.0");
        assert_eq!(hb["event"]["source"], "");
        assert_eq!(hb["event"]["attributes"], json!({}));
        assert_eq!(hb["event"]["data_case"], "none");
    }
}
