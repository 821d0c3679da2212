//! Operations: metrics with upstream names, health endpoints, gRPC health and reflection, a
//! startup that fails before anything runs, and a clean shutdown on SIGTERM.

#[path = "support/maestro.rs"]
mod maestro;

use std::time::Duration;

use conductor_blackbox_tests::events;
use conductor_blackbox_tests::{BASE_CONFIG, Conductor, MEMORY_SOURCE, WORKS, conductor_bin, publish, subscribe};

#[tokio::test]
async fn metrics_and_health_endpoints() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    assert_eq!(c.admin_get("/healthz").await.unwrap().0, 200);
    assert_eq!(c.admin_get("/readyz").await.unwrap().0, 200);
    let mut client = c.client().await.unwrap();
    let _sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    publish(&mut client, events::create(WORKS, "cluster1", "w1", "w1"))
        .await
        .unwrap();
    let _ = publish(&mut client, events::create(WORKS, "cluster1", "w1", "w1")).await;
    let (code, body) = c.admin_get("/metrics").await.unwrap();
    assert_eq!(code, 200);
    let labels = format!("consumer=\"cluster1\",data_type=\"{WORKS}\"");
    for line in [
        format!("grpc_server_ce_subscribers{{{labels}}} 1"),
        format!("grpc_server_ce_called_total{{{labels},method=\"Subscribe\"}} 1"),
        format!("grpc_server_ce_called_total{{{labels},method=\"Publish\"}} 2"),
        format!("grpc_server_ce_msg_received_total{{{labels},method=\"Publish\"}} 2"),
        format!("grpc_server_ce_msg_sent_total{{{labels},method=\"Publish\"}} 1"),
        format!("grpc_server_ce_processed_total{{{labels},grpc_code=\"OK\",method=\"Publish\"}} 1"),
        format!("grpc_server_ce_processed_total{{{labels},grpc_code=\"FailedPrecondition\",method=\"Publish\"}} 1"),
    ] {
        assert!(body.contains(&line), "missing {line} in\n{body}");
    }
    assert!(body.contains("grpc_server_ce_processing_duration_seconds_bucket"));
    assert!(body.contains("[ALPHA]"));
    // What has not happened yet is at 0, so alerts and panels see its first increase.
    for line in [
        r#"conductor_grpc_connections_refused_total{reason="limit"} 0"#,
        r#"conductor_grpc_connections_closed_total{reason="unauthenticated"} 0"#,
        r#"conductor_tls_handshake_failures_total{reason="error"} 0"#,
        r#"conductor_tls_handshake_failures_total{reason="timeout"} 0"#,
        r#"conductor_tls_reloads_total{result="error"} 0"#,
        r#"conductor_admin_refused_total{code="401"} 0"#,
        r#"conductor_auth_review_waits_total{review="TokenReview"} 0"#,
    ] {
        assert!(body.contains(line), "missing {line} in\n{body}");
    }
    let cut_off = format!("conductor_subscribers_cut_off_total{{data_type=\"{WORKS}\"}} 0");
    assert!(body.contains(&cut_off), "missing {cut_off} in\n{body}");
}

#[tokio::test]
async fn grpc_health_and_reflection() {
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient};
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let channel = tonic::transport::Channel::from_shared(c.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let status = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "io.cloudevents.v1.CloudEventService".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(status, ServingStatus::Serving as i32);

    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.message().await.unwrap().unwrap().message_response
    else {
        panic!("not a list response");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"io.cloudevents.v1.CloudEventService".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"grpc.health.v1.Health".to_owned()), "{names:?}");
}

#[tokio::test]
async fn sigterm_ends_streams_cleanly_and_exits_zero() {
    let mut c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let status = tokio::task::spawn_blocking(move || {
        let s = c.terminate();
        (s, c)
    });
    // The stream ends with OK (no error), not with a reset.
    let end = tokio::time::timeout(Duration::from_secs(10), sub.stream.message())
        .await
        .unwrap();
    assert!(matches!(end, Ok(None)), "{end:?}");
    let (status, c) = status.await.unwrap();
    assert!(status.unwrap().success(), "{}", c.logs());
    assert!(c.logs().contains("shutting down"), "{}", c.logs());
}

#[tokio::test]
async fn grpcurl_lists_and_describes_the_service_through_reflection() {
    let grpcurl = std::env::var("CONDUCTOR_GRPCURL")
        .expect("CONDUCTOR_GRPCURL is not set: run scripts/setup-test-env.sh (the README's test command does)");
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&grpcurl).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "grpcurl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let list = run(&["-plaintext", &c.grpc_addr, "list"]);
    assert!(
        list.lines().any(|l| l == "io.cloudevents.v1.CloudEventService"),
        "{list}"
    );
    assert!(list.lines().any(|l| l == "grpc.health.v1.Health"), "{list}");
    let methods = run(&[
        "-plaintext",
        &c.grpc_addr,
        "list",
        "io.cloudevents.v1.CloudEventService",
    ]);
    assert!(
        methods.contains("io.cloudevents.v1.CloudEventService.Publish"),
        "{methods}"
    );
    assert!(
        methods.contains("io.cloudevents.v1.CloudEventService.Subscribe"),
        "{methods}"
    );
    let health = run(&["-plaintext", &c.grpc_addr, "grpc.health.v1.Health/Check"]);
    assert!(health.contains("SERVING"), "{health}");
}

/// A port that is taken stops conductor before anything has started: it exits non-zero with a
/// message naming the address and the key, and no plugin ran (nothing loaded, no LISTEN, and the
/// reconciled event the maestro plugin purges when it starts is still there).
#[tokio::test(flavor = "multi_thread")]
async fn a_taken_port_stops_conductor_before_any_plugin_runs() {
    let db = maestro::MaestroDb::start().await;
    let event = db.insert_event("resource-1", "Create", false).await;
    db.exec("UPDATE events SET reconciled_date = now() WHERE id = $1", &[&event])
        .await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for key in ["server.listen", "admin.listen"] {
        let base = match key {
            "server.listen" => BASE_CONFIG.replacen("127.0.0.1:0", &addr, 1),
            _ => BASE_CONFIG.replace(
                "[admin]\nlisten = \"127.0.0.1:0\"",
                &format!("[admin]\nlisten = \"{addr}\""),
            ),
        };
        assert_ne!(base, BASE_CONFIG, "{key} is set to the taken port");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conductor.toml");
        std::fs::write(&path, format!("{base}\n{}", maestro::config(&db.url(), "1h"))).unwrap();
        let out = std::process::Command::new(conductor_bin())
            .args(["serve", "--config"])
            .arg(&path)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{key}: exits non-zero\n{stderr}");
        assert!(
            stderr.contains(&format!("cannot listen on {addr} ({key})")),
            "{key}: the message names the address and the key\n{stderr}"
        );
        for started in ["plugin loaded", "embedded database", "listening on events"] {
            assert!(
                !stderr.contains(started),
                "{key}: nothing started ({started:?})\n{stderr}"
            );
        }
        assert_eq!(
            db.count("SELECT count(*) FROM events").await,
            1,
            "{key}: the maestro plugin never ran (its start would have purged the reconciled event)"
        );
    }
}

/// The hard open-file limit of this process, which a child inherits (`/proc/self/limits`).
fn hard_open_files() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4).map(str::to_owned))
        .expect("a Max open files line")
        .parse()
        .expect("a number (not unlimited)")
}

/// Every connection is a file descriptor: conductor started with a small soft limit raises it to
/// the hard one and logs both; a `server.max_connections` beyond what the limit holds is warned
/// about at startup, naming the key. (A shell lowers the soft limit before it runs conductor.)
#[tokio::test]
async fn the_open_file_limit_is_raised_to_the_hard_one_and_a_limit_beyond_it_is_warned_about() {
    let hard = hard_open_files();
    let mut command = std::process::Command::new("sh");
    command
        .args(["-c", "ulimit -Sn 512 && exec \"$0\" \"$@\""])
        .arg(conductor_bin());
    let config = BASE_CONFIG.replace("[server]\n", &format!("[server]\nmax_connections = {}\n", hard * 2));
    let c = Conductor::start_command(command, &format!("{config}\n{MEMORY_SOURCE}")).unwrap();
    let line: serde_json::Value =
        serde_json::from_str(&c.wait_for_log("\"message\":\"open-file limit\"").await).unwrap();
    assert_eq!(line["raised_from"], 512, "{line}");
    assert_eq!(line["soft"], hard, "raised to the hard limit: {line}");
    assert_eq!(line["hard"], hard, "{line}");
    let warning = c.wait_for_log("server.max_connections:").await;
    assert!(
        warning.contains("\"level\":\"WARN\"") && warning.contains(&format!("{} connections asked for", hard * 2)),
        "{warning}"
    );
    // It serves as before.
    let mut client = c.client().await.unwrap();
    subscribe(&mut client, "cluster1", WORKS).await.unwrap();
}
