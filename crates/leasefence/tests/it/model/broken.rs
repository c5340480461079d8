//! Deliberately broken stores: a kept `SqliteStore` with one operation replaced by a wrong
//! one. The model-based checker must catch each (a checker that cannot fail proves nothing).

use std::path::Path;

use leasefence::rusqlite::{Connection, params};
use leasefence::{
    BatchSize, Failed, Fence, JobId, JobInfo, JobState, Lease, NewJob, Now, Owner, Resource,
    SqliteStore, Stats, Status, Store, Ttl,
};

/// What is broken.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// `release` returns `true` without releasing anything.
    ReleaseLies,
    /// `renew` without the liveness check (`until > now` dropped): an expired lease that nobody
    /// re-claimed is revived — the mutant `renew.sql` without `AND until > ?4`.
    RenewRevives,
}

pub struct Broken {
    inner: SqliteStore,
    raw: Connection,
    fault: Fault,
}

impl Broken {
    pub fn new(path: &Path, fault: Fault) -> Broken {
        Broken {
            inner: super::fast_sqlite(path),
            raw: Connection::open(path).expect("a connection of the broken store's own"),
            fault,
        }
    }
}

impl Store for Broken {
    fn enqueue(&self, job_id: JobId<'_>) -> leasefence::Result<bool> {
        self.inner.enqueue(job_id)
    }
    fn state(&self, job_id: JobId<'_>) -> leasefence::Result<Option<JobState>> {
        self.inner.state(job_id)
    }
    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> leasefence::Result<Option<Lease>> {
        self.inner.claim(job_id, owner, now, ttl)
    }
    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> leasefence::Result<bool> {
        match self.fault {
            Fault::RenewRevives => {
                let until = ttl.until(now)?;
                let changed = self
                    .raw
                    .execute(
                        "UPDATE jobs SET until = ?4 \
                         WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0",
                        params![job_id.as_str(), owner.as_str(), fence, until],
                    )
                    .expect("broken renew");
                Ok(changed == 1)
            }
            Fault::ReleaseLies => self.inner.renew(job_id, owner, fence, now, ttl),
        }
    }
    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> leasefence::Result<bool> {
        self.inner.complete(job_id, owner, fence, now, result)
    }
    fn release(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
    ) -> leasefence::Result<bool> {
        match self.fault {
            Fault::ReleaseLies => Ok(true),
            Fault::RenewRevives => self.inner.release(job_id, owner, fence),
        }
    }
    fn enqueue_jobs(&self, jobs: &[NewJob]) -> leasefence::Result<Vec<leasefence::Enqueued>> {
        self.inner.enqueue_jobs(jobs)
    }
    fn claim_batch_in(
        &self,
        queues: &leasefence::Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> leasefence::Result<Vec<Lease>> {
        self.inner.claim_batch_in(queues, owner, now, ttl, n)
    }
    fn pause(&self, queue: &leasefence::Queue) -> leasefence::Result<bool> {
        self.inner.pause(queue)
    }
    fn resume(&self, queue: &leasefence::Queue) -> leasefence::Result<bool> {
        self.inner.resume(queue)
    }
    fn queues(&self, now: Now) -> leasefence::Result<Vec<leasefence::QueueInfo>> {
        self.inner.queues(now)
    }
    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> leasefence::Result<Option<Failed>> {
        self.inner.fail(lease, now, error, retry_at)
    }
    fn cancel(&self, job_id: JobId<'_>, now: Now) -> leasefence::Result<bool> {
        self.inner.cancel(job_id, now)
    }
    fn purge(&self, finished_before: Now) -> leasefence::Result<u64> {
        self.inner.purge(finished_before)
    }
    fn list(
        &self,
        now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> leasefence::Result<Vec<JobInfo>> {
        self.inner.list(now, status, after, limit)
    }
    fn history(&self, job_id: JobId<'_>) -> leasefence::Result<Option<leasefence::History>> {
        self.inner.history(job_id)
    }
    fn add_schedule(&self, schedule: &leasefence::Schedule, now: Now) -> leasefence::Result<bool> {
        self.inner.add_schedule(schedule, now)
    }
    fn remove_schedule(&self, name: leasefence::ScheduleName<'_>) -> leasefence::Result<bool> {
        self.inner.remove_schedule(name)
    }
    fn schedules(&self) -> leasefence::Result<Vec<leasefence::ScheduleInfo>> {
        self.inner.schedules()
    }
    fn enqueue_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[leasefence::SlotRun],
    ) -> leasefence::Result<Option<Vec<Option<leasefence::Enqueued>>>> {
        self.inner.enqueue_slots(scheduler, now, runs)
    }
    fn inspect(&self, job_id: JobId<'_>, now: Now) -> leasefence::Result<Option<JobInfo>> {
        self.inner.inspect(job_id, now)
    }
    fn retry(&self, job_ids: &[JobId<'_>], now: Now) -> leasefence::Result<Vec<bool>> {
        self.inner.retry(job_ids, now)
    }
    fn retry_dead_in(&self, queues: &leasefence::Queues, now: Now) -> leasefence::Result<u64> {
        self.inner.retry_dead_in(queues, now)
    }
    fn delete(&self, job_ids: &[JobId<'_>]) -> leasefence::Result<Vec<bool>> {
        self.inner.delete(job_ids)
    }
    fn stats(&self, now: Now) -> leasefence::Result<Stats> {
        self.inner.stats(now)
    }
    fn admit(&self, resource: Resource<'_>, fence: Fence) -> leasefence::Result<bool> {
        self.inner.admit(resource, fence)
    }
}
