//! `conductor:plugin/timer`: named timers, one-shot or repeating, in the plugin's task tree; their
//! firings go through the plugin's event queue, where one still waiting absorbs the next.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use conductor_plugin_sdk::{Capability, Error, HostEvent};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::guard::Guard;
use crate::host_events::{EventKey, EventQueue};
use crate::plugins::tasks::Tasks;

/// Live timers by name: a number (to tell a timer from its replacement) and its stop.
type Live = Arc<Mutex<HashMap<String, (u64, CancellationToken)>>>;

/// The `timer` state of one plugin: its live timers.
pub struct TimerHost {
    guard: Arc<Guard>,
    events: Arc<EventQueue>,
    tasks: Tasks,
    live: Live,
}

impl TimerHost {
    pub fn new(guard: Arc<Guard>, events: Arc<EventQueue>, tasks: Tasks) -> Self {
        Self {
            guard,
            events,
            tasks,
            live: Live::default(),
        }
    }

    /// Starts (or restarts) a timer in the plugin's task tree. A new timer past `limits.timers`
    /// live ones is refused.
    pub fn set(&self, name: &str, after_ms: u64, repeat: bool) -> Result<(), Error> {
        self.guard.check(Capability::Timer)?;
        self.guard.serving("a timer")?;
        if self.tasks.is_stopped() {
            return Err(Error::Unavailable(format!(
                "plugin {:?} is stopping",
                self.guard.plugin()
            )));
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let stop = self.tasks.child();
        {
            let mut timers = self.live.lock();
            let limit = self.guard.grants().limits.timers;
            if !timers.contains_key(name) && timers.len() >= limit {
                drop(timers);
                self.guard.refused("timers");
                return Err(Error::Unavailable(format!(
                    "timer {name:?} refused: the plugin has {limit} timers set (limits.timers)"
                )));
            }
            if let Some((_, old)) = timers.insert(name.to_owned(), (id, stop.clone())) {
                old.cancel();
            }
        }
        let events = Arc::clone(&self.events);
        let timers = Arc::clone(&self.live);
        let name = name.to_owned();
        let period = Duration::from_millis(after_ms.max(1));
        self.tasks.spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let fired = HostEvent::Timer(name.clone());
                if !events.push(EventKey::Timer(name.clone()), fired).await || !repeat {
                    break;
                }
            }
            // A one-shot that went off is no longer live (unless it was set again meanwhile).
            let mut timers = timers.lock();
            if timers.get(&name).is_some_and(|(set, _)| *set == id) {
                timers.remove(&name);
            }
        });
        Ok(())
    }

    pub fn cancel(&self, name: &str) {
        if self.guard.check(Capability::Timer).is_ok()
            && let Some((_, stop)) = self.live.lock().remove(name)
        {
            stop.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::capabilities::guard::{Grants, Mode};
    use crate::telemetry::Metrics;

    fn timers(events: Arc<EventQueue>, tasks: Tasks) -> TimerHost {
        let grants = Grants {
            capabilities: [Capability::Timer].into(),
            ..Grants::default()
        };
        let guard = Guard::new("p", grants, Mode::Serve, events.metrics().clone());
        TimerHost::new(Arc::new(guard), events, tasks)
    }

    /// A repeating timer fires at every interval, measured from when it was set, however long
    /// the plugin takes to handle the firings; firings that find the last one still queued are
    /// one.
    #[tokio::test(start_paused = true)]
    async fn a_repeating_timer_fires_on_its_interval_and_coalesces_when_the_plugin_lags() {
        let events = Arc::new(EventQueue::new(16, Metrics::new().plugin("p")));
        let tasks = Tasks::default();
        let timers = timers(Arc::clone(&events), tasks.clone());
        let start = tokio::time::Instant::now();
        timers.set("catch-up", 300_000, true).unwrap();
        let mut fired = Vec::new();
        for _ in 0..12 {
            let batch = events.next_batch(10).await.unwrap();
            let events: Vec<HostEvent> = batch.into_iter().map(|t| t.event).collect();
            assert_eq!(events, [HostEvent::Timer("catch-up".into())]);
            fired.push(start.elapsed());
        }
        let expected: Vec<Duration> = (1..=12).map(|i| Duration::from_secs(300 * i)).collect();
        assert_eq!(fired, expected, "every five minutes, never later");

        // The plugin does not take events for 20 minutes: one firing waits, not four.
        tokio::time::sleep(Duration::from_secs(20 * 60 + 30)).await;
        assert_eq!(events.len(), 1);
        assert_eq!(events.next_batch(10).await.unwrap().len(), 1);

        // Cancelled timers stop; stopping the plugin ends every task it started.
        timers.cancel("catch-up");
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(events.is_empty());
        timers.set("other", 1000, true).unwrap();
        tasks.stop().await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(events.is_empty(), "no timer outlives its plugin");
        assert!(
            timers.set("late", 1000, false).is_err(),
            "a stopped plugin starts no timer"
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(events.is_empty());
    }
}
