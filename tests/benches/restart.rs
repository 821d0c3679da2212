//! How long a replica takes to become ready (`/readyz` answers 200) after it starts: the hub
//! configuration (the kube, maestro and consumer-controller components on the test API server and
//! a PostgreSQL with Maestro's schema), and a Python and a JavaScript plugin alone. Each first with
//! an empty compile cache (every component compiled: a new pod), then `RUNS` times with the cache
//! it filled (a restart). The floor is the same start with no component at all (the built-in
//! memory source), measured in the same run. See BENCHMARKS.md.
//!
//! `cargo build --release -p conductor && scripts/build-plugins.sh && \
//!  scripts/build-polyglot-plugins.sh && cargo bench -p conductor-blackbox-tests --bench restart`

#[path = "../support/kube.rs"]
mod kube_api;
#[path = "../support/maestro.rs"]
mod maestro;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use conductor_blackbox_tests::{
    Form, MEMORY_SOURCE, conductor_bin, env_usize, free_port, http_get, median, plugin_artifact, polyglot_artifact,
};

/// The development server's tables, with the admin endpoint on `admin`.
fn base(admin: u16, cache: &Path) -> String {
    format!(
        r#"compile_cache = "{cache}"
[server]
listen = "127.0.0.1:0"
plaintext = true
[auth]
authenticators = []
authorization = "allow-all"
[admin]
listen = "127.0.0.1:{admin}"
[log]
format = "json"
level = "warn"
"#,
        cache = cache.display()
    )
}

/// The hub configuration's three plugins (examples/config/hub.toml), reaching the test API server
/// through `kubeconfig` and Maestro's database at `url`.
fn hub(kubeconfig: &Path, url: &str) -> String {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/config/hub.toml")).unwrap();
    let from = text.find("[plugins.kube]").unwrap();
    let mut plugins = text[from..].to_owned();
    for (dist, krate) in [
        ("kube.wasm", "kube-plugin"),
        ("maestro.wasm", "maestro-plugin"),
        ("consumer-controller.wasm", "consumer-controller-plugin"),
    ] {
        plugins = plugins.replace(
            &format!("\"../../plugins/dist/{dist}\""),
            &format!("\"{}\"", plugin_artifact(krate, Form::Component).display()),
        );
    }
    format!(
        "[kubernetes]\nkubeconfig = \"{}\"\n[databases.maestro]\nurl = \"{url}\"\npool_size = 4\n{plugins}\n",
        kubeconfig.display()
    )
}

/// One plugin serving works, configured as its example is.
fn polyglot(stem: &str) -> String {
    format!(
        r#"
[plugins.works]
kind = "component"
file = "{}"
grants = ["emit", "log", "timer", "kv"]
limits = {{ memory = "64MiB" }}
[plugins.works.config.clusters.cluster1.web]
manifests = []
"#,
        polyglot_artifact(stem).display()
    )
}

/// Starts conductor with `config` and returns the time until `/readyz` answers 200.
async fn time_to_ready(config: &str, admin: u16) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conductor.toml");
    std::fs::write(&path, config).unwrap();
    let started = Instant::now();
    let mut child: Child = Command::new(conductor_bin())
        .args(["serve", "--config"])
        .arg(&path)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{admin}");
    let ready = loop {
        if let Ok((200, _)) = http_get(&addr, "/readyz").await {
            break started.elapsed();
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("conductor exited with {status} before it was ready");
        }
        assert!(started.elapsed() < Duration::from_secs(120), "not ready within 120 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    ready
}

/// The first start with an empty cache, then the median of `runs` starts with the cache it filled.
async fn measure(name: &str, tables: &str, runs: usize) -> (f64, f64) {
    let cache = tempfile::tempdir().unwrap();
    let admin = free_port();
    let config = format!("{}{tables}", base(admin, cache.path()));
    let cold = time_to_ready(&config, admin).await.as_secs_f64();
    let mut warm = Vec::new();
    for _ in 0..runs {
        warm.push(time_to_ready(&config, admin).await.as_secs_f64());
    }
    let warm_median = median(warm.clone());
    println!("{name}: ready after {cold:.3} s compiling, then {warm_median:.3} s from the cache (runs {warm:.3?})");
    (cold, warm_median)
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs = env_usize("RUNS", 3);
    let floor = measure("floor: the memory source alone", MEMORY_SOURCE, runs).await;

    let api = tokio::task::spawn_blocking(kube_api::KubeApi::start).await.unwrap();
    let front = api.front().await;
    let db = maestro::MaestroDb::start().await;
    let hub = measure(
        "hub configuration (kube, maestro, consumer-controller)",
        &hub(&front.kubeconfig, &db.url()),
        runs,
    )
    .await;
    let python = measure("python-works", &polyglot("python_works"), runs).await;
    let js = measure("js-works", &polyglot("js_works"), runs).await;
    println!(
        "\nready after start, seconds (compiling / from the cache): floor {:.3} / {:.3}; hub {:.3} / {:.3}; \
         Python {:.3} / {:.3}; JavaScript {:.3} / {:.3}",
        floor.0, floor.1, hub.0, hub.1, python.0, python.1, js.0, js.1
    );
}
