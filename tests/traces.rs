//! OpenTelemetry traces: conductor exports spans over OTLP/gRPC to a receiver written with Python
//! grpcio and opentelemetry-proto (`tests/python/otlp_receiver.py`). A Publish continues the trace
//! of the agent's `traceparent`; the plugin call and the database statements it makes are spans of
//! that trace; a resync's answers carry the trace they were sent in.

#[path = "support/maestro.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::{self, attr_str, string};
use conductor_blackbox_tests::{Conductor, WORKS, publish, subscribe};
use serde_json::Value;
use support::{MaestroDb, config, is_spec_of, next_where, status_update};

/// The agent's trace: W3C trace context, sampled.
const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const AGENT_SPAN: &str = "b7ad6b7169203331";

/// The Python OTLP receiver, killed on drop; its spans arrive on a channel.
struct Receiver {
    child: Child,
    port: u16,
    spans: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Receiver {
    fn start() -> Self {
        let python = std::env::var("CONDUCTOR_PYTHON")
            .expect("CONDUCTOR_PYTHON is not set: run scripts/setup-test-env.sh (the README's test command does)");
        let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/otlp_receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the receiver starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let first: Value = serde_json::from_str(&lines.next().expect("a first line").expect("readable")).unwrap();
        assert_eq!(first["kind"], "listening", "{first}");
        let port = u16::try_from(first["port"].as_u64().unwrap()).unwrap();
        let (tx, spans) = mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Self {
            child,
            port,
            spans,
            seen: Vec::new(),
        }
    }

    /// Waits (at most 20 s) until the spans received so far satisfy `done`; returns them.
    fn until(&mut self, what: &str, done: impl Fn(&[Value]) -> bool) -> &[Value] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.spans.recv_timeout(left) {
                Ok(span) => self.seen.push(span),
                Err(_) => panic!("{what}: not among the spans received: {:#?}", self.seen),
            }
        }
        &self.seen
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn in_trace<'a>(spans: &'a [Value], trace: &str, name: &str) -> Vec<&'a Value> {
    named(spans, name)
        .into_iter()
        .filter(|s| s["trace_id"] == trace)
        .collect()
}

/// A status update carrying the agent's trace becomes a trace of Publish → plugin call → pg
/// statements under the agent's span; a resync request's answers carry the resync's trace.
#[tokio::test(flavor = "multi_thread")]
async fn a_publish_continues_the_agents_trace_through_the_plugin_and_its_statements() {
    let mut receiver = Receiver::start();
    let db = MaestroDb::start().await;
    let toml = format!(
        "{}\n{}\n[telemetry.otlp]\nendpoint = \"http://127.0.0.1:{}\"\nservice_name = \"conductor-under-test\"\n",
        conductor_blackbox_tests::BASE_CONFIG,
        config(&db.url(), "1h"),
        receiver.port
    );
    let mut command = Command::new(conductor_blackbox_tests::conductor_bin());
    // Export every 200 ms rather than every 5 s (the batch processor reads this).
    command.env("OTEL_BSP_SCHEDULE_DELAY", "200");
    let c = Conductor::start_command(command, &toml).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let (id, _) = db.create("cluster1", "nginx", true).await;
    next_where(&mut sub, "the created spec", |e| is_spec_of(e, &id, 1)).await;

    let mut update = status_update("cluster1", &id, 1, 10, "Applied");
    update.attributes.insert(
        "ce-traceparent".into(),
        string(&format!("00-{TRACE_ID}-{AGENT_SPAN}-01")),
    );
    update.attributes.insert("ce-tracestate".into(), string("vendor=agent"));
    publish(&mut client, update).await.unwrap();

    let spans = receiver.until("the Publish, its plugin call and a statement", |spans| {
        !in_trace(spans, TRACE_ID, "Publish").is_empty()
            && !in_trace(spans, TRACE_ID, "plugin call").is_empty()
            && !in_trace(spans, TRACE_ID, "pg").is_empty()
    });
    let publish_span = in_trace(spans, TRACE_ID, "Publish")[0].clone();
    assert_eq!(
        publish_span["parent_span_id"], AGENT_SPAN,
        "the agent's span is the parent"
    );
    assert_eq!(
        publish_span["resource"]["service.name"], "conductor-under-test",
        "{publish_span}"
    );
    assert_eq!(publish_span["attributes"]["cluster"], "cluster1");
    let call = in_trace(spans, TRACE_ID, "plugin call")
        .into_iter()
        .find(|s| s["parent_span_id"] == publish_span["span_id"])
        .unwrap_or_else(|| panic!("no plugin call under the Publish: {spans:#?}"))
        .clone();
    assert_eq!(call["attributes"]["plugin"], "maestro");
    let statements = in_trace(spans, TRACE_ID, "pg");
    assert!(
        statements.iter().all(|s| s["parent_span_id"] == call["span_id"]),
        "every statement is under the plugin call: {statements:#?}"
    );
    assert!(
        statements.iter().any(|s| s["attributes"]["statement"]
            .as_str()
            .unwrap_or_default()
            .contains("status_events")),
        "the status event written is among them: {statements:#?}"
    );

    // A resync request with no trace of its own: conductor's resync span starts a trace, and the
    // answer carries it.
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let answer = next_where(&mut sub, "the resync answer", |e| {
        e.r#type == format!("{WORKS}.spec.resync_response")
    })
    .await;
    let traceparent = attr_str(&answer, "ce-traceparent")
        .unwrap_or_else(|| panic!("the answer carries a traceparent: {answer:?}"))
        .to_owned();
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    let (answer_trace, answer_parent) = (parts[1].to_owned(), parts[2].to_owned());
    assert_ne!(answer_trace, TRACE_ID);
    let spans = receiver.until("the resync span of the answer's trace", |spans| {
        !in_trace(spans, &answer_trace, "resync").is_empty()
    });
    let resync = in_trace(spans, &answer_trace, "resync")[0];
    let mut chain = vec![resync["span_id"].as_str().unwrap().to_owned()];
    // The answer was sent under the resync span or a span beneath it (the plugin call listing).
    let trace: Vec<&Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == answer_trace.as_str())
        .collect();
    while let Some(child) = trace.iter().find(|s| {
        let id = s["span_id"].as_str().unwrap_or_default();
        !chain.iter().any(|c| c == id) && chain.iter().any(|c| s["parent_span_id"] == c.as_str())
    }) {
        chain.push(child["span_id"].as_str().unwrap().to_owned());
    }
    assert!(
        chain.contains(&answer_parent),
        "the answer's parent span {answer_parent} is the resync's or beneath it: {spans:#?}"
    );
}
