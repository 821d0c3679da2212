//! The last `metadata` the hub sent for each resource, so that a synthetic resync delete for a
//! resource only the agent still holds can name it (`docs/protocol.md` §5.1, fix 2). Bounded:
//! past the limit the oldest entries are forgotten first. Every operation is O(1) (amortized):
//! entries carry the sequence number of their place in the eviction order, and places left by
//! forgotten or refreshed entries are skipped (and compacted away) instead of searched for.

use std::collections::{HashMap, VecDeque};

type Key = (String, String, String);

struct Entry {
    source: String,
    metadata: String,
    /// The entry's place in `order`.
    seq: u64,
}

pub struct RememberedMetadata {
    limit: usize,
    entries: HashMap<Key, Entry>,
    /// Keys oldest first, with the sequence number they were queued under; stale places (the
    /// key was forgotten, or queued again later) are skipped.
    order: VecDeque<(u64, Key)>,
    next_seq: u64,
}

impl RememberedMetadata {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            entries: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
        }
    }

    pub fn put(&mut self, cluster: &str, data_type: &str, id: &str, source: &str, metadata: &str) {
        if self.limit == 0 {
            return;
        }
        let key = (cluster.to_owned(), data_type.to_owned(), id.to_owned());
        match self.entries.get_mut(&key) {
            Some(entry) => {
                // Refreshed: keeps its place in line, as before.
                entry.source = source.to_owned();
                entry.metadata = metadata.to_owned();
            }
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.order.push_back((seq, key.clone()));
                self.entries.insert(
                    key,
                    Entry {
                        source: source.to_owned(),
                        metadata: metadata.to_owned(),
                        seq,
                    },
                );
            }
        }
        while self.entries.len() > self.limit {
            let Some((seq, oldest)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&oldest).is_some_and(|e| e.seq == seq) {
                self.entries.remove(&oldest);
            }
        }
        self.compact();
    }

    /// `(source, metadata)` of a resource.
    pub fn get(&self, cluster: &str, data_type: &str, id: &str) -> Option<(String, String)> {
        self.entries
            .get(&(cluster.to_owned(), data_type.to_owned(), id.to_owned()))
            .map(|e| (e.source.clone(), e.metadata.clone()))
    }

    pub fn forget(&mut self, cluster: &str, data_type: &str, id: &str) {
        self.entries
            .remove(&(cluster.to_owned(), data_type.to_owned(), id.to_owned()));
        self.compact();
    }

    /// Drops stale places once they outnumber the live entries, so `order` stays O(entries).
    fn compact(&mut self) {
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order
                .retain(|(seq, key)| entries.get(key).is_some_and(|e| e.seq == *seq));
        }
    }

    #[cfg(test)]
    fn places(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_entries_go_first_past_the_limit() {
        let mut m = RememberedMetadata::new(2);
        m.put("c", "t", "a", "kube", "{\"name\":\"a\"}");
        m.put("c", "t", "b", "kube", "{}");
        m.put("c", "t", "a", "kube", "{\"name\":\"a2\"}");
        assert_eq!(m.get("c", "t", "a").unwrap().1, "{\"name\":\"a2\"}");
        m.put("c", "t", "c", "kube", "{}");
        assert!(m.get("c", "t", "a").is_none());
        assert!(m.get("c", "t", "b").is_some());
        m.forget("c", "t", "b");
        assert!(m.get("c", "t", "b").is_none());
    }

    #[test]
    fn forgetting_leaves_no_trail() {
        let mut m = RememberedMetadata::new(10);
        for i in 0..10_000 {
            let id = i.to_string();
            m.put("c", "t", &id, "kube", "{}");
            m.forget("c", "t", &id);
        }
        assert!(m.places() < 200, "{} places kept for no entries", m.places());
        // A forgotten key put again is one entry, evicted in its new place.
        m.put("c", "t", "x", "kube", "{}");
        m.forget("c", "t", "x");
        m.put("c", "t", "x", "kube", "{}");
        for i in 0..10 {
            m.put("c", "t", &format!("y{i}"), "kube", "{}");
        }
        assert!(m.get("c", "t", "x").is_none(), "the oldest goes first");
        assert_eq!(m.entries.len(), 10);
    }
}
