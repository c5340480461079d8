//! The reads of the queue on SQLite: `list` (and its cursor's check), `inspect` and `queues`
//! (which `stats` sums), one statement each; they change nothing.

use rusqlite::{OptionalExtension, params};

use super::rows::job_info;
use super::{SqliteStore, sql};
use crate::error::Result;
use crate::store::Store;
use crate::types::{JobId, JobInfo, Now, QueueInfo, Status};

impl SqliteStore {
    /// `list.sql`, once the cursor `after` (when given) is known to name a job.
    pub(super) fn list_jobs(
        &self,
        now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        if let Some(after) = after {
            self.cursor_exists(after)?;
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(sql::LIST)
            .map_err(|e| self.err(e))?;
        stmt.query_map(
            params![
                now.seconds(),
                status.map(Status::as_str),
                limit,
                after.map(|a| a.as_str())
            ],
            job_info,
        )
        .and_then(|rows| rows.collect())
        .map_err(|e| self.err(e))
    }

    /// A `list` cursor must name a job that exists: an unknown one would silently page from
    /// the start.
    fn cursor_exists(&self, after: JobId<'_>) -> Result<()> {
        match self.state(after)? {
            Some(_) => Ok(()),
            None => Err(crate::Error::invalid(
                "after",
                format!(
                    "no job has the id {:?} (deleted or purged since that page?)",
                    after.as_str()
                ),
            )),
        }
    }

    /// `inspect.sql`.
    pub(super) fn inspect_job(&self, job_id: JobId<'_>, now: Now) -> Result<Option<JobInfo>> {
        let mut stmt = self
            .conn
            .prepare_cached(sql::INSPECT)
            .map_err(|e| self.err(e))?;
        stmt.query_row(params![now.seconds(), job_id.as_str()], job_info)
            .optional()
            .map_err(|e| self.err(e))
    }

    /// `queues.sql`: each queue's counts by status, folded by `policy::queue_infos`.
    pub(super) fn read_queues(&self, now: Now) -> Result<Vec<QueueInfo>> {
        let mut stmt = self
            .conn
            .prepare_cached(sql::QUEUES)
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![now.seconds()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.err(e))?;
        crate::policy::queue_infos(rows)
    }
}
