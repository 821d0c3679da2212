//! In-memory fakes of every host capability, so plugin logic is unit-tested natively, without a
//! runtime: build a [`FakeHost`], hand `fake.host()` to the plugin, then look at what it did.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::host::{Host, HostCalls, Level};
use crate::pg::{PgError, PgReply, PgRequest};
use crate::{ApiResource, CloudEvent};

/// What a plugin did to its host.
#[derive(Debug, Default)]
pub struct Recorded {
    pub emitted: Vec<CloudEvent>,
    pub logs: Vec<(Level, String)>,
    /// Active timers: name → (after_ms, repeat).
    pub timers: BTreeMap<String, (u64, bool)>,
    pub kv: BTreeMap<String, Vec<u8>>,
    /// Watches asked for: resource and namespace.
    pub watches: Vec<(ApiResource, Option<String>)>,
}

/// A host that records every call. `emit` answers with `subscribers`.
#[derive(Debug, Default)]
pub struct FakeHost {
    recorded: Mutex<Recorded>,
    config: String,
    subscribers: u32,
}

impl FakeHost {
    /// A fake whose `config()` returns `config` (JSON) and whose `emit` reaches one subscriber.
    pub fn new(config: serde_json::Value) -> Arc<Self> {
        Arc::new(Self {
            recorded: Mutex::default(),
            config: config.to_string(),
            subscribers: 1,
        })
    }

    /// A [`Host`] backed by this fake.
    pub fn host(self: &Arc<Self>) -> Host {
        Host::new(Box::new(Shared(Arc::clone(self))))
    }

    /// What the plugin did so far.
    pub fn recorded(&self) -> MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the events emitted so far.
    pub fn take_emitted(&self) -> Vec<CloudEvent> {
        std::mem::take(&mut self.recorded().emitted)
    }
}

struct Shared(Arc<FakeHost>);

impl HostCalls for Shared {
    fn emit(&self, event: &CloudEvent) -> Result<u32, String> {
        self.0.recorded().emitted.push(event.clone());
        Ok(self.0.subscribers)
    }
    fn log(&self, level: Level, message: &str) {
        self.0.recorded().logs.push((level, message.to_owned()));
    }
    fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) {
        self.0.recorded().timers.insert(name.to_owned(), (after_ms, repeat));
    }
    fn cancel_timer(&self, name: &str) {
        self.0.recorded().timers.remove(name);
    }
    fn kv_get(&self, key: &str) -> Option<Vec<u8>> {
        self.0.recorded().kv.get(key).cloned()
    }
    fn kv_set(&self, key: &str, value: &[u8]) {
        self.0.recorded().kv.insert(key.to_owned(), value.to_vec());
    }
    fn kv_delete(&self, key: &str) -> bool {
        self.0.recorded().kv.remove(key).is_some()
    }
    fn config(&self) -> String {
        self.0.config.clone()
    }
    fn kube_watch(&self, resource: &ApiResource, namespace: Option<&str>) -> Result<(), String> {
        let watch = (resource.clone(), namespace.map(str::to_owned));
        let mut recorded = self.0.recorded();
        if !recorded.watches.contains(&watch) {
            recorded.watches.push(watch);
        }
        Ok(())
    }
    fn pg(&self, request: PgRequest) -> Result<PgReply, PgError> {
        Err(PgError::new(format!(
            "FakeHost has no database (got {request:?}); test database code against PostgreSQL"
        )))
    }
}
