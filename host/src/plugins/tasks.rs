//! The background tasks of one plugin — its dispatcher, redeliveries, timers, LISTENs, watches —
//! in one task tree: one cancellation parent, every task tracked, all of them stopped and awaited
//! when the plugin is unloaded, replaced or the host stops.

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The background tasks of one plugin: cancelled together, awaited together.
#[derive(Clone, Default)]
pub struct Tasks {
    stop: CancellationToken,
    tracker: TaskTracker,
}

impl Tasks {
    /// Runs `task` until it ends or the plugin stops.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = task => {}
            }
        });
    }

    /// A token cancelled when the plugin stops (or earlier, by whoever holds it).
    pub fn child(&self) -> CancellationToken {
        self.stop.child_token()
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Stops every task and waits until all have ended.
    pub async fn stop(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}
