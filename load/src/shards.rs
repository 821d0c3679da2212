//! Several processes for one run (`--processes N`): each process may hold only as many sockets as
//! its open-file limit allows, so more agents than that are spread over N copies of the tool, each
//! with a contiguous share of the agents (`load-<n>` named and numbered as in one process, so the
//! source addresses alternate the same way) and of the writes. They move in step: every shard says
//! when its agents are connected and when its creates arrived, and goes on when the parent says
//! so; the parent measures the server at those points and merges the shards' reports.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::process;
use crate::receipts::{Phase, Summary};
use crate::report::{Latencies, Report, Samples, ServerProcess};

/// Set in a shard's environment: `<index>/<of>`.
pub const SHARD_ENV: &str = "CONDUCTOR_LOAD_SHARD";

/// One share of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub of: usize,
}

impl Shard {
    /// This shard's part of `0..total`.
    pub fn range(&self, total: usize) -> std::ops::Range<usize> {
        self.index * total / self.of..(self.index + 1) * total / self.of
    }

    /// The shard this process is, if it is one.
    pub fn from_env() -> Result<Option<Self>> {
        let Ok(value) = std::env::var(SHARD_ENV) else {
            return Ok(None);
        };
        let parsed = value
            .split_once('/')
            .and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)));
        match parsed {
            Some((index, of)) if index < of => Ok(Some(Self { index, of })),
            _ => bail!("{SHARD_ENV}={value:?}: want <index>/<of>"),
        }
    }
}

/// In a shard: tells the parent this point is reached (a line on stdout) and waits for its word
/// to go on (a line on stdin).
pub async fn barrier(name: &str) -> Result<()> {
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, Write};
        let mut out = std::io::stdout().lock();
        writeln!(out, "{{\"barrier\":\"{name}\"}}")?;
        out.flush()?;
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line)? == 0 {
            bail!("the parent process went away at {name}");
        }
        Ok(())
    })
    .await?
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Running {
    async fn reached(&mut self, index: usize, name: &str) -> Result<()> {
        let line = self
            .lines
            .next_line()
            .await?
            .with_context(|| format!("shard {index} ended before {name}"))?;
        if line != format!("{{\"barrier\":\"{name}\"}}") {
            bail!("shard {index}: {line:?} instead of reaching {name}");
        }
        Ok(())
    }
}

/// Runs `processes` shards of this very command line and merges their reports; `pid` is the
/// server's, measured here.
pub async fn run(processes: usize, pid: Option<u32>) -> Result<Report> {
    let me = std::env::current_exe().context("this program's path")?;
    let sample = || pid.map(process::sample).transpose();
    let before = sample()?;
    let mut shards = Vec::new();
    for index in 0..processes {
        let mut child = Command::new(&me)
            .args(std::env::args_os().skip(1))
            .env(SHARD_ENV, format!("{index}/{processes}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting a shard")?;
        let stdin = child.stdin.take().context("a shard's stdin")?;
        let stdout = child.stdout.take().context("a shard's stdout")?;
        shards.push(Running {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        });
    }
    let mut at = Vec::new();
    for name in ["connected", "created"] {
        for (index, shard) in shards.iter_mut().enumerate() {
            shard.reached(index, name).await?;
        }
        if name == "connected" {
            // As one process does: let the server settle what the connections allocated.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        at.push((sample()?, std::time::Instant::now()));
        for shard in &mut shards {
            shard.stdin.write_all(b"go\n").await?;
            shard.stdin.flush().await?;
        }
    }
    let mut reports = Vec::new();
    for (index, mut shard) in shards.into_iter().enumerate() {
        let mut text = String::new();
        while let Some(line) = shard.lines.next_line().await? {
            text.push_str(&line);
            text.push('\n');
        }
        let status = shard.child.wait().await?;
        if !status.success() {
            bail!("shard {index} failed ({status})");
        }
        reports.push(serde_json::from_str::<Report>(&text).with_context(|| format!("shard {index}'s report"))?);
    }
    let end = sample()?;
    let phase_seconds = at[1].1.elapsed().as_secs_f64();
    let samples = Samples {
        before,
        connected: at[0].0,
        updating: at[1].0,
        end,
    };
    Ok(merge(reports, pid, samples, phase_seconds))
}

/// The shards' reports as one, with the server measured by the parent.
fn merge(reports: Vec<Report>, pid: Option<u32>, samples: Samples, phase_seconds: f64) -> Report {
    let sum = |f: fn(&Report) -> u64| reports.iter().map(f).sum::<u64>();
    let latencies = |f: fn(&Latencies) -> &Vec<f64>| {
        reports
            .iter()
            .filter_map(|r| r.latencies_ms.as_ref())
            .flat_map(|l| f(l).iter().copied())
            .collect::<Vec<f64>>()
    };
    let phases = |f: fn(&Summary) -> &Phase| reports.iter().map(|r| f(&r.summary).clone()).collect::<Vec<_>>();
    let agents: usize = reports.iter().map(|r| r.agents).sum();
    let summary = Summary {
        creates: Phase::merge(&phases(|s| &s.creates), latencies(|l| &l.creates)),
        updates: Phase::merge(&phases(|s| &s.updates), latencies(|l| &l.updates)),
        events_received: sum(|r| r.summary.events_received),
        out_of_order: sum(|r| r.summary.out_of_order),
        duplicates: sum(|r| r.summary.duplicates),
    };
    let server_process = ServerProcess::from_samples(pid, samples, agents, summary.updates.delivered, phase_seconds);
    Report {
        server: reports.first().map(|r| r.server.clone()).unwrap_or_default(),
        hub: reports.first().map(|r| r.hub.clone()).unwrap_or_default(),
        agents,
        connect_seconds: reports.iter().map(|r| r.connect_seconds).fold(0.0, f64::max),
        rate_per_second: reports.iter().map(|r| r.rate_per_second).sum(),
        update_rate_achieved: reports.iter().map(|r| r.update_rate_achieved).sum(),
        summary,
        write_errors: sum(|r| r.write_errors),
        first_write_error: reports.iter().find_map(|r| r.first_write_error.clone()),
        stream_errors: sum(|r| r.stream_errors),
        server_process,
        latencies_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::Shard;

    #[test]
    fn shares_cover_everything_once() {
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, of: 3 }).collect();
        let ranges: Vec<_> = shards.iter().map(|s| s.range(10)).collect();
        assert_eq!(ranges, [0..3, 3..6, 6..10]);
        assert_eq!(shards.iter().map(|s| s.range(1000).len()).sum::<usize>(), 1000);
        assert_eq!(Shard { index: 0, of: 1 }.range(7), 0..7);
    }
}
