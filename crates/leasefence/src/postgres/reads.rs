//! The reads of the queue on PostgreSQL: `list` (and its cursor's check), `inspect` and
//! `queues` (which `stats` sums), one statement each; they change nothing.

use super::rows::job_info;
use super::{PgStore, key, sql};
use crate::error::Result;
use crate::policy;
use crate::store::Store;
use crate::types::{JobId, JobInfo, Now, QueueInfo, Status};

impl PgStore {
    /// `list.sql`, once the cursor `after` (when given) is known to name a job.
    pub(super) fn list_jobs(
        &self,
        now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        // The cursor is this call's `after`, not a `job_id`.
        let known = |after: JobId<'_>| match self.state(after) {
            Err(crate::Error::InvalidArgument { reason, .. }) => {
                Err(crate::Error::invalid("after", reason))
            }
            other => other.map(|state| state.is_some()),
        };
        if let Some(after) = after
            && !known(after)?
        {
            // An unknown cursor would silently page from the start.
            return Err(crate::Error::invalid(
                "after",
                format!(
                    "no job has the id {:?} (deleted or purged since that page?)",
                    after.as_str()
                ),
            ));
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let now = self.clock(now)?;
        let after = after.map(|a| key("after", a.as_str())).transpose()?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::LIST).map_err(|e| self.err(e))?;
        let rows = conn
            .query(
                &statement,
                &[&now.seconds(), &status.map(Status::as_str), &limit, &after],
            )
            .map_err(|e| self.err(e))?;
        rows.iter().map(job_info).collect()
    }

    /// `inspect.sql`.
    pub(super) fn inspect_job(&self, job_id: JobId<'_>, now: Now) -> Result<Option<JobInfo>> {
        let now = self.clock(now)?;
        let id = key("job_id", job_id.as_str())?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::INSPECT).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(&statement, &[&now.seconds(), &id])
            .map_err(|e| self.err(e))?;
        row.as_ref().map(job_info).transpose()
    }

    /// `serial.sql` then `queues.sql`, in one read-only transaction: each queue's counts by
    /// status, folded by `policy::queue_infos`.
    pub(super) fn read_queues(&self, now: Now) -> Result<Vec<QueueInfo>> {
        let now = self.clock(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::QUEUES).map_err(|e| self.err(e))?;
        let mut tx = conn
            .build_transaction()
            .read_only(true)
            .start()
            .map_err(|e| self.err(e))?;
        tx.batch_execute(sql::SERIAL).map_err(|e| self.err(e))?;
        let rows = tx
            .query(&statement, &[&now.seconds()])
            .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        queue_infos(&rows)
    }
}

/// The rows of `queues.sql`, folded by `policy::queue_infos`, by the names' bytes — as SQLite
/// orders text, whatever the database's collation (`en_US` or an ICU locale puts `a` before `B`).
pub(super) fn queue_infos(rows: &[postgres::Row]) -> Result<Vec<QueueInfo>> {
    let mut infos = policy::queue_infos(
        rows.iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect(),
    )?;
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(infos)
}
