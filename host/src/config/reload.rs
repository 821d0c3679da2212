//! `[reload]`: whether conductor applies a changed configuration by itself.

use std::time::Duration;

use serde::Deserialize;

use super::{HumanDuration, Invalid, invalid};

/// Watching `conductor.toml` and the plugin files it names.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReloadConfig {
    /// Reload when `conductor.toml` or a plugin file it names changes (also when the kubelet
    /// swaps a mounted ConfigMap's files), as `conductor reload` does.
    pub watch: bool,
    /// How often the files are looked at (their identity, size and modification time).
    pub watch_interval: HumanDuration,
    /// A change is applied once the files have stayed the same this long (an editor's or a
    /// copy's several writes make one reload).
    pub debounce: HumanDuration,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        Self {
            watch: true,
            watch_interval: HumanDuration(Duration::from_secs(1)),
            debounce: HumanDuration(Duration::from_millis(500)),
        }
    }
}

impl ReloadConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if self.watch_interval.0 < Duration::from_millis(50) {
            return invalid("reload.watch_interval", "must be at least 50ms");
        }
        if self.debounce.0 > Duration::from_secs(60) {
            return invalid("reload.debounce", "must be at most 60s");
        }
        Ok(())
    }
}
