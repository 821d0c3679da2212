//! Counters, gauges and histograms with many label sets, held compactly.
//!
//! The broker's series are labelled by cluster, so a hub with 10,000 agents has tens of thousands
//! of label sets. The `prometheus` crate keeps a full copy of the metric's description and label
//! pairs in each (about 2 KB; 8.7 KB per agent in the scale benchmark); here a label set is the
//! numbers of its values (each value is held once for the process, in [`LabelValues`]) and what
//! it counts, and the families are built only when `/metrics` is scraped.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use hashbrown::HashTable;
use parking_lot::RwLock;
use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, Bucket, Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

use super::label_values::LabelValues;

/// One label set's counter or gauge; cheap to clone and to bump.
#[derive(Clone, Debug, Default)]
pub struct Series(Arc<AtomicI64>);

impl Series {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One label set's histogram: the family's bucket bounds and, in one allocation, a count per
/// bucket (not cumulative), the sum's `f64` bits and the count.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: Arc<[f64]>,
    cells: Arc<[AtomicU64]>,
}

impl Histogram {
    fn new(bounds: &Arc<[f64]>) -> Self {
        // Zero is also the bits of the sum's 0.0.
        Self {
            bounds: Arc::clone(bounds),
            cells: (0..bounds.len() + 2).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn sum(&self) -> &AtomicU64 {
        &self.cells[self.bounds.len()]
    }

    fn count(&self) -> &AtomicU64 {
        &self.cells[self.bounds.len() + 1]
    }

    pub fn observe(&self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
            self.cells[i].fetch_add(1, Ordering::Relaxed);
        }
        let _ = self.sum().fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            Some((f64::from_bits(bits) + v).to_bits())
        });
        self.count().fetch_add(1, Ordering::Relaxed);
    }

    fn to_proto(&self) -> proto::Histogram {
        let mut cumulative = 0;
        let buckets = self
            .bounds
            .iter()
            .zip(self.cells.iter())
            .map(|(bound, n)| {
                cumulative += n.load(Ordering::Relaxed);
                let mut b = Bucket::default();
                b.set_upper_bound(*bound);
                b.set_cumulative_count(cumulative);
                b
            })
            .collect();
        let mut h = proto::Histogram::default();
        h.set_bucket(buckets);
        h.set_sample_sum(f64::from_bits(self.sum().load(Ordering::Relaxed)));
        h.set_sample_count(self.count().load(Ordering::Relaxed));
        h
    }
}

/// The most labels a family has (`processed_total`: consumer, data type, method, code).
const MAX_LABELS: usize = 4;

/// One label set: the hash of its values, their numbers in [`LabelValues`], what it holds.
struct LabelSet<V> {
    hash: u64,
    values: [u32; MAX_LABELS],
    value: V,
}

/// A family's description and label sets.
struct Family<V> {
    desc: Desc,
    /// Label names, in the order values are given.
    labels: Vec<String>,
    hasher: RandomState,
    series: RwLock<HashTable<LabelSet<V>>>,
}

impl<V: Clone> Family<V> {
    fn new(name: &str, help: &str, labels: &[&str]) -> Self {
        assert!(labels.len() <= MAX_LABELS, "{name}: at most {MAX_LABELS} labels");
        let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
        Self {
            desc: Desc::new(name.to_owned(), help.to_owned(), labels.clone(), HashMap::new()).expect("valid metric"),
            labels,
            hasher: RandomState::new(),
            series: RwLock::default(),
        }
    }

    /// The value of `values` (one per label, in order), made by `make` at its first use.
    fn get(&self, values: &[&str], make: impl FnOnce() -> V) -> V {
        debug_assert_eq!(values.len(), self.labels.len());
        let hash = self.hasher.hash_one(values);
        {
            let names = LabelValues::read();
            let same = |set: &LabelSet<V>| {
                set.hash == hash && values.iter().zip(set.values).all(|(v, n)| names.value(n) == *v)
            };
            if let Some(set) = self.series.read().find(hash, same) {
                return set.value.clone();
            }
        }
        // The values' lock is taken (and let go) before the family's, never the other way round.
        let mut numbers = [0; MAX_LABELS];
        for (n, v) in numbers.iter_mut().zip(values) {
            *n = LabelValues::hold(v);
        }
        let held = &numbers[..values.len()];
        let mut all = self.series.write();
        let same = |set: &LabelSet<V>| set.hash == hash && set.values == numbers;
        if let Some(set) = all.find(hash, same) {
            let value = set.value.clone();
            drop(all);
            // Made meanwhile by another caller, which holds the values for it.
            LabelValues::release(held);
            return value;
        }
        let value = make();
        all.insert_unique(
            hash,
            LabelSet {
                hash,
                values: numbers,
                value: value.clone(),
            },
            |set| set.hash,
        );
        value
    }

    /// Takes out every label set whose label `index` is `value`, giving back the values they
    /// held.
    fn forget(&self, index: usize, value: u32) {
        let mut gone = Vec::new();
        self.series.write().retain(|set| {
            let keep = set.values[index] != value;
            if !keep {
                gone.extend_from_slice(&set.values[..self.labels.len()]);
            }
            keep
        });
        LabelValues::release(&gone);
    }

    /// `measure` of each label set, summed by the value of label `index`.
    fn sum_by(&self, index: usize, measure: impl Fn(&V) -> i64, into: &mut HashMap<u32, i64>) {
        for set in self.series.read().iter() {
            *into.entry(set.values[index]).or_default() += measure(&set.value);
        }
    }

    /// The family for a scrape: a metric per label set, labels sorted by name.
    fn collect(&self, kind: MetricType, fill: impl Fn(&V, &mut Metric)) -> Vec<MetricFamily> {
        let mut order: Vec<usize> = (0..self.labels.len()).collect();
        order.sort_by(|a, b| self.labels[*a].cmp(&self.labels[*b]));
        // The values' lock before the family's, as in `get`: never the other way round.
        let names = LabelValues::read();
        let series = self.series.read();
        let metrics = series
            .iter()
            .map(|set| {
                let mut m = Metric::default();
                let pairs = order
                    .iter()
                    .map(|&i| {
                        let mut pair = LabelPair::default();
                        pair.set_name(self.labels[i].clone());
                        pair.set_value(names.value(set.values[i]).to_owned());
                        pair
                    })
                    .collect();
                m.set_label(pairs);
                fill(&set.value, &mut m);
                m
            })
            .collect();
        let mut family = MetricFamily::default();
        family.set_name(self.desc.fq_name.clone());
        family.set_help(self.desc.help.clone());
        family.set_field_type(kind);
        family.set_metric(metrics);
        vec![family]
    }
}

/// A counter or gauge family. Clones share it.
#[derive(Clone)]
pub struct SeriesVec {
    family: Arc<Family<Series>>,
    kind: MetricType,
}

impl SeriesVec {
    pub fn counter(name: &str, help: &str, labels: &[&str]) -> Self {
        Self {
            family: Arc::new(Family::new(name, help, labels)),
            kind: MetricType::COUNTER,
        }
    }

    pub fn gauge(name: &str, help: &str, labels: &[&str]) -> Self {
        Self {
            family: Arc::new(Family::new(name, help, labels)),
            kind: MetricType::GAUGE,
        }
    }

    /// The series of `values` (one per label, in order), made at its first use.
    pub fn with_label_values(&self, values: &[&str]) -> Series {
        self.family.get(values, Series::default)
    }

    /// Takes out every series whose label `index` is `value` (numbered in [`LabelValues`]).
    pub fn forget(&self, index: usize, value: u32) {
        self.family.forget(index, value);
    }

    /// The series' values summed by the value of label `index`.
    pub fn sum_by(&self, index: usize, into: &mut HashMap<u32, i64>) {
        self.family.sum_by(index, Series::get, into);
    }
}

impl Collector for SeriesVec {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.family.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let gauge = self.kind == MetricType::GAUGE;
        self.family.collect(self.kind, |s, m| {
            let value = s.get() as f64;
            if gauge {
                let mut g = Gauge::default();
                g.set_value(value);
                m.set_gauge(g);
            } else {
                let mut c = Counter::default();
                c.set_value(value);
                m.set_counter(c);
            }
        })
    }
}

/// A histogram family with fixed bucket bounds. Clones share it.
#[derive(Clone)]
pub struct HistogramVec {
    family: Arc<Family<Histogram>>,
    bounds: Arc<[f64]>,
}

impl HistogramVec {
    pub fn new(name: &str, help: &str, labels: &[&str], bounds: Vec<f64>) -> Self {
        Self {
            family: Arc::new(Family::new(name, help, labels)),
            bounds: bounds.into(),
        }
    }

    pub fn with_label_values(&self, values: &[&str]) -> Histogram {
        self.family.get(values, || Histogram::new(&self.bounds))
    }

    /// Takes out every series whose label `index` is `value` (numbered in [`LabelValues`]).
    pub fn forget(&self, index: usize, value: u32) {
        self.family.forget(index, value);
    }

    /// The observations counted, summed by the value of label `index`.
    pub fn count_by(&self, index: usize, into: &mut HashMap<u32, i64>) {
        self.family.sum_by(
            index,
            |h| i64::try_from(h.count().load(Ordering::Relaxed)).unwrap_or(i64::MAX),
            into,
        );
    }
}

impl Collector for HistogramVec {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.family.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.family
            .collect(MetricType::HISTOGRAM, |h, m| m.set_histogram(h.to_proto()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(c: impl Collector + 'static) -> String {
        let registry = crate::telemetry::vectors::MetricsRegistry::new();
        registry.register(Box::new(c)).unwrap();
        let mut out = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn label_sets_are_made_once_and_exposed_with_sorted_labels() {
        let v = SeriesVec::counter("x_total", "X.", &["method", "consumer"]);
        v.with_label_values(&["Publish", "c1"]).inc();
        v.with_label_values(&["Publish", "c1"]).inc();
        v.with_label_values(&["Subscribe", "c1"]).inc();
        let text = render(v);
        assert!(text.contains("# TYPE x_total counter"), "{text}");
        assert!(text.contains("x_total{consumer=\"c1\",method=\"Publish\"} 2"), "{text}");
        assert!(
            text.contains("x_total{consumer=\"c1\",method=\"Subscribe\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn forgotten_series_give_back_their_label_values() {
        let v = SeriesVec::counter("y_total", "Y.", &["consumer", "method"]);
        v.with_label_values(&["series-test-gone", "Publish"]).inc();
        v.with_label_values(&["series-test-gone", "Subscribe"]).inc();
        v.with_label_values(&["series-test-stays", "Publish"]).inc();
        let gone = LabelValues::read().find("series-test-gone").unwrap();
        let mut sums = HashMap::new();
        v.sum_by(0, &mut sums);
        assert_eq!(sums[&gone], 2);
        v.forget(0, gone);
        let text = render(v.clone());
        assert!(!text.contains("series-test-gone"), "{text}");
        assert!(text.contains("series-test-stays"), "{text}");
        assert_eq!(LabelValues::read().find("series-test-gone"), None, "no set holds it");
        v.with_label_values(&["series-test-gone", "Publish"]).inc();
        assert!(render(v).contains("y_total{consumer=\"series-test-gone\",method=\"Publish\"} 1"));
    }

    /// The same observations give the same text as the `prometheus` crate's own histogram.
    #[test]
    fn histograms_render_as_prometheus_does() {
        let bounds = vec![0.001, 0.01, 0.1];
        let ours = HistogramVec::new("h_seconds", "H.", &["consumer"], bounds.clone());
        let theirs = prometheus::HistogramVec::new(
            prometheus::HistogramOpts::new("h_seconds", "H.").buckets(bounds),
            &["consumer"],
        )
        .unwrap();
        for v in [0.0005, 0.005, 0.05, 0.5, 0.01] {
            ours.with_label_values(&["c1"]).observe(v);
            theirs.with_label_values(&["c1"]).observe(v);
        }
        assert_eq!(render(ours), render(theirs));
    }
}
