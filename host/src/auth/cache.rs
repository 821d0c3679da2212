//! A cache of decisions that expire: TokenReview and SubjectAccessReview answers are kept for
//! seconds, so that an agent's burst of calls costs the API server one review. Full, it lets go
//! of the entry used least recently — never of everything at once, which would send every agent
//! to the API server together.

use std::hash::Hash;
use std::time::{Duration, Instant};

use hashlink::LruCache;
use parking_lot::Mutex;

/// At most `capacity` entries, each kept for the time given when it was put.
pub struct TtlCache<K, V> {
    entries: Mutex<LruCache<K, (V, Instant)>>,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(LruCache::new(capacity.max(1))),
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
        // Full, the cache drops the entry used least recently.
        self.entries.lock().insert(key, (value, Instant::now() + ttl));
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

    #[test]
    fn a_full_cache_lets_go_of_the_entry_used_least_recently_and_only_of_it() {
        let cache = TtlCache::new(3);
        for k in ["a", "b", "c"] {
            cache.put(k, k, Duration::from_secs(60));
        }
        assert_eq!(cache.get(&"a"), Some("a"), "a is used again: b is now the oldest");
        cache.put("d", "d", Duration::from_secs(60));
        assert_eq!(cache.get(&"b"), None, "b went");
        for k in ["a", "c", "d"] {
            assert_eq!(cache.get(&k), Some(k), "{k} stays");
        }
    }
}
