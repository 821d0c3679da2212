//! PostgreSQL's values, rows and lock keys as a plugin sees them, and the `pg` calls as they cross
//! to the host. The calls themselves are [`Host::pg`](crate::Host::pg)'s
//! [`Database`](crate::Database) and [`Transaction`](crate::Transaction):
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
        // Written straight into a buffer: `to_string` (Display) goes through a formatter, write
        // by write.
        Self::Json(serde_json::to_string(v).expect("a JSON value serializes: its map keys are strings"))
    }
}

impl<T: Into<PgValue>> From<Option<T>> for PgValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// A statement and its parameters, for the calls that send several at once
/// ([`Database::begin_with`](crate::Database::begin_with),
/// [`Transaction::run_all`](crate::Transaction::run_all),
/// [`Transaction::commit_with`](crate::Transaction::commit_with)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    pub sql: String,
    pub params: Vec<PgValue>,
}

impl Statement {
    pub fn new(sql: impl Into<String>, params: Vec<PgValue>) -> Self {
        Self {
            sql: sql.into(),
            params,
        }
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
