//! The reload loop: one task applies, one at a time, every reload asked for — SIGHUP,
//! `POST /reload`, a changed file ([`super::watch`]) — and every new state of the `SourcePlugin`
//! resources, through the [`Reconfigurer`]; after each, it tells the metrics, the inspector, the
//! resources' statuses and the file watch what runs now, and answers whoever asked.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admin::{Inspector, ReloadRequest, ReloadTrigger};
use crate::broker::Broker;
use crate::plugins::HostContext;
use crate::source_plugins::{Controller, Reconfigurer};

/// What the reload loop reads and tells.
pub struct Reloads {
    /// Reloads asked for (signal, admin endpoint, file watch).
    pub requests: mpsc::Receiver<ReloadRequest>,
    pub reconfigurer: Reconfigurer,
    /// The `SourcePlugin` resources' changes and statuses.
    pub controller: Controller,
    /// Gets the routing table of each reload.
    pub broker: Arc<Broker>,
    pub host: HostContext,
    pub inspector: Arc<Inspector>,
    /// The files the file watch looks at: those of what runs.
    pub watched: tokio::sync::watch::Sender<Vec<PathBuf>>,
}

impl Reloads {
    /// Applies reloads until `stop` is cancelled or no one can ask for one any more; then stops
    /// the controller (taking this replica out of the resources' statuses) and hands back the
    /// reconfigurer, whose plugins the caller stops once the server has drained.
    pub async fn run(mut self, stop: CancellationToken) -> Reconfigurer {
        let config = &mut self.reconfigurer;
        loop {
            let (trigger, outcome, reply) = tokio::select! {
                _ = stop.cancelled() => break,
                r = self.requests.recv() => match r {
                    Some(r) => (r.trigger, config.reload_file(r.trigger, &self.broker, &self.host).await, r.reply),
                    None => break,
                },
                Some(resources) = self.controller.changed() => {
                    (ReloadTrigger::SourcePlugins, config.resources_changed(resources, &self.broker, &self.host).await, None)
                }
            };
            let applied = outcome.as_ref().map(|s| !s.restart_needed.is_empty()).map_err(|_| ());
            self.host.metrics.config.reloaded(trigger.as_str(), applied);
            self.inspector.reloaded(&outcome, config.plugins().entries());
            self.controller.report(config);
            self.watched.send_if_modified(|files| {
                let now = config.applied().watched_files();
                let changed = *files != now;
                *files = now;
                changed
            });
            if let Some(reply) = reply {
                let _ = reply.send(outcome);
            }
        }
        self.controller.stop().await;
        self.reconfigurer
    }
}
