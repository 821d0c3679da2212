//! `conductor:plugin/emit`: events the plugin sends to the agents subscribed to them, each checked
//! against the routes ([`SourceCheck`]).

use std::sync::Arc;

use conductor_plugin_sdk::{Capability, CloudEvent, Error};

use super::guard::Guard;
use crate::broker::EventSink;
use crate::plugins::routing::SourceCheck;

/// The `emit` state of one plugin: where its events go, and the routes they are checked against.
pub struct EmitHost {
    guard: Arc<Guard>,
    sink: Arc<dyn EventSink>,
    /// Where the status updates about the events it sends go.
    sources: SourceCheck,
}

impl EmitHost {
    pub fn new(guard: Arc<Guard>, sink: Arc<dyn EventSink>) -> Self {
        let sources = SourceCheck::new(guard.plugin(), guard.metrics().clone());
        Self { guard, sink, sources }
    }

    /// Where the status updates about the events the plugin sends go.
    pub fn sources(&self) -> &SourceCheck {
        &self.sources
    }

    /// Sends `event`; answers how many agents it was delivered to.
    pub fn send(&self, event: &CloudEvent) -> Result<u32, Error> {
        self.guard.check(Capability::Emit)?;
        self.guard.serving("emit")?;
        // With traces on, the event carries the trace of the call that emits it.
        let delivered = self
            .sink
            .emit(self.guard.plugin(), &crate::telemetry::traces::stamped(event))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        self.sources.sent(event);
        Ok(u32::try_from(delivered).unwrap_or(u32::MAX))
    }
}
