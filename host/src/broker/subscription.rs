//! One agent's Subscribe stream: its queued events, heartbeats between them, and a clean end on
//! shutdown. A watch beside it ends it once the agent stops reading. Dropping the stream (the
//! agent went away) unregisters the subscriber.

use crate::telemetry::series::Series;
use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::Stream;
use tokio::task::AbortHandle;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::fanout::{Fanout, Registration};
use crate::{telemetry::Metrics, wire, wire::WireEvent};

pub struct Subscription {
    registration: Registration,
    heartbeat: Option<Interval>,
    shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
    sent: Series,
    heartbeats: prometheus::IntCounter,
    metrics: Arc<Metrics>,
    /// Ends the subscriber once it has taken nothing from its queue for the stall timeout.
    stall_watch: AbortHandle,
    stall_timeout: Duration,
    end: Option<tonic::Code>,
}

/// How a subscription is run: from `[broker]`.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub heartbeat: Option<Duration>,
    pub stall_timeout: Duration,
}

impl Subscription {
    /// Runs `registration` as a stream; spawns its stall watch (needs a Tokio runtime).
    pub fn new(
        fanout: &Arc<Fanout>,
        registration: Registration,
        timing: Timing,
        shutdown: CancellationToken,
        metrics: Arc<Metrics>,
    ) -> Self {
        let sent = metrics.subscribe_received(&registration.cluster, &registration.data_type);
        let heartbeats = metrics.broker.heartbeats(&registration.data_type);
        metrics.broker.cut_off(&registration.data_type, 0);
        metrics.broker.superseded(&registration.data_type, 0);
        let stall_watch = tokio::spawn(fanout.watch_stall(&registration, timing.stall_timeout)).abort_handle();
        let heartbeat = timing.heartbeat.map(|period| {
            // The first heartbeat goes out one period after subscribing.
            let mut i = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            i.set_missed_tick_behavior(MissedTickBehavior::Delay);
            i
        });
        Self {
            registration,
            heartbeat,
            shutdown: Box::pin(shutdown.cancelled_owned()),
            sent,
            heartbeats,
            metrics,
            stall_watch,
            stall_timeout: timing.stall_timeout,
            end: None,
        }
    }

    pub fn id(&self) -> uuid::Uuid {
        self.registration.id
    }

    fn finish(&mut self, code: tonic::Code) {
        self.end = Some(code);
    }
}

impl Stream for Subscription {
    type Item = Result<WireEvent, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.end.is_some() {
            return Poll::Ready(None);
        }
        if this.shutdown.as_mut().poll(cx).is_ready() {
            this.finish(tonic::Code::Ok);
            return Poll::Ready(None);
        }
        match this.registration.queue.poll_take(cx) {
            Poll::Ready(Some(encoded)) => {
                this.sent.inc();
                this.registration.info.sent();
                return Poll::Ready(Some(Ok(WireEvent::Encoded(encoded))));
            }
            Poll::Ready(None) => {
                // The broker ended us: we took nothing for the stall timeout.
                this.finish(tonic::Code::Unavailable);
                return Poll::Ready(Some(Err(tonic::Status::unavailable(format!(
                    "subscriber too slow: it took no event for {}; reconnect and resync",
                    conductor_plugin_sdk::duration::format(this.stall_timeout)
                )))));
            }
            Poll::Pending => {}
        }
        if let Some(hb) = this.heartbeat.as_mut()
            && hb.poll_tick(cx).is_ready()
        {
            this.sent.inc();
            this.heartbeats.inc();
            return Poll::Ready(Some(Ok(WireEvent::Message(Box::new(wire::heartbeat())))));
        }
        Poll::Pending
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stall_watch.abort();
        // A stream dropped without an end of its own was cancelled by the agent: upstream
        // unregisters and returns OK.
        let code = self.end.unwrap_or(tonic::Code::Ok);
        self.metrics
            .subscribe_processed(&self.registration.cluster, &self.registration.data_type, code);
        tracing::debug!(
            cluster = %self.registration.cluster,
            data_type = %self.registration.data_type,
            subscription = %self.registration.id,
            "subscription ended"
        );
    }
}

#[cfg(test)]
mod tests {
    /// A hub holds one subscription per agent for hours: it keeps handles to what it shares
    /// (the metrics, the broker's shutdown), not copies of them.
    #[test]
    fn a_subscription_is_small() {
        let size = std::mem::size_of::<super::Subscription>();
        assert!(size <= 256, "a subscription takes {size} bytes");
    }
}
