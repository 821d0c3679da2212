//! The kube source under load, on the test API server (apiextensions-apiserver + etcd), with one
//! connection per work agent (see BENCHMARKS.md):
//!
//! - delivery latency: a ManifestWork change written → the agent's receipt, p50/p99, with 1,000
//!   works across 100 clusters, beside a bare kube-rs watcher on the same API server receiving
//!   the same change (the floor);
//! - resync: the time for a cluster with 1,000 works to get them all;
//! - status updates written per second: every agent publishes the status of its works at once;
//! - conductor's resident memory with every work in its watch's cache, after the status updates.
//!
//! `cargo build --release -p conductor && scripts/build-plugins.sh && \
//!  cargo bench -p conductor-blackbox-tests --bench kube`

#[path = "../support/kube.rs"]
mod kube_api;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::events::{self, attr_str, integer, string};
use conductor_blackbox_tests::{Conductor, Form, WORKS, env_usize, median, publish, resident_kib, subscribe};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube_api::{KubeApi, kube_config};
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn works_resource() -> kube::api::ApiResource {
    let gvk = GroupVersionKind::gvk("work.open-cluster-management.io", "v1", "ManifestWork");
    kube::api::ApiResource::from_gvk_with_plural(&gvk, "manifestworks")
}

async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn work(cluster: &str, name: &str, replicas: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": cluster},
        "spec": {"workload": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": replicas}}]}},
    }))
    .unwrap()
}

/// When each change (by `<namespace>/<name>@<generation>`) arrived.
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

fn key(namespace: &str, name: &str, generation: i64) -> String {
    format!("{namespace}/{name}@{generation}")
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let clusters = env_usize("CLUSTERS", 100);
    let per_cluster = env_usize("WORKS_PER_CLUSTER", 10);
    let changes = env_usize("CHANGES", 1000);
    let big = env_usize("RESYNC_WORKS", 1000);
    let runs = env_usize("RUNS", 3);
    let pace = Duration::from_millis(env_usize("PACE_MS", 20) as u64);

    let api = tokio::task::spawn_blocking(KubeApi::start).await.unwrap();
    let front = api.front().await;
    let admin = client(&api.kubeconfig).await;
    let ar = works_resource();
    for c in 0..clusters {
        let ns = format!("cluster-{c}");
        let works: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &ar);
        for w in 0..per_cluster {
            works
                .create(&PostParams::default(), &work(&ns, &format!("w{w}"), 1))
                .await
                .unwrap();
        }
    }
    let big_works: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "big", &ar);
    for w in 0..big {
        big_works
            .create(&PostParams::default(), &work("big", &format!("w{w}"), 1))
            .await
            .unwrap();
    }
    println!(
        "kube source: {} works across {clusters} clusters (+{big} in one), one connection per agent",
        clusters * per_cluster
    );

    let (mut p50s, mut p99s, mut bare50s, mut bare99s, mut resyncs, mut rates, mut ceilings, mut residents) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for run in 0..runs {
        let c = Conductor::start_with_config(&format!(
            "{}{}",
            conductor_blackbox_tests::BASE_CONFIG,
            kube_config(&front, Form::Component)
        ))
        .unwrap();
        // The bare watcher (the floor): all works, in this process.
        let bare: Arrivals = Arc::default();
        let bare_task = {
            let bare = Arc::clone(&bare);
            let all: Api<DynamicObject> = Api::all_with(admin.clone(), &ar);
            tokio::spawn(async move {
                let mut stream = std::pin::pin!(
                    watcher(all, watcher::Config::default())
                        .default_backoff()
                        .applied_objects()
                );
                while let Some(Ok(o)) = stream.next().await {
                    let arrived = Instant::now();
                    let k = key(
                        o.metadata.namespace.as_deref().unwrap_or_default(),
                        o.metadata.name.as_deref().unwrap_or_default(),
                        o.metadata.generation.unwrap_or(0),
                    );
                    bare.lock().unwrap().entry(k).or_insert(arrived);
                }
            })
        };
        // One agent per cluster, each on its own connection.
        let seen: Arrivals = Arc::default();
        let mut clients = Vec::new();
        for cl in 0..clusters {
            let mut client = c.client().await.unwrap();
            let mut sub = subscribe(&mut client, &format!("cluster-{cl}"), WORKS).await.unwrap();
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                while let Ok(Some(e)) = sub.stream.message().await {
                    let arrived = Instant::now();
                    let Some(meta) = attr_str(&e, "ce-metadata") else {
                        continue;
                    };
                    let meta: serde_json::Value = serde_json::from_str(meta).unwrap();
                    let version = match events::attr(&e, "ce-resourceversion") {
                        Some(conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr::CeInteger(v)) => {
                            i64::from(*v)
                        }
                        _ => 0,
                    };
                    let k = key(
                        meta["namespace"].as_str().unwrap_or_default(),
                        meta["name"].as_str().unwrap_or_default(),
                        version,
                    );
                    seen.lock().unwrap().entry(k).or_insert(arrived);
                }
            });
            clients.push(client);
        }
        // Settled: the initial list of every work handled (the plugin's queue empty), then a moment.
        tokio::time::sleep(Duration::from_secs(2)).await;
        for _ in 0..300 {
            let (_, metrics) = c.admin_get("/metrics").await.unwrap();
            if metrics.contains("conductor_plugin_event_queue_depth{plugin=\"kube\"} 0") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;

        // Delivery latency: paced spec changes, each a new generation of one work.
        let mut written = Vec::new();
        for i in 0..changes {
            let (cl, w) = (i % clusters, (i / clusters) % per_cluster);
            let ns = format!("cluster-{cl}");
            let works: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &ar);
            let patch = json!({"spec": {"workload": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": format!("w{w}"), "namespace": "default"}, "spec": {"replicas": 100 + run * changes + i}}]}}});
            let sent = Instant::now();
            let after = works
                .patch(&format!("w{w}"), &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
            written.push((key(&ns, &format!("w{w}"), after.metadata.generation.unwrap_or(0)), sent));
            tokio::time::sleep(pace).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let latencies = |arrivals: &Arrivals| {
            let arrivals = arrivals.lock().unwrap();
            let mut l: Vec<Duration> = written
                .iter()
                .map(|(k, sent)| {
                    arrivals
                        .get(k)
                        .map_or(Duration::from_secs(60), |t| t.saturating_duration_since(*sent))
                })
                .collect();
            l.sort();
            l
        };
        let (ours, floor) = (latencies(&seen), latencies(&bare));
        let missing = ours.iter().filter(|d| **d >= Duration::from_secs(60)).count();
        bare_task.abort();

        // Resync of the cluster with many works: the time until the agent holds them all.
        let mut client = c.client().await.unwrap();
        let mut sub = subscribe(&mut client, "big", WORKS).await.unwrap();
        let started = Instant::now();
        publish(&mut client, events::resync_request(WORKS, "big", &[]))
            .await
            .unwrap();
        let mut got = 0;
        while got < big {
            let e = sub.next_event().await.unwrap();
            if e.r#type.ends_with("resync_response") {
                got += 1;
            }
        }
        let resync = started.elapsed();

        // Status updates written per second: each agent reports every work of its cluster.
        let uids: Vec<(String, String)> = {
            let mut all = Vec::new();
            for cl in 0..clusters {
                let ns = format!("cluster-{cl}");
                let works: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &ar);
                for o in works.list(&Default::default()).await.unwrap() {
                    all.push((ns.clone(), o.metadata.uid.clone().unwrap()));
                }
            }
            all
        };
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (cl, mut client) in clients.into_iter().enumerate() {
            let ns = format!("cluster-{cl}");
            let mine: Vec<String> = uids.iter().filter(|(n, _)| *n == ns).map(|(_, u)| u.clone()).collect();
            tasks.push(tokio::spawn(async move {
                for uid in mine {
                    let mut e = events::with_id(
                        events::agent_event(&format!("{WORKS}.status.update_request"), &ns, "kube",
                            Some(json!({"conditions": [{"type": "Applied", "status": "True", "reason": "r", "message": "m",
                                "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": run + 1}], "resourceStatus": []}))),
                        &uid,
                    );
                    e.attributes.insert("ce-resourceversion".into(), integer(1_000_000));
                    e.attributes.insert("ce-sequenceid".into(), string("7000000000000000001"));
                    publish(&mut client, e).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let rate = uids.len() as f64 / started.elapsed().as_secs_f64();

        // The ceiling: the same number of status merge patches straight to the API server from
        // as many concurrent kube-rs clients as the plugin has instances (8).
        let started = Instant::now();
        let mut ceiling_tasks = Vec::new();
        for chunk in uids.chunks(uids.len().div_ceil(8)) {
            let (admin, ar) = (admin.clone(), ar.clone());
            let chunk = chunk.to_vec();
            ceiling_tasks.push(tokio::spawn(async move {
                for (i, (ns, _)) in chunk.iter().enumerate() {
                    let works: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &ar);
                    let name = format!("w{}", i % per_cluster);
                    let patch = json!({"status": {"conditions": [{"type": "Available", "status": "True", "reason": "r",
                        "message": format!("{run}-{i}"), "lastTransitionTime": "2026-11-30T10:00:00Z"}]}});
                    works
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .unwrap();
                }
            }));
        }
        for t in ceiling_tasks {
            t.await.unwrap();
        }
        let ceiling = uids.len() as f64 / started.elapsed().as_secs_f64();
        // What conductor holds with every work in its watch's cache, most of them now with a
        // status: compared between builds, what a cached work costs.
        let resident = resident_kib(c.pid()) as f64 / 1024.0;

        println!(
            "  run {run}: change → agent p50 {:.2} ms p99 {:.2} ms ({missing} missing) | bare watch p50 {:.2} ms p99 {:.2} ms | resync of {big} works {:.0} ms | {} status updates written, {rate:.0}/s (bare patches {ceiling:.0}/s) | resident {resident:.1} MiB",
            ms(percentile(&ours, 0.5)),
            ms(percentile(&ours, 0.99)),
            ms(percentile(&floor, 0.5)),
            ms(percentile(&floor, 0.99)),
            ms(resync),
            uids.len(),
        );
        p50s.push(ms(percentile(&ours, 0.5)));
        p99s.push(ms(percentile(&ours, 0.99)));
        bare50s.push(ms(percentile(&floor, 0.5)));
        bare99s.push(ms(percentile(&floor, 0.99)));
        resyncs.push(ms(resync));
        rates.push(rate);
        ceilings.push(ceiling);
        residents.push(resident);
        drop(c);
    }
    let (p50, p99, b50, b99) = (median(p50s), median(p99s), median(bare50s), median(bare99s));
    println!(
        "median of {runs}: change → agent p50 {p50:.2} ms p99 {p99:.2} ms | bare watch p50 {b50:.2} ms p99 {b99:.2} ms ({:.2}× / {:.2}×) | resync of {big} works {:.0} ms | status updates {:.0}/s (bare patches {:.0}/s) | conductor resident {:.1} MiB with {} works cached",
        p50 / b50,
        p99 / b99,
        median(resyncs),
        median(rates),
        median(ceilings),
        median(residents),
        clusters * per_cluster + big,
    );
}
