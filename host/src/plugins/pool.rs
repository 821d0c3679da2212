//! A pool of plugin instances: at most `size` calls run at once, each on an instance of its own;
//! an instance whose call failed hard (a trap, a timeout) is dropped and a fresh one is made for
//! the next call; one retired after a good call (its memory, its age) is replaced in the
//! background, off the call path ([`Pool::replace_in_background`]). Waiting for a free instance
//! is bounded: past the wait, the call fails as `Unavailable` instead of queueing forever behind
//! a stuck plugin.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use conductor_plugin_sdk::Error;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::runtime::{CallError, Wait};

pub type MakeInstance<T> = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<T, Error>> + Send>> + Send + Sync>;

pub struct Pool<T> {
    plugin: String,
    size: usize,
    idle: Arc<Mutex<Vec<T>>>,
    permits: Arc<Semaphore>,
    make: MakeInstance<T>,
    wait: Duration,
}

impl<T: Send + 'static> Pool<T> {
    /// A pool of up to `size` instances, starting with `first`; a call waits at most `wait` for
    /// a free instance.
    pub fn new(plugin: &str, size: usize, wait: Duration, first: T, make: MakeInstance<T>) -> Self {
        Self {
            plugin: plugin.to_owned(),
            size: size.max(1),
            idle: Arc::new(Mutex::new(vec![first])),
            permits: Arc::new(Semaphore::new(size.max(1))),
            make,
            wait,
        }
    }

    /// How many instances exist now (idle ones, and those in calls).
    pub fn instances(&self) -> usize {
        self.idle.lock().len() + (self.size - self.permits.available_permits())
    }

    /// Runs `call` with an idle instance (or a new one). The call hands the instance back to
    /// keep it, or `None` to have it replaced. Fails as [`CallError::Busy`] if no instance
    /// frees up within the pool's wait.
    pub async fn with<R>(&self, wait: Wait, call: impl AsyncFnOnce(T) -> (R, Option<T>)) -> Result<R, CallError> {
        self.run(wait, false, call).await
    }

    /// As [`Self::with`], on an instance made for this call (never one that served before).
    pub async fn with_new_instance<R>(
        &self,
        wait: Wait,
        call: impl AsyncFnOnce(T) -> (R, Option<T>),
    ) -> Result<R, CallError> {
        self.run(wait, true, call).await
    }

    async fn run<R>(&self, wait: Wait, new: bool, call: impl AsyncFnOnce(T) -> (R, Option<T>)) -> Result<R, CallError> {
        let acquired = match wait {
            Wait::Patient => self.permits.acquire().await,
            Wait::Bounded => tokio::time::timeout(self.wait, self.permits.acquire())
                .await
                .map_err(|_| CallError::Busy {
                    plugin: self.plugin.clone(),
                    size: self.size,
                    waited: self.wait,
                })?,
        };
        let permit = acquired.map_err(|_| Error::Unavailable(format!("plugin {:?} is stopping", self.plugin)))?;
        let idle = if new { None } else { self.idle.lock().pop() };
        let instance = match idle {
            Some(i) => i,
            None => (self.make)().await?,
        };
        let (result, back) = call(instance).await;
        if let Some(instance) = back {
            self.idle.lock().push(instance);
        }
        drop(permit);
        Ok(result)
    }

    /// Makes an instance on a task of its own and adds it to the idle ones (unless the pool is
    /// full by then): the replacement of one retired after its call, ready before the next call
    /// needs it.
    pub fn replace_in_background(&self) {
        let (idle, permits, make) = (
            Arc::clone(&self.idle),
            Arc::clone(&self.permits),
            Arc::clone(&self.make),
        );
        let (plugin, size) = (self.plugin.clone(), self.size);
        tokio::spawn(async move {
            match make().await {
                Ok(instance) => {
                    let mut idle = idle.lock();
                    let in_calls = size.saturating_sub(permits.available_permits());
                    if idle.len() + in_calls < size {
                        idle.push(instance);
                    }
                }
                Err(e) => {
                    tracing::warn!(%plugin, error = %e, "a replacement instance did not start; the next call makes one")
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn pool(size: usize, wait: Duration, made: Arc<AtomicUsize>) -> Arc<Pool<usize>> {
        let make: MakeInstance<usize> = Arc::new(move || {
            let n = made.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move { Ok(n) })
        });
        Arc::new(Pool::new("p", size, wait, 0, make))
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_finds_every_instance_busy_fails_unavailable_after_the_wait() {
        let p = pool(1, Duration::from_millis(500), Arc::default());
        let busy = {
            let p = Arc::clone(&p);
            tokio::spawn(async move {
                p.with(Wait::Bounded, async |i| {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    ((), Some(i))
                })
                .await
            })
        };
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        let refused = p.with(Wait::Bounded, async |i| ((), Some(i))).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        assert!(matches!(refused, CallError::Busy { .. }), "{refused}");
        let err = Error::from(refused);
        assert!(matches!(&err, Error::Unavailable(m) if m.contains("\"p\"")), "{err}");
        busy.abort();
    }

    #[tokio::test]
    async fn failed_instances_are_replaced_and_the_pool_grows_to_its_size() {
        let made = Arc::new(AtomicUsize::new(0));
        let p = pool(2, Duration::from_secs(1), Arc::clone(&made));
        // Dropped (None): the next call makes a new one.
        p.with(Wait::Bounded, async |_| ((), None)).await.unwrap();
        let got = p.with(Wait::Patient, async |i| (i, Some(i))).await.unwrap();
        assert_eq!(got, 1);
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(p.instances(), 1);
    }

    #[tokio::test]
    async fn a_retired_instance_is_replaced_off_the_call_path_and_a_new_instance_is_never_an_old_one() {
        let made = Arc::new(AtomicUsize::new(0));
        let p = pool(2, Duration::from_secs(1), Arc::clone(&made));
        p.with(Wait::Bounded, async |_| {
            p.replace_in_background();
            ((), None)
        })
        .await
        .unwrap();
        while p.instances() == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(made.load(Ordering::SeqCst), 1, "made by the background task");
        let got = p.with(Wait::Bounded, async |i| (i, Some(i))).await.unwrap();
        assert_eq!(got, 1, "the next call finds the replacement");
        let fresh = p
            .with_new_instance(Wait::Bounded, async |i| (i, Some(i)))
            .await
            .unwrap();
        assert_eq!(fresh, 2, "made for the call, though one was idle");
        assert_eq!(p.instances(), 2);
        // The pool is full: a replacement made now is not kept.
        p.replace_in_background();
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(made.load(Ordering::SeqCst), 3);
        assert_eq!(p.instances(), 2, "never more than its size");
    }
}
