//! [`Store`] for [`PgStore`]: each operation runs the statement of its file in `sql/`. The
//! bodies of related operations live in sibling modules, named as on SQLite: `operator.rs`
//! (cancel, retry, retry_dead, delete, purge), `reads.rs` (list, inspect, stats, queues),
//! `ledger.rs`, `schedule.rs` and `enqueue.rs`; `rows.rs` reads the rows.

use super::rows::{claimed_lease, job_state};
use super::{PgStore, key, sql, text};
use crate::error::Result;
use crate::policy::{self, Claimed};
use crate::store::Store;
use crate::types::{
    BatchSize, Enqueued, Failed, Fence, History, JobId, JobInfo, JobState, Lease, NewJob, Now,
    Owner, Queue, QueueInfo, Queues, Resource, Status, Ttl,
};

impl Store for PgStore {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool> {
        let inserted = self.enqueue_many(&[NewJob::new(job_id.as_str())?])?;
        Ok(inserted == [true])
    }

    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>> {
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::STATE).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(&statement, &[&key("job_id", job_id.as_str())?])
            .map_err(|e| self.err(e))?;
        Ok(row.as_ref().map(job_state))
    }

    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        let now = self.clock(now)?;
        let until = ttl.until(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::CLAIM).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(
                &statement,
                &[
                    &key("job_id", job_id.as_str())?,
                    &text("owner", owner.as_str())?,
                    &until,
                    &now.seconds(),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| claimed_lease(&r, owner)))
    }

    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool> {
        let now = self.clock(now)?;
        self.renew_at(job_id, owner, fence, now, ttl)
    }

    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> Result<bool> {
        let now = self.clock(now)?;
        self.write_one(
            sql::COMPLETE,
            &[
                &key("job_id", job_id.as_str())?,
                &text("owner", owner.as_str())?,
                &fence,
                &now.seconds(),
                &text("result", result)?,
            ],
        )
    }

    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool> {
        self.write_one(
            sql::RELEASE,
            &[
                &key("job_id", job_id.as_str())?,
                &text("owner", owner.as_str())?,
                &fence,
            ],
        )
    }

    fn enqueue_jobs(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        for job in jobs {
            key("job_id", job.id())?;
        }
        let mut conn = self.conn()?;
        let insert = conn.prepared(sql::ENQUEUE).map_err(|e| self.err(e))?;
        let matching = conn.prepared(sql::ENQUEUE_MATCH).map_err(|e| self.err(e))?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let outcomes = self.enqueue_on(&mut tx, jobs, &insert, &matching)?;
        tx.commit().map_err(|e| self.err(e))?;
        let inserted = outcomes.iter().filter(|o| o.is_inserted()).count();
        self.inform_planner(&mut conn, inserted);
        Ok(outcomes)
    }

    fn claim_next_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        if queues.names().is_some() {
            // Named queues: claim_batch_in.sql of one (each queue's own index walk).
            return Ok(self
                .claim_batch_in(queues, owner, now, ttl, BatchSize::ONE)?
                .pop());
        }
        self.claim_one(owner, now, ttl)
    }

    fn claim_batch_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> Result<Vec<Lease>> {
        if n == BatchSize::ONE && queues.names().is_none() {
            return Ok(self.claim_one(owner, now, ttl)?.into_iter().collect());
        }
        let now = self.clock(now)?;
        let until = ttl.until(now)?;
        text("owner", owner.as_str())?;
        let mut conn = self.conn()?;
        let rows = match queues.list() {
            None => {
                let statement = conn.prepared(sql::CLAIM_BATCH).map_err(|e| self.err(e))?;
                conn.query(
                    &statement,
                    &[&owner.as_str(), &until, &now.seconds(), &n.limit()],
                )
            }
            Some(names) => {
                let statement = conn
                    .prepared(sql::CLAIM_BATCH_IN)
                    .map_err(|e| self.err(e))?;
                conn.query(
                    &statement,
                    &[&owner.as_str(), &until, &now.seconds(), &n.limit(), &names],
                )
            }
        }
        .map_err(|e| self.err(e))?;
        let claimed = rows
            .iter()
            .map(|r| Claimed {
                lease: claimed_lease(r, owner),
                not_before: r.get(10),
                seq: r.get(11),
            })
            .collect();
        Ok(policy::best_first(claimed))
    }

    fn complete_batch(&self, completions: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>> {
        if completions.is_empty() {
            return Ok(Vec::new());
        }
        for (lease, result) in completions {
            key("job_id", &lease.job_id)?;
            text("owner", &lease.owner)?;
            text("result", result)?;
        }
        // Judged one after another, a repeated (id, owner, fence) can never be stored: the
        // first one stored it, or it was refused. Send each once; the repeats are refused.
        // (Different owners or fences of one id are all sent: at most one matches the row.)
        // How often each one came (`times`): the ledger counts every repeat as refused.
        let mut seen = std::collections::HashMap::new();
        let mut sent = Vec::with_capacity(completions.len());
        let (mut ids, mut owners, mut fences, mut results) = (vec![], vec![], vec![], vec![]);
        let mut times: Vec<i64> = vec![];
        for (k, (lease, result)) in completions.iter().enumerate() {
            let at = *seen
                .entry((&lease.job_id, &lease.owner, lease.fence))
                .or_insert_with(|| {
                    sent.push(k);
                    ids.push(lease.job_id.as_str());
                    owners.push(lease.owner.as_str());
                    fences.push(lease.fence);
                    results.push(*result);
                    times.push(0);
                    times.len() - 1
                });
            times[at] += 1;
        }
        let now = self.clock(now)?.seconds();
        let mut conn = self.conn()?;
        let statement = conn
            .prepared(sql::COMPLETE_BATCH)
            .map_err(|e| self.err(e))?;
        let rows = conn
            .query(
                &statement,
                &[&ids, &owners, &fences, &now, &results, &times],
            )
            .map_err(|e| self.err(e))?;
        let mut stored = vec![false; completions.len()];
        for row in rows {
            // WITH ORDINALITY counts from 1.
            let position: i64 = row.get(0);
            if let Some(&k) = usize::try_from(position - 1).ok().and_then(|i| sent.get(i)) {
                stored[k] = true;
            }
        }
        Ok(stored)
    }

    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> Result<Option<Failed>> {
        let now = self.clock(now)?;
        let retry_at = policy::retry_at(retry_at, lease, now);
        let (now, at) = (now.seconds(), retry_at.seconds());
        // As `complete` checks them: a NUL byte is an invalid argument, not a server error.
        key("job_id", &lease.job_id)?;
        text("owner", &lease.owner)?;
        text("error", error)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::FAIL).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(
                &statement,
                &[&lease.job_id, &lease.owner, &lease.fence, &now, &error, &at],
            )
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| {
            if r.get::<_, i32>(0) != 0 {
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
        self.read_history(key("job_id", job_id.as_str())?)
    }

    fn inspect(&self, job_id: JobId<'_>, now: Now) -> Result<Option<JobInfo>> {
        self.inspect_job(job_id, now)
    }

    /// As the trait's, but `lease.until` is computed from the clock the renew was judged by
    /// (the database's, with [`PgOptions::database_clock`](super::PgOptions::database_clock)).
    fn renew_lease(&self, lease: &mut Lease, now: Now, ttl: Ttl) -> Result<bool> {
        let now = self.clock(now)?;
        let renewed = self.renew_at(lease.job(), lease.holder(), lease.fence, now, ttl)?;
        if renewed {
            lease.until = ttl.until(now)?;
        }
        Ok(renewed)
    }

    fn database_now(&self) -> Result<Option<Now>> {
        if self.database_clock {
            self.now().map(Some)
        } else {
            Ok(None)
        }
    }

    fn pause(&self, queue: &Queue) -> Result<bool> {
        self.write_one(sql::PAUSE, &[&queue.as_str()])
    }

    fn resume(&self, queue: &Queue) -> Result<bool> {
        let resumed = self.write_one(sql::RESUME, &[&queue.as_str()])?;
        if resumed {
            self.write_one(sql::NOTIFY, &[&self.schema()])?;
        }
        Ok(resumed)
    }

    fn watch(&self) -> Result<Option<Box<dyn crate::store::Watch>>> {
        Ok(Some(Box::new(self.open_watch()?)))
    }

    fn queues(&self, now: Now) -> Result<Vec<QueueInfo>> {
        self.read_queues(now)
    }

    fn admit(&self, resource: Resource<'_>, fence: Fence) -> Result<bool> {
        let resource = key("resource", resource.as_str())?;
        let fence = crate::types::gate_fence(fence)?;
        self.write_one(sql::ADMIT, &[&resource, &fence])
    }

    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        for lease in leases {
            key("job_id", &lease.job_id)?;
            text("owner", &lease.owner)?;
        }
        // Judged one after another, a repeated (id, owner, fence) gets the first one's answer:
        // renewed to the same `until` again, or refused again. Send each once (one UPDATE
        // changes a row at most once) and give the repeats the answer of the one sent.
        // How often each one came (`times`): a refused one is counted in the ledger each time.
        let mut first = std::collections::HashMap::new();
        let mut sent_as = Vec::with_capacity(leases.len());
        let (mut ids, mut owners, mut fences) = (vec![], vec![], vec![]);
        let mut times: Vec<i64> = vec![];
        for lease in leases {
            let position = *first
                .entry((&lease.job_id, &lease.owner, lease.fence))
                .or_insert_with(|| {
                    ids.push(lease.job_id.as_str());
                    owners.push(lease.owner.as_str());
                    fences.push(lease.fence);
                    times.push(0);
                    ids.len()
                });
            times[position - 1] += 1;
            sent_as.push(position);
        }
        let now = self.clock(now)?;
        let until = ttl.until(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::RENEW_BATCH).map_err(|e| self.err(e))?;
        let rows = conn
            .query(
                &statement,
                &[&ids, &owners, &fences, &now.seconds(), &until, &times],
            )
            .map_err(|e| self.err(e))?;
        // WITH ORDINALITY counts from 1, as `sent_as` does.
        let renewed: std::collections::HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
        Ok(sent_as
            .into_iter()
            .map(|position| i64::try_from(position).is_ok_and(|p| renewed.contains(&p)))
            .collect())
    }
}

impl PgStore {
    /// `claim_next.sql`: the best ready job of every queue, in one statement. Both
    /// `claim_next_in` and `claim_batch_in` of one run it for every queue; neither calls the
    /// other (for named queues both run `claim_batch_in.sql`).
    fn claim_one(&self, owner: Owner<'_>, now: Now, ttl: Ttl) -> Result<Option<Lease>> {
        let now = self.clock(now)?;
        let until = ttl.until(now)?;
        text("owner", owner.as_str())?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::CLAIM_NEXT).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(&statement, &[&owner.as_str(), &until, &now.seconds()])
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| claimed_lease(&r, owner)))
    }
}
