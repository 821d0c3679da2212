//! The host-event dispatcher of one plugin: batches of its queued host events to `on-events`
//! calls, one at a time or, for notifications, on as many lanes as the plugin takes ([`Lanes`]);
//! and the redelivery of the events of a failed call, with backoff, until they are given up.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use conductor_plugin_sdk::native::PluginRequest;
use conductor_plugin_sdk::{Error, HostEvent};
use parking_lot::Mutex;

use super::calls::PluginCalls;
use super::capabilities::Capabilities;
use super::lanes::{Lane, Lanes};
use super::runtime::Wait;
use super::tasks::Tasks;
use crate::host_events::{BatchSize, EventKey, EventQueue, Taken};

/// While a plugin's `on-events` call runs, how long the dispatcher waits for a backlog before it
/// starts another call (with `concurrent-notifications`): long enough for a call that keeps up
/// to end and take the next events in one batch, short enough that a call stuck on a lock or a
/// slow statement does not hold up the rest.
const OVERTAKE_AFTER: Duration = Duration::from_millis(10);

/// Deliveries of a host event before it is given up: the first, and three more with backoff;
/// then, if it was delivered with others, once more alone.
const DELIVERIES: u32 = 4;

/// A call's events with those to be delivered alone taken out, each into a call of its own.
fn apart(call: Vec<Taken>) -> Vec<Vec<Taken>> {
    if !call.iter().any(|t| t.alone) {
        return vec![call];
    }
    let (alone, together): (Vec<Taken>, Vec<Taken>) = call.into_iter().partition(|t| t.alone);
    let mut calls: Vec<Vec<Taken>> = alone.into_iter().map(|t| vec![t]).collect();
    if !together.is_empty() {
        calls.push(together);
    }
    calls
}

/// How long a failed call's events wait before they are queued again: 200 ms after the first
/// failure, doubling, at most 5 s.
fn redelivery_delay(failures: u32) -> Duration {
    let ms = 200u64.saturating_mul(1 << failures.saturating_sub(1).min(5));
    Duration::from_millis(ms.min(5_000))
}

/// What delivers one plugin's host events.
pub struct Dispatcher {
    plugin: String,
    calls: Arc<PluginCalls>,
    events: Arc<EventQueue>,
    tasks: Tasks,
    /// For watches to list again.
    capabilities: Arc<Capabilities>,
    /// `on-events` calls with only notifications that may run at once.
    lanes: u32,
    /// The most events in one call (`limits.event_batch`, `limits.notification_batch`).
    batch: BatchSize,
    /// Watched objects given up once (their watch was listed again); given up again, they are
    /// dropped rather than listed in a loop.
    abandoned: Mutex<HashSet<EventKey>>,
}

impl Dispatcher {
    pub fn new(
        calls: Arc<PluginCalls>,
        events: Arc<EventQueue>,
        tasks: Tasks,
        capabilities: Arc<Capabilities>,
        lanes: u32,
        batch: BatchSize,
    ) -> Self {
        Self {
            plugin: capabilities.plugin().to_owned(),
            calls,
            events,
            tasks,
            capabilities,
            lanes,
            batch,
            abandoned: Mutex::default(),
        }
    }

    /// Delivers the plugin's host events until its queue closes. While a call runs, the next one
    /// starts once a quarter of a batch waits, after [`OVERTAKE_AFTER`], or when no call runs
    /// any more, whichever comes first.
    pub async fn run(self: Arc<Self>) {
        let lanes = Lanes::new(self.lanes);
        let max = self.batch;
        let backlog = (max.events / 4).max(1);
        loop {
            let lane = lanes.free().await;
            let min = if lanes.others_in_flight() { backlog } else { 1 };
            let batch = tokio::select! {
                batch = self.events.next_batch_of(min, max) => batch,
                () = lanes.ended(), if min > 1 => continue,
                () = tokio::time::sleep(OVERTAKE_AFTER), if min > 1 => self.events.next_batch(max).await,
            };
            let Some(batch) = batch else { return };
            let mut held = Some(lane);
            for taken in lanes.calls(batch).into_iter().flat_map(apart) {
                let lane = lanes.for_call(held.take(), &taken).await;
                let call = Arc::clone(&self).call(taken, lane);
                if lanes.single() {
                    // With one lane nothing else could start before this call ends: it runs
                    // here, not in a task of its own.
                    call.await;
                } else {
                    self.tasks.spawn(call);
                }
            }
        }
    }

    /// One `on-events` call with the events `taken`, on `lane` (given back when it ends).
    async fn call(self: Arc<Self>, taken: Vec<Taken>, lane: Lane) {
        let events = taken.iter().map(|t| t.event.clone()).collect();
        // A busy pool delays events; it never drops them.
        let outcome = self.calls.call(PluginRequest::OnEvents(events), Wait::Patient).await;
        drop(lane);
        match outcome {
            Ok(_) => self.delivered(&taken),
            Err(e) => self.failed(taken, &e).await,
        }
    }

    /// Events the plugin took: watched objects given up before are no longer.
    fn delivered(&self, taken: &[Taken]) {
        let mut abandoned = self.abandoned.lock();
        if !abandoned.is_empty() {
            for t in taken {
                abandoned.remove(&t.key);
            }
        }
    }

    /// Events a failed `on-events` call carried: queued again after a backoff, up to
    /// [`DELIVERIES`] (and once more each alone, if they came with others); then given up: a
    /// watched object's watch lists every object again (once; an object given up after that is
    /// dropped), anything else is dropped. Either is logged and counted.
    async fn failed(self: &Arc<Self>, taken: Vec<Taken>, error: &Error) {
        let with_others = taken.len() > 1;
        let (retry, give_up): (Vec<Taken>, Vec<Taken>) = taken
            .into_iter()
            .map(|t| match t.failures + 1 {
                // Failed every delivery with others: once more alone, to find out whether it
                // was this one.
                DELIVERIES if with_others => Taken {
                    failures: DELIVERIES - 1,
                    alone: true,
                    ..t
                },
                failures => Taken { failures, ..t },
            })
            .partition(|t| t.failures < DELIVERIES);
        if let Some(most) = retry.iter().map(|t| t.failures).max() {
            let delay = redelivery_delay(most);
            tracing::warn!(plugin = %self.plugin, events = retry.len(), attempt = most, retry_in = ?delay, %error, "plugin failed to handle host events; delivering them again");
            let dispatcher = Arc::clone(self);
            self.tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                dispatcher.events.requeue(retry);
            });
        }
        let mut relist = BTreeSet::new();
        for t in give_up {
            self.capabilities.metrics().dropped(t.key.kind());
            match &t.event {
                HostEvent::Watch(w) if self.abandoned.lock().insert(t.key.clone()) => {
                    relist.insert(w.resource.clone());
                }
                _ => {
                    tracing::error!(plugin = %self.plugin, event = ?t.key, deliveries = DELIVERIES, %error, "plugin failed every delivery of a host event: dropped");
                }
            }
        }
        for resource in relist {
            tracing::error!(plugin = %self.plugin, %resource, deliveries = DELIVERIES, %error, "plugin failed every delivery of watched objects: listing them all again");
            self.capabilities.kube().relist(&resource).await;
        }
    }
}
