//! The floors of the maestro CPU bench (`tests/benches/cpu_maestro.rs`): the least work a server
//! can do for each maestro path, with no plugin, no authentication and no metrics, in plain tonic
//! and sqlx on Maestro's database. The bench measures this process's CPU per event the same way
//! as conductor's.
//!
//! `floor-maestro status DATABASE_URL POOL_SIZE`: serves `io.cloudevents.v1.CloudEventService`
//! Publish (plaintext). Each work agent's status update is decoded and written with exactly the
//! transaction the maestro plugin runs for it (`plugins/maestro/src/plugin.rs` `update_status`,
//! `status.rs` `decide`, `store.rs`, `sql.rs`): `BEGIN`; `pg_advisory_xact_lock` on Maestro's
//! `resource_status` key of the resource (the FNV-1a pair); the resource row read; the decision
//! (same consumer, same version, a different status, a newer sequence id); the status stored with a
//! `StatusUpdate` row and `pg_notify('status_events', …)` in one statement; `COMMIT`. The status is
//! the event as a JSON map with the spec's `metadata` object in place of the agent's
//! (`docs/maestro-database.md` §2, §5.2).
//!
//! `floor-maestro spec DATABASE_URL POOL_SIZE`: serves Subscribe (plaintext), LISTENs on `events`,
//! and on each notification reads the event and its resource in one SELECT, builds the spec event
//! conductor sends for it (`plugins/maestro/src/spec.rs`, `payload.rs`: the stored event with
//! `source = maestro`, the row's id, version and consumer, the creation time stamped into the
//! metadata) and sends it on the streams subscribed to the resource's cluster. It marks nothing
//! reconciled and takes no lock: the floor is the bare LISTEN + one SELECT + tonic send.
//!
//! `floor-maestro spec-transaction DATABASE_URL POOL_SIZE`: as `spec`, but each notification runs
//! the statements of the transaction the maestro plugin runs for a batch of one event
//! (`docs/maestro-database.md` §4.2, the statements of `plugins/maestro/src/sql.rs`), one round
//! trip each as sqlx sends them: `BEGIN`; the event's try-lock, its read and the resource's send
//! lock (`LOCK_AND_READ_EVENTS`); the resource read (`READ_RESOURCES_OF_EVENTS`); the send; the
//! mark (`MARK_RECONCILED`); `COMMIT`. Five round trips, on one connection kept between events (as
//! conductor keeps its connections).
//!
//! `floor-maestro spec-unpipelined DATABASE_URL POOL_SIZE`: the same five round trips through
//! tokio-postgres (the statements prepared once), to tell the driver from the pipelining below.
//!
//! `floor-maestro spec-pipelined DATABASE_URL POOL_SIZE`: the same transaction in two round trips,
//! as the plugin sends it (`pg.begin-with`, `commit-with`), but pipelined by tokio-postgres over
//! the extended protocol: `BEGIN`, the lock and read and the resource read written before any
//! answer is read; the send; then the mark and `COMMIT` together. The statements are prepared once
//! and bound, as sqlx binds them.
//!
//! Each prints the address it listens on as its first line.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use conductor_blackbox_tests::WORKS;
use conductor_blackbox_tests::proto::cloud_event::Data;
use conductor_blackbox_tests::proto::cloud_event_attribute_value::Attr;
use conductor_blackbox_tests::proto::cloud_event_service_server::{CloudEventService, CloudEventServiceServer};
use conductor_blackbox_tests::proto::{self, CloudEventAttributeValue, PublishRequest, SubscriptionRequest};
use serde_json::{Map, Value};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

/// Maestro's advisory-lock key of a string: FNV-1a, 32 bits, as `int4`.
fn fnv1a(s: &str) -> i32 {
    let mut hash: u32 = 2_166_136_261;
    for b in s.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(16_777_619);
    }
    hash as i32
}

/// The statements, as `plugins/maestro/src/sql.rs` and the host's `pg` capability send them.
const LOCK: &str = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)::text";
const READ_RESOURCE: &str = "SELECT id, consumer_name, version, source, payload::text, status::text, created_at, deleted_at FROM resources WHERE id = $1 LIMIT 1";
const STORE_STATUS: &str = "WITH stored AS (UPDATE resources SET status = $1::json, updated_at = $2 WHERE id = $3), \
     e AS (INSERT INTO status_events \
     (id, created_at, updated_at, deleted_at, resource_id, resource_source, resource_type, payload, status, status_event_type, reconciled_date) \
     VALUES ($4, $2, $2, NULL, $3, '', '', NULL, NULL, 'StatusUpdate', NULL) RETURNING id) \
     SELECT pg_notify('status_events', id) FROM e";
/// The spec floor's one read: the event and its resource.
const READ_EVENT: &str = "SELECT e.event_type, r.id, r.consumer_name, r.version, r.payload::text, r.created_at, r.deleted_at \
     FROM events e JOIN resources r ON r.id = e.source_id \
     WHERE e.id = $1 AND e.deleted_at IS NULL AND e.source = 'Resources'";

type ResourceRow = (
    String,
    String,
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

type Subscribers = Arc<Mutex<HashMap<String, Vec<mpsc::Sender<Result<proto::CloudEvent, Status>>>>>>;

struct Floor {
    pool: PgPool,
    subscribers: Subscribers,
}

fn invalid(what: &str) -> Status {
    Status::invalid_argument(what.to_owned())
}

fn db(e: sqlx::Error) -> Status {
    Status::internal(e.to_string())
}

fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn proto_time(ts: &prost_types::Timestamp) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(ts.seconds, u32::try_from(ts.nanos).ok()?).single()
}

fn text<'a>(e: &'a proto::CloudEvent, key: &str) -> Option<&'a str> {
    match e.attributes.get(key)?.attr.as_ref()? {
        Attr::CeString(s) => Some(s),
        _ => None,
    }
}

/// The status as Maestro stores it: the event in structured JSON, every `ce-` attribute a
/// top-level key (`metadata` parsed into an object), `data` embedded.
fn status_json(e: &proto::CloudEvent) -> Result<Map<String, Value>, Status> {
    let mut m = Map::new();
    m.insert("specversion".into(), e.spec_version.clone().into());
    m.insert("id".into(), e.id.clone().into());
    m.insert("source".into(), e.source.clone().into());
    m.insert("type".into(), e.r#type.clone().into());
    for (key, value) in &e.attributes {
        let attr = value
            .attr
            .as_ref()
            .ok_or_else(|| invalid("attribute without a value"))?;
        let name = match key.strip_prefix("ce-") {
            Some("id" | "source" | "specversion" | "type") => continue,
            Some(name) => name,
            None if key == "contenttype" => "datacontenttype",
            None => continue,
        };
        let v = match attr {
            Attr::CeString(s) if name == "metadata" => serde_json::from_str(s).unwrap_or_else(|_| s.clone().into()),
            Attr::CeString(s) | Attr::CeUri(s) | Attr::CeUriRef(s) => s.clone().into(),
            Attr::CeInteger(i) => (*i).into(),
            Attr::CeBoolean(b) => (*b).into(),
            Attr::CeTimestamp(t) => rfc3339(&proto_time(t).ok_or_else(|| invalid("bad timestamp"))?).into(),
            Attr::CeBytes(b) => Value::Array(b.iter().map(|x| Value::from(*x)).collect()),
        };
        m.insert(name.to_owned(), v);
    }
    if let Some(Data::BinaryData(bytes)) = &e.data {
        let data: Value = serde_json::from_slice(bytes).map_err(|e| invalid(&e.to_string()))?;
        m.insert("data".into(), data);
    }
    Ok(m)
}

/// Whether snowflake `new` is newer than `stored` (same node, later time and step).
fn is_newer(new: &str, stored: Option<&str>) -> Result<bool, Status> {
    let Some(stored) = stored.filter(|s| !s.is_empty()) else {
        return Ok(true);
    };
    let parse = |s: &str| -> Result<(i64, i64, i64), Status> {
        let id: i64 = s.trim().parse().map_err(|_| invalid("sequenceid is not a number"))?;
        Ok((id >> 22, (id >> 12) & 0x3FF, id & 0xFFF))
    };
    let (n, s) = (parse(new)?, parse(stored)?);
    if n.1 != s.1 {
        return Err(invalid("sequence ids of different nodes"));
    }
    Ok((n.0, n.2) > (s.0, s.2))
}

impl Floor {
    async fn update_status(&self, e: proto::CloudEvent) -> Result<(), Status> {
        if !e.r#type.ends_with(".status.update_request") {
            return Err(invalid("not a status update"));
        }
        let id = text(&e, "ce-resourceid")
            .ok_or_else(|| invalid("no resourceid"))?
            .to_owned();
        let cluster = text(&e, "ce-clustername").ok_or_else(|| invalid("no clustername"))?;
        let version = match e.attributes.get("ce-resourceversion").and_then(|v| v.attr.as_ref()) {
            Some(Attr::CeInteger(v)) => i64::from(*v),
            Some(Attr::CeString(s)) => s.parse().map_err(|_| invalid("bad resourceversion"))?,
            _ => return Err(invalid("no resourceversion")),
        };
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query_scalar::<_, Option<String>>(LOCK)
            .bind(fnv1a(&id))
            .bind(fnv1a("resource_status"))
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let row: Option<ResourceRow> = sqlx::query_as(READ_RESOURCE)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        let Some((_, consumer, row_version, _, payload, stored, _, _)) = row else {
            return tx.commit().await.map_err(db); // gone: nothing to write
        };
        if consumer != cluster {
            return Err(invalid("unmatched consumer name"));
        }
        let mut status = status_json(&e)?;
        let payload: Value = payload
            .map(|p| serde_json::from_str(&p))
            .transpose()
            .map_err(|e| Status::internal(e.to_string()))?
            .unwrap_or(Value::Null);
        if let Some(meta) = payload.get("metadata") {
            status.insert("metadata".into(), meta.clone());
        }
        let status = Value::Object(status);
        let deleted = status["data"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Deleted" && c["status"] == "True"));
        if deleted {
            return Err(Status::unimplemented("the floor does not delete"));
        }
        let stored: Option<Value> = stored
            .map(|s| serde_json::from_str(&s))
            .transpose()
            .map_err(|e| Status::internal(e.to_string()))?;
        let write = row_version == version
            && stored.as_ref() != Some(&status)
            && is_newer(
                status["sequenceid"].as_str().ok_or_else(|| invalid("no sequenceid"))?,
                stored.as_ref().map(|s| s["sequenceid"].as_str().unwrap_or_default()),
            )?;
        if write {
            sqlx::query(STORE_STATUS)
                .bind(status.to_string())
                .bind(Utc::now())
                .bind(&id)
                .bind(uuid::Uuid::new_v4().to_string())
                .fetch_all(&mut *tx)
                .await
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)
    }
}

#[tonic::async_trait]
impl CloudEventService for Floor {
    async fn publish(&self, request: Request<PublishRequest>) -> Result<Response<()>, Status> {
        let event = request.into_inner().event.ok_or_else(|| invalid("no event"))?;
        self.update_status(event).await?;
        Ok(Response::new(()))
    }

    type SubscribeStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<proto::CloudEvent, Status>> + Send>>;

    async fn subscribe(
        &self,
        request: Request<SubscriptionRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let (tx, rx) = mpsc::channel(1024);
        let cluster = request.into_inner().cluster_name;
        self.subscribers.lock().unwrap().entry(cluster).or_default().push(tx);
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut response = Response::new(Box::pin(stream) as Self::SubscribeStream);
        response
            .metadata_mut()
            .insert("subscription-id", uuid::Uuid::new_v4().to_string().parse().unwrap());
        Ok(response)
    }
}

fn attr(a: Attr) -> CloudEventAttributeValue {
    CloudEventAttributeValue { attr: Some(a) }
}

fn timestamp(t: &DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

/// The spec event conductor sends for a resource row and the action of its event.
fn spec_event((event_type, id, consumer, version, payload, created, deleted): EventRow) -> Option<proto::CloudEvent> {
    let action = match event_type.as_str() {
        "Create" => "create_request",
        "Update" => "update_request",
        "Delete" => "delete_request",
        _ => return None,
    };
    let Value::Object(mut m) = serde_json::from_str(&payload).ok()? else {
        return None;
    };
    if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
        let stamp = |t: &DateTime<Utc>| Value::from(t.to_rfc3339_opts(SecondsFormat::Secs, true));
        if let Some(t) = &created {
            meta.insert("creationTimestamp".into(), stamp(t));
        }
        if let Some(t) = &deleted {
            meta.insert("deletionTimestamp".into(), stamp(t));
        }
    }
    let mut attributes = HashMap::with_capacity(m.len());
    let mut data = None;
    let mut event_id = String::new();
    let mut spec_version = "1.0".to_owned();
    for (key, value) in m {
        let a = match (key.as_str(), value) {
            ("id", Value::String(s)) => {
                event_id = s;
                continue;
            }
            ("specversion", Value::String(s)) => {
                spec_version = s;
                continue;
            }
            ("source" | "type" | "resourceid" | "clustername" | "resourceversion", _) => continue,
            ("data", v) => {
                data = (!v.is_null()).then(|| serde_json::to_vec(&v).ok()).flatten();
                continue;
            }
            ("datacontenttype", Value::String(s)) => {
                attributes.insert("contenttype".to_owned(), attr(Attr::CeString(s)));
                continue;
            }
            ("time", Value::String(s)) => {
                let t = DateTime::parse_from_rfc3339(&s).ok()?.with_timezone(&Utc);
                Attr::CeTimestamp(timestamp(&t))
            }
            (_, Value::Null) => continue,
            (_, Value::String(s)) => Attr::CeString(s),
            (_, Value::Bool(b)) => Attr::CeBoolean(b),
            (_, Value::Number(n)) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
                Some(i) => Attr::CeInteger(i),
                None => Attr::CeString(n.to_string()),
            },
            (_, other) => Attr::CeString(other.to_string()),
        };
        attributes.insert(format!("ce-{key}"), attr(a));
    }
    attributes.insert("ce-resourceid".into(), attr(Attr::CeString(id)));
    attributes.insert(
        "ce-resourceversion".into(),
        attr(Attr::CeInteger(i32::try_from(version).ok()?)),
    );
    attributes.insert("ce-clustername".into(), attr(Attr::CeString(consumer)));
    if let Some(t) = &deleted {
        attributes.insert("ce-deletiontimestamp".into(), attr(Attr::CeTimestamp(timestamp(t))));
        attributes.remove("contenttype");
        data = None;
    }
    Some(proto::CloudEvent {
        id: event_id,
        source: "maestro".into(),
        spec_version,
        r#type: format!("{WORKS}.spec.{action}"),
        attributes,
        data: data.map(Data::BinaryData),
    })
}

type EventRow = (
    String,
    String,
    String,
    i64,
    String,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

/// LISTEN on `events`; each notification: one SELECT, the spec event, sent to its cluster's streams.
async fn deliver(mut listener: sqlx::postgres::PgListener, pool: PgPool, subscribers: Subscribers) {
    loop {
        let notification = listener.recv().await.expect("a notification");
        let row: Option<EventRow> = sqlx::query_as(READ_EVENT)
            .bind(notification.payload())
            .fetch_optional(&pool)
            .await
            .expect("the event read");
        let Some(row) = row else {
            continue;
        };
        let consumer = row.2.clone();
        let Some(event) = spec_event(row) else {
            continue;
        };
        let senders = subscribers.lock().unwrap().get(&consumer).cloned().unwrap_or_default();
        for tx in senders {
            let _ = tx.try_send(Ok(event.clone()));
        }
    }
}

/// The replica number of the send locks (one process).
const REPLICA: i64 = 1;

/// An event's type and the columns of its resource row, from a row of either driver (each has a
/// `try_get` of its own); `None` when either is missing.
macro_rules! event_row {
    ($event_type:expr, $row:expr) => {
        (|| -> Option<EventRow> {
            let row = $row?;
            Some((
                $event_type?,
                row.try_get("id").ok()?,
                row.try_get("consumer_name").ok()?,
                row.try_get("version").ok()?,
                row.try_get("payload").ok()?,
                row.try_get("created_at").ok()?,
                row.try_get("deleted_at").ok()?,
            ))
        })()
    };
}

/// Sends the spec event of `row`, if it makes one, to the streams subscribed to its cluster.
fn send(subscribers: &Subscribers, row: Option<EventRow>) {
    let Some((consumer, event)) = row.and_then(|row| {
        let consumer = row.2.clone();
        spec_event(row).map(|e| (consumer, e))
    }) else {
        return;
    };
    let senders = subscribers.lock().unwrap().get(&consumer).cloned().unwrap_or_default();
    for tx in senders {
        let _ = tx.try_send(Ok(event.clone()));
    }
}

/// What the maestro plugin's lock-and-read statement is given for a batch of the one event `id`.
fn wanted(id: &str) -> Value {
    let (a, b) = maestro_plugin::store::lock_pair(id, "events");
    serde_json::json!([{"n": 0, "id": id, "a": a, "b": b, "s": true}])
}

/// LISTEN on `events`; each notification: the maestro plugin's transaction for a batch of one,
/// statement by statement through sqlx (five round trips); the spec event sent in between.
async fn deliver_in_transaction(mut listener: sqlx::postgres::PgListener, pool: PgPool, subscribers: Subscribers) {
    use maestro_plugin::sql::{LOCK_AND_READ_EVENTS, MARK_RECONCILED, READ_RESOURCES_OF_EVENTS};
    use sqlx::Row;
    let mut conn = pool.acquire().await.expect("a connection");
    loop {
        let notification = listener.recv().await.expect("a notification");
        let id = notification.payload().to_owned();
        sqlx::raw_sql("BEGIN").execute(&mut *conn).await.expect("BEGIN");
        let events = sqlx::query(LOCK_AND_READ_EVENTS)
            .bind(wanted(&id).to_string())
            .bind(REPLICA)
            .fetch_all(&mut *conn)
            .await
            .expect("the lock and read");
        let event_type: Option<String> = events.first().and_then(|e| e.try_get("event_type").ok());
        let resources = sqlx::query(READ_RESOURCES_OF_EVENTS)
            .bind(serde_json::json!([id]).to_string())
            .fetch_all(&mut *conn)
            .await
            .expect("the resource read");
        send(&subscribers, event_row!(event_type, resources.first()));
        sqlx::query(MARK_RECONCILED)
            .bind(Utc::now())
            .bind(serde_json::json!([id]).to_string())
            .execute(&mut *conn)
            .await
            .expect("the mark");
        sqlx::raw_sql("COMMIT").execute(&mut *conn).await.expect("COMMIT");
    }
}

/// LISTEN on `events`; each notification: the same transaction through tokio-postgres, its
/// statements prepared once. `pipelined`: `BEGIN`, the lock and read and the resource read written
/// before any answer is read (one round trip), the send, then the mark and `COMMIT` (another);
/// else each statement waits for the one before it (five round trips), as sqlx sends them.
async fn deliver_with_tokio_postgres(
    mut listener: sqlx::postgres::PgListener,
    url: String,
    subscribers: Subscribers,
    pipelined: bool,
) {
    use maestro_plugin::sql::{LOCK_AND_READ_EVENTS, MARK_RECONCILED, READ_RESOURCES_OF_EVENTS};
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("tokio-postgres connects");
    tokio::spawn(connection);
    let lock = client.prepare(LOCK_AND_READ_EVENTS).await.expect("the lock and read");
    let read = client
        .prepare(READ_RESOURCES_OF_EVENTS)
        .await
        .expect("the resource read");
    let mark = client.prepare(MARK_RECONCILED).await.expect("the mark");
    loop {
        let notification = listener.recv().await.expect("a notification");
        let id = notification.payload().to_owned();
        let wanted = wanted(&id);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&wanted, &REPLICA];
        let ids = serde_json::json!([id]);
        let by_id: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&ids];
        let (events, resources) = if pipelined {
            let (begun, events, resources) = tokio::join!(
                client.batch_execute("BEGIN"),
                client.query(&lock, &params),
                client.query(&read, &by_id),
            );
            begun.expect("BEGIN");
            (events, resources)
        } else {
            client.batch_execute("BEGIN").await.expect("BEGIN");
            let events = client.query(&lock, &params).await;
            (events, client.query(&read, &by_id).await)
        };
        let events = events.expect("the lock and read");
        let event_type = events.first().and_then(|e| e.try_get("event_type").ok());
        let resources = resources.expect("the resource read");
        send(&subscribers, event_row!(event_type, resources.first()));
        let (now, ids) = (Utc::now(), serde_json::json!([id]));
        let marked: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&now, &ids];
        if pipelined {
            let (marked, committed) = tokio::join!(client.execute(&mark, &marked), client.batch_execute("COMMIT"));
            marked.expect("the mark");
            committed.expect("COMMIT");
        } else {
            client.execute(&mark, &marked).await.expect("the mark");
            client.batch_execute("COMMIT").await.expect("COMMIT");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(url)) = (args.get(1), args.get(2)) else {
        eprintln!(
            "usage: floor-maestro status|spec|spec-transaction|spec-unpipelined|spec-pipelined DATABASE_URL [POOL_SIZE]"
        );
        std::process::exit(2);
    };
    let pool_size: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(16);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        // The least work: no ping as a connection is handed out (sqlx's default; conductor
        // pings only one that sat idle).
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(pool_size)
            .test_before_acquire(false)
            .connect(url)
            .await
            .expect("the database");
        let subscribers = Subscribers::default();
        match mode.as_str() {
            "status" => {}
            "spec" | "spec-transaction" | "spec-unpipelined" | "spec-pipelined" => {
                // Listening before the address is printed: the bench writes once it has it.
                let mut listener = sqlx::postgres::PgListener::connect(url).await.expect("LISTEN connects");
                listener.listen("events").await.expect("LISTEN events");
                let (pool, subscribers) = (pool.clone(), Arc::clone(&subscribers));
                match mode.as_str() {
                    "spec" => tokio::spawn(deliver(listener, pool, subscribers)),
                    "spec-transaction" => tokio::spawn(deliver_in_transaction(listener, pool, subscribers)),
                    m => tokio::spawn(deliver_with_tokio_postgres(
                        listener,
                        url.clone(),
                        subscribers,
                        m == "spec-pipelined",
                    )),
                };
            }
            other => {
                eprintln!("unknown mode {other:?}: status, spec, spec-transaction, spec-unpipelined or spec-pipelined");
                std::process::exit(2);
            }
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        tonic::transport::Server::builder()
            .add_service(CloudEventServiceServer::new(Floor { pool, subscribers }))
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
}
