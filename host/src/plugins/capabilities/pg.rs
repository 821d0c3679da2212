//! `conductor:plugin/pg`: statements with typed parameters, transactions, advisory locks and
//! LISTEN. What the plugin's instances share ([`PgHost`]: its databases, its LISTENs, one each
//! however often asked) and what each instance holds ([`PgSession`]: its open transactions, each on
//! a pooled connection of its own, rolled back if the call that began it returns with it still
//! open). In read-only mode (`check-config --connect`) every statement runs in a read-only
//! transaction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use conductor_plugin_sdk::pg::{LockKey, PgReply, PgRequest, Statement, TransactionId};
use conductor_plugin_sdk::{Capability, DatabaseError, Error, PgRows, PgValue};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Column, Executor, PgConnection, PgPool, Postgres, Row, TypeInfo, ValueRef};

use super::guard::{Guard, Mode};
use crate::database::Databases;
use crate::database::pipeline::{self, Around, Failure};
use crate::database::session::Session;
use crate::host_events::EventQueue;
use crate::plugins::tasks::Tasks;

/// The `pg` state the instances of one plugin share: its databases and its LISTENs.
pub struct PgHost {
    guard: Arc<Guard>,
    databases: Arc<Databases>,
    events: Arc<EventQueue>,
    tasks: Tasks,
    /// LISTENs by (database, channel): one each, however often asked.
    listening: tokio::sync::Mutex<HashSet<(String, String)>>,
}

impl PgHost {
    pub fn new(guard: Arc<Guard>, databases: Arc<Databases>, events: Arc<EventQueue>, tasks: Tasks) -> Self {
        Self {
            guard,
            databases,
            events,
            tasks,
            listening: tokio::sync::Mutex::default(),
        }
    }

    /// The pool of `database`, if the plugin may use it.
    pub fn pool(&self, database: &str) -> Result<&PgPool, Error> {
        self.guard.check(Capability::Pg)?;
        let databases = &self.guard.grants().databases;
        if !databases.contains(database) {
            return Err(Error::Denied(format!(
                "plugin {:?} may not use database {database:?} (its databases: {databases:?})",
                self.guard.plugin()
            )));
        }
        self.databases
            .pool(database)
            .ok_or_else(|| Error::Invalid(format!("no database {database:?}")))
    }

    /// LISTENs on `channel` for the plugin, once however often it asks. The first connection is
    /// made now (an unreachable database or a role that cannot LISTEN is an error here).
    pub async fn listen(&self, database: &str, channel: &str) -> Result<(), Error> {
        self.pool(database)?;
        self.guard.serving("LISTEN")?;
        let mut listening = self.listening.lock().await;
        let key = (database.to_owned(), channel.to_owned());
        if listening.contains(&key) {
            return Ok(());
        }
        let plugin = self.guard.plugin();
        let task = self
            .databases
            .listen(plugin, database, channel, Arc::clone(&self.events), self.tasks.child())
            .await
            .map_err(Error::Unavailable)?;
        self.tasks.spawn(task);
        listening.insert(key);
        tracing::info!(plugin = %plugin, database, channel, "listening");
        Ok(())
    }

    /// A connection to `database` for one statement or transaction: the one kept from its last
    /// use when one waits (`database::kept`), else one from its pool.
    async fn connection(&self, database: &str) -> Result<Session, Error> {
        let pool = self.pool(database)?;
        match self.databases.kept(database).and_then(|kept| kept.take()) {
            Some(conn) => Ok(conn),
            None => pool.acquire().await.map(Session::new).map_err(sql_error),
        }
    }

    /// Keeps `conn`, clean, for the next statement or transaction on `database`.
    fn keep(&self, database: &str, conn: Session) {
        if let Some(kept) = self.databases.kept(database) {
            kept.keep(conn);
        }
    }

    fn mode(&self) -> Mode {
        self.guard.mode()
    }
}

/// What becomes of a transaction once the statements sent on in it ran ([`PgSession::go_on_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Committed with them (`transaction.commit-with`).
    Commit,
    /// Left open (`transaction.run-all`).
    StayOpen,
}

/// Transactions one instance may hold open at once (each pins a pooled connection).
const MAX_OPEN_TRANSACTIONS: usize = 8;

/// A transaction: `BEGIN` sent on a connection of its own, until `COMMIT` or `ROLLBACK`.
struct OpenTransaction {
    database: String,
    /// Taken when the transaction ends.
    conn: Option<Session>,
}

impl OpenTransaction {
    /// Begins a transaction on `database`, read-only in read-only mode.
    async fn begin(pg: &PgHost, database: String) -> Result<Self, Error> {
        let mut open = Self::connect(pg, database).await?;
        open.conn()?.execute(begin(pg)).await.map_err(sql_error)?;
        Ok(open)
    }

    /// A connection to `database` for a transaction whose `BEGIN` is still to be sent.
    async fn connect(pg: &PgHost, database: String) -> Result<Self, Error> {
        let conn = pg.connection(&database).await?;
        Ok(Self {
            database,
            conn: Some(conn),
        })
    }

    fn session(&mut self) -> Result<&mut Session, Error> {
        self.conn
            .as_mut()
            .ok_or_else(|| Error::Internal("the transaction has ended".to_owned()))
    }

    fn conn(&mut self) -> Result<&mut PgConnection, Error> {
        self.session().map(|session| &mut **session)
    }

    /// Runs `statements` in the transaction, one round trip each (the way a native library's
    /// calls send them, and what `pipelined` falls back to): each one's rows, the first failure
    /// named.
    async fn run_each(&mut self, statements: Vec<Statement>) -> Result<Vec<Vec<PgRow>>, Error> {
        let count = statements.len();
        let mut all = Vec::with_capacity(count);
        for (n, statement) in statements.into_iter().enumerate() {
            let fetched = match bind(statement.sql, statement.params) {
                Ok(query) => query.fetch_all(self.conn()?).await.map_err(sql_error),
                Err(e) => Err(e),
            };
            all.push(fetched.map_err(|e| e.context(numbered(Some(n), count)))?);
        }
        Ok(all)
    }

    /// Sends `statements` with `around` in one round trip (`database::pipeline`), or one at a
    /// time when they cannot be (a statement past `pipeline::MOST_NAMED`).
    async fn pipelined(
        &mut self,
        pg: &PgHost,
        around: Around,
        statements: Vec<Statement>,
    ) -> Result<Vec<Vec<PgRow>>, Error> {
        let count = statements.len();
        let named = pg.databases.named();
        match pipeline::run(named, self.session()?, around, &statements).await {
            Ok(Some(fetched)) => Ok(fetched),
            Ok(None) => {
                if let Some(begin) = around.begin {
                    self.conn()?.execute(begin).await.map_err(sql_error)?;
                }
                let all = self.run_each(statements).await?;
                if around.commit {
                    self.conn()?.execute("COMMIT").await.map_err(sql_error)?;
                }
                Ok(all)
            }
            Err(failed) => {
                let context = numbered(failed.statement, count);
                if !failed.refused_by_server()
                    && let Some(mut conn) = self.conn.take()
                {
                    // In doubt: closed, never reused.
                    conn.close_on_drop();
                }
                Err(match failed.error {
                    Failure::Parameter(reason) => Error::Database(DatabaseError::new(reason)),
                    Failure::Sql(e) => sql_error(e),
                }
                .context(context))
            }
        }
    }

    /// Gives the connection of a transaction ended by the server (its `COMMIT` sent with its last
    /// statements) back for the next use.
    fn ended(mut self, pg: &PgHost) {
        if let Some(conn) = self.conn.take() {
            pg.keep(&self.database, conn);
        }
    }

    /// After a failed call: rolled back (harmless where the server has ended it already) and
    /// its connection kept, unless the connection was in doubt and is gone.
    async fn abandon(self, pg: &PgHost) {
        if self.conn.is_some()
            && let Err(e) = self.end("ROLLBACK", Some(pg)).await
        {
            tracing::debug!(error = %e, "rollback after a failed call failed; the connection is discarded");
        }
    }

    /// Ends the transaction with `end` (`COMMIT` or `ROLLBACK`). Its connection is kept for the
    /// next use with `keep`, else given back to the pool; after a failure it is closed.
    async fn end(mut self, end: &'static str, keep: Option<&PgHost>) -> Result<(), Error> {
        let mut conn = self
            .conn
            .take()
            .ok_or_else(|| Error::Internal("the transaction has ended".to_owned()))?;
        match (&mut *conn).execute(end).await {
            Ok(_) => {
                if let Some(pg) = keep {
                    pg.keep(&self.database, conn);
                }
                Ok(())
            }
            Err(e) => {
                conn.close_on_drop();
                Err(sql_error(e))
            }
        }
    }
}

impl Drop for OpenTransaction {
    /// Dropped open (its call cancelled, its `BEGIN` failed): the connection is closed, so no
    /// other statement ever runs inside the transaction.
    fn drop(&mut self) {
        if let Some(conn) = &mut self.conn {
            conn.close_on_drop();
        }
    }
}

/// The `pg` state of one plugin instance: its open transactions.
#[derive(Default)]
pub struct PgSession {
    open: HashMap<TransactionId, OpenTransaction>,
    next: TransactionId,
}

/// The `BEGIN` of a transaction: read-only in read-only mode.
fn begin(pg: &PgHost) -> &'static str {
    match pg.mode() {
        Mode::ReadOnly => "BEGIN READ ONLY",
        Mode::Serve => "BEGIN",
    }
}

/// Which of `count` statements sent together an error belongs to (`None`: the `BEGIN` or the
/// `COMMIT`).
fn numbered(statement: Option<usize>, count: usize) -> String {
    match statement {
        Some(n) => format!("statement {} of {count}", n + 1),
        None => format!("with {count} statements"),
    }
}

/// Each statement's rows as the plugin reads them; the first that cannot be is named.
fn each_rows(fetched: Vec<Vec<PgRow>>) -> Result<Vec<PgRows>, Error> {
    let count = fetched.len();
    fetched
        .into_iter()
        .enumerate()
        .map(|(n, result)| rows(result).map_err(|e| e.context(numbered(Some(n), count))))
        .collect()
}

fn sql_error(e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(db) => Error::Database(DatabaseError {
            code: db.code().map(|c| c.into_owned()),
            message: db.message().to_owned(),
        }),
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            Error::Unavailable(format!("database: {e}"))
        }
        _ => Error::Database(DatabaseError::new(e.to_string())),
    }
}

fn db_error(message: String) -> Error {
    Error::Database(DatabaseError::new(message))
}

/// Whether a connection is clean after `result` of an autocommit statement on it: the statement
/// ran, or the server refused it (its transaction ended with it).
fn clean<T>(result: &Result<T, sqlx::Error>) -> bool {
    matches!(result, Ok(_) | Err(sqlx::Error::Database(_)))
}

fn bind(sql: String, params: Vec<PgValue>) -> Result<sqlx::query::Query<'static, Postgres, PgArguments>, Error> {
    // The plugin's statement, with its values bound as parameters, never spliced in.
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (i, value) in params.into_iter().enumerate() {
        query = match value {
            PgValue::Null => query.bind(None::<String>),
            PgValue::Bool(b) => query.bind(b),
            PgValue::Int4(i) => query.bind(i),
            PgValue::Int8(i) => query.bind(i),
            PgValue::Float8(f) => query.bind(f),
            PgValue::Text(s) => query.bind(s),
            // Sent as jsonb (the contract: `json` columns take it by assignment cast); checked,
            // not parsed into a tree.
            PgValue::Json(s) => {
                let raw = serde_json::value::RawValue::from_string(s)
                    .map_err(|e| db_error(format!("parameter ${} is not JSON: {e}", i + 1)))?;
                query.bind(sqlx::types::Json(raw))
            }
            PgValue::Timestamp(t) => query.bind(t),
            PgValue::Bytea(b) => query.bind(b),
        };
    }
    Ok(query)
}

fn column_value(row: &PgRow, i: usize) -> Result<PgValue, Error> {
    let raw = row.try_get_raw(i).map_err(sql_error)?;
    if raw.is_null() {
        return Ok(PgValue::Null);
    }
    let type_info = raw.type_info();
    let type_name = type_info.name();
    let get_err = |e: sqlx::Error| db_error(format!("column {i} ({type_name}): {e}"));
    Ok(match type_name {
        "BOOL" => PgValue::Bool(row.try_get(i).map_err(get_err)?),
        "INT2" => PgValue::Int4(i32::from(row.try_get::<i16, _>(i).map_err(get_err)?)),
        "INT4" => PgValue::Int4(row.try_get(i).map_err(get_err)?),
        "INT8" => PgValue::Int8(row.try_get(i).map_err(get_err)?),
        "FLOAT4" => PgValue::Float8(f64::from(row.try_get::<f32, _>(i).map_err(get_err)?)),
        "FLOAT8" => PgValue::Float8(row.try_get(i).map_err(get_err)?),
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" => PgValue::Text(row.try_get(i).map_err(get_err)?),
        // `json` arrives as its text; `jsonb` as a version byte and its text: either is copied
        // once, as received (PostgreSQL has checked it is JSON).
        "JSON" => PgValue::Json(row.try_get::<JsonText, _>(i).map_err(get_err)?.0),
        "JSONB" => {
            let v: sqlx::types::Json<Box<serde_json::value::RawValue>> = row.try_get(i).map_err(get_err)?;
            PgValue::Json(v.0.get().to_owned())
        }
        "TIMESTAMPTZ" => PgValue::Timestamp(row.try_get(i).map_err(get_err)?),
        "TIMESTAMP" => PgValue::Timestamp(row.try_get::<chrono::NaiveDateTime, _>(i).map_err(get_err)?.and_utc()),
        "BYTEA" => PgValue::Bytea(row.try_get(i).map_err(get_err)?),
        "VOID" => PgValue::Null,
        other => {
            let name = row.columns()[i].name();
            return Err(db_error(format!(
                "column {name:?} has type {other}, which the pg capability does not carry; cast it to text"
            )));
        }
    })
}

/// A `json` column's text, read as PostgreSQL sends it (it has checked it is JSON) without
/// parsing it again.
struct JsonText(String);

impl sqlx::Type<Postgres> for JsonText {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        sqlx::postgres::PgTypeInfo::with_name("json")
    }
}

impl sqlx::Decode<'_, Postgres> for JsonText {
    fn decode(value: sqlx::postgres::PgValueRef<'_>) -> Result<Self, sqlx::error::BoxDynError> {
        Ok(Self(value.as_str()?.to_owned()))
    }
}

fn rows(result: Vec<PgRow>) -> Result<PgRows, Error> {
    let columns = result
        .first()
        .map(|r| r.columns().iter().map(|c| c.name().to_owned()).collect())
        .unwrap_or_default();
    let rows = result
        .iter()
        .map(|row| (0..row.len()).map(|i| column_value(row, i)).collect())
        .collect::<Result<_, _>>()?;
    Ok(PgRows { columns, rows })
}

/// A `pg` call timed and counted in the plugin's metrics under its database, in a span naming
/// what it runs.
async fn instrumented<T>(
    pg: &PgHost,
    database: Option<String>,
    statement: String,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let started = std::time::Instant::now();
    let span = tracing::span!(
        target: "conductor::trace",
        tracing::Level::TRACE,
        "pg",
        plugin = pg.guard.plugin(),
        database = database.as_deref().unwrap_or_default(),
        statement,
    );
    let reply = tracing::Instrument::instrument(call, span).await;
    if let Some(database) = database {
        pg.guard
            .metrics()
            .statement(&database, reply.is_ok(), started.elapsed());
    }
    reply
}

/// Statements sent together, for their span: `before`, each statement's SQL and `after`, cut to
/// 200 characters.
fn listed(before: &str, statements: &[Statement], after: &str) -> String {
    let all = std::iter::once(before)
        .chain(statements.iter().map(|s| s.sql.as_str()))
        .chain(std::iter::once(after))
        .filter(|sql| !sql.is_empty());
    // Cut as it is joined: a batch's statements are kilobytes, the span keeps 200 characters.
    all.enumerate()
        .flat_map(|(n, sql)| if n == 0 { "" } else { "; " }.chars().chain(sql.chars()))
        .take(200)
        .collect()
}

/// What a `pg` call runs, for its span: the SQL (cut to 200 characters) or the operation.
fn statement(request: &PgRequest) -> String {
    match request {
        PgRequest::Query { sql, .. } | PgRequest::Execute { sql, .. } => sql.chars().take(200).collect(),
        PgRequest::Begin { .. } => "BEGIN".to_owned(),
        PgRequest::Commit { .. } => "COMMIT".to_owned(),
        PgRequest::Rollback { .. } => "ROLLBACK".to_owned(),
        PgRequest::AdvisoryLock { .. } => "advisory lock".to_owned(),
        PgRequest::Listen { channel, .. } => format!("LISTEN {channel}"),
    }
}

impl PgSession {
    /// Answers one `pg` call of the instance; a statement is counted and timed in the plugin's
    /// metrics under its database.
    pub async fn call(&mut self, pg: &PgHost, request: PgRequest) -> Result<PgReply, Error> {
        let database = match &request {
            PgRequest::Query {
                database,
                transaction: None,
                ..
            }
            | PgRequest::Execute {
                database,
                transaction: None,
                ..
            } => Some(database.clone()),
            PgRequest::Query {
                transaction: Some(id), ..
            }
            | PgRequest::Execute {
                transaction: Some(id), ..
            } => self.open.get(id).map(|t| t.database.clone()),
            _ => None,
        };
        let statement = statement(&request);
        // Boxed: the statement's future (sqlx's, the pool's) is kilobytes, and the layers above
        // it — this call, the instance's state, wasmtime's host function — would each move it.
        instrumented(pg, database, statement, Box::pin(self.dispatch(pg, request))).await
    }

    /// `pg.begin-with`: `BEGIN` and `statements` in one round trip; the transaction and each
    /// statement's rows. If one fails the transaction is rolled back and the error names it.
    pub async fn begin_with(
        &mut self,
        pg: &PgHost,
        database: String,
        statements: Vec<Statement>,
    ) -> Result<(TransactionId, Vec<PgRows>), Error> {
        let text = listed(begin(pg), &statements, "");
        let counted = Some(database.clone());
        let call = async {
            self.room()?;
            let mut tx = OpenTransaction::connect(pg, database).await?;
            let around = Around {
                begin: Some(begin(pg)),
                commit: false,
            };
            match tx.pipelined(pg, around, statements).await.and_then(each_rows) {
                Ok(all) => {
                    self.next += 1;
                    self.open.insert(self.next, tx);
                    Ok((self.next, all))
                }
                Err(e) => {
                    tx.abandon(pg).await;
                    Err(e)
                }
            }
        };
        instrumented(pg, counted, text, Box::pin(call)).await
    }

    /// `statements` in the open transaction `transaction`, in one round trip; each statement's
    /// rows. `Then::Commit` (`transaction.commit-with`) sends its `COMMIT` with them;
    /// `Then::StayOpen` (`transaction.run-all`) leaves it open. If one fails the transaction is
    /// rolled back and ended, and the error names the statement.
    pub async fn go_on_with(
        &mut self,
        pg: &PgHost,
        transaction: TransactionId,
        statements: Vec<Statement>,
        then: Then,
    ) -> Result<Vec<PgRows>, Error> {
        let commit = then == Then::Commit;
        let database = self.open.get(&transaction).map(|t| t.database.clone());
        let text = listed("", &statements, if commit { "COMMIT" } else { "" });
        let call = async {
            let mut tx = self.take(transaction)?;
            let around = Around { begin: None, commit };
            let fetched = match tx.pipelined(pg, around, statements).await {
                Ok(fetched) => fetched,
                Err(e) => {
                    tx.abandon(pg).await;
                    return Err(e);
                }
            };
            if commit {
                tx.ended(pg);
                // Committed: a row the capability cannot carry fails the call, not the writes.
                return each_rows(fetched).map_err(|e| e.context("committed"));
            }
            match each_rows(fetched) {
                Ok(all) => {
                    self.open.insert(transaction, tx);
                    Ok(all)
                }
                Err(e) => {
                    tx.abandon(pg).await;
                    Err(e)
                }
            }
        };
        instrumented(pg, database, text, Box::pin(call)).await
    }

    /// Refuses another transaction past [`MAX_OPEN_TRANSACTIONS`].
    fn room(&self) -> Result<(), Error> {
        if self.open.len() >= MAX_OPEN_TRANSACTIONS {
            return Err(Error::Unavailable(format!(
                "too many open transactions (at most {MAX_OPEN_TRANSACTIONS} per instance)"
            )));
        }
        Ok(())
    }

    async fn dispatch(&mut self, pg: &PgHost, request: PgRequest) -> Result<PgReply, Error> {
        match request {
            PgRequest::Query {
                database,
                transaction,
                sql,
                params,
            } => {
                let query = bind(sql, params)?;
                let fetched = self
                    .run(pg, database, transaction, async |conn| query.fetch_all(conn).await)
                    .await?;
                rows(fetched).map(PgReply::Rows)
            }
            PgRequest::Execute {
                database,
                transaction,
                sql,
                params,
            } => {
                let query = bind(sql, params)?;
                let done = self
                    .run(pg, database, transaction, async |conn| query.execute(conn).await)
                    .await?;
                Ok(PgReply::Affected(done.rows_affected()))
            }
            PgRequest::Begin { database } => {
                self.room()?;
                let tx = OpenTransaction::begin(pg, database).await?;
                self.next += 1;
                self.open.insert(self.next, tx);
                Ok(PgReply::Begun(self.next))
            }
            PgRequest::Commit { transaction } => {
                self.take(transaction)?.end("COMMIT", Some(pg)).await?;
                Ok(PgReply::Done)
            }
            PgRequest::Rollback { transaction } => {
                self.take(transaction)?.end("ROLLBACK", Some(pg)).await?;
                Ok(PgReply::Done)
            }
            PgRequest::AdvisoryLock { transaction, key, wait } => {
                let tx = self.transaction(transaction)?.conn()?;
                let sql = match (key, wait) {
                    (LockKey::Pair(..), true) => "SELECT pg_advisory_xact_lock($1::int4, $2::int4)::text",
                    (LockKey::Pair(..), false) => "SELECT pg_try_advisory_xact_lock($1::int4, $2::int4)::text",
                    (LockKey::Big(_), true) => "SELECT pg_advisory_xact_lock($1::int8)::text",
                    (LockKey::Big(_), false) => "SELECT pg_try_advisory_xact_lock($1::int8)::text",
                };
                let query = match key {
                    LockKey::Pair(a, b) => sqlx::query_scalar::<_, Option<String>>(sql).bind(a).bind(b),
                    LockKey::Big(k) => sqlx::query_scalar::<_, Option<String>>(sql).bind(k),
                };
                // The waiting form answers `void` (text ''), the try form `true` or `false`.
                let answer = query.fetch_one(tx).await.map_err(sql_error)?;
                Ok(PgReply::Locked(wait || answer.as_deref() == Some("true")))
            }
            PgRequest::Listen { database, channel } => {
                pg.listen(&database, &channel).await?;
                Ok(PgReply::Done)
            }
        }
    }

    /// Runs `statement` in `transaction`, or alone in autocommit (in read-only mode, in a
    /// read-only transaction rolled back after it) on a connection kept for the next use when it
    /// is left clean.
    async fn run<T>(
        &mut self,
        pg: &PgHost,
        database: String,
        transaction: Option<TransactionId>,
        statement: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, Error> {
        let result = match (transaction, pg.mode()) {
            (Some(id), _) => statement(self.transaction(id)?.conn()?).await,
            (None, Mode::Serve) => {
                let mut conn = pg.connection(&database).await?;
                let result = statement(&mut conn).await;
                if clean(&result) {
                    pg.keep(&database, conn);
                }
                result
            }
            (None, Mode::ReadOnly) => {
                let mut tx = OpenTransaction::begin(pg, database).await?;
                let result = statement(tx.conn()?).await;
                tx.end("ROLLBACK", Some(pg)).await?;
                result
            }
        };
        result.map_err(sql_error)
    }

    fn transaction(&mut self, id: TransactionId) -> Result<&mut OpenTransaction, Error> {
        self.open.get_mut(&id).ok_or_else(|| unknown(id))
    }

    fn take(&mut self, id: TransactionId) -> Result<OpenTransaction, Error> {
        self.open.remove(&id).ok_or_else(|| unknown(id))
    }

    /// Whether a transaction is open.
    pub fn has_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Rolls back what the call left open (a plugin that trapped or forgot to commit), so no
    /// lock or connection outlives the call.
    pub async fn end_call(&mut self, plugin: &str) {
        for (id, open) in self.open.drain() {
            tracing::warn!(plugin, transaction = id, database = %open.database, "a plugin call returned with a transaction open; rolling it back");
            if let Err(e) = open.end("ROLLBACK", None).await {
                tracing::warn!(plugin, error = %e, "rollback failed; the connection is discarded");
            }
        }
    }
}

fn unknown(id: TransactionId) -> Error {
    Error::Invalid(format!(
        "no open transaction {id} (committed, rolled back, or not this instance's)"
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use conductor_plugin_sdk::Capability;

    use super::*;
    use crate::config::{DatabaseConfig, EmbeddedDatabase, HumanDuration};
    use crate::database::{Databases, EmbeddedPostgres};
    use crate::host_events::EventQueue;
    use crate::plugins::capabilities::guard::Grants;
    use crate::telemetry::Metrics;

    fn query(sql: &str, params: Vec<PgValue>, transaction: Option<TransactionId>) -> PgRequest {
        PgRequest::Query {
            database: "db".into(),
            transaction,
            sql: sql.into(),
            params,
        }
    }

    fn rows(reply: Result<PgReply, Error>) -> PgRows {
        match reply {
            Ok(PgReply::Rows(rows)) => rows,
            other => panic!("{other:?}"),
        }
    }

    fn capabilities(databases: Arc<Databases>, mode: Mode) -> PgHost {
        let grants = Grants {
            capabilities: [Capability::Pg].into(),
            databases: ["db".to_owned()].into(),
            kube_resources: vec![],
            ..Grants::default()
        };
        let events = Arc::new(EventQueue::new(10, Metrics::new().plugin("p")));
        let guard = Guard::new("p", grants, mode, events.metrics().clone());
        PgHost::new(Arc::new(guard), databases, events, Tasks::default())
    }

    fn message(e: Error) -> String {
        e.to_string()
    }

    /// An embedded PostgreSQL as database `db` (kept running while the guards live).
    async fn embedded() -> (tempfile::TempDir, EmbeddedPostgres, Arc<Databases>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let embedded = EmbeddedDatabase {
            data_dir: dir.path().join("pg"),
            database: "postgres".into(),
            init_sql: vec![],
            port: None,
            bin_dir: None,
        };
        let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&embedded))
            .await
            .unwrap()
            .unwrap();
        let config: DatabaseConfig = toml::from_str(&format!("url = \"{}\"", pg.url())).unwrap();
        assert_eq!(
            config.statement_timeout,
            HumanDuration(std::time::Duration::from_secs(30))
        );
        (dir, pg, databases(config))
    }

    /// The capability's databases: `config` named `db`.
    fn databases(config: DatabaseConfig) -> Arc<Databases> {
        Databases::new(
            &BTreeMap::from([("db".to_owned(), config)]),
            &BTreeMap::new(),
            |p| p.to_owned(),
            Metrics::new(),
            Arc::default(),
        )
        .unwrap()
    }

    /// A call's future stays small however large the statement's is: wasmtime's host function
    /// and the instance's state each move it by value (a copy of kilobytes per statement).
    #[tokio::test]
    async fn a_call_moves_no_statement_future() {
        let config: DatabaseConfig = toml::from_str("url = \"postgres://conductor@127.0.0.1:1/db\"").unwrap();
        let caps = capabilities(databases(config), Mode::Serve);
        let mut session = PgSession::default();
        let statement = std::mem::size_of_val(&session.dispatch(&caps, query("SELECT 1", vec![], None)));
        let call = std::mem::size_of_val(&session.call(&caps, query("SELECT 1", vec![], None)));
        assert!(statement > 1024, "the statement's future: {statement} bytes");
        assert!(call <= 512, "the call's future: {call} bytes");
    }

    /// The capability against a real PostgreSQL: every value type both ways, errors with their
    /// SQLSTATE, advisory locks of both forms, transactions a call leaves open rolled back, and
    /// the read-only mode of `check-config --connect`.
    #[tokio::test(flavor = "multi_thread")]
    async fn statements_values_locks_and_transactions_against_postgres() {
        let (_dir, _pg, databases) = embedded().await;
        let caps = capabilities(Arc::clone(&databases), Mode::Serve);
        let mut session = PgSession::default();

        let now = chrono::DateTime::from_timestamp(1_750_000_000, 123_456_000).unwrap();
        let values = vec![
            PgValue::Bool(true),
            PgValue::Int4(-7),
            PgValue::Int8(1 << 40),
            PgValue::Float8(2.5),
            PgValue::Text("héllo".into()),
            PgValue::Json(r#"{"a": [1, 2]}"#.into()),
            PgValue::Timestamp(now),
            PgValue::Bytea(vec![0, 255, 7]),
            PgValue::Null,
        ];
        let got = rows(
            session
                .call(
                    &caps,
                    query(
                        "SELECT $1::bool AS b, $2::int4 AS i, $3::int8 AS l, $4::float8 AS f, $5::text AS t, \
                         $6::json AS j, $7::timestamptz AS ts, $8::bytea AS by, $9::text AS n, 3::int2 AS small, pg_notify('x', '') AS v",
                        values.clone(),
                        None,
                    ),
                )
                .await,
        );
        assert_eq!(got.columns[..3], ["b", "i", "l"]);
        let mut expected = values;
        expected.extend([PgValue::Int4(3), PgValue::Null]);
        assert_eq!(got.rows, [expected]);
        let err = session
            .call(
                &caps,
                query("SELECT $1::json", vec![PgValue::Json("{oops".into())], None),
            )
            .await
            .unwrap_err();
        assert!(message(err).contains("parameter $1 is not JSON"));
        let timeout = rows(session.call(&caps, query("SHOW statement_timeout", vec![], None)).await);
        assert_eq!(
            timeout.rows,
            [[PgValue::Text("30s".into())]],
            "the configured statement_timeout"
        );
        let err = session
            .call(&caps, query("SELECT 1::numeric", vec![], None))
            .await
            .unwrap_err();
        assert!(message(err).contains("cast it to text"));
        let err = session
            .call(&caps, query("SELECT * FROM nowhere", vec![], None))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Database(d) if d.code.as_deref() == Some("42P01")),
            "{err}"
        );
        let other = PgRequest::Begin {
            database: "other".into(),
        };
        let err = session.call(&caps, other).await.unwrap_err();
        assert!(matches!(&err, Error::Denied(m) if m.contains("may not use")), "{err}");

        // A lock taken in one transaction is refused to another and released by end_call, in
        // both key forms (two int4: objsubid 2; bigint: objsubid 1).
        let begin = || PgRequest::Begin { database: "db".into() };
        for (key, held) in [
            (
                LockKey::Pair(1_675_502_341, 316_203_908),
                "SELECT count(*)::int4 AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = 1675502341::oid AND objid = 316203908::oid AND objsubid = 2",
            ),
            (
                LockKey::Big(42),
                "SELECT count(*)::int4 AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = 0::oid AND objid = 42::oid AND objsubid = 1",
            ),
        ] {
            let Ok(PgReply::Begun(first)) = session.call(&caps, begin()).await else {
                panic!()
            };
            let lock = |transaction, wait| PgRequest::AdvisoryLock { transaction, key, wait };
            assert_eq!(session.call(&caps, lock(first, false)).await, Ok(PgReply::Locked(true)));
            let mut other = PgSession::default();
            let Ok(PgReply::Begun(second)) = other.call(&caps, begin()).await else {
                panic!()
            };
            assert_eq!(other.call(&caps, lock(second, false)).await, Ok(PgReply::Locked(false)));
            let count = |r: PgRows| r.rows[0][0].clone();
            assert_eq!(
                count(rows(other.call(&caps, query(held, vec![], None)).await)),
                PgValue::Int4(1),
                "{key:?}"
            );
            session.end_call("p").await;
            assert_eq!(
                count(rows(other.call(&caps, query(held, vec![], None)).await)),
                PgValue::Int4(0),
                "{key:?}"
            );
            // The waiting form takes a free lock.
            assert_eq!(other.call(&caps, lock(second, true)).await, Ok(PgReply::Locked(true)));
            assert!(
                session
                    .call(&caps, PgRequest::Commit { transaction: first })
                    .await
                    .is_err()
            );
            other.end_call("p").await;
        }

        // A committed write stays; a transaction left open is rolled back.
        let create = query("CREATE TABLE t (v int4)", vec![], None);
        session.call(&caps, create).await.unwrap();
        let Ok(PgReply::Begun(tx)) = session.call(&caps, begin()).await else {
            panic!()
        };
        let insert = |v, transaction| PgRequest::Execute {
            database: "db".into(),
            transaction,
            sql: "INSERT INTO t VALUES ($1)".into(),
            params: vec![PgValue::Int4(v)],
        };
        assert_eq!(session.call(&caps, insert(1, Some(tx))).await, Ok(PgReply::Affected(1)));
        session
            .call(&caps, PgRequest::Commit { transaction: tx })
            .await
            .unwrap();
        let Ok(PgReply::Begun(tx)) = session.call(&caps, begin()).await else {
            panic!()
        };
        session.call(&caps, insert(2, Some(tx))).await.unwrap();
        session.end_call("p").await;
        let all = rows(session.call(&caps, query("SELECT v FROM t", vec![], None)).await);
        assert_eq!(all.rows, [[PgValue::Int4(1)]]);

        // A transaction's first statement runs inside it (its write unseen by others until the
        // commit), a first statement that fails leaves the transaction aborted, and a
        // transaction with no statement commits.
        let Ok(PgReply::Begun(tx)) = session.call(&caps, begin()).await else {
            panic!()
        };
        session.call(&caps, insert(3, Some(tx))).await.unwrap();
        let mut other = PgSession::default();
        let count = "SELECT count(*)::int4 FROM t";
        let seen = |r: PgRows| r.rows[0][0].clone();
        assert_eq!(
            seen(rows(other.call(&caps, query(count, vec![], None)).await)),
            PgValue::Int4(1)
        );
        session
            .call(&caps, PgRequest::Commit { transaction: tx })
            .await
            .unwrap();
        assert_eq!(
            seen(rows(other.call(&caps, query(count, vec![], None)).await)),
            PgValue::Int4(2)
        );
        let Ok(PgReply::Begun(tx)) = session.call(&caps, begin()).await else {
            panic!()
        };
        let err = session
            .call(&caps, query("SELECT * FROM nowhere", vec![], Some(tx)))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Database(d) if d.code.as_deref() == Some("42P01")),
            "{err}"
        );
        let err = session.call(&caps, insert(4, Some(tx))).await.unwrap_err();
        assert!(
            matches!(&err, Error::Database(d) if d.code.as_deref() == Some("25P02")),
            "{err}"
        );
        session.end_call("p").await;
        let Ok(PgReply::Begun(tx)) = session.call(&caps, begin()).await else {
            panic!()
        };
        session
            .call(&caps, PgRequest::Commit { transaction: tx })
            .await
            .unwrap();
        session
            .call(&caps, query("DELETE FROM t WHERE v = 3", vec![], None))
            .await
            .unwrap();

        for _ in 0..MAX_OPEN_TRANSACTIONS {
            session.call(&caps, begin()).await.unwrap();
        }
        let err = session.call(&caps, begin()).await.unwrap_err();
        assert!(message(err).contains("too many"));
        session.end_call("p").await;

        // Read-only: reads work, writes are refused by the server, LISTEN by the host.
        let read_only = capabilities(databases, Mode::ReadOnly);
        let mut checking = PgSession::default();
        let all = rows(checking.call(&read_only, query("SELECT v FROM t", vec![], None)).await);
        assert_eq!(all.rows, [[PgValue::Int4(1)]]);
        let err = checking.call(&read_only, insert(3, None)).await.unwrap_err();
        assert!(
            matches!(&err, Error::Database(d) if d.code.as_deref() == Some("25006")),
            "{err}"
        );
        let Ok(PgReply::Begun(tx)) = checking.call(&read_only, begin()).await else {
            panic!()
        };
        let err = checking.call(&read_only, insert(3, Some(tx))).await.unwrap_err();
        assert!(
            matches!(&err, Error::Database(d) if d.code.as_deref() == Some("25006")),
            "{err}"
        );
        checking.end_call("p").await;
        let listen = PgRequest::Listen {
            database: "db".into(),
            channel: "c".into(),
        };
        assert!(matches!(checking.call(&read_only, listen).await, Err(Error::Denied(_))));
        let all = rows(session.call(&caps, query("SELECT v FROM t", vec![], None)).await);
        assert_eq!(all.rows, [[PgValue::Int4(1)]], "nothing written while checking");
    }

    /// Connections are kept between statements and transactions (no round trip to give them
    /// back), never inside a transaction: one dropped open is closed, not kept; what waits
    /// longer than `LINGER` goes back to the pool.
    #[tokio::test(flavor = "multi_thread")]
    async fn connections_are_kept_between_uses_and_never_inside_a_transaction() {
        let (_dir, _pg, databases) = embedded().await;
        let caps = capabilities(Arc::clone(&databases), Mode::Serve);
        let kept = Arc::clone(databases.kept("db").unwrap());
        let pool = databases.pool("db").unwrap().clone();
        let mut session = PgSession::default();
        // The backend, and the transaction the statement runs in.
        let probe = "SELECT pg_backend_pid() AS pid, pg_current_xact_id()::text AS xact";
        let run = async |session: &mut PgSession, transaction| {
            let got = rows(session.call(&caps, query(probe, vec![], transaction)).await);
            (got.rows[0][0].clone(), got.rows[0][1].clone())
        };
        let (first, one) = run(&mut session, None).await;
        assert_eq!(kept.waiting(), 1, "kept after its statement");
        let (next, two) = run(&mut session, None).await;
        assert_eq!(next, first, "the next statement takes it");
        assert_ne!(one, two, "each statement in a transaction of its own");

        let begin = || PgRequest::Begin { database: "db".into() };
        let Ok(PgReply::Begun(tx)) = session.call(&caps, begin()).await else {
            panic!()
        };
        assert_eq!(kept.waiting(), 0, "the transaction holds it");
        let inside = run(&mut session, Some(tx)).await;
        assert_eq!(inside.0, first);
        assert_eq!(run(&mut session, Some(tx)).await, inside);
        session
            .call(&caps, PgRequest::Commit { transaction: tx })
            .await
            .unwrap();
        let after = run(&mut session, None).await;
        assert_eq!(after.0, first, "kept after COMMIT");
        assert_ne!(after.1, inside.1, "outside the committed transaction");

        // A transaction dropped open (its call cancelled): its connection is closed, and no
        // statement after it runs inside it.
        let Ok(PgReply::Begun(tx)) = session.call(&caps, begin()).await else {
            panic!()
        };
        let (dropped, xact) = run(&mut session, Some(tx)).await;
        drop(session);
        let mut other = PgSession::default();
        let (next, next_xact) = run(&mut other, None).await;
        assert_ne!(next, dropped, "a connection dropped in a transaction is not kept");
        assert_ne!(next_xact, xact);
        let gone = "SELECT count(*)::int4 FROM pg_stat_activity WHERE pid = $1";
        let mut left = PgValue::Int4(1);
        for _ in 0..100 {
            let got = other.call(&caps, query(gone, vec![dropped.clone()], None)).await;
            left = rows(got).rows[0][0].clone();
            if left == PgValue::Int4(0) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(left, PgValue::Int4(0), "its backend ended");

        // Idle past LINGER, it goes back to the pool.
        assert_eq!(kept.waiting(), 1);
        let idle = pool.num_idle();
        tokio::time::sleep(crate::database::kept::LINGER * 2 + std::time::Duration::from_millis(300)).await;
        assert_eq!(kept.waiting(), 0, "given back after LINGER");
        assert_eq!(pool.num_idle(), idle + 1);
    }

    /// What the backend `pid` last received, read on a connection of the pool's own.
    async fn last_message(databases: &Databases, pid: &PgValue) -> String {
        let PgValue::Int4(pid) = pid else { panic!("{pid:?}") };
        let mut watcher = databases.pool("db").unwrap().acquire().await.unwrap();
        sqlx::query_scalar("SELECT query FROM pg_stat_activity WHERE pid = $1")
            .bind(pid)
            .fetch_one(&mut *watcher)
            .await
            .unwrap()
    }

    /// The SQLSTATE of a database error.
    fn sqlstate(err: &Error) -> Option<&str> {
        match err {
            Error::Database(e) => e.code.as_deref(),
            _ => None,
        }
    }

    /// An embedded PostgreSQL with an empty table `t (v int4)`, the capability serving it and an
    /// instance's session.
    async fn with_table() -> (tempfile::TempDir, EmbeddedPostgres, Arc<Databases>, PgHost, PgSession) {
        let (dir, pg, databases) = embedded().await;
        let caps = capabilities(Arc::clone(&databases), Mode::Serve);
        let mut session = PgSession::default();
        rows(
            session
                .call(&caps, query("CREATE TABLE t (v int4)", vec![], None))
                .await,
        );
        (dir, pg, databases, caps, session)
    }

    /// `begin-with` sends `BEGIN` and its statements as one message and `commit-with` its
    /// statements and `COMMIT`; every value reads back as a statement sent alone reads it, each
    /// statement sees what the one before did, and it is all one transaction.
    #[tokio::test(flavor = "multi_thread")]
    async fn statements_sent_with_begin_and_commit_are_one_message_and_one_transaction() {
        let (_dir, _pg, databases, caps, mut session) = with_table().await;
        let values = vec![
            PgValue::Null,
            PgValue::Bool(false),
            PgValue::Int4(i32::MIN),
            PgValue::Int8(i64::MIN),
            PgValue::Float8(f64::NAN),
            PgValue::Float8(f64::NEG_INFINITY),
            PgValue::Float8(0.1),
            PgValue::Float8(-0.0),
            PgValue::Text("it's \\ a 'quote' \\' and E'\\x41' ünïcødé; COMMIT; --".into()),
            PgValue::Json(r#"{"a": "\"q\" \\ '\u0041'", "b": [1, 2.5e300]}"#.into()),
            PgValue::Timestamp(chrono::DateTime::from_timestamp(1_765_000_000, 123_456_789).unwrap()),
            PgValue::Timestamp(chrono::DateTime::from_timestamp(-1_000_000_000, 1_000).unwrap()),
            PgValue::Bytea(vec![0, 1, 0x5c, 0x27, 0xff]),
        ];
        let echo = format!(
            "SELECT {}",
            (1..=values.len())
                .map(|i| format!("${i} AS c{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let alone = rows(session.call(&caps, query(&echo, values.clone(), None)).await);
        let xact = "SELECT pg_current_xact_id()::text AS xact, pg_backend_pid() AS pid";
        let (tx, got) = session
            .begin_with(
                &caps,
                "db".into(),
                vec![
                    Statement::new("INSERT INTO t VALUES ($1), ($2) RETURNING v", vec![1.into(), 2.into()]),
                    Statement::new("SELECT count(*)::int4 AS n FROM t", vec![]),
                    Statement::new(echo.clone(), values.clone()),
                    Statement::new(xact, vec![]),
                ],
            )
            .await
            .unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].rows, [[PgValue::Int4(1)], [PgValue::Int4(2)]]);
        assert_eq!(
            got[1].rows,
            [[PgValue::Int4(2)]],
            "a statement sees what the one before did"
        );
        // Compared as printed: NaN is not equal to itself.
        assert_eq!(
            format!("{:?}", got[2]),
            format!("{alone:?}"),
            "every value reads back as a statement sent alone reads it"
        );
        let (begun_in, pid) = (got[3].rows[0][0].clone(), got[3].rows[0][1].clone());
        let sent = last_message(&databases, &pid).await;
        assert!(sent.starts_with("BEGIN; EXECUTE conductor_"), "{sent}");
        assert_eq!(sent.matches("EXECUTE").count(), 4, "{sent}");

        let inside = rows(session.call(&caps, query(xact, vec![], Some(tx))).await);
        assert_eq!(inside.rows[0][0], begun_in, "the transaction goes on");
        let more = session
            .go_on_with(
                &caps,
                tx,
                vec![
                    Statement::new("INSERT INTO t VALUES ($1) RETURNING v + 0 AS v", vec![3.into()]),
                    Statement::new("SELECT count(*)::int4 AS n FROM t", vec![]),
                    Statement::new(xact, vec![]),
                ],
                Then::StayOpen,
            )
            .await
            .unwrap();
        assert_eq!(more[0].rows, [[PgValue::Int4(3)]]);
        assert_eq!(
            more[1].rows,
            [[PgValue::Int4(3)]],
            "a statement sees what the one before did"
        );
        assert_eq!(more[2].rows[0][0], begun_in, "run in the open transaction");
        assert!(session.has_open(), "run-all leaves the transaction open");
        let sent = last_message(&databases, &pid).await;
        assert!(
            sent.starts_with("EXECUTE conductor_") && !sent.contains("BEGIN") && !sent.contains("COMMIT"),
            "{sent}"
        );
        assert_eq!(sent.matches("EXECUTE").count(), 3, "one message: {sent}");
        assert!(
            session
                .go_on_with(&caps, tx, vec![], Then::StayOpen)
                .await
                .unwrap()
                .is_empty()
        );
        let done = session
            .go_on_with(
                &caps,
                tx,
                vec![
                    Statement::new("DELETE FROM t WHERE v = $1 RETURNING v", vec![1.into()]),
                    Statement::new(xact, vec![]),
                ],
                Then::Commit,
            )
            .await
            .unwrap();
        assert_eq!(done[0].rows, [[PgValue::Int4(1)]]);
        assert_eq!(done[1].rows[0][0], begun_in, "committed in the same transaction");
        assert!(!session.has_open());
        let sent = last_message(&databases, &pid).await;
        assert!(
            sent.starts_with("EXECUTE conductor_") && sent.ends_with("; COMMIT"),
            "{sent}"
        );
        let after = rows(
            session
                .call(&caps, query("SELECT v FROM t ORDER BY v", vec![], None))
                .await,
        );
        assert_eq!(after.rows, [[PgValue::Int4(2)], [PgValue::Int4(3)]], "committed");

        // The session prepared its statements once: sent again, nothing is prepared anew.
        let prepared = "SELECT count(*)::int4 FROM pg_prepared_statements WHERE name LIKE 'conductor%'";
        let (tx, _) = session
            .begin_with(&caps, "db".into(), vec![Statement::new(xact, vec![])])
            .await
            .unwrap();
        let held = rows(session.call(&caps, query(prepared, vec![], Some(tx))).await);
        assert_eq!(
            held.rows,
            [[PgValue::Int4(6)]],
            "six statements, each prepared once: {held:?}"
        );
        session.go_on_with(&caps, tx, vec![], Then::Commit).await.unwrap();
    }

    /// A statement that fails stops the ones after it, rolls the transaction back and is named;
    /// a value PostgreSQL's text cannot hold is refused before anything is sent; a text of two
    /// commands is refused, as it is sent alone; the connection serves on.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_failing_statement_rolls_back_what_was_sent_with_it_and_is_named() {
        let (_dir, _pg, databases, caps, mut session) = with_table().await;
        let insert = |v: i32| Statement::new("INSERT INTO t VALUES ($1)", vec![v.into()]);
        let count = async |session: &mut PgSession| {
            rows(
                session
                    .call(&caps, query("SELECT count(*)::int4 FROM t", vec![], None))
                    .await,
            )
            .rows[0][0]
                .clone()
        };

        let err = session
            .begin_with(
                &caps,
                "db".into(),
                vec![insert(1), Statement::new("SELECT 1 / $1", vec![0.into()]), insert(2)],
            )
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&err), Some("22012"), "{err}");
        assert!(err.to_string().starts_with("database: statement 2 of 3: "), "{err}");
        assert!(!session.has_open());
        assert_eq!(count(&mut session).await, PgValue::Int4(0), "rolled back");

        let (tx, _) = session.begin_with(&caps, "db".into(), vec![insert(1)]).await.unwrap();
        let err = session
            .go_on_with(
                &caps,
                tx,
                vec![insert(2), Statement::new("SELECT 1 / 0", vec![])],
                Then::Commit,
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("statement 2 of 2: "), "{err}");
        assert!(!session.has_open());
        assert_eq!(
            count(&mut session).await,
            PgValue::Int4(0),
            "the whole transaction rolled back"
        );

        let (tx, _) = session.begin_with(&caps, "db".into(), vec![insert(1)]).await.unwrap();
        let err = session
            .go_on_with(
                &caps,
                tx,
                vec![insert(2), Statement::new("SELECT 1 / $1", vec![0.into()]), insert(3)],
                Then::StayOpen,
            )
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&err), Some("22012"), "{err}");
        assert!(err.to_string().starts_with("database: statement 2 of 3: "), "{err}");
        assert!(!session.has_open(), "rolled back and ended");
        let err = session
            .go_on_with(&caps, tx, vec![insert(4)], Then::StayOpen)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no open transaction"), "{err}");
        assert_eq!(
            count(&mut session).await,
            PgValue::Int4(0),
            "the whole transaction rolled back"
        );

        let nul = Statement::new("INSERT INTO t VALUES (length($1))", vec!["a\0b".into()]);
        let err = session
            .begin_with(&caps, "db".into(), vec![insert(1), nul])
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("statement 2 of 2: parameter $1: contains a NUL"),
            "{err}"
        );
        let two = Statement::new("INSERT INTO t VALUES (3); DROP TABLE t", vec![]);
        let err = session.begin_with(&caps, "db".into(), vec![two]).await.unwrap_err();
        assert!(err.to_string().contains("statement 1 of 1: "), "{err}");
        assert_eq!(
            count(&mut session).await,
            PgValue::Int4(0),
            "nothing ran, the table stands"
        );

        // A column the capability cannot carry: begun, the call fails and rolls back; committed,
        // it fails after the writes, and says so.
        let interval = Statement::new("SELECT interval '1 day' AS i", vec![]);
        let err = session
            .begin_with(&caps, "db".into(), vec![insert(1), interval.clone()])
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("statement 2 of 2: column \"i\" has type INTERVAL"),
            "{err}"
        );
        assert_eq!(count(&mut session).await, PgValue::Int4(0));
        let (tx, _) = session.begin_with(&caps, "db".into(), vec![insert(1)]).await.unwrap();
        let err = session
            .go_on_with(&caps, tx, vec![interval], Then::Commit)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("committed: statement 1 of 1: "), "{err}");
        assert_eq!(count(&mut session).await, PgValue::Int4(1), "committed");
        rows(session.call(&caps, query("DELETE FROM t", vec![], None)).await);

        // A statement deallocated behind the host's back fails once, and is prepared again.
        let (tx, _) = session.begin_with(&caps, "db".into(), vec![insert(5)]).await.unwrap();
        session.go_on_with(&caps, tx, vec![], Then::Commit).await.unwrap();
        let names = rows(
            session
                .call(
                    &caps,
                    query(
                        "SELECT name FROM pg_prepared_statements WHERE name LIKE 'conductor%'",
                        vec![],
                        None,
                    ),
                )
                .await,
        );
        for name in names.rows {
            let PgValue::Text(name) = &name[0] else { panic!() };
            rows(
                session
                    .call(&caps, query(&format!("DEALLOCATE {name}"), vec![], None))
                    .await,
            );
        }
        let err = session
            .begin_with(&caps, "db".into(), vec![insert(6)])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&err), Some("26000"), "{err}");
        let (tx, _) = session.begin_with(&caps, "db".into(), vec![insert(6)]).await.unwrap();
        session.go_on_with(&caps, tx, vec![], Then::Commit).await.unwrap();
        assert_eq!(count(&mut session).await, PgValue::Int4(2));

        // Read-only mode: the transaction is read-only.
        let read_only = capabilities(Arc::clone(&databases), Mode::ReadOnly);
        let err = session
            .begin_with(&read_only, "db".into(), vec![insert(7)])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&err), Some("25006"), "{err}");
    }

    /// Past the statements one process names, statements are sent one at a time, with the same
    /// results.
    #[tokio::test(flavor = "multi_thread")]
    async fn statements_past_the_named_ones_are_sent_one_at_a_time() {
        let (_dir, _pg, databases) = embedded().await;
        let caps = capabilities(Arc::clone(&databases), Mode::Serve);
        let mut session = PgSession::default();
        let pid = "SELECT pg_backend_pid() AS pid";
        for n in 0..pipeline::MOST_NAMED {
            let (tx, got) = session
                .begin_with(
                    &caps,
                    "db".into(),
                    vec![Statement::new(format!("SELECT {n}::int4"), vec![])],
                )
                .await
                .unwrap();
            assert_eq!(got[0].rows, [[PgValue::Int4(n as i32)]]);
            session.go_on_with(&caps, tx, vec![], Then::Commit).await.unwrap();
        }
        let (tx, got) = session
            .begin_with(
                &caps,
                "db".into(),
                vec![
                    Statement::new(pid, vec![]),
                    Statement::new("SELECT $1::int8 + 1", vec![41i64.into()]),
                ],
            )
            .await
            .unwrap();
        assert_eq!(got[1].rows, [[PgValue::Int8(42)]]);
        let sent = last_message(&databases, &got[0].rows[0][0]).await;
        assert_eq!(sent, "SELECT $1::int8 + 1", "sent alone");
        session.go_on_with(&caps, tx, vec![], Then::Commit).await.unwrap();
    }
}
