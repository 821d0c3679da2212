//! A PostgreSQL database as a plugin reaches it through the host's `pg` capability
//! ([`Host::pg`]): statements with typed parameters, transactions (dropped = rolled back) with
//! advisory locks, and LISTEN.

use super::Host;
use crate::Error;
use crate::calls::unexpected_pg as unexpected;
use crate::pg::{LockKey, PgReply, PgRequest, PgRows, PgValue, Statement, TransactionId};

/// A database the plugin may use (`databases` in its `conductor.toml` table).
pub struct Database<'h> {
    host: &'h Host,
    name: String,
}

impl<'h> Database<'h> {
    pub(super) fn new(host: &'h Host, name: &str) -> Self {
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

    /// Begins a transaction and runs `statements` in it, in order, in one round trip to the
    /// database: the transaction and each statement's rows. Each statement runs once the one
    /// before has finished, so a read that follows a statement taking locks sees what was committed
    /// before they were granted. If one fails, those after it do not run, the transaction is
    /// rolled back, and the error names the statement (`statement 2 of 3: …`). Each statement must
    /// be one `PREPARE` accepts (`SELECT`, `INSERT`, `UPDATE`, `DELETE`, `MERGE`, `VALUES`), its
    /// values in parameters. Needs a host of contract 0.6.3 (a native library's SDK sends them one
    /// call at a time).
    ///
    /// ```no_run
    /// # use conductor_plugin_sdk::{Error, Host, pg::Statement};
    /// # fn example(host: &Host) -> Result<(), Error> {
    /// let (tx, rows) = host.pg("maestro").begin_with(&[
    ///     Statement::new("SELECT pg_advisory_xact_lock($1)", vec![7i64.into()]),
    ///     Statement::new("SELECT id FROM events WHERE reconciled_date IS NULL", vec![]),
    /// ])?;
    /// let events = &rows[1];
    /// tx.commit_with(&[Statement::new("UPDATE events SET reconciled_date = now()", vec![])])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn begin_with(&self, statements: &[Statement]) -> Result<(Transaction<'h>, Vec<PgRows>), Error> {
        let (id, rows) = self.host.pg_begin_with(&self.name, statements.to_vec())?;
        let tx = Transaction {
            host: self.host,
            database: self.name.clone(),
            id,
            open: true,
        };
        Ok((tx, rows))
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

    /// Runs `statements` in order in the transaction, in one round trip to the database: each
    /// statement's rows. Each runs once the one before has finished, as in
    /// [`Database::begin_with`]. If one fails, those after it do not run, the transaction is
    /// rolled back and ended (a later call on it fails), and the error names the statement. Needs
    /// a host of contract 0.6.4 (a native library's SDK sends them one call at a time).
    pub fn run_all(&self, statements: &[Statement]) -> Result<Vec<PgRows>, Error> {
        self.host.pg_run_all(self.id, statements.to_vec())
    }

    pub fn commit(mut self) -> Result<(), Error> {
        self.open = false;
        self.host.pg_call(PgRequest::Commit { transaction: self.id }).map(drop)
    }

    /// Runs `statements` in order and commits, in one round trip to the database: each
    /// statement's rows. If one fails, those after it do not run and the transaction is rolled
    /// back; the error names the statement. Needs a host of contract 0.6.3.
    pub fn commit_with(mut self, statements: &[Statement]) -> Result<Vec<PgRows>, Error> {
        self.open = false;
        self.host.pg_commit_with(self.id, statements.to_vec())
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.host.pg_call(PgRequest::Rollback { transaction: self.id });
        }
    }
}
