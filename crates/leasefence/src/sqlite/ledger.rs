//! The attempt ledger on SQLite: the triggers of `migrations/0005_ledger.sql` record every
//! claim and every end of a lease; this module counts the refused writes (`refuse.sql`, in the
//! refused write's own transaction), ends the lost attempts a retry finds (`lose.sql`) and reads
//! a job's history.

use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, sql};
use crate::error::Result;
use crate::types::{Attempt, AttemptOutcome, Fence, History, JobId, Refusal, WriteOp};

impl SqliteStore {
    /// Runs the fenced write `write` of `op` on (`job_id`, `fence`) inside the caller's
    /// transaction: when it stores nothing (`None`), the refusal is counted in the same
    /// transaction.
    pub(super) fn judged<T>(
        &self,
        op: WriteOp,
        job_id: &str,
        fence: Fence,
        write: impl FnOnce() -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let written = write()?;
        if written.is_none() {
            self.refuse(job_id, fence, op)?;
        }
        Ok(written)
    }

    /// `refuse.sql`: counts one refused `op` under `fence` on `job_id` (nothing for an unknown
    /// job). Inside the caller's transaction.
    pub(super) fn refuse(&self, job_id: &str, fence: Fence, op: WriteOp) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(sql::REFUSE)
            .map_err(|e| self.err(e))?;
        stmt.execute(params![job_id, fence, op.as_str()])
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// `lose.sql`: ends as lost the open attempts whose last lease expired by `now` (of one
    /// job, or of every job), before a retry makes them ready. Inside the retry's transaction.
    pub(super) fn lose(&self, now: f64, job_id: Option<&str>) -> Result<()> {
        self.lose_in(now, job_id, None)
    }

    /// [`lose`](Self::lose) of the jobs of `queue` only (`None`: of every queue), for a
    /// retry of the dead of some queues: the others' jobs are not retried, and their holders
    /// may still give their leases back.
    pub(super) fn lose_in(
        &self,
        now: f64,
        job_id: Option<&str>,
        queue: Option<&str>,
    ) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(sql::LOSE)
            .map_err(|e| self.err(e))?;
        stmt.execute(params![now, job_id, queue])
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// `state.sql`, `history_attempts.sql` and `history_refusals.sql` in one read transaction.
    pub(super) fn read_history(&self, job_id: JobId<'_>) -> Result<Option<History>> {
        let tx = rusqlite::Transaction::new_unchecked(
            &self.conn,
            rusqlite::TransactionBehavior::Deferred,
        )
        .map_err(|e| self.err(e))?;
        let known = self
            .conn
            .prepare_cached(sql::STATE)
            .and_then(|mut stmt| {
                stmt.query_row(params![job_id.as_str()], |_| Ok(()))
                    .optional()
            })
            .map_err(|e| self.err(e))?;
        if known.is_none() {
            return Ok(None);
        }
        let attempts = self
            .conn
            .prepare_cached(sql::HISTORY_ATTEMPTS)
            .and_then(|mut stmt| {
                stmt.query_map(params![job_id.as_str()], |r| {
                    let outcome: Option<String> = r.get(4)?;
                    Ok(Attempt {
                        fence: r.get(0)?,
                        owner: r.get(1)?,
                        claimed_at: r.get(2)?,
                        ended_at: r.get(3)?,
                        outcome: outcome
                            .map(|name| AttemptOutcome::parse(&name).map_err(|e| bad(4, e)))
                            .transpose()?,
                        error: r.get(5)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.err(e))?;
        let refusals = self
            .conn
            .prepare_cached(sql::HISTORY_REFUSALS)
            .and_then(|mut stmt| {
                stmt.query_map(params![job_id.as_str()], |r| {
                    let op: String = r.get(1)?;
                    Ok(Refusal {
                        fence: r.get(0)?,
                        op: WriteOp::parse(&op).map_err(|e| bad(1, e))?,
                        count: r.get::<_, i64>(2)?.max(0) as u64,
                        last_at: r.get(3)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(History { attempts, refusals }))
    }
}

/// A stored name this version does not know, as a column conversion error.
fn bad(index: usize, e: crate::Error) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
}
