//! What a component costs by the language it is written in: the same source plugin as
//! static-works (Rust, wit-bindgen), python-works (Python, componentize-py) and js-works
//! (JavaScript, componentize-js), loaded through the host's own `PluginFile` and `PluginSource`.
//! See BENCHMARKS.md.
//!
//! ```sh
//! cargo build --profile plugin --target wasm32-wasip2 -p static-works
//! scripts/build-polyglot-plugins.sh
//! cargo bench -p conductor --bench polyglot      # POLYGLOT_PLUGINS=python-works to pick
//! ```
//!
//! For each plugin: the file's size; loading it (compiling the component and running `describe`,
//! what startup and a reload that swaps the file cost), on a fresh copy so no compilation is
//! cached; a new instance (instantiate, `check-config`, `init`: what the pool pays to grow or to
//! replace a trapped instance); the smallest `limits.memory` it loads and serves with (bisected in
//! MiB); the resident memory an instance adds to the process (ten instances loaded, each having
//! answered a resync and a status update); and the median latency of a resync (`list`) and of a
//! status update (`handle`, 1 KiB and 100 KiB) through the host, as the broker calls them; and
//! whether an instance holds on to memory over calls (3,000 status updates of 100 KiB under a
//! 64 MiB limit: how many fail because the instance ran out of memory; POLYGLOT_SOAK_CALLS,
//! POLYGLOT_SOAK_KIB and POLYGLOT_SOAK_MIB change the run).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{host_context, measure, median, plugin_config, runtime, status_event, target_dir};
use conductor::config::{PluginConfig, PluginKind};
use conductor::plugins::{PluginFile, PluginSource};
use conductor::routes::Source;
use conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES;
use conductor_plugin_sdk::{Identity, ListOptions};

fn works_config(file: &Path, memory_mib: usize) -> PluginConfig {
    let text = format!(
        r#"
[plugins.works]
kind = "component"
file = "{file}"
grants = ["emit", "log", "timer", "kv"]
pool_size = 1
limits = {{ memory = "{memory_mib}MiB", call_timeout = "30s" }}
[plugins.works.config.clusters.cluster1.web]
generation = 3
manifests = [{{ apiVersion = "v1", kind = "ConfigMap", metadata = {{ name = "web", namespace = "default" }}, data = {{ greeting = "hello" }} }}]
"#,
        file = file.display()
    );
    plugin_config(&text, "works")
}

fn resync() -> ListOptions {
    ListOptions {
        cluster_name: "cluster1".into(),
        data_type: MANIFEST_BUNDLES.into(),
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// Loads the plugin with a pool of one and the memory limit given; it has answered a resync and
/// a status update. Returns the source and the id of the work it serves.
async fn load(file: &Path, memory_mib: usize) -> Result<(Arc<PluginSource>, String), String> {
    load_in(file, memory_mib, &host_context()).await
}

async fn load_in(
    file: &Path,
    memory_mib: usize,
    context: &conductor::plugins::HostContext,
) -> Result<(Arc<PluginSource>, String), String> {
    let config = works_config(file, memory_mib);
    let read = PluginFile::read(PluginKind::Component, file, None)
        .await
        .map_err(|e| e.to_string())?;
    let source = PluginSource::load("works", &config, read, Default::default(), context)
        .await
        .map_err(|e| e.to_string())?;
    let listed = source.list(&resync()).await.map_err(|e| e.to_string())?;
    let id = listed
        .first()
        .and_then(|e| e.extension_str("resourceid").ok())
        .ok_or("the resync answered no work")?
        .to_owned();
    source
        .handle(&Identity::anonymous(), status_event(&id, 1024, 0))
        .await
        .map_err(|e| e.to_string())?;
    Ok((source, id))
}

async fn bench(name: &str, file: &Path, runs: usize) {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let size = std::fs::metadata(file)
        .unwrap_or_else(|e| panic!("{}: {e} (build it first, see the header)", file.display()))
        .len();

    // Loading: compile + describe, on a copy nobody compiled yet (the host caches by the
    // bytes' digest: each copy ends with a custom section of its own).
    let original = std::fs::read(file).expect("read the component");
    let mut loads = Vec::new();
    for run in 0..runs {
        let copy = scratch.path().join(format!("load-{run}.wasm"));
        let name = format!("run{:04}", run % 10_000);
        let mut bytes = original.clone();
        bytes.extend([0x00, 1 + name.len() as u8, name.len() as u8]);
        bytes.extend(name.as_bytes());
        std::fs::write(&copy, bytes).expect("copy the component");
        let started = Instant::now();
        PluginFile::read(PluginKind::Component, &copy, None)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        loads.push(started.elapsed());
    }
    // From here on the first copy is compiled (cached by its digest).
    let file = scratch.path().join("load-0.wasm");

    // A new instance: the whole `PluginSource::load` but compilation (cached) — describe,
    // check-config, instantiate, init.
    let mut instances = Vec::new();
    for _ in 0..5 {
        let config = works_config(&file, 256);
        let read = PluginFile::read(PluginKind::Component, &file, None)
            .await
            .expect("cached");
        let started = Instant::now();
        let source = PluginSource::load("works", &config, read, Default::default(), &host_context())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        instances.push(started.elapsed());
        source.stop().await;
    }

    // The smallest memory limit it loads and serves with.
    let (mut fails, mut works) = (0usize, 1024usize);
    if load(&file, works).await.is_err() {
        panic!("{name}: does not load with 1 GiB");
    }
    while works - fails > 1 {
        let mid = (fails + works) / 2;
        match load(&file, mid).await {
            Ok((source, _)) => {
                source.stop().await;
                works = mid;
            }
            Err(_) => fails = mid,
        }
    }

    // Resident memory per instance.
    let before = rss();
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(load(&file, 256).await.unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    let per_instance = (rss().saturating_sub(before)) as f64 / 10.0 / (1 << 20) as f64;
    for (source, _) in held.drain(..) {
        source.stop().await;
    }

    // Call latency.
    let (source, id) = load(&file, 256).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    let identity = Identity::anonymous();
    let list = measure(2000, async || {
        source.list(&resync()).await.expect("resync");
    })
    .await;
    let mut handle = Vec::new();
    for (size, iterations) in [(1024usize, 2000usize), (100 * 1024, 500)] {
        // Two statuses in turn, so the plugin stores the status on every call.
        let events = [status_event(&id, size, 0), status_event(&id, size, 1)];
        let (mut failed, mut turn) = (0, 0usize);
        let median = measure(iterations, async || {
            turn += 1;
            // A call that fails (an instance out of memory, replaced) is timed like the others.
            failed += usize::from(source.handle(&identity, events[turn % 2].clone()).await.is_err());
        })
        .await;
        handle.push(if failed == 0 {
            us(median)
        } else {
            format!("{} ({failed} failed)", us(median))
        });
    }
    source.stop().await;

    // Memory held over calls: POLYGLOT_SOAK_CALLS status updates of POLYGLOT_SOAK_KIB under a
    // POLYGLOT_SOAK_MIB limit (3,000 of 100 KiB under 64 MiB); a call that runs out of memory
    // traps, fails, and the pool replaces the instance.
    let (soak_calls, soak_kib, soak_mib) = (
        env_usize("POLYGLOT_SOAK_CALLS", 3000),
        env_usize("POLYGLOT_SOAK_KIB", 100),
        env_usize("POLYGLOT_SOAK_MIB", 64),
    );
    let context = host_context();
    let (source, id) = load_in(&file, soak_mib, &context)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let events = [
        status_event(&id, soak_kib * 1024, 0),
        status_event(&id, soak_kib * 1024, 1),
    ];
    let mut failed = Vec::new();
    let (mut resident_at_1000, started) = (0, Instant::now());
    for call in 0..soak_calls {
        if source.handle(&identity, events[call % 2].clone()).await.is_err() {
            failed.push(call);
        }
        if call + 1 == 1000.min(soak_calls) {
            resident_at_1000 = resident_kib();
        }
    }
    let (resident_end, took) = (resident_kib(), started.elapsed());
    source.stop().await;
    let recycled: f64 = context
        .metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("conductor_plugin_instances_recycled_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let held = format!(
        "{recycled} instances recycled; resident {:.1} MiB after 1,000 calls, {:.1} MiB at the end; {:.0} µs per call",
        resident_at_1000 as f64 / 1024.0,
        resident_end as f64 / 1024.0,
        took.as_micros() as f64 / soak_calls as f64
    );
    let soak = match failed.first() {
        None => format!("{soak_calls} × {soak_kib} KiB at {soak_mib} MiB: none failed; {held}"),
        Some(first) => format!(
            "{soak_calls} × {soak_kib} KiB at {soak_mib} MiB: {} failed (out of memory; the first was call {first}); {held}",
            failed.len()
        ),
    };

    let loads_text: Vec<String> = loads.iter().map(|d| ms(*d)).collect();
    println!(
        "{name}: file {:.2} MB | load (compile + describe) {} (median {}) | new instance {} | \
         smallest limits.memory {works} MiB | resident per instance {per_instance:.1} MiB | \
         resync {} | status 1 KiB {} | status 100 KiB {} | {soak}",
        size as f64 / 1e6,
        loads_text.join(" / "),
        ms(median(loads)),
        ms(median(instances)),
        us(list),
        handle[0],
        handle[1],
    );
}

/// This process's resident memory, in KiB.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let Some(rt) = runtime() else {
        return;
    };
    let target = target_dir();
    let runs = env_usize("POLYGLOT_RUNS", 3);
    let pick = std::env::var("POLYGLOT_PLUGINS").unwrap_or_else(|_| "static-works,python-works,js-works".into());
    rt.block_on(async {
        for (name, file) in [
            ("static-works", target.join("wasm32-wasip2/plugin/static_works.wasm")),
            ("python-works", target.join("polyglot/python_works.wasm")),
            ("js-works", target.join("polyglot/js_works.wasm")),
        ] {
            if pick.split(',').any(|p| p == name) {
                bench(name, &file, runs).await;
            }
        }
    });
}
