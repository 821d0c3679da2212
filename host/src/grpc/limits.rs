//! Subscriptions held per identity (`server.max_subscriptions_per_identity`), and the stream
//! that holds a subscription's places until it ends.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use parking_lot::Mutex;

use crate::net::StreamGuard;

/// Counts the subscriptions each identity holds open.
pub struct SubscriptionSlots {
    held: Arc<Mutex<HashMap<String, usize>>>,
    limit: usize,
}

/// One subscription's place, given back when dropped.
pub struct Slot {
    held: Arc<Mutex<HashMap<String, usize>>>,
    user: String,
}

impl SubscriptionSlots {
    pub fn new(limit: usize) -> Self {
        Self {
            held: Arc::default(),
            limit,
        }
    }

    /// A place for one more subscription of `user`, or `None` at the limit.
    pub fn take(&self, user: &str) -> Option<Slot> {
        let mut held = self.held.lock();
        let count = held.entry(user.to_owned()).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(Slot {
            held: Arc::clone(&self.held),
            user: user.to_owned(),
        })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        if let Some(count) = held.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.user);
            }
        }
    }
}

/// A response stream that holds its identity's subscription place and its connection's stream
/// count for as long as it lives.
pub struct Held<S> {
    inner: S,
    _slot: Option<Slot>,
    _stream: Option<StreamGuard>,
}

impl<S> Held<S> {
    pub fn new(inner: S, slot: Option<Slot>, stream: Option<StreamGuard>) -> Self {
        Self {
            inner,
            _slot: slot,
            _stream: stream,
        }
    }
}

impl<S: Stream + Unpin> Stream for Held<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_per_identity_and_given_back() {
        let slots = SubscriptionSlots::new(2);
        let a1 = slots.take("a").unwrap();
        let _a2 = slots.take("a").unwrap();
        assert!(slots.take("a").is_none(), "a holds its two");
        let _b = slots.take("b").expect("b has its own places");
        drop(a1);
        assert!(slots.take("a").is_some(), "a place freed by an ended subscription");
        drop(slots.take("c"));
        assert!(
            !slots.held.lock().contains_key("c"),
            "no entry left for an identity with none"
        );
    }
}
