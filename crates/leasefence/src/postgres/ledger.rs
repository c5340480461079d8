//! The attempt ledger on PostgreSQL: the trigger of `migrations/0005_ledger.sql` records every
//! claim and every end of a lease, the fenced statements count their own refusals (their
//! `refused` step), `lose.sql` ends the lost attempts a retry finds; this module reads a job's
//! history.

use postgres::IsolationLevel;

use super::{PgStore, sql};
use crate::error::Result;
use crate::types::{Attempt, AttemptOutcome, History, Refusal, WriteOp};

impl PgStore {
    /// `state.sql`, `history_attempts.sql` and `history_refusals.sql` in one read-only
    /// REPEATABLE READ transaction (one snapshot).
    pub(super) fn read_history(&self, id: &str) -> Result<Option<History>> {
        let mut conn = self.conn()?;
        let state = conn.prepared(sql::STATE).map_err(|e| self.err(e))?;
        let attempts = conn
            .prepared(sql::HISTORY_ATTEMPTS)
            .map_err(|e| self.err(e))?;
        let refusals = conn
            .prepared(sql::HISTORY_REFUSALS)
            .map_err(|e| self.err(e))?;
        let mut tx = conn
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| self.err(e))?;
        if tx
            .query_opt(&state, &[&id])
            .map_err(|e| self.err(e))?
            .is_none()
        {
            return Ok(None);
        }
        let attempts = tx
            .query(&attempts, &[&id])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| {
                Ok(Attempt {
                    fence: r.get(0),
                    owner: r.get(1),
                    claimed_at: r.get(2),
                    ended_at: r.get(3),
                    outcome: r
                        .get::<_, Option<&str>>(4)
                        .map(AttemptOutcome::parse)
                        .transpose()?,
                    error: r.get(5),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let refusals = tx
            .query(&refusals, &[&id])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| {
                Ok(Refusal {
                    fence: r.get(0),
                    op: WriteOp::parse(r.get(1))?,
                    count: r.get::<_, i64>(2).max(0) as u64,
                    last_at: r.get(3),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(History { attempts, refusals }))
    }
}
