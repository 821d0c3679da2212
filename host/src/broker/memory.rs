//! The last `metadata` the hub sent for each resource, so that a synthetic resync delete for a
//! resource only the agent still holds can name it (`ocm-grpc-protocol.md` §5.1, fix 2). Bounded:
//! past the limit the oldest entries are forgotten first.

use std::collections::{HashMap, VecDeque};

type Key = (String, String, String);

pub struct MetadataMemory {
    limit: usize,
    entries: HashMap<Key, (String, String)>,
    order: VecDeque<Key>,
}

impl MetadataMemory {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub fn put(&mut self, cluster: &str, data_type: &str, id: &str, source: &str, metadata: &str) {
        if self.limit == 0 {
            return;
        }
        let key = (cluster.to_owned(), data_type.to_owned(), id.to_owned());
        let value = (source.to_owned(), metadata.to_owned());
        if self.entries.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.entries.len() > self.limit {
            let Some(oldest) = self.order.pop_front() else { break };
            self.entries.remove(&oldest);
        }
    }

    /// `(source, metadata)` of a resource.
    pub fn get(&self, cluster: &str, data_type: &str, id: &str) -> Option<(String, String)> {
        self.entries
            .get(&(cluster.to_owned(), data_type.to_owned(), id.to_owned()))
            .cloned()
    }

    pub fn forget(&mut self, cluster: &str, data_type: &str, id: &str) {
        let key = (cluster.to_owned(), data_type.to_owned(), id.to_owned());
        if self.entries.remove(&key).is_some() {
            self.order.retain(|k| k != &key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_entries_go_first_past_the_limit() {
        let mut m = MetadataMemory::new(2);
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
}
