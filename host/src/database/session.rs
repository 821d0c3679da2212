//! A pooled connection as the `pg` capability holds it: the connection, and the statements this
//! process has prepared in its server session (`pipeline`), once known.

use std::collections::HashSet;
use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, Postgres};

pub struct Session {
    conn: PoolConnection<Postgres>,
    /// The numbers of the statements prepared in the session (`conductor_<n>`); `None` until
    /// asked (a connection fresh from the pool may have met them in an earlier use).
    prepared: Option<HashSet<u32>>,
}

impl Session {
    pub fn new(conn: PoolConnection<Postgres>) -> Self {
        Self { conn, prepared: None }
    }

    pub fn prepared(&self) -> Option<&HashSet<u32>> {
        self.prepared.as_ref()
    }

    /// What the session holds, as just read from it.
    pub fn know(&mut self, prepared: HashSet<u32>) {
        self.prepared = Some(prepared);
    }

    /// `number` was prepared in the session.
    pub fn add(&mut self, number: u32) {
        if let Some(prepared) = &mut self.prepared {
            prepared.insert(number);
        }
    }

    /// What the session holds is no longer known (a prepared statement was missing).
    pub fn forget(&mut self) {
        self.prepared = None;
    }

    /// Closes the connection when it is dropped, instead of giving it back to the pool.
    pub fn close_on_drop(&mut self) {
        self.conn.close_on_drop();
    }
}

impl Deref for Session {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.conn
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.conn
    }
}
