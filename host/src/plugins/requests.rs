//! Agent → hub requests for one plugin, handed over in batches when they wait together.
//!
//! Every request joins one line. A caller that gets a turn — at most `pool_size` callers have
//! one at a time, the instances the plugin may run — takes what waits in the line (up to
//! `limits.request_batch`) and makes one call of it: `handle` for a request that waited alone,
//! `handle-batch` for two or more. Each result goes back to its own caller. Nothing waits to make
//! a batch: at low load a caller finds only its own request and calls at once, as before; under
//! load, requests that arrive while every turn is taken wait in the line and go together in the
//! next call (the group commit of a database, made at the plugin's door).
//!
//! A caller that finds its request taken by another's batch waits for that batch's answer. A
//! batch carrying other callers' requests runs on a task of its own, so a caller that goes away
//! (its agent cancelled) does not take their answers with it. A request still in the line after
//! `limits.acquire_timeout` leaves it and fails as `Unavailable`, as a call that found no
//! instance did.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use conductor_plugin_sdk::native::{PluginReply, PluginRequest};
use conductor_plugin_sdk::{Error, Request};
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::calls::PluginCalls;
use super::runtime::{CallError, Wait};

type Answer = oneshot::Sender<Result<(), Error>>;

struct Waiting {
    id: u64,
    request: Request,
    answer: Answer,
}

/// One plugin's line of agent requests.
pub struct Requests {
    plugin: String,
    line: Mutex<VecDeque<Waiting>>,
    next_id: AtomicU64,
    turns: Arc<Semaphore>,
    size: usize,
    batch: usize,
    wait: Duration,
}

impl Requests {
    /// A line for `plugin`: `turns` calls at once (its pool size), `batch` requests a call at
    /// most, a request waiting at most `wait` for a turn.
    pub fn new(plugin: &str, turns: usize, batch: usize, wait: Duration) -> Self {
        Self {
            plugin: plugin.to_owned(),
            line: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            turns: Arc::new(Semaphore::new(turns.max(1))),
            size: turns.max(1),
            batch: batch.max(1),
            wait,
        }
    }

    /// Hands `request` to the plugin, alone or in a batch, and returns its own result.
    pub async fn handle(self: &Arc<Self>, calls: &Arc<PluginCalls>, request: Request) -> Result<(), Error> {
        // At rest — a turn free and nobody waiting — the request is called at once, alone,
        // without joining the line (no channel, no timer: the call at low load costs what it did).
        if let Ok(turn) = Arc::clone(&self.turns).try_acquire_owned()
            && self.line.lock().is_empty()
        {
            let Request { identity, event } = request;
            let reply = calls.call(PluginRequest::Handle(identity, event), Wait::Bounded).await;
            drop(turn);
            return reply.map(drop);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, mut answered) = oneshot::channel();
        self.line.lock().push_back(Waiting { id, request, answer });
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let turn = tokio::select! {
                biased;
                result = &mut answered => return result.unwrap_or_else(|_| Err(lost())),
                turn = tokio::time::timeout_at(deadline, Arc::clone(&self.turns).acquire_owned()) => turn,
            };
            let Ok(Ok(turn)) = turn else {
                // No turn in time: leave the line, unless a batch took the request meanwhile.
                return match self.leave(id) {
                    true => Err(Error::from(CallError::Busy {
                        plugin: self.plugin.clone(),
                        size: self.size,
                        waited: self.wait,
                    })),
                    false => answer_of(answered).await,
                };
            };
            let batch = self.take();
            let carries_own = batch.iter().any(|w| w.id == id);
            match batch.len() {
                // Another caller's batch took it: its answer comes from there.
                0 => return answer_of(answered).await,
                1 if carries_own => run(calls, batch, turn).await,
                _ => {
                    tokio::spawn(run(Arc::clone(calls), batch, turn));
                }
            }
            if !carries_own {
                // The line was longer than a batch, this request further back: take another turn.
                continue;
            }
            return answer_of(answered).await;
        }
    }

    /// Up to a batch of the requests waiting, oldest first.
    fn take(&self) -> Vec<Waiting> {
        let mut line = self.line.lock();
        let n = line.len().min(self.batch);
        line.drain(..n).collect()
    }

    /// Takes request `id` out of the line; false if it is no longer there.
    fn leave(&self, id: u64) -> bool {
        let mut line = self.line.lock();
        match line.iter().position(|w| w.id == id) {
            Some(at) => {
                line.remove(at);
                true
            }
            None => false,
        }
    }
}

/// The answer a batch sent this request.
async fn answer_of(answered: oneshot::Receiver<Result<(), Error>>) -> Result<(), Error> {
    answered.await.unwrap_or_else(|_| Err(lost()))
}

fn lost() -> Error {
    Error::Internal("the call carrying this request ended without an answer".into())
}

/// One call with `batch` (`handle` for one request, `handle-batch` for more), each result sent
/// to its caller; the turn is given back when the call returns.
async fn run(calls: impl AsRef<PluginCalls>, batch: Vec<Waiting>, turn: OwnedSemaphorePermit) {
    let (requests, answers): (Vec<Request>, Vec<Answer>) = batch.into_iter().map(|w| (w.request, w.answer)).unzip();
    let count = requests.len();
    let results = match requests.len() {
        1 => {
            let Some(Request { identity, event }) = requests.into_iter().next() else {
                return;
            };
            let reply = calls
                .as_ref()
                .call(PluginRequest::Handle(identity, event), Wait::Bounded)
                .await;
            vec![reply.map(drop)]
        }
        _ => match calls
            .as_ref()
            .call(PluginRequest::HandleBatch(requests), Wait::Bounded)
            .await
        {
            Ok(PluginReply::Handled(results)) if results.len() == count => results,
            Ok(PluginReply::Handled(results)) => vec![
                Err(Error::Internal(format!(
                    "the plugin answered {count} requests with {} results",
                    results.len()
                )));
                count
            ],
            Ok(_) => vec![
                Err(Error::Internal(
                    "the plugin answered a batch of requests with no results".into()
                ));
                count
            ],
            Err(e) => vec![Err(e); count],
        },
    };
    drop(turn);
    for (answer, result) in answers.into_iter().zip(results) {
        // A caller that went away no longer waits for its answer.
        let _ = answer.send(result);
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use conductor_plugin_sdk::{CloudEvent, Identity};
    use tokio::sync::Notify;

    use super::*;
    use crate::plugins::runtime::Runtime;
    use crate::telemetry::Metrics;

    /// A plugin that records each call's event ids, holds a call carrying a held id until that id
    /// is let go, and refuses events whose id starts with `bad`.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<Vec<String>>>,
        finished: Mutex<Vec<Vec<String>>>,
        held: Mutex<Vec<String>>,
        go: Notify,
    }

    impl Recorder {
        fn calls(&self) -> Vec<Vec<String>> {
            self.calls.lock().clone()
        }
        fn hold(&self, id: &str) {
            self.held.lock().push(id.to_owned());
        }
        fn release(&self, id: &str) {
            self.held.lock().retain(|h| h != id);
            self.go.notify_waiters();
        }
        fn holds(&self, ids: &[String]) -> bool {
            self.held.lock().iter().any(|h| ids.contains(h))
        }
    }

    fn answer(event: &CloudEvent) -> Result<(), Error> {
        match event.id.starts_with("bad") {
            true => Err(Error::Invalid(format!("refused {}", event.id))),
            false => Ok(()),
        }
    }

    #[async_trait]
    impl Runtime for Arc<Recorder> {
        async fn call(&self, request: PluginRequest, _: Wait) -> Result<PluginReply, CallError> {
            let (ids, reply) = match request {
                PluginRequest::Handle(_, event) => {
                    let reply = answer(&event).map(|()| PluginReply::Done);
                    (vec![event.id], reply)
                }
                PluginRequest::HandleBatch(requests) => {
                    let results = requests.iter().map(|r| answer(&r.event)).collect();
                    let ids = requests.into_iter().map(|r| r.event.id).collect();
                    (ids, Ok(PluginReply::Handled(results)))
                }
                other => panic!("unexpected {other:?}"),
            };
            self.calls.lock().push(ids.clone());
            loop {
                let notified = self.go.notified();
                if !self.holds(&ids) {
                    break;
                }
                notified.await;
            }
            self.finished.lock().push(ids);
            reply.map_err(CallError::Failed)
        }
        fn instances(&self) -> usize {
            1
        }
    }

    fn setup(turns: usize, batch: usize) -> (Arc<Requests>, Arc<PluginCalls>, Arc<Recorder>) {
        let recorder = Arc::new(Recorder::default());
        let metrics = Metrics::new().plugin("p");
        let calls = Arc::new(PluginCalls::new("p", Arc::new(Arc::clone(&recorder)), turns, metrics));
        let requests = Arc::new(Requests::new("p", turns, batch, Duration::from_secs(10)));
        (requests, calls, recorder)
    }

    fn request(id: &str) -> Request {
        Request {
            identity: Identity {
                user: "agent".into(),
                groups: vec![],
            },
            event: CloudEvent::new(id, "s", "t"),
        }
    }

    fn send(
        requests: &Arc<Requests>,
        calls: &Arc<PluginCalls>,
        id: &str,
    ) -> tokio::task::JoinHandle<Result<(), Error>> {
        let (requests, calls, request) = (Arc::clone(requests), Arc::clone(calls), request(id));
        tokio::spawn(async move { requests.handle(&calls, request).await })
    }

    /// Lets spawned tasks run until `done` holds.
    async fn until(done: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never happened");
    }

    #[tokio::test]
    async fn a_request_alone_is_handled_at_once_by_itself() {
        let (requests, calls, recorder) = setup(2, 100);
        requests.handle(&calls, request("a")).await.unwrap();
        let refused = requests.handle(&calls, request("bad")).await.unwrap_err();
        assert_eq!(refused, Error::Invalid("refused bad".into()));
        assert_eq!(recorder.calls(), [vec!["a"], vec!["bad"]]);
    }

    /// Sends `ids` while a call ("first") holds the only turn, so that they wait in the line
    /// together; lets the call go and returns their answers.
    async fn behind_a_held_call(
        requests: &Arc<Requests>,
        calls: &Arc<PluginCalls>,
        recorder: &Recorder,
        ids: &[&str],
    ) -> Vec<Result<(), Error>> {
        recorder.hold("first");
        let first = send(requests, calls, "first");
        until(|| recorder.calls().len() == 1).await;
        let waiting: Vec<_> = ids.iter().map(|id| send(requests, calls, id)).collect();
        until(|| requests.line.lock().len() == ids.len()).await;
        recorder.release("first");
        first.await.unwrap().unwrap();
        futures::future::join_all(waiting)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect()
    }

    #[tokio::test]
    async fn requests_that_wait_together_go_in_one_call_each_with_its_own_answer() {
        let (requests, calls, recorder) = setup(1, 100);
        let results = behind_a_held_call(&requests, &calls, &recorder, &["a", "bad-b", "c"]).await;
        assert_eq!(results[0], Ok(()));
        assert_eq!(results[1], Err(Error::Invalid("refused bad-b".into())), "refused alone");
        assert_eq!(results[2], Ok(()));
        assert_eq!(
            recorder.calls(),
            [vec!["first"], vec!["a", "bad-b", "c"]],
            "one batch, in order"
        );
    }

    #[tokio::test]
    async fn a_batch_holds_at_most_request_batch_requests() {
        let (requests, calls, recorder) = setup(1, 2);
        let results = behind_a_held_call(&requests, &calls, &recorder, &["a", "b", "c", "d", "e"]).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let calls = recorder.calls();
        assert_eq!(calls[0], ["first"]);
        assert!(calls[1..].iter().all(|c| !c.is_empty() && c.len() <= 2), "{calls:?}");
        let order: Vec<String> = calls[1..].concat();
        assert_eq!(order, ["a", "b", "c", "d", "e"], "oldest first");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_gets_no_turn_in_time_fails_unavailable_and_is_never_handled() {
        let (requests, calls, recorder) = setup(1, 100);
        recorder.hold("first");
        let first = send(&requests, &calls, "first");
        until(|| recorder.calls().len() == 1).await;
        let started = tokio::time::Instant::now();
        let late = requests.handle(&calls, request("late")).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert!(matches!(&late, Error::Unavailable(m) if m.contains("busy")), "{late}");
        assert!(requests.line.lock().is_empty(), "it left the line");
        recorder.release("first");
        first.await.unwrap().unwrap();
        assert_eq!(recorder.calls(), [vec!["first"]]);
    }

    #[tokio::test]
    async fn a_caller_that_goes_away_takes_no_other_callers_answer_with_it() {
        let (requests, calls, recorder) = setup(1, 100);
        recorder.hold("first");
        let first = send(&requests, &calls, "first");
        until(|| recorder.calls().len() == 1).await;
        let a = send(&requests, &calls, "a");
        let b = send(&requests, &calls, "b");
        until(|| requests.line.lock().len() == 2).await;
        recorder.hold("a");
        recorder.release("first");
        first.await.unwrap().unwrap();
        // Both callers go away while their batch runs.
        until(|| recorder.calls().len() == 2).await;
        a.abort();
        b.abort();
        let c = send(&requests, &calls, "c");
        tokio::task::yield_now().await;
        recorder.release("a");
        c.await.unwrap().unwrap();
        let finished = recorder.finished.lock().clone();
        assert_eq!(
            finished,
            [vec!["first"], vec!["a", "b"], vec!["c"]],
            "the batch ran to its end"
        );
    }
}
