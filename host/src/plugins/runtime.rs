//! What runs a loaded plugin, whatever it is — a component ([`wasm`](crate::plugins::wasm)) or a
//! native library ([`native`](crate::plugins::native)) — as the rest of the host sees it: the
//! [`Runtime`] trait, how long a call waits for an instance ([`Wait`]), why a call failed
//! ([`CallError`], by its type) and why a plugin did not load ([`LoadError`]).

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use conductor_plugin_sdk::Error;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};

/// A loaded plugin's calls, whatever runs it.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    async fn call(&self, request: PluginRequest, wait: Wait) -> Result<PluginReply, CallError>;
    /// How many instances exist now.
    fn instances(&self) -> usize;
}

/// How long a call waits for a free instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// At most the pool's wait, then `Unavailable` (agents' calls: they retry).
    Bounded,
    /// As long as it takes (the plugin's own work: `start`, host events).
    Patient,
}

/// Why a call into a plugin failed. It leaves the runtime as the SDK's [`Error`] (what agents
/// and logs see); the limit a call ran into, if any, is told by the variant ([`Self::limit`]).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call ran past `limits.call_timeout` waiting on the plugin (a native call, a host call):
    /// agents retry it (`Unavailable`).
    #[error("plugin {plugin} exceeded its call timeout of {timeout:?}")]
    TimedOut { plugin: String, timeout: Duration },
    /// A component was interrupted at its deadline: a trap (`Internal`), the instance replaced.
    #[error("plugin {plugin} exceeded its call timeout of {timeout:?}")]
    Interrupted { plugin: String, timeout: Duration },
    /// No instance freed up within `limits.acquire_timeout` (`Unavailable`).
    #[error("plugin {plugin:?} is busy: all {size} of its instances stayed in calls for {waited:?}")]
    Busy {
        plugin: String,
        size: usize,
        waited: Duration,
    },
    /// The plugin answered with an error, trapped or panicked, or the host refused the call.
    #[error(transparent)]
    Failed(#[from] Error),
}

impl CallError {
    /// The limit the call ran into, if it failed for time: as `conductor_plugin_timeouts_total`
    /// labels it.
    pub fn limit(&self) -> Option<&'static str> {
        match self {
            Self::TimedOut { .. } | Self::Interrupted { .. } => Some("call_timeout"),
            Self::Busy { .. } => Some("acquire_timeout"),
            Self::Failed(_) => None,
        }
    }
}

impl From<CallError> for Error {
    fn from(error: CallError) -> Self {
        match error {
            CallError::TimedOut { .. } | CallError::Busy { .. } => Error::Unavailable(error.to_string()),
            CallError::Interrupted { .. } => Error::Internal(error.to_string()),
            CallError::Failed(e) => e,
        }
    }
}

/// Why a plugin did not load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a plugin: {reason}")]
    NotAPlugin { path: PathBuf, reason: String },
    #[error("incompatible plugin: {0}")]
    Incompatible(String),
    #[error(
        "the plugin needs capabilities that are not granted: {missing:?} (granted: {granted:?}); add them to `grants` if you trust it"
    )]
    Ungranted { missing: Vec<String>, granted: Vec<String> },
    #[error("invalid description: {0}")]
    Description(String),
    #[error("plugin configuration refused: {0}")]
    Config(#[source] Error),
    #[error("plugin init failed: {0}")]
    Init(#[source] Error),
    #[error("plugin start failed: {0}")]
    Start(#[source] Error),
    #[error("{0}")]
    Runtime(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_keeps_its_message_and_names_its_limit_by_its_kind() {
        let timeout = Duration::from_secs(2);
        let timed_out = CallError::TimedOut {
            plugin: "p".into(),
            timeout,
        };
        assert_eq!(timed_out.limit(), Some("call_timeout"));
        assert_eq!(
            Error::from(timed_out),
            Error::Unavailable("plugin p exceeded its call timeout of 2s".into())
        );
        let interrupted = CallError::Interrupted {
            plugin: "p".into(),
            timeout,
        };
        assert_eq!(interrupted.limit(), Some("call_timeout"));
        assert_eq!(
            Error::from(interrupted),
            Error::Internal("plugin p exceeded its call timeout of 2s".into())
        );
        let busy = CallError::Busy {
            plugin: "p".into(),
            size: 2,
            waited: Duration::from_millis(500),
        };
        assert_eq!(busy.limit(), Some("acquire_timeout"));
        assert_eq!(
            Error::from(busy),
            Error::Unavailable("plugin \"p\" is busy: all 2 of its instances stayed in calls for 500ms".into())
        );
        // A plugin's own message that reads like a limit is not one.
        let failed = CallError::from(Error::Unavailable("plugin p exceeded its call timeout of 1s".into()));
        assert_eq!(failed.limit(), None);
    }
}
