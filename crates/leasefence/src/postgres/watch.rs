//! Instant wake-up on PostgreSQL: a connection of the watch's own that `LISTEN`s on the
//! channel `leasefence_jobs`; enqueue, retry and resume `NOTIFY` it with their schema as the
//! payload, delivered when their transaction commits.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator as _;
use postgres::{Client, Config};

use super::sql;
use crate::deadline::Deadline;
use crate::error::{BackendError, Error, Result};
use crate::store::Watch;

/// A [`Watch`] on one schema of a PostgreSQL database.
pub(super) struct PgWatch {
    /// The listening connection; `None` once it was lost, until the next wait listens again.
    client: Option<Client>,
    config: Config,
    schema: String,
    target: String,
}

impl PgWatch {
    pub(super) fn open(config: &Config, schema: &str, target: &str) -> Result<Self> {
        Ok(PgWatch {
            client: Some(listen(config, target)?),
            config: config.clone(),
            schema: schema.to_owned(),
            target: target.to_owned(),
        })
    }
}

/// A new connection that listens on the channel.
fn listen(config: &Config, target: &str) -> Result<Client> {
    let mut client = super::tls::connect(config).map_err(|e| Error::CannotConnect {
        target: target.to_owned(),
        source: BackendError::with_causes(e),
    })?;
    client
        .batch_execute(sql::LISTEN)
        .map_err(|e| super::map_error(target, e))?;
    Ok(client)
}

impl Watch for PgWatch {
    fn wait(&mut self, timeout: Duration) -> Result<bool> {
        let Some(client) = self.client.as_mut() else {
            // The last connection was lost (a server restart, a terminated session): listen
            // again. What was notified meanwhile is unknown, so this counts as a wake-up.
            self.client = Some(listen(&self.config, &self.target)?);
            return Ok(true);
        };
        let answer =
            wait_on(client, &self.schema, timeout).map_err(|e| super::map_error(&self.target, e));
        if let Err(Error::ConnectionLost { .. }) = answer {
            self.client = None;
        }
        answer
    }

    fn disconnect(&mut self) {
        self.client = None;
    }
}

/// The longest one wait for a notification lasts: the client adds it to the clock itself, so
/// `Duration::MAX` (wait on) would overflow there. A longer timeout waits again.
const A_YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Waits on `client` up to `timeout` for a notification about `schema`.
fn wait_on(client: &mut Client, schema: &str, timeout: Duration) -> Result<bool, postgres::Error> {
    // Never, for a timeout too long to add to now (`Duration::MAX`: wait on).
    let deadline = Deadline::after(timeout);
    loop {
        let mut notifications = client.notifications();
        let next = notifications
            .timeout_iter(deadline.left().min(A_YEAR))
            .next()?;
        match next {
            Some(n) if n.payload() == schema => {
                // Several enqueues at once are one wake-up: take what is already there.
                while let Ok(Some(_)) = notifications.iter().next() {}
                return Ok(true);
            }
            // Time is up.
            _ if deadline.passed() => return Ok(false),
            // Another schema's jobs, not ours; or a year's wait over with time left: wait on.
            _ => {}
        }
    }
}
