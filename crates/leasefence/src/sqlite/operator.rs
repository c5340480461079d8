//! The operator verbs on SQLite, none of them fenced: `cancel`, `retry`, `retry_dead`, `delete`
//! and `purge`, each in one `BEGIN IMMEDIATE` on the file's writer (a cancel first ends as lost
//! an attempt whose lease had expired, `lose_expired.sql`, and a retry the lost attempts it
//! finds, `lose.sql`; delete and purge keep each removed id's last fence as its floor,
//! `fence_floor.sql`).

use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, sql};
use crate::error::Result;
use crate::types::{Fence, JobId, Now, Queues};

impl SqliteStore {
    /// `lose_expired.sql` and `cancel.sql`, in one `BEGIN IMMEDIATE`.
    pub(super) fn cancel_job(&self, job_id: JobId<'_>, now: Now) -> Result<bool> {
        let (id, now) = (job_id.as_str(), now.seconds());
        self.transaction(|s| {
            // The ledger first: an attempt whose lease expired unwritten ends as lost.
            s.conn
                .prepare_cached(sql::LOSE_EXPIRED)
                .and_then(|mut stmt| stmt.execute(params![id, now]))
                .map_err(|e| s.err(e))?;
            let changed = s
                .conn
                .prepare_cached(sql::CANCEL)
                .and_then(|mut stmt| stmt.execute(params![id, now]))
                .map_err(|e| s.err(e))?;
            Ok::<_, crate::Error>(changed == 1)
        })
    }

    /// `lose.sql` and `retry.sql` for each id, in order, in one `BEGIN IMMEDIATE`; wakes this
    /// process's watches when one was retried.
    pub(super) fn retry_jobs(&self, job_ids: &[JobId<'_>], now: Now) -> Result<Vec<bool>> {
        let now = now.seconds();
        let retried = self.transaction(|s| {
            let mut retried = std::collections::BTreeSet::new();
            let mut stmt = s.conn.prepare_cached(sql::RETRY).map_err(|e| s.err(e))?;
            for id in job_ids {
                // The ledger first: an expired last attempt ends as lost, not as a release.
                s.lose(now, Some(id.as_str()))?;
                if !retried.contains(id.as_str())
                    && stmt
                        .execute(params![id.as_str(), now])
                        .map_err(|e| s.err(e))?
                        == 1
                {
                    retried.insert(id.as_str());
                }
            }
            Ok::<_, crate::Error>(retried)
        })?;
        if !retried.is_empty() {
            self.notifier.notify();
        }
        Ok(job_ids
            .iter()
            .map(|id| retried.contains(id.as_str()))
            .collect())
    }

    /// `lose.sql` and `retry_dead.sql` for every queue of `queues` (once, for all of them,
    /// with [`Queues::All`]), in one `BEGIN IMMEDIATE`; wakes this process's
    /// watches when one was retried.
    pub(super) fn retry_all_dead(&self, queues: &Queues, now: Now) -> Result<u64> {
        let names: Vec<Option<&str>> = match queues {
            Queues::All => vec![None],
            Queues::Only(list) => list.iter().map(|q| Some(q.as_str())).collect(),
        };
        let changed = self.transaction(|s| {
            let mut changed = 0;
            let mut stmt = s
                .conn
                .prepare_cached(sql::RETRY_DEAD)
                .map_err(|e| s.err(e))?;
            for name in names {
                // The ledger first: an expired last attempt ends as lost, not as a release; in
                // the queues retried only (elsewhere its holder may still release it).
                s.lose_in(now.seconds(), None, name)?;
                changed += stmt
                    .execute(params![now.seconds(), name])
                    .map_err(|e| s.err(e))?;
            }
            Ok::<_, crate::Error>(changed)
        })?;
        if changed > 0 {
            self.notifier.notify();
        }
        Ok(changed as u64)
    }

    /// `delete.sql` for each id and `fence_floor.sql` for each deleted one, in one
    /// `BEGIN IMMEDIATE`.
    pub(super) fn delete_jobs(&self, job_ids: &[JobId<'_>]) -> Result<Vec<bool>> {
        let deleted = self.transaction(|s| {
            let mut deleted = std::collections::BTreeSet::new();
            let mut delete = s.conn.prepare_cached(sql::DELETE).map_err(|e| s.err(e))?;
            let mut floor = s
                .conn
                .prepare_cached(sql::FENCE_FLOOR)
                .map_err(|e| s.err(e))?;
            for id in job_ids {
                let fence: Option<Fence> = delete
                    .query_row(params![id.as_str()], |r| r.get(0))
                    .optional()
                    .map_err(|e| s.err(e))?;
                if let Some(fence) = fence {
                    // The same transaction: the deleted id's last fence becomes its floor.
                    floor
                        .execute(params![id.as_str(), fence])
                        .map_err(|e| s.err(e))?;
                    deleted.insert(id.as_str());
                }
            }
            Ok::<_, crate::Error>(deleted)
        })?;
        Ok(job_ids
            .iter()
            .map(|id| deleted.contains(id.as_str()))
            .collect())
    }

    /// `purge.sql`, then `fence_floor.sql` for each purged id, in one `BEGIN IMMEDIATE`.
    pub(super) fn purge_finished(&self, finished_before: Now) -> Result<u64> {
        let before = finished_before.seconds();
        self.transaction(|s| {
            let purged: Vec<(String, Fence)> = {
                let mut stmt = s.conn.prepare_cached(sql::PURGE).map_err(|e| s.err(e))?;
                stmt.query_map(params![before], |r| Ok((r.get(0)?, r.get(1)?)))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(|e| s.err(e))?
            };
            // The same transaction: a purged id's last fence becomes its floor, so an id
            // enqueued again continues above every fence it ever had.
            let mut stmt = s
                .conn
                .prepare_cached(sql::FENCE_FLOOR)
                .map_err(|e| s.err(e))?;
            for (id, fence) in &purged {
                stmt.execute(params![id, fence]).map_err(|e| s.err(e))?;
            }
            Ok(purged.len() as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::types::{NewJob, Owner, Ttl};
    use crate::{Failed, JobId, Now, Queues, SqliteStore, Store};

    fn now(t: f64) -> Now {
        Now::new(t).unwrap()
    }

    /// A store on a scratch file, with one dead job `dead` and one waiting job `ready`.
    fn store_with_a_dead_job() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(dir.path().join("q.db")).unwrap();
        let dead = NewJob::new("dead").unwrap().max_attempts(1);
        s.enqueue_many(&[dead, NewJob::new("ready").unwrap()])
            .unwrap();
        let owner = Owner::new("w").unwrap();
        let lease = s
            .claim(
                JobId::new("dead").unwrap(),
                owner,
                now(0.0),
                Ttl::new(10.0).unwrap(),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            s.fail(&lease, now(1.0), "broken", None).unwrap(),
            Some(Failed::Dead)
        );
        (dir, s)
    }

    // The in-process notifier is what wakes a watch of this process at once; a watch also
    // polls the file, so only the notifier's generation tells a notification from a poll.

    #[test]
    fn a_retry_notifies_this_processs_watches_only_when_it_made_a_job_ready() {
        let (_dir, s) = store_with_a_dead_job();
        let before = s.notifier.generation();
        let ids = [JobId::new("ready").unwrap(), JobId::new("ghost").unwrap()];
        assert_eq!(s.retry(&ids, now(2.0)).unwrap(), [false, false]);
        assert_eq!(
            s.notifier.generation(),
            before,
            "nothing retried, no one woken"
        );
        assert_eq!(
            s.retry(&[JobId::new("dead").unwrap()], now(3.0)).unwrap(),
            [true]
        );
        assert_ne!(
            s.notifier.generation(),
            before,
            "a job made ready wakes the watches"
        );
    }

    #[test]
    fn retrying_the_dead_notifies_only_when_there_were_some() {
        let (_dir, s) = store_with_a_dead_job();
        let before = s.notifier.generation();
        let elsewhere = Queues::only(["other"]).unwrap();
        assert_eq!(s.retry_dead_in(&elsewhere, now(2.0)).unwrap(), 0);
        assert_eq!(
            s.notifier.generation(),
            before,
            "nothing retried, no one woken"
        );
        assert_eq!(s.retry_dead(now(3.0)).unwrap(), 1);
        let after = s.notifier.generation();
        assert_ne!(after, before, "a dead job made ready wakes the watches");
        assert_eq!(s.retry_dead(now(4.0)).unwrap(), 0);
        assert_eq!(s.notifier.generation(), after);
    }
}
