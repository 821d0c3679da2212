//! The order a plugin's `on-events` calls run in, and how many run at once.
//!
//! With one lane (the default) no two calls overlap. With more (a plugin's
//! `concurrent-notifications`, at most its pool size), a call that carries only notifications
//! takes one lane and may overlap others like it; any other call takes every lane, so it starts
//! once the calls handed out before it have ended, and the calls after it wait for it. Lanes are
//! handed out first come, first served.
//!
//! The dispatcher holds a free lane before it takes a batch, so a batch holds everything that
//! arrived while the lanes were busy; and while another call runs it takes a batch only once a
//! backlog waits or a short while has passed, so calls stay large when one lane keeps up, and a
//! lane that stalls (a lock wait, a slow statement) is overtaken.

use std::borrow::Borrow;
use std::sync::Arc;

use conductor_plugin_sdk::{Description, HostEvent};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::config::PluginConfig;

/// How many `on-events` calls with only notifications may run at once: what the plugin declares,
/// at most its pool size and the configured limit, at least one.
pub fn allowed(description: &Description, config: &PluginConfig) -> u32 {
    let pool = u32::try_from(config.pool_size).unwrap_or(u32::MAX);
    let limit = config.limits.concurrent_notifications.unwrap_or(u32::MAX);
    description.concurrent_notifications.min(pool).min(limit).max(1)
}

/// How many `on-events` calls with only notifications may run at once, and why when it is not
/// what the plugin declares (a plugin that declares 0, the default, gets one at a time).
pub fn explained(description: &Description, config: &PluginConfig) -> String {
    let applied = allowed(description, config);
    let declared = description.concurrent_notifications;
    if declared == applied {
        return applied.to_string();
    }
    if declared == 0 {
        return format!("{applied} (the plugin declares 0: one on-events call at a time)");
    }
    let mut bounds = vec![];
    if u32::try_from(config.pool_size).is_ok_and(|pool| pool < declared) {
        bounds.push(format!("pool_size = {}", config.pool_size));
    }
    if let Some(limit) = config.limits.concurrent_notifications.filter(|l| *l < declared) {
        bounds.push(format!("limits.concurrent_notifications = {limit}"));
    }
    format!("{applied} (the plugin declares {declared}; {})", bounds.join(", "))
}

pub struct Lanes {
    gate: Arc<Semaphore>,
    lanes: u32,
    ended: Arc<Notify>,
}

/// Lanes held: by the dispatcher while it takes a batch, then by the call it makes.
pub struct Lane {
    permit: Option<OwnedSemaphorePermit>,
    /// Told when a call's lanes are given back.
    ended: Option<Arc<Notify>>,
}

impl Drop for Lane {
    fn drop(&mut self) {
        drop(self.permit.take());
        if let Some(ended) = &self.ended {
            ended.notify_one();
        }
    }
}

impl Lanes {
    pub fn new(lanes: u32) -> Self {
        let lanes = lanes.max(1);
        Self {
            gate: Arc::new(Semaphore::new(lanes as usize)),
            lanes,
            ended: Arc::new(Notify::new()),
        }
    }

    /// Whether there is one lane only: then a call holds it until it ends, and nothing else can
    /// start meanwhile.
    pub fn single(&self) -> bool {
        self.lanes == 1
    }

    /// Waits for a free lane.
    pub async fn free(&self) -> Lane {
        self.acquire(1).await
    }

    /// Whether a call holds lanes (besides the one lane the dispatcher holds).
    pub fn others_in_flight(&self) -> bool {
        self.lanes as usize - self.gate.available_permits() > 1
    }

    /// Resolves when a call gives its lanes back (at once if one did since the last time).
    pub async fn ended(&self) {
        self.ended.notified().await;
    }

    /// A batch as the calls to make: the batch itself with one lane; with more, its runs of
    /// notifications and of other events, in order.
    pub fn calls<E: Borrow<HostEvent>>(&self, batch: Vec<E>) -> Vec<Vec<E>> {
        if self.single() {
            return vec![batch];
        }
        let mut calls: Vec<Vec<E>> = Vec::new();
        for event in batch {
            match calls.last_mut() {
                Some(call) if is_notification(&call[0]) == is_notification(&event) => call.push(event),
                _ => calls.push(vec![event]),
            }
        }
        calls
    }

    /// The lanes a call with `events` runs on: the `held` lane (or a free one) for notifications
    /// only, every lane otherwise.
    pub fn for_call<E: Borrow<HostEvent>>(
        &self,
        held: Option<Lane>,
        events: &[E],
    ) -> impl Future<Output = Lane> + use<'_, E> {
        let wanted = if events.iter().all(is_notification) {
            1
        } else {
            self.lanes
        };
        async move {
            let mut lane = match held {
                Some(lane) => lane,
                None => self.acquire(1).await,
            };
            if wanted > 1 {
                let rest = self.acquire(wanted - 1).await;
                if let (Some(permit), Some(more)) = (lane.permit.as_mut(), rest.into_permit()) {
                    permit.merge(more);
                }
            }
            lane.ended = Some(Arc::clone(&self.ended));
            lane
        }
    }

    async fn acquire(&self, n: u32) -> Lane {
        let permit = Arc::clone(&self.gate)
            .acquire_many_owned(n)
            .await
            .expect("the lanes' semaphore is never closed");
        Lane {
            permit: Some(permit),
            ended: None,
        }
    }
}

impl Lane {
    fn into_permit(mut self) -> Option<OwnedSemaphorePermit> {
        self.permit.take()
    }
}

fn is_notification(event: &impl Borrow<HostEvent>) -> bool {
    matches!(event.borrow(), HostEvent::Notification(_))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use conductor_plugin_sdk::pg::Notification;
    use tokio::time::timeout;

    use super::*;

    fn n(payload: &str) -> HostEvent {
        HostEvent::Notification(Notification {
            database: "d".into(),
            channel: "c".into(),
            payload: payload.into(),
        })
    }

    fn t(name: &str) -> HostEvent {
        HostEvent::Timer(name.into())
    }

    const SOON: Duration = Duration::from_millis(50);

    #[test]
    fn one_lane_keeps_a_batch_whole_and_more_split_it_into_runs() {
        let batch = vec![n("a"), n("b"), t("x"), t("y"), n("c")];
        assert_eq!(Lanes::new(1).calls(batch.clone()), std::slice::from_ref(&batch));
        assert_eq!(
            Lanes::new(4).calls(batch),
            [vec![n("a"), n("b")], vec![t("x"), t("y")], vec![n("c")]]
        );
    }

    #[tokio::test]
    async fn notification_calls_overlap_and_any_other_call_waits_for_them_all() {
        let lanes = Lanes::new(3);
        let first = lanes.for_call(None, &[n("a")]).await;
        let second = lanes.for_call(None, &[n("b")]).await;
        assert!(lanes.others_in_flight());
        // A timer call waits for both, and a notification call after it waits for the timer.
        let timer = lanes.for_call(None, &[t("x")]);
        tokio::pin!(timer);
        assert!(timeout(SOON, &mut timer).await.is_err(), "the timer call waits");
        drop(first);
        assert!(timeout(SOON, &mut timer).await.is_err(), "still one call in flight");
        let later = lanes.for_call(None, &[n("c")]);
        tokio::pin!(later);
        drop(second);
        let timer = timeout(SOON, &mut timer)
            .await
            .expect("the timer call runs once both ended");
        assert!(
            timeout(SOON, &mut later).await.is_err(),
            "a later call waits for the timer call"
        );
        drop(timer);
        let _later = timeout(SOON, later).await.expect("then it runs");
    }

    #[tokio::test]
    async fn the_dispatcher_learns_when_a_call_ends_and_its_own_lane_says_nothing() {
        let lanes = Lanes::new(2);
        let call = lanes.for_call(None, &[n("a")]).await;
        let held = lanes.free().await;
        assert!(lanes.others_in_flight());
        assert!(timeout(SOON, lanes.ended()).await.is_err(), "nothing ended yet");
        drop(call);
        timeout(SOON, lanes.ended()).await.expect("told");
        assert!(!lanes.others_in_flight());
        drop(held);
        assert!(
            timeout(SOON, lanes.ended()).await.is_err(),
            "the dispatcher's lane is not a call"
        );
    }

    #[tokio::test]
    async fn a_held_lane_becomes_every_lane_for_a_timer_call() {
        let lanes = Lanes::new(3);
        let held = lanes.free().await;
        let timer = timeout(SOON, lanes.for_call(Some(held), &[t("x")]))
            .await
            .expect("nothing else runs");
        assert!(timeout(SOON, lanes.free()).await.is_err(), "it holds all three");
        drop(timer);
        let _free = timeout(SOON, lanes.free()).await.expect("all given back");
        assert_eq!(lanes.gate.available_permits(), 2);
    }

    #[tokio::test]
    async fn one_lane_never_overlaps() {
        let lanes = Lanes::new(1);
        let first = lanes.for_call(None, &[n("a")]).await;
        assert!(timeout(SOON, lanes.free()).await.is_err());
        drop(first);
        let _second = timeout(SOON, lanes.free()).await.expect("free again");
    }

    #[test]
    fn notification_lanes_are_what_the_plugin_declares_within_the_pool_and_the_limit() {
        let config = |pool_size, limit| {
            let mut c: PluginConfig = toml::from_str("kind = \"component\"\nfile = \"p.wasm\"").unwrap();
            c.pool_size = pool_size;
            c.limits.concurrent_notifications = limit;
            c
        };
        let declares = |n| {
            Description::new("p", "1.0.0")
                .sources(["s"])
                .data_types(["a.v1.things"])
                .concurrent_notifications(n)
        };
        assert_eq!(allowed(&declares(0), &config(4, None)), 1, "undeclared: one at a time");
        assert_eq!(allowed(&declares(4), &config(4, None)), 4);
        assert_eq!(allowed(&declares(4), &config(2, None)), 2, "at most the pool");
        assert_eq!(allowed(&declares(4), &config(4, Some(1))), 1, "at most the limit");
        assert_eq!(
            allowed(&declares(1), &config(4, Some(3))),
            1,
            "the limit raises nothing"
        );

        // What the log says is what is applied, and why it is not what the plugin declares.
        assert_eq!(
            explained(&declares(0), &config(4, None)),
            "1 (the plugin declares 0: one on-events call at a time)"
        );
        assert_eq!(explained(&declares(1), &config(4, None)), "1");
        assert_eq!(explained(&declares(4), &config(4, None)), "4");
        assert_eq!(
            explained(&declares(4), &config(2, None)),
            "2 (the plugin declares 4; pool_size = 2)"
        );
        assert_eq!(
            explained(&declares(8), &config(4, Some(2))),
            "2 (the plugin declares 8; pool_size = 4, limits.concurrent_notifications = 2)"
        );
    }
}
