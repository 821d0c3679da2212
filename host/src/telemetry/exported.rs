//! Metrics plugins export (the `metrics` capability): each declared in the plugin's description,
//! registered beside the host's as `conductor_<name>` with the label `plugin` (the configured
//! name) and the plugin's own labels. A family is shared by the plugins that declare it alike
//! (two copies of one plugin under two names); a name that clashes with another family is refused
//! when the plugin loads, unless the family is only the same plugin's (a reload that changed it).
//! A plugin may hold at most `limits.metric_series` series.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use conductor_plugin_sdk::{MetricDescription, MetricKind};
use parking_lot::Mutex;
use prometheus::{CounterVec, GaugeVec, Opts};

use super::vectors::{MetricsRegistry, forget_plugin};

/// The families plugins declared, by exported name.
#[derive(Clone)]
pub struct ExportedMetrics {
    registry: MetricsRegistry,
    families: Arc<Mutex<HashMap<String, Family>>>,
}

#[derive(Clone)]
struct Family {
    kind: MetricKind,
    labels: Vec<String>,
    values: Values,
    /// The configured names of the plugins that declared it.
    owners: HashSet<String>,
}

#[derive(Clone)]
enum Values {
    Counter(CounterVec),
    Gauge(GaugeVec),
}

impl Values {
    fn collector(&self) -> Box<dyn prometheus::core::Collector> {
        match self {
            Self::Counter(c) => Box::new(c.clone()),
            Self::Gauge(g) => Box::new(g.clone()),
        }
    }
}

/// What one loaded plugin declared, and the series it holds.
pub struct Declared {
    plugin: String,
    metrics: HashMap<String, Family>,
    series: Mutex<HashSet<(String, Vec<String>)>>,
    max_series: usize,
}

/// Why a metric call was refused.
#[derive(Debug, thiserror::Error)]
pub enum MetricRefused {
    #[error("{0}")]
    Invalid(String),
    #[error("the plugin holds {0} series (limits.metric_series)")]
    Series(usize),
}

fn is_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl ExportedMetrics {
    pub(super) fn new(registry: MetricsRegistry) -> Self {
        Self {
            registry,
            families: Arc::default(),
        }
    }

    /// Registers what `plugin` (its configured name; `described` is the name it declares)
    /// declares, or says which metric cannot be and why.
    pub fn declare(
        &self,
        plugin: &str,
        described: &str,
        metrics: &[MetricDescription],
        max_series: usize,
    ) -> Result<Declared, String> {
        check(described, metrics)?;
        let mut declared = HashMap::new();
        let mut families = self.families.lock();
        for m in metrics {
            let exported = format!("conductor_{}", m.name);
            let family = match families.get_mut(&exported) {
                Some(f) if f.kind == m.kind && f.labels == m.labels => {
                    f.owners.insert(plugin.to_owned());
                    f.clone()
                }
                Some(f) if f.owners.iter().any(|owner| owner != plugin) => {
                    return Err(format!(
                        "metric {:?}: plugin(s) {:?} export {exported} with another kind or labels",
                        m.name, f.owners
                    ));
                }
                found => {
                    if let Some(old) = found {
                        // Only this plugin's, declared otherwise before a reload: replaced.
                        let _ = self.registry.unregister(old.values.collector());
                    }
                    let mut labels = vec!["plugin"];
                    labels.extend(m.labels.iter().map(String::as_str));
                    let help = if m.help.is_empty() {
                        "A plugin's metric."
                    } else {
                        &m.help
                    };
                    let opts = Opts::new(&exported, help);
                    let values = match m.kind {
                        MetricKind::Counter => CounterVec::new(opts, &labels).map(Values::Counter),
                        MetricKind::Gauge => GaugeVec::new(opts, &labels).map(Values::Gauge),
                    }
                    .map_err(|e| e.to_string())?;
                    self.registry
                        .register(values.collector())
                        .map_err(|e| format!("metric {:?}: cannot be exported as {exported}: {e}", m.name))?;
                    let family = Family {
                        kind: m.kind,
                        labels: m.labels.clone(),
                        values,
                        owners: HashSet::from([plugin.to_owned()]),
                    };
                    families.insert(exported, family.clone());
                    family
                }
            };
            declared.insert(m.name.clone(), family);
        }
        Ok(Declared {
            plugin: plugin.to_owned(),
            metrics: declared,
            series: Mutex::default(),
            max_series,
        })
    }
}

impl ExportedMetrics {
    /// The plugin `plugin` (its configured name) no longer runs: its series go, and a family
    /// no other plugin declares goes with them.
    pub fn forget(&self, plugin: &str) {
        let mut families = self.families.lock();
        families.retain(|_, family| {
            if !family.owners.remove(plugin) {
                return true;
            }
            match &family.values {
                Values::Counter(c) => forget_plugin(c, plugin),
                Values::Gauge(g) => forget_plugin(g, plugin),
            }
            if family.owners.is_empty() {
                let _ = self.registry.unregister(family.values.collector());
                return false;
            }
            true
        });
    }
}

/// Whether a plugin declared as `described` may declare `metrics`: each named
/// `<described>_<what>` (with `-` as `_`), in lowercase letters, digits and `_`, with label names
/// alike (not `plugin`), each once.
pub fn check(described: &str, metrics: &[MetricDescription]) -> Result<(), String> {
    let prefix = format!("{}_", described.replace('-', "_"));
    let mut seen = HashSet::new();
    for m in metrics {
        if !is_name(&m.name) || !m.name.starts_with(&prefix) || m.name.len() == prefix.len() {
            return Err(format!(
                "metric {:?}: a name is {prefix}<what>, in lowercase letters, digits and _",
                m.name
            ));
        }
        if !seen.insert(&m.name) {
            return Err(format!("metric {:?} is declared twice", m.name));
        }
        if let Some(bad) = m.labels.iter().find(|l| !is_name(l) || *l == "plugin") {
            return Err(format!(
                "metric {:?}: label {bad:?} is not a label name (lowercase letters, digits and _; not `plugin`)",
                m.name
            ));
        }
    }
    Ok(())
}

impl Declared {
    /// Adds to the counter or sets the gauge `name` with `labels`.
    pub fn record(&self, kind: MetricKind, name: &str, labels: &[&str], value: f64) -> Result<(), MetricRefused> {
        let family = self.metrics.get(name).ok_or_else(|| {
            MetricRefused::Invalid(format!("metric {name:?} is not declared in the plugin's description"))
        })?;
        if family.kind != kind {
            return Err(MetricRefused::Invalid(format!(
                "metric {name:?} is a {:?}, not a {kind:?}",
                family.kind
            )));
        }
        if labels.len() != family.labels.len() {
            return Err(MetricRefused::Invalid(format!(
                "metric {name:?} takes {} label values ({:?}), not {}",
                family.labels.len(),
                family.labels,
                labels.len()
            )));
        }
        if !value.is_finite() || (kind == MetricKind::Counter && value < 0.0) {
            return Err(MetricRefused::Invalid(format!(
                "metric {name:?}: {value} is not a value to {}",
                if kind == MetricKind::Counter {
                    "add to a counter"
                } else {
                    "set"
                }
            )));
        }
        {
            let mut series = self.series.lock();
            let key = (name.to_owned(), labels.iter().map(|l| (*l).to_owned()).collect());
            if !series.contains(&key) {
                if series.len() >= self.max_series {
                    return Err(MetricRefused::Series(self.max_series));
                }
                series.insert(key);
            }
        }
        let mut values = vec![self.plugin.as_str()];
        values.extend_from_slice(labels);
        match &family.values {
            Values::Counter(c) => c.with_label_values(&values).inc_by(value),
            Values::Gauge(g) => g.with_label_values(&values).set(value),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(name: &str, kind: MetricKind, labels: &[&str]) -> MetricDescription {
        MetricDescription {
            name: name.into(),
            kind,
            help: "h".into(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        }
    }

    #[test]
    fn declared_metrics_are_exported_bounded_and_checked() {
        let registry = MetricsRegistry::new();
        let exported = ExportedMetrics::new(registry.clone());
        let declared = exported
            .declare(
                "maestro-a",
                "maestro",
                &[
                    metric("maestro_events", MetricKind::Gauge, &["state"]),
                    metric("maestro_runs_total", MetricKind::Counter, &[]),
                ],
                2,
            )
            .unwrap();
        declared
            .record(MetricKind::Gauge, "maestro_events", &["waiting"], 3.0)
            .unwrap();
        declared
            .record(MetricKind::Counter, "maestro_runs_total", &[], 1.0)
            .unwrap();
        declared
            .record(MetricKind::Counter, "maestro_runs_total", &[], 2.0)
            .unwrap();
        assert!(matches!(
            declared.record(MetricKind::Gauge, "maestro_events", &["other"], 1.0),
            Err(MetricRefused::Series(2))
        ));
        for (kind, name, labels, value) in [
            (MetricKind::Gauge, "maestro_undeclared", &[][..], 1.0),
            (MetricKind::Gauge, "maestro_runs_total", &[], 1.0),
            (MetricKind::Gauge, "maestro_events", &[], 1.0),
            (MetricKind::Counter, "maestro_runs_total", &[], -1.0),
        ] {
            assert!(matches!(
                declared.record(kind, name, labels, value),
                Err(MetricRefused::Invalid(_))
            ));
        }
        use prometheus::Encoder as _;
        let mut text = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut text)
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("conductor_maestro_events{plugin=\"maestro-a\",state=\"waiting\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("conductor_maestro_runs_total{plugin=\"maestro-a\"} 3"),
            "{text}"
        );

        // Another copy declaring alike shares the families; a clash is refused at load.
        assert!(
            exported
                .declare(
                    "maestro-b",
                    "maestro",
                    &[metric("maestro_events", MetricKind::Gauge, &["state"])],
                    10
                )
                .is_ok()
        );
        for (bad, why) in [
            (
                metric("maestro_events", MetricKind::Counter, &["state"]),
                "another kind",
            ),
            (
                metric("kube_requests_total", MetricKind::Counter, &[]),
                "maestro_<what>",
            ),
            (metric("maestro_x", MetricKind::Gauge, &["plugin"]), "not a label name"),
            (metric("maestro_", MetricKind::Gauge, &[]), "maestro_<what>"),
        ] {
            let e = exported.declare("m", "maestro", &[bad], 10).err().unwrap();
            assert!(e.contains(why), "{e}");
        }
    }
}
