//! Instant wake-up on PostgreSQL: a connection of the watch's own that `LISTEN`s on the
//! channel `leasefence_jobs`; enqueue, retry and resume `NOTIFY` it with their schema as the
//! payload, delivered when their transaction commits.

use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator as _;
use postgres::{Client, Config, NoTls};

use super::sql;
use crate::error::{BackendError, Error, Result};
use crate::store::Watch;

/// A [`Watch`] on one schema of a PostgreSQL database.
pub(super) struct PgWatch {
    client: Client,
    schema: String,
    target: String,
}

impl PgWatch {
    pub(super) fn open(config: &Config, schema: &str, target: &str) -> Result<Self> {
        let mut client = config.connect(NoTls).map_err(|e| Error::CannotConnect {
            target: target.to_owned(),
            source: BackendError::with_causes(e),
        })?;
        client
            .batch_execute(sql::LISTEN)
            .map_err(|e| super::map_error(target, e))?;
        Ok(PgWatch {
            client,
            schema: schema.to_owned(),
            target: target.to_owned(),
        })
    }
}

impl Watch for PgWatch {
    fn wait(&mut self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut notifications = self.client.notifications();
            let next = notifications
                .timeout_iter(left)
                .next()
                .map_err(|e| super::map_error(&self.target, e))?;
            match next {
                None => return Ok(false),
                // Another schema's jobs: not ours; wait on for the rest of the time.
                Some(n) if n.payload() != self.schema => {
                    if left.is_zero() {
                        return Ok(false);
                    }
                }
                Some(_) => {
                    // Several enqueues at once are one wake-up: take what is already there.
                    while let Ok(Some(_)) = notifications.iter().next() {}
                    return Ok(true);
                }
            }
        }
    }
}
