//! Prometheus metrics with the upstream names and labels (`docs/protocol.md` §10).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use prometheus::core::Collector;
use prometheus::{Encoder, IntCounterVec, IntGaugeVec, TextEncoder};

use crate::build_info;

use super::broker_metrics::BrokerMetrics;
use super::config_metrics::ConfigMetrics;
use super::exported::ExportedMetrics;
use super::labels::code_name;
use super::plugin_metrics::{Families, PluginMetrics};
use super::security_metrics::SecurityMetrics;
use super::series::{self, Series, SeriesVec};
use super::vectors::{MetricsRegistry, counters, gauge, gauges, register, unix_now};

const SUBSYSTEM: &str = "grpc_server_ce";
const PUBLISH: &str = "Publish";
const SUBSCRIBE: &str = "Subscribe";

/// The CloudEvents broker metrics.
#[derive(Clone)]
pub struct Metrics {
    registry: MetricsRegistry,
    subscribers: SeriesVec,
    called: SeriesVec,
    received: SeriesVec,
    sent: SeriesVec,
    processed: SeriesVec,
    duration: series::HistogramVec,
    listener_up: IntGaugeVec,
    listener_lost: IntCounterVec,
    /// The LISTENs held on each (database, channel): a plugin replaced holds its own while its
    /// successor already holds the next.
    listeners: Arc<Mutex<HashMap<(String, String), usize>>>,
    plugins: Families,
    /// conductor's own broker metrics.
    pub broker: BrokerMetrics,
    /// 1 when `/readyz` answers 200 (set as metrics are rendered).
    ready: prometheus::IntGauge,
    /// The metrics plugins declare.
    pub exported: ExportedMetrics,
    /// Connections, limits, authentication and authorization.
    pub security: SecurityMetrics,
    /// Configuration reloads.
    pub config: ConfigMetrics,
    /// Whether the broker series carry each cluster's name as `consumer` (upstream's labels), or
    /// [`ALL_CONSUMERS`] for every cluster (`[admin] consumer_label = false`).
    per_consumer: bool,
}

/// The `consumer` label of every broker series when per-cluster labels are off.
pub const ALL_CONSUMERS: &str = "*";

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let per_call = ["consumer", "data_type", "method"];
        let per_code = ["consumer", "data_type", "method", "grpc_code"];
        // Labelled by cluster: thousands of label sets on a large hub, so held compactly.
        // component-base marks every metric's help with its stability level.
        let series = |name: &str, help: &str, labels: &[&str], gauge: bool| {
            let (name, help) = (format!("{SUBSYSTEM}_{name}"), format!("[ALPHA] {help}"));
            if gauge {
                SeriesVec::gauge(&name, &help, labels)
            } else {
                SeriesVec::counter(&name, &help, labels)
            }
        };
        let subscribers = series(
            "subscribers",
            "Current number of subscribers per consumer and data type.",
            &["consumer", "data_type"],
            true,
        );
        let called = series("called_total", "Total number of RPC requests called.", &per_call, false);
        let received = series(
            "msg_received_total",
            "Total number of messages received.",
            &per_call,
            false,
        );
        let sent = series("msg_sent_total", "Total number of messages sent.", &per_call, false);
        let processed = series(
            "processed_total",
            "Total number of RPC requests processed.",
            &per_code,
            false,
        );
        let duration = series::HistogramVec::new(
            &format!("{SUBSYSTEM}_processing_duration_seconds"),
            "[ALPHA] Histogram of the duration of RPC requests processing.",
            &per_code,
            prometheus::exponential_buckets(1e-6, 10.0, 10).expect("valid buckets"),
        );
        let listener_up = gauges(
            "conductor_database_listener_up",
            "Whether the LISTEN connection of a plugin's database channel is up (1) or reconnecting (0).",
            &["database", "channel"],
        );
        let listener_lost = counters(
            "conductor_database_listener_lost_total",
            "Times a LISTEN connection was lost (notifications may have been missed; the plugin catches up).",
            &["database", "channel"],
        );
        let registry = MetricsRegistry::new();
        register(
            &registry,
            [
                Box::new(listener_up.clone()) as Box<dyn Collector>,
                Box::new(listener_lost.clone()),
                Box::new(subscribers.clone()),
                Box::new(called.clone()),
                Box::new(received.clone()),
                Box::new(sent.clone()),
                Box::new(processed.clone()),
                Box::new(duration.clone()),
            ],
        );
        Self {
            security: SecurityMetrics::new(&registry),
            config: ConfigMetrics::new(&registry),
            plugins: Families::new(&registry),
            broker: BrokerMetrics::new(&registry),
            ready: register_process_and_build(&registry),
            exported: ExportedMetrics::new(registry.clone()),
            registry,
            subscribers,
            called,
            received,
            sent,
            processed,
            duration,
            listener_up,
            listener_lost,
            listeners: Arc::default(),
            per_consumer: true,
        }
    }

    /// One `consumer` label for all clusters: a hub with thousands of clusters keeps a handful of
    /// broker series instead of several per cluster (each costs memory here and in Prometheus).
    pub fn without_consumer_label(mut self) -> Self {
        self.per_consumer = false;
        self
    }

    fn consumer<'a>(&self, cluster: &'a str) -> &'a str {
        if self.per_consumer { cluster } else { ALL_CONSUMERS }
    }

    /// The metrics of the plugin `name`.
    pub fn plugin(&self, name: &str) -> PluginMetrics {
        self.plugins.of(name)
    }

    /// Why the replica is not ready on account of its plugins: a limit of theirs refused a host
    /// call within `window` (log lines aside). `Ok` when none did.
    pub fn plugin_limits_ready(&self, window: std::time::Duration) -> Result<(), String> {
        let now = unix_now();
        let since = now - window.as_secs() as i64;
        let refused = self.plugins.refused_since(since);
        if refused.is_empty() {
            return Ok(());
        }
        Err(refused
            .iter()
            .map(|(plugin, limit, at)| {
                format!(
                    "plugin {plugin:?}: limits.{limit} refused a host call {}s ago: what it keeps is full, so it may not serve everything (raise [plugins.{plugin}.limits] {limit})\n",
                    (now - at).max(0)
                )
            })
            .collect())
    }

    /// Takes the series of the plugin `name`, which no longer runs, out of `/metrics`.
    pub fn forget_plugin(&self, name: &str) {
        self.plugins.forget(name);
        self.exported.forget(name);
    }

    /// The series of a LISTEN on `channel` of `database`, held while the LISTEN runs: they stay
    /// until the last LISTEN held there lets go of its own.
    pub fn listener_series(&self, database: &str, channel: &str) -> ListenerSeries {
        *self
            .listeners
            .lock()
            .entry((database.to_owned(), channel.to_owned()))
            .or_default() += 1;
        ListenerSeries {
            metrics: self.clone(),
            database: database.to_owned(),
            channel: channel.to_owned(),
        }
    }

    /// A LISTEN was given up (its plugin was unloaded or replaced); with the last one on its
    /// channel, its series leave `/metrics`.
    fn listener_removed(&self, database: &str, channel: &str) {
        {
            let mut held = self.listeners.lock();
            let key = (database.to_owned(), channel.to_owned());
            if let Some(count) = held.get_mut(&key)
                && *count > 1
            {
                *count -= 1;
                return;
            }
            held.remove(&key);
        }
        let _ = self.listener_up.remove_label_values(&[database, channel]);
        let _ = self.listener_lost.remove_label_values(&[database, channel]);
    }

    /// A Publish whose event decoded: counts it as called and received.
    pub fn publish_received(&self, consumer: &str, data_type: &str) {
        self.called
            .with_label_values(&[self.consumer(consumer), data_type, PUBLISH])
            .inc();
        self.received
            .with_label_values(&[self.consumer(consumer), data_type, PUBLISH])
            .inc();
    }

    /// A Publish the handler answered successfully.
    pub fn publish_sent(&self, consumer: &str, data_type: &str) {
        self.sent
            .with_label_values(&[self.consumer(consumer), data_type, PUBLISH])
            .inc();
    }

    /// The end of a Publish call, with its duration.
    pub fn publish_processed(&self, consumer: &str, data_type: &str, code: tonic::Code, seconds: f64) {
        let code = code_name(code);
        self.processed
            .with_label_values(&[self.consumer(consumer), data_type, PUBLISH, code])
            .inc();
        self.duration
            .with_label_values(&[self.consumer(consumer), data_type, PUBLISH, code])
            .observe(seconds);
    }

    /// A Subscribe request read: counts it and returns the counter of messages sent on it.
    pub fn subscribe_received(&self, consumer: &str, data_type: &str) -> Series {
        self.called
            .with_label_values(&[self.consumer(consumer), data_type, SUBSCRIBE])
            .inc();
        self.received
            .with_label_values(&[self.consumer(consumer), data_type, SUBSCRIBE])
            .inc();
        self.sent
            .with_label_values(&[self.consumer(consumer), data_type, SUBSCRIBE])
    }

    /// The end of a Subscribe call.
    pub fn subscribe_processed(&self, consumer: &str, data_type: &str, code: tonic::Code) {
        self.processed
            .with_label_values(&[self.consumer(consumer), data_type, SUBSCRIBE, code_name(code)])
            .inc();
    }

    pub fn subscriber_added(&self, consumer: &str, data_type: &str) {
        self.subscribers
            .with_label_values(&[self.consumer(consumer), data_type])
            .inc();
    }

    pub fn subscriber_removed(&self, consumer: &str, data_type: &str) {
        self.subscribers
            .with_label_values(&[self.consumer(consumer), data_type])
            .dec();
    }

    /// By cluster (the number of its `consumer` value): everything its broker series counted so
    /// far, and its subscribers now. Empty when the series carry no cluster's name.
    pub(super) fn consumer_activity(&self) -> (HashMap<u32, i64>, HashMap<u32, i64>) {
        let (mut counted, mut subscribers) = (HashMap::new(), HashMap::new());
        if self.per_consumer {
            for family in [&self.called, &self.received, &self.sent, &self.processed] {
                family.sum_by(0, &mut counted);
            }
            self.duration.count_by(0, &mut counted);
            self.subscribers.sum_by(0, &mut subscribers);
        }
        (counted, subscribers)
    }

    /// Takes every broker series of the cluster whose `consumer` value is numbered `consumer` out
    /// of `/metrics` (and its name out of memory).
    pub(super) fn forget_consumer(&self, consumer: u32) {
        for family in [
            &self.subscribers,
            &self.called,
            &self.received,
            &self.sent,
            &self.processed,
        ] {
            family.forget(0, consumer);
        }
        self.duration.forget(0, consumer);
    }

    /// Whether the process is ready, as `/readyz` says.
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let encoder = TextEncoder::new();
        if encoder.encode(&self.registry.gather(), &mut buf).is_err() {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// The process's own metrics (CPU, memory, file descriptors, start time), the build's version,
/// and the readiness gauge, which it returns.
fn register_process_and_build(registry: &MetricsRegistry) -> prometheus::IntGauge {
    #[cfg(target_os = "linux")]
    registry
        .register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))
        .expect("metric registered once");
    let build = gauges(
        "conductor_build_info",
        "The running build: its version, plugin contract and commit (always 1).",
        &["version", "contract", "revision"],
    );
    build
        .with_label_values(&[build_info::VERSION, build_info::CONTRACT, build_info::COMMIT])
        .set(1);
    let ready = gauge(
        "conductor_ready",
        "1 when the process should receive traffic (/readyz answers 200), else 0.",
    );
    register(
        registry,
        [Box::new(build) as Box<dyn Collector>, Box::new(ready.clone())],
    );
    ready
}

/// One LISTEN's hold on the series of its (database, channel) ([`Metrics::listener_series`]):
/// shared with another LISTEN there (a replaced plugin's and its successor's), given up when
/// dropped.
pub struct ListenerSeries {
    metrics: Metrics,
    database: String,
    channel: String,
}

impl ListenerSeries {
    /// The LISTEN connection came up (`true`) or was lost (`false`).
    pub fn set(&self, up: bool) {
        let labels = [self.database.as_str(), self.channel.as_str()];
        self.metrics.listener_up.with_label_values(&labels).set(i64::from(up));
        // At 0 from the first time the LISTEN comes up, so a loss is an increase.
        let lost = self.metrics.listener_lost.with_label_values(&labels);
        if !up {
            lost.inc();
        }
    }
}

impl Drop for ListenerSeries {
    fn drop(&mut self) {
        self.metrics.listener_removed(&self.database, &self.channel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_series_leaves_with_the_last_listen_on_its_channel() {
        let m = Metrics::new();
        let up = r#"conductor_database_listener_up{channel="events",database="maestro"} 1"#;
        // A plugin replaced: its successor's LISTEN is held and up before the old one goes.
        let old = m.listener_series("maestro", "events");
        old.set(true);
        let new = m.listener_series("maestro", "events");
        new.set(true);
        drop(old);
        assert!(m.render().contains(up), "{}", m.render());
        // Unloaded: the last one goes, and its series with it.
        drop(new);
        let text = m.render();
        assert!(!text.contains("conductor_database_listener_up{"), "{text}");
        assert!(!text.contains("conductor_database_listener_lost_total{"), "{text}");
        // Given up once more than held (nothing held): nothing to take out, no panic.
        m.listener_removed("maestro", "events");
    }

    #[test]
    fn a_plugin_that_no_longer_runs_leaves_metrics() {
        let m = Metrics::new();
        for name in ["gone", "kept"] {
            let p = m.plugin(name);
            p.called(crate::telemetry::plugin_metrics::PluginCall::Handle, 0.01, true);
            p.limit_hit("kv_keys");
            let declared = m
                .exported
                .declare(
                    name,
                    "widgets",
                    &[conductor_plugin_sdk::MetricDescription {
                        name: "widgets_made_total".into(),
                        kind: conductor_plugin_sdk::MetricKind::Counter,
                        help: "h".into(),
                        labels: vec![],
                    }],
                    10,
                )
                .unwrap();
            declared
                .record(
                    conductor_plugin_sdk::MetricKind::Counter,
                    "widgets_made_total",
                    &[],
                    1.0,
                )
                .unwrap();
        }
        assert!(m.render().contains("plugin=\"gone\""));
        m.forget_plugin("gone");
        let text = m.render();
        assert!(!text.contains("plugin=\"gone\""), "{text}");
        assert!(
            text.contains("conductor_plugin_calls_total{call=\"handle\",outcome=\"ok\",plugin=\"kept\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("conductor_widgets_made_total{plugin=\"kept\"} 1"),
            "{text}"
        );
        m.forget_plugin("kept");
        assert!(
            !m.render().contains("conductor_widgets_made_total"),
            "no plugin declares it any more"
        );
    }

    #[test]
    fn names_labels_and_help_follow_upstream() {
        let m = Metrics::new();
        m.subscriber_added("cluster1", "a.v1.b");
        m.publish_received("cluster1", "a.v1.b");
        m.publish_processed("cluster1", "a.v1.b", tonic::Code::FailedPrecondition, 0.001);
        let text = m.render();
        assert!(
            text.contains("grpc_server_ce_subscribers{consumer=\"cluster1\",data_type=\"a.v1.b\"} 1"),
            "{text}"
        );
        assert!(text.contains("# HELP grpc_server_ce_called_total [ALPHA] "), "{text}");
        assert!(text.contains(
            "grpc_server_ce_processed_total{consumer=\"cluster1\",data_type=\"a.v1.b\",grpc_code=\"FailedPrecondition\",method=\"Publish\"} 1"
        ), "{text}");
        assert!(
            text.contains("grpc_server_ce_processing_duration_seconds_bucket"),
            "{text}"
        );
        assert!(text.contains("le=\"1000\""), "buckets reach 1e3: {text}");
    }

    #[test]
    fn without_the_consumer_label_every_cluster_shares_one_series() {
        let m = Metrics::new().without_consumer_label();
        m.subscriber_added("cluster1", "a.v1.b");
        m.subscriber_added("cluster2", "a.v1.b");
        m.subscribe_received("cluster2", "a.v1.b").inc();
        let text = m.render();
        assert!(
            text.contains("grpc_server_ce_subscribers{consumer=\"*\",data_type=\"a.v1.b\"} 2"),
            "{text}"
        );
        assert!(!text.contains("cluster1") && !text.contains("cluster2"), "{text}");
    }
}
