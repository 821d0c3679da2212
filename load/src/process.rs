//! The server's CPU time, memory and context switches, read from `/proc/<pid>` (Linux).

use anyhow::{Context, Result};

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on every Linux architecture
/// conductor runs on).
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// User + system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident memory and its peak, bytes.
    pub rss: u64,
    pub rss_peak: u64,
}

pub fn sample(pid: u32) -> Result<Sample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("process {pid}"))?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).context("malformed stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15, i.e. 12 and 13 after the name.
    let ticks = |i: usize| -> Result<f64> { Ok(fields.get(i).context("malformed stat")?.parse::<u64>()? as f64) };
    let cpu_seconds = (ticks(11)? + ticks(12)?) / TICKS_PER_SECOND;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Ok(Sample {
        cpu_seconds,
        rss: kib("VmRSS:"),
        rss_peak: kib("VmHWM:"),
    })
}

/// The context switches of process `pid` so far, voluntary and involuntary, summed over its
/// threads (`/proc/<pid>/task/*/status`). A voluntary one is a thread that parked (on I/O, a
/// lock, or a runtime with nothing to run) and was woken again: per event, the hand-overs between
/// threads the event took. Threads that have ended are no longer counted.
pub fn context_switches(pid: u32) -> Result<u64> {
    switches_of_threads(pid, None)
}

/// The context switches so far of process `pid`'s threads named `name` (their `comm`).
pub fn thread_context_switches(pid: u32, name: &str) -> Result<u64> {
    switches_of_threads(pid, Some(name))
}

fn switches_of_threads(pid: u32, name: Option<&str>) -> Result<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).with_context(|| format!("process {pid}"))?;
    let mut switches = 0;
    for task in tasks {
        let task = task?.path();
        // A thread that ends while it is read is skipped.
        let Ok(status) = std::fs::read_to_string(task.join("status")) else {
            continue;
        };
        let named = status.lines().next().and_then(|l| l.strip_prefix("Name:\t"));
        if name.is_some_and(|name| named != Some(name)) {
            continue;
        }
        for line in status.lines() {
            if let Some(n) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                switches += n.trim().parse::<u64>().context("malformed status")?;
            }
        }
    }
    Ok(switches)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_the_switches_of_every_thread() {
        let pid = std::process::id();
        let before = super::context_switches(pid).unwrap();
        // Another thread parks and is woken 20 times.
        std::thread::spawn(|| {
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // Counted while the thread runs: an ended thread's switches are gone.
            super::context_switches(std::process::id()).unwrap()
        })
        .join()
        .map(|after| assert!(after >= before + 20, "{before} → {after}"))
        .unwrap();
    }

    #[test]
    fn counts_the_switches_of_the_threads_named() {
        let pid = std::process::id();
        assert_eq!(super::thread_context_switches(pid, "no-such-thread").unwrap(), 0);
        let switcher = std::thread::Builder::new()
            .name("switcher".into())
            .spawn(move || {
                for _ in 0..20 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                super::thread_context_switches(pid, "switcher").unwrap()
            })
            .unwrap();
        let switched = switcher.join().unwrap();
        assert!(switched >= 20, "{switched}");
    }

    #[test]
    fn reads_this_process() {
        let before = super::sample(std::process::id()).unwrap();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        let after = super::sample(std::process::id()).unwrap();
        assert!(after.cpu_seconds > before.cpu_seconds, "{before:?} → {after:?}");
        assert!(after.rss > 0 && after.rss_peak >= after.rss);
    }
}
