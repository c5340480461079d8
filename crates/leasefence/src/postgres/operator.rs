//! The operator verbs on PostgreSQL, none of them fenced: `cancel` (one statement), and
//! `retry`, `retry_dead`, `delete` and `purge`, each in one transaction (a retry first ends the
//! lost attempts it finds, `lose.sql`, and wakes the watches, `notify.sql`; delete and purge
//! lock the ids against a concurrent enqueue, `lock_ids.sql`, and keep each removed id's last
//! fence as its floor in their own statement).

use postgres::error::SqlState;

use super::{PgStore, key, sql};
use crate::error::{Error, Result};
use crate::types::{JobId, Now, Queues};

impl PgStore {
    /// A retry's error. A unique key that a concurrent enqueue (or retry) took while this
    /// retry ran is not visible to retry.sql's check, so the index refuses the row
    /// (`unique_violation`): contention, [`Error::Busy`] — tried again, the retry sees the
    /// key held and leaves the job as it is, as SQLite, where writers take turns, does at once.
    fn key_taken(&self, e: postgres::Error) -> Error {
        if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
            Error::Busy
        } else {
            self.err(e)
        }
    }

    /// `cancel.sql`: one statement.
    pub(super) fn cancel_job(&self, job_id: JobId<'_>, now: Now) -> Result<bool> {
        let now = self.clock(now)?;
        self.write_one(
            sql::CANCEL,
            &[&key("job_id", job_id.as_str())?, &now.seconds()],
        )
    }

    /// `lose.sql` and `retry.sql` for each id, in order, then `notify.sql` when one was retried,
    /// in one transaction.
    pub(super) fn retry_jobs(&self, job_ids: &[JobId<'_>], now: Now) -> Result<Vec<bool>> {
        let now = self.clock(now)?;
        let ids = job_ids
            .iter()
            .map(|id| key("job_id", id.as_str()))
            .collect::<Result<Vec<&str>>>()?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::RETRY).map_err(|e| self.err(e))?;
        let lose = conn.prepared(sql::LOSE).map_err(|e| self.err(e))?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        // One id at a time, in the order given: of several finished jobs with one unique key,
        // the first retried holds it and the others stay as they are (as on SQLite).
        let mut retried = std::collections::BTreeSet::new();
        for id in &ids {
            // The ledger first: an expired last attempt ends as lost, not as a release.
            tx.execute(&lose, &[&now.seconds(), &Some(*id), &None::<Vec<&str>>])
                .map_err(|e| self.err(e))?;
            if !retried.contains(*id)
                && tx
                    .query_opt(&statement, &[id, &now.seconds()])
                    .map_err(|e| self.key_taken(e))?
                    .is_some()
            {
                retried.insert(*id);
            }
        }
        if !retried.is_empty() {
            tx.execute(sql::NOTIFY, &[&self.schema()])
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(ids.iter().map(|id| retried.contains(*id)).collect())
    }

    /// `lose.sql` and `retry_dead.sql` for the jobs of `queues`, then `notify.sql`
    /// when one was retried, in one transaction.
    pub(super) fn retry_all_dead(&self, queues: &Queues, now: Now) -> Result<u64> {
        let names: Option<Vec<&str>> = match queues {
            Queues::All => None,
            Queues::Only(list) => Some(list.iter().map(|q| q.as_str()).collect()),
        };
        let now = self.clock(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::RETRY_DEAD).map_err(|e| self.err(e))?;
        let lose = conn.prepared(sql::LOSE).map_err(|e| self.err(e))?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        // The ledger first: an expired last attempt ends as lost, not as a release; in the
        // queues retried only (elsewhere its holder may still release it).
        tx.execute(&lose, &[&now.seconds(), &None::<&str>, &names])
            .map_err(|e| self.err(e))?;
        let changed = tx
            .execute(&statement, &[&now.seconds(), &names])
            .map_err(|e| self.key_taken(e))?;
        if changed > 0 {
            tx.execute(sql::NOTIFY, &[&self.schema()])
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(changed)
    }

    /// `lock_ids.sql`, then `delete.sql` (which keeps the fence floors), in one transaction.
    pub(super) fn delete_jobs(&self, job_ids: &[JobId<'_>]) -> Result<Vec<bool>> {
        let ids = job_ids
            .iter()
            .map(|id| key("job_id", id.as_str()))
            .collect::<Result<Vec<&str>>>()?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn()?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        // As for purge: a concurrent enqueue of a deleted id must see its new fence floor.
        self.lock_ids(&mut tx, &ids)?;
        let deleted: std::collections::BTreeSet<String> = tx
            .query(sql::DELETE, &[&ids])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        tx.commit().map_err(|e| self.err(e))?;
        Ok(ids.iter().map(|id| deleted.contains(*id)).collect())
    }

    /// `purgeable.sql`, `lock_ids.sql`, then `purge.sql` (which keeps the fence floors), in one
    /// transaction.
    pub(super) fn purge_finished(&self, finished_before: Now) -> Result<u64> {
        let before = finished_before.seconds();
        let mut conn = self.conn()?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let ids: Vec<String> = tx
            .query(sql::PURGEABLE, &[&before])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.lock_ids(&mut tx, &refs)?;
        let deleted: i64 = tx
            .query_one(sql::PURGE, &[&before, &refs])
            .map_err(|e| self.err(e))?
            .get(0);
        tx.commit().map_err(|e| self.err(e))?;
        Ok(deleted.max(0) as u64)
    }
}
