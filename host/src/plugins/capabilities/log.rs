//! `conductor:plugin/log`: the plugin's log lines, and what it writes to its standard output and
//! error, into the host's log under the plugin's name, within `limits.log_lines_per_second`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use conductor_plugin_sdk::{Capability, Level};
use parking_lot::Mutex;

use super::guard::Guard;

/// A plugin's standard output or error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// How often, at most, a plugin's dropped log lines are reported (with their count).
const DROPPED_LINES_REPORT: Duration = Duration::from_secs(10);

/// Log lines a plugin may write now: a bucket refilled at the configured rate, as deep as one
/// second of it. Only lines that would be written count (one below the log level costs nothing).
struct LogBudget {
    tokens: f64,
    refilled: Instant,
    /// Lines dropped since the last report of them.
    dropped: u64,
    /// When dropped lines were last reported (at most once per [`DROPPED_LINES_REPORT`]).
    reported: Option<Instant>,
}

impl LogBudget {
    /// The lines dropped to report now, if a report is due.
    fn report_due(&mut self, now: Instant) -> Option<u64> {
        let due = self
            .reported
            .is_none_or(|at| now.duration_since(at) >= DROPPED_LINES_REPORT);
        (due && self.dropped > 0).then(|| {
            self.reported = Some(now);
            std::mem::take(&mut self.dropped)
        })
    }
}

/// Whether a line at `level` would be written (the log level and filters allow it).
fn would_log(level: Level) -> bool {
    match level {
        Level::Trace => tracing::enabled!(tracing::Level::TRACE),
        Level::Debug => tracing::enabled!(tracing::Level::DEBUG),
        Level::Info => tracing::enabled!(tracing::Level::INFO),
        Level::Warn => tracing::enabled!(tracing::Level::WARN),
        Level::Error => tracing::enabled!(tracing::Level::ERROR),
    }
}

/// The `log` state of one plugin: its budget of lines.
pub struct LogHost {
    guard: Arc<Guard>,
    budget: Mutex<LogBudget>,
}

impl LogHost {
    pub fn new(guard: Arc<Guard>) -> Self {
        let budget = LogBudget {
            tokens: f64::from(guard.grants().limits.log_lines_per_second),
            refilled: Instant::now(),
            dropped: 0,
            reported: None,
        };
        Self {
            guard,
            budget: Mutex::new(budget),
        }
    }

    /// A line the plugin logs at `level`.
    pub fn line(&self, level: Level, message: &str) {
        if self.guard.check(Capability::Log).is_err() || !would_log(level) {
            return;
        }
        if !self.budget() {
            return;
        }
        let plugin = self.guard.plugin();
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }

    /// A line the plugin wrote to its standard output or error (a `print`, an interpreter's
    /// traceback, a Rust panic message): into the log under the plugin's name, stdout at info and
    /// stderr at warn, within the same `limits.log_lines_per_second` as `log`. WASI's stdio is
    /// always linked, so this needs no `log` grant.
    pub fn output(&self, stream: OutputStream, line: &str) {
        let level = match stream {
            OutputStream::Stdout => Level::Info,
            OutputStream::Stderr => Level::Warn,
        };
        if !would_log(level) || !self.budget() {
            return;
        }
        let plugin = self.guard.plugin();
        match stream {
            OutputStream::Stdout => tracing::info!(plugin, stream = "stdout", "{line}"),
            OutputStream::Stderr => tracing::warn!(plugin, stream = "stderr", "{line}"),
        }
    }

    /// Whether the plugin may write one more log line now (`limits.log_lines_per_second`); a
    /// line refused is counted, and the lines dropped are reported with their count at most once
    /// per [`DROPPED_LINES_REPORT`].
    fn budget(&self) -> bool {
        let limit = self.guard.grants().limits.log_lines_per_second;
        let (allowed, report) = {
            let mut budget = self.budget.lock();
            let rate = f64::from(limit);
            let now = Instant::now();
            let refill = now.duration_since(budget.refilled).as_secs_f64() * rate;
            budget.tokens = (budget.tokens + refill).min(rate);
            budget.refilled = now;
            let allowed = budget.tokens >= 1.0;
            if allowed {
                budget.tokens -= 1.0;
            } else {
                budget.dropped += 1;
            }
            (allowed, budget.report_due(now))
        };
        if !allowed {
            self.guard.refused("log_lines_per_second");
        }
        if let Some(dropped) = report {
            tracing::warn!(
                plugin = self.guard.plugin(),
                dropped,
                limit,
                every = ?DROPPED_LINES_REPORT,
                "dropping log lines of the plugin beyond limits.log_lines_per_second"
            );
        }
        allowed
    }
}
