//! Agent → hub requests for one plugin, handed over in batches when they wait together.
//!
//! Every request joins one line. A caller that gets a turn — at most `limits.request_calls`
//! callers (by default `pool_size`, the instances the plugin may run) have one at a time — takes
//! its share of what waits in the line, the oldest first: the line divided among the turns (so a
//! burst keeps every instance busy rather than going to one call while the others idle), or the
//! whole line for a plugin that imports `requests` (below), at most `limits.request_batch`. It
//! makes one call of it: `handle` for a request that waited alone, `handle-batch` for two or
//! more. Each result goes back to its own caller. Nothing waits to make a batch: at low load a
//! caller finds only its own request and calls at once, as before; under load, requests that
//! arrive while every turn is taken wait in the line and go together in the next call (the group
//! commit of a database, made at the plugin's door).
//!
//! A caller that finds its request taken by another's batch waits for that batch's answer. A
//! batch carrying other callers' requests runs on a task of its own, so a caller that goes away
//! (its agent cancelled) does not take their answers with it. A request still in the line after
//! `limits.acquire_timeout` leaves it and fails as `Unavailable`, as a call that found no
//! instance did.
//!
//! A plugin that imports `requests` (contract 0.6.1) also takes, while its `handle-batch` call
//! runs, what joined the line since ([`take_waiting`], up to `limits.request_batch` in all), and
//! answers those after the requests it was given: what would have waited for the next call goes
//! into the running one (the maestro plugin's transaction before its `COMMIT`). Such a plugin is
//! always called with `handle-batch`, even for one request.

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
    takes_waiting: bool,
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
            takes_waiting: false,
        }
    }

    /// A line whose plugin takes requests that wait into its running `handle-batch` calls
    /// ([`take_waiting`]): every call is then a `handle-batch`, even of one request.
    pub fn taking_waiting(mut self, takes_waiting: bool) -> Self {
        self.takes_waiting = takes_waiting;
        self
    }

    /// Hands `request` to the plugin, alone or in a batch, and returns its own result.
    pub async fn handle(self: &Arc<Self>, calls: &Arc<PluginCalls>, request: Request) -> Result<(), Error> {
        // At rest — a turn free and nobody waiting — the request is called at once, alone,
        // without joining the line (no timer: the call at low load costs what it did).
        if let Ok(turn) = Arc::clone(&self.turns).try_acquire_owned()
            && self.line.lock().is_empty()
        {
            if !self.takes_waiting {
                let Request { identity, event } = request;
                let reply = calls.call(PluginRequest::Handle(identity, event), Wait::Bounded).await;
                drop(turn);
                return reply.map(drop);
            }
            let (answer, answered) = oneshot::channel();
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            run(Arc::clone(self), calls, vec![Waiting { id, request, answer }], turn).await;
            return answer_of(answered).await;
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
                0 => {
                    drop(turn);
                    return answer_of(answered).await;
                }
                1 if carries_own => run(Arc::clone(self), calls, batch, turn).await,
                _ => {
                    tokio::spawn(run(Arc::clone(self), Arc::clone(calls), batch, turn));
                }
            }
            if !carries_own {
                // The line was longer than a batch, this request further back: take another turn.
                continue;
            }
            return answer_of(answered).await;
        }
    }

    /// A turn's share of the requests waiting, oldest first, at most a batch. A plugin that
    /// handles a batch one request after another (the SDKs' default) gets the line divided among
    /// the turns, and so keeps as many calls running as before batches. One that takes what waits
    /// into its running call (`requests`) does a batch's work at once (one transaction): its turn
    /// takes the whole line, as a call dividing it would only pay that work more often.
    fn take(&self) -> Vec<Waiting> {
        let mut line = self.line.lock();
        let share = match self.takes_waiting {
            true => line.len(),
            false => line.len().div_ceil(self.size),
        };
        line.drain(..share.min(self.batch)).collect()
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

tokio::task_local! {
    /// The line of the batch a call is running, for the plugin to take what waits in it.
    static RUNNING: Arc<Taking>;
}

/// What a running batch took from its line besides what it was given.
struct Taking {
    line: Arc<Requests>,
    room: usize,
    taken: Mutex<Vec<Answer>>,
}

/// Up to `max` requests waiting in the line of the batch this task runs (none outside one); each
/// is answered by the running call.
pub fn take_waiting(max: usize) -> Vec<Request> {
    RUNNING
        .try_with(|taking| {
            let mut taken = taking.taken.lock();
            let n = max.min(taking.room.saturating_sub(taken.len()));
            if n == 0 {
                return Vec::new();
            }
            let mut line = taking.line.line.lock();
            let n = n.min(line.len());
            line.drain(..n)
                .map(|w| {
                    taken.push(w.answer);
                    w.request
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One call with `batch`, each result sent to its caller; the turn is given back when the call
/// returns. A plugin that takes waiting requests gets `handle-batch`, and answers those it takes
/// after those it was given; any other gets `handle` for one request, `handle-batch` for more.
async fn run(line: Arc<Requests>, calls: impl AsRef<PluginCalls>, batch: Vec<Waiting>, turn: OwnedSemaphorePermit) {
    let (mut requests, mut answers): (Vec<Request>, Vec<Answer>) =
        batch.into_iter().map(|w| (w.request, w.answer)).unzip();
    let calls = calls.as_ref();
    let results = if line.takes_waiting {
        let given = requests.len();
        let taking = Arc::new(Taking {
            room: line.batch.saturating_sub(given),
            line: Arc::clone(&line),
            taken: Mutex::new(Vec::new()),
        });
        let reply = RUNNING
            .scope(
                Arc::clone(&taking),
                calls.call(PluginRequest::HandleBatch(requests), Wait::Bounded),
            )
            .await;
        let mut taken = std::mem::take(&mut *taking.taken.lock());
        if given + taken.len() > 1 {
            calls.batched(given + taken.len());
        }
        match reply {
            // A call retried on a fresh instance takes anew: what an earlier attempt took has no
            // result, and the last results answer the last taken.
            Ok(PluginReply::Handled(results)) if results.len() >= given && results.len() - given <= taken.len() => {
                let unanswered = taken.len() - (results.len() - given);
                for answer in taken.drain(..unanswered) {
                    let _ = answer.send(Err(Error::Internal(
                        "the plugin call that took this request returned no result for it".into(),
                    )));
                }
                answers.append(&mut taken);
                results
            }
            reply => {
                answers.append(&mut taken);
                results_of(reply, answers.len())
            }
        }
    } else if requests.len() == 1 {
        let Some(Request { identity, event }) = requests.pop() else {
            return;
        };
        vec![
            calls
                .call(PluginRequest::Handle(identity, event), Wait::Bounded)
                .await
                .map(drop),
        ]
    } else {
        let count = requests.len();
        calls.batched(count);
        results_of(
            calls.call(PluginRequest::HandleBatch(requests), Wait::Bounded).await,
            count,
        )
    };
    drop(turn);
    for (answer, result) in answers.into_iter().zip(results) {
        // A caller that went away no longer waits for its answer.
        let _ = answer.send(result);
    }
}

/// The results of a `handle-batch` call for `count` requests: one each, or the call's failure for
/// every one.
fn results_of(reply: Result<PluginReply, Error>, count: usize) -> Vec<Result<(), Error>> {
    match reply {
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
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use conductor_plugin_sdk::{CloudEvent, Identity};
    use std::sync::atomic::AtomicBool;

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
        /// Whether its `handle-batch` takes the requests waiting once it may go on, and whether
        /// it answers them (a plugin that drops what it took answers only what it was given).
        takes: AtomicBool,
        answers_taken: AtomicBool,
        taken: Mutex<Vec<Vec<String>>>,
        kinds: Mutex<Vec<&'static str>>,
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
                    self.kinds.lock().push("handle");
                    let reply = answer(&event).map(|()| PluginReply::Done);
                    (vec![event.id], reply)
                }
                PluginRequest::HandleBatch(requests) => {
                    self.kinds.lock().push("handle-batch");
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
            let reply = match reply {
                Ok(PluginReply::Handled(mut results)) if self.takes.load(Ordering::Relaxed) => {
                    let taken = take_waiting(usize::MAX);
                    if self.answers_taken.load(Ordering::Relaxed) {
                        results.extend(taken.iter().map(|r| answer(&r.event)));
                    }
                    self.taken.lock().push(taken.into_iter().map(|r| r.event.id).collect());
                    Ok(PluginReply::Handled(results))
                }
                reply => reply,
            };
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

    /// [`setup`] for a plugin that takes what waits into its running `handle-batch`, answering it
    /// or not.
    fn setup_taking(
        turns: usize,
        batch: usize,
        answers_taken: bool,
    ) -> (Arc<Requests>, Arc<PluginCalls>, Arc<Recorder>) {
        let (requests, calls, recorder) = setup(turns, batch);
        recorder.takes.store(true, Ordering::Relaxed);
        recorder.answers_taken.store(answers_taken, Ordering::Relaxed);
        let requests = Arc::into_inner(requests).map(|r| r.taking_waiting(true)).map(Arc::new);
        (requests.expect("not shared yet"), calls, recorder)
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
    async fn a_running_batch_takes_what_waits_up_to_request_batch_and_answers_each() {
        assert!(take_waiting(10).is_empty(), "nothing to take outside a call");
        let (requests, calls, recorder) = setup_taking(1, 3, true);
        let results = behind_a_held_call(&requests, &calls, &recorder, &["a", "bad-b", "c", "d"]).await;
        assert_eq!(results[0], Ok(()));
        assert_eq!(results[1], Err(Error::Invalid("refused bad-b".into())), "refused alone");
        assert_eq!(results[2..], [Ok(()), Ok(())]);
        // "first" was given alone and took two more (a batch holds three); "c" and "d" went
        // together in the next call, which found nothing left to take.
        assert_eq!(recorder.calls(), [vec!["first"], vec!["c", "d"]]);
        assert_eq!(*recorder.taken.lock(), [vec!["a", "bad-b"], vec![]]);
        assert_eq!(
            *recorder.kinds.lock(),
            ["handle-batch", "handle-batch"],
            "one request too"
        );
    }

    #[tokio::test]
    async fn a_request_taken_but_not_answered_fails_and_the_rest_keep_their_answers() {
        let (requests, calls, recorder) = setup_taking(1, 100, false);
        let results = behind_a_held_call(&requests, &calls, &recorder, &["a", "b"]).await;
        for result in results {
            assert!(
                matches!(&result, Err(Error::Internal(m)) if m.contains("no result for it")),
                "{result:?}"
            );
        }
        assert_eq!(*recorder.taken.lock(), [vec!["a", "b"]]);
    }

    #[tokio::test]
    async fn a_plugin_that_takes_nothing_gets_handle_for_a_request_alone() {
        let (requests, calls, recorder) = setup(1, 100);
        requests.handle(&calls, request("a")).await.unwrap();
        assert_eq!(*recorder.kinds.lock(), ["handle"]);
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

    /// Two turns taken by the held calls `first` and `second`, and six requests waiting in the
    /// line behind them: their ids, and the tasks of all eight callers.
    async fn both_turns_held_and_six_waiting(
        requests: &Arc<Requests>,
        calls: &Arc<PluginCalls>,
        recorder: &Recorder,
    ) -> ([&'static str; 6], Vec<tokio::task::JoinHandle<Result<(), Error>>>) {
        for id in ["first", "second"] {
            recorder.hold(id);
        }
        let mut tasks = vec![send(requests, calls, "first"), send(requests, calls, "second")];
        until(|| recorder.calls().len() == 2).await;
        let ids = ["a", "b", "c", "d", "e", "f"];
        tasks.extend(ids.iter().map(|id| send(requests, calls, id)));
        until(|| requests.line.lock().len() == ids.len()).await;
        (ids, tasks)
    }

    #[tokio::test]
    async fn a_burst_is_shared_among_the_turns_not_given_to_one_call() {
        let (requests, calls, recorder) = setup(2, 100);
        let (ids, tasks) = both_turns_held_and_six_waiting(&requests, &calls, &recorder).await;
        // The first turn to come free takes its share, half the line; while that call runs, the
        // next turn takes half of what is left, and the one after it the rest.
        recorder.hold("a");
        recorder.release("first");
        until(|| recorder.calls().len() == 3).await;
        assert_eq!(recorder.calls()[2], ["a", "b", "c"]);
        recorder.release("second");
        until(|| recorder.finished.lock().len() == 4).await;
        assert_eq!(
            recorder.calls()[3..],
            [vec!["d", "e"], vec!["f"]],
            "half of what is left, then the rest"
        );
        // Only the held call keeps a turn: a caller whose request another call carries waits for
        // its answer without one.
        until(|| requests.turns.available_permits() == 1).await;
        recorder.release("a");
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(recorder.calls()[2..].concat(), ids, "each once, oldest first");
    }

    #[tokio::test]
    async fn a_plugin_that_takes_what_waits_gets_the_whole_line_with_a_turn() {
        let (requests, calls, recorder) = setup_taking(2, 100, true);
        // This recorder does not take in what waits while it runs: the line is cut at a turn only.
        recorder.takes.store(false, Ordering::Relaxed);
        let (ids, tasks) = both_turns_held_and_six_waiting(&requests, &calls, &recorder).await;
        recorder.release("first");
        until(|| recorder.calls().len() >= 3).await;
        assert_eq!(
            recorder.calls()[2],
            ids,
            "one call, one transaction, for all that waited"
        );
        recorder.release("second");
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(recorder.calls().len(), 3);
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
