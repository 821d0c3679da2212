//! A small cache of decisions that expire: TokenReview and SubjectAccessReview answers are kept
//! for seconds, so that an agent's burst of calls costs the API server one review.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// At most `capacity` entries, each kept for the time given when it was put.
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    capacity: usize,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// The value for `key` if it has not expired.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((value, expires)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `ttl` (a zero `ttl` keeps nothing).
    pub fn put(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, expires)| *expires > now);
            if entries.len() >= self.capacity {
                // Full of live entries: start over rather than grow (it is only a cache).
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_size_stays_bounded() {
        let cache = TtlCache::new(3);
        cache.put("a", 1, Duration::from_secs(60));
        cache.put("b", 2, Duration::from_millis(1));
        cache.put("zero", 9, Duration::ZERO);
        assert_eq!(cache.get(&"a"), Some(1));
        assert_eq!(cache.get(&"zero"), None, "a zero TTL keeps nothing");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(cache.get(&"b"), None, "expired");
        for (i, k) in ["c", "d", "e", "f", "g"].into_iter().enumerate() {
            cache.put(k, i, Duration::from_secs(60));
            assert!(cache.len() <= 3);
        }
        assert_eq!(cache.get(&"g"), Some(4));
    }
}
