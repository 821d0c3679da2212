//! Every error row of the publish pipeline (`docs/protocol.md` §6.1) and of Subscribe
//! validation (§4.2), against the real binary; the server keeps serving after each.

use conductor_blackbox_tests::events::{self, string};
use conductor_blackbox_tests::proto::{self, PublishRequest, SubscriptionRequest};
use conductor_blackbox_tests::{Conductor, LEASES, MEMORY_SOURCE, WORKS, publish, subscribe};
use tonic::Code;

async fn publish_status(
    client: &mut conductor_blackbox_tests::CloudEventServiceClient<tonic::transport::Channel>,
    event: proto::CloudEvent,
) -> tonic::Status {
    publish(client, event).await.expect_err("publish must fail")
}

#[tokio::test]
async fn every_publish_error_row_returns_its_code() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut client = c.client().await.unwrap();
    let good = || events::create(WORKS, "cluster1", "w1", "work1");

    // No event at all: InvalidArgument, and no crash.
    let s = client.publish(PublishRequest { event: None }).await.unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");

    // Not decodable (no spec version; empty attribute map): Unknown.
    let mut e = good();
    e.spec_version.clear();
    let s = publish_status(&mut client, e).await;
    assert_eq!(s.code(), Code::Unknown);
    assert!(
        s.message().starts_with("failed to convert to cloudevent"),
        "{}",
        s.message()
    );
    let mut e = good();
    e.attributes.clear();
    assert_eq!(publish_status(&mut client, e).await.code(), Code::Unknown);

    // clustername missing or not a string: Unknown.
    let mut e = good();
    e.attributes.remove("ce-clustername");
    let s = publish_status(&mut client, e).await;
    assert_eq!(s.code(), Code::Unknown);
    assert!(
        s.message().starts_with("failed to get clustername extension"),
        "{}",
        s.message()
    );
    let mut e = good();
    e.attributes.insert("ce-clustername".into(), events::integer(1));
    assert_eq!(publish_status(&mut client, e).await.code(), Code::Unknown);

    // Unparseable type (too short; bad subresource): Unknown.
    for ty in ["a.b.c", "a.v1.things.metadata.update_request"] {
        let mut e = good();
        e.r#type = ty.into();
        let s = publish_status(&mut client, e).await;
        assert_eq!(s.code(), Code::Unknown, "{ty}");
        assert!(
            s.message().starts_with("failed to parse cloud event type"),
            "{}",
            s.message()
        );
    }

    // Resync without data, with bad data, or for a type nobody serves: FailedPrecondition.
    let mut e = events::resync_request(WORKS, "cluster1", &[]);
    e.data = None;
    let s = publish_status(&mut client, e).await;
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert!(
        s.message().starts_with("failed to respond resync spec request"),
        "{}",
        s.message()
    );
    let mut e = events::resync_request(WORKS, "cluster1", &[]);
    e.data = Some(proto::cloud_event::Data::BinaryData("nope".into()));
    assert_eq!(publish_status(&mut client, e).await.code(), Code::FailedPrecondition);
    let s = publish_status(&mut client, events::resync_request("a.v1.nothing", "cluster1", &[])).await;
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert!(s.message().contains("failed to find service"), "{}", s.message());

    // No service for the data type, or an original source nobody owns: InvalidArgument.
    let s = publish_status(&mut client, events::create("a.v1.nothing", "cluster1", "x", "x")).await;
    assert_eq!(s.code(), Code::InvalidArgument);
    assert_eq!(s.message(), "failed to find service for event type a.v1.nothing");
    let mut e = good();
    e.attributes.insert("ce-originalsource".into(), string("ab"));
    assert_eq!(publish_status(&mut client, e).await.code(), Code::InvalidArgument);

    // Source errors: FailedPrecondition with {"ErrStatus": <Kubernetes Status>}.
    publish(&mut client, good()).await.unwrap();
    let s = publish_status(&mut client, good()).await;
    assert_eq!(s.code(), Code::FailedPrecondition);
    let body: serde_json::Value = serde_json::from_str(s.message()).expect("message is JSON");
    assert_eq!(body["ErrStatus"]["reason"], "AlreadyExists");
    assert_eq!(body["ErrStatus"]["code"], 409);
    assert_eq!(body["ErrStatus"]["status"], "Failure");
    assert_eq!(body["ErrStatus"]["details"]["name"], "work1");
    // A spec update for a resource the source does not hold: NotFound. (A status update for
    // one is answered OK, as OCM's work service does: see tests/broker.rs.)
    let update_of_unknown = events::with_id(
        events::agent_event(
            &format!("{WORKS}.spec.update_request"),
            "cluster1",
            "memory",
            Some(serde_json::json!({"manifests": []})),
        ),
        "missing",
    );
    let s = publish_status(&mut client, update_of_unknown).await;
    let body: serde_json::Value = serde_json::from_str(s.message()).unwrap();
    assert_eq!(body["ErrStatus"]["reason"], "NotFound");
    assert_eq!(body["ErrStatus"]["code"], 404);

    // Larger than the receive limit: refused before decoding. tonic answers OutOfRange where
    // grpc-go answers ResourceExhausted; agents treat both as a failed publish.
    let mut e = good();
    e.data = Some(proto::cloud_event::Data::BinaryData(vec![b' '; 5 << 20]));
    let s = publish_status(&mut client, e).await;
    assert_eq!(s.code(), Code::OutOfRange, "{s:?}");
    assert!(s.message().contains("too large"), "{}", s.message());

    // Still serving everyone.
    let mut sub = subscribe(&mut client, "cluster1", LEASES).await.unwrap();
    publish(&mut client, events::create(LEASES, "cluster1", "l1", "lease"))
        .await
        .unwrap();
    sub.next_event().await.unwrap();
}

#[tokio::test]
async fn receive_limit_is_configurable() {
    let c = Conductor::start(&format!(
        "[server]\nmax_receive_message_size = \"8MiB\"\n{MEMORY_SOURCE}"
    ));
    // [server] is already in the base configuration: a repeated table is a startup error.
    assert!(c.is_err());
    let config = conductor_blackbox_tests::BASE_CONFIG.replace(
        "plaintext = true\n",
        "plaintext = true\nmax_receive_message_size = \"8MiB\"\n",
    );
    let c = Conductor::start_with_config(&format!("{config}\n{MEMORY_SOURCE}")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut e = events::create(WORKS, "cluster1", "big", "big");
    let pad = "y".repeat(5 << 20);
    e.data = Some(proto::cloud_event::Data::BinaryData(
        serde_json::to_vec(&serde_json::json!({"manifests": [], "pad": pad})).unwrap(),
    ));
    publish(&mut client, e).await.expect("5 MiB fits under 8MiB");
}

#[tokio::test]
async fn invalid_subscriptions_are_refused_with_upstream_messages() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut client = c.client().await.unwrap();
    let s = client
        .subscribe(SubscriptionRequest {
            source: String::new(),
            cluster_name: String::new(),
            data_type: WORKS.into(),
        })
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unknown);
    assert_eq!(s.message(), "invalid subscription request: missing cluster name");
    let s = client
        .subscribe(SubscriptionRequest {
            source: String::new(),
            cluster_name: "cluster1".into(),
            data_type: "leases".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unknown);
    assert!(
        s.message()
            .starts_with("invalid subscription request: invalid data type"),
        "{}",
        s.message()
    );
}

#[test]
fn bad_configuration_is_a_startup_error_naming_file_key_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[server]\nlisen = \"x\"\n", "server.lisen", "unknown field"),
        (
            "[broker]\nheartbeat_interval = \"10 parsecs\"\n",
            "broker.heartbeat_interval",
            "invalid duration",
        ),
        (
            "[server]\nmax_receive_message_size = \"4 MiBs\"\n",
            "server.max_receive_message_size",
            "invalid size",
        ),
        ("[routes]\nkube = \"kube\"\n", "routes.kube", "no plugin"),
        (
            "[server]\nplaintext = true\n[auth]\nauthenticators = []\nauthorization = \"allow-all\"\n[plugins.m]\nkind = \"memory\"\nconfig = { data_types = [\"nodots\"] }\n",
            "plugins.m.config.data_types[0]",
            "data type",
        ),
        ("[plugins.m]\nkind = \"wasm\"\n", "plugins.m.kind", "unknown variant"),
        (
            "[server]\nlisten = \"127.0.0.1:0\"\n",
            "server.tls",
            "required unless server.plaintext",
        ),
        (
            "[server]\nplaintext = true\n[auth]\nauthenticators = []\n",
            "auth.authenticators",
            "allow-all",
        ),
    ];
    for (i, (text, key, reason)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        for args in [
            vec!["check-config", path.to_str().unwrap()],
            vec!["serve", "--config", path.to_str().unwrap()],
        ] {
            let out = std::process::Command::new(conductor_blackbox_tests::conductor_bin())
                .args(&args)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{args:?} accepted {text:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(path.to_str().unwrap()), "{args:?}: no file in {stderr}");
            assert!(stderr.contains(key), "{args:?}: no key {key} in {stderr}");
            assert!(stderr.contains(reason), "{args:?}: no reason {reason:?} in {stderr}");
        }
    }
}

#[test]
fn shipped_configurations_are_valid() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("conductor.toml")];
    for entry in std::fs::read_dir(root.join("examples/config")).unwrap() {
        files.push(entry.unwrap().path());
    }
    assert!(files.len() >= 3);
    for file in files {
        let out = std::process::Command::new(conductor_blackbox_tests::conductor_bin())
            .arg("check-config")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
    }
}
