//! The black-box test harness: starts the real `conductor` binary with a configuration, finds the
//! addresses it bound, and talks to it with a tonic client, raw HTTP and the Python grpcio agent.

pub mod builds;
pub mod certs;
pub mod events;
pub mod latency;

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub mod proto {
    tonic::include_proto!("io.cloudevents.v1");
}

pub use proto::cloud_event_service_client::CloudEventServiceClient;

pub const WORKS: &str = "io.open-cluster-management.works.v1alpha1.manifestbundles";
pub const CLUSTERS: &str = "cluster.open-cluster-management.io.v1.managedclusters";
pub const LEASES: &str = "coordination.k8s.io.v1.leases";
pub const HEARTBEAT: &str = "io.open-cluster-management.cloudevents.heartbeat";

/// How long conductor may take from start to serving gRPC before a test gives up on it.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// The `conductor` binary built beside the test executables (or `$CONDUCTOR_BIN`).
pub fn conductor_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CONDUCTOR_BIN") {
        return p.into();
    }
    built_bin("conductor")
}

/// The `conductor-load` binary built beside the test executables.
pub fn load_bin() -> PathBuf {
    built_bin("conductor-load")
}

fn built_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join(name))
        .expect("target directory layout");
    assert!(
        bin.exists(),
        "{} is missing: build it first (cargo build --workspace)",
        bin.display()
    );
    bin
}

/// A benchmark's baseline server: this executable run again with `--raw-server`, which prints the
/// address it listens on as its first line. Returns the child and that address.
pub fn spawn_raw_server() -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().expect("own executable"))
        .arg("--raw-server")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the baseline server starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped stdout");
    BufReader::new(stdout).read_line(&mut line).expect("its address");
    (child, line.trim().to_owned())
}

/// A benchmark's runtime, unless this run is its baseline server (`--raw-server`: runs
/// `raw_server` until killed) or a listing (`--list`, as `cargo bench -- --list` asks): then
/// `None`, and the benchmark returns.
pub fn bench_runtime<F: std::future::Future<Output = ()>>(raw_server: fn() -> F) -> Option<tokio::runtime::Runtime> {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if args.iter().any(|a| a == "--raw-server") {
        rt.block_on(raw_server());
        return None;
    }
    (!args.iter().any(|a| a == "--list")).then_some(rt)
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
///
/// The port lies below the kernel's ephemeral range, so no outgoing connection on the machine can
/// take it as its local port: a test that stops a server and starts it again on the same port
/// (etcd, the API server, PostgreSQL) finds the port still free.
pub fn free_port() -> u16 {
    const LOWEST: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let span = ephemeral.saturating_sub(LOWEST);
    // Test processes running side by side start at different places in the span.
    let start = std::process::id().wrapping_mul(7_919);
    for _ in 0..span {
        let port = LOWEST + start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(port).expect("ports below the ephemeral range fit in u16");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// A benchmark parameter from the environment, or its default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The median of a benchmark's runs.
pub fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// The form a plugin is loaded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Component,
    Native,
}

impl Form {
    pub const BOTH: [Form; 2] = [Form::Component, Form::Native];

    /// The `kind` in `conductor.toml`.
    pub fn kind(self) -> &'static str {
        match self {
            Form::Component => "component",
            Form::Native => "native",
        }
    }
}

/// A plugin built by the test command: `target/wasm32-wasip2/plugin/<crate>.wasm` for a
/// component, `target/debug/lib<crate>.so` for a native library.
pub fn plugin_artifact(crate_name: &str, form: Form) -> PathBuf {
    let target = conductor_bin()
        .parent()
        .and_then(|p| p.parent())
        .expect("target directory")
        .to_owned();
    let stem = crate_name.replace('-', "_");
    let path = match form {
        Form::Component => target.join("wasm32-wasip2/plugin").join(format!("{stem}.wasm")),
        Form::Native => target.join("debug").join(format!("lib{stem}.so")),
    };
    assert!(
        path.exists(),
        "{} is missing: build the plugins first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The form a bench loads its plugin in: the component, or with `PLUGIN_FORM=native` the native
/// library.
pub fn bench_form() -> Form {
    match std::env::var("PLUGIN_FORM").as_deref() {
        Ok("native") => Form::Native,
        _ => Form::Component,
    }
}

/// `entry`, one plugin's configuration loading `crate_name`'s component, in the form a bench
/// measures ([`bench_form`]): as it is, or loading the native library of the release build beside
/// the conductor binary.
pub fn in_bench_form(entry: &str, crate_name: &str) -> String {
    if bench_form() == Form::Component {
        return entry.to_owned();
    }
    let component = plugin_artifact(crate_name, Form::Component);
    let native = conductor_bin().with_file_name(format!("lib{}.so", crate_name.replace('-', "_")));
    assert!(
        native.exists(),
        "{} is missing: cargo build --release -p {crate_name} --lib",
        native.display()
    );
    let kind = |form: Form| format!("kind = \"{}\"", form.kind());
    entry
        .replace(&*component.to_string_lossy(), &native.to_string_lossy())
        .replace(&kind(Form::Component), &kind(Form::Native))
}

/// A component built by `scripts/build-polyglot-plugins.sh`: `target/polyglot/<stem>.wasm`
/// (`python_works`, `js_works`, and their `_pg` builds).
pub fn polyglot_artifact(stem: &str) -> PathBuf {
    let path = conductor_bin()
        .parent()
        .and_then(|p| p.parent())
        .expect("target directory")
        .join("polyglot")
        .join(format!("{stem}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: build it first with scripts/build-polyglot-plugins.sh (scripts/test.sh does)",
        path.display()
    );
    path
}

/// A running conductor. Killed when dropped.
pub struct Conductor {
    child: Child,
    pub grpc_addr: String,
    pub admin_addr: Option<String>,
    logs: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

/// The base of every test configuration: loopback, ephemeral ports, plaintext, every caller
/// anonymous and allowed (the security tests build their own), JSON logs.
pub const BASE_CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"
plaintext = true
[auth]
authenticators = []
authorization = "allow-all"
[admin]
listen = "127.0.0.1:0"
[log]
format = "json"
level = "info"
# Tests reload with SIGHUP or POST /reload when they mean to; tests/reload.rs watches.
[reload]
watch = false
"#;

/// A memory source named `memory` serving works, clusters and leases.
/// The repository's own `conductor.toml` (the README's default run), made runnable by a test:
/// its embedded database in `data_dir`, its relative paths absolute, its listeners on free
/// ports, its logs in JSON. The folder holding `data_dir` must be readable by everyone (the
/// database may run as `postgres`).
pub fn default_run_config(data_dir: &Path) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let default = std::fs::read_to_string(repo.join("conductor.toml")).expect("the repository's conductor.toml");
    let rewritten = default
        .replace("/var/tmp/conductor/maestro-pg", &data_dir.to_string_lossy())
        .replace("\"plugins/", &format!("\"{}/plugins/", repo.display()))
        .replace("\"examples/", &format!("\"{}/examples/", repo.display()))
        .replace("127.0.0.1:8090", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0")
        .replace("format = \"human\"", "format = \"json\"");
    assert!(
        !rewritten.contains(":8090") && !rewritten.contains(":9090"),
        "conductor.toml listens somewhere this rewrite does not move to a free port"
    );
    rewritten
}

pub const MEMORY_SOURCE: &str = r#"
[plugins.memory]
kind = "memory"
config = { data_types = [
  "io.open-cluster-management.works.v1alpha1.manifestbundles",
  "cluster.open-cluster-management.io.v1.managedclusters",
  "coordination.k8s.io.v1.leases",
] }
[routes]
memory = "memory"
"#;

impl Conductor {
    /// Starts conductor with `BASE_CONFIG` followed by `extra` (later tables may not repeat
    /// earlier ones, so `extra` holds only the tables the test adds).
    pub fn start(extra: &str) -> Result<Self> {
        Self::start_with_config(&format!("{BASE_CONFIG}\n{extra}"))
    }

    /// Starts conductor with exactly this configuration and waits until it serves gRPC.
    pub fn start_with_config(config: &str) -> Result<Self> {
        Self::start_command(Command::new(conductor_bin()), config)
    }

    /// Starts `command` (a conductor binary, or a wrapper that runs one) with `serve --config
    /// <file holding config>` appended, and waits until it serves gRPC. The configuration's
    /// folder can be read by everyone, so the command may run as another user.
    pub fn start_command(command: Command, config: &str) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let path = dir.path().join("conductor.toml");
        std::fs::write(&path, config)?;
        Self::spawn(command, &path, dir)
    }

    /// Starts conductor with the configuration file at `path` as it is (a symlink, say), and
    /// waits until it serves gRPC.
    pub fn start_file(path: &Path) -> Result<Self> {
        Self::spawn(Command::new(conductor_bin()), path, tempfile::tempdir()?)
    }

    fn spawn(mut command: Command, path: &Path, dir: tempfile::TempDir) -> Result<Self> {
        command.arg("serve").arg("--config").arg(path);
        Self::launch(command, dir)
    }

    /// Starts `command` as it is (its own arguments: `conductor grpc …`, say), and waits until it
    /// serves gRPC.
    pub fn start_raw(command: Command) -> Result<Self> {
        Self::launch(command, tempfile::tempdir()?)
    }

    fn launch(mut command: Command, dir: tempfile::TempDir) -> Result<Self> {
        let mut child = command
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("spawning conductor")?;
        let stderr = child.stderr.take().expect("piped stderr");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<Value>();
        {
            let logs = Arc::clone(&logs);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Ok(v) = serde_json::from_str::<Value>(&line) {
                        let _ = tx.send(v);
                    }
                    logs.lock().unwrap().push(line);
                }
            });
        }
        let mut admin_addr = None;
        // A Python or JavaScript component not yet in the compile cache takes tens of seconds to
        // compile, longer while other tests compile theirs on the same cores.
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let line = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => line,
                Err(_) => {
                    let _ = child.kill();
                    bail!("conductor did not start; logs:\n{}", logs.lock().unwrap().join("\n"));
                }
            };
            match line["message"].as_str() {
                Some(m) if m.starts_with("admin endpoint listening") => {
                    admin_addr = line["addr"].as_str().map(str::to_owned);
                }
                Some("serving gRPC") => {
                    let grpc_addr = line["addr"]
                        .as_str()
                        .ok_or_else(|| anyhow!("no addr in {line}"))?
                        .to_owned();
                    return Ok(Self {
                        child,
                        grpc_addr,
                        admin_addr,
                        logs,
                        _dir: dir,
                    });
                }
                _ => {}
            }
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.grpc_addr)
    }

    /// The configuration file conductor was started with.
    pub fn config_path(&self) -> PathBuf {
        self._dir.path().join("conductor.toml")
    }

    /// Replaces the configuration file with `BASE_CONFIG` and `extra` (as [`Conductor::start`]
    /// composes it), for a reload to pick up.
    pub fn rewrite_config(&self, extra: &str) {
        std::fs::write(self.config_path(), format!("{BASE_CONFIG}\n{extra}")).expect("the config file is writable");
    }

    /// Sends SIGHUP (reload).
    pub fn hangup(&self) {
        Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
    }

    /// Waits until a log line contains `needle`, at most 10 s; returns the line.
    pub async fn wait_for_log(&self, needle: &str) -> String {
        self.wait_for_logs(needle, 1).await
    }

    /// Waits until `count` log lines contain `needle`, at most 10 s; returns the last.
    pub async fn wait_for_logs(&self, needle: &str, count: usize) -> String {
        for _ in 0..200 {
            let found: Vec<String> = self
                .logs
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains(needle))
                .cloned()
                .collect();
            if found.len() >= count {
                return found.last().cloned().unwrap_or_default();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no {count} lines with {needle:?} in the logs:\n{}", self.logs());
    }

    pub async fn client(&self) -> Result<CloudEventServiceClient<tonic::transport::Channel>> {
        Ok(CloudEventServiceClient::connect(self.url()).await?)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> Result<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("conductor did not exit within 10s of SIGTERM")
    }

    /// `GET path` on the admin endpoint: (status code, body).
    pub async fn admin_get(&self, path: &str) -> Result<(u16, String)> {
        let addr = self
            .admin_addr
            .as_deref()
            .ok_or_else(|| anyhow!("admin endpoint disabled"))?;
        http_get(addr, path).await
    }
}

impl Drop for Conductor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.0 GET.
pub async fn http_get(addr: &str, path: &str) -> Result<(u16, String)> {
    http_request(addr, "GET", path).await
}

/// A minimal HTTP/1.0 POST with no body.
pub async fn http_post(addr: &str, path: &str) -> Result<(u16, String)> {
    http_request(addr, "POST", path).await
}

async fn http_request(addr: &str, method: &str, path: &str) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad HTTP response: {response}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// An open subscription: the response header and the stream.
pub struct Sub {
    pub subscription_id: Vec<String>,
    pub stream: tonic::Streaming<proto::CloudEvent>,
}

impl Sub {
    /// The next message, heartbeats included; fails after `wait`.
    pub async fn next_raw(&mut self, wait: Duration) -> Result<Option<proto::CloudEvent>> {
        match tokio::time::timeout(wait, self.stream.message()).await {
            Ok(r) => Ok(r?),
            Err(_) => bail!("no message within {wait:?}"),
        }
    }

    /// The next event whose type ends with `type_suffix` (`resync_response`, …) from `source`,
    /// skipping others (at most 10).
    pub async fn next_from(&mut self, type_suffix: &str, source: &str) -> Result<proto::CloudEvent> {
        for _ in 0..10 {
            let e = self.next_event().await?;
            if e.r#type.ends_with(type_suffix) && e.source == source {
                return Ok(e);
            }
        }
        bail!("no {type_suffix} from {source} among the next 10 events")
    }

    /// The next event that is not a heartbeat.
    pub async fn next_event(&mut self) -> Result<proto::CloudEvent> {
        loop {
            match self.next_raw(Duration::from_secs(10)).await? {
                Some(e) if e.r#type == HEARTBEAT => continue,
                Some(e) => return Ok(e),
                None => bail!("stream ended"),
            }
        }
    }
}

/// Subscribes and returns once the response header arrived.
pub async fn subscribe(
    client: &mut CloudEventServiceClient<tonic::transport::Channel>,
    cluster: &str,
    data_type: &str,
) -> Result<Sub> {
    let response = client
        .subscribe(proto::SubscriptionRequest {
            source: String::new(),
            cluster_name: cluster.to_owned(),
            data_type: data_type.to_owned(),
        })
        .await?;
    let subscription_id = response
        .metadata()
        .get_all("subscription-id")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .collect();
    Ok(Sub {
        subscription_id,
        stream: response.into_inner(),
    })
}

/// Publishes an event.
pub async fn publish(
    client: &mut CloudEventServiceClient<tonic::transport::Channel>,
    event: proto::CloudEvent,
) -> std::result::Result<(), tonic::Status> {
    client
        .publish(proto::PublishRequest { event: Some(event) })
        .await
        .map(|_| ())
}

/// The Python grpcio agent (`tests/python/ocm_agent.py`), set up by `scripts/setup-test-env.sh`.
pub fn python_agent(args: &[&str]) -> Result<Vec<Value>> {
    let python = std::env::var("CONDUCTOR_PYTHON")
        .context("CONDUCTOR_PYTHON is not set: run scripts/setup-test-env.sh (the README's test command does)")?;
    std::env::var("CONDUCTOR_PYSTUBS").context("CONDUCTOR_PYSTUBS is not set: run scripts/setup-test-env.sh")?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/ocm_agent.py");
    let out = Command::new(python).arg(script).args(args).output()?;
    if !out.status.success() {
        bail!("ocm_agent {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8(out.stdout)?
        .lines()
        .map(|l| serde_json::from_str(l).with_context(|| format!("bad line {l}")))
        .collect()
}

/// The value of a series in a Prometheus scrape (0 when absent): `series` is the name with its
/// labels as they are exported, e.g. `conductor_plugin_event_queue_depth{plugin="maestro"}`.
pub fn scraped(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Fails unless no subscriber of the works data type was cut off for not reading
/// (`conductor_subscribers_cut_off_total`).
pub fn assert_no_work_agent_cut_off(metrics: &str) {
    assert_eq!(
        scraped(
            metrics,
            &format!("conductor_subscribers_cut_off_total{{data_type=\"{WORKS}\"}}")
        ),
        0.0,
        "{metrics}"
    );
}

/// Polls `check` every 50 ms until it holds; fails the test naming `what` after `within`.
pub async fn eventually<F: AsyncFn() -> bool>(within: Duration, what: &str, check: F) {
    let deadline = std::time::Instant::now() + within;
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The CPU seconds (user + system) process `pid` has used (`/proc/<pid>/stat`).
pub fn cpu_seconds(pid: u32) -> f64 {
    conductor_load::process::sample(pid)
        .expect("the process's /proc/<pid>/stat")
        .cpu_seconds
}

/// The context switches of process `pid`'s threads so far (`conductor_load::process`): per event,
/// the hand-overs between threads the event took.
pub fn context_switches(pid: u32) -> u64 {
    conductor_load::process::context_switches(pid).expect("the process's /proc/<pid>/task")
}

/// The context switches so far of process `pid`'s threads named `name`.
pub fn thread_context_switches(pid: u32, name: &str) -> u64 {
    conductor_load::process::thread_context_switches(pid, name).expect("the process's /proc/<pid>/task")
}

/// The resident memory of process `pid`, in KiB (`VmRSS` in `/proc/<pid>/status`).
pub fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process's status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in the process's status")
}
