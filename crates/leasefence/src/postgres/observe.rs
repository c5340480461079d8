//! The operator's views on PostgreSQL ([`Observe`]): the overview, the job search, the fence
//! gate and the audit log. Reads that take several statements run in one read-only
//! repeatable-read transaction (one snapshot); the audit record is one statement.

use postgres::IsolationLevel;

use super::reads::queue_infos;
use super::rows::job_info;
use super::{PgStore, key, sql};
use crate::error::Result;
use crate::policy::job_page;
use crate::store::Observe;
use crate::types::observe::{minutes, throughput_since};
use crate::types::{
    AuditEntry, AuditRecord, EXPIRING_WITHIN, FenceRecord, JobCursor, JobOrder, JobPage, JobQuery,
    Now, Overview, Resource, Status,
};

impl Observe for PgStore {
    fn overview(&self, now: Now) -> Result<Overview> {
        let at = self.clock(now)?.seconds();
        let mut conn = self.conn()?;
        let queues = conn.prepared(sql::QUEUES).map_err(|e| self.err(e))?;
        let expiring = conn
            .prepared(sql::OVERVIEW_EXPIRING)
            .map_err(|e| self.err(e))?;
        let oldest = conn
            .prepared(sql::OVERVIEW_OLDEST_READY)
            .map_err(|e| self.err(e))?;
        let refused = conn
            .prepared(sql::OVERVIEW_REFUSED)
            .map_err(|e| self.err(e))?;
        let throughput = conn
            .prepared(sql::OVERVIEW_THROUGHPUT)
            .map_err(|e| self.err(e))?;
        let mut tx = conn
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| self.err(e))?;
        tx.batch_execute(sql::SERIAL).map_err(|e| self.err(e))?;
        let queues = queue_infos(&tx.query(&queues, &[&at]).map_err(|e| self.err(e))?)?;
        let expiring: i64 = tx
            .query_one(&expiring, &[&at, &EXPIRING_WITHIN])
            .map_err(|e| self.err(e))?
            .get(0);
        let oldest_ready = tx
            .query_opt(&oldest, &[&at])
            .map_err(|e| self.err(e))?
            .map(|r| (r.get::<_, String>(0), r.get::<_, Option<f64>>(1)));
        let refused = tx
            .query_one(&refused, &[&(at - 3600.0)])
            .map_err(|e| self.err(e))?;
        let (refused_total, refused_last_hour): (i64, i64) = (refused.get(0), refused.get(1));
        let rows = tx
            .query(&throughput, &[&throughput_since(at)])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        tx.commit().map_err(|e| self.err(e))?;
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
        let at = self.clock(now)?.seconds();
        let status = query.status.map(Status::as_str);
        let queue = query.queue.as_ref().map(|q| q.as_str());
        let (kind, owner) = (query.kind.as_deref(), query.owner.as_deref());
        let (limit, window) = (query.limit as i64, query.window as i64);
        let mut conn = self.conn()?;
        if let Some(prefix) = &query.id_prefix {
            let end = JobQuery::prefix_end(prefix);
            let after = match &query.after {
                Some(JobCursor::Id(id)) => Some(key("cursor", id)?),
                _ => None,
            };
            let find = conn
                .prepared(sql::FIND_JOBS_BY_ID)
                .map_err(|e| self.err(e))?;
            let bound = conn
                .prepared(sql::FIND_JOBS_WINDOW_BY_ID)
                .map_err(|e| self.err(e))?;
            let mut tx = snapshot(&mut conn).map_err(|e| self.err(e))?;
            let rows = tx
                .query(
                    &find,
                    &[
                        &at, &status, &queue, &kind, &owner, prefix, &end, &after, &limit, &window,
                    ],
                )
                .map_err(|e| self.err(e))?
                .iter()
                .map(|r| Ok((job_info(r)?, r.get::<_, i64>(19))))
                .collect::<Result<Vec<_>>>()?;
            let edge = tx
                .query_one(&bound, &[prefix, &end, &after, &window])
                .map_err(|e| self.err(e))?;
            tx.commit().map_err(|e| self.err(e))?;
            let (examined, last): (i64, Option<String>) = (edge.get(0), edge.get(1));
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
        let find = conn.prepared(find).map_err(|e| self.err(e))?;
        let bound = conn.prepared(bound).map_err(|e| self.err(e))?;
        let mut tx = snapshot(&mut conn).map_err(|e| self.err(e))?;
        let rows = tx
            .query(
                &find,
                &[
                    &at, &status, &queue, &kind, &owner, &cursor, &limit, &window,
                ],
            )
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| Ok((job_info(r)?, r.get::<_, i64>(19))))
            .collect::<Result<Vec<_>>>()?;
        let edge = tx
            .query_one(&bound, &[&cursor, &window])
            .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        let (edge, examined): (Option<i64>, i64) = (edge.get(0), edge.get(1));
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
        let after = after.map(|r| key("after", r.as_str())).transpose()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::FENCES).map_err(|e| self.err(e))?;
        Ok(conn
            .query(&statement, &[&after, &limit])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| FenceRecord {
                resource: r.get(0),
                fence: r.get(1),
            })
            .collect())
    }

    fn record_audit(&self, record: &AuditRecord<'_>, at: Now) -> Result<i64> {
        record.check()?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::RECORD_AUDIT).map_err(|e| self.err(e))?;
        Ok(conn
            .query_one(
                &statement,
                &[
                    &at.seconds(),
                    &record.actor,
                    &record.action,
                    &record.target,
                    &record.result,
                ],
            )
            .map_err(|e| self.err(e))?
            .get(0))
    }

    fn audit_log(&self, before: Option<i64>, limit: usize) -> Result<Vec<AuditEntry>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::AUDIT_LOG).map_err(|e| self.err(e))?;
        Ok(conn
            .query(&statement, &[&before, &limit])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| AuditEntry {
                seq: r.get(0),
                at: r.get(1),
                actor: r.get(2),
                action: r.get(3),
                target: r.get(4),
                result: r.get(5),
            })
            .collect())
    }
}

/// A read-only repeatable-read transaction: its statements see one snapshot.
fn snapshot(
    conn: &mut super::Conn,
) -> std::result::Result<postgres::Transaction<'_>, postgres::Error> {
    conn.build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
}
