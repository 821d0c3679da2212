//! Calls into a loaded plugin, counted: each is traced, timed into the plugin's stats and
//! metrics, and a failure for time counted by the limit it ran into. Here a call's
//! [`CallError`] leaves the runtime as the SDK's [`Error`].

use std::sync::Arc;
use std::time::Instant;

use conductor_plugin_sdk::Error;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};

use super::runtime::{CallError, Runtime, Wait};
use super::stats::{CallStats, CallStatsSnapshot};
use crate::telemetry::{PluginCall, PluginMetrics};

/// A plugin's runtime, and what its calls did so far.
pub struct PluginCalls {
    plugin: String,
    runtime: Arc<dyn Runtime>,
    pool_size: usize,
    stats: CallStats,
    metrics: PluginMetrics,
}

impl PluginCalls {
    pub fn new(plugin: &str, runtime: Arc<dyn Runtime>, pool_size: usize, metrics: PluginMetrics) -> Self {
        Self {
            plugin: plugin.to_owned(),
            runtime,
            pool_size,
            stats: CallStats::default(),
            metrics,
        }
    }

    /// A call into the plugin, counted in its stats and metrics.
    pub async fn call(&self, request: PluginRequest, wait: Wait) -> Result<PluginReply, Error> {
        let call = match &request {
            PluginRequest::Start => PluginCall::Start,
            PluginRequest::List(_) => PluginCall::List,
            PluginRequest::Handle(..) => PluginCall::Handle,
            PluginRequest::HandleBatch(_) => PluginCall::HandleBatch,
            PluginRequest::OnEvents(_) => PluginCall::OnEvents,
        };
        let started = Instant::now();
        let span = tracing::span!(
            target: "conductor::trace",
            tracing::Level::TRACE,
            "plugin call",
            plugin = %self.plugin,
            call = call.as_str(),
        );
        let reply = tracing::Instrument::instrument(self.runtime.call(request, wait), span).await;
        let elapsed = started.elapsed();
        let limit = reply.as_ref().err().and_then(CallError::limit);
        let reply = reply.map_err(Error::from);
        let error = reply.as_ref().err().map(|e| e as &dyn std::fmt::Display);
        self.stats.record(elapsed, error);
        if let Err(e @ Error::Internal(_)) = &reply {
            // A bug of the plugin's (an uncaught exception, carrying its traceback) or a trap:
            // the agent sees it too, the operator should not have to ask the agent.
            tracing::warn!(plugin = %self.plugin, call = call.as_str(), error = %e, "plugin call failed with an internal error");
        }
        let ok = match &reply {
            Ok(PluginReply::Handled(results)) => results.iter().all(Result::is_ok),
            Ok(_) => true,
            Err(_) => false,
        };
        self.metrics.called(call, elapsed.as_secs_f64(), ok);
        if let Some(limit) = limit {
            self.metrics.timed_out(call, limit);
        }
        self.metrics.set_instances(self.runtime.instances(), self.pool_size);
        reply
    }

    /// Counts `requests` that went to the plugin together in one `handle-batch` call.
    pub fn batched(&self, requests: usize) {
        self.metrics.batched(requests);
    }

    /// How many instances exist now.
    pub fn instances(&self) -> usize {
        self.runtime.instances()
    }

    /// What the calls did so far.
    pub fn stats(&self) -> CallStatsSnapshot {
        self.stats.snapshot()
    }
}
