//! Subscribe, fan-out, heartbeats and spec resync, against the real binary.

use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::{self, attr, attr_str};
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::{
    CLUSTERS, Conductor, HEARTBEAT, MEMORY_SOURCE, WORKS, assert_no_work_agent_cut_off, publish, scraped, subscribe,
};

#[tokio::test]
async fn subscribe_answers_with_one_subscription_id_header_before_any_event() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut client = c.client().await.unwrap();
    let sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    assert_eq!(sub.subscription_id.len(), 1, "exactly one subscription-id value");
    uuid::Uuid::parse_str(&sub.subscription_id[0]).expect("subscription-id is a UUID");
    let other = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    assert_ne!(other.subscription_id, sub.subscription_id);
}

#[tokio::test]
async fn published_events_reach_exactly_the_subscribers_of_their_cluster_and_type() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut client = c.client().await.unwrap();
    let mut c1_works_a = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let mut c1_works_b = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let mut c2_works = subscribe(&mut client, "cluster2", WORKS).await.unwrap();
    let mut c1_clusters = subscribe(&mut client, "cluster1", CLUSTERS).await.unwrap();

    publish(&mut client, events::create(WORKS, "cluster1", "w-c1", "work-c1"))
        .await
        .unwrap();
    publish(&mut client, events::create(WORKS, "cluster2", "w-c2", "work-c2"))
        .await
        .unwrap();
    publish(&mut client, events::create(CLUSTERS, "cluster1", "mc-c1", "cluster1"))
        .await
        .unwrap();

    // Each stream's first event is its own: nobody got another cluster's or type's event first.
    for sub in [&mut c1_works_a, &mut c1_works_b] {
        let e = sub.next_event().await.unwrap();
        assert_eq!(attr_str(&e, "ce-resourceid"), Some("w-c1"));
        assert_eq!(e.r#type, format!("{WORKS}.spec.create_request"));
        assert_eq!(e.source, "memory");
        assert_eq!(
            attr(&e, "ce-resourceversion"),
            Some(&Attr::CeInteger(1)),
            "integer for manifestbundles"
        );
        assert_eq!(attr_str(&e, "contenttype"), Some("application/json"));
    }
    assert_eq!(
        attr_str(&c2_works.next_event().await.unwrap(), "ce-resourceid"),
        Some("w-c2")
    );
    let e = c1_clusters.next_event().await.unwrap();
    assert_eq!(attr_str(&e, "ce-resourceid"), Some("mc-c1"));
    assert_eq!(attr_str(&e, "ce-resourceversion"), Some("1"), "string for other types");
}

#[tokio::test]
async fn heartbeats_arrive_at_the_configured_interval() {
    let c = Conductor::start(&format!("[broker]\nheartbeat_interval = \"200ms\"\n{MEMORY_SOURCE}")).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let start = Instant::now();
    let mut arrivals = Vec::new();
    for _ in 0..5 {
        let hb = sub.next_raw(Duration::from_secs(5)).await.unwrap().unwrap();
        arrivals.push(start.elapsed());
        assert_eq!(hb.r#type, HEARTBEAT);
        assert_eq!(hb.spec_version, "1.0");
        uuid::Uuid::parse_str(&hb.id).unwrap();
        assert!(hb.source.is_empty() && hb.attributes.is_empty() && hb.data.is_none());
    }
    // The first one after one interval, then one per interval (generous bounds: noisy machines).
    assert!(
        arrivals[0] >= Duration::from_millis(150),
        "first heartbeat too early: {arrivals:?}"
    );
    let total = arrivals[4] - arrivals[0];
    assert!(
        total >= Duration::from_millis(700) && total <= Duration::from_millis(1600),
        "4 intervals of 200ms took {total:?}"
    );
}

#[tokio::test]
async fn heartbeats_can_be_disabled_and_events_still_flow() {
    let c = Conductor::start(&format!(
        "[broker]\nheartbeat_interval = \"100ms\"\nheartbeat_disabled = true\n{MEMORY_SOURCE}"
    ))
    .unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    publish(&mut client, events::create(WORKS, "cluster1", "w1", "work1"))
        .await
        .unwrap();
    let first = sub.next_raw(Duration::from_secs(5)).await.unwrap().unwrap();
    assert_eq!(
        first.r#type,
        format!("{WORKS}.spec.create_request"),
        "no heartbeat came first"
    );
}

/// Creates `id` and returns the spec event subscribers saw for it.
async fn create(
    client: &mut conductor_blackbox_tests::CloudEventServiceClient<tonic::transport::Channel>,
    sub: &mut conductor_blackbox_tests::Sub,
    id: &str,
) {
    publish(client, events::create(WORKS, "cluster1", id, &format!("name-{id}")))
        .await
        .unwrap();
    assert_eq!(attr_str(&sub.next_event().await.unwrap(), "ce-resourceid"), Some(id));
}

#[tokio::test]
async fn resync_answers_follow_the_protocol_case_by_case() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    create(&mut client, &mut sub, "a").await; // version 1
    create(&mut client, &mut sub, "b").await; // version 1, then updated to 2 below
    let update = events::with_id(
        events::agent_event(
            &format!("{WORKS}.spec.update_request"),
            "cluster1",
            "",
            Some(serde_json::json!({"manifests": [{"kind": "ConfigMap"}]})),
        ),
        "b",
    );
    publish(&mut client, update).await.unwrap();
    assert_eq!(
        attr(&sub.next_event().await.unwrap(), "ce-resourceversion"),
        Some(&Attr::CeInteger(2))
    );
    create(&mut client, &mut sub, "d").await;
    publish(
        &mut client,
        events::with_id(
            events::agent_event(&format!("{WORKS}.spec.delete_request"), "cluster1", "", None),
            "d",
        ),
    )
    .await
    .unwrap();
    let deleting = sub.next_event().await.unwrap();
    assert!(attr(&deleting, "ce-deletiontimestamp").is_some());

    // Empty list: everything, as resync responses.
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let e = sub.next_event().await.unwrap();
        assert_eq!(e.r#type, format!("{WORKS}.spec.resync_response"));
        got.push(attr_str(&e, "ce-resourceid").unwrap().to_owned());
    }
    got.sort();
    assert_eq!(got, ["a", "b", "d"]);

    // a: same version → nothing; b: agent older → resent; d: deleting → always sent (no data);
    // gone: only the agent has it → synthetic delete carrying the agent's version.
    publish(
        &mut client,
        events::resync_request(WORKS, "cluster1", &[("a", 1), ("b", 1), ("d", 5), ("gone", 7)]),
    )
    .await
    .unwrap();
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(sub.next_event().await.unwrap());
    }
    let by_id = |id: &str| answers.iter().find(|e| attr_str(e, "ce-resourceid") == Some(id));
    assert!(by_id("a").is_none(), "same version must not be resent");
    assert_eq!(
        attr(by_id("b").unwrap(), "ce-resourceversion"),
        Some(&Attr::CeInteger(2))
    );
    let d = by_id("d").unwrap();
    assert!(attr(d, "ce-deletiontimestamp").is_some() && d.data.is_none());
    let gone = by_id("gone").unwrap();
    assert!(attr(gone, "ce-deletiontimestamp").is_some());
    assert_eq!(
        attr(gone, "ce-resourceversion"),
        Some(&Attr::CeInteger(7)),
        "agent-reported version"
    );
    assert_eq!(attr_str(gone, "ce-clustername"), Some("cluster1"));
    assert!(gone.data.is_none());

    // A deleted resource the hub had sent before: the synthetic delete names it by metadata.
    let finished = events::with_id(
        events::agent_event(
            &format!("{WORKS}.status.update_request"),
            "cluster1",
            "memory",
            Some(serde_json::json!({"conditions": [{"type": "Deleted", "status": "True"}]})),
        ),
        "d",
    );
    publish(&mut client, finished).await.unwrap();
    let final_delete = sub.next_event().await.unwrap();
    assert_eq!(final_delete.r#type, format!("{WORKS}.spec.delete_request"));
    publish(
        &mut client,
        events::resync_request(WORKS, "cluster1", &[("a", 1), ("b", 2), ("d", 6)]),
    )
    .await
    .unwrap();
    let d_gone = sub.next_event().await.unwrap();
    assert_eq!(attr_str(&d_gone, "ce-resourceid"), Some("d"));
    assert_eq!(attr(&d_gone, "ce-resourceversion"), Some(&Attr::CeInteger(6)));
    let meta: serde_json::Value = serde_json::from_str(attr_str(&d_gone, "ce-metadata").expect("metadata")).unwrap();
    assert_eq!(meta["name"], "name-d");
    assert_eq!(d_gone.source, "memory");

    // Nothing else was queued: the next event is a fresh marker.
    create(&mut client, &mut sub, "marker").await;
}

/// A client on a connection of its own with grpc-go's default 64 KiB HTTP/2 windows, so that an
/// agent that does not read fills its flow-control window on its own.
async fn small_window_client(
    c: &Conductor,
) -> conductor_blackbox_tests::CloudEventServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(c.url())
        .unwrap()
        .initial_stream_window_size(Some(65_535))
        .initial_connection_window_size(Some(65_535))
        .connect()
        .await
        .unwrap();
    conductor_blackbox_tests::CloudEventServiceClient::new(channel)
}

/// Issue 46: a burst far above `broker.subscriber_queue_size` for one cluster — 500 works
/// created, updated twice and half of them deleted, 1,750 events, while the agent reads nothing —
/// ends no stream: every work's final state reaches the agent on its open stream, each work's
/// states in order.
#[tokio::test]
async fn a_burst_for_one_cluster_ends_no_stream_and_every_final_state_arrives() {
    const WORKS_IN_BURST: usize = 500;
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut agent_client = small_window_client(&c).await;
    let mut agent = subscribe(&mut agent_client, "cluster1", WORKS).await.unwrap();
    let pad = "x".repeat(1024);
    let id = |i: usize| format!("burst-{i}");
    // Eight publishers, each with its own works in order: every work's changes are sequential,
    // the works' changes interleaved.
    let mut publishers = Vec::new();
    for p in 0..8 {
        let mut client = c.client().await.unwrap();
        let ids: Vec<(usize, String)> = (p..WORKS_IN_BURST).step_by(8).map(|i| (i, id(i))).collect();
        let pad = pad.clone();
        publishers.push(tokio::spawn(async move {
            let spec = |name: &str, version: usize| serde_json::json!({"metadata": {"name": name}, "manifests": [], "pad": pad, "v": version});
            let action = |action: &str| format!("{WORKS}.spec.{action}");
            for (_, id) in &ids {
                let create = events::agent_event(&action("create_request"), "cluster1", "", Some(spec(id, 1)));
                publish(&mut client, events::with_id(create, id)).await.unwrap();
            }
            for version in 2..=3 {
                for (_, id) in &ids {
                    let update = events::agent_event(&action("update_request"), "cluster1", "memory", Some(spec(id, version)));
                    publish(&mut client, events::with_id(update, id)).await.unwrap();
                }
            }
            for (i, id) in &ids {
                if i % 2 == 0 {
                    let delete = events::agent_event(&action("delete_request"), "cluster1", "memory", None);
                    publish(&mut client, events::with_id(delete, id)).await.unwrap();
                }
            }
        }));
    }
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert!(
        scraped(
            &metrics,
            &format!("conductor_subscriber_events_superseded_total{{data_type=\"{WORKS}\"}}")
        ) > 0.0,
        "the burst was folded in the queue:\n{metrics}"
    );

    // The agent reads now: every work's states in order, up to its last, on the open stream.
    let mut last: std::collections::BTreeMap<String, (i64, bool)> = std::collections::BTreeMap::new();
    let done = |last: &std::collections::BTreeMap<String, (i64, bool)>| {
        (0..WORKS_IN_BURST).all(|i| {
            let want = if i % 2 == 0 { (4, true) } else { (3, false) };
            last.get(&id(i)) == Some(&want)
        })
    };
    while !done(&last) {
        let e = agent
            .next_event()
            .await
            .expect("the stream stays open and brings every final state");
        let work = attr_str(&e, "ce-resourceid").unwrap().to_owned();
        let Some(Attr::CeInteger(version)) = attr(&e, "ce-resourceversion") else {
            panic!("no integer version: {e:?}")
        };
        let deleting = attr(&e, "ce-deletiontimestamp").is_some();
        if let Some((before, _)) = last.get(&work) {
            assert!(
                i64::from(*version) > *before,
                "{work}: version {version} after {before}"
            );
        }
        if !deleting {
            let data = events::data_json(&e);
            assert_eq!(data["v"], i64::from(*version), "{work}: the data of its version");
        }
        last.insert(work, (i64::from(*version), deleting));
    }
    assert_eq!(last.len(), WORKS_IN_BURST, "only the burst's works");

    // Still the same stream: a new work arrives on it, and nobody was cut off.
    let mut client = c.client().await.unwrap();
    publish(&mut client, events::create(WORKS, "cluster1", "after", "after"))
        .await
        .unwrap();
    let after = agent.next_event().await.unwrap();
    assert_eq!(attr_str(&after, "ce-resourceid"), Some("after"));
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert_no_work_agent_cut_off(&metrics);
    assert!(!c.logs().contains("stopped reading"), "{}", c.logs());
}

/// Issue 46: an agent that stops reading is ended once it has taken nothing for
/// `broker.subscriber_stall_timeout`, with `Unavailable`, a warning naming its cluster and
/// `conductor_subscribers_cut_off_total`, while another agent on another connection keeps
/// receiving without delay.
#[tokio::test]
async fn a_subscriber_that_stops_reading_does_not_delay_the_others() {
    let c = Conductor::start(&format!(
        "[broker]\nsubscriber_queue_size = 8\nsubscriber_stall_timeout = \"1s\"\n{MEMORY_SOURCE}"
    ))
    .unwrap();
    let mut client = c.client().await.unwrap();
    let mut stuck_client = small_window_client(&c).await;
    let mut stuck = subscribe(&mut stuck_client, "cluster1", WORKS).await.unwrap();
    let mut healthy = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    let big = "x".repeat(4096);
    let started = Instant::now();
    for i in 0..400 {
        let mut e = events::create(WORKS, "cluster1", &format!("w{i}"), "w");
        e.data = Some(conductor_blackbox_tests::proto::cloud_event::Data::BinaryData(
            serde_json::to_vec(&serde_json::json!({"manifests": [], "pad": big})).unwrap(),
        ));
        publish(&mut client, e).await.unwrap();
        let got = healthy.next_event().await.unwrap();
        assert_eq!(attr_str(&got, "ce-resourceid"), Some(format!("w{i}").as_str()));
    }
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(30), "400 publishes took {elapsed:?}");
    // The stuck one is ended for not reading, and said so, naming its cluster.
    let warning = c.wait_for_log("subscriber stopped reading").await;
    assert!(warning.contains("\"cluster\":\"cluster1\""), "{warning}");
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert_eq!(
        scraped(
            &metrics,
            &format!("conductor_subscribers_cut_off_total{{data_type=\"{WORKS}\"}}")
        ),
        1.0,
        "{metrics}"
    );
    // The healthy one keeps receiving.
    publish(&mut client, events::create(WORKS, "cluster1", "after", "after"))
        .await
        .unwrap();
    assert_eq!(
        attr_str(&healthy.next_event().await.unwrap(), "ce-resourceid"),
        Some("after")
    );
    // Once the stuck one reads, it gets what its connection held, then the error.
    let mut received = 0;
    let status = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stuck.stream.message().await {
                Ok(Some(_)) => received += 1,
                Ok(None) => panic!("stream ended cleanly; expected the stall error"),
                Err(status) => break status,
            }
        }
    })
    .await
    .expect("the stuck stream ends with an error once read");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("took no event for 1s"), "{status:?}");
    assert!(
        received < 400,
        "the stuck subscriber was cut off before receiving everything"
    );
}

/// The deletion a real sdk-go work agent plays (`docs/protocol.md` §8.6): the hub deletes the
/// work, the agent cleans up and reports `Deleted`, the source removes the work and emits one
/// more delete, the agent — not knowing the work any more — re-adds it as deleting and reports
/// `Deleted` again. That last report must be answered OK, or the agent retries it forever and
/// keeps a deleting work.
#[tokio::test]
async fn a_real_agents_deletion_finishes() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let mut client = c.client().await.unwrap();
    let mut sub = subscribe(&mut client, "cluster1", WORKS).await.unwrap();
    create(&mut client, &mut sub, "w1").await;
    let deleted = || {
        let mut e = events::with_id(
            events::agent_event(
                &format!("{WORKS}.status.update_request"),
                "cluster1",
                "memory",
                Some(serde_json::json!({"conditions": [
                    {"type": "Deleted", "status": "True", "reason": "ManifestsDeleted"}
                ]})),
            ),
            "w1",
        );
        e.attributes
            .insert("ce-sequenceid".into(), events::string("7000000000000000000"));
        e
    };

    // The hub deletes the work: the agent gets it with a deletion timestamp and no data.
    let delete = events::with_id(
        events::agent_event(&format!("{WORKS}.spec.delete_request"), "cluster1", "", None),
        "w1",
    );
    publish(&mut client, delete).await.unwrap();
    let deleting = sub.next_event().await.unwrap();
    assert!(attr(&deleting, "ce-deletiontimestamp").is_some());
    assert!(deleting.data.is_none());

    // The agent finished: Deleted=True. The source lets the work go and emits the final delete.
    publish(&mut client, deleted()).await.unwrap();
    let last = sub.next_event().await.unwrap();
    assert_eq!(last.r#type, format!("{WORKS}.spec.delete_request"));
    assert_eq!(attr_str(&last, "ce-resourceid"), Some("w1"));

    // The agent re-added the unknown work as deleting and reports Deleted again: OK, every time
    // it retries, and nothing more is sent.
    for _ in 0..3 {
        publish(&mut client, deleted()).await.unwrap();
    }
    while let Ok(Some(e)) = sub.next_raw(Duration::from_millis(500)).await {
        assert_eq!(e.r#type, HEARTBEAT, "nothing but heartbeats after the deletion");
    }
    // A resync from the agent holding nothing: nothing to send.
    publish(&mut client, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    assert!(
        sub.next_raw(Duration::from_millis(500)).await.is_err(),
        "no resource left"
    );
}

/// Issue 46, point 3, on the memory source: a work spec the agent dropped (no status) comes again
/// on its open stream after `broker.undelivered_after`, once, the same event, and counts until
/// the agent answers; the work it answered at once is never sent again.
#[tokio::test(flavor = "multi_thread")]
async fn a_work_spec_the_agent_dropped_is_sent_again_once() {
    const AFTER: Duration = Duration::from_secs(2);
    let c = Conductor::start(&format!("[broker]\nundelivered_after = \"2s\"\n{MEMORY_SOURCE}")).unwrap();
    let series = "conductor_undelivered_resources{plugin=\"memory\"}";
    // The agent on its own connection; the works created through another.
    let mut agent = c.client().await.unwrap();
    let mut sub = subscribe(&mut agent, "cluster1", WORKS).await.unwrap();
    publish(&mut agent, events::resync_request(WORKS, "cluster1", &[]))
        .await
        .unwrap();
    let mut hub = c.client().await.unwrap();
    create(&mut hub, &mut sub, "answered").await;
    let status = |id: &str| {
        let mut e = events::work_status("cluster1", id, 1, events::condition("Applied"));
        e.attributes
            .insert("ce-originalsource".into(), events::string("memory"));
        e
    };
    publish(&mut agent, status("answered")).await.unwrap();
    publish(&mut hub, events::create(WORKS, "cluster1", "lost", "name-lost"))
        .await
        .unwrap();
    let first = sub.next_event().await.unwrap();
    assert_eq!(attr_str(&first, "ce-resourceid"), Some("lost"));
    let dropped_at = Instant::now();

    let again = sub.next_event().await.unwrap();
    let waited = dropped_at.elapsed();
    assert_eq!(again, first, "the same event again");
    assert!(
        waited >= AFTER - Duration::from_millis(500),
        "sent again after {waited:?}"
    );
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert_eq!(scraped(&metrics, series), 1.0, "{metrics}");
    let (code, listed) = c.admin_get("/inspect/undelivered").await.unwrap();
    assert_eq!(code, 200);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["resource_id"], "lost", "{listed:#}");
    assert_eq!(listed[0]["plugin"], "memory", "{listed:#}");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed:#}");

    // No third copy, nothing of the answered work, over three more deadlines.
    let quiet_until = Instant::now() + AFTER * 3;
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        match tokio::time::timeout(left, sub.stream.message()).await {
            Err(_) => break,
            Ok(Ok(Some(e))) if e.r#type == HEARTBEAT => {}
            Ok(other) => panic!("sent again more than once: {other:?}"),
        }
    }
    publish(&mut agent, status("lost")).await.unwrap();
    let metrics = c.admin_get("/metrics").await.unwrap().1;
    assert_eq!(scraped(&metrics, series), 0.0, "{metrics}");
    assert_eq!(c.admin_get("/inspect/undelivered").await.unwrap().1.trim(), "[]");
}
