//! `[log]`: log format and filter.

use serde::Deserialize;

use super::{Invalid, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A `tracing` filter such as `info` or `conductor=debug,info`; `RUST_LOG` overrides it.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Human,
            level: "info".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Human,
    Json,
}

impl LogConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        match tracing_subscriber::EnvFilter::try_new(&self.level) {
            Ok(_) => Ok(()),
            Err(e) => invalid("log.level", format!("invalid filter {:?}: {e}", self.level)),
        }
    }
}
