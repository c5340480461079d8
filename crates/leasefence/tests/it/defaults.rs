//! The `Store` trait's default implementations, which a store other than the built-in two
//! inherits: `complete_batch` and `renew_batch` one call per item, in order, each item judged
//! exactly as its single call judges it. A store that delegates only the required operations to
//! an `SqliteStore` must see the same answers and rows as the transactional batch.

use leasefence::{
    BatchSize, Failed, Fence, JobId, JobInfo, JobState, Lease, NewJob, Now, Owner, Queue,
    QueueInfo, Queues, Resource, Schedule, ScheduleInfo, ScheduleName, SlotRun, SqliteStore, Stats,
    Status, Store, Ttl,
};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::Db;

/// Every required operation delegated; every provided one left to the trait's default. Its
/// first `cut` completions fail as a server that cannot be reached would (`write_outage.rs`).
pub(crate) struct Plain(pub(crate) SqliteStore, pub(crate) Arc<AtomicUsize>);

impl Store for Plain {
    fn enqueue(&self, job_id: JobId<'_>) -> leasefence::Result<bool> {
        self.0.enqueue(job_id)
    }
    fn state(&self, job_id: JobId<'_>) -> leasefence::Result<Option<JobState>> {
        self.0.state(job_id)
    }
    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> leasefence::Result<Option<Lease>> {
        self.0.claim(job_id, owner, now, ttl)
    }
    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> leasefence::Result<bool> {
        self.0.renew(job_id, owner, fence, now, ttl)
    }
    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> leasefence::Result<bool> {
        let cut = self
            .1
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |k| k.checked_sub(1));
        if cut.is_ok() {
            return Err(leasefence::Error::Unavailable {
                target: "http://10.0.0.9:7878".into(),
                reason: "connection refused (os error 111)".into(),
            });
        }
        self.0.complete(job_id, owner, fence, now, result)
    }
    fn release(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
    ) -> leasefence::Result<bool> {
        self.0.release(job_id, owner, fence)
    }
    fn enqueue_jobs(&self, jobs: &[NewJob]) -> leasefence::Result<Vec<leasefence::Enqueued>> {
        self.0.enqueue_jobs(jobs)
    }
    fn claim_batch_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> leasefence::Result<Vec<Lease>> {
        self.0.claim_batch_in(queues, owner, now, ttl, n)
    }
    fn pause(&self, queue: &Queue) -> leasefence::Result<bool> {
        self.0.pause(queue)
    }
    fn resume(&self, queue: &Queue) -> leasefence::Result<bool> {
        self.0.resume(queue)
    }
    fn queues(&self, now: Now) -> leasefence::Result<Vec<QueueInfo>> {
        self.0.queues(now)
    }
    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> leasefence::Result<Option<Failed>> {
        self.0.fail(lease, now, error, retry_at)
    }
    fn cancel(&self, job_id: JobId<'_>, now: Now) -> leasefence::Result<bool> {
        self.0.cancel(job_id, now)
    }
    fn purge(&self, finished_before: Now) -> leasefence::Result<u64> {
        self.0.purge(finished_before)
    }
    fn list(
        &self,
        now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> leasefence::Result<Vec<JobInfo>> {
        self.0.list(now, status, after, limit)
    }
    fn history(&self, job_id: JobId<'_>) -> leasefence::Result<Option<leasefence::History>> {
        self.0.history(job_id)
    }
    fn add_schedule(&self, schedule: &Schedule, now: Now) -> leasefence::Result<bool> {
        self.0.add_schedule(schedule, now)
    }
    fn remove_schedule(&self, name: ScheduleName<'_>) -> leasefence::Result<bool> {
        self.0.remove_schedule(name)
    }
    fn schedules(&self) -> leasefence::Result<Vec<ScheduleInfo>> {
        self.0.schedules()
    }
    fn enqueue_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[SlotRun],
    ) -> leasefence::Result<Option<Vec<Option<leasefence::Enqueued>>>> {
        self.0.enqueue_slots(scheduler, now, runs)
    }
    fn inspect(&self, job_id: JobId<'_>, now: Now) -> leasefence::Result<Option<JobInfo>> {
        self.0.inspect(job_id, now)
    }
    fn retry(&self, job_ids: &[JobId<'_>], now: Now) -> leasefence::Result<Vec<bool>> {
        self.0.retry(job_ids, now)
    }
    fn retry_dead_in(&self, queues: &Queues, now: Now) -> leasefence::Result<u64> {
        self.0.retry_dead_in(queues, now)
    }
    fn delete(&self, job_ids: &[JobId<'_>]) -> leasefence::Result<Vec<bool>> {
        self.0.delete(job_ids)
    }
    fn stats(&self, now: Now) -> leasefence::Result<Stats> {
        self.0.stats(now)
    }
    fn admit(&self, resource: Resource<'_>, fence: Fence) -> leasefence::Result<bool> {
        self.0.admit(resource, fence)
    }
}

fn now(t: f64) -> Now {
    Now::new(t).unwrap()
}

fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}

/// A `Plain` store with jobs `a`, `b`, `c` claimed by `w` at 10 for 30 (until 40), and a
/// copy of `b`'s lease with a made-up later fence.
fn three_claimed() -> (Db, Plain, Vec<Lease>, Lease) {
    let db = Db::new();
    let store = Plain(SqliteStore::open(&db.path).unwrap(), Arc::default());
    let jobs: Vec<NewJob> = ["a", "b", "c"].map(|id| NewJob::new(id).unwrap()).into();
    store.enqueue_many(&jobs).unwrap();
    let leases = store
        .claim_batch(
            Owner::new("w").unwrap(),
            now(10.0),
            ttl(30.0),
            BatchSize::new(3).unwrap(),
        )
        .unwrap();
    let mut stale = leases[1].clone();
    stale.fence += 1;
    (db, store, leases, stale)
}

/// `(result, done, fence)` of a job, read by a connection of the test's own.
fn stored(db: &Db, id: &str) -> (Option<String>, i64, i64) {
    let row = db.row(id).expect("the row exists");
    (row.result, row.done, row.fence)
}

#[test]
fn the_default_complete_batch_judges_each_item_alone_in_order() {
    let (db, store, leases, stale) = three_claimed();
    let answers = store
        .complete_batch(
            &[
                (&leases[0], "done a"),
                (&stale, "stale b"),
                (&leases[2], "done c"),
                (&leases[0], "again a"),
            ],
            now(20.0),
        )
        .unwrap();
    assert_eq!(answers, [true, false, true, false]);
    assert_eq!(stored(&db, "a"), (Some("done a".into()), 1, 1));
    assert_eq!(stored(&db, "b"), (None, 0, 1));
    assert_eq!(stored(&db, "c"), (Some("done c".into()), 1, 1));
    // Nothing to complete: nothing to answer.
    assert_eq!(
        store.complete_batch(&[], now(21.0)).unwrap(),
        Vec::<bool>::new()
    );
}

#[test]
fn the_default_renew_batch_judges_each_lease_alone_in_order() {
    let (db, store, leases, stale) = three_claimed();
    let answers = store
        .renew_batch(&[&leases[0], &stale, &leases[2]], now(20.0), ttl(30.0))
        .unwrap();
    assert_eq!(answers, [true, false, true]);
    let until = |id: &str| db.row(id).unwrap().until;
    assert_eq!((until("a"), until("b"), until("c")), (50.0, 40.0, 50.0));
    // Expired by 45 for b (until 40), live for a: an expired lease is never revived.
    let answers = store
        .renew_batch(&[&leases[1], &leases[0]], now(45.0), ttl(30.0))
        .unwrap();
    assert_eq!(answers, [false, true]);
    assert_eq!((until("a"), until("b")), (75.0, 40.0));
    assert_eq!(
        store.renew_batch(&[], now(46.0), ttl(30.0)).unwrap(),
        Vec::<bool>::new()
    );
}
