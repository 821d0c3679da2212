//! The last `metadata` the hub sent for each resource, so that a synthetic resync delete for a
//! resource only the agent still holds can name it (`docs/protocol.md` §5.1, fix 2). Bounded:
//! past the limit the oldest entries are forgotten first. Every operation is O(1): the entries
//! are kept in the order they were first put, linked, so forgetting one leaves nothing behind
//! (a queue of keys with stale places would hold a copy of every key forgotten since it was last
//! compacted: resident memory that rose for half an hour at a time under churn).

use hashlink::LinkedHashMap;

type Key = (String, String, String);

struct Entry {
    source: String,
    metadata: String,
}

pub struct RememberedMetadata {
    limit: usize,
    /// Oldest first: a refreshed entry keeps its place.
    entries: LinkedHashMap<Key, Entry>,
}

impl RememberedMetadata {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            entries: LinkedHashMap::new(),
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
                entry.source.replace_range(.., source);
                entry.metadata.replace_range(.., metadata);
            }
            None => {
                let entry = Entry {
                    source: source.to_owned(),
                    metadata: metadata.to_owned(),
                };
                self.entries.insert(key, entry);
            }
        }
        while self.entries.len() > self.limit {
            self.entries.pop_front();
        }
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
    }

    /// The heap the entries hold beyond the table itself, in bytes: bounded by the entries alone.
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.entries
            .iter()
            .map(|((c, t, i), e)| {
                c.capacity() + t.capacity() + i.capacity() + e.source.capacity() + e.metadata.capacity()
            })
            .sum()
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
        assert_eq!(m.entries.len(), 0);
        assert_eq!(m.held_bytes(), 0);
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

    #[test]
    fn churn_through_a_steady_set_holds_what_the_set_holds() {
        // A live set of 1,000 resources, each replaced by a new one, ten times over (as a source
        // deletes works and creates others): what is held is the set's, never the churn's.
        let mut m = RememberedMetadata::new(100_000);
        let put = |m: &mut RememberedMetadata, i: usize| {
            m.put("cluster", "works", &format!("{i:08}"), "maestro", "{\"name\":\"w\"}")
        };
        for i in 0..1_000 {
            put(&mut m, i);
        }
        let steady = m.held_bytes();
        for i in 1_000..11_000 {
            m.forget("cluster", "works", &format!("{:08}", i - 1_000));
            put(&mut m, i);
            assert!(
                m.held_bytes() <= steady,
                "{} bytes held at {i}, {steady} for the set",
                m.held_bytes()
            );
        }
        assert_eq!(m.entries.len(), 1_000);
    }
}
