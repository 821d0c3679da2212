//! `[telemetry]`: traces exported to an OpenTelemetry collector.

use std::time::Duration;

use serde::Deserialize;

use super::{HumanDuration, Invalid, invalid};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Traces over OTLP/gRPC; unset, none are made.
    pub otlp: Option<OtlpConfig>,
}

/// `[telemetry.otlp]`: where spans go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector's OTLP/gRPC endpoint, e.g. `http://otel-collector.observability:4317`.
    pub endpoint: String,
    /// The `service.name` of the spans.
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// How long one export may take.
    #[serde(default = "default_timeout")]
    pub timeout: HumanDuration,
    /// The share of traces conductor starts that are kept, 0.0 to 1.0. A call continuing an
    /// agent's trace follows the agent's sampling decision instead.
    #[serde(default = "default_sample_ratio")]
    pub sample_ratio: f64,
}

fn default_sample_ratio() -> f64 {
    1.0
}

fn default_service_name() -> String {
    "conductor".to_owned()
}

fn default_timeout() -> HumanDuration {
    HumanDuration(Duration::from_secs(10))
}

impl TelemetryConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if let Some(otlp) = &self.otlp {
            if !(otlp.endpoint.starts_with("http://") || otlp.endpoint.starts_with("https://")) {
                return invalid(
                    "telemetry.otlp.endpoint",
                    format!(
                        "{:?} is not an OTLP/gRPC URL: http://host:4317 or https://…",
                        otlp.endpoint
                    ),
                );
            }
            if otlp.service_name.is_empty() {
                return invalid("telemetry.otlp.service_name", "must not be empty");
            }
            if !(0.0..=1.0).contains(&otlp.sample_ratio) {
                return invalid("telemetry.otlp.sample_ratio", "must be between 0.0 and 1.0");
            }
            if otlp.timeout.0.is_zero() {
                return invalid("telemetry.otlp.timeout", "must be longer than 0s");
            }
        }
        Ok(())
    }
}
