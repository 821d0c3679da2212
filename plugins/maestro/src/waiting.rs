//! The events waiting to be sent, one line per consumer, taken fairly across consumers: a mass
//! delete, a replayed backlog or a source rolling out to every work of some clusters delays
//! another cluster's event by one batch at most, where one queue in arrival order would make it
//! wait behind all of them (Maestro's single spec worker did: new clusters waited hours behind
//! another consumer's deletes).
//!
//! Each consumer's line is first in, first out (its resources' order holds), and the lines are
//! served in turns, the one served least recently first: a consumer that had nothing waiting goes
//! first when something arrives. A batch takes one event from each line in turn until it is full.
//!
//! The lines live in `kv` (every instance of the plugin sees them, and they survive a reload):
//! the turn order and each line's length under [`TURNS`], each line in chunks under
//! `waiting/<consumer>/<n>`. They are
//! read and written only by `on-events` calls, which never overlap for this plugin.

use std::collections::{HashMap, VecDeque};

use conductor_plugin_sdk::{Error, Host, KvKey};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The consumers with events waiting, the one served least recently first, and their lines.
const TURNS: KvKey<Turns> = KvKey::new("waiting");
/// The line of events whose consumer is unknown (gone, or not a resource event): handled like
/// the others, to be skipped or marked by the batch that takes them.
pub const NO_CONSUMER: &str = "";
/// Events in one `kv` value of a line: a batch reads and writes the first chunk of each line it
/// serves and an arrival the last, never a whole line.
const CHUNK: usize = 100;

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Turns {
    lines: VecDeque<Line>,
}

/// One consumer's line: its chunks `waiting/<consumer>/<first>` … `<first + chunks - 1>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Line {
    consumer: String,
    first: u64,
    chunks: u64,
    waiting: u64,
}

impl Line {
    fn new(consumer: String) -> Self {
        Self {
            consumer,
            first: 0,
            chunks: 0,
            waiting: 0,
        }
    }

    fn key(&self, chunk: u64) -> String {
        format!("waiting/{}/{chunk}", self.consumer)
    }

    fn read<T: DeserializeOwned>(&self, host: &Host, chunk: u64) -> VecDeque<T> {
        host.kv_get(&self.key(chunk))
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn write<T: Serialize>(&self, host: &Host, chunk: u64, items: &VecDeque<T>) -> Result<(), Error> {
        let bytes = serde_json::to_vec(items).map_err(|e| {
            Error::Internal(format!(
                "the line of consumer {:?}: cannot encode it: {e}",
                self.consumer
            ))
        })?;
        host.kv_set(&self.key(chunk), &bytes)
    }

    /// Appends `items`: to the last chunk while it has room, then in new chunks.
    fn push<T: Serialize + DeserializeOwned>(&mut self, host: &Host, items: Vec<T>) -> Result<(), Error> {
        self.waiting += items.len() as u64;
        let mut items = items.into_iter().peekable();
        let mut last: VecDeque<T> = if self.chunks > 0 {
            self.read(host, self.first + self.chunks - 1)
        } else {
            VecDeque::new()
        };
        if self.chunks == 0 || last.len() >= CHUNK {
            last.clear();
            self.chunks += 1;
        }
        while items.peek().is_some() {
            last.extend(items.by_ref().take(CHUNK - last.len()));
            self.write(host, self.first + self.chunks - 1, &last)?;
            if items.peek().is_some() {
                last.clear();
                self.chunks += 1;
            }
        }
        Ok(())
    }
}

/// A line being served: its first chunk in memory, the next read when it runs out.
struct Serving<T> {
    line: Line,
    head: VecDeque<T>,
    changed: bool,
}

impl<T: Serialize + DeserializeOwned> Serving<T> {
    fn open(host: &Host, line: Line) -> Self {
        let head = line.read(host, line.first);
        Self {
            line,
            head,
            changed: false,
        }
    }

    fn pop(&mut self, host: &Host) -> Option<T> {
        while self.head.is_empty() && self.line.chunks > 1 {
            host.kv_delete(&self.line.key(self.line.first));
            self.line.first += 1;
            self.line.chunks -= 1;
            self.head = self.line.read(host, self.line.first);
        }
        let item = self.head.pop_front()?;
        self.line.waiting = self.line.waiting.saturating_sub(1);
        self.changed = true;
        Some(item)
    }

    /// Writes back what was taken; returns the line if events still wait in it.
    fn close(self, host: &Host) -> Result<Option<Line>, Error> {
        let line = self.line;
        if self.head.is_empty() && line.chunks <= 1 {
            host.kv_delete(&line.key(line.first));
            return Ok(None);
        }
        if self.changed {
            line.write(host, line.first, &self.head)?;
        }
        Ok(Some(line))
    }
}

/// What waits, for the metrics and the catch-up's pace.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Depth {
    pub events: u64,
    pub consumers: u64,
    /// The most events waiting for one consumer.
    pub deepest: u64,
}

/// Adds `items` (each with its consumer) at the end of their consumers' lines, in order. A
/// consumer that had nothing waiting takes its turn first.
pub fn add<T: Serialize + DeserializeOwned>(host: &Host, items: Vec<(String, T)>) -> Result<(), Error> {
    if items.is_empty() {
        return Ok(());
    }
    let mut turns = TURNS.get(host).unwrap_or_default();
    let mut order: Vec<String> = Vec::new();
    let mut new: HashMap<String, Vec<T>> = HashMap::new();
    for (consumer, item) in items {
        new.entry(consumer.clone())
            .or_insert_with(|| {
                order.push(consumer);
                Vec::new()
            })
            .push(item);
    }
    // Newcomers go first, in the order they arrived in.
    for consumer in order.iter().rev() {
        let added = new.remove(consumer).unwrap_or_default();
        match turns.lines.iter_mut().find(|l| &l.consumer == consumer) {
            Some(line) => line.push(host, added)?,
            None => {
                let mut line = Line::new(consumer.clone());
                line.push(host, added)?;
                turns.lines.push_front(line);
            }
        }
    }
    TURNS.set(host, &turns)
}

/// Takes up to `max` events: one from each line in turn, the consumer served least recently
/// first, until the batch is full or nothing waits. A consumer served that still has events
/// waiting goes to the end of the turns.
pub fn take<T: Serialize + DeserializeOwned>(host: &Host, max: usize) -> Result<Vec<T>, Error> {
    let Some(mut turns) = TURNS.get(host) else {
        return Ok(Vec::new());
    };
    // The lines served: the first `max` at most (each gives one event a round).
    let served = turns.lines.len().min(max);
    let mut serving: Vec<Serving<T>> = turns.lines.drain(..served).map(|l| Serving::open(host, l)).collect();
    let mut batch = Vec::with_capacity(max);
    while batch.len() < max {
        let before = batch.len();
        for line in serving.iter_mut() {
            if batch.len() == max {
                break;
            }
            if let Some(item) = line.pop(host) {
                batch.push(item);
            }
        }
        if batch.len() == before {
            break;
        }
    }
    for line in serving {
        if let Some(line) = line.close(host)? {
            turns.lines.push_back(line);
        }
    }
    if turns.lines.is_empty() {
        TURNS.take(host);
    } else {
        TURNS.set(host, &turns)?;
    }
    Ok(batch)
}

/// How many events wait, for how many consumers, and the deepest line.
pub fn depth(host: &Host) -> Depth {
    let turns = TURNS.get(host).unwrap_or_default();
    Depth {
        events: turns.lines.iter().map(|l| l.waiting).sum(),
        consumers: turns.lines.len() as u64,
        deepest: turns.lines.iter().map(|l| l.waiting).max().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::fakes::FakeHost;

    fn items(consumer: &str, range: std::ops::Range<u32>) -> Vec<(String, String)> {
        range
            .map(|i| (consumer.to_owned(), format!("{consumer}-{i}")))
            .collect()
    }

    #[test]
    fn a_consumer_that_arrives_behind_a_burst_is_in_the_next_batch() {
        let fake = FakeHost::new();
        let host = fake.host();
        for c in 0..10 {
            add(&host, items(&format!("burst{c}"), 0..1_000)).unwrap();
        }
        let first: Vec<String> = take(&host, 100).unwrap();
        assert_eq!(first.len(), 100);
        add(&host, items("quiet", 0..1)).unwrap();
        let next: Vec<String> = take(&host, 100).unwrap();
        assert_eq!(next[0], "quiet-0", "the newcomer goes first");
        assert_eq!(depth(&host).events, 10_000 - 200 + 1);
        // Every line, chunk after chunk, in order.
        let mut rest: Vec<String> = Vec::new();
        loop {
            let batch: Vec<String> = take(&host, 100).unwrap();
            if batch.is_empty() {
                break;
            }
            rest.extend(batch);
        }
        for c in 0..10 {
            let line: Vec<&String> = rest.iter().filter(|i| i.starts_with(&format!("burst{c}-"))).collect();
            let n = |s: &str| s.rsplit('-').next().unwrap().parse::<u32>().unwrap();
            assert!(line.windows(2).all(|w| n(w[0]) + 1 == n(w[1])), "burst{c} in order");
            assert_eq!(line.last().map(|s| n(s)), Some(999), "burst{c} to its end");
        }
        assert_eq!(rest.len(), 10_000 - 100 - 99);
        assert_eq!(depth(&host), Depth::default());
    }

    #[test]
    fn each_consumer_keeps_its_order_and_batches_take_turns() {
        let fake = FakeHost::new();
        let host = fake.host();
        add(&host, items("a", 0..5)).unwrap();
        add(&host, items("b", 0..2)).unwrap();
        let batch: Vec<String> = take(&host, 4).unwrap();
        assert_eq!(batch, ["b-0", "a-0", "b-1", "a-1"]);
        let rest: Vec<String> = take(&host, 10).unwrap();
        assert_eq!(rest, ["a-2", "a-3", "a-4"]);
        assert_eq!(take::<String>(&host, 10).unwrap(), Vec::<String>::new());
        assert_eq!(depth(&host), Depth::default());
        assert!(
            (0..3).all(|chunk| fake.host().kv_get(&format!("waiting/a/{chunk}")).is_none()),
            "an empty line leaves no key"
        );
    }

    #[test]
    fn the_consumer_served_goes_to_the_end_of_the_turns() {
        let fake = FakeHost::new();
        let host = fake.host();
        for c in ["a", "b", "c"] {
            add(&host, items(c, 0..3)).unwrap();
        }
        // Newcomers first, in the order they came: c, b, a. One event each round.
        assert_eq!(take::<String>(&host, 2).unwrap(), ["c-0", "b-0"]);
        // a has waited longest now.
        assert_eq!(take::<String>(&host, 2).unwrap(), ["a-0", "c-1"]);
        let d = depth(&host);
        assert_eq!((d.events, d.consumers, d.deepest), (5, 3, 2));
    }
}
