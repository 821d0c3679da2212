//! `conductor:plugin/kube`: dynamic objects (get, list, create, update, patch, delete), watches and
//! TokenRequests for the plugin, each checked against its `kube_resources`. A request is matched
//! once: each kind names its verb and resource for the grant check, then runs.

use std::collections::HashMap;
use std::sync::Arc;

use conductor_plugin_sdk::kube::{ApiResource, KubeReply, KubeRequest, Selector, WatchOptions};
use conductor_plugin_sdk::{Capability, Error};

use super::guard::{Guard, Mode};
use crate::host_events::EventQueue;
use crate::kube::selector::LabelSelector;
use crate::kube::watch::{Watch, WatchKey};
use crate::kube::{Kubernetes, api};
use crate::plugins::tasks::Tasks;

/// A `kube` verb, as grants and metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Watch,
    Get,
    List,
    Create,
    Update,
    Patch,
    Delete,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Watch => "watch",
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }

    /// Whether the verb only reads (allowed while checking a configuration).
    fn reads(self) -> bool {
        matches!(self, Verb::Get | Verb::List)
    }
}

/// The `kube` state of one plugin: its watches, whose caches answer lists.
pub struct KubeHost {
    guard: Arc<Guard>,
    kubernetes: Arc<Kubernetes>,
    events: Arc<EventQueue>,
    tasks: Tasks,
    /// Watches by what was asked: one each.
    watches: tokio::sync::Mutex<HashMap<WatchKey, Arc<Watch>>>,
}

impl KubeHost {
    pub fn new(guard: Arc<Guard>, kubernetes: Arc<Kubernetes>, events: Arc<EventQueue>, tasks: Tasks) -> Self {
        Self {
            guard,
            kubernetes,
            events,
            tasks,
            watches: tokio::sync::Mutex::default(),
        }
    }

    /// Answers one `kube` call of the plugin. Boxed: the request's future (kube-rs's, the
    /// client's) is kilobytes, and the layers above it — the instance's state, wasmtime's host
    /// function — would each move it.
    pub async fn call(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        Box::pin(self.dispatch(request)).await
    }

    async fn dispatch(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        self.guard.check(Capability::Kube)?;
        match request {
            KubeRequest::Watch {
                resource,
                namespace,
                selector,
            } => self
                .watch(resource, namespace, selector, WatchOptions::default())
                .await
                .map(|()| KubeReply::Done),
            KubeRequest::Get {
                resource,
                namespace,
                name,
            } => {
                self.request(Verb::Get, resource.name(), None, async |client| {
                    api::get(&client, &resource, namespace.as_deref(), &name)
                        .await
                        .map(KubeReply::MaybeObject)
                })
                .await
            }
            KubeRequest::List {
                resource,
                namespace,
                selector,
            } => {
                self.request(Verb::List, resource.name(), None, async |client| {
                    if let Some(cached) = self.cached_list(&resource, namespace.as_deref(), &selector).await? {
                        return Ok(KubeReply::Objects(cached));
                    }
                    api::list(&client, &resource, namespace.as_deref(), &selector)
                        .await
                        .map(KubeReply::Objects)
                })
                .await
            }
            KubeRequest::Create {
                resource,
                namespace,
                object,
            } => {
                self.request(Verb::Create, resource.name(), None, async |client| {
                    api::create(&client, &resource, namespace.as_deref(), &object)
                        .await
                        .map(KubeReply::Object)
                })
                .await
            }
            KubeRequest::Update {
                resource,
                namespace,
                object,
                subresource,
            } => {
                let sub = subresource.as_deref();
                self.request(Verb::Update, resource.name(), sub, async |client| {
                    api::update(&client, &resource, namespace.as_deref(), &object, sub)
                        .await
                        .map(KubeReply::Object)
                })
                .await
            }
            KubeRequest::Patch {
                resource,
                namespace,
                name,
                patch,
                subresource,
            } => {
                let sub = subresource.as_deref();
                self.request(Verb::Patch, resource.name(), sub, async |client| {
                    api::patch(&client, &resource, namespace.as_deref(), &name, &patch, sub)
                        .await
                        .map(KubeReply::Object)
                })
                .await
            }
            KubeRequest::Delete {
                resource,
                namespace,
                name,
            } => {
                self.request(Verb::Delete, resource.name(), None, async |client| {
                    api::delete(&client, &resource, namespace.as_deref(), &name)
                        .await
                        .map(|()| KubeReply::Done)
                })
                .await
            }
            KubeRequest::CreateToken {
                namespace,
                name,
                request,
            } => {
                self.request(
                    Verb::Create,
                    "serviceaccounts".to_owned(),
                    Some("token"),
                    async |client| {
                        api::create_token(&client, &namespace, &name, &request)
                            .await
                            .map(KubeReply::Object)
                    },
                )
                .await
            }
        }
    }

    /// Checks `verb` on `resource` (and its `subresource`) against the plugin's `kube_resources`
    /// and its mode; the client to run it with, and the name the grant knows it by.
    async fn allowed(
        &self,
        verb: Verb,
        resource: String,
        subresource: Option<&str>,
    ) -> Result<(kube::Client, String), Error> {
        let granted = match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource,
        };
        let name = verb.as_str();
        if !self.guard.grants().allows_kube(&granted, name) {
            return Err(Error::Denied(format!(
                "plugin {:?} may not {name} {granted} (not in its kube_resources)",
                self.guard.plugin()
            )));
        }
        if self.guard.mode() == Mode::ReadOnly && !verb.reads() {
            self.guard.serving(&format!("{name} of {granted}"))?;
        }
        Ok((self.kubernetes.client().await?, granted))
    }

    /// A call that reaches the API server, once allowed: traced, and counted by verb and code.
    async fn request(
        &self,
        verb: Verb,
        resource: String,
        subresource: Option<&str>,
        call: impl AsyncFnOnce(kube::Client) -> Result<KubeReply, Error>,
    ) -> Result<KubeReply, Error> {
        let (client, granted) = self.allowed(verb, resource, subresource).await?;
        let started = std::time::Instant::now();
        let span = tracing::span!(
            target: "conductor::trace",
            tracing::Level::TRACE,
            "kube",
            plugin = %self.guard.plugin(),
            verb = verb.as_str(),
            resource = %granted,
        );
        let reply = tracing::Instrument::instrument(call(client), span).await;
        self.guard
            .metrics()
            .kube_request(verb.as_str(), http_code(&reply, verb), started.elapsed());
        reply
    }

    /// Watches `resource` for the plugin (`kube.watch`, `kube.watch-with`): once however often
    /// it asks with the same options.
    pub async fn watch(
        &self,
        resource: ApiResource,
        namespace: Option<String>,
        selector: Selector,
        options: WatchOptions,
    ) -> Result<(), Error> {
        self.guard.check(Capability::Kube)?;
        let (client, _) = self.allowed(Verb::Watch, resource.name(), None).await?;
        let key = WatchKey {
            resource,
            namespace,
            labels: selector.labels,
            fields: selector.fields,
            options,
        };
        self.start_watch(client, key).await
    }

    /// Starts a watch for the plugin, once however often it asks.
    async fn start_watch(&self, client: kube::Client, key: WatchKey) -> Result<(), Error> {
        self.guard.serving("a watch")?;
        let mut watches = self.watches.lock().await;
        if watches.contains_key(&key) {
            return Ok(());
        }
        let what = (key.resource.name(), key.namespace.clone());
        let (watch, task) = crate::kube::watch::start(
            client,
            key.clone(),
            self.events.metrics().clone(),
            Arc::clone(&self.events),
            self.tasks.child(),
        )?;
        self.tasks.spawn(task);
        watches.insert(key, watch);
        tracing::info!(plugin = %self.guard.plugin(), resource = %what.0, namespace = ?what.1, "watching");
        Ok(())
    }

    /// Lists every object of the plugin's watches of `resource` again (`<plural>.<group>`, as
    /// watch events name it); returns whether there was such a watch.
    pub async fn relist(&self, resource: &str) -> bool {
        let watches = self.watches.lock().await;
        let mut found = false;
        for watch in watches.values().filter(|w| w.resource() == resource) {
            watch.relist();
            found = true;
        }
        found
    }

    /// The answer of a running watch's cache, if one covers the list.
    async fn cached_list(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Result<Option<Vec<String>>, Error> {
        let labels = LabelSelector::parse(selector.labels.as_deref().unwrap_or_default())
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let watches = self.watches.lock().await;
        for watch in watches.values() {
            if let Some(fields) = watch.covers(resource, namespace, &labels, selector.fields.as_deref()) {
                return Ok(Some(watch.list(namespace, &labels, &fields)));
            }
        }
        Ok(None)
    }
}

/// The HTTP code a `kube` call's outcome stands for (0: the API server was not reached).
fn http_code(reply: &Result<KubeReply, Error>, verb: Verb) -> u16 {
    match reply {
        Ok(_) if verb == Verb::Create => 201,
        Ok(_) => 200,
        Err(Error::Status(status)) => u16::try_from(status.code).unwrap_or(0),
        Err(Error::NotFound(_)) => 404,
        Err(Error::AlreadyExists(_) | Error::Conflict(_)) => 409,
        Err(Error::Invalid(_)) => 400,
        Err(Error::Denied(_)) => 403,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use conductor_plugin_sdk::Capability;

    use super::*;
    use crate::plugins::capabilities::guard::Grants;
    use crate::telemetry::Metrics;

    /// A call's future stays small however large the request's is: wasmtime's host function and
    /// the instance's state each move it by value (a copy of kilobytes per call).
    #[test]
    fn a_call_moves_no_request_future() {
        let grants = Grants {
            capabilities: [Capability::Kube].into(),
            ..Grants::default()
        };
        let events = Arc::new(EventQueue::new(10, Metrics::new().plugin("p")));
        let guard = Guard::new("p", grants, Mode::Serve, events.metrics().clone());
        let kube = KubeHost::new(
            Arc::new(guard),
            Arc::new(Kubernetes::new(None)),
            events,
            Tasks::default(),
        );
        let get = || KubeRequest::Get {
            resource: conductor_plugin_sdk::ocm::resources::manifest_works(),
            namespace: Some("cluster1".into()),
            name: "work1".into(),
        };
        let request = std::mem::size_of_val(&kube.dispatch(get()));
        let call = std::mem::size_of_val(&kube.call(get()));
        assert!(request > 1024, "the request's future: {request} bytes");
        assert!(call <= 512, "the call's future: {call} bytes");
    }
}
