//! `conductor:plugin/kv`: small values shared by the plugin's instances ([`KvStore`]). The store
//! belongs to the plugin's name, not to one loaded copy, so it survives reloads. What it holds is
//! bounded: at most `limits.kv_keys` keys and `limits.kv_bytes` bytes of keys and values together.

use std::collections::HashMap;
use std::sync::Arc;

use conductor_plugin_sdk::{Capability, Error};
use parking_lot::Mutex;

use super::guard::Guard;
use super::guard::KvLimits;

/// The plugin's keys and values, and how many bytes they take.
#[derive(Clone, Default)]
pub struct KvStore(Arc<Mutex<State>>);

#[derive(Default)]
struct State {
    values: HashMap<String, Vec<u8>>,
    /// Bytes of every key and value.
    bytes: usize,
}

/// Why a value was not stored: the limit it would have passed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvRefused {
    #[error("{keys} keys already held (limits.kv_keys = {keys})")]
    Keys { keys: usize },
    #[error("{needed} bytes would be held, more than limits.kv_bytes = {limit}")]
    Bytes { needed: usize, limit: usize },
}

impl KvRefused {
    /// The limit, as `limits.<name>` and metrics name it.
    pub fn limit(&self) -> &'static str {
        match self {
            Self::Keys { .. } => "kv_keys",
            Self::Bytes { .. } => "kv_bytes",
        }
    }
}

impl KvStore {
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.0.lock().values.get(key).cloned()
    }

    /// Stores `value` under `key` unless that would pass `limits`; then nothing changes.
    pub fn set(&self, key: &str, value: &[u8], limits: KvLimits) -> Result<(), KvRefused> {
        let mut state = self.0.lock();
        let old = state.values.get(key).map(|v| key.len() + v.len());
        if old.is_none() && state.values.len() >= limits.keys {
            return Err(KvRefused::Keys { keys: limits.keys });
        }
        let needed = state.bytes - old.unwrap_or(0) + key.len() + value.len();
        if needed > limits.bytes {
            return Err(KvRefused::Bytes {
                needed,
                limit: limits.bytes,
            });
        }
        state.bytes = needed;
        state.values.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    pub fn delete(&self, key: &str) -> bool {
        let mut state = self.0.lock();
        match state.values.remove(key) {
            Some(value) => {
                state.bytes -= key.len() + value.len();
                true
            }
            None => false,
        }
    }

    /// The keys and the bytes held.
    pub fn size(&self) -> (usize, usize) {
        let state = self.0.lock();
        (state.values.len(), state.bytes)
    }

    /// Every key and value, sorted by key (for the inspector).
    pub fn entries(&self) -> Vec<(String, Vec<u8>)> {
        let mut entries: Vec<(String, Vec<u8>)> = self
            .0
            .lock()
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        entries.sort();
        entries
    }
}

/// The `kv` capability of one plugin: its store, bounded by its limits.
pub struct KvHost {
    guard: Arc<Guard>,
    store: KvStore,
}

impl KvHost {
    pub fn new(guard: Arc<Guard>, store: KvStore) -> Self {
        Self { guard, store }
    }

    /// The plugin's store (for the inspector and `conductor plugins test`).
    pub fn store(&self) -> &KvStore {
        &self.store
    }

    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.guard.check(Capability::Kv).ok()?;
        self.store.get(key)
    }

    /// Stores `value`, unless the plugin's `kv` limits refuse it.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        self.guard.check(Capability::Kv)?;
        self.store
            .set(key, value, self.guard.grants().limits.kv)
            .map_err(|refused| {
                self.guard.refused(refused.limit());
                Error::Unavailable(format!("kv key {key:?} refused: {refused}"))
            })
    }

    pub fn delete(&self, key: &str) -> bool {
        self.guard.check(Capability::Kv).is_ok() && self.store.delete(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_bytes_are_bounded_and_a_refusal_changes_nothing() {
        let kv = KvStore::default();
        let limits = KvLimits { keys: 2, bytes: 20 };
        kv.set("a", b"12345", limits).unwrap();
        kv.set("b", b"12345", limits).unwrap();
        assert_eq!(kv.size(), (2, 12));
        assert_eq!(kv.set("c", b"1", limits), Err(KvRefused::Keys { keys: 2 }));
        // Replacing a value counts its new size only.
        kv.set("a", b"123456789", limits).unwrap();
        assert_eq!(kv.size(), (2, 16));
        assert_eq!(
            kv.set("b", b"1234567890", limits),
            Err(KvRefused::Bytes { needed: 21, limit: 20 })
        );
        assert_eq!(kv.get("b").as_deref(), Some(&b"12345"[..]), "unchanged");
        assert!(kv.delete("a"));
        assert_eq!(kv.size(), (1, 6));
        kv.set("c", b"1", limits).unwrap();
    }
}
