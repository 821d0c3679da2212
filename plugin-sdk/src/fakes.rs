//! In-memory fakes of every host capability, so plugin logic is unit-tested natively, without a
//! runtime: build a [`FakeHost`], hand `fake.host()` to the plugin, then look at what it did.
//!
//! The fake `kube` is a small API server in memory: objects get a uid, a `resourceVersion` that
//! grows with every write and a `generation` that grows with every spec change; `update` with a
//! stale `resourceVersion` is a 409 `Conflict`, `patch` is a JSON merge patch, `list` honours
//! equality label selectors. The fake `pg` has no database: it records LISTENs, and every
//! statement fails (test database code against PostgreSQL).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

use crate::calls::{HostCalls, Level};
use crate::host::Host;
use crate::kube::{ApiResource, KubeReply, KubeRequest, Selector, WatchOptions};
use crate::metric::MetricKind;
use crate::pg::{PgReply, PgRequest};
use crate::{CloudEvent, Error, Status, StatusDetails};

/// What a plugin did to its host.
#[derive(Debug, Default)]
pub struct Recorded {
    pub emitted: Vec<CloudEvent>,
    pub logs: Vec<(Level, String)>,
    /// Active timers: name → (after_ms, repeat).
    pub timers: BTreeMap<String, (u64, bool)>,
    pub kv: BTreeMap<String, Vec<u8>>,
    /// Watches asked for: resource, namespace and selector.
    pub watches: Vec<(ApiResource, Option<String>, Selector)>,
    /// The options of each of `watches`, at its index (the default for [`Kube::watch`]).
    ///
    /// [`Kube::watch`]: crate::Kube::watch
    pub watch_options: Vec<WatchOptions>,
    /// Every kube call but watches, in order.
    pub kube_calls: Vec<KubeRequest>,
    /// The fake API server's objects by (`<plural>.<group>`, namespace, name).
    pub objects: BTreeMap<(String, String, String), Value>,
    /// TokenRequests answered: (namespace, service account).
    pub tokens: Vec<(String, String)>,
    /// LISTENs asked for: (database, channel).
    pub listens: Vec<(String, String)>,
    /// The plugin's metrics: (name, label values) → value (counters summed, gauges as last set).
    pub metrics: BTreeMap<(String, Vec<String>), f64>,
    /// Files the plugin may read by name ([`FakeHost::put_blob`]).
    pub blobs: BTreeMap<String, Vec<u8>>,
    /// Agent requests waiting for the plugin, oldest first, for `take_waiting` to take
    /// ([`FakeHost::put_waiting`]).
    pub waiting: std::collections::VecDeque<crate::request::Request>,
    revision: u64,
}

/// A host that records every call. `emit` answers with `subscribers`.
#[derive(Debug, Default)]
pub struct FakeHost {
    recorded: Mutex<Recorded>,
    subscribers: u32,
    /// `kv_set` and `set_timer` are refused, as the host refuses them past a plugin's limits.
    refusing: std::sync::atomic::AtomicBool,
}

impl FakeHost {
    /// A fake whose `emit` reaches one subscriber.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            recorded: Mutex::default(),
            subscribers: 1,
            refusing: Default::default(),
        })
    }

    /// A [`Host`] backed by this fake.
    pub fn host(self: &Arc<Self>) -> Host {
        Host::new(Box::new(Shared(Arc::clone(self))))
    }

    /// What the plugin did so far.
    pub fn recorded(&self) -> MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now on `kv_set` and `set_timer` are refused (`refuse`) or not, as the host refuses them
    /// once a plugin reaches its limits: for testing what a plugin does then.
    pub fn refuse_writes(&self, refuse: bool) {
        self.refusing.store(refuse, std::sync::atomic::Ordering::Relaxed);
    }

    fn refused(&self, what: &str) -> Result<(), Error> {
        match self.refusing.load(std::sync::atomic::Ordering::Relaxed) {
            true => Err(Error::Unavailable(format!("{what} refused (FakeHost::refuse_writes)"))),
            false => Ok(()),
        }
    }

    /// Lets the plugin read `contents` as the file named `name`.
    pub fn put_blob(&self, name: &str, contents: &[u8]) {
        self.recorded().blobs.insert(name.to_owned(), contents.to_vec());
    }

    /// Puts `request` behind those waiting for the plugin: the next `take_waiting` of its
    /// `handle_batch` takes it, as the host hands over what arrives while a batch runs.
    pub fn put_waiting(&self, request: crate::request::Request) {
        self.recorded().waiting.push_back(request);
    }

    /// The value of the plugin's metric `name` with `labels`, if it was ever set.
    pub fn metric(&self, name: &str, labels: &[&str]) -> Option<f64> {
        let key = (name.to_owned(), labels.iter().map(|l| (*l).to_owned()).collect());
        self.recorded().metrics.get(&key).copied()
    }

    /// Takes the events emitted so far.
    pub fn take_emitted(&self) -> Vec<CloudEvent> {
        std::mem::take(&mut self.recorded().emitted)
    }

    /// Puts an object into the fake API server as if someone created it; returns it as stored.
    pub fn put_object(&self, resource: &ApiResource, object: Value) -> Value {
        let mut r = self.recorded();
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
        r.create(resource, namespace.as_deref(), object)
            .expect("put_object: the object is new and has a name")
    }

    /// The object the fake API server holds, if any.
    pub fn object(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Option<Value> {
        let key = (
            resource.name(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        self.recorded().objects.get(&key).cloned()
    }
}

fn status(code: i32, reason: &str, message: String, resource: &ApiResource, name: &str) -> Error {
    Error::from(Status::failure(code, reason, message).with_details(StatusDetails {
        name: name.to_owned(),
        group: resource.group.clone(),
        kind: resource.plural.clone(),
        uid: String::new(),
    }))
}

/// JSON merge patch (RFC 7386).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("an object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn labels_match(object: &Value, selector: &Selector) -> bool {
    let Some(labels) = selector.labels.as_deref().filter(|s| !s.is_empty()) else {
        return true;
    };
    labels.split(',').all(|req| match req.split_once('=') {
        Some((k, v)) => object["metadata"]["labels"][k.trim().trim_end_matches('=')] == v.trim(),
        None => object["metadata"]["labels"].get(req.trim()).is_some(),
    })
}

impl Recorded {
    fn key(resource: &ApiResource, namespace: Option<&str>, name: &str) -> (String, String, String) {
        (
            resource.name(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        )
    }

    fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    fn create(&mut self, resource: &ApiResource, namespace: Option<&str>, mut object: Value) -> Result<Value, Error> {
        let name = object["metadata"]["name"]
            .as_str()
            .ok_or_else(|| Error::Invalid("the object has no metadata.name".into()))?
            .to_owned();
        let key = Self::key(resource, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(status(
                409,
                "AlreadyExists",
                format!("{} {name:?} already exists", resource.plural),
                resource,
                &name,
            ));
        }
        let revision = self.next_revision();
        let meta = &mut object["metadata"];
        meta["uid"] = format!("uid-{revision}").into();
        meta["resourceVersion"] = revision.into();
        meta["generation"] = 1.into();
        if let Some(ns) = namespace {
            meta["namespace"] = ns.into();
        }
        object["apiVersion"] = resource.api_version().into();
        object["kind"] = resource.kind.clone().into();
        self.objects.insert(key, object.clone());
        Ok(object)
    }

    fn store(&mut self, key: (String, String, String), before: &Value, mut after: Value) -> Value {
        if before["spec"] != after["spec"] {
            let generation = before["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            after["metadata"]["generation"] = generation.into();
        }
        after["metadata"]["resourceVersion"] = self.next_revision().into();
        let finalizers_empty = after["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty);
        if !after["metadata"]["deletionTimestamp"].is_null() && finalizers_empty {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key, after.clone());
        }
        after
    }

    fn call(&mut self, request: KubeRequest) -> Result<KubeReply, Error> {
        self.kube_calls.push(request.clone());
        let not_found = |resource: &ApiResource, name: &str| {
            status(
                404,
                "NotFound",
                format!("{} {name:?} not found", resource.plural),
                resource,
                name,
            )
        };
        match request {
            KubeRequest::Watch { .. } => Ok(KubeReply::Done),
            KubeRequest::Get {
                resource,
                namespace,
                name,
            } => {
                let key = Self::key(&resource, namespace.as_deref(), &name);
                Ok(KubeReply::MaybeObject(self.objects.get(&key).map(Value::to_string)))
            }
            KubeRequest::List {
                resource,
                namespace,
                selector,
            } => Ok(KubeReply::Objects(
                self.objects
                    .iter()
                    .filter(|((r, ns, _), o)| {
                        *r == resource.name()
                            && namespace.as_deref().is_none_or(|want| want == ns)
                            && labels_match(o, &selector)
                    })
                    .map(|(_, o)| o.to_string())
                    .collect(),
            )),
            KubeRequest::Create {
                resource,
                namespace,
                object,
            } => {
                let object: Value = serde_json::from_str(&object).map_err(|e| Error::Invalid(e.to_string()))?;
                self.create(&resource, namespace.as_deref(), object)
                    .map(|o| KubeReply::Object(o.to_string()))
            }
            KubeRequest::Update {
                resource,
                namespace,
                object,
                subresource,
            } => {
                let object: Value = serde_json::from_str(&object).map_err(|e| Error::Invalid(e.to_string()))?;
                let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                let key = Self::key(&resource, namespace.as_deref(), &name);
                let before = self
                    .objects
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| not_found(&resource, &name))?;
                let sent = &object["metadata"]["resourceVersion"];
                if !sent.is_null() && *sent != before["metadata"]["resourceVersion"] {
                    return Err(status(
                        409,
                        "Conflict",
                        format!(
                            "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                            resource.name()
                        ),
                        &resource,
                        &name,
                    ));
                }
                let after = match subresource.as_deref() {
                    Some("status") => {
                        let mut after = before.clone();
                        after["status"] = object["status"].clone();
                        after
                    }
                    _ => {
                        let mut after = object.clone();
                        after["status"] = before["status"].clone();
                        after
                    }
                };
                Ok(KubeReply::Object(self.store(key, &before, after).to_string()))
            }
            KubeRequest::Patch {
                resource,
                namespace,
                name,
                patch,
                subresource,
            } => {
                let patch: Value = serde_json::from_str(&patch).map_err(|e| Error::Invalid(e.to_string()))?;
                let key = Self::key(&resource, namespace.as_deref(), &name);
                let before = self
                    .objects
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| not_found(&resource, &name))?;
                let sent = &patch["metadata"]["resourceVersion"];
                if !sent.is_null() && *sent != before["metadata"]["resourceVersion"] {
                    return Err(status(
                        409,
                        "Conflict",
                        format!("Operation cannot be fulfilled on {} {name:?}", resource.name()),
                        &resource,
                        &name,
                    ));
                }
                let mut after = before.clone();
                match subresource.as_deref() {
                    Some("status") => merge_patch(&mut after["status"], &patch["status"]),
                    _ => {
                        let mut patch = patch.clone();
                        if let Some(p) = patch.as_object_mut() {
                            p.remove("status");
                        }
                        merge_patch(&mut after, &patch);
                    }
                }
                Ok(KubeReply::Object(self.store(key, &before, after).to_string()))
            }
            KubeRequest::Delete {
                resource,
                namespace,
                name,
            } => {
                let key = Self::key(&resource, namespace.as_deref(), &name);
                let before = self
                    .objects
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| not_found(&resource, &name))?;
                let mut after = before.clone();
                after["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
                self.store(key, &before, after);
                Ok(KubeReply::Done)
            }
            KubeRequest::CreateToken {
                namespace,
                name,
                request,
            } => {
                let mut request: Value = serde_json::from_str(&request).map_err(|e| Error::Invalid(e.to_string()))?;
                request["status"] = json!({"token": format!("token-{namespace}-{name}"), "expirationTimestamp": "2026-01-01T01:00:00Z"});
                self.tokens.push((namespace, name));
                Ok(KubeReply::Object(request.to_string()))
            }
        }
    }
}

struct Shared(Arc<FakeHost>);

impl HostCalls for Shared {
    fn emit(&self, event: &CloudEvent) -> Result<u32, Error> {
        self.0.recorded().emitted.push(event.clone());
        Ok(self.0.subscribers)
    }
    fn log(&self, level: Level, message: &str) {
        self.0.recorded().logs.push((level, message.to_owned()));
    }
    fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) -> Result<(), Error> {
        self.0.refused("set_timer")?;
        self.0.recorded().timers.insert(name.to_owned(), (after_ms, repeat));
        Ok(())
    }
    fn cancel_timer(&self, name: &str) {
        self.0.recorded().timers.remove(name);
    }
    fn kv_get(&self, key: &str) -> Option<Vec<u8>> {
        self.0.recorded().kv.get(key).cloned()
    }
    fn kv_set(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        self.0.refused("kv_set")?;
        self.0.recorded().kv.insert(key.to_owned(), value.to_vec());
        Ok(())
    }
    fn kv_delete(&self, key: &str) -> bool {
        self.0.recorded().kv.remove(key).is_some()
    }
    fn pg(&self, request: PgRequest) -> Result<PgReply, Error> {
        if let PgRequest::Listen { database, channel } = &request {
            self.0.recorded().listens.push((database.clone(), channel.clone()));
            return Ok(PgReply::Done);
        }
        Err(Error::Unavailable(format!(
            "FakeHost has no database (got {request:?}); test database code against PostgreSQL"
        )))
    }
    fn kube(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        self.kube_watch_with(request, WatchOptions::default())
    }
    fn kube_watch_with(&self, request: KubeRequest, options: WatchOptions) -> Result<KubeReply, Error> {
        let mut recorded = self.0.recorded();
        if let KubeRequest::Watch {
            resource,
            namespace,
            selector,
        } = &request
        {
            // Watching twice is one watch; a watch with other options is another.
            let watch = (resource.clone(), namespace.clone(), selector.clone());
            let known = recorded
                .watches
                .iter()
                .zip(&recorded.watch_options)
                .any(|(w, o)| *w == watch && *o == options);
            if !known {
                recorded.watches.push(watch);
                recorded.watch_options.push(options);
            }
            return Ok(KubeReply::Done);
        }
        recorded.call(request)
    }
    fn metric(&self, kind: MetricKind, name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
        let key = (name.to_owned(), labels.iter().map(|l| (*l).to_owned()).collect());
        let mut recorded = self.0.recorded();
        let slot = recorded.metrics.entry(key).or_insert(0.0);
        match kind {
            MetricKind::Counter if value < 0.0 => {
                return Err(Error::Invalid(format!("counter {name}: {value} is negative")));
            }
            MetricKind::Counter => *slot += value,
            MetricKind::Gauge => *slot = value,
        }
        Ok(())
    }
    fn take_waiting(&self, max: usize) -> Vec<crate::request::Request> {
        let waiting = &mut self.0.recorded().waiting;
        let n = max.min(waiting.len());
        waiting.drain(..n).collect()
    }
    fn blob(&self, name: &str) -> Result<Vec<u8>, Error> {
        self.0
            .recorded()
            .blobs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("no file named {name:?} (FakeHost::put_blob)")))
    }
}
