//! Requeue with backoff: work that failed is kept in `kv` (every instance sees it, and it survives
//! reloads) and brought back by a timer whose delay doubles after each failing round and starts
//! over once a round succeeds. Calls that may overlap (a plugin's concurrent notification calls)
//! hand their failures off instead ([`Retry::hand_off`]): the queue is one `kv` value, which
//! overlapping calls would race on.
//!
//! ```
//! use std::time::Duration;
//! use conductor_plugin_sdk::{Error, Host, HostEvent, Retry};
//!
//! const RETRY: Retry<String> = Retry::new("retry-consumers", Duration::from_millis(100), Duration::from_secs(60));
//!
//! fn ensure(name: &str) -> Result<(), Error> { Ok(()) }
//!
//! fn on_event(host: &Host, event: HostEvent) -> Result<(), Error> {
//!     if RETRY.is_due(&event) {
//!         RETRY.run(host, |name| ensure(name))?;
//!     } else if let Err(e) = ensure("cluster1") {
//!         RETRY.schedule(host, ["cluster1".to_owned()])?;
//!     }
//!     Ok(())
//! }
//! # let fake = conductor_plugin_sdk::fakes::FakeHost::new();
//! # on_event(&fake.host(), HostEvent::Timer("x".into())).unwrap();
//! ```

use std::marker::PhantomData;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Host, HostEvent};

/// Items of type `T` to try again, under one timer `name`.
pub struct Retry<T> {
    name: &'static str,
    first: Duration,
    max: Duration,
    items: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned + PartialEq> Retry<T> {
    /// Retries under the timer `name`, first after `first`, doubling up to `max`.
    pub const fn new(name: &'static str, first: Duration, max: Duration) -> Self {
        Self {
            name,
            first,
            max,
            items: PhantomData,
        }
    }

    fn items_key(&self) -> String {
        format!("{}/items", self.name)
    }

    fn backoff_key(&self) -> String {
        format!("{}/backoff-ms", self.name)
    }

    fn queued(&self, host: &Host) -> Vec<T> {
        host.kv_get(&self.items_key())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// The items waiting for their next try.
    pub fn pending(&self, host: &Host) -> Vec<T> {
        self.queued(host)
    }

    /// Queues `items` (each once). With nothing queued before, arms the timer with the current
    /// delay, which then doubles; items queued while a round is armed join it, and neither its
    /// timer nor the delay moves (re-arming it for each arrival would put the round off for as
    /// long as failures keep coming). An error (`kv` or the timer refused by the plugin's limits)
    /// leaves the queued items as they were.
    pub fn schedule(&self, host: &Host, items: impl IntoIterator<Item = T>) -> Result<(), Error> {
        let mut queued = self.queued(host);
        let before = queued.len();
        for item in items {
            if !queued.contains(&item) {
                queued.push(item);
            }
        }
        if before > 0 {
            // A round is armed already: the new items (if any) join it.
            return if queued.len() > before {
                host.kv_set(&self.items_key(), &encode(&queued)?)
            } else {
                Ok(())
            };
        }
        let first = u64::try_from(self.first.as_millis()).unwrap_or(u64::MAX).max(1);
        let max = u64::try_from(self.max.as_millis()).unwrap_or(u64::MAX).max(first);
        let delay = host
            .kv_get(&self.backoff_key())
            .and_then(|b| serde_json::from_slice::<u64>(&b).ok())
            .unwrap_or(first)
            .clamp(first, max);
        // The timer first: a timer with no new items costs a round; items with no timer would
        // wait for the next failure.
        host.set_timer(self.name, Duration::from_millis(delay), false)?;
        host.kv_set(&self.items_key(), &encode(&queued)?)?;
        host.kv_set(&self.backoff_key(), &encode(&delay.saturating_mul(2).min(max))?)
    }

    /// Queues `items` from a call that may overlap other calls (the notification calls of a plugin
    /// that declares `concurrent_notifications`), where [`Retry::schedule`], which reads and
    /// writes one queue, would race. The items wait under a `kv` key and a one-shot timer of their
    /// own, going off after the first delay; when it goes off, in a call that overlaps no other,
    /// [`Retry::take_handed_off`] gives them back to be tried.
    pub fn hand_off(&self, host: &Host, items: impl IntoIterator<Item = T>) -> Result<(), Error> {
        let items: Vec<T> = items.into_iter().collect();
        if items.is_empty() {
            return Ok(());
        }
        let name = format!("{}{}", self.hand_off_prefix(), uuid::Uuid::new_v4());
        host.kv_set(&name, &encode(&items)?)?;
        host.set_timer(&name, self.first, false).inspect_err(|_| {
            host.kv_delete(&name);
        })
    }

    /// If `event` is the timer of a [`Retry::hand_off`], its items (taken out of `kv`), to try now
    /// and [`Retry::schedule`] again if they fail.
    pub fn take_handed_off(&self, host: &Host, event: &HostEvent) -> Option<Vec<T>> {
        let HostEvent::Timer(name) = event else { return None };
        if !name.starts_with(&self.hand_off_prefix()) {
            return None;
        }
        let items = host
            .kv_get(name)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        host.kv_delete(name);
        Some(items)
    }

    fn hand_off_prefix(&self) -> String {
        format!("{}/hand-off/", self.name)
    }

    /// Whether `event` is this retry's timer going off.
    pub fn is_due(&self, event: &HostEvent) -> bool {
        matches!(event, HostEvent::Timer(name) if name == self.name)
    }

    /// Takes the queued items (when the timer went off); the delay stays where it is until
    /// [`Retry::succeeded`].
    pub fn take(&self, host: &Host) -> Vec<T> {
        let items = self.queued(host);
        host.kv_delete(&self.items_key());
        items
    }

    /// A round went through without failures: the next delay starts over.
    pub fn succeeded(&self, host: &Host) {
        host.kv_delete(&self.backoff_key());
    }

    /// Takes the queued items and tries each with `attempt`; the failures are queued again with
    /// a longer delay, and once a round has no failure the delay starts over. Returns the failures
    /// (an error if they could not be queued again).
    pub fn run(&self, host: &Host, mut attempt: impl FnMut(&T) -> Result<(), Error>) -> Result<Vec<Error>, Error> {
        let mut again = Vec::new();
        let mut failed = Vec::new();
        for item in self.take(host) {
            if let Err(e) = attempt(&item) {
                failed.push(e);
                again.push(item);
            }
        }
        if again.is_empty() {
            self.succeeded(host);
        } else {
            self.schedule(host, again)?;
        }
        Ok(failed)
    }
}

fn encode(value: &impl Serialize) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(value).map_err(|e| Error::Internal(format!("cannot encode retry state: {e}")))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::fakes::FakeHost;

    const RETRY: Retry<String> = Retry::new("r", Duration::from_millis(100), Duration::from_millis(500));

    #[test]
    fn failures_come_back_with_a_doubling_delay_that_resets_on_success() {
        let fake = FakeHost::new();
        let host = fake.host();
        RETRY
            .schedule(&host, ["a".to_owned(), "b".to_owned(), "a".to_owned()])
            .unwrap();
        assert_eq!(RETRY.pending(&host), ["a", "b"]);
        assert_eq!(fake.recorded().timers.get("r"), Some(&(100, false)));

        let failed = RETRY
            .run(&host, |item| {
                if item == "a" {
                    Err(Error::Unavailable("down".into()))
                } else {
                    Ok(())
                }
            })
            .unwrap();
        assert_eq!(failed.len(), 1);
        assert_eq!(RETRY.pending(&host), ["a"]);
        assert_eq!(fake.recorded().timers.get("r"), Some(&(200, false)));
        RETRY.run(&host, |_| Err(Error::Unavailable("down".into()))).unwrap();
        RETRY.run(&host, |_| Err(Error::Unavailable("down".into()))).unwrap();
        assert_eq!(fake.recorded().timers.get("r"), Some(&(500, false)), "capped");

        assert!(RETRY.run(&host, |_| Ok(())).unwrap().is_empty());
        assert!(RETRY.pending(&host).is_empty());
        RETRY.schedule(&host, ["c".to_owned()]).unwrap();
        assert_eq!(fake.recorded().timers.get("r"), Some(&(100, false)), "starts over");
        assert!(RETRY.is_due(&HostEvent::Timer("r".into())));
        assert!(!RETRY.is_due(&HostEvent::Timer("other".into())));
    }

    #[test]
    fn items_scheduled_while_a_round_is_armed_join_it_without_putting_it_off() {
        let fake = FakeHost::new();
        let host = fake.host();
        RETRY.schedule(&host, ["a".to_owned()]).unwrap();
        assert_eq!(fake.recorded().timers.get("r"), Some(&(100, false)));
        fake.recorded().timers.clear();
        for item in ["b", "c", "d", "e"] {
            RETRY.schedule(&host, [item.to_owned()]).unwrap();
        }
        assert_eq!(RETRY.pending(&host), ["a", "b", "c", "d", "e"]);
        assert!(
            fake.recorded().timers.is_empty(),
            "the armed round's timer is left where it is"
        );
        // The round goes off: a failure arms the next with the doubled delay, once.
        RETRY.run(&host, |_| Err(Error::Unavailable("down".into()))).unwrap();
        assert_eq!(fake.recorded().timers.get("r"), Some(&(200, false)));
    }

    #[test]
    fn handed_off_items_wait_under_a_timer_of_their_own_until_taken() {
        let fake = FakeHost::new();
        let host = fake.host();
        RETRY.hand_off(&host, ["a".to_owned(), "b".to_owned()]).unwrap();
        RETRY.hand_off(&host, ["c".to_owned()]).unwrap();
        RETRY.hand_off(&host, Vec::<String>::new()).unwrap();
        assert!(RETRY.pending(&host).is_empty(), "the shared queue is not touched");
        let timers: Vec<(String, (u64, bool))> = fake.recorded().timers.clone().into_iter().collect();
        assert_eq!(timers.len(), 2, "one timer per hand-off: {timers:?}");
        let mut taken = Vec::new();
        for (name, (after_ms, repeat)) in timers {
            assert_eq!((after_ms, repeat), (100, false));
            assert!(!RETRY.is_due(&HostEvent::Timer(name.clone())));
            let items = RETRY.take_handed_off(&host, &HostEvent::Timer(name.clone())).unwrap();
            taken.extend(items);
            assert_eq!(
                RETRY.take_handed_off(&host, &HostEvent::Timer(name)),
                Some(vec![]),
                "taken once"
            );
        }
        taken.sort();
        assert_eq!(taken, ["a", "b", "c"]);
        assert!(
            fake.recorded().kv.keys().all(|k| !k.contains("hand-off")),
            "nothing left in kv"
        );
        assert_eq!(RETRY.take_handed_off(&host, &HostEvent::Timer("r".into())), None);
        assert_eq!(RETRY.take_handed_off(&host, &HostEvent::Timer("other".into())), None);
    }
}
