//! What the admin inspector (and `conductor plugins test`) reads of a loaded plugin: its
//! description, file and configuration, its instances and queued events, its `kv` state, its
//! call stats and the limits that refused its host calls.

use std::collections::BTreeMap;

use conductor_plugin_sdk::Description;

use super::capabilities::KvStore;
use super::file::PluginFile;
use super::source::PluginSource;
use super::stats::CallStatsSnapshot;
use crate::config::PluginConfig;
use crate::host_events::Waiting;

impl PluginSource {
    pub fn description(&self) -> &Description {
        &self.file.description
    }

    pub fn file(&self) -> &PluginFile {
        &self.file
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    pub fn instances(&self) -> usize {
        self.calls.instances()
    }

    /// What the plugin keeps in `kv` (shared by its instances, kept across reloads).
    pub fn kv(&self) -> &KvStore {
        self.capabilities.kv().store()
    }

    pub fn queued_events(&self) -> usize {
        self.events.len()
    }

    /// Its waiting host events by lane, with at most `lanes` of the deepest lanes.
    pub fn host_event_lanes(&self, lanes: usize) -> Waiting {
        self.events.waiting(lanes)
    }

    /// The limits that refused the plugin's host calls: by limit, how many times and when last.
    pub fn limit_refusals(&self) -> BTreeMap<String, (u64, i64)> {
        self.metrics.limit_refusals()
    }

    /// What its calls did so far.
    pub fn stats(&self) -> CallStatsSnapshot {
        self.calls.stats()
    }
}
