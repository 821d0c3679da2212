//! `conductor plugins test`: the plugin file loaded in the host's own runtime (the compile cache,
//! the pool, the limits, the capabilities' host side), with fakes behind the capabilities — `kv`
//! in memory, `emit` recorded, `log` and the plugin's output kept for the report, timers set but
//! never fired (the script fires them), `metrics` and `blob` as served — and the script's calls
//! made one after the other as an agent makes them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use conductor_plugin_sdk::ocm::extensions::{CLUSTER_NAME, ORIGINAL_SOURCE, RESOURCE_ID};
use conductor_plugin_sdk::ocm::{DataType, EventType, OcmExtensions, SubResource, actions};
use conductor_plugin_sdk::{Capability, CloudEvent, Error, HostEvent, Identity, ListOptions};
use parking_lot::Mutex;

use super::capture::{Captured, Line};
use super::script::{Call, Expect, Script, Step};
use crate::broker::{EventSink, FanoutError};
use crate::plugins::{Backends, HostContext, KvStore, Mode, PluginFile, PluginSource};
use crate::routes::Source;
use crate::telemetry::Metrics;

/// Why the plugin could not be tested at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{file}: {reason}")]
    Load { file: String, reason: String },
}

/// What loading the plugin showed.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub name: String,
    pub version: String,
    pub contract: String,
    pub sources: Vec<String>,
    pub data_types: Vec<String>,
    pub capabilities: Vec<&'static str>,
    /// Reading (compiling, or taking from the compile cache) and describing the file.
    pub read: Duration,
    /// Checking the configuration, `init` and `start`.
    pub started: Duration,
    pub logs: Vec<Line>,
}

/// A call's answer.
#[derive(Debug, Clone)]
pub enum Answer {
    Listed(Vec<CloudEvent>),
    Done,
    Failed(Error),
    /// The step could not be made (a resource the script names was not listed).
    NotMade(String),
}

/// A change of `kv` during a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvChange {
    Set { key: String, bytes: usize },
    Deleted { key: String },
}

/// One step replayed.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// `resync cluster1 io.open-…manifestbundles`, `status cluster1/web`, …
    pub what: String,
    pub answer: Answer,
    pub elapsed: Duration,
    pub kv: Vec<KvChange>,
    pub emitted: Vec<CloudEvent>,
    pub logs: Vec<Line>,
    /// How the answer differs from what the script expects; empty: as expected.
    pub differences: Vec<String>,
}

/// The events the plugin emitted, checked as the broker checks them.
#[derive(Default)]
struct Recorder(Mutex<Vec<CloudEvent>>);

impl EventSink for Recorder {
    fn emit(&self, _from: &str, event: &CloudEvent) -> Result<usize, FanoutError> {
        EventType::parse(&event.ty).map_err(|source| FanoutError::Type {
            id: event.id.clone(),
            source,
        })?;
        event.cluster_name().map_err(|e| FanoutError::ClusterName {
            id: event.id.clone(),
            reason: e.to_string(),
        })?;
        self.0.lock().push(event.clone());
        // The script's agent: one subscriber.
        Ok(1)
    }
}

/// The contract's name of an error's kind (`invalid`, `not-found`, …).
pub fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::Status(_) => "status",
        Error::NotFound(_) => "not-found",
        Error::AlreadyExists(_) => "already-exists",
        Error::Conflict(_) => "conflict",
        Error::Invalid(_) => "invalid",
        Error::Denied(_) => "denied",
        Error::Unavailable(_) => "unavailable",
        Error::Database(_) => "database",
        Error::Internal(_) => "internal",
    }
}

/// An error's message, without its kind.
pub fn error_message(e: &Error) -> String {
    match e {
        Error::Status(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        Error::NotFound(m)
        | Error::AlreadyExists(m)
        | Error::Conflict(m)
        | Error::Invalid(m)
        | Error::Denied(m)
        | Error::Unavailable(m)
        | Error::Internal(m) => m.clone(),
        Error::Database(d) => d.to_string(),
    }
}

/// The name an agent knows a listed resource by: `metadata.name`, else its `resourceid`.
pub fn name_of(event: &CloudEvent) -> String {
    event
        .metadata_json()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|m| m["name"].as_str().map(str::to_owned))
        .or_else(|| event.resource_id().ok().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// Capabilities `plugins test` has no fake for.
const NOT_FAKED: [Capability; 2] = [Capability::Pg, Capability::Kube];

/// A plugin loaded for a script, and what the conversation holds so far.
pub struct Replay {
    plugin: Arc<PluginSource>,
    sink: Arc<Recorder>,
    captured: Captured,
    agent: Identity,
    cluster: String,
    data_type: String,
    source: String,
    /// The last resync's answer, by (cluster, data type).
    listed: BTreeMap<(String, String), Vec<CloudEvent>>,
}

impl Replay {
    /// Reads the plugin file and loads it as `serve` would, but with the fakes.
    pub async fn load(script: &Script, captured: Captured) -> Result<(Self, Loaded), ReplayError> {
        let failed = |reason: String| ReplayError::Load {
            file: script.file.display().to_string(),
            reason,
        };
        crate::plugins::wasm::set_compile_cache(script.compile_cache.clone());
        let read_at = Instant::now();
        let file = PluginFile::read(script.plugin.kind, &script.file, None)
            .await
            .map_err(|e| failed(crate::errors::error_chain(&e)))?;
        let read = read_at.elapsed();
        if let Some(c) = file.capabilities.iter().find(|c| NOT_FAKED.contains(c)) {
            return Err(failed(format!(
                "the plugin imports `{}`, which plugins test does not fake (it fakes emit, log, timer, kv, metrics and blob): test it against a real backend with `conductor serve`",
                c.name()
            )));
        }
        let description = file.description.clone();
        let capabilities = file.capabilities.iter().map(|c| c.name()).collect();
        let sink = Arc::new(Recorder::default());
        let host = HostContext {
            sink: Arc::clone(&sink) as Arc<dyn EventSink>,
            backends: Backends::none(),
            metrics: Metrics::new(),
            mode: Mode::Serve,
        };
        let started_at = Instant::now();
        let plugin = PluginSource::load(&script.name, &script.plugin, file, KvStore::default(), &host)
            .await
            .map_err(|e| failed(crate::errors::error_chain(&e)))?;
        plugin
            .start_without_events()
            .await
            .map_err(|e| failed(format!("plugin start failed: {e}")))?;
        let started = started_at.elapsed();
        let data_type = match (&script.agent.data_type, description.data_types.first()) {
            (Some(d), _) => d.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) => return Err(failed("the plugin declares no data type to test".to_owned())),
        };
        let loaded = Loaded {
            name: description.name.clone(),
            version: description.version.clone(),
            contract: description.sdk_version.clone(),
            sources: description.sources.clone(),
            data_types: description.data_types.clone(),
            capabilities,
            read,
            started,
            logs: captured.take(),
        };
        let replay = Self {
            plugin,
            sink,
            captured,
            agent: Identity {
                user: script.agent.user.clone(),
                groups: script.agent.groups.clone(),
            },
            cluster: script.agent.cluster.clone(),
            data_type,
            source: description.sources.first().cloned().unwrap_or_default(),
            listed: BTreeMap::new(),
        };
        Ok((replay, loaded))
    }

    /// Makes one step's call and compares its answer with what the step expects.
    pub async fn step(&mut self, step: &Step) -> StepResult {
        let cluster = step.cluster.clone().unwrap_or_else(|| self.cluster.clone());
        let data_type = step.data_type.clone().unwrap_or_else(|| self.data_type.clone());
        let kv_before = self.plugin.kv().entries();
        self.sink.0.lock().clear();
        self.captured.take();
        let started = Instant::now();
        let (what, answer) = match step.call {
            Call::Resync => {
                let options = ListOptions {
                    cluster_name: cluster.clone(),
                    data_type: data_type.clone(),
                };
                let answer = match self.plugin.list(&options).await {
                    Ok(events) => {
                        self.listed.insert((cluster.clone(), data_type.clone()), events.clone());
                        Answer::Listed(events)
                    }
                    Err(e) => Answer::Failed(e),
                };
                (format!("resync {cluster} {data_type}"), answer)
            }
            Call::Status | Call::Delete => {
                let label = step.resource.as_deref().or(step.resource_id.as_deref()).unwrap_or("?");
                let what = format!("{} {cluster}/{label}", step.call.as_str());
                match self.status_event(step, &cluster, &data_type) {
                    Ok(event) => match self.plugin.handle(&self.agent, event).await {
                        Ok(()) => (what, Answer::Done),
                        Err(e) => (what, Answer::Failed(e)),
                    },
                    Err(why) => (what, Answer::NotMade(why)),
                }
            }
            Call::Timer => {
                let name = step.timer.clone().unwrap_or_default();
                let answer = match self.plugin.on_events(vec![HostEvent::Timer(name.clone())]).await {
                    Ok(()) => Answer::Done,
                    Err(e) => Answer::Failed(e),
                };
                (format!("timer {name}"), answer)
            }
        };
        let elapsed = started.elapsed();
        let kv_after = self.plugin.kv().entries();
        let kv = kv_changes(&kv_before, &kv_after);
        let emitted = std::mem::take(&mut *self.sink.0.lock());
        let keys: BTreeSet<String> = kv_after.into_iter().map(|(k, _)| k).collect();
        let differences = differences(&step.expect, &answer, &keys, emitted.len());
        StepResult {
            what,
            answer,
            elapsed,
            kv,
            emitted,
            logs: self.captured.take(),
            differences,
        }
    }

    /// The status update a step sends: `<data type>.status.update_request` about the resource
    /// it names, with the extensions a work agent sets (its `originalsource` the source of the
    /// listed event, as agents echo it; else the plugin's first declared source).
    fn status_event(&self, step: &Step, cluster: &str, data_type: &str) -> Result<CloudEvent, String> {
        let dt = DataType::parse(data_type).map_err(|e| e.to_string())?;
        let (id, version, source) = match (&step.resource, &step.resource_id) {
            (_, Some(id)) => (id.clone(), 0, self.source.as_str()),
            (Some(name), None) => {
                let listed = self
                    .listed
                    .get(&(cluster.to_owned(), data_type.to_owned()))
                    .ok_or_else(|| format!("no resync of {cluster} {data_type} before this step: add one, or name the resource by `resource_id`"))?;
                let found = listed.iter().find(|e| name_of(e) == *name).ok_or_else(|| {
                    let names: Vec<String> = listed.iter().map(name_of).collect();
                    format!("no resource named {name:?} in the last resync's answer (it listed {names:?})")
                })?;
                let id = found
                    .resource_id()
                    .map_err(|e| format!("the listed {name:?} has no resourceid: {e}"))?;
                (
                    id.to_owned(),
                    found.resource_version().unwrap_or(0),
                    found.source.as_str(),
                )
            }
            (None, None) => return Err("no resource named".to_owned()),
        };
        let data = match (step.call, &step.status, &step.data) {
            (Call::Delete, _, _) => serde_json::to_vec(&serde_json::json!({"conditions": [{
                "type": "Deleted", "status": "True", "reason": "Deleted",
                "message": "the agent deleted the resource from its cluster",
            }]}))
            .map_err(|e| e.to_string())?,
            (_, Some(status), _) => serde_json::to_vec(status).map_err(|e| format!("status: {e}"))?,
            (_, None, Some(raw)) => raw.clone().into_bytes(),
            (_, None, None) => Vec::new(),
        };
        let mut event = CloudEvent::new(
            uuid::Uuid::new_v4().to_string(),
            format!("{cluster}-agent"),
            dt.event_type(SubResource::Status, actions::UPDATE_REQUEST),
        );
        event.time = Some(chrono::Utc::now());
        event.data_content_type = Some("application/json".to_owned());
        event.data = Some(data);
        event.set_extension(CLUSTER_NAME, cluster);
        event.set_extension(RESOURCE_ID, id.as_str());
        event.set_extension(ORIGINAL_SOURCE, source);
        event.set_resource_version(&dt, version);
        Ok(event)
    }

    /// Stops what the plugin started (its timers) and waits for it.
    pub async fn stop(&self) {
        self.plugin.stop().await;
    }
}

fn kv_changes(before: &[(String, Vec<u8>)], after: &[(String, Vec<u8>)]) -> Vec<KvChange> {
    let before: BTreeMap<&String, &Vec<u8>> = before.iter().map(|(k, v)| (k, v)).collect();
    let after_map: BTreeMap<&String, &Vec<u8>> = after.iter().map(|(k, v)| (k, v)).collect();
    let mut changes: Vec<KvChange> = after
        .iter()
        .filter(|(k, v)| before.get(k) != Some(&v))
        .map(|(k, v)| KvChange::Set {
            key: k.clone(),
            bytes: v.len(),
        })
        .collect();
    changes.extend(
        before
            .keys()
            .filter(|k| !after_map.contains_key(*k))
            .map(|k| KvChange::Deleted { key: (*k).clone() }),
    );
    changes
}

/// An error as a difference names it: its kind and the first line of its message (the report
/// shows the whole answer just above: a traceback is printed once).
fn brief(e: &Error) -> String {
    let message = error_message(e);
    let mut lines = message.lines();
    let first = lines.next().unwrap_or_default();
    let more = if lines.next().is_some() {
        " … (the whole error above)"
    } else {
        ""
    };
    format!("{}: {first}{more}", error_kind(e))
}

/// How `answer` (and `kv` and what was emitted) differ from `expect`.
fn differences(expect: &Expect, answer: &Answer, kv_keys: &BTreeSet<String>, emitted: usize) -> Vec<String> {
    let mut out = vec![];
    match (answer, &expect.error) {
        (Answer::NotMade(why), _) => out.push(format!("the call was not made: {why}")),
        (Answer::Failed(e), None) => out.push(format!("expected success, got {}", brief(e))),
        (Answer::Failed(e), Some(kind)) => {
            if error_kind(e) != kind {
                out.push(format!("expected error {kind}, got {}", brief(e)));
            }
            if let Some(text) = &expect.message
                && !error_message(e).contains(text.as_str())
            {
                let message = error_message(e);
                let first = message.lines().next().unwrap_or_default();
                out.push(if first.len() == message.len() {
                    format!("expected an error message containing {text:?}, got {message:?}")
                } else {
                    format!("expected an error message containing {text:?}, got {first:?} … (the whole error above)")
                });
            }
        }
        (Answer::Listed(_) | Answer::Done, Some(kind)) => out.push(format!("expected error {kind}, got success")),
        (Answer::Listed(_) | Answer::Done, None) => {}
    }
    if let Answer::Listed(events) = answer {
        if let Some(n) = expect.events
            && events.len() != n
        {
            out.push(format!("expected {n} events, got {}", events.len()));
        }
        if let Some(names) = &expect.names {
            let got: Vec<String> = events.iter().map(name_of).collect();
            if &got != names {
                out.push(format!("expected the events {names:?}, got {got:?}"));
            }
        }
    }
    if let Some(keys) = &expect.kv_keys
        && keys != kv_keys
    {
        out.push(format!("expected kv to hold {keys:?}, it holds {kv_keys:?}"));
    }
    if let Some(n) = expect.emitted
        && n != emitted
    {
        out.push(format!("expected {n} events emitted, got {emitted}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_changes_are_sets_and_deletes() {
        let before = vec![("a".to_owned(), b"1".to_vec()), ("b".to_owned(), b"2".to_vec())];
        let after = vec![("a".to_owned(), b"1".to_vec()), ("c".to_owned(), b"33".to_vec())];
        assert_eq!(
            kv_changes(&before, &after),
            [
                KvChange::Set {
                    key: "c".into(),
                    bytes: 2
                },
                KvChange::Deleted { key: "b".into() }
            ]
        );
    }

    #[test]
    fn differences_name_what_differs() {
        let keys: BTreeSet<String> = ["status/c1/web".to_owned()].into();
        let ok = Expect::default();
        assert!(differences(&ok, &Answer::Done, &keys, 0).is_empty());
        let failed = Answer::Failed(Error::Invalid("status of c1/web is not JSON".into()));
        assert_eq!(
            differences(&ok, &failed, &keys, 0),
            ["expected success, got invalid: status of c1/web is not JSON"]
        );
        let invalid = Expect {
            error: Some("invalid".into()),
            message: Some("not JSON".into()),
            ..Expect::default()
        };
        assert!(differences(&invalid, &failed, &keys, 0).is_empty());
        assert_eq!(
            differences(&invalid, &Answer::Done, &keys, 0),
            ["expected error invalid, got success"]
        );
        // A traceback is in the answer the report prints, not again in the difference.
        let traceback = Answer::Failed(Error::Internal(
            "uncaught exception in handle:\nTraceback (most recent call last):\n  File \"src/app.py\", line 3, in handle\nRuntimeError: boom".into(),
        ));
        assert_eq!(
            differences(&ok, &traceback, &keys, 0),
            ["expected success, got internal: uncaught exception in handle: … (the whole error above)"]
        );
        assert_eq!(
            differences(&invalid, &traceback, &keys, 0),
            [
                "expected error invalid, got internal: uncaught exception in handle: … (the whole error above)",
                "expected an error message containing \"not JSON\", got \"uncaught exception in handle:\" … (the whole error above)"
            ]
        );
        let counted = Expect {
            events: Some(2),
            kv_keys: Some(BTreeSet::new()),
            emitted: Some(1),
            ..Expect::default()
        };
        assert_eq!(
            differences(&counted, &Answer::Listed(vec![]), &keys, 0),
            [
                "expected 2 events, got 0",
                "expected kv to hold {}, it holds {\"status/c1/web\"}",
                "expected 1 events emitted, got 0"
            ]
        );
    }
}
