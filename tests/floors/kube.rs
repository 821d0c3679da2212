//! The floor of the `cpu_kube` bench (BENCHMARKS.md, "CPU per event"): the least work each kube
//! path could do, as its own process so its CPU is measured exactly like conductor's.
//!
//! - `floor-kube deliver KUBECONFIG`: watches ManifestWorks with a plain kube-rs `watcher` (no
//!   cache: only each work's generation and a fingerprint of its labels and annotations, to tell
//!   a change agents hear about from a status write), turns each into the CloudEvent the kube
//!   plugin sends (the SDK's own `codec::manifest_work_event`, natively) and writes it to the
//!   agents subscribed to its cluster over tonic: plaintext, no authorization, no plugin, no
//!   heartbeats. Prints the address it serves on, then serves until killed.
//! - `floor-kube status KUBECONFIG`: lists the works (setup), prints `ready`, then for each line
//!   `TAG RATE UPDATES AGENTS` on stdin sends the status patches the kube plugin would write for
//!   that many updates from that many agents (one task each, one cluster each) at that rate, and
//!   prints `done <written>`. Nobody asks it: it is the patches alone.
//! - `floor-kube serve-status KUBECONFIG`: the least a server answering the agents' status updates
//!   as the kube plugin does can do. It watches the works with a plain kube-rs `watcher`, keeping
//!   of each only what a status update is judged against (name, namespace, resourceVersion,
//!   generation, conditions, manifests), and answers each `Publish` over tonic by judging it as the
//!   plugin does (an older generation is stale, an identical status is not written) and sending
//!   the same merge patch of the status subresource: plaintext, no authorization, no plugin.
//!   Prints the address it serves on, then serves until killed.

#[path = "kube_common.rs"]
mod common;

use std::collections::HashMap;
use std::io::BufRead;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use conductor_blackbox_tests::proto::{
    self, PublishRequest, SubscriptionRequest,
    cloud_event::Data,
    cloud_event_attribute_value::Attr,
    cloud_event_service_server::{CloudEventService, CloudEventServiceServer},
};
use conductor_plugin_sdk::ocm::{actions, codec};
use conductor_plugin_sdk::{CloudEvent, ExtensionValue};
use futures::StreamExt;
use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

type Outbox = tokio::sync::mpsc::Sender<Result<proto::CloudEvent, tonic::Status>>;

fn works_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("work.open-cluster-management.io", "v1", "ManifestWork");
    ApiResource::from_gvk_with_plural(&gvk, "manifestworks")
}

async fn client(kubeconfig: &str) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client configuration");
    kube::Client::try_from(config).expect("a client")
}

/// The OCM binding of an event, as conductor writes it (`host/src/wire.rs`, `encode`).
fn encode(event: CloudEvent) -> proto::CloudEvent {
    let mut attributes = HashMap::with_capacity(event.extensions.len() + 2);
    let mut put = |key: String, attr: Attr| {
        attributes.insert(key, proto::CloudEventAttributeValue { attr: Some(attr) });
    };
    if let Some(ct) = event.data_content_type.filter(|s| !s.is_empty()) {
        put("contenttype".to_owned(), Attr::CeString(ct));
    }
    if let Some(t) = &event.time {
        put("ce-time".to_owned(), Attr::CeTimestamp(timestamp(t)));
    }
    for (name, value) in event.extensions {
        let attr = match value {
            ExtensionValue::Boolean(b) => Attr::CeBoolean(b),
            ExtensionValue::Integer(i) => Attr::CeInteger(i),
            ExtensionValue::String(s) => Attr::CeString(s),
            ExtensionValue::Bytes(b) => Attr::CeBytes(b),
            ExtensionValue::Uri(s) => Attr::CeUri(s),
            ExtensionValue::UriRef(s) => Attr::CeUriRef(s),
            ExtensionValue::Timestamp(t) => Attr::CeTimestamp(timestamp(&t)),
        };
        put(format!("ce-{name}"), attr);
    }
    proto::CloudEvent {
        id: event.id,
        source: event.source,
        spec_version: event.spec_version,
        r#type: event.ty,
        attributes,
        data: event.data.map(Data::BinaryData),
    }
}

fn timestamp(t: &conductor_plugin_sdk::Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

/// The agents subscribed to each cluster.
type Subscribers = Arc<Mutex<HashMap<String, Vec<Outbox>>>>;

struct Floor {
    subscribers: Subscribers,
    /// The works a `serve-status` floor answers status updates for; none in `deliver`.
    statuses: Option<Arc<StatusFloor>>,
}

#[tonic::async_trait]
impl CloudEventService for Floor {
    async fn publish(&self, request: tonic::Request<PublishRequest>) -> Result<tonic::Response<()>, tonic::Status> {
        let Some(statuses) = &self.statuses else {
            return Err(tonic::Status::unimplemented("the floor only delivers"));
        };
        let event = request
            .into_inner()
            .event
            .ok_or_else(|| tonic::Status::invalid_argument("no event"))?;
        statuses.apply(&event).await?;
        Ok(tonic::Response::new(()))
    }

    type SubscribeStream = Pin<Box<dyn futures::Stream<Item = Result<proto::CloudEvent, tonic::Status>> + Send>>;

    async fn subscribe(
        &self,
        request: tonic::Request<SubscriptionRequest>,
    ) -> Result<tonic::Response<Self::SubscribeStream>, tonic::Status> {
        let cluster = request.into_inner().cluster_name;
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        self.subscribers
            .lock()
            .expect("subscribers")
            .entry(cluster)
            .or_default()
            .push(tx);
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(tonic::Response::new(Box::pin(stream)))
    }
}

/// What the floor remembers of a work: enough to tell whether a change is one agents hear about.
#[derive(PartialEq)]
struct Seen {
    generation: i64,
    labels: u64,
    deleting: bool,
}

fn fingerprint(work: &DynamicObject) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    work.metadata.labels.hash(&mut h);
    work.metadata.annotations.hash(&mut h);
    h.finish()
}

/// The spec event for a watched work, if agents hear about this change (as the kube plugin decides).
fn spec_event(seen: &mut HashMap<String, Seen>, work: DynamicObject, deleted: bool) -> Option<(String, CloudEvent)> {
    let uid = work.metadata.uid.clone()?;
    let cluster = work.metadata.namespace.clone()?;
    let action = if deleted {
        seen.remove(&uid);
        actions::DELETE_REQUEST
    } else {
        let now = Seen {
            generation: work.metadata.generation.unwrap_or(0),
            labels: fingerprint(&work),
            deleting: work.metadata.deletion_timestamp.is_some(),
        };
        let action = match seen.get(&uid) {
            None => actions::CREATE_REQUEST,
            Some(b) if now.generation > b.generation || now.labels != b.labels || (now.deleting && !b.deleting) => {
                actions::UPDATE_REQUEST
            }
            Some(_) => return None,
        };
        seen.insert(uid, now);
        action
    };
    let mut metadata = serde_json::to_value(&work.metadata).ok()?;
    if deleted && metadata["deletionTimestamp"].is_null() {
        metadata["deletionTimestamp"] = chrono::Utc::now()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            .into();
    }
    let mut data = work.data;
    let mut object = serde_json::Map::new();
    object.insert("metadata".into(), metadata);
    object.insert("spec".into(), data["spec"].take());
    let event = codec::manifest_work_event(&Value::Object(object), "kube", action).ok()?;
    Some((cluster, event))
}

async fn deliver(kubeconfig: &str) {
    let subscribers: Subscribers = Arc::default();
    let works: Api<DynamicObject> = Api::all_with(client(kubeconfig).await, &works_resource());
    {
        let subscribers = Arc::clone(&subscribers);
        tokio::spawn(async move {
            let mut seen = HashMap::new();
            let mut stream = std::pin::pin!(watcher(works, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                let (work, deleted) = match event {
                    Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) => (w, false),
                    Ok(watcher::Event::Delete(w)) => (w, true),
                    Ok(_) => continue,
                    Err(e) => {
                        eprintln!("floor-kube: watch: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        continue;
                    }
                };
                let Some((cluster, event)) = spec_event(&mut seen, work, deleted) else {
                    continue;
                };
                let outboxes: Vec<Outbox> = subscribers
                    .lock()
                    .expect("subscribers")
                    .get(&cluster)
                    .cloned()
                    .unwrap_or_default();
                let message = encode(event);
                for outbox in outboxes {
                    let _ = outbox.try_send(Ok(message.clone()));
                }
            }
        });
    }
    serve(Floor {
        subscribers,
        statuses: None,
    })
    .await;
}

/// Serves `floor` over plaintext tonic on a free port of the loopback, once it printed the
/// address; until killed.
async fn serve(floor: Floor) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    println!("{}", listener.local_addr().expect("its address"));
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(CloudEventServiceServer::new(floor))
        .serve_with_incoming(incoming)
        .await
        .expect("serves");
}

/// What a status update is judged against, of one work.
struct Known {
    namespace: String,
    name: String,
    resource_version: String,
    generation: i64,
    conditions: Value,
    manifests: Value,
}

impl Known {
    fn of(work: DynamicObject) -> Option<(String, Self)> {
        let meta = work.metadata;
        let mut data = work.data;
        let mut status = data["status"].take();
        let known = Self {
            namespace: meta.namespace?,
            name: meta.name?,
            resource_version: meta.resource_version?,
            generation: meta.generation.unwrap_or(0),
            conditions: status["conditions"].take(),
            manifests: status["resourceStatus"]["manifests"].take(),
        };
        Some((meta.uid?, known))
    }
}

/// The `serve-status` floor: its works, kept from a watch, and the client it patches with.
struct StatusFloor {
    works: Mutex<HashMap<String, Known>>,
    client: kube::Client,
}

fn text_attr<'e>(event: &'e proto::CloudEvent, key: &str) -> Result<&'e str, tonic::Status> {
    match event.attributes.get(key).and_then(|a| a.attr.as_ref()) {
        Some(Attr::CeString(s)) => Ok(s),
        _ => Err(tonic::Status::invalid_argument(format!("no {key}"))),
    }
}

impl StatusFloor {
    /// One agent's status update, judged and written as the kube plugin does (`works::apply`),
    /// the work's finalizer aside: the bench's works carry it from conductor's warm-up.
    async fn apply(&self, event: &proto::CloudEvent) -> Result<(), tonic::Status> {
        let cluster = text_attr(event, "ce-clustername")?;
        let uid = text_attr(event, "ce-resourceid")?;
        text_attr(event, "ce-sequenceid")?;
        let generation = match event.attributes.get("ce-resourceversion").and_then(|a| a.attr.as_ref()) {
            Some(Attr::CeInteger(v)) => i64::from(*v),
            _ => return Err(tonic::Status::invalid_argument("no resourceversion")),
        };
        let mut data: Value = match &event.data {
            Some(Data::BinaryData(b)) => serde_json::from_slice(b),
            Some(Data::TextData(t)) => serde_json::from_str(t),
            _ => return Err(tonic::Status::invalid_argument("no status")),
        }
        .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let conditions = data["conditions"].take();
        let manifests = data["resourceStatus"].take();
        let (name, precondition) = {
            let works = self.works.lock().expect("works");
            let Some(work) = works.get(uid) else {
                return Ok(());
            };
            if work.namespace != cluster {
                return Err(tonic::Status::invalid_argument("another cluster's work"));
            }
            if work.generation > generation || (work.conditions == conditions && work.manifests == manifests) {
                return Ok(());
            }
            (
                work.name.clone(),
                json!({"uid": uid, "resourceVersion": work.resource_version}),
            )
        };
        let patch = json!({"metadata": precondition,
                           "status": {"conditions": conditions, "resourceStatus": {"manifests": manifests}}});
        // The answer is not kept (the watch brings the work as written), so it is not decoded.
        let unavailable = |e: kube::Error| tonic::Status::unavailable(e.to_string());
        let request = kube::core::Request::new(DynamicObject::url_path(&works_resource(), Some(cluster)))
            .patch_subresource("status", &name, &PatchParams::default(), &Patch::Merge(&patch))
            .map_err(|e| unavailable(kube::Error::BuildRequest(e)))?;
        self.client.request_text(request).await.map_err(unavailable)?;
        Ok(())
    }
}

async fn serve_status(kubeconfig: &str) {
    let client = client(kubeconfig).await;
    let statuses = Arc::new(StatusFloor {
        works: Mutex::default(),
        client: client.clone(),
    });
    {
        let statuses = Arc::clone(&statuses);
        let works: Api<DynamicObject> = Api::all_with(client, &works_resource());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(works, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) => {
                        if let Some((uid, known)) = Known::of(w) {
                            statuses.works.lock().expect("works").insert(uid, known);
                        }
                    }
                    Ok(watcher::Event::Delete(w)) => {
                        if let Some(uid) = w.metadata.uid {
                            statuses.works.lock().expect("works").remove(&uid);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        eprintln!("floor-kube: watch: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                    }
                }
            }
        });
    }
    serve(Floor {
        subscribers: Arc::default(),
        statuses: Some(statuses),
    })
    .await;
}

/// A work the status floor patches: its name, uid and the resourceVersion its last write left.
struct Target {
    name: String,
    uid: String,
    resource_version: String,
}

async fn status(kubeconfig: &str) {
    let client = client(kubeconfig).await;
    let ar = works_resource();
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut by_cluster: HashMap<String, Vec<Target>> = HashMap::new();
    for w in all.list(&Default::default()).await.expect("the works").items {
        let (Some(ns), Some(name), Some(uid), Some(rv)) = (
            w.metadata.namespace,
            w.metadata.name,
            w.metadata.uid,
            w.metadata.resource_version,
        ) else {
            continue;
        };
        by_cluster.entry(ns).or_default().push(Target {
            name,
            uid,
            resource_version: rv,
        });
    }
    let mut clusters: Vec<(String, Vec<Target>)> = by_cluster.into_iter().collect();
    for (_, works) in &mut clusters {
        works.sort_by(|a, b| a.name.cmp(&b.name));
    }
    // cluster-0, cluster-1, … in the bench's order (agent i is cluster-i).
    clusters.sort_by_key(|(ns, _)| {
        ns.strip_prefix("cluster-")
            .and_then(|i| i.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    });
    let clusters: Arc<Vec<(String, Mutex<Vec<Target>>)>> =
        Arc::new(clusters.into_iter().map(|(ns, w)| (ns, Mutex::new(w))).collect());
    println!("ready");
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [tag, rate, updates, agents] = parts.as_slice() else {
            continue;
        };
        let (rate, updates, agents): (f64, usize, usize) = (
            rate.parse().expect("a rate"),
            updates.parse().expect("a count"),
            agents.parse().expect("a count"),
        );
        let start = std::time::Instant::now();
        let mut tasks = Vec::new();
        for agent in 0..agents {
            let (clusters, client, ar, tag) = (Arc::clone(&clusters), client.clone(), ar.clone(), tag.to_string());
            tasks.push(tokio::spawn(async move {
                let (ns, targets) = &clusters[agent];
                let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &ar);
                let mut written = 0;
                let mine = updates / agents + usize::from(agent < updates % agents);
                for k in 0..mine {
                    tokio::time::sleep_until(common::due(start, agent, k, agents, rate).into()).await;
                    let (name, patch) = {
                        let targets = targets.lock().expect("targets");
                        let t = &targets[k % targets.len()];
                        let (conditions, manifests) = common::status(&tag, k);
                        (
                            t.name.clone(),
                            common::status_patch(&t.uid, &t.resource_version, &conditions, &manifests),
                        )
                    };
                    match api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        Ok(after) => {
                            written += 1;
                            if let Some(rv) = after.metadata.resource_version {
                                let mut targets = targets.lock().expect("targets");
                                let n = targets.len();
                                targets[k % n].resource_version = rv;
                            }
                        }
                        Err(e) => eprintln!("floor-kube: status of {ns}/{name}: {e}"),
                    }
                }
                written
            }));
        }
        let mut written = 0;
        for t in tasks {
            written += t.await.unwrap_or(0);
        }
        println!("done {written}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match args.get(1..).unwrap_or_default() {
        [mode, kubeconfig] if mode == "deliver" => rt.block_on(deliver(kubeconfig)),
        [mode, kubeconfig] if mode == "status" => rt.block_on(status(kubeconfig)),
        [mode, kubeconfig] if mode == "serve-status" => rt.block_on(serve_status(kubeconfig)),
        _ => {
            eprintln!("usage: floor-kube deliver|status|serve-status KUBECONFIG");
            std::process::exit(2);
        }
    }
}
