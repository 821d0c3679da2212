//! PostgreSQL through the host's `pg` capability: statements with typed parameters, transactions
//! (dropped = rolled back) with advisory locks, and LISTEN.
//!
//! ```no_run
//! # use conductor_plugin_sdk::{Error, Host, pg::LockKey};
//! # fn example(host: &Host, event_id: &str) -> Result<(), Error> {
//! let db = host.pg("maestro");
//! let tx = db.begin()?;
//! if tx.try_advisory_lock(LockKey::Pair(7, 42))? {
//!     let rows = tx.query("SELECT source_id FROM events WHERE id = $1", &[event_id.into()])?;
//!     tx.commit()?;
//! } // dropped without commit: rolled back
//! # Ok(())
//! # }
//! ```

use serde::{Deserialize, Serialize};

use crate::host::Host;
use crate::{DatabaseError, Error, Timestamp};

/// A parameter or column value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PgValue {
    /// Sent as a text NULL: cast it in SQL where another type is needed.
    Null,
    Bool(bool),
    Int4(i32),
    Int8(i64),
    Float8(f64),
    Text(String),
    /// JSON text (`json`/`jsonb` columns).
    Json(String),
    Timestamp(Timestamp),
    Bytea(#[serde(with = "serde_bytes")] Vec<u8>),
}

macro_rules! pg_value_from {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for PgValue {
            fn from(v: $t) -> Self {
                Self::$v(v.into())
            }
        }
    )*};
}

pg_value_from!(bool => Bool, i32 => Int4, i64 => Int8, f64 => Float8, String => Text, &str => Text, Timestamp => Timestamp);

impl From<&String> for PgValue {
    fn from(v: &String) -> Self {
        Self::Text(v.clone())
    }
}

impl From<&serde_json::Value> for PgValue {
    fn from(v: &serde_json::Value) -> Self {
        Self::Json(v.to_string())
    }
}

impl<T: Into<PgValue>> From<Option<T>> for PgValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// A NOTIFY on a channel the plugin listens on ([`Database::listen`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    pub database: String,
    pub channel: String,
    pub payload: String,
}

/// A LISTEN was (re-)established: notifications sent while it was down are lost, so catch up
/// from the tables. `reconnected` is false the first time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listening {
    pub database: String,
    pub channel: String,
    pub reconnected: bool,
}

/// A PostgreSQL advisory-lock key. The two-`int4` form and the `bigint` form are different lock
/// spaces: use the one the other holders of the lock use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockKey {
    Pair(i32, i32),
    Big(i64),
}

fn row_error(message: String) -> Error {
    Error::Database(DatabaseError::new(message))
}

/// What a query returned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PgRows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<PgValue>>,
}

impl PgRows {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = PgRow<'_>> {
        self.rows.iter().map(|values| PgRow {
            columns: &self.columns,
            values,
        })
    }

    /// The first row, if any.
    pub fn first(&self) -> Option<PgRow<'_>> {
        self.iter().next()
    }
}

/// One row, read by column name.
#[derive(Debug, Clone, Copy)]
pub struct PgRow<'a> {
    columns: &'a [String],
    values: &'a [PgValue],
}

impl<'a> PgRow<'a> {
    pub fn get(&self, column: &str) -> Result<&'a PgValue, Error> {
        self.columns
            .iter()
            .position(|c| c == column)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| row_error(format!("no column {column:?} in the result")))
    }

    fn typed<T>(&self, column: &str, want: &str, f: impl Fn(&'a PgValue) -> Option<T>) -> Result<Option<T>, Error> {
        match self.get(column)? {
            PgValue::Null => Ok(None),
            v => f(v)
                .map(Some)
                .ok_or_else(|| row_error(format!("column {column:?} is {v:?}, not {want}"))),
        }
    }

    /// A `text` (or JSON) column.
    pub fn text(&self, column: &str) -> Result<Option<&'a str>, Error> {
        self.typed(column, "text", |v| match v {
            PgValue::Text(s) | PgValue::Json(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// An integer column (`int2`, `int4` or `int8`).
    pub fn int(&self, column: &str) -> Result<Option<i64>, Error> {
        self.typed(column, "an integer", |v| match v {
            PgValue::Int4(i) => Some(i64::from(*i)),
            PgValue::Int8(i) => Some(*i),
            _ => None,
        })
    }

    pub fn bool(&self, column: &str) -> Result<Option<bool>, Error> {
        self.typed(column, "a boolean", |v| match v {
            PgValue::Bool(b) => Some(*b),
            _ => None,
        })
    }

    pub fn timestamp(&self, column: &str) -> Result<Option<Timestamp>, Error> {
        self.typed(column, "a timestamp", |v| match v {
            PgValue::Timestamp(t) => Some(*t),
            _ => None,
        })
    }

    /// A `json`/`jsonb` column (or JSON text), parsed.
    pub fn json(&self, column: &str) -> Result<Option<serde_json::Value>, Error> {
        match self.text(column)? {
            None => Ok(None),
            Some(s) => serde_json::from_str(s)
                .map(Some)
                .map_err(|e| row_error(format!("column {column:?} is not JSON: {e}"))),
        }
    }
}

/// A transaction handle, as the host knows it.
pub type TransactionId = u64;

/// One `pg` call, as it crosses to the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PgRequest {
    Query {
        database: String,
        transaction: Option<TransactionId>,
        sql: String,
        params: Vec<PgValue>,
    },
    Execute {
        database: String,
        transaction: Option<TransactionId>,
        sql: String,
        params: Vec<PgValue>,
    },
    Begin {
        database: String,
    },
    Commit {
        transaction: TransactionId,
    },
    Rollback {
        transaction: TransactionId,
    },
    AdvisoryLock {
        transaction: TransactionId,
        key: LockKey,
        wait: bool,
    },
    Listen {
        database: String,
        channel: String,
    },
}

/// The host's answer to a [`PgRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PgReply {
    Rows(PgRows),
    Affected(u64),
    Begun(TransactionId),
    Locked(bool),
    Done,
}

fn unexpected(reply: PgReply) -> Error {
    Error::Internal(format!("the host answered a pg call with {reply:?}"))
}

/// A database the plugin may use (`databases` in its `conductor.toml` table).
pub struct Database<'h> {
    host: &'h Host,
    name: String,
}

impl<'h> Database<'h> {
    pub(crate) fn new(host: &'h Host, name: &str) -> Self {
        Self {
            host,
            name: name.to_owned(),
        }
    }

    /// Runs a statement in autocommit and returns its rows.
    pub fn query(&self, sql: &str, params: &[PgValue]) -> Result<PgRows, Error> {
        query(self.host, &self.name, None, sql, params)
    }

    /// Runs a statement in autocommit and returns how many rows it changed.
    pub fn execute(&self, sql: &str, params: &[PgValue]) -> Result<u64, Error> {
        execute(self.host, &self.name, None, sql, params)
    }

    /// Begins a transaction on a connection of its own; dropping it uncommitted rolls it back.
    pub fn begin(&self) -> Result<Transaction<'h>, Error> {
        match self.host.pg_call(PgRequest::Begin {
            database: self.name.clone(),
        })? {
            PgReply::Begun(id) => Ok(Transaction {
                host: self.host,
                database: self.name.clone(),
                id,
                open: true,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// LISTENs on `channel`: notifications arrive as [`crate::HostEvent::Notification`], and each
    /// (re)connect as [`crate::HostEvent::Listening`]. Call it from [`crate::Plugin::start`].
    pub fn listen(&self, channel: &str) -> Result<(), Error> {
        self.host
            .pg_call(PgRequest::Listen {
                database: self.name.clone(),
                channel: channel.to_owned(),
            })
            .map(drop)
    }
}

fn query(
    host: &Host,
    database: &str,
    tx: Option<TransactionId>,
    sql: &str,
    params: &[PgValue],
) -> Result<PgRows, Error> {
    match host.pg_call(PgRequest::Query {
        database: database.to_owned(),
        transaction: tx,
        sql: sql.to_owned(),
        params: params.to_vec(),
    })? {
        PgReply::Rows(rows) => Ok(rows),
        other => Err(unexpected(other)),
    }
}

fn execute(
    host: &Host,
    database: &str,
    tx: Option<TransactionId>,
    sql: &str,
    params: &[PgValue],
) -> Result<u64, Error> {
    match host.pg_call(PgRequest::Execute {
        database: database.to_owned(),
        transaction: tx,
        sql: sql.to_owned(),
        params: params.to_vec(),
    })? {
        PgReply::Affected(n) => Ok(n),
        other => Err(unexpected(other)),
    }
}

/// An open transaction. Dropped without [`Transaction::commit`], it is rolled back.
pub struct Transaction<'h> {
    host: &'h Host,
    database: String,
    id: TransactionId,
    open: bool,
}

impl Transaction<'_> {
    pub fn query(&self, sql: &str, params: &[PgValue]) -> Result<PgRows, Error> {
        query(self.host, &self.database, Some(self.id), sql, params)
    }

    pub fn execute(&self, sql: &str, params: &[PgValue]) -> Result<u64, Error> {
        execute(self.host, &self.database, Some(self.id), sql, params)
    }

    fn lock(&self, key: LockKey, wait: bool) -> Result<bool, Error> {
        match self.host.pg_call(PgRequest::AdvisoryLock {
            transaction: self.id,
            key,
            wait,
        })? {
            PgReply::Locked(taken) => Ok(taken),
            other => Err(unexpected(other)),
        }
    }

    /// Takes the transaction-scoped advisory lock `key` if it is free (`pg_try_advisory_xact_lock`);
    /// held until the transaction ends.
    pub fn try_advisory_lock(&self, key: LockKey) -> Result<bool, Error> {
        self.lock(key, false)
    }

    /// Waits for the transaction-scoped advisory lock `key` (`pg_advisory_xact_lock`, bounded by
    /// the database's `statement_timeout`); held until the transaction ends.
    pub fn advisory_lock(&self, key: LockKey) -> Result<(), Error> {
        self.lock(key, true).map(drop)
    }

    pub fn commit(mut self) -> Result<(), Error> {
        self.open = false;
        self.host.pg_call(PgRequest::Commit { transaction: self.id }).map(drop)
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.host.pg_call(PgRequest::Rollback { transaction: self.id });
        }
    }
}
