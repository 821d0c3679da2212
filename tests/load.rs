//! `conductor-load` against a conductor it is pointed at: every figure it prints must agree with
//! what it sent and with what an independent agent of one of its clusters received.

use std::collections::BTreeSet;
use std::time::Duration;

use conductor_blackbox_tests::{Conductor, MEMORY_SOURCE, WORKS, load_bin, subscribe};
use serde_json::Value;

const AGENTS: usize = 20;
const RESOURCES_PER_AGENT: usize = 2;
const UPDATES: usize = 60;

#[tokio::test(flavor = "multi_thread")]
async fn the_load_tool_reports_what_it_sent_and_what_arrived() {
    let conductor = Conductor::start(MEMORY_SOURCE).unwrap();
    // An agent of our own for the tool's first cluster, on its own connection.
    let mut client = conductor.client().await.unwrap();
    let mut witness = subscribe(&mut client, "load-0", WORKS).await.unwrap();

    let (url, pid) = (conductor.url(), conductor.pid().to_string());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(load_bin())
            .args([
                "--server",
                &url,
                "--hub",
                "memory",
                "--pid",
                &pid,
                "--progress",
                "false",
            ])
            .args(["--agents", &AGENTS.to_string()])
            .args(["--resources-per-agent", &RESOURCES_PER_AGENT.to_string()])
            .args(["--updates", &UPDATES.to_string(), "--rate", "400"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();

    let creates = (AGENTS * RESOURCES_PER_AGENT) as u64;
    assert_eq!(report["hub"], "memory");
    assert_eq!(report["agents"], AGENTS);
    for (phase, sent) in [("creates", creates), ("updates", UPDATES as u64)] {
        let p = &report[phase];
        assert_eq!(p["sent"], sent, "{phase}: {report:#}");
        assert_eq!(p["delivered"], sent, "{phase}: {report:#}");
        assert_eq!(p["missing"], 0, "{phase}: {report:#}");
        let l = &p["latency_ms"];
        let [p50, p90, p99, max] = ["p50", "p90", "p99", "max"].map(|k| l[k].as_f64().unwrap());
        assert!(0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max, "{phase}: {l}");
        assert!(max < 10_000.0, "{phase}: {l}");
    }
    // The memory source sends each write once, in order, to the one agent of its cluster.
    assert_eq!(report["events_received"], creates + UPDATES as u64, "{report:#}");
    assert_eq!(report["out_of_order"], 0);
    assert_eq!(report["duplicates"], 0);
    assert_eq!(report["write_errors"], 0);
    assert_eq!(report["stream_errors"], 0);
    let server = &report["server_process"];
    assert_eq!(server["pid"], conductor.pid());
    assert!(server["rss_connected_bytes"].as_u64().unwrap() > 0);
    assert!(server["rss_peak_bytes"].as_u64() >= server["rss_end_bytes"].as_u64());
    assert!(server["update_phase_cpu_seconds"].as_f64().unwrap() >= 0.0);
    assert!(server["cpu_seconds_per_1000_deliveries"].is_number());

    // Cluster load-0 holds resources 0 and 20 (one per round of creates); the 60 updates go
    // round robin over the 40 resources, so each of load-0's gets one in the first round and
    // resource 0 another in the second: 2 creates + 3 updates, which the witness saw too.
    let mut seen = BTreeSet::new();
    while seen.len() < 5 {
        let e = tokio::time::timeout(Duration::from_secs(10), witness.next_event())
            .await
            .expect("the witness receives load-0's events")
            .unwrap();
        let id = conductor_blackbox_tests::events::attr_str(&e, "ce-resourceid")
            .unwrap()
            .to_owned();
        seen.insert((id, format!("{:?}", e.attributes.get("ce-resourceversion"))));
    }
    assert!(
        witness.next_raw(Duration::from_millis(500)).await.is_err(),
        "nothing more for load-0"
    );
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let out = std::process::Command::new(load_bin())
        .args(["--hub", "maestro"])
        .env_remove("CONDUCTOR_LOAD_DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--hub maestro needs --database-url"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(load_bin())
        .args(["--server", "http://127.0.0.1:1", "--agents", "1", "--progress", "false"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot connect to http://127.0.0.1:1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
