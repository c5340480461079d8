//! [`Store`] for [`SqliteStore`]: each operation runs the statement of its file in `sql/`. The
//! bodies of related operations live in sibling modules: `operator.rs` (cancel, retry,
//! retry_dead, delete, purge), `reads.rs` (list, inspect, stats, queues), `ledger.rs`,
//! `schedule.rs` and `enqueue.rs`.

use rusqlite::{OptionalExtension, params};

use super::rows::claimed_lease;
use super::{SqliteStore, sql};
use crate::error::Result;
use crate::policy::{self, Claimed};
use crate::store::Store;
use crate::types::{
    BatchSize, DEFAULT_QUEUE, Enqueued, Failed, Fence, History, JobId, JobInfo, JobState, Lease,
    NewJob, Now, Owner, Queue, QueueInfo, Queues, Resource, Status, Ttl, WriteOp,
};

impl Store for SqliteStore {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool> {
        let id = job_id.as_str().to_owned();
        self.notify_after(self.grouped(move |s| {
            let (none, no_text, no_window): (Option<&[u8]>, Option<&str>, Option<f64>) =
                (None, None, None);
            s.write_one(
                sql::ENQUEUE,
                params![
                    id,
                    none,
                    0,
                    0.0,
                    0,
                    DEFAULT_QUEUE,
                    no_text,
                    no_text,
                    no_window
                ],
            )
        }))
    }

    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>> {
        let mut stmt = self
            .conn
            .prepare_cached(sql::STATE)
            .map_err(|e| self.err(e))?;
        stmt.query_row(params![job_id.as_str()], |r| {
            Ok(JobState {
                id: r.get(0)?,
                owner: r.get(1)?,
                until: r.get(2)?,
                fence: r.get(3)?,
                result: r.get(4)?,
                done: r.get::<_, i64>(5)? != 0,
            })
        })
        .optional()
        .map_err(|e| self.err(e))
    }

    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        let until = ttl.until(now)?;
        let now = now.seconds();
        let (job, owner) = (job_id.as_str().to_owned(), owner.as_str().to_owned());
        self.grouped(move |s| {
            let mut stmt = s.conn.prepare_cached(sql::CLAIM).map_err(|e| s.err(e))?;
            stmt.query_row(params![job, owner, until, now], |r| {
                claimed_lease(r, Owner(&owner))
            })
            .optional()
            .map_err(|e| s.err(e))
        })
    }

    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool> {
        let until = ttl.until(now)?;
        let now = now.seconds();
        let (job, owner) = (job_id.as_str().to_owned(), owner.as_str().to_owned());
        self.grouped(move |s| {
            let params = params![job, owner, fence, now, until];
            s.write_fenced(WriteOp::Renew, &job, fence, sql::RENEW, params)
        })
    }

    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> Result<bool> {
        let now = now.seconds();
        let (job, owner) = (job_id.as_str().to_owned(), owner.as_str().to_owned());
        let result = result.to_owned();
        self.grouped(move |s| {
            let params = params![job, owner, fence, now, result];
            s.write_fenced(WriteOp::Complete, &job, fence, sql::COMPLETE, params)
        })
    }

    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool> {
        let (job, owner) = (job_id.as_str().to_owned(), owner.as_str().to_owned());
        self.grouped(move |s| {
            let params = params![job, owner, fence];
            s.write_fenced(WriteOp::Release, &job, fence, sql::RELEASE, params)
        })
    }

    fn enqueue_jobs(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let outcomes =
            self.transaction(|s| super::enqueue::enqueue_on(&s.conn, jobs, &|e| s.err(e)))?;
        if outcomes.iter().any(Enqueued::is_inserted) {
            self.notifier.notify();
        }
        Ok(outcomes)
    }

    fn claim_next_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        self.claim_one(queues, owner, now, ttl)
    }

    fn claim_batch_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> Result<Vec<Lease>> {
        if n == BatchSize::ONE {
            // One job: the cheaper statement of the same choice (no ephemeral table).
            return Ok(self
                .claim_one(queues, owner, now, ttl)?
                .into_iter()
                .collect());
        }
        let until = ttl.until(now)?;
        let now = now.seconds();
        let (names, owner) = (queues.json(), owner.as_str().to_owned());
        self.grouped(move |s| {
            let owner = Owner(&owner);
            s.bury(now)?;
            if let Some(names) = &names {
                // Named queues: their best job, n times, in this one transaction (one
                // commit); each run takes the next best, so the leases come out best first.
                let mut leases = Vec::new();
                while leases.len() < n.get() {
                    match s.claim_next_in_tx(names, owner, until, now)? {
                        Some(lease) => leases.push(lease),
                        None => break,
                    }
                }
                return Ok(leases);
            }
            let mut stmt = s
                .conn
                .prepare_cached(sql::CLAIM_BATCH)
                .map_err(|e| s.err(e))?;
            let claimed = stmt
                .query_map(params![owner.as_str(), until, now, n.limit()], |r| {
                    Ok(Claimed {
                        lease: claimed_lease(r, owner)?,
                        not_before: r.get(10)?,
                        seq: r.get(11)?,
                    })
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(|e| s.err(e))?;
            Ok(policy::best_first(claimed))
        })
    }

    fn complete_batch(&self, completions: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>> {
        if completions.is_empty() {
            return Ok(Vec::new());
        }
        let now = now.seconds();
        let batch = super::complete::Completions::new(completions);
        self.grouped(move |s| s.complete_all(&batch, now))
    }

    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> Result<Option<Failed>> {
        let retry_at = policy::retry_at(retry_at, lease, now);
        let (now, at) = (now.seconds(), retry_at.seconds());
        let (job, owner, fence) = (lease.job_id.clone(), lease.owner.clone(), lease.fence);
        let error = error.to_owned();
        let dead = self.grouped(move |s| {
            s.judged(WriteOp::Fail, &job, fence, || {
                let mut stmt = s.conn.prepare_cached(sql::FAIL).map_err(|e| s.err(e))?;
                stmt.query_row(params![job, owner, fence, now, error, at], |r| {
                    r.get::<_, bool>(0)
                })
                .optional()
                .map_err(|e| s.err(e))
            })
        })?;
        Ok(dead.map(|dead| {
            if dead {
                Failed::Dead
            } else {
                Failed::Retrying { at }
            }
        }))
    }

    fn cancel(&self, job_id: JobId<'_>, now: Now) -> Result<bool> {
        self.cancel_job(job_id, now)
    }

    fn retry(&self, job_ids: &[JobId<'_>], now: Now) -> Result<Vec<bool>> {
        self.retry_jobs(job_ids, now)
    }

    fn retry_dead_in(&self, queues: &Queues, now: Now) -> Result<u64> {
        self.retry_all_dead(queues, now)
    }

    fn delete(&self, job_ids: &[JobId<'_>]) -> Result<Vec<bool>> {
        self.delete_jobs(job_ids)
    }

    fn purge(&self, finished_before: Now) -> Result<u64> {
        self.purge_finished(finished_before)
    }

    fn list(
        &self,
        now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        self.list_jobs(now, status, after, limit)
    }

    #[cfg(feature = "cron")]
    fn add_schedule(&self, schedule: &crate::Schedule, now: Now) -> Result<bool> {
        self.schedule_add(schedule, now)
    }

    #[cfg(feature = "cron")]
    fn remove_schedule(&self, name: crate::ScheduleName<'_>) -> Result<bool> {
        self.schedule_remove(name)
    }

    #[cfg(feature = "cron")]
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>> {
        self.read_schedules()
    }

    #[cfg(feature = "cron")]
    fn enqueue_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[crate::SlotRun],
    ) -> Result<Option<Vec<Option<Enqueued>>>> {
        self.write_slots(scheduler, now, runs)
    }

    fn history(&self, job_id: JobId<'_>) -> Result<Option<History>> {
        self.read_history(job_id)
    }

    fn inspect(&self, job_id: JobId<'_>, now: Now) -> Result<Option<JobInfo>> {
        self.inspect_job(job_id, now)
    }

    fn pause(&self, queue: &Queue) -> Result<bool> {
        self.write_one(sql::PAUSE, params![queue.as_str()])
    }

    fn resume(&self, queue: &Queue) -> Result<bool> {
        self.notify_after(self.write_one(sql::RESUME, params![queue.as_str()]))
    }

    fn watch(&self) -> Result<Option<Box<dyn crate::store::Watch>>> {
        Ok(Some(Box::new(super::watch::SqliteWatch::open(
            &self.path,
            self.notifier.clone(),
        )?)))
    }

    fn queues(&self, now: Now) -> Result<Vec<QueueInfo>> {
        self.read_queues(now)
    }

    fn admit(&self, resource: Resource<'_>, fence: Fence) -> Result<bool> {
        let fence = crate::types::gate_fence(fence)?;
        self.write_one(sql::ADMIT, params![resource.as_str(), fence])
    }

    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let until = ttl.until(now)?;
        let now = now.seconds();
        self.transaction(|s| {
            let mut stmt = s
                .conn
                .prepare_cached(sql::RENEW_BATCH)
                .map_err(|e| s.err(e))?;
            let mut renewed = Vec::with_capacity(leases.len());
            for lease in leases {
                let changed = stmt
                    .execute(params![lease.job_id, lease.owner, lease.fence, now, until])
                    .map_err(|e| s.err(e))?;
                if changed != 1 {
                    s.refuse(&lease.job_id, lease.fence, WriteOp::Renew)?;
                }
                renewed.push(changed == 1);
            }
            Ok(renewed)
        })
    }
}

impl SqliteStore {
    /// [`SqliteStore::judged`] for a statement that changes one row or none. Inside the
    /// caller's transaction (a group's).
    fn write_fenced(
        &self,
        op: WriteOp,
        job_id: &str,
        fence: Fence,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<bool> {
        let written = self.judged(op, job_id, fence, || {
            Ok(self.write_one(sql, params)?.then_some(()))
        })?;
        Ok(written.is_some())
    }

    /// Wakes this process's watches when `changed` says a write made jobs ready.
    fn notify_after(&self, changed: Result<bool>) -> Result<bool> {
        if let Ok(true) = changed {
            self.notifier.notify();
        }
        changed
    }

    /// `claim_next.sql` (or `claim_next_in.sql` for named queues): the best ready job, in one
    /// group's transaction after `bury.sql`. Both `claim_next` and `claim_batch` of one run it;
    /// neither calls the other.
    fn claim_one(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        let until = ttl.until(now)?;
        let now = now.seconds();
        let (names, owner) = (queues.json(), owner.as_str().to_owned());
        self.grouped(move |s| {
            s.bury(now)?;
            let owner = Owner(&owner);
            if let Some(names) = &names {
                return s.claim_next_in_tx(names, owner, until, now);
            }
            let mut stmt = s
                .conn
                .prepare_cached(sql::CLAIM_NEXT)
                .map_err(|e| s.err(e))?;
            stmt.query_row(params![owner.as_str(), until, now], |r| {
                claimed_lease(r, owner)
            })
            .optional()
            .map_err(|e| s.err(e))
        })
    }

    /// `claim_next_in.sql`: the best ready job of the named queues (`names`, a JSON array),
    /// inside the caller's `BEGIN IMMEDIATE`, after `bury.sql`.
    fn claim_next_in_tx(
        &self,
        names: &str,
        owner: Owner<'_>,
        until: f64,
        now: f64,
    ) -> Result<Option<Lease>> {
        let mut stmt = self
            .conn
            .prepare_cached(sql::CLAIM_NEXT_IN)
            .map_err(|e| self.err(e))?;
        let lease = stmt
            .query_row(params![owner.as_str(), until, now, names], |r| {
                claimed_lease(r, owner)
            })
            .optional();
        lease.map_err(|e| self.err(e))
    }

    /// `bury.sql`: finishes as dead the jobs whose last attempt's lease expired by `now`.
    /// Inside the claims' transaction.
    fn bury(&self, now: f64) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(sql::BURY)
            .map_err(|e| self.err(e))?;
        stmt.execute(params![now]).map_err(|e| self.err(e))?;
        Ok(())
    }
}
