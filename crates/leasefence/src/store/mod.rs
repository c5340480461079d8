//! The `Store` trait: the seam every backend implements, and the [`Watch`] it hands out.

mod each;
mod observe;
mod watch;

pub use observe::Observe;
pub use watch::Watch;

use crate::error::Result;
use crate::types::{
    BatchSize, Enqueued, Failed, Fence, History, JobId, JobInfo, JobState, Lease, NewJob, Now,
    Owner, Queue, QueueInfo, Queues, Resource, Stats, Status, Ttl,
};

/// The lease-and-fence contract, one method per operation.
///
/// Every backend implements exactly these semantics; the contract suite in `tests/it` runs one
/// set of test bodies against each of them. Arguments arrive already validated ([`JobId`],
/// [`Owner`], [`Now`], [`Ttl`], [`BatchSize`], [`Resource`]), so a backend never decides what
/// is valid input; the decisions that are not storage (the order of a claimed batch, the
/// default retry time) are shared code above the seam, so a backend implements storage only.
/// `docs/architecture.md` lists what a new backend must provide.
///
/// A refusal by the contract is a value (`false` / `None`), never an error. Every method returns
/// an [`Error`](crate::Error) only when the call could not be judged (busy database, I/O failure,
/// …), and then nothing was changed — with two exceptions, said where they apply: when the
/// connection is lost ([`Error::ConnectionLost`](crate::Error::ConnectionLost)) while a commit
/// is under way, whether it took effect is unknown until the state is read back; and the
/// default [`Store::complete_batch`] and [`Store::renew_batch`] (for a backend without its
/// own) are not one transaction.
///
/// Clock values are the caller's and assumed non-decreasing. A lease is **live** while
/// `until > now`; at `now == until` it has expired.
pub trait Store {
    /// Adds an unknown job with the default state (no owner, `until = 0`, `fence = 0`, no result,
    /// not done) and returns `true`. A known id returns `false` and its row is left exactly as it
    /// was: an in-flight lease or a finished result is never reset.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool>;

    /// The stored row for `job_id`, read from the database (never from a cache); `None` for an
    /// unknown id.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>>;

    /// Takes the lease on a claimable job and returns it: the new fence **and** the lease end,
    /// with the job's payload and queue settings, so the caller never reads the row again. A
    /// job is claimable when it exists, is not done and its lease has expired (`until <= now`;
    /// `now == until` is expired). Then, atomically with that check: `owner = owner`,
    /// `until = now + ttl`, `fence = fence + 1`. Unknown, done or still-leased jobs return
    /// `None` and nothing changes; so does a job whose attempts budget
    /// ([`NewJob::max_attempts`](crate::NewJob::max_attempts)) is spent — the next
    /// [`claim_next`](Store::claim_next) or [`claim_batch`](Store::claim_batch) buries it as
    /// dead. Of any number of concurrent claims of one claimable job,
    /// exactly one gets a lease.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) when `now + ttl` rounds back to
    /// `now` (naming `ttl` when it is under a second, else `now`); busy or backend failures.
    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>>;

    /// Extends a live lease to `until = now + ttl` and returns `true`, only when `owner` and
    /// `fence` match the stored ones, the job is not done and the lease is still live
    /// (`until > now`). Otherwise `false` and nothing changes: an expired lease is never
    /// revived, even if nobody else took it.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) when `now + ttl` rounds back to
    /// `now` (naming `ttl` when it is under a second, else `now`); busy or backend failures.
    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool>;

    /// Stores `result`, marks the job done and returns `true`, only when the lease is current:
    /// `owner` and `fence` match, the job is not done and `until > now`. Otherwise `false`, and
    /// any earlier result stays. Owner, fence and `until` are kept as they were, as a record of
    /// who finished the job under which fence.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> Result<bool>;

    /// Gives a lease back early: for the row whose `owner` and `fence` match and that is not
    /// done, sets `owner = NULL`, `until = 0` and returns `true`. The **fence is kept**, so the
    /// next claim hands out a higher one. Otherwise `false` and nothing changes. Release does
    /// not look at the clock: the matching holder of an expired lease that nobody re-claimed
    /// may still release it.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool>;

    // ---- the queue ----------------------------------------------------------------------

    /// Enqueues every job of `jobs` in one transaction, with its queue, kind, payload,
    /// priority, not-before time, attempts budget and unique key. Returns, per job in input
    /// order, what happened: [`Enqueued::Inserted`]; [`Enqueued::Known`] for a known id, left
    /// untouched exactly as [`Store::enqueue`] leaves it; or [`Enqueued::Duplicate`] naming the
    /// job that holds the same [unique key](NewJob::unique_key) in the same queue. Uniqueness
    /// is decided inside the insert by a unique index, so of any number of concurrent enqueuers
    /// of one key, exactly one inserts; a later job of a batch can match an earlier one.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{Enqueued, NewJob, SqliteStore, Store};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// let report = |id: &str| NewJob::new(id)?.queue("reports")?.unique_key("daily-2026-12-01");
    /// assert_eq!(store.enqueue_jobs(&[report("r-1")?])?, [Enqueued::Inserted]);
    /// // The same key in the same queue while r-1 is unfinished: nothing inserted.
    /// assert_eq!(store.enqueue_jobs(&[report("r-2")?])?, [Enqueued::Duplicate { of: "r-1".into() }]);
    /// assert_eq!(store.enqueue_jobs(&[report("r-1")?])?, [Enqueued::Known]);
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// Busy or backend failures; then none of the jobs was inserted.
    fn enqueue_jobs(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>>;

    /// [`Store::enqueue_jobs`], told as whether each job was inserted: `false` for a known id
    /// or a duplicate unique key.
    ///
    /// # Errors
    /// As [`Store::enqueue_jobs`].
    fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<bool>> {
        Ok(each::inserted(&self.enqueue_jobs(jobs)?))
    }

    /// Enqueues one job with its payload and queue settings: [`Store::enqueue_many`] of one.
    /// `true` when inserted; `false` for a known id, left untouched.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{NewJob, SqliteStore, Store};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// assert!(store.enqueue_job(NewJob::new("resize-1")?.payload(b"640x480".to_vec()))?);
    /// assert!(!store.enqueue_job(NewJob::new("resize-1")?)?); // known: untouched
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Store::enqueue_many`].
    fn enqueue_job(&self, job: NewJob) -> Result<bool> {
        Ok(self.enqueue_many(std::slice::from_ref(&job))? == [true])
    }

    /// Claims the best ready job of any queue: [`Store::claim_next_in`] of [`Queues::All`].
    ///
    /// # Errors
    /// As [`Store::claim_next_in`].
    fn claim_next(&self, owner: Owner<'_>, now: Now, ttl: Ttl) -> Result<Option<Lease>> {
        self.claim_next_in(&Queues::All, owner, now, ttl)
    }

    /// Claims the best ready job of `queues`: highest priority, then earliest not-before, then
    /// oldest. Ready means not done, lease expired (`until <= now`), due (`not_before <= now`),
    /// attempts left, in one of `queues` and its queue not [paused](Store::pause). Checked and
    /// written in one transaction, so concurrent callers never get the same job under the same
    /// fence. This is [`Store::claim_batch_in`] of [`BatchSize::ONE`]; a backend may override
    /// it with a faster statement of the same meaning (SQLite does), and its `claim_batch_in`
    /// must then not call it back.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{NewJob, Now, Owner, Queue, Queues, SqliteStore, Store, Ttl};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// store.enqueue_job(NewJob::new("mail-1")?.queue("emails")?)?;
    /// store.enqueue_job(NewJob::new("pdf-1")?.queue("reports")?)?;
    /// let (w, now, ttl) = (Owner::new("w")?, Now::new(0.0)?, Ttl::new(30.0)?);
    /// let lease = store.claim_next_in(&Queues::only(["reports"])?, w, now, ttl)?.unwrap();
    /// assert_eq!((lease.job_id.as_str(), lease.queue.as_str()), ("pdf-1", "reports"));
    /// // A paused queue hands out nothing.
    /// store.pause(&Queue::new("emails")?)?;
    /// assert!(store.claim_next(w, now, ttl)?.is_none());
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) when `now + ttl` rounds back to
    /// `now` (naming `ttl` when it is under a second, else `now`); busy or backend failures.
    fn claim_next_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        each::claim_next_in(self, queues, owner, now, ttl)
    }

    /// Claims up to `n` ready jobs of any queue: [`Store::claim_batch_in`] of [`Queues::All`].
    ///
    /// # Errors
    /// As [`Store::claim_batch_in`].
    fn claim_batch(
        &self,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> Result<Vec<Lease>> {
        self.claim_batch_in(&Queues::All, owner, now, ttl, n)
    }

    /// Claims up to `n` ready jobs of `queues` in one transaction (one commit), best first;
    /// see [`Store::claim_next_in`].
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) when `now + ttl` rounds back to
    /// `now` (naming `ttl` when it is under a second, else `now`); busy or backend failures.
    fn claim_batch_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> Result<Vec<Lease>>;

    /// Records a failed attempt, fenced like `complete` (owner, fence, not done, `until > now`).
    /// The lease is given up (fence kept) and the error stored; the job becomes claimable again
    /// at `retry_at` — by default after exponential backoff with jitter
    /// ([`Backoff::default`](crate::Backoff)) — or dead when that was its last attempt.
    /// Returns `None`, changing nothing, when the lease is no longer current.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> Result<Option<Failed>>;

    /// Cancels an unfinished job (`done = 1`, outcome `cancelled`): it is never handed out
    /// again, and its current holder's renew, complete and fail are refused from now on. A
    /// finished job is left as it is (`false`). The fence is kept.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn cancel(&self, job_id: JobId<'_>, now: Now) -> Result<bool>;

    /// Makes dead or cancelled jobs ready again with a fresh attempts budget: an **operator
    /// verb**, not fenced (like `cancel`). One transaction; per id, in order, `true` if it was
    /// retried (an id given twice is retried once and both entries report it). Dead means
    /// finished as dead, or its budget spent with its last lease expired. A completed job keeps
    /// its result and an unknown, waiting or running job is left alone (`false`). The fence is
    /// kept: the next claim continues above every fence handed out, and a holder of a cancelled
    /// job's old lease can store nothing. The last error is cleared with the budget, and the
    /// job is due at the earlier of its not-before and `now`: at once.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{JobId, NewJob, Now, Owner, SqliteStore, Store, Ttl};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// store.enqueue_job(NewJob::new("flaky")?.max_attempts(1))?;
    /// let (w, t0, ttl) = (Owner::new("w")?, Now::new(0.0)?, Ttl::new(30.0)?);
    /// let lease = store.claim_next(w, t0, ttl)?.unwrap();
    /// store.fail(&lease, Now::new(1.0)?, "upstream down", None)?; // its only attempt: dead
    /// assert_eq!(store.retry(&[JobId::new("flaky")?], Now::new(2.0)?)?, [true]);
    /// let again = store.claim_next(w, Now::new(3.0)?, ttl)?.unwrap();
    /// assert_eq!((again.fence, again.attempt), (2, 1)); // fence continues, budget is fresh
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// Busy or backend failures; then nothing was retried. Busy also when, on PostgreSQL, a
    /// concurrent enqueue took a retried job's unique key meanwhile: tried again, the job is
    /// left as it is (`false`).
    fn retry(&self, job_ids: &[JobId<'_>], now: Now) -> Result<Vec<bool>>;

    /// [`retry`](Store::retry) for every dead job (cancelled ones are retried by id only):
    /// [`Store::retry_dead_in`] of [`Queues::All`].
    ///
    /// # Errors
    /// As [`Store::retry_dead_in`].
    fn retry_dead(&self, now: Now) -> Result<u64> {
        self.retry_dead_in(&Queues::All, now)
    }

    /// [`retry`](Store::retry) for every dead job of `queues`, in one transaction; returns how
    /// many. An operator verb, not fenced.
    ///
    /// # Errors
    /// Busy or backend failures; then nothing was retried.
    fn retry_dead_in(&self, queues: &Queues, now: Now) -> Result<u64>;

    /// Removes jobs by id, finished or not: an **operator verb**, not fenced. One
    /// transaction; per id, in order, `true` if it existed (an id given twice: both entries
    /// report it). The last fence of every deleted id is kept as its floor, as `purge` does,
    /// so the same id enqueued again continues above every fence it had; a holder of a
    /// deleted job's lease can store nothing.
    ///
    /// # Errors
    /// Busy or backend failures; then nothing was deleted.
    fn delete(&self, job_ids: &[JobId<'_>]) -> Result<Vec<bool>>;

    /// Deletes finished jobs (completed, dead or cancelled) that finished before
    /// `finished_before`, and returns how many. The last fence of every purged id is kept as a
    /// floor, so enqueueing the same id again continues the sequence: a fence number is never
    /// issued twice for the same id. A job enqueued with a unique key and a window
    /// ([`NewJob::unique_for`](crate::NewJob::unique_for)) is kept until that window has passed
    /// (by the clock the enqueue judges it by): until then it still holds its key.
    ///
    /// # Errors
    /// Busy or backend failures; then nothing was deleted.
    fn purge(&self, finished_before: Now) -> Result<u64>;

    /// Up to `limit` jobs in enqueue order, oldest first, with their status at `now`; only
    /// those with `status` when given; only those enqueued after the job `after` when given (a
    /// keyset cursor: pass the last id of one page to get the next, unaffected by jobs
    /// finishing or being enqueued meanwhile).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{JobId, NewJob, Now, SqliteStore, Store};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// store.enqueue_many(&[NewJob::new("a")?, NewJob::new("b")?, NewJob::new("c")?])?;
    /// let now = Now::new(0.0)?;
    /// let first = store.list(now, None, None, 2)?;
    /// assert_eq!(first.iter().map(|j| j.id()).collect::<Vec<_>>(), ["a", "b"]);
    /// let next = store.list(now, None, Some(JobId::new(first[1].id())?), 2)?;
    /// assert_eq!(next.iter().map(|j| j.id()).collect::<Vec<_>>(), ["c"]);
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `after` when no job
    /// has that id (deleted or purged since the page was read); busy or backend failures.
    fn list(
        &self,
        now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<JobInfo>>;

    /// One job with every field and its status at `now` (what `list` shows of it), or `None`
    /// for an unknown id. A read: it changes nothing.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn inspect(&self, job_id: JobId<'_>, now: Now) -> Result<Option<JobInfo>>;

    /// The job's attempt ledger, or `None` for an unknown id: every claim (its fence, owner,
    /// when it was claimed and ended, its [outcome](crate::AttemptOutcome) and error) and the
    /// refused writes counted per fence. The store writes it in the same transaction as each
    /// claim, completion, failure, release, cancel and expiry it records, so it cannot miss
    /// one; it is kept across `retry` and removed with its job by `delete` and `purge`. A read
    /// (one snapshot): it changes nothing.
    ///
    /// [`History`] shows one: a takeover and the stale write it refused.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn history(&self, job_id: JobId<'_>) -> Result<Option<History>>;

    /// Adds `schedule` unless one of its name exists (`false`: the known one is left exactly
    /// as it was; remove it first to change it). Its first run is its first slot after `now`
    /// (in whole seconds): a new schedule never runs the slots before it was added. An
    /// **operator verb**, not fenced. Needs the cargo feature `cron`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{Now, Schedule, SqliteStore, Store};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// let hourly = Schedule::new("sync", "@hourly")?.queue("sync")?;
    /// let t0 = 1_796_083_200; // 2026-12-01T00:00:00Z
    /// assert!(store.add_schedule(&hourly, Now::new(t0 as f64)?)?);
    /// assert!(!store.add_schedule(&hourly, Now::new(t0 as f64 + 1.0)?)?); // known name
    /// let info = &store.schedules()?[0];
    /// assert_eq!((info.last_slot, info.next_slot()?), (t0, Some(t0 + 3_600)));
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) naming `now` when it is not a time
    /// the calendar can hold (Unix seconds); busy or backend failures.
    #[cfg(feature = "cron")]
    fn add_schedule(&self, schedule: &crate::Schedule, now: Now) -> Result<bool>;

    /// Removes the schedule `name`; `true` if there was one. The runs it already enqueued
    /// stay. An **operator verb**, not fenced. Needs the cargo feature `cron`.
    ///
    /// # Errors
    /// Busy or backend failures.
    #[cfg(feature = "cron")]
    fn remove_schedule(&self, name: crate::ScheduleName<'_>) -> Result<bool>;

    /// Every schedule, by name, with when it was added and its last slot enqueued. A read.
    /// Needs the cargo feature `cron`.
    ///
    /// # Errors
    /// Busy or backend failures.
    #[cfg(feature = "cron")]
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>>;

    /// The scheduler's fenced write: in **one transaction**, checks that `scheduler` is the
    /// current lease on the job [`SCHEDULER_JOB`](crate::SCHEDULER_JOB) (owner and fence
    /// match, not done, `until > now`: the rule of `complete`), then for each run moves its
    /// schedule's `last_slot` from `run.after` to `run.slot` and enqueues `run.job` — only
    /// when the stored `last_slot` is still `run.after` and `run.slot` is later (a schedule
    /// removed, re-added or advanced since is skipped: `None` for that run). Returns per run,
    /// in order, what its enqueue did. A lease that is no longer current returns `None`,
    /// changes nothing and is counted in the scheduler job's ledger as a refused `schedule`
    /// write. So a slot is enqueued at most once, whoever ticks, and a stalled scheduler's
    /// late enqueue is refused. [`tick`](crate::tick) computes the runs; use it (or a
    /// [`Scheduler`](crate::Scheduler)) rather than calling this directly. Needs the cargo
    /// feature `cron`.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) naming `scheduler` for a lease on
    /// another job; busy or backend failures; then nothing was written.
    #[cfg(feature = "cron")]
    fn enqueue_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[crate::SlotRun],
    ) -> Result<Option<Vec<Option<Enqueued>>>>;

    /// Pauses `queue`: from now on claims ([`Store::claim_next_in`], [`Store::claim_batch_in`]
    /// and the worker's) hand out none of its jobs; leases already held in it stay valid, and
    /// their renew, complete, fail and release go on as before. A queue can be paused before
    /// it has jobs. An **operator verb**, not fenced. `true` if it was not paused before.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn pause(&self, queue: &Queue) -> Result<bool>;

    /// Lets a paused `queue` hand out jobs again. An operator verb, not fenced. `true` if it
    /// was paused.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn resume(&self, queue: &Queue) -> Result<bool>;

    /// Every queue that has jobs or was ever paused, by name, with whether it is paused and
    /// its jobs' counts by status at `now`. A read that never walks every job: finished jobs
    /// are counted as they finish, and each unfinished status is read from an index of its
    /// own candidates.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn queues(&self, now: Now) -> Result<Vec<QueueInfo>>;

    /// Counts of jobs by status at `now`: the sum of [`Store::queues`]' counts.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn stats(&self, now: Now) -> Result<Stats> {
        Ok(crate::policy::totals(&self.queues(now)?))
    }

    /// The fence gate for a resource outside the store: admits `fence` (`true`) only if it is
    /// at least the highest fence already admitted for `resource`, and records it; otherwise
    /// `false` and nothing changes. Atomic: of two racing writers, the older generation can
    /// never be admitted after the newer one.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `fence` for a fence
    /// below 1 (no claim hands one out; nothing is recorded); busy or backend failures.
    fn admit(&self, resource: Resource<'_>, fence: Fence) -> Result<bool>;

    /// The clock this store judges leases by, when that is not the caller's: `Some(reading)`
    /// for a store whose operations ignore their `now` argument and read the database's own
    /// clock (`PgStore` opened with `PgOptions::database_clock`); `None` (the default, and
    /// always on SQLite) when every operation judges by the `now` it is given. The
    /// [`Worker`](crate::Worker) uses it to put its own clock on the store's timescale.
    ///
    /// # Errors
    /// Connection or backend failures while reading the database's clock.
    fn database_now(&self) -> Result<Option<Now>> {
        Ok(None)
    }

    /// A [`Watch`] on this store, for waking an idle worker as soon as jobs may be ready,
    /// or `None` (the default) when the store has none and callers poll. SQLite's opens a
    /// read-only connection of its own and wakes on any other connection's commit to the file
    /// (and at once for an enqueue from this process); PostgreSQL's opens a connection of its
    /// own that `LISTEN`s for the `NOTIFY` of every enqueue, retry and resume in the schema.
    /// [`Watch`] shows one in use.
    ///
    /// # Errors
    /// When the watch's own connection cannot be opened.
    fn watch(&self) -> Result<Option<Box<dyn Watch>>> {
        Ok(None)
    }

    // ---- conveniences over a Lease --------------------------------------------------------

    /// [`Store::renew`] for `lease`; on success `lease.until` is updated.
    ///
    /// # Errors
    /// As [`Store::renew`].
    fn renew_lease(&self, lease: &mut Lease, now: Now, ttl: Ttl) -> Result<bool> {
        each::renew_lease(self, lease, now, ttl)
    }

    /// [`Store::complete`] for `lease`.
    ///
    /// # Errors
    /// As [`Store::complete`].
    fn complete_lease(&self, lease: &Lease, now: Now, result: &str) -> Result<bool> {
        self.complete(lease.job(), lease.holder(), lease.fence, now, result)
    }

    /// Completes several leases in **one transaction** (one commit, one fsync), each judged
    /// exactly as [`Store::complete`] judges it at `now`: per item, in input order, whether its
    /// result was stored. A refused item changes nothing and does not stop the others. This is
    /// how a worker with many short jobs amortises the commit. [`SqliteStore`](crate::SqliteStore)
    /// and `PgStore` do it in one transaction; the default implementation, for other stores,
    /// completes one lease per call (see `# Errors`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{BatchSize, NewJob, Now, Owner, SqliteStore, Store, Ttl};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// store.enqueue_many(&[NewJob::new("a")?, NewJob::new("b")?])?;
    /// let (w1, at, ttl) = (Owner::new("w1")?, Now::new(0.0)?, Ttl::new(30.0)?);
    /// let leases = store.claim_batch(w1, at, ttl, BatchSize::new(2)?)?;
    /// let results = [(&leases[0], "done a"), (&leases[1], "done b")];
    /// assert_eq!(store.complete_batch(&results, Now::new(1.0)?)?, [true, true]);
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// Busy or backend failures. With [`SqliteStore`](crate::SqliteStore) and `PgStore` none
    /// of the results was then stored; with the default implementation, the items before the
    /// failing one may have been.
    fn complete_batch(&self, completions: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>> {
        each::complete_each(self, completions, now)
    }

    /// Renews several leases at `now` in **one transaction** (one commit), each judged exactly
    /// as [`Store::renew`] judges it: per item, in input order, whether it was renewed to
    /// `until = now + ttl` (owner and fence match, not done, `until > now`: an expired lease is
    /// never revived). A refused item changes nothing and does not stop the others. The leases
    /// themselves are not updated. This is how the worker's heartbeat renews every lease it
    /// holds with one call per tick. [`SqliteStore`](crate::SqliteStore) and `PgStore` do it in
    /// one transaction; the default implementation, for other stores, renews one lease per
    /// call (see `# Errors`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{BatchSize, NewJob, Now, Owner, SqliteStore, Store, Ttl};
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// store.enqueue_many(&[NewJob::new("a")?, NewJob::new("b")?])?;
    /// let ttl = Ttl::new(30.0)?;
    /// let leases = store.claim_batch(Owner::new("w1")?, Now::new(0.0)?, ttl, BatchSize::new(2)?)?;
    /// assert_eq!(store.renew_batch(&[&leases[0], &leases[1]], Now::new(10.0)?, ttl)?, [true, true]);
    /// // Both now live until 40; at 40 they have expired and are never revived.
    /// assert_eq!(store.renew_batch(&[&leases[0]], Now::new(40.0)?, ttl)?, [false]);
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) when `now + ttl` rounds back to
    /// `now` (naming `ttl` when it is under a second, else `now`); busy or backend failures. With [`SqliteStore`](crate::SqliteStore) and
    /// `PgStore` none of the leases was then renewed; with the default implementation, the
    /// items before the failing one may have been.
    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>> {
        each::renew_each(self, leases, now, ttl)
    }

    /// [`Store::release`] for `lease`.
    ///
    /// # Errors
    /// As [`Store::release`].
    fn release_lease(&self, lease: &Lease) -> Result<bool> {
        self.release(lease.job(), lease.holder(), lease.fence)
    }
}
