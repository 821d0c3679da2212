//! Reviews asked of the API server (TokenReview, SubjectAccessReview), shielded from floods: an
//! answer is kept for its time to live, the same question asked again while it is being reviewed
//! waits for that one review, and at most a configured number of reviews run at once (callers past
//! it wait their turn, and are counted).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{OnceCell, Semaphore};

use super::cache::TtlCache;
use crate::telemetry::SecurityMetrics;

/// A review in flight: its answer, once there is one, for every caller that asked.
type Pending<V> = Arc<OnceCell<Result<V, String>>>;

/// One kind of review, its answers and the reviews in flight.
pub struct Reviews<K, V> {
    /// `TokenReview` or `SubjectAccessReview`, as metrics label it.
    kind: &'static str,
    cache: TtlCache<K, V>,
    in_flight: Mutex<HashMap<K, Pending<V>>>,
    slots: Semaphore,
    metrics: SecurityMetrics,
}

impl<K: Hash + Eq + Clone, V: Clone> Reviews<K, V> {
    /// Keeps at most `capacity` answers and runs at most `concurrency` reviews at once.
    pub fn new(kind: &'static str, capacity: usize, concurrency: usize, metrics: SecurityMetrics) -> Self {
        Self {
            kind,
            cache: TtlCache::new(capacity),
            in_flight: Mutex::default(),
            slots: Semaphore::new(concurrency.max(1)),
            metrics,
        }
    }

    /// The answer to `key`: kept, being reviewed for another caller, or reviewed now by `review`,
    /// which returns the answer and how long to keep it, or why the API server could not answer
    /// (not kept: the next caller asks again).
    pub async fn answer<F, Fut>(&self, key: K, review: F) -> Result<V, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(V, Duration), String>>,
    {
        if let Some(answer) = self.cache.get(&key) {
            self.metrics.review(self.kind, "cached");
            return Ok(answer);
        }
        let cell = Arc::clone(self.in_flight.lock().entry(key.clone()).or_default());
        let mut reviewed_here = false;
        let answer = cell
            .get_or_init(|| async {
                reviewed_here = true;
                self.review(&key, review).await
            })
            .await
            .clone();
        if !reviewed_here {
            self.metrics.review(self.kind, "joined");
        }
        let mut in_flight = self.in_flight.lock();
        if in_flight.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            in_flight.remove(&key);
        }
        answer
    }

    async fn review<F, Fut>(&self, key: &K, review: F) -> Result<V, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(V, Duration), String>>,
    {
        let _slot = match self.slots.try_acquire() {
            Ok(slot) => slot,
            Err(_) => {
                self.metrics.review_waited(self.kind);
                self.slots
                    .acquire()
                    .await
                    .map_err(|_| "reviews are closed".to_owned())?
            }
        };
        let _counted = self.metrics.review_started(self.kind);
        let started = Instant::now();
        let outcome = review().await;
        self.metrics.review_took(self.kind, started.elapsed());
        match outcome {
            Ok((answer, ttl)) => {
                self.metrics.review(self.kind, "reviewed");
                self.cache.put(key.clone(), answer.clone(), ttl);
                Ok(answer)
            }
            Err(e) => {
                self.metrics.review(self.kind, "error");
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::telemetry::Metrics;

    /// A thousand callers with one question cause one review; a thousand with different
    /// questions never have more than the limit in flight.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_review_per_question_and_never_more_than_the_limit_at_once() {
        let metrics = Metrics::new().security;
        let reviews = Arc::new(Reviews::<u32, u32>::new("TokenReview", 10_000, 4, metrics));
        let (asked, running, most) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let ask = |key: u32| {
            let (reviews, asked, running, most) = (
                Arc::clone(&reviews),
                Arc::clone(&asked),
                Arc::clone(&running),
                Arc::clone(&most),
            );
            tokio::spawn(async move {
                reviews
                    .answer(key, || async move {
                        asked.fetch_add(1, Ordering::SeqCst);
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok((key * 2, Duration::from_secs(5)))
                    })
                    .await
            })
        };
        let same: Vec<_> = (0..1000).map(|_| ask(7)).collect();
        for answer in same {
            assert_eq!(answer.await.unwrap(), Ok(14));
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1, "one review for one question");

        let different: Vec<_> = (1000..1200).map(ask).collect();
        for (key, answer) in (1000..1200).zip(different) {
            assert_eq!(answer.await.unwrap(), Ok(key * 2));
        }
        assert_eq!(asked.load(Ordering::SeqCst), 201);
        assert!(most.load(Ordering::SeqCst) <= 4, "at most 4 at once: {most:?}");
        // Kept: asked again, answered without a review.
        assert_eq!(ask(1100).await.unwrap(), Ok(2200));
        assert_eq!(asked.load(Ordering::SeqCst), 201);
    }

    /// A review the API server could not answer is not kept: the next caller asks again.
    #[tokio::test]
    async fn failures_are_not_kept() {
        let reviews = Reviews::<u32, u32>::new("SubjectAccessReview", 10, 1, Metrics::new().security);
        let failed = reviews.answer(1, || async { Err("unreachable".to_owned()) }).await;
        assert_eq!(failed, Err("unreachable".to_owned()));
        let answered = reviews.answer(1, || async { Ok((5, Duration::from_secs(1))) }).await;
        assert_eq!(answered, Ok(5));
    }
}
