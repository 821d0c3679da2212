//! The host's capabilities as a plugin sees them. In a WebAssembly component every method calls
//! the WIT import directly (so a component imports only the capabilities it uses); in a native
//! library it calls the host through the C ABI; in unit tests it uses `fakes::FakeHost`.

use std::marker::PhantomData;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

mod database;
mod kube;

pub use database::{Database, Transaction};
pub use kube::Kube;

#[cfg(not(target_arch = "wasm32"))]
use crate::calls::HostCalls;
use crate::calls::Level;
use crate::kube::{KubeReply, KubeRequest, WatchOptions};
use crate::metric::MetricKind;
use crate::pg::{PgReply, PgRequest, PgRows, Statement, TransactionId};
use crate::{CloudEvent, Error};

/// The host, handed to every plugin call.
pub struct Host {
    #[cfg(not(target_arch = "wasm32"))]
    calls: Box<dyn HostCalls>,
}

/// Calls the backend: the WIT imports in a component, the boxed backend elsewhere.
macro_rules! call {
    ($self:ident, $method:ident($($arg:expr),*)) => {{
        #[cfg(target_arch = "wasm32")]
        {
            let _ = $self;
            crate::imports::$method($($arg),*)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            $self.calls.$method($($arg),*)
        }
    }};
}

impl Host {
    /// A host backed by `calls` (the native ABI, or a fake in tests).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(calls: Box<dyn HostCalls>) -> Self {
        Self { calls }
    }

    /// The host of a WebAssembly component: its imports.
    #[cfg(target_arch = "wasm32")]
    pub fn component() -> Self {
        Self {}
    }

    /// Hands a hub → agent event to the broker; returns how many subscribers received it.
    pub fn emit(&self, event: &CloudEvent) -> Result<u32, Error> {
        call!(self, emit(event))
    }

    pub fn log(&self, level: Level, message: &str) {
        call!(self, log(level, message))
    }

    pub fn debug(&self, message: &str) {
        self.log(Level::Debug, message)
    }

    pub fn info(&self, message: &str) {
        self.log(Level::Info, message)
    }

    pub fn warn(&self, message: &str) {
        self.log(Level::Warn, message)
    }

    pub fn error(&self, message: &str) {
        self.log(Level::Error, message)
    }

    /// Starts (or restarts) the named timer; it arrives as `HostEvent::Timer(name)`, once however
    /// often it went off while its last firing was still queued. A new timer past the plugin's
    /// `limits.timers` is refused.
    pub fn set_timer(&self, name: &str, after: Duration, repeat: bool) -> Result<(), Error> {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        call!(self, set_timer(name, ms, repeat))
    }

    pub fn cancel_timer(&self, name: &str) {
        call!(self, cancel_timer(name))
    }

    pub fn kv_get(&self, key: &str) -> Option<Vec<u8>> {
        call!(self, kv_get(key))
    }

    /// Refused past the plugin's `limits.kv_keys` or `limits.kv_bytes`; the value kept is then
    /// unchanged.
    pub fn kv_set(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        call!(self, kv_set(key, value))
    }

    pub fn kv_delete(&self, key: &str) -> bool {
        call!(self, kv_delete(key))
    }

    /// Up to `max` agent requests that arrived for the plugin while its `handle_batch` runs,
    /// oldest first, for that call to take into its work (one transaction for what would have
    /// waited for the next call). `handle_batch` then returns one result for each, after those of
    /// the requests it was given, in the order taken. The host bounds what one call takes in all
    /// by the plugin's `limits.request_batch`. None outside `handle_batch`, and none in a native
    /// library (its ABI has no line to take from): only a component takes (contract 0.6.1).
    ///
    /// ```
    /// # use conductor_plugin_sdk::{CloudEvent, Identity, Request};
    /// let fake = conductor_plugin_sdk::fakes::FakeHost::new();
    /// for id in ["a", "b"] {
    ///     let identity = Identity { user: "agent".into(), groups: vec![] };
    ///     fake.put_waiting(Request { identity, event: CloudEvent::new(id, "s", "t") });
    /// }
    /// let host = fake.host();
    /// let taken: Vec<String> = host.take_waiting(1).into_iter().map(|r| r.event.id).collect();
    /// assert_eq!(taken, ["a"], "oldest first, at most max");
    /// assert_eq!(host.take_waiting(10).len(), 1);
    /// assert!(host.take_waiting(10).is_empty());
    /// ```
    pub fn take_waiting(&self, max: usize) -> Vec<crate::request::Request> {
        call!(self, take_waiting(max))
    }

    /// The PostgreSQL database `name` (one of the plugin's `databases` in `conductor.toml`).
    pub fn pg(&self, name: &str) -> Database<'_> {
        Database::new(self, name)
    }

    pub(crate) fn pg_call(&self, request: PgRequest) -> Result<PgReply, Error> {
        call!(self, pg(request))
    }

    pub(crate) fn pg_begin_with(
        &self,
        database: &str,
        statements: Vec<Statement>,
    ) -> Result<(TransactionId, Vec<PgRows>), Error> {
        call!(self, pg_begin_with(database, statements))
    }

    pub(crate) fn pg_commit_with(
        &self,
        transaction: TransactionId,
        statements: Vec<Statement>,
    ) -> Result<Vec<PgRows>, Error> {
        call!(self, pg_commit_with(transaction, statements))
    }

    pub(crate) fn pg_run_all(
        &self,
        transaction: TransactionId,
        statements: Vec<Statement>,
    ) -> Result<Vec<PgRows>, Error> {
        call!(self, pg_run_all(transaction, statements))
    }

    /// The Kubernetes API server of `[kubernetes]`.
    pub fn kube(&self) -> Kube<'_> {
        Kube::new(self)
    }

    pub(crate) fn kube_call(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        call!(self, kube(request))
    }

    /// A [`KubeRequest::Watch`] with `options` (`kube.watch-with`).
    pub(crate) fn kube_watch_with(&self, request: KubeRequest, options: WatchOptions) -> Result<KubeReply, Error> {
        call!(self, kube_watch_with(request, options))
    }

    /// Adds `value` (at least 0) to the counter `name`, one of the plugin's declared metrics
    /// ([`crate::Description::metric`]), with its label values in the order declared.
    pub fn counter_add(&self, name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
        call!(self, metric(MetricKind::Counter, name, labels, value))
    }

    /// Sets the gauge `name`, one of the plugin's declared metrics.
    pub fn gauge_set(&self, name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
        call!(self, metric(MetricKind::Gauge, name, labels, value))
    }

    /// The contents of the file the operator named `name` for the plugin (`blobs`).
    pub fn read_blob(&self, name: &str) -> Result<Vec<u8>, Error> {
        call!(self, blob(name))
    }
}

/// A `kv` key holding a value of type `T` as JSON, shared by every instance of the plugin.
///
/// ```
/// use conductor_plugin_sdk::KvKey;
/// const SEEN: KvKey<Vec<String>> = KvKey::new("seen");
/// # let fake = conductor_plugin_sdk::fakes::FakeHost::new();
/// # let host = fake.host();
/// let mut seen = SEEN.get(&host).unwrap_or_default();
/// seen.push("cluster1".into());
/// SEEN.set(&host, &seen).unwrap();
/// assert_eq!(SEEN.get(&host), Some(vec!["cluster1".to_owned()]));
/// ```
pub struct KvKey<T> {
    name: &'static str,
    value: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> KvKey<T> {
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            value: PhantomData,
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The value, or `None` if unset (or unreadable: a value written by an older plugin version
    /// of another shape reads as unset).
    pub fn get(&self, host: &Host) -> Option<T> {
        host.kv_get(self.name).and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// Stores `value`; refused as [`Host::kv_set`] refuses.
    pub fn set(&self, host: &Host, value: &T) -> Result<(), Error> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| Error::Internal(format!("kv key {:?}: cannot encode the value: {e}", self.name)))?;
        host.kv_set(self.name, &bytes)
    }

    /// Removes the value; returns it if there was one.
    pub fn take(&self, host: &Host) -> Option<T> {
        let value = self.get(host);
        host.kv_delete(self.name);
        value
    }
}
