//! The `pg` capability for one plugin instance: statements with typed parameters, transactions
//! (each on a pooled connection of its own, rolled back if the call that began it returns with it
//! still open), Maestro's two-`int4` advisory locks, and LISTEN registrations.

use std::collections::HashMap;

use conductor_plugin_sdk::pg::{PgReply, PgRequest, TransactionId};
use conductor_plugin_sdk::{PgError, PgRows, PgValue};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Column, Postgres, Row, TypeInfo, ValueRef};

use super::capabilities::Capabilities;
use crate::database::postgres::advisory_keys;

/// Transactions one instance may hold open at once (each pins a pooled connection).
const MAX_OPEN_TRANSACTIONS: usize = 8;

struct OpenTransaction {
    database: String,
    tx: sqlx::Transaction<'static, Postgres>,
}

/// The `pg` state of one plugin instance: its open transactions.
#[derive(Default)]
pub struct PgSession {
    open: HashMap<TransactionId, OpenTransaction>,
    next: TransactionId,
}

fn sql_error(e: sqlx::Error) -> PgError {
    match &e {
        sqlx::Error::Database(db) => PgError {
            code: db.code().map(|c| c.into_owned()),
            message: db.message().to_owned(),
        },
        _ => PgError::new(e.to_string()),
    }
}

fn bind(sql: String, params: Vec<PgValue>) -> sqlx::query::Query<'static, Postgres, PgArguments> {
    // The plugin's statement, with its values bound as parameters, never spliced in.
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for value in params {
        query = match value {
            PgValue::Null => query.bind(None::<String>),
            PgValue::Bool(b) => query.bind(b),
            PgValue::Int4(i) => query.bind(i),
            PgValue::Int8(i) => query.bind(i),
            PgValue::Float8(f) => query.bind(f),
            PgValue::Text(s) => query.bind(s),
            // Sent as jsonb, which `json` columns take by assignment cast.
            PgValue::Json(s) => match serde_json::from_str::<serde_json::Value>(&s) {
                Ok(v) => query.bind(sqlx::types::Json(v)),
                Err(_) => query.bind(s),
            },
            PgValue::Timestamp(t) => query.bind(t),
            PgValue::Bytea(b) => query.bind(b),
        };
    }
    query
}

fn column_value(row: &PgRow, i: usize) -> Result<PgValue, PgError> {
    let raw = row.try_get_raw(i).map_err(sql_error)?;
    if raw.is_null() {
        return Ok(PgValue::Null);
    }
    let type_name = raw.type_info().name().to_owned();
    let get_err = |e: sqlx::Error| PgError::new(format!("column {i} ({type_name}): {e}"));
    Ok(match type_name.as_str() {
        "BOOL" => PgValue::Bool(row.try_get(i).map_err(get_err)?),
        "INT2" => PgValue::Int4(i32::from(row.try_get::<i16, _>(i).map_err(get_err)?)),
        "INT4" => PgValue::Int4(row.try_get(i).map_err(get_err)?),
        "INT8" => PgValue::Int8(row.try_get(i).map_err(get_err)?),
        "FLOAT4" => PgValue::Float8(f64::from(row.try_get::<f32, _>(i).map_err(get_err)?)),
        "FLOAT8" => PgValue::Float8(row.try_get(i).map_err(get_err)?),
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" => PgValue::Text(row.try_get(i).map_err(get_err)?),
        "JSON" | "JSONB" => {
            let v: sqlx::types::Json<Box<serde_json::value::RawValue>> = row.try_get(i).map_err(get_err)?;
            PgValue::Json(v.0.get().to_owned())
        }
        "TIMESTAMPTZ" => PgValue::Timestamp(row.try_get(i).map_err(get_err)?),
        "TIMESTAMP" => PgValue::Timestamp(row.try_get::<chrono::NaiveDateTime, _>(i).map_err(get_err)?.and_utc()),
        "BYTEA" => PgValue::Bytea(row.try_get(i).map_err(get_err)?),
        "VOID" => PgValue::Null,
        other => {
            let name = row.columns()[i].name();
            return Err(PgError::new(format!(
                "column {name:?} has type {other}, which the pg capability does not carry; cast it to text"
            )));
        }
    })
}

fn rows(result: Vec<PgRow>) -> Result<PgRows, PgError> {
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

impl PgSession {
    /// Answers one `pg` call of the instance.
    pub async fn call(&mut self, caps: &Capabilities, request: PgRequest) -> Result<PgReply, PgError> {
        match request {
            PgRequest::Query {
                database,
                transaction,
                sql,
                params,
            } => {
                let query = bind(sql, params);
                let result = match transaction {
                    Some(id) => query.fetch_all(&mut *self.transaction(id, &database)?.tx).await,
                    None => query.fetch_all(caps.pg_pool(&database)?).await,
                };
                rows(result.map_err(sql_error)?).map(PgReply::Rows)
            }
            PgRequest::Execute {
                database,
                transaction,
                sql,
                params,
            } => {
                let query = bind(sql, params);
                let result = match transaction {
                    Some(id) => query.execute(&mut *self.transaction(id, &database)?.tx).await,
                    None => query.execute(caps.pg_pool(&database)?).await,
                };
                Ok(PgReply::Affected(result.map_err(sql_error)?.rows_affected()))
            }
            PgRequest::Begin { database } => {
                if self.open.len() >= MAX_OPEN_TRANSACTIONS {
                    return Err(PgError::new(format!(
                        "too many open transactions (at most {MAX_OPEN_TRANSACTIONS} per instance)"
                    )));
                }
                let tx = caps.pg_pool(&database)?.begin().await.map_err(sql_error)?;
                self.next += 1;
                self.open.insert(self.next, OpenTransaction { database, tx });
                Ok(PgReply::Begun(self.next))
            }
            PgRequest::Commit { transaction } => {
                let open = self.take(transaction)?;
                open.tx.commit().await.map_err(sql_error)?;
                Ok(PgReply::Done)
            }
            PgRequest::Rollback { transaction } => {
                let open = self.take(transaction)?;
                open.tx.rollback().await.map_err(sql_error)?;
                Ok(PgReply::Done)
            }
            PgRequest::AdvisoryLock {
                transaction,
                key,
                lock_type,
                wait,
            } => {
                let (k1, k2) = advisory_keys(&key, &lock_type);
                let open = self.open.get_mut(&transaction).ok_or_else(|| unknown(transaction))?;
                if wait {
                    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
                        .bind(k1)
                        .bind(k2)
                        .execute(&mut *open.tx)
                        .await
                        .map_err(sql_error)?;
                    Ok(PgReply::Locked(true))
                } else {
                    let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1, $2)")
                        .bind(k1)
                        .bind(k2)
                        .fetch_one(&mut *open.tx)
                        .await
                        .map_err(sql_error)?;
                    Ok(PgReply::Locked(taken))
                }
            }
            PgRequest::Listen { database, channel } => {
                caps.pg_listen(&database, &channel).await?;
                Ok(PgReply::Done)
            }
        }
    }

    fn transaction(&mut self, id: TransactionId, database: &str) -> Result<&mut OpenTransaction, PgError> {
        let open = self.open.get_mut(&id).ok_or_else(|| unknown(id))?;
        if open.database != database {
            return Err(PgError::new(format!(
                "transaction {id} belongs to database {:?}, not {database:?}",
                open.database
            )));
        }
        Ok(open)
    }

    fn take(&mut self, id: TransactionId) -> Result<OpenTransaction, PgError> {
        self.open.remove(&id).ok_or_else(|| unknown(id))
    }

    /// Rolls back what the call left open (a plugin that trapped or forgot to commit), so no
    /// lock or connection outlives the call.
    pub async fn end_call(&mut self, plugin: &str) {
        for (id, open) in self.open.drain() {
            tracing::warn!(plugin, transaction = id, database = %open.database, "a plugin call returned with a transaction open; rolling it back");
            if let Err(e) = open.tx.rollback().await {
                tracing::warn!(plugin, error = %e, "rollback failed; the connection is discarded");
            }
        }
    }
}

fn unknown(id: TransactionId) -> PgError {
    PgError::new(format!(
        "no open transaction {id} (committed, rolled back, or not this instance's)"
    ))
}
