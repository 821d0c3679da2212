//! The host's capabilities as a plugin sees them. In a WebAssembly component every method calls
//! the WIT import directly (so a component imports only the capabilities it uses); in a native
//! library it calls the host through the C ABI; in unit tests it uses [`crate::fakes::FakeHost`].

use crate::pg::{Database, PgError, PgReply, PgRequest};
use crate::{ApiResource, CloudEvent};

/// Log levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// The calls a host answers; implemented by each backend.
pub trait HostCalls: Send + Sync {
    fn emit(&self, event: &CloudEvent) -> Result<u32, String>;
    fn log(&self, level: Level, message: &str);
    fn set_timer(&self, name: &str, after_ms: u64, repeat: bool);
    fn cancel_timer(&self, name: &str);
    fn kv_get(&self, key: &str) -> Option<Vec<u8>>;
    fn kv_set(&self, key: &str, value: &[u8]);
    fn kv_delete(&self, key: &str) -> bool;
    fn config(&self) -> String;
    fn pg(&self, request: PgRequest) -> Result<PgReply, PgError>;
    fn kube_watch(&self, resource: &ApiResource, namespace: Option<&str>) -> Result<(), String>;
}

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
            crate::component::imports::$method($($arg),*)
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
    pub fn emit(&self, event: &CloudEvent) -> Result<u32, String> {
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

    /// Starts (or restarts) the named timer; it arrives as `HostEvent::Timer(name)`.
    pub fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) {
        call!(self, set_timer(name, after_ms, repeat))
    }

    pub fn cancel_timer(&self, name: &str) {
        call!(self, cancel_timer(name))
    }

    pub fn kv_get(&self, key: &str) -> Option<Vec<u8>> {
        call!(self, kv_get(key))
    }

    pub fn kv_set(&self, key: &str, value: &[u8]) {
        call!(self, kv_set(key, value))
    }

    pub fn kv_delete(&self, key: &str) -> bool {
        call!(self, kv_delete(key))
    }

    /// The plugin's configuration table as JSON.
    pub fn config(&self) -> String {
        call!(self, config())
    }

    /// The PostgreSQL database `name` (one of the plugin's `databases` in `conductor.toml`).
    pub fn pg(&self, name: &str) -> Database<'_> {
        Database::new(self, name)
    }

    pub(crate) fn pg_call(&self, request: PgRequest) -> Result<PgReply, PgError> {
        call!(self, pg(request))
    }

    /// Watches the objects of `resource` (in `namespace`, or everywhere) on the host's
    /// Kubernetes API server: they arrive as [`crate::HostEvent::Kube`], first every existing
    /// object, then each change. Watching twice is one watch.
    pub fn kube_watch(&self, resource: &ApiResource, namespace: Option<&str>) -> Result<(), String> {
        call!(self, kube_watch(resource, namespace))
    }
}
