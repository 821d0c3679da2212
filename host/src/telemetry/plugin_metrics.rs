//! The metrics of plugins: their calls, their host-event queues, their instances, and what they do
//! through the host (API-server calls and watches, database statements, limits that bit), each
//! labelled with the plugin's name.

use std::sync::Arc;
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use super::vectors::{MetricsRegistry, counters, forget_plugin, gauges, histograms, register, unix_now};

/// The kinds of call into a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginCall {
    Start,
    List,
    Handle,
    HandleBatch,
    OnEvents,
}

impl PluginCall {
    pub const ALL: [PluginCall; 5] = [Self::Start, Self::List, Self::Handle, Self::HandleBatch, Self::OnEvents];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::List => "list",
            Self::Handle => "handle",
            Self::HandleBatch => "handle-batch",
            Self::OnEvents => "on-events",
        }
    }
}

/// Every plugin metric family, registered once.
#[derive(Clone)]
pub(super) struct Families {
    queue_depth: IntGaugeVec,
    lanes_waiting: IntGaugeVec,
    deepest_lane: IntGaugeVec,
    events_queued: IntCounterVec,
    events_coalesced: IntCounterVec,
    queue_full: IntCounterVec,
    events_retried: IntCounterVec,
    events_dropped: IntCounterVec,
    calls: IntCounterVec,
    batched_requests: IntCounterVec,
    call_duration: HistogramVec,
    call_timeouts: IntCounterVec,
    recycled: IntCounterVec,
    abandoned: IntGaugeVec,
    instances: IntGaugeVec,
    pool_size: IntGaugeVec,
    memory: IntGaugeVec,
    memory_limit: IntGaugeVec,
    limits_hit: IntCounterVec,
    limit_last_refusal: IntGaugeVec,
    kube_requests: IntCounterVec,
    kube_request_duration: HistogramVec,
    watch_restarts: IntCounterVec,
    watch_relists: IntCounterVec,
    statements: IntCounterVec,
    statement_duration: HistogramVec,
    foreign_source_events: IntCounterVec,
}

/// The limits that refuse a plugin's host calls.
const LIMITS: [&str; 6] = [
    "kv_keys",
    "kv_bytes",
    "timers",
    "log_lines_per_second",
    "metric_series",
    "max_abandoned_calls",
];

/// Latencies of calls that cross a network: 0.5 ms to 10 s.
fn network_buckets() -> Vec<f64> {
    vec![
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ]
}

impl Families {
    pub(super) fn new(registry: &MetricsRegistry) -> Self {
        let f = Self {
            queue_depth: gauges(
                "conductor_plugin_event_queue_depth",
                "Host events (timers, notifications, watched objects) waiting for a plugin.",
                &["plugin"],
            ),
            lanes_waiting: gauges(
                "conductor_plugin_host_event_lanes_waiting",
                "Lanes of a plugin's host-event queue with events waiting: each namespace of a watched object (a cluster, for per-cluster kinds) is a lane, the rest share one; batches take the lanes in turn.",
                &["plugin"],
            ),
            deepest_lane: gauges(
                "conductor_plugin_host_events_deepest_lane",
                "The most host events waiting in one lane of a plugin's queue (one cluster's backlog, or the shared lane's).",
                &["plugin"],
            ),
            events_queued: counters(
                "conductor_plugin_events_queued_total",
                "Host events queued for a plugin, by kind.",
                &["plugin", "kind"],
            ),
            events_coalesced: counters(
                "conductor_plugin_events_coalesced_total",
                "Host events folded into one already waiting (a timer firing again, the same notification, a newer state of a watched object).",
                &["plugin", "kind"],
            ),
            queue_full: counters(
                "conductor_plugin_event_queue_full_total",
                "Times a producer of host events found a plugin's queue full and waited (back-pressure).",
                &["plugin"],
            ),
            events_retried: counters(
                "conductor_plugin_events_retried_total",
                "Host events queued again, with backoff, because the on-events call carrying them failed.",
                &["plugin", "kind"],
            ),
            events_dropped: counters(
                "conductor_plugin_events_dropped_total",
                "Host events given up after failing every attempt (watched objects are listed again instead, once).",
                &["plugin", "kind"],
            ),
            calls: counters(
                "conductor_plugin_calls_total",
                "Calls into a plugin (start, list, handle, handle-batch, on-events), by outcome (ok, error; a handle-batch call with a request refused is an error).",
                &["plugin", "call", "outcome"],
            ),
            batched_requests: counters(
                "conductor_plugin_batched_requests_total",
                "Agent requests handed to a plugin in handle-batch calls carrying two or more (that waited together, or that a running call took in); divided by the handle-batch calls, the mean batch.",
                &["plugin"],
            ),
            call_duration: histograms(
                "conductor_plugin_call_duration_seconds",
                "How long calls into a plugin took, waiting for a free instance included.",
                &["plugin", "call"],
                prometheus::exponential_buckets(1e-5, 4.0, 10).expect("valid buckets"),
            ),
            call_timeouts: counters(
                "conductor_plugin_call_timeouts_total",
                "Calls into a plugin that failed for time: past limits.call_timeout (call_timeout), or no free instance within limits.acquire_timeout (acquire_timeout).",
                &["plugin", "call", "limit"],
            ),
            recycled: counters(
                "conductor_plugin_instances_recycled_total",
                "Instances of a plugin replaced after a call: its linear memory passed limits.recycle_above (memory), it served limits.max_calls_per_instance calls (calls), or it ran out of memory and the call ran again on a fresh instance (out_of_memory).",
                &["plugin", "reason"],
            ),
            abandoned: gauges(
                "conductor_plugin_abandoned_calls",
                "Calls into a native plugin still running past their call timeout (their threads run on until the plugin returns); at limits.max_abandoned_calls the plugin's calls are refused.",
                &["plugin"],
            ),
            instances: gauges(
                "conductor_plugin_instances",
                "Instances of a plugin alive now.",
                &["plugin"],
            ),
            pool_size: gauges(
                "conductor_plugin_pool_size",
                "Instances a plugin may have (pool_size).",
                &["plugin"],
            ),
            memory: gauges(
                "conductor_plugin_memory_bytes",
                "Linear memory of a WebAssembly plugin's instances, over all of them.",
                &["plugin"],
            ),
            memory_limit: gauges(
                "conductor_plugin_memory_limit_bytes",
                "Linear memory one instance of a WebAssembly plugin may grow to (limits.memory).",
                &["plugin"],
            ),
            limits_hit: counters(
                "conductor_plugin_limit_refusals_total",
                "Host calls refused because a plugin reached one of its [plugins.<name>.limits] (kv_keys, kv_bytes, timers, log_lines_per_second, metric_series).",
                &["plugin", "limit"],
            ),
            limit_last_refusal: gauges(
                "conductor_plugin_limit_last_refusal_timestamp_seconds",
                "When a limit of [plugins.<name>.limits] last refused one of the plugin's host calls (Unix seconds); while that is under a minute ago (log lines aside), /readyz says so.",
                &["plugin", "limit"],
            ),
            kube_requests: counters(
                "conductor_kube_requests_total",
                "Calls a plugin made to the Kubernetes API server through the host, by verb and HTTP code (0: no answer).",
                &["plugin", "verb", "code"],
            ),
            kube_request_duration: histograms(
                "conductor_kube_request_duration_seconds",
                "How long the API server took to answer a plugin's call.",
                &["plugin", "verb"],
                network_buckets(),
            ),
            watch_restarts: counters(
                "conductor_kube_watch_restarts_total",
                "Times a plugin's watch failed and resumed with backoff.",
                &["plugin", "resource"],
            ),
            watch_relists: counters(
                "conductor_kube_watch_relists_total",
                "Times a plugin's watch listed every object again (at start, after the server's 410 Gone, or after the plugin failed events).",
                &["plugin", "resource"],
            ),
            statements: counters(
                "conductor_database_statements_total",
                "Statements a plugin ran through the host's pg capability, by outcome (ok, error).",
                &["plugin", "database", "outcome"],
            ),
            statement_duration: histograms(
                "conductor_database_statement_duration_seconds",
                "How long a plugin's statements took, a wait for a pooled connection included.",
                &["plugin", "database"],
                network_buckets(),
            ),
            foreign_source_events: counters(
                "conductor_plugin_foreign_source_events_total",
                "Events a plugin sent agents (emitted, or answering a resync) whose source routes to another plugin (routed_to): agents send their status updates about them to that plugin. source: the route the source takes (the source, or the part before ::).",
                &["plugin", "source", "routed_to"],
            ),
        };
        register(
            registry,
            [
                Box::new(f.queue_depth.clone()) as Box<dyn Collector>,
                Box::new(f.lanes_waiting.clone()),
                Box::new(f.deepest_lane.clone()),
                Box::new(f.events_queued.clone()),
                Box::new(f.events_coalesced.clone()),
                Box::new(f.queue_full.clone()),
                Box::new(f.events_retried.clone()),
                Box::new(f.events_dropped.clone()),
                Box::new(f.calls.clone()),
                Box::new(f.batched_requests.clone()),
                Box::new(f.call_duration.clone()),
                Box::new(f.call_timeouts.clone()),
                Box::new(f.recycled.clone()),
                Box::new(f.abandoned.clone()),
                Box::new(f.instances.clone()),
                Box::new(f.pool_size.clone()),
                Box::new(f.memory.clone()),
                Box::new(f.memory_limit.clone()),
                Box::new(f.limits_hit.clone()),
                Box::new(f.limit_last_refusal.clone()),
                Box::new(f.kube_requests.clone()),
                Box::new(f.kube_request_duration.clone()),
                Box::new(f.watch_restarts.clone()),
                Box::new(f.watch_relists.clone()),
                Box::new(f.statements.clone()),
                Box::new(f.statement_duration.clone()),
                Box::new(f.foreign_source_events.clone()),
            ],
        );
        f
    }

    /// The limits that refused a host call of some plugin at `since` (Unix seconds) or later,
    /// log lines aside (dropping them is counted and warned about, and serves on): (plugin,
    /// limit, when).
    pub(super) fn refused_since(&self, since: i64) -> Vec<(String, String, i64)> {
        let mut refused = Vec::new();
        for family in self.limit_last_refusal.collect() {
            for metric in family.get_metric() {
                let at = metric.get_gauge().get_value() as i64;
                let label = |name: &str| {
                    metric
                        .get_label()
                        .iter()
                        .find(|p| p.name() == name)
                        .map(|p| p.value().to_owned())
                        .unwrap_or_default()
                };
                let limit = label("limit");
                if at >= since && limit != "log_lines_per_second" {
                    refused.push((label("plugin"), limit, at));
                }
            }
        }
        refused.sort();
        refused
    }

    /// Takes every series of the plugin `name` out: a plugin that no longer runs leaves
    /// `/metrics`.
    pub(super) fn forget(&self, name: &str) {
        forget_plugin(&self.queue_depth, name);
        forget_plugin(&self.lanes_waiting, name);
        forget_plugin(&self.deepest_lane, name);
        forget_plugin(&self.events_queued, name);
        forget_plugin(&self.events_coalesced, name);
        forget_plugin(&self.queue_full, name);
        forget_plugin(&self.events_retried, name);
        forget_plugin(&self.events_dropped, name);
        forget_plugin(&self.calls, name);
        forget_plugin(&self.batched_requests, name);
        forget_plugin(&self.call_duration, name);
        forget_plugin(&self.call_timeouts, name);
        forget_plugin(&self.recycled, name);
        forget_plugin(&self.abandoned, name);
        forget_plugin(&self.instances, name);
        forget_plugin(&self.pool_size, name);
        forget_plugin(&self.memory, name);
        forget_plugin(&self.memory_limit, name);
        forget_plugin(&self.limits_hit, name);
        forget_plugin(&self.limit_last_refusal, name);
        forget_plugin(&self.kube_requests, name);
        forget_plugin(&self.kube_request_duration, name);
        forget_plugin(&self.watch_restarts, name);
        forget_plugin(&self.watch_relists, name);
        forget_plugin(&self.statements, name);
        forget_plugin(&self.statement_duration, name);
        forget_plugin(&self.foreign_source_events, name);
    }

    pub(super) fn of(&self, name: &str) -> PluginMetrics {
        // The series of what may happen to any plugin exist from the start, at 0, so that rates
        // and alerts see them before the first time.
        for call in PluginCall::ALL {
            for limit in ["call_timeout", "acquire_timeout"] {
                self.call_timeouts.with_label_values(&[name, call.as_str(), limit]);
            }
        }
        for limit in LIMITS {
            self.limits_hit.with_label_values(&[name, limit]);
        }
        for reason in ["memory", "calls", "out_of_memory"] {
            self.recycled.with_label_values(&[name, reason]);
        }
        for kind in ["timer", "notification", "listening", "watch"] {
            self.events_retried.with_label_values(&[name, kind]);
            self.events_dropped.with_label_values(&[name, kind]);
        }
        PluginMetrics {
            plugin: name.to_owned(),
            depth: self.queue_depth.with_label_values(&[name]),
            lanes_waiting: self.lanes_waiting.with_label_values(&[name]),
            deepest_lane: self.deepest_lane.with_label_values(&[name]),
            full: self.queue_full.with_label_values(&[name]),
            instances: self.instances.with_label_values(&[name]),
            pool_size: self.pool_size.with_label_values(&[name]),
            batched: self.batched_requests.with_label_values(&[name]),
            calls: Arc::new(PluginCall::ALL.map(|call| {
                let (c, p) = (call.as_str(), name);
                (
                    self.calls.with_label_values(&[p, c, "ok"]),
                    self.calls.with_label_values(&[p, c, "error"]),
                    self.call_duration.with_label_values(&[p, c]),
                )
            })),
            families: self.clone(),
        }
    }
}

/// The metrics of one plugin. The hot ones (calls, the queue's depth) are looked up once here,
/// not on every call.
#[derive(Clone)]
pub struct PluginMetrics {
    plugin: String,
    depth: IntGauge,
    lanes_waiting: IntGauge,
    deepest_lane: IntGauge,
    full: IntCounter,
    instances: IntGauge,
    pool_size: IntGauge,
    batched: IntCounter,
    /// Per kind of call: the ok and error counters, and the duration histogram.
    calls: Arc<[(IntCounter, IntCounter, Histogram); PluginCall::ALL.len()]>,
    families: Families,
}

impl PluginMetrics {
    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    fn label<'a>(&'a self, rest: &[&'a str]) -> Vec<&'a str> {
        let mut labels = vec![self.plugin.as_str()];
        labels.extend_from_slice(rest);
        labels
    }

    pub fn set_depth(&self, depth: usize) {
        self.depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// The host-event queue's lanes with events waiting, and the most events in one of them.
    pub fn set_lanes(&self, waiting: usize, deepest: usize) {
        self.lanes_waiting.set(i64::try_from(waiting).unwrap_or(i64::MAX));
        self.deepest_lane.set(i64::try_from(deepest).unwrap_or(i64::MAX));
    }

    /// An event of `kind` joined the queue.
    pub fn queued(&self, kind: &str) {
        self.families
            .events_queued
            .with_label_values(&self.label(&[kind]))
            .inc();
    }

    /// An event of `kind` was folded into one already queued.
    pub fn coalesced(&self, kind: &str) {
        self.families
            .events_coalesced
            .with_label_values(&self.label(&[kind]))
            .inc();
    }

    /// A producer found the queue full and waited.
    pub fn waited_for_room(&self) {
        self.full.inc();
    }

    /// An event of `kind` goes back into the queue after a failed call.
    pub fn retried(&self, kind: &str) {
        self.families
            .events_retried
            .with_label_values(&self.label(&[kind]))
            .inc();
    }

    /// An event of `kind` was given up.
    pub fn dropped(&self, kind: &str) {
        self.families
            .events_dropped
            .with_label_values(&self.label(&[kind]))
            .inc();
    }

    /// A call into the plugin took `seconds` and succeeded or failed.
    pub fn called(&self, call: PluginCall, seconds: f64, ok: bool) {
        let (succeeded, failed, duration) = &self.calls[call as usize];
        if ok { succeeded } else { failed }.inc();
        duration.observe(seconds);
    }

    /// A `handle-batch` call carried `requests`.
    pub fn batched(&self, requests: usize) {
        self.batched.inc_by(requests as u64);
    }

    /// A call failed for time: past `limit` (`call_timeout` or `acquire_timeout`).
    pub fn timed_out(&self, call: PluginCall, limit: &str) {
        self.families
            .call_timeouts
            .with_label_values(&self.label(&[call.as_str(), limit]))
            .inc();
    }

    /// An instance was replaced after a call, for `reason` (`memory`, `calls`, `out_of_memory`).
    pub fn recycled(&self, reason: &str) {
        self.families.recycled.with_label_values(&self.label(&[reason])).inc();
    }

    /// The gauge of the plugin's calls running past their timeout.
    pub fn abandoned(&self) -> IntGauge {
        self.families.abandoned.with_label_values(&[self.plugin.as_str()])
    }

    /// How many instances the plugin has, and may have.
    pub fn set_instances(&self, alive: usize, pool_size: usize) {
        self.instances.set(i64::try_from(alive).unwrap_or(i64::MAX));
        self.pool_size.set(i64::try_from(pool_size).unwrap_or(i64::MAX));
    }

    /// The gauge of the plugin's instances' linear memory.
    pub fn memory(&self) -> IntGauge {
        self.families.memory.with_label_values(&[self.plugin.as_str()])
    }

    /// The memory one instance may grow to.
    pub fn set_memory_limit(&self, bytes: usize) {
        self.families
            .memory_limit
            .with_label_values(&[self.plugin.as_str()])
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// A host call was refused: the plugin reached `limit`.
    /// The limits that refused a host call of this plugin: by limit, how many times and when
    /// last (Unix seconds).
    pub fn limit_refusals(&self) -> std::collections::BTreeMap<String, (u64, i64)> {
        let mut refused = std::collections::BTreeMap::new();
        for limit in LIMITS {
            let labels = self.label(&[limit]);
            let count = self
                .families
                .limits_hit
                .get_metric_with_label_values(&labels)
                .map_or(0, |c| c.get());
            if count > 0 {
                let at = self
                    .families
                    .limit_last_refusal
                    .get_metric_with_label_values(&labels)
                    .map_or(0, |g| g.get());
                refused.insert(limit.to_owned(), (count, at));
            }
        }
        refused
    }

    pub fn limit_hit(&self, limit: &str) {
        let labels = self.label(&[limit]);
        self.families.limits_hit.with_label_values(&labels).inc();
        self.families
            .limit_last_refusal
            .with_label_values(&labels)
            .set(unix_now());
    }

    /// A call to the API server: its verb, the HTTP code of the answer (0: none) and how long.
    pub fn kube_request(&self, verb: &str, code: u16, took: Duration) {
        let code = code.to_string();
        self.families
            .kube_requests
            .with_label_values(&self.label(&[verb, &code]))
            .inc();
        self.families
            .kube_request_duration
            .with_label_values(&self.label(&[verb]))
            .observe(took.as_secs_f64());
    }

    /// A watch of `resource` starts: its series exist from now on.
    pub fn watch_started(&self, resource: &str) {
        self.families.watch_restarts.with_label_values(&self.label(&[resource]));
        self.families.watch_relists.with_label_values(&self.label(&[resource]));
    }

    /// The watch of `resource` failed and resumes.
    pub fn watch_restarted(&self, resource: &str) {
        self.families
            .watch_restarts
            .with_label_values(&self.label(&[resource]))
            .inc();
    }

    /// The watch of `resource` lists every object again.
    pub fn watch_relisted(&self, resource: &str) {
        self.families
            .watch_relists
            .with_label_values(&self.label(&[resource]))
            .inc();
    }

    /// The counter of the plugin's events sent with a source whose route, `source`, leads to the
    /// plugin `routed_to` (made at 0 when the route is first seen).
    pub fn foreign_source_events(&self, source: &str, routed_to: &str) -> IntCounter {
        self.families
            .foreign_source_events
            .with_label_values(&self.label(&[source, routed_to]))
    }

    /// A statement on `database` succeeded or failed after `took`.
    pub fn statement(&self, database: &str, ok: bool, took: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        self.families
            .statements
            .with_label_values(&self.label(&[database, outcome]))
            .inc();
        self.families
            .statement_duration
            .with_label_values(&self.label(&[database]))
            .observe(took.as_secs_f64());
    }
}
