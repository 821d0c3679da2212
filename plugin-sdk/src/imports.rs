//! (WebAssembly components) The host's capabilities as the WIT imports, in the SDK's types. Each
//! function is referenced only when a plugin calls the matching [`Host`](crate::Host) method, so a
//! component imports only the capabilities it uses.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::bindings::conductor::plugin as wit;
use crate::bindings::convert::*;
use crate::calls::Level;
use crate::kube::{KubeReply, KubeRequest};
use crate::metric::MetricKind;
use crate::pg::{PgReply, PgRequest, TransactionId};
use crate::{CloudEvent, Error};

thread_local! {
    /// The open transactions of this instance, by the id the SDK's `Transaction` carries.
    static TRANSACTIONS: RefCell<(TransactionId, HashMap<TransactionId, wit::pg::Transaction>)> =
        RefCell::new((0, HashMap::new()));
}

fn with_transaction<R>(
    id: TransactionId,
    f: impl FnOnce(&wit::pg::Transaction) -> Result<R, wit::types::Error>,
) -> Result<R, Error> {
    TRANSACTIONS.with(|t| match t.borrow().1.get(&id) {
        Some(tx) => f(tx).map_err(from_wit_error),
        None => Err(Error::Invalid(format!("transaction {id} is not open"))),
    })
}

/// Files `tx` among the open transactions: the id the SDK's `Transaction` carries.
fn open_transaction(tx: wit::pg::Transaction) -> TransactionId {
    TRANSACTIONS.with(|t| {
        let mut t = t.borrow_mut();
        t.0 += 1;
        let id = t.0;
        t.1.insert(id, tx);
        id
    })
}

fn take_transaction(id: TransactionId) -> Result<wit::pg::Transaction, Error> {
    TRANSACTIONS
        .with(|t| t.borrow_mut().1.remove(&id))
        .ok_or_else(|| Error::Invalid(format!("transaction {id} is not open")))
}

pub fn emit(event: &CloudEvent) -> Result<u32, Error> {
    wit::emit::emit(&to_wit_event(event)).map_err(from_wit_error)
}
pub fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => wit::log::Level::Trace,
        Level::Debug => wit::log::Level::Debug,
        Level::Info => wit::log::Level::Info,
        Level::Warn => wit::log::Level::Warn,
        Level::Error => wit::log::Level::Error,
    };
    wit::log::log(level, message)
}
pub fn set_timer(name: &str, after_ms: u64, repeat: bool) -> Result<(), Error> {
    wit::timer::set(name, after_ms, repeat).map_err(from_wit_error)
}
pub fn cancel_timer(name: &str) {
    wit::timer::cancel(name)
}
pub fn kv_get(key: &str) -> Option<Vec<u8>> {
    wit::kv::get(key)
}
pub fn kv_set(key: &str, value: &[u8]) -> Result<(), Error> {
    wit::kv::set(key, value).map_err(from_wit_error)
}
pub fn kv_delete(key: &str) -> bool {
    wit::kv::delete(key)
}

pub fn metric(kind: MetricKind, name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
    let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
    match kind {
        MetricKind::Counter => wit::metrics::counter_add(name, &labels, value),
        MetricKind::Gauge => wit::metrics::gauge_set(name, &labels, value),
    }
    .map_err(from_wit_error)
}
pub fn take_waiting(max: usize) -> Vec<crate::request::Request> {
    wit::requests::take_waiting(u32::try_from(max).unwrap_or(u32::MAX))
        .into_iter()
        .map(|w| crate::request::Request {
            identity: from_wit_identity(w.identity),
            event: from_wit_event(w.event),
        })
        .collect()
}
pub fn blob(name: &str) -> Result<Vec<u8>, Error> {
    wit::blob::read(name).map_err(from_wit_error)
}

pub fn pg(request: PgRequest) -> Result<PgReply, Error> {
    use wit::pg as p;
    let values = |params: Vec<crate::PgValue>| params.iter().map(to_wit_value).collect::<Vec<_>>();
    match request {
        PgRequest::Query {
            database,
            transaction: None,
            sql,
            params,
        } => p::query(&database, &sql, &values(params))
            .map(|r| PgReply::Rows(from_wit_rows(r)))
            .map_err(from_wit_error),
        PgRequest::Query {
            transaction: Some(id),
            sql,
            params,
            ..
        } => with_transaction(id, |tx| tx.query(&sql, &values(params))).map(|r| PgReply::Rows(from_wit_rows(r))),
        PgRequest::Execute {
            database,
            transaction: None,
            sql,
            params,
        } => p::execute(&database, &sql, &values(params))
            .map(PgReply::Affected)
            .map_err(from_wit_error),
        PgRequest::Execute {
            transaction: Some(id),
            sql,
            params,
            ..
        } => with_transaction(id, |tx| tx.execute(&sql, &values(params))).map(PgReply::Affected),
        PgRequest::Begin { database } => {
            let tx = p::begin(&database).map_err(from_wit_error)?;
            Ok(PgReply::Begun(open_transaction(tx)))
        }
        PgRequest::Commit { transaction } => {
            let tx = take_transaction(transaction)?;
            p::Transaction::commit(tx)
                .map(|()| PgReply::Done)
                .map_err(from_wit_error)
        }
        PgRequest::Rollback { transaction } => {
            // Dropping the resource rolls it back.
            drop(take_transaction(transaction)?);
            Ok(PgReply::Done)
        }
        PgRequest::AdvisoryLock { transaction, key, wait } => {
            with_transaction(transaction, |tx| tx.advisory_lock(to_wit_lock_key(key), wait)).map(PgReply::Locked)
        }
        PgRequest::Listen { database, channel } => p::listen(&database, &channel)
            .map(|()| PgReply::Done)
            .map_err(from_wit_error),
    }
}

pub fn pg_begin_with(
    database: &str,
    statements: Vec<crate::pg::Statement>,
) -> Result<(TransactionId, Vec<crate::PgRows>), Error> {
    let statements: Vec<_> = statements.iter().map(to_wit_statement).collect();
    let (tx, rows) = wit::pg::begin_with(database, &statements).map_err(from_wit_error)?;
    Ok((open_transaction(tx), rows.into_iter().map(from_wit_rows).collect()))
}

pub fn pg_commit_with(
    transaction: TransactionId,
    statements: Vec<crate::pg::Statement>,
) -> Result<Vec<crate::PgRows>, Error> {
    let tx = take_transaction(transaction)?;
    let statements: Vec<_> = statements.iter().map(to_wit_statement).collect();
    wit::pg::Transaction::commit_with(tx, &statements)
        .map(|all| all.into_iter().map(from_wit_rows).collect())
        .map_err(from_wit_error)
}

pub fn pg_run_all(
    transaction: TransactionId,
    statements: Vec<crate::pg::Statement>,
) -> Result<Vec<crate::PgRows>, Error> {
    let statements: Vec<_> = statements.iter().map(to_wit_statement).collect();
    with_transaction(transaction, |tx| tx.run_all(&statements)).map(|all| all.into_iter().map(from_wit_rows).collect())
}

/// A watch with `options` (`kube.watch-with`); any other request as [`kube`].
pub fn kube_watch_with(request: KubeRequest, options: crate::kube::WatchOptions) -> Result<KubeReply, Error> {
    let KubeRequest::Watch {
        resource,
        namespace,
        selector,
    } = request
    else {
        return kube(request);
    };
    wit::kube::watch_with(
        &to_wit_api_resource(&resource),
        namespace.as_deref(),
        &to_wit_selector(&selector),
        to_wit_watch_options(options),
    )
    .map(|()| KubeReply::Done)
    .map_err(from_wit_error)
}

pub fn kube(request: KubeRequest) -> Result<KubeReply, Error> {
    use wit::kube as k;
    let reply = match request {
        KubeRequest::Watch {
            resource,
            namespace,
            selector,
        } => k::watch(
            &to_wit_api_resource(&resource),
            namespace.as_deref(),
            &to_wit_selector(&selector),
        )
        .map(|()| KubeReply::Done),
        KubeRequest::Get {
            resource,
            namespace,
            name,
        } => k::get(&to_wit_api_resource(&resource), namespace.as_deref(), &name).map(KubeReply::MaybeObject),
        KubeRequest::List {
            resource,
            namespace,
            selector,
        } => k::list(
            &to_wit_api_resource(&resource),
            namespace.as_deref(),
            &to_wit_selector(&selector),
        )
        .map(KubeReply::Objects),
        KubeRequest::Create {
            resource,
            namespace,
            object,
        } => k::create(&to_wit_api_resource(&resource), namespace.as_deref(), &object).map(KubeReply::Object),
        KubeRequest::Update {
            resource,
            namespace,
            object,
            subresource,
        } => k::update(
            &to_wit_api_resource(&resource),
            namespace.as_deref(),
            &object,
            subresource.as_deref(),
        )
        .map(KubeReply::Object),
        KubeRequest::Patch {
            resource,
            namespace,
            name,
            patch,
            subresource,
        } => k::patch(
            &to_wit_api_resource(&resource),
            namespace.as_deref(),
            &name,
            &patch,
            subresource.as_deref(),
        )
        .map(KubeReply::Object),
        KubeRequest::Delete {
            resource,
            namespace,
            name,
        } => k::delete(&to_wit_api_resource(&resource), namespace.as_deref(), &name).map(|()| KubeReply::Done),
        KubeRequest::CreateToken {
            namespace,
            name,
            request,
        } => k::create_token(&namespace, &name, &request).map(KubeReply::Object),
    };
    reply.map_err(from_wit_error)
}
