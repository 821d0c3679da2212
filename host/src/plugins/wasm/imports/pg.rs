//! `conductor:plugin/pg`: queries, statements, transactions (a resource whose handle is its id
//! in the instance's `PgSession`), advisory locks and LISTEN.

use conductor_plugin_sdk::pg::{PgReply, PgRequest};
use wasmtime::component::Resource;

use crate::plugins::capabilities::pg::Then;
use crate::plugins::wasm::bindings::conductor::plugin::{pg, types};
use crate::plugins::wasm::bindings::{TransactionHandle, convert};
use crate::plugins::wasm::state::{State, wit_error};

fn unexpected_pg(reply: PgReply) -> types::Error {
    types::Error::Internal(format!("unexpected pg reply {reply:?}"))
}

/// The handle of the session's transaction `id`; none past `u32`'s ids.
fn handle(id: u64) -> Option<Resource<TransactionHandle>> {
    u32::try_from(id).ok().map(Resource::new_own)
}

fn ids_ran_out() -> types::Error {
    types::Error::Internal("transaction ids ran out".into())
}

fn transaction_id(handle: &Resource<TransactionHandle>) -> u64 {
    u64::from(handle.rep())
}

impl State {
    /// `statements` in the open transaction `this`, then its `COMMIT` or not (`then`).
    async fn go_on_with(
        &mut self,
        this: &Resource<TransactionHandle>,
        statements: Vec<pg::Statement>,
        then: Then,
    ) -> Result<Vec<pg::Rows>, types::Error> {
        let caps = self.caps();
        let statements = statements.into_iter().map(convert::from_wit_statement).collect();
        let all = self
            .pg
            .go_on_with(caps.pg(), transaction_id(this), statements, then)
            .await
            .map_err(wit_error)?;
        Ok(all.into_iter().map(convert::to_wit_rows).collect())
    }
}

impl pg::HostTransaction for State {
    async fn query(
        &mut self,
        this: Resource<TransactionHandle>,
        sql: String,
        params: Vec<pg::Value>,
    ) -> Result<pg::Rows, types::Error> {
        let request = PgRequest::Query {
            database: String::new(),
            transaction: Some(transaction_id(&this)),
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Rows(rows) => Ok(convert::to_wit_rows(rows)),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn execute(
        &mut self,
        this: Resource<TransactionHandle>,
        sql: String,
        params: Vec<pg::Value>,
    ) -> Result<u64, types::Error> {
        let request = PgRequest::Execute {
            database: String::new(),
            transaction: Some(transaction_id(&this)),
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Affected(n) => Ok(n),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn advisory_lock(
        &mut self,
        this: Resource<TransactionHandle>,
        key: pg::LockKey,
        wait: bool,
    ) -> Result<bool, types::Error> {
        let request = PgRequest::AdvisoryLock {
            transaction: transaction_id(&this),
            key: convert::from_wit_lock_key(key),
            wait,
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Locked(taken) => Ok(taken),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn commit(&mut self, this: Resource<TransactionHandle>) -> Result<(), types::Error> {
        let transaction = transaction_id(&this);
        self.pg(PgRequest::Commit { transaction })
            .await
            .map(drop)
            .map_err(wit_error)
    }

    async fn commit_with(
        &mut self,
        this: Resource<TransactionHandle>,
        statements: Vec<pg::Statement>,
    ) -> Result<Vec<pg::Rows>, types::Error> {
        self.go_on_with(&this, statements, Then::Commit).await
    }

    async fn run_all(
        &mut self,
        this: Resource<TransactionHandle>,
        statements: Vec<pg::Statement>,
    ) -> Result<Vec<pg::Rows>, types::Error> {
        self.go_on_with(&this, statements, Then::StayOpen).await
    }

    async fn drop(&mut self, this: Resource<TransactionHandle>) -> wasmtime::Result<()> {
        // Committed transactions are gone from the session already; any other is rolled back.
        let transaction = transaction_id(&this);
        let _ = self.pg(PgRequest::Rollback { transaction }).await;
        Ok(())
    }
}

impl pg::Host for State {
    async fn query(&mut self, database: String, sql: String, params: Vec<pg::Value>) -> Result<pg::Rows, types::Error> {
        let request = PgRequest::Query {
            database,
            transaction: None,
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Rows(rows) => Ok(convert::to_wit_rows(rows)),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn execute(&mut self, database: String, sql: String, params: Vec<pg::Value>) -> Result<u64, types::Error> {
        let request = PgRequest::Execute {
            database,
            transaction: None,
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Affected(n) => Ok(n),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn begin(&mut self, database: String) -> Result<Resource<TransactionHandle>, types::Error> {
        match self.pg(PgRequest::Begin { database }).await.map_err(wit_error)? {
            PgReply::Begun(id) => handle(id).ok_or_else(ids_ran_out),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn begin_with(
        &mut self,
        database: String,
        statements: Vec<pg::Statement>,
    ) -> Result<(Resource<TransactionHandle>, Vec<pg::Rows>), types::Error> {
        let caps = self.caps();
        let statements = statements.into_iter().map(convert::from_wit_statement).collect();
        let (id, all) = self
            .pg
            .begin_with(caps.pg(), database, statements)
            .await
            .map_err(wit_error)?;
        let handle = handle(id).ok_or_else(ids_ran_out)?;
        Ok((handle, all.into_iter().map(convert::to_wit_rows).collect()))
    }

    async fn listen(&mut self, database: String, channel: String) -> Result<(), types::Error> {
        self.pg(PgRequest::Listen { database, channel })
            .await
            .map(drop)
            .map_err(wit_error)
    }
}
