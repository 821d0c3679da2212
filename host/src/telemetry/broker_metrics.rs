//! conductor's own metrics of the broker, beside upstream's `grpc_server_ce_*`: heartbeats,
//! subscribers cut off for not reading, events superseded in their queues, spec resyncs and what
//! they sent, and the subscribers' queues (read when scraped, from whatever registers a
//! [`QueueDepths`] source). Labelled by data type only: bounded by the data types the hub serves;
//! the work sent and never answered, by the plugin that sent it (bounded by the configuration).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use super::vectors::{MetricsRegistry, counters, gauge, gauges, register};

/// What a queue source reports at scrape time: per data type, the events waiting in all
/// subscribers' queues and in the fullest one (one per resource at most).
pub trait QueueDepths: Send + Sync {
    fn queue_depths(&self) -> BTreeMap<String, (usize, usize)>;
}

#[derive(Clone)]
pub struct BrokerMetrics {
    heartbeats: IntCounterVec,
    cut_off: IntCounterVec,
    superseded: IntCounterVec,
    resyncs: IntCounterVec,
    resync_events: IntCounterVec,
    queue_capacity: IntGauge,
    queues: QueueCollector,
    undelivered: IntGaugeVec,
    resent: IntCounterVec,
}

impl BrokerMetrics {
    pub(super) fn new(registry: &MetricsRegistry) -> Self {
        let queues = QueueCollector::new();
        let m = Self {
            heartbeats: counters(
                "conductor_heartbeats_sent_total",
                "Heartbeats sent on Subscribe streams (they are in grpc_server_ce_msg_sent_total too).",
                &["data_type"],
            ),
            cut_off: counters(
                "conductor_subscribers_cut_off_total",
                "Subscribe streams ended because their agent took nothing from its queue for broker.subscriber_stall_timeout (the agent reconnects and resyncs).",
                &["data_type"],
            ),
            superseded: counters(
                "conductor_subscriber_events_superseded_total",
                "Events folded into a state of the same resource already waiting in a subscriber's queue (the newer of the two is sent, in the first one's place).",
                &["data_type"],
            ),
            resyncs: counters(
                "conductor_resyncs_total",
                "Spec resync requests answered (ok) or failed (error).",
                &["data_type", "outcome"],
            ),
            resync_events: counters(
                "conductor_resync_events_sent_total",
                "Events sent in answer to spec resyncs: what the sources listed, and deletes of what the agent holds and no source has.",
                &["data_type", "kind"],
            ),
            queue_capacity: gauge(
                "conductor_subscriber_queue_capacity",
                "broker.subscriber_queue_size: the reference depth of a subscriber's queue, not a limit (a queue holds one event per resource at most).",
            ),
            queues,
            undelivered: gauges(
                "conductor_undelivered_resources",
                "Work spec events sent to a connected agent and not answered with a status within broker.undelivered_after (each is sent again once), by the plugin that sent them.",
                &["plugin"],
            ),
            resent: counters(
                "conductor_undelivered_resent_total",
                "Work spec events sent again because their agent did not answer them with a status within broker.undelivered_after (once per event).",
                &["plugin"],
            ),
        };
        register(
            registry,
            [
                Box::new(m.heartbeats.clone()) as Box<dyn Collector>,
                Box::new(m.cut_off.clone()),
                Box::new(m.superseded.clone()),
                Box::new(m.resyncs.clone()),
                Box::new(m.resync_events.clone()),
                Box::new(m.queue_capacity.clone()),
                Box::new(m.queues.clone()),
                Box::new(m.undelivered.clone()),
                Box::new(m.resent.clone()),
            ],
        );
        m
    }

    /// The heartbeat counter of `data_type`'s streams (looked up once per stream).
    pub fn heartbeats(&self, data_type: &str) -> IntCounter {
        self.heartbeats.with_label_values(&[data_type])
    }

    pub fn cut_off(&self, data_type: &str, subscribers: usize) {
        self.cut_off
            .with_label_values(&[data_type])
            .inc_by(u64::try_from(subscribers).unwrap_or(u64::MAX));
    }

    /// `events` events of `data_type` folded into a state of their resource already queued.
    pub fn superseded(&self, data_type: &str, events: usize) {
        self.superseded
            .with_label_values(&[data_type])
            .inc_by(u64::try_from(events).unwrap_or(u64::MAX));
    }

    /// A resync of `data_type` answered with `listed` and `deleted` events, or failed.
    pub fn resynced(&self, data_type: &str, outcome: Result<(usize, usize), ()>) {
        let ok = outcome.is_ok();
        self.resyncs
            .with_label_values(&[data_type, if ok { "ok" } else { "error" }])
            .inc();
        if let Ok((listed, deleted)) = outcome {
            for (kind, n) in [("listed", listed), ("deleted", deleted)] {
                self.resync_events
                    .with_label_values(&[data_type, kind])
                    .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
            }
        }
    }

    /// `plugin`'s work sent and unanswered past the deadline.
    pub fn undelivered(&self, plugin: &str, resources: usize) {
        self.undelivered
            .with_label_values(&[plugin])
            .set(i64::try_from(resources).unwrap_or(i64::MAX));
    }

    /// Makes `plugin`'s undelivered series exist, leaving their values as they are.
    pub fn undelivered_series(&self, plugin: &str) {
        self.undelivered.with_label_values(&[plugin]);
        self.resent.with_label_values(&[plugin]);
    }

    /// `plugin`'s undelivered series leave the scrape (it was removed).
    pub fn remove_undelivered_series(&self, plugin: &str) {
        let _ = self.undelivered.remove_label_values(&[plugin]);
        let _ = self.resent.remove_label_values(&[plugin]);
    }

    /// One of `plugin`'s work events sent again.
    pub fn resent(&self, plugin: &str) {
        self.resent.with_label_values(&[plugin]).inc();
    }

    /// The subscribers' queues: their size, and where their depths are read when scraped.
    pub fn queues(&self, capacity: usize, source: Weak<dyn QueueDepths>) {
        self.queue_capacity.set(i64::try_from(capacity).unwrap_or(i64::MAX));
        *self.queues.source.lock() = Some(source);
    }
}

/// `conductor_subscriber_queued_events` and `conductor_subscriber_queue_depth_max`, read from the
/// queue source when scraped.
#[derive(Clone)]
struct QueueCollector {
    descs: Vec<Desc>,
    source: Arc<parking_lot::Mutex<Option<Weak<dyn QueueDepths>>>>,
}

const QUEUED: (&str, &str) = (
    "conductor_subscriber_queued_events",
    "Events waiting in subscribers' queues, over all subscribers of a data type.",
);
const DEEPEST: (&str, &str) = (
    "conductor_subscriber_queue_depth_max",
    "Events waiting in the fullest subscriber queue of a data type.",
);

impl QueueCollector {
    fn new() -> Self {
        let desc = |(name, help): (&str, &str)| {
            Desc::new(
                name.to_owned(),
                help.to_owned(),
                vec!["data_type".to_owned()],
                Default::default(),
            )
            .expect("valid metric")
        };
        Self {
            descs: vec![desc(QUEUED), desc(DEEPEST)],
            source: Arc::default(),
        }
    }
}

impl Collector for QueueCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(source) = self.source.lock().as_ref().and_then(Weak::upgrade) else {
            return vec![];
        };
        let depths = source.queue_depths();
        let family = |(name, help): (&str, &str), pick: fn(&(usize, usize)) -> usize| {
            let gauge = super::vectors::gauges(name, help, &["data_type"]);
            for (data_type, d) in &depths {
                gauge
                    .with_label_values(&[data_type])
                    .set(i64::try_from(pick(d)).unwrap_or(i64::MAX));
            }
            gauge.collect()
        };
        let mut out = family(QUEUED, |d| d.0);
        out.extend(family(DEEPEST, |d| d.1));
        out
    }
}
