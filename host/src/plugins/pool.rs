//! A pool of plugin instances: at most `size` calls run at once, each on an instance of its own;
//! an instance whose call failed hard (a trap, a timeout) is dropped and a fresh one is made for
//! the next call. Waiting for a free instance is bounded: past the wait, the call fails as
//! `Unavailable` instead of queueing forever behind a stuck plugin.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use conductor_plugin_sdk::Error;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

/// How an agent's call that found no free instance in time is told so.
pub const BUSY: &str = "is busy: all";

/// How long a call waits for a free instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// At most the pool's wait, then `Unavailable` (agents' calls: they retry).
    Bounded,
    /// As long as it takes (the plugin's own work: `start`, host events).
    Patient,
}

pub type MakeInstance<T> = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<T, Error>> + Send>> + Send + Sync>;

pub struct Pool<T> {
    plugin: String,
    size: usize,
    idle: Mutex<Vec<T>>,
    permits: Semaphore,
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
            idle: Mutex::new(vec![first]),
            permits: Semaphore::new(size.max(1)),
            make,
            wait,
        }
    }

    /// How many instances exist now (idle ones, and those in calls).
    pub fn instances(&self) -> usize {
        self.idle.lock().len() + (self.size - self.permits.available_permits())
    }

    /// Runs `call` with an idle instance (or a new one). The call hands the instance back to
    /// keep it, or `None` to have it replaced. Fails as `Unavailable` if no instance frees up
    /// within the pool's wait.
    pub async fn with<R>(&self, wait: Wait, call: impl AsyncFnOnce(T) -> (R, Option<T>)) -> Result<R, Error> {
        let acquired = match wait {
            Wait::Patient => self.permits.acquire().await,
            Wait::Bounded => tokio::time::timeout(self.wait, self.permits.acquire())
                .await
                .map_err(|_| {
                    Error::Unavailable(format!(
                        "plugin {:?} {BUSY} {} of its instances stayed in calls for {:?}",
                        self.plugin, self.size, self.wait
                    ))
                })?,
        };
        let permit = acquired.map_err(|_| Error::Unavailable(format!("plugin {:?} is stopping", self.plugin)))?;
        let idle = self.idle.lock().pop();
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
        let err = p.with(Wait::Bounded, async |i| ((), Some(i))).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_millis(500));
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
}
