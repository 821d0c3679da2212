//! What a run reports: the deliveries, the errors, and the server's CPU and memory.

use serde::{Deserialize, Serialize};

use crate::process;
use crate::receipts::Summary;

#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    pub server: String,
    pub hub: String,
    pub agents: usize,
    pub connect_seconds: f64,
    /// Updates per second asked for.
    pub rate_per_second: f64,
    /// Writes per second achieved in the update phase.
    pub update_rate_achieved: f64,
    #[serde(flatten)]
    pub summary: Summary,
    pub write_errors: u64,
    pub first_write_error: Option<String>,
    pub stream_errors: u64,
    pub server_process: Option<ServerProcess>,
    /// A shard's delivery latencies, for its parent to merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latencies_ms: Option<Latencies>,
}

/// Every delivered write's latency, milliseconds.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Latencies {
    pub creates: Vec<f64>,
    pub updates: Vec<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ServerProcess {
    pub pid: u32,
    pub rss_before_agents_bytes: u64,
    pub rss_connected_bytes: u64,
    pub rss_end_bytes: u64,
    pub rss_peak_bytes: u64,
    /// (resident memory with every agent connected − before) ÷ agents.
    pub bytes_per_agent: f64,
    /// CPU time during the update phase (from its first write until its last delivery).
    pub update_phase_cpu_seconds: f64,
    pub update_phase_cpu_percent: f64,
    pub cpu_seconds_per_1000_deliveries: Option<f64>,
}

/// The server's samples taken during a run, in order.
pub struct Samples {
    pub before: Option<process::Sample>,
    pub connected: Option<process::Sample>,
    pub updating: Option<process::Sample>,
    pub end: Option<process::Sample>,
}

impl ServerProcess {
    /// The figures from the samples of `pid` (none without a pid or a sample), for `agents` agents
    /// and `delivered` updates delivered in an update phase of `phase_seconds`.
    pub fn from_samples(
        pid: Option<u32>,
        samples: Samples,
        agents: usize,
        delivered: u64,
        phase_seconds: f64,
    ) -> Option<Self> {
        let (pid, before, connected, start, end) = (
            pid?,
            samples.before?,
            samples.connected?,
            samples.updating?,
            samples.end?,
        );
        let cpu = end.cpu_seconds - start.cpu_seconds;
        Some(Self {
            pid,
            rss_before_agents_bytes: before.rss,
            rss_connected_bytes: connected.rss,
            rss_end_bytes: end.rss,
            rss_peak_bytes: end.rss_peak,
            bytes_per_agent: connected.rss.saturating_sub(before.rss) as f64 / agents.max(1) as f64,
            update_phase_cpu_seconds: cpu,
            update_phase_cpu_percent: 100.0 * cpu / phase_seconds,
            cpu_seconds_per_1000_deliveries: (delivered > 0).then(|| cpu * 1000.0 / delivered as f64),
        })
    }
}
