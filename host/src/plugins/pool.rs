//! A pool of plugin instances: at most `size` calls run at once, each on an instance of its own;
//! an instance whose call failed hard (a trap, an interrupted loop) is dropped and a fresh one is
//! made for the next call.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Semaphore;

pub type MakeInstance<T, E> = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<T, E>> + Send>> + Send + Sync>;

pub struct Pool<T, E> {
    idle: Mutex<Vec<T>>,
    permits: Semaphore,
    make: MakeInstance<T, E>,
}

impl<T: Send + 'static, E> Pool<T, E> {
    /// A pool of up to `size` instances, starting with `first`.
    pub fn new(size: usize, first: T, make: MakeInstance<T, E>) -> Self {
        Self {
            idle: Mutex::new(vec![first]),
            permits: Semaphore::new(size.max(1)),
            make,
        }
    }

    /// Runs `call` with an idle instance (or a new one). The call hands the instance back to
    /// keep it, or `None` to have it replaced.
    pub async fn with<R>(&self, call: impl AsyncFnOnce(T) -> (R, Option<T>)) -> Result<R, E> {
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("the pool's semaphore is never closed");
        let idle = self.idle.lock().pop();
        let instance = match idle {
            Some(i) => i,
            None => (self.make)().await?,
        };
        let (result, back) = call(instance).await;
        if let Some(instance) = back {
            self.idle.lock().push(instance);
        }
        Ok(result)
    }
}
