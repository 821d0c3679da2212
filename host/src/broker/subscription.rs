//! One agent's Subscribe stream: its queued events, heartbeats between them, and a clean end on
//! shutdown. Dropping the stream (the agent went away) unregisters the subscriber.

use crate::telemetry::series::Series;
use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::Stream;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::fanout::Registration;
use crate::{telemetry::Metrics, wire, wire::WireEvent};

pub struct Subscription {
    registration: Registration,
    heartbeat: Option<Interval>,
    shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
    sent: Series,
    heartbeats: prometheus::IntCounter,
    metrics: Arc<Metrics>,
    end: Option<tonic::Code>,
}

impl Subscription {
    pub fn new(
        registration: Registration,
        heartbeat: Option<Duration>,
        shutdown: CancellationToken,
        metrics: Arc<Metrics>,
    ) -> Self {
        let sent = metrics.subscribe_received(&registration.cluster, &registration.data_type);
        let heartbeats = metrics.broker.heartbeats(&registration.data_type);
        metrics.broker.cut_off(&registration.data_type, 0);
        let heartbeat = heartbeat.map(|period| {
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
        match this.registration.rx.poll_recv(cx) {
            Poll::Ready(Some(encoded)) => {
                this.sent.inc();
                this.registration.info.sent();
                return Poll::Ready(Some(Ok(WireEvent::Encoded(encoded))));
            }
            Poll::Ready(None) => {
                // The broker dropped us: our queue was full.
                this.finish(tonic::Code::Unavailable);
                return Poll::Ready(Some(Err(tonic::Status::unavailable(
                    "subscriber too slow: its event queue overflowed; reconnect and resync",
                ))));
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
