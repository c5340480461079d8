//! The connection pool's connections: a PostgreSQL client with its session settings applied and
//! a cache of the statements it has prepared, so each hot-path call is one round trip (bind and
//! execute) instead of two (prepare, then bind and execute).

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

use postgres::{Client, Config, Statement};

/// Opens the pool's connections and runs the session settings on each.
#[derive(Debug)]
pub(super) struct Manager {
    pub(super) config: Config,
    /// The store's schema: first on every session's search path (`sql/session.sql`).
    pub(super) schema: String,
    /// Every session's `lock_timeout`, in milliseconds.
    pub(super) lock_timeout_ms: String,
}

/// One pooled connection: the client and the statements prepared on it.
pub(super) struct Session {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Session {
    /// The statement for `sql`, prepared on this connection the first time it is asked for.
    pub(super) fn prepared(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }
}

impl Deref for Session {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// A driver error that says everything in its own text: the pool keeps only the text of the
/// last failed connection, and the driver's own is a bare "db error" (the server's reason —
/// too many clients, starting up — is in its causes).
#[derive(Debug)]
pub(super) struct ConnectError(postgres::Error);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::error::chain(&self.0))
    }
}

impl std::error::Error for ConnectError {}

impl r2d2::ManageConnection for Manager {
    type Connection = Session;
    type Error = ConnectError;

    fn connect(&self) -> Result<Session, ConnectError> {
        let mut client = super::tls::connect(&self.config).map_err(ConnectError)?;
        client
            .execute(super::sql::SESSION, &[&self.schema, &self.lock_timeout_ms])
            .map_err(ConnectError)?;
        Ok(Session {
            client,
            statements: HashMap::new(),
        })
    }

    fn is_valid(&self, session: &mut Session) -> Result<(), ConnectError> {
        session
            .client
            .simple_query("")
            .map(|_| ())
            .map_err(ConnectError)
    }

    fn has_broken(&self, session: &mut Session) -> bool {
        session.client.is_closed()
    }
}
