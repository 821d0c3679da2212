//! `conductor:plugin/pg`: queries, statements, transactions (a resource whose handle is its id
//! in the instance's `PgSession`), advisory locks and LISTEN.

use conductor_plugin_sdk::pg::{PgReply, PgRequest};
use wasmtime::component::Resource;

use crate::plugins::wasm::bindings::conductor::plugin::{pg, types};
use crate::plugins::wasm::bindings::{TransactionHandle, convert};
use crate::plugins::wasm::state::{State, wit_error};

fn unexpected_pg(reply: PgReply) -> types::Error {
    types::Error::Internal(format!("unexpected pg reply {reply:?}"))
}

fn transaction_id(handle: &Resource<TransactionHandle>) -> u64 {
    u64::from(handle.rep())
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
            PgReply::Begun(id) => {
                let rep = u32::try_from(id).map_err(|_| types::Error::Internal("transaction ids ran out".into()))?;
                Ok(Resource::new_own(rep))
            }
            other => Err(unexpected_pg(other)),
        }
    }

    async fn listen(&mut self, database: String, channel: String) -> Result<(), types::Error> {
        self.pg(PgRequest::Listen { database, channel })
            .await
            .map(drop)
            .map_err(wit_error)
    }
}
