//! `conductor agent` against the real binary in its default run (the memory source under the
//! source name `memory`, as `conductor.toml` has it): `watch` as a child process prints the work
//! `agent publish examples/agent/hello-work.json` asks for, `agent status` reaches the source
//! (a `Deleted=True` status removes a deleting work, which the watcher sees), and the errors name
//! the code, the message and the right spelling of a misspelt attribute — on the client before
//! sending, and in the server's refusal.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use conductor_blackbox_tests::events::{self, string};
use conductor_blackbox_tests::{Conductor, MEMORY_SOURCE, WORKS, conductor_bin, publish};
use tonic::Code;

const HELLO_UID: &str = "0b6f7c4e-6d1a-4f51-9a38-2f6b1c0e4d21";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn agent(c: &Conductor, args: &[&str]) -> Output {
    Command::new(conductor_bin())
        .arg("agent")
        .args(args)
        .args(["--server", &c.grpc_addr])
        .current_dir(repo())
        .output()
        .expect("conductor agent runs")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `conductor agent watch`, its stdout lines on a channel.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    fn start(c: &Conductor, extra: &[&str]) -> Self {
        let mut args = vec!["--cluster", "cluster1", "--server", &c.grpc_addr];
        args.extend(extra);
        Self::spawn(&args)
    }

    /// `conductor agent watch ARGS`.
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(conductor_bin())
            .args(["agent", "watch"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("conductor agent watch starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line containing every one of `needles`, within 10 s.
    fn expect(&self, needles: &[&str]) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if needles.iter().all(|n| line.contains(n)) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no line with {needles:?}; printed:\n{}", seen.join("\n"));
    }

    fn kill(mut self) {
        Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        let _ = self.child.wait();
    }
}

/// The README's quick start, as a new user plays it: the repository's own `conductor.toml`, and
/// the one `conductor agent watch` command the README gives to paste — the agent gets a work.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_quick_start_shows_an_agent_getting_a_work_with_one_command() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let quick_start = readme
        .split("## See an agent get a work")
        .nth(1)
        .expect("the README's quick start");
    let watch = quick_start
        .split("```sh\n")
        .nth(1)
        .and_then(|block| block.split("```").next())
        .expect("a command to paste")
        .trim();
    let args: Vec<&str> = watch.split_whitespace().collect();
    assert_eq!(
        args[..3],
        ["target/release/conductor", "agent", "watch"],
        "the first command to paste: {watch}"
    );
    let args: Vec<&str> = args[3..].to_vec();
    let server = args.iter().position(|a| *a == "--server").expect("--server");

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let c = Conductor::start_with_config(&conductor_blackbox_tests::default_run_config(
        &dir.path().join("maestro-pg"),
    ))
    .unwrap();
    let mut args = args;
    args[server + 1] = &c.grpc_addr;
    let watch = Watch::spawn(&args);
    let line = watch.expect(&["spec.resync_response", "manifestbundles welcome", "source=memory"]);
    assert!(line.contains("version=1"), "{line}");
    watch.kill();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watching_agent_gets_the_work_and_reports_its_status() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let watch = Watch::start(&c, &[]);
    // The watcher subscribed (and resynced) before the work exists: wait for its subscriber.
    conductor_blackbox_tests::eventually(Duration::from_secs(10), "the watcher's subscription", async || {
        c.admin_get("/inspect/subscribers")
            .await
            .is_ok_and(|(_, body)| body.contains("cluster1"))
    })
    .await;

    let out = agent(&c, &["publish", "examples/agent/hello-work.json"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("published hello-work-1"), "{stdout}");
    let line = watch.expect(&["spec.create_request", "manifestbundles hello"]);
    assert!(
        line.contains(&format!("id={HELLO_UID}")) && line.contains("version=1") && line.contains("source=memory"),
        "{line}"
    );

    // The status, by name: routed back to the memory source, which takes it.
    let out = agent(
        &c,
        &[
            "status",
            "--cluster",
            "cluster1",
            "--work",
            "hello",
            "--condition",
            "Applied=True",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "work hello (uid {HELLO_UID}, version 1) to source memory: Applied=True"
        )),
        "{stdout}"
    );

    // Delete it; the agent reports Deleted=True (by UID) and the source removes the work, which the
    // watcher sees as the final delete.
    let dir = tempfile::tempdir().unwrap();
    let delete = dir.path().join("delete.json");
    let mut event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("examples/agent/hello-work.json")).unwrap()).unwrap();
    event["id"] = "hello-delete".into();
    event["type"] = format!("{WORKS}.spec.delete_request").into();
    event.as_object_mut().unwrap().remove("data");
    std::fs::write(&delete, event.to_string()).unwrap();
    let out = agent(&c, &["publish", delete.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", text(&out));
    watch.expect(&["spec.update_request", "hello", "deleting"]);
    let out = agent(
        &c,
        &[
            "status",
            "--cluster",
            "cluster1",
            "--work",
            HELLO_UID,
            "--condition",
            "Deleted=True",
        ],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    watch.expect(&["spec.delete_request", "hello", &format!("id={HELLO_UID}")]);
    watch.kill();

    // Gone: a status for it names what the cluster has.
    let out = agent(&c, &["status", "--cluster", "cluster1", "--work", "hello"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains(r#"no work named or with the UID "hello""#), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_prints_whole_events_as_json() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let out = agent(&c, &["publish", "examples/agent/hello-work.json"]);
    assert!(out.status.success(), "{:?}", text(&out));
    // Subscribed after the work exists: the resync brings it.
    let watch = Watch::start(&c, &["--output", "json"]);
    let line = watch.expect(&["resync_response"]);
    watch.kill();
    let event: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(event["clustername"], "cluster1");
    assert_eq!(event["resourceid"], HELLO_UID);
    assert_eq!(event["resourceversion"], 1);
    assert_eq!(event["source"], "memory");
    assert_eq!(event["data"]["manifests"][0]["kind"], "ConfigMap");
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_name_the_code_the_message_and_the_right_spelling() {
    let c = Conductor::start(MEMORY_SOURCE).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(repo().join("examples/agent/hello-work.json")).unwrap();

    // Misspelt in the file: named before anything is sent.
    for (wrong, why) in [("ce-clustername", "without a prefix"), ("clusterName", "lowercase")] {
        let file = dir.path().join(format!("{wrong}.json"));
        std::fs::write(&file, example.replace("\"clustername\"", &format!("\"{wrong}\""))).unwrap();
        let out = agent(&c, &["publish", file.to_str().unwrap()]);
        let (_, stderr) = text(&out);
        assert!(!out.status.success());
        assert!(
            stderr.contains(&format!(r#"attribute "{wrong}" is spelt "clustername""#)) && stderr.contains(why),
            "{stderr}"
        );
        assert!(stderr.contains("nothing sent"), "{stderr}");
    }
    let file = dir.path().join("missing.json");
    std::fs::write(&file, example.replace("\"clustername\": \"cluster1\",", "")).unwrap();
    let (_, stderr) = text(&agent(&c, &["publish", file.to_str().unwrap()]));
    assert!(stderr.contains(r#"attribute "clustername" is missing"#), "{stderr}");

    // A source's refusal: the code, and the ErrStatus's message.
    assert!(
        agent(&c, &["publish", "examples/agent/hello-work.json"])
            .status
            .success()
    );
    let out = agent(&c, &["publish", "examples/agent/hello-work.json"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(r#"FailedPrecondition: manifestbundles "hello" already exists (AlreadyExists, 409)"#),
        "{stderr}"
    );
    // No server there: said so.
    let out = Command::new(conductor_bin())
        .args([
            "agent",
            "publish",
            "examples/agent/hello-work.json",
            "--server",
            "127.0.0.1:1",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        text(&out).1.contains("cannot connect to http://127.0.0.1:1"),
        "{:?}",
        text(&out)
    );

    // The server's refusals of a wire event name the key, and the near miss the event carries.
    let mut client = c.client().await.unwrap();
    let mut e = events::create(WORKS, "cluster1", "w2", "work2");
    let cluster = e.attributes.remove("ce-clustername").unwrap();
    e.attributes.insert("clustername".into(), cluster);
    let s = publish(&mut client, e).await.unwrap_err();
    assert_eq!(s.code(), Code::Unknown);
    assert_eq!(
        s.message(),
        r#"failed to get clustername extension: extension "clustername" is missing: its key is "ce-clustername" (the event has "clustername", which is not "ce-clustername")"#
    );
    let mut e = events::agent_event(&format!("{WORKS}.status.update_request"), "cluster1", "memory", None);
    e.attributes.insert("ce-resourceID".into(), string(HELLO_UID));
    let s = publish(&mut client, e).await.unwrap_err();
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert!(
        s.message()
            .contains(r#"(the event has \"ce-resourceID\", which is not \"ce-resourceid\")"#),
        "{}",
        s.message()
    );
}
