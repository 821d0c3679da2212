//! The calls a plugin makes to its host, as one trait each backend answers: the WIT imports in a
//! WebAssembly component (`imports`), the C ABI in a native library (`native`), in-memory fakes in
//! unit tests (`fakes`).

use crate::kube::{KubeReply, KubeRequest};
use crate::metric::MetricKind;
use crate::pg::{PgReply, PgRequest, PgRows, Statement, TransactionId};
use crate::{CloudEvent, Error};

/// Log levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// The calls a host answers; implemented by each backend.
pub trait HostCalls: Send + Sync {
    fn emit(&self, event: &CloudEvent) -> Result<u32, Error>;
    fn log(&self, level: Level, message: &str);
    fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) -> Result<(), Error>;
    fn cancel_timer(&self, name: &str);
    fn kv_get(&self, key: &str) -> Option<Vec<u8>>;
    fn kv_set(&self, key: &str, value: &[u8]) -> Result<(), Error>;
    fn kv_delete(&self, key: &str) -> bool;
    fn pg(&self, request: PgRequest) -> Result<PgReply, Error>;
    fn kube(&self, request: KubeRequest) -> Result<KubeReply, Error>;
    /// A [`KubeRequest::Watch`] with `options` (`kube.watch-with`, contract 0.6.2). By default the
    /// options are not passed on (they are hints; the native ABI carries none) and it is a plain
    /// watch.
    fn kube_watch_with(&self, request: KubeRequest, options: crate::kube::WatchOptions) -> Result<KubeReply, Error> {
        let _ = options;
        self.kube(request)
    }
    /// `BEGIN` and `statements` in one round trip (`pg.begin-with`, contract 0.6.3): the
    /// transaction and each statement's rows. By default (the native ABI carries one statement a
    /// call) a `begin` and one call per statement, with the same results and the same errors.
    fn pg_begin_with(&self, database: &str, statements: Vec<Statement>) -> Result<(TransactionId, Vec<PgRows>), Error> {
        let transaction = match self.pg(PgRequest::Begin {
            database: database.to_owned(),
        })? {
            PgReply::Begun(id) => id,
            other => return Err(unexpected_pg(other)),
        };
        let rows = run_in(self, transaction, statements)?;
        Ok((transaction, rows))
    }
    /// `statements` and `COMMIT` in one round trip (`transaction.commit-with`, contract 0.6.3). By
    /// default one call per statement and a `commit`.
    fn pg_commit_with(&self, transaction: TransactionId, statements: Vec<Statement>) -> Result<Vec<PgRows>, Error> {
        let rows = run_in(self, transaction, statements)?;
        self.pg(PgRequest::Commit { transaction })?;
        Ok(rows)
    }
    /// `statements` in an open transaction, in one round trip (`transaction.run-all`, contract
    /// 0.6.4). By default one call per statement.
    fn pg_run_all(&self, transaction: TransactionId, statements: Vec<Statement>) -> Result<Vec<PgRows>, Error> {
        run_in(self, transaction, statements)
    }
    fn metric(&self, kind: MetricKind, name: &str, labels: &[&str], value: f64) -> Result<(), Error>;
    fn blob(&self, name: &str) -> Result<Vec<u8>, Error>;
    /// Requests waiting for the plugin, for the running `handle_batch` to take (none by default:
    /// a backend without a line).
    fn take_waiting(&self, max: usize) -> Vec<crate::request::Request> {
        let _ = max;
        Vec::new()
    }
}

pub(crate) fn unexpected_pg(reply: PgReply) -> Error {
    Error::Internal(format!("the host answered a pg call with {reply:?}"))
}

/// Runs `statements` in `transaction` one call each; the first that fails rolls it back and is
/// named in the error, as the host names it when it sends them together.
fn run_in<C: HostCalls + ?Sized>(
    calls: &C,
    transaction: TransactionId,
    statements: Vec<Statement>,
) -> Result<Vec<PgRows>, Error> {
    let count = statements.len();
    let mut all = Vec::with_capacity(count);
    for (n, statement) in statements.into_iter().enumerate() {
        let reply = calls.pg(PgRequest::Query {
            database: String::new(),
            transaction: Some(transaction),
            sql: statement.sql,
            params: statement.params,
        });
        match reply {
            Ok(PgReply::Rows(rows)) => all.push(rows),
            failed => {
                let _ = calls.pg(PgRequest::Rollback { transaction });
                let error = match failed {
                    Err(e) => e,
                    Ok(other) => unexpected_pg(other),
                };
                return Err(error.context(format!("statement {} of {count}", n + 1)));
            }
        }
    }
    Ok(all)
}
