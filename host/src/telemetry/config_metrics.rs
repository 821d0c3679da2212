//! Metrics of configuration reloads, named as Prometheus names its own
//! (`prometheus_config_last_reload_successful`).

use prometheus::core::Collector;
use prometheus::{IntCounterVec, IntGauge, IntGaugeVec};

use super::vectors::{MetricsRegistry, counters, gauge, gauges, register, unix_now};

/// The triggers a reload can have (the `trigger` label).
pub const TRIGGERS: [&str; 4] = ["signal", "admin", "files", "source-plugins"];

/// Reloads by trigger and result, and what the last one left.
#[derive(Clone)]
pub struct ConfigMetrics {
    reloads: IntCounterVec,
    last_successful: IntGauge,
    last_success_time: IntGauge,
    restart_needed: IntGauge,
    source_plugins_refused: IntGaugeVec,
}

impl ConfigMetrics {
    pub fn new(registry: &MetricsRegistry) -> Self {
        let reloads = counters(
            "conductor_config_reloads_total",
            "Configuration reloads by what asked for them (signal, admin, files, source-plugins) and result (ok, error).",
            &["trigger", "result"],
        );
        let source_plugins_refused = gauges(
            "conductor_source_plugin_refused",
            "1 for each SourcePlugin whose spec this replica refuses, by reason (GrantsExceeded, LimitsExceeded, …) and whether the version admitted before keeps serving (serving=\"true\": a refused change, or a ceiling lowered below what it runs with).",
            &["plugin", "reason", "serving"],
        );
        let m = Self {
            source_plugins_refused,
            reloads,
            last_successful: gauge(
                "conductor_config_last_reload_successful",
                "1 when the last reload applied the configuration file (or none was tried), 0 when it was refused: the file on disk is not what runs.",
            ),
            last_success_time: gauge(
                "conductor_config_last_reload_success_timestamp_seconds",
                "When the running configuration was loaded (start or last applied reload), Unix seconds.",
            ),
            restart_needed: gauge(
                "conductor_config_restart_needed",
                "1 when an applied reload changed settings that take effect only on restart (server, auth, broker, admin, log, databases, kubernetes, telemetry, reload).",
            ),
        };
        for trigger in TRIGGERS {
            for result in ["ok", "error"] {
                m.reloads.with_label_values(&[trigger, result]);
            }
        }
        m.last_successful.set(1);
        m.last_success_time.set(unix_now());
        register(
            registry,
            [
                Box::new(m.reloads.clone()) as Box<dyn Collector>,
                Box::new(m.last_successful.clone()),
                Box::new(m.last_success_time.clone()),
                Box::new(m.restart_needed.clone()),
                Box::new(m.source_plugins_refused.clone()),
            ],
        );
        m
    }

    /// A reload asked for by `trigger` (one of [`TRIGGERS`]) ended: applied, and whether settings
    /// that need a restart changed; or refused.
    pub fn reloaded(&self, trigger: &str, outcome: Result<bool, ()>) {
        let result = if outcome.is_ok() { "ok" } else { "error" };
        self.reloads.with_label_values(&[trigger, result]).inc();
        self.last_successful.set(i64::from(outcome.is_ok()));
        if let Ok(restart_needed) = outcome {
            self.last_success_time.set(unix_now());
            if restart_needed {
                self.restart_needed.set(1);
            }
        }
    }
}

impl ConfigMetrics {
    /// The SourcePlugins refused now: (name, reason, whether an earlier version serves).
    pub fn source_plugins_refused<'a>(&self, refused: impl IntoIterator<Item = (&'a str, &'a str, bool)>) {
        self.source_plugins_refused.reset();
        for (plugin, reason, serving) in refused {
            let serving = if serving { "true" } else { "false" };
            self.source_plugins_refused
                .with_label_values(&[plugin, reason, serving])
                .set(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_reload_is_counted_and_shown_until_one_is_applied() {
        let registry = MetricsRegistry::new();
        let m = ConfigMetrics::new(&registry);
        let value = |name: &str| {
            registry
                .gather()
                .into_iter()
                .find(|f| f.name() == name)
                .map(|f| f.get_metric()[0].get_gauge().get_value())
        };
        assert_eq!(value("conductor_config_last_reload_successful"), Some(1.0));
        m.reloaded("files", Err(()));
        assert_eq!(value("conductor_config_last_reload_successful"), Some(0.0));
        m.reloaded("signal", Ok(true));
        assert_eq!(value("conductor_config_last_reload_successful"), Some(1.0));
        assert_eq!(value("conductor_config_restart_needed"), Some(1.0));
        let reloads = registry
            .gather()
            .into_iter()
            .find(|f| f.name() == "conductor_config_reloads_total")
            .unwrap();
        assert_eq!(
            reloads.get_metric().len(),
            TRIGGERS.len() * 2,
            "every trigger and result from the start"
        );
        let errors: f64 = reloads
            .get_metric()
            .iter()
            .filter(|m| m.get_label().iter().any(|l| l.value() == "error"))
            .map(|m| m.get_counter().get_value())
            .sum();
        assert_eq!(errors, 1.0);
    }
}
