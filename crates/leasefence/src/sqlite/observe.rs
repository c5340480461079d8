//! The operator's views on SQLite ([`Observe`]): the overview, the job search, the fence gate
//! and the audit log. Reads run in one deferred transaction each (one snapshot); the audit
//! record is one statement.

use rusqlite::{OptionalExtension, params};

use super::rows::job_info;
use super::{SqliteStore, sql};
use crate::error::Result;
use crate::policy::job_page;
use crate::store::{Observe, Store};
use crate::types::observe::{minutes, throughput_since};
use crate::types::{
    AuditEntry, AuditRecord, EXPIRING_WITHIN, FenceRecord, JobCursor, JobOrder, JobPage, JobQuery,
    Now, Overview, Resource, Status,
};

impl SqliteStore {
    /// A deferred transaction: the statements after it read one snapshot.
    fn snapshot(&self) -> Result<rusqlite::Transaction<'_>> {
        rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Deferred)
            .map_err(|e| self.err(e))
    }
}

impl Observe for SqliteStore {
    fn overview(&self, now: Now) -> Result<Overview> {
        let _read = self.snapshot()?;
        let queues = self.queues(now)?;
        let at = now.seconds();
        let query = |sql: &str| self.conn.prepare_cached(sql).map_err(|e| self.err(e));
        let expiring: i64 = query(sql::OVERVIEW_EXPIRING)?
            .query_row(params![at, EXPIRING_WITHIN], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let oldest_ready = query(sql::OVERVIEW_OLDEST_READY)?
            .query_row(params![at], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<f64>>(1)?))
            })
            .optional()
            .map_err(|e| self.err(e))?;
        let (refused_total, refused_last_hour): (i64, i64) = query(sql::OVERVIEW_REFUSED)?
            .query_row(params![at - 3600.0], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        let rows = query(sql::OVERVIEW_THROUGHPUT)?
            .query_map(params![throughput_since(at)], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.err(e))?;
        Ok(Overview {
            now: at,
            totals: crate::policy::totals(&queues),
            queues,
            expiring_soon: expiring.max(0) as u64,
            // A job enqueued before enqueue times were kept has none: it counts as the oldest.
            oldest_ready: oldest_ready.map(|(id, when)| (id, when.unwrap_or(0.0))),
            refused_total: refused_total.max(0) as u64,
            refused_last_hour: refused_last_hour.max(0) as u64,
            throughput: minutes(at, rows),
        })
    }

    fn find_jobs(&self, now: Now, query: &JobQuery) -> Result<JobPage> {
        query.check()?;
        let _read = self.snapshot()?;
        let at = now.seconds();
        let status = query.status.map(Status::as_str);
        let queue = query.queue.as_ref().map(|q| q.as_str());
        let (kind, owner) = (query.kind.as_deref(), query.owner.as_deref());
        let (limit, window) = (query.limit as i64, query.window as i64);
        let read_page = |sql: &str, args: &[&dyn rusqlite::ToSql]| -> Result<Vec<_>> {
            let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
            stmt.query_map(args, |r| Ok((job_info(r)?, r.get::<_, i64>(19)?)))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(|e| self.err(e))
        };
        if let Some(prefix) = &query.id_prefix {
            let end = JobQuery::prefix_end(prefix);
            let after = match &query.after {
                Some(JobCursor::Id(id)) => Some(id.as_str()),
                _ => None,
            };
            let rows = read_page(
                sql::FIND_JOBS_BY_ID,
                params![
                    at, status, queue, kind, owner, prefix, end, after, limit, window
                ],
            )?;
            // The window is the range's first `window` ids: its last one is where to go on.
            let (examined, last): (i64, Option<String>) = self
                .conn
                .prepare_cached(sql::FIND_JOBS_WINDOW_BY_ID)
                .and_then(|mut s| {
                    s.query_row(params![prefix, end, after, window], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                })
                .map_err(|e| self.err(e))?;
            return Ok(job_page(
                rows,
                limit,
                examined,
                window,
                |(job, _)| JobCursor::Id(job.state.id.clone()),
                last.map(JobCursor::Id),
            ));
        }
        let cursor = match &query.after {
            Some(JobCursor::Seq(seq)) => Some(*seq),
            _ => None,
        };
        let (find, bound) = match query.order {
            JobOrder::Newest => (sql::FIND_JOBS, sql::FIND_JOBS_WINDOW),
            JobOrder::Oldest => (sql::FIND_JOBS_OLDEST, sql::FIND_JOBS_WINDOW_OLDEST),
        };
        let rows = read_page(
            find,
            params![at, status, queue, kind, owner, cursor, limit, window],
        )?;
        let (edge, examined): (Option<i64>, i64) = self
            .conn
            .prepare_cached(bound)
            .and_then(|mut s| s.query_row(params![cursor, window], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(|e| self.err(e))?;
        Ok(job_page(
            rows,
            limit,
            examined,
            window,
            |(_, seq)| JobCursor::Seq(*seq),
            edge.map(JobCursor::Seq),
        ))
    }

    fn fences(&self, after: Option<Resource<'_>>, limit: usize) -> Result<Vec<FenceRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(sql::FENCES)
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![after.map(|r| r.as_str()), limit], |r| {
            Ok(FenceRecord {
                resource: r.get(0)?,
                fence: r.get(1)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.err(e))
    }

    fn record_audit(&self, record: &AuditRecord<'_>, at: Now) -> Result<i64> {
        record.check()?;
        let mut stmt = self
            .conn
            .prepare_cached(sql::RECORD_AUDIT)
            .map_err(|e| self.err(e))?;
        stmt.query_row(
            params![
                at.seconds(),
                record.actor,
                record.action,
                record.target,
                record.result
            ],
            |r| r.get(0),
        )
        .map_err(|e| self.err(e))
    }

    fn audit_log(&self, before: Option<i64>, limit: usize) -> Result<Vec<AuditEntry>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(sql::AUDIT_LOG)
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![before, limit], |r| {
            Ok(AuditEntry {
                seq: r.get(0)?,
                at: r.get(1)?,
                actor: r.get(2)?,
                action: r.get(3)?,
                target: r.get(4)?,
                result: r.get(5)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.err(e))
    }
}
