//! What the plugin benches share: where the build put things, a plugin's configuration, a host
//! context with no backend, the status update they time, and the timing itself.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use conductor::broker::Fanout;
use conductor::config::{Config, PluginConfig};
use conductor::plugins::HostContext;
use conductor::telemetry::Metrics;
use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES;
use serde_json::json;

/// The bench's runtime, or none when cargo only lists benches (`--list`).
pub fn runtime() -> Option<tokio::runtime::Runtime> {
    if std::env::args().any(|a| a == "--list") {
        return None;
    }
    Some(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime"),
    )
}

/// The target directory: target/release/deps/<bench>-… → target/.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    exe.ancestors().nth(3).expect("target dir").to_owned()
}

/// The plugin `name` of a configuration holding `[plugins.<name>]` tables.
pub fn plugin_config(toml: &str, name: &str) -> PluginConfig {
    Config::parse(toml)
        .expect("valid config")
        .plugins
        .remove(name)
        .expect("the plugin")
}

/// What a plugin is loaded with: a fan-out with no subscriber, no database, no API server.
pub fn host_context() -> HostContext {
    HostContext {
        sink: Fanout::new(Metrics::new(), 16, 0, std::time::Duration::MAX),
        backends: conductor::plugins::Backends::none(),
        metrics: Metrics::new(),
        mode: conductor::plugins::Mode::Serve,
    }
}

/// A status update for the served work `work_id` in cluster1, with `size` bytes of JSON data.
/// A status update of about `size` bytes for `work_id`; `variant` changes its content (so a
/// plugin that skips unchanged statuses stores each variant).
pub fn status_event(work_id: &str, size: usize, variant: u64) -> CloudEvent {
    let mut e = CloudEvent::new(
        "bench",
        "cluster1-work-agent",
        format!("{MANIFEST_BUNDLES}.status.update_request"),
    );
    e.set_extension("clustername", "cluster1");
    e.set_extension("resourceid", work_id);
    let pad = "x".repeat(size.saturating_sub(40));
    e.data = Some(serde_json::to_vec(&json!({ "conditions": [], "variant": variant, "pad": pad })).expect("json"));
    e
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median time of `iterations` calls, after a warm-up of a tenth as many.
pub async fn measure<F: AsyncFnMut()>(iterations: usize, mut call: F) -> Duration {
    for _ in 0..iterations / 10 {
        call().await;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        call().await;
        samples.push(started.elapsed());
    }
    median(samples)
}
