//! The calls a plugin makes to its host, as one trait each backend answers: the WIT imports in a
//! WebAssembly component (`imports`), the C ABI in a native library (`native`), in-memory fakes in
//! unit tests (`fakes`).

use crate::kube::{KubeReply, KubeRequest};
use crate::metric::MetricKind;
use crate::pg::{PgReply, PgRequest};
use crate::{CloudEvent, Error};

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
    fn emit(&self, event: &CloudEvent) -> Result<u32, Error>;
    fn log(&self, level: Level, message: &str);
    fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) -> Result<(), Error>;
    fn cancel_timer(&self, name: &str);
    fn kv_get(&self, key: &str) -> Option<Vec<u8>>;
    fn kv_set(&self, key: &str, value: &[u8]) -> Result<(), Error>;
    fn kv_delete(&self, key: &str) -> bool;
    fn pg(&self, request: PgRequest) -> Result<PgReply, Error>;
    fn kube(&self, request: KubeRequest) -> Result<KubeReply, Error>;
    /// A [`KubeRequest::Watch`] with `options` (`kube.watch-with`, contract 0.6.2). By default the
    /// options are not passed on (they are hints; the native ABI carries none) and it is a plain
    /// watch.
    fn kube_watch_with(&self, request: KubeRequest, options: crate::kube::WatchOptions) -> Result<KubeReply, Error> {
        let _ = options;
        self.kube(request)
    }
    fn metric(&self, kind: MetricKind, name: &str, labels: &[&str], value: f64) -> Result<(), Error>;
    fn blob(&self, name: &str) -> Result<Vec<u8>, Error>;
    /// Requests waiting for the plugin, for the running `handle_batch` to take (none by default:
    /// a backend without a line).
    fn take_waiting(&self, max: usize) -> Vec<crate::request::Request> {
        let _ = max;
        Vec::new()
    }
}
