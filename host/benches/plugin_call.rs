//! The cost of one plugin call — an agent's status update handed to the example source — with a
//! 1 KiB and a 100 KiB payload, for the three ways a plugin runs: a WebAssembly component, a
//! native library, and the same plugin code called in-process (no ABI at all). Consecutive calls
//! carry different statuses, so the plugin parses, compares and stores the status (`kv`) on every
//! call. See BENCHMARKS.md.
//!
//! ```sh
//! cargo build --profile plugin --target wasm32-wasip2 -p static-works
//! cargo build --release -p static-works
//! cargo bench -p conductor --bench plugin_call
//! ```

mod common;

use std::sync::Arc;

use common::{host_context, measure, plugin_config, runtime, status_event, target_dir};
use conductor::plugins::{PluginFile, PluginSource};
use conductor::routes::Source;
use conductor_plugin_sdk::fakes::FakeHost;
use conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES;
use conductor_plugin_sdk::{Identity, Plugin};
use serde_json::json;
use static_works::StaticWorks;

fn config() -> static_works::Config {
    conductor_plugin_sdk::plugin::parse_config(
        &json!({ "clusters": { "cluster1": { "web": { "manifests": [] } } } }).to_string(),
    )
    .expect("a valid config")
}

fn static_config(kind: &str, file: &std::path::Path) -> conductor::config::PluginConfig {
    let text = format!(
        r#"
[plugins.static]
kind = "{kind}"
file = "{file}"
grants = ["emit", "log", "timer", "kv"]
pool_size = 1
[plugins.static.config.clusters.cluster1.web]
manifests = []
"#,
        file = file.display()
    );
    plugin_config(&text, "static")
}

fn main() {
    let Some(rt) = runtime() else {
        return;
    };
    rt.block_on(async {
        let target = target_dir();
        let component = target.join("wasm32-wasip2/plugin/static_works.wasm");
        let native = target.join("release/libstatic_works.so");
        let host_context = host_context();
        let identity = Identity::anonymous();

        // The work id the plugin serves, from its own list.
        let fake = FakeHost::new();
        let host = fake.host();
        let mut in_process = StaticWorks::init(&host, config()).expect("init");
        let listed = in_process
            .list(
                &host,
                conductor_plugin_sdk::ListOptions {
                    cluster_name: "cluster1".into(),
                    data_type: MANIFEST_BUNDLES.into(),
                },
            )
            .expect("list");
        let work_id = listed[0].extension_str("resourceid").expect("id").to_owned();

        // PLUGIN_FORMS=native (or component) measures one form only, e.g. under a profiler.
        let forms = std::env::var("PLUGIN_FORMS").unwrap_or_else(|_| "component,native".into());
        let mut loaded = Vec::new();
        for (name, kind, file) in [("component", "component", &component), ("native", "native", &native)] {
            if !forms.split(',').any(|f| f == name) {
                continue;
            }
            let config = static_config(kind, file);
            let read = PluginFile::read(config.kind, file, None)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e} (build the plugin first, see the header)"));
            let source = PluginSource::load("static", &config, read, Default::default(), &host_context)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            loaded.push((name, source));
        }

        println!("plugin call: one status update handled by static-works (median of N calls)");
        for (size, iterations) in [(1024usize, 5000usize), (100 * 1024, 1000)] {
            // Two statuses in turn: each call's differs from the one the plugin holds.
            let events = [status_event(&work_id, size, 0), status_event(&work_id, size, 1)];
            let mut turn = 0usize;
            let mut next = || {
                turn += 1;
                events[turn % 2].clone()
            };
            let ours = measure(iterations, || {
                let r = in_process.handle(&host, identity.clone(), next());
                async move { r.expect("in-process call") }
            })
            .await;
            let mut row = vec![("in-process", ours)];
            for (name, source) in &loaded {
                let source: &Arc<PluginSource> = source;
                let t = measure(iterations, || {
                    let e = next();
                    let identity = identity.clone();
                    async move { source.handle(&identity, e).await.expect("plugin call") }
                })
                .await;
                row.push((name, t));
            }
            let line: Vec<String> = row
                .iter()
                .map(|(name, t)| {
                    format!(
                        "{name} {:>9.2} µs ({:.1}×)",
                        t.as_secs_f64() * 1e6,
                        t.as_secs_f64() / ours.as_secs_f64()
                    )
                })
                .collect();
            println!("  {:>6} B payload, {iterations} calls: {}", size, line.join("   "));
        }
    });
}
