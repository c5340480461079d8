//! [`JobContext`]: what a handler gets for one job.

use std::fmt;
use std::sync::atomic::Ordering;

use super::cancel::CancelToken;
use super::clock::WorkerClock;
use super::job::{
    Job, Phase, SETTLED_CANCELLED, SETTLED_COMPLETED, SETTLED_REFUSED, SETTLED_RELEASED,
};
use super::loss::{mark_lost, reason, refused_at};
use super::stats::{Counters, bump};
use super::sync::lock;
use crate::error::{Error, Result};
use crate::sqlite::SqliteStore;
use crate::store::Store;
use crate::types::{Fence, Lease, Now, Resource, Status};

/// The error a handler returns: any error (`?` converts it), a `&str` or a `String`
/// (`.into()`); its `Display` is stored as the job's failure.
///
/// ```
/// use leasefence::HandlerError;
/// let parsed: Result<u32, HandlerError> = "12x".parse::<u32>().map_err(Into::into);
/// assert_eq!(parsed.unwrap_err().to_string(), "invalid digit found in string");
/// let plain: HandlerError = "disk full".into();
/// assert_eq!(plain.to_string(), "disk full");
/// ```
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// What a handler gets for one job: the lease, the lost-lease flag and cancellation token, and
/// ways to fence its own side effects.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use std::time::Duration;
/// use leasefence::{NewJob, SqliteStore, Store, Worker};
///
/// let path = dir.path().join("jobs.db");
/// SqliteStore::open(&path)?.enqueue_many(&[NewJob::new("resize-1")?.payload(b"640".to_vec())])?;
///
/// let stats = Worker::sqlite(&path)
///     .drain(true)
///     .build(|ctx| {
///         assert_eq!((ctx.job_id(), ctx.attempt()), ("resize-1", 1));
///         let width: u32 = String::from_utf8_lossy(ctx.payload().unwrap_or_default()).parse()?;
///         // A long step waits on the token instead of sleeping, so it stops when the lease is lost.
///         if ctx.token().wait_timeout(Duration::from_millis(1)) {
///             return Err("lease lost".into());
///         }
///         Ok(format!("{}px", width / 2))
///     })?
///     .run()?;
/// assert_eq!(stats.completed, 1);
/// # Ok(()) }
/// ```
pub struct JobContext<'a, S = SqliteStore> {
    pub(super) job: &'a Job,
    pub(super) store: &'a S,
    pub(super) clock: &'a WorkerClock,
    pub(super) stop: &'a CancelToken,
    pub(super) counters: &'a Counters,
}

impl<S> fmt::Debug for JobContext<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("lease", &self.job.lease)
            .field("lost", &self.job.lost.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl<'a, S: Store> JobContext<'a, S> {
    /// The lease as it was claimed (its `until` is not updated by renewals; see
    /// [`until`](Self::until)).
    pub fn lease(&self) -> &'a Lease {
        &self.job.lease
    }

    /// The job id.
    pub fn job_id(&self) -> &'a str {
        &self.job.lease.job_id
    }

    /// The fencing token of this lease.
    pub fn fence(&self) -> Fence {
        self.job.lease.fence
    }

    /// The attempt number, starting at 1 ([`Lease::attempt`]): runs of this job, this one
    /// included. A lease given back at a shutdown is not counted, so it may be lower than the
    /// fence.
    pub fn attempt(&self) -> u32 {
        self.job.lease.attempt
    }

    /// The job's queue.
    pub fn queue(&self) -> &'a str {
        &self.job.lease.queue
    }

    /// The job's kind, if it has one.
    pub fn kind(&self) -> Option<&'a str> {
        self.job.lease.kind.as_deref()
    }

    /// The job's payload, if it has one.
    pub fn payload(&self) -> Option<&'a [u8]> {
        self.job.lease.payload.as_deref()
    }

    /// The owner name this worker thread claims under.
    pub fn owner(&self) -> &'a str {
        &self.job.lease.owner
    }

    /// The end of the lease as last renewed by the heartbeat.
    pub fn until(&self) -> f64 {
        lock(&self.job.beat).until
    }

    /// The worker's clock reading, on the store's timescale: with a store that judges leases
    /// by the database's clock, the worker's [`Clock`](crate::Clock) shifted by the offset
    /// measured when the
    /// worker started.
    pub fn now(&self) -> f64 {
        self.clock.reading()
    }

    /// `true` once a renew was refused: the lease is gone and nothing this attempt stores will
    /// be accepted. The [`token`](Self::token) is cancelled at the same moment.
    pub fn is_lost(&self) -> bool {
        self.job.lost.load(Ordering::SeqCst)
    }

    /// `true` once the worker learned that an operator ended the job — cancelled, retried or
    /// deleted it — rather than another worker taking the lease over: a kind of
    /// [`is_lost`](Self::is_lost) (both are `true`), counted in
    /// [`WorkerStats::cancelled`](crate::WorkerStats::cancelled), not `lost`. For the
    /// handler's own report; what it returns is refused by the store either way.
    pub fn is_ended_by_operator(&self) -> bool {
        self.is_lost() && self.job.loss.load(Ordering::SeqCst) == super::job::LOSS_OPERATOR
    }

    /// `true` once the run-time limit
    /// ([`WorkerBuilder::timeout`](crate::WorkerBuilder::timeout)) was reached: the token is
    /// cancelled and the attempt is recorded as a failure, whatever the handler returns.
    pub fn is_timed_out(&self) -> bool {
        self.job.timed_out.load(Ordering::SeqCst)
    }

    /// Asks the store, in one read (two round trips on a `PgStore` that judges by the
    /// database's clock: it reads that clock first), whether this lease is still the current one (same owner
    /// and fence, unfinished, live by the store's clock) — for a handler about to make a side
    /// effect outside the store. The heartbeat notices a lost lease only at its next renewal,
    /// so after a pause (a stop signal, a long GC) a handler may return before it does: check
    /// right before the effect. When the lease is gone the job is marked lost at once, its
    /// [`token`](Self::token) cancelled, and `Ok(false)` returned; do not make the effect.
    ///
    /// Once the worker has given the attempt up — past its time limit
    /// ([`is_timed_out`](Self::is_timed_out)), lost, or released at the shutdown deadline (the
    /// [`token`](Self::token) is cancelled in each case) — or the handler gave it back
    /// ([`release`](Self::release)) or had a write of it refused, it is `Ok(false)` without asking:
    /// the store may still show the lease until it runs out or the handler returns, but the
    /// attempt is over, and its effect would be made again by the next one.
    ///
    /// This narrows the window, it cannot close it: the lease may end just after the check.
    /// For an effect that must never land late, pass [`fence`](Self::fence) to the outside
    /// system, or use the fence gate ([`admit`](Self::admit)) or
    /// [`complete_with`](JobContext::complete_with).
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{NewJob, SqliteStore, Store, Worker};
    /// let path = dir.path().join("jobs.db");
    /// SqliteStore::open(&path)?.enqueue_job(NewJob::new("mail-1")?)?;
    /// let stats = Worker::sqlite(&path)
    ///     .drain(true)
    ///     .build(|ctx| {
    ///         if !ctx.check_lease()? {
    ///             return Err("lease lost: not sending".into());
    ///         }
    ///         Ok("sent".to_string()) // send the mail here
    ///     })?
    ///     .run()?;
    /// assert_eq!(stats.completed, 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Busy or backend failures; the lease's state is then unknown.
    pub fn check_lease(&self) -> Result<bool> {
        if self.given_up() {
            return Ok(false);
        }
        let lease = &self.job.lease;
        let now = self.clock.reading();
        let info = self.store.inspect(lease.job(), Now::new(now)?)?;
        let current = info.as_ref().is_some_and(|job| {
            job.status == Status::Leased
                && job.state.fence == lease.fence
                && job.state.owner.as_deref() == Some(lease.owner.as_str())
        });
        if !current {
            mark_lost(self.counters, self.job, reason(info.as_ref(), lease), now);
        }
        Ok(current)
    }

    /// `true` once the token was cancelled: the lease was lost, or shutdown stopped waiting for
    /// this job and gave its lease back.
    pub fn is_cancelled(&self) -> bool {
        self.job.token.is_cancelled()
    }

    /// `true` once the worker was asked to shut down; the job may still finish before the
    /// shutdown deadline.
    pub fn is_shutting_down(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// The job's cancellation token, to poll or to wait on ([`CancelToken::wait_timeout`]).
    pub fn token(&self) -> &'a CancelToken {
        &self.job.token
    }

    /// This worker thread's own store.
    pub fn store(&self) -> &'a S {
        self.store
    }

    /// Passes this lease's fence through the store's fence gate for `resource`
    /// ([`Store::admit`](crate::Store::admit)): `true` when no newer generation has been admitted
    /// for it. Call it
    /// right before each write to an outside system; a `false` means a newer attempt has
    /// written there, so this one must not.
    ///
    /// The gate orders admissions; it cannot reach into the outside system. For a write that
    /// must never land late, also pass [`fence`](Self::fence) along and let that system keep
    /// only the highest one.
    ///
    /// Once the worker has given the attempt up (timed out, lost, or released at the shutdown
    /// deadline: the [`token`](Self::token) is cancelled), or the handler gave it back
    /// ([`release`](Self::release)) or had a write of it refused, it is `Ok(false)` and nothing
    /// is admitted: the attempt is recorded as over, and a retry would make the write again.
    ///
    /// # Errors
    /// As [`Store::admit`](crate::Store::admit).
    pub fn admit(&self, resource: &str) -> Result<bool> {
        let gate = Resource::new(resource)?;
        if self.given_up() {
            tracing::warn!(
                job_id = %self.job_id(), fence = self.fence(), resource,
                why = "the worker gave this attempt up", "fence gate refused a stale write"
            );
            return Ok(false);
        }
        let admitted = self.store.admit(gate, self.fence())?;
        if !admitted {
            tracing::warn!(
                job_id = %self.job_id(), fence = self.fence(), resource,
                "fence gate refused a stale write"
            );
        }
        Ok(admitted)
    }

    /// Whether the attempt is no longer the handler's to act on: the worker gave it up (the
    /// token is cancelled: timed out, lost, released at the shutdown deadline), or the handler
    /// gave it back or had a write of it refused.
    fn given_up(&self) -> bool {
        self.job.token.is_cancelled()
            || matches!(
                self.job.settled.load(Ordering::SeqCst),
                SETTLED_REFUSED | SETTLED_RELEASED | SETTLED_CANCELLED
            )
    }

    /// Gives this attempt back instead of failing it: the lease is released, fenced (only
    /// while this owner and fence still hold it, as
    /// [`Store::release`](crate::Store::release) does), the fence kept
    /// and the attempt refunded, so the job is claimable again at once and no attempt of its
    /// budget is spent. The worker reports the job
    /// [`JobOutcome::Released`](crate::JobOutcome::Released) and counts it in
    /// [`WorkerStats::released`](crate::WorkerStats::released); what the handler returns afterwards is not written.
    ///
    /// For a handler that was interrupted rather than failed — its work stopped from outside
    /// (a subprocess killed by the signal that is stopping the service), or a resource it
    /// needs is going away — so the job runs again elsewhere without counting this attempt.
    ///
    /// - `Ok(true)`: given back.
    /// - `Ok(false)`: nothing changed — the lease was no longer this attempt's (taken over by
    ///   another claim, or ended by an operator: then reported
    ///   [`JobOutcome::Cancelled`](crate::JobOutcome::Cancelled)), or the worker had already
    ///   given the attempt up (past its time limit: the failure stands; lost; released at the
    ///   shutdown deadline — the [`token`](Self::token) is cancelled), or the attempt was
    ///   settled already (by an earlier `release` or by `complete_with`).
    ///
    /// Once given back, the attempt is over for the handler: [`admit`](Self::admit) and
    /// [`check_lease`](Self::check_lease) answer `false` without asking the store, and at the
    /// shutdown deadline the [`token`](Self::token) is cancelled, so that what the handler
    /// still winds down (a subprocess cleaning up) stops then. A refused release cancels the
    /// token at once. The shutdown deadline, reached while a release is being written, releases
    /// the lease itself as well: whichever lands first gives it back.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{JobId, NewJob, SqliteStore, Store, Worker};
    ///
    /// let path = dir.path().join("jobs.db");
    /// let store = SqliteStore::open(&path)?;
    /// store.enqueue_job(NewJob::new("upload-7")?)?;
    ///
    /// let stats = Worker::sqlite(&path)
    ///     .drain(true)
    ///     .build(|ctx| {
    ///         if ctx.fence() == 1 {
    ///             // Cut short by a maintenance window, not by a fault of the job: give it back.
    ///             assert!(ctx.release()?);
    ///             return Ok("not written".into());
    ///         }
    ///         // Claimed again at once, under the next fence, and still its first attempt.
    ///         assert_eq!((ctx.fence(), ctx.attempt()), (2, 1));
    ///         Ok("uploaded".into())
    ///     })?
    ///     .run()?;
    /// assert_eq!((stats.released, stats.completed), (1, 1));
    /// let state = store.state(JobId::new("upload-7")?)?.unwrap();
    /// assert_eq!((state.fence, state.result.as_deref()), (2, Some("uploaded")));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Busy or backend failures. The attempt then goes on as if `release` had not been called:
    /// the heartbeat keeps renewing the lease, the shutdown deadline releases it, and what the
    /// handler returns is recorded as usual (an `Err` as a failure). A busy store wrote
    /// nothing; on a connection lost during the call the release may have landed, and the
    /// worker then finds the lease given back when it writes the outcome (a try made again
    /// after such an error is refused, and counted as an operator's end: the store cannot tell
    /// the two apart).
    pub fn release(&self) -> Result<bool> {
        let job = self.job;
        let lease = &job.lease;
        // Stops the heartbeat and the time limit, which leave a releasing job alone. Not
        // running: settled already (`complete_with`, an earlier `release`), lost, or released
        // at the shutdown deadline. A cancelled token: given up (the time limit, checked under
        // the same lock, or a loss) — the attempt is over, and recorded as such.
        let was = job.start_release();
        if was != Phase::Running || job.token.is_cancelled() {
            job.resume(was);
            return Ok(false);
        }
        let answer = self.store.release_lease(lease);
        // The shutdown deadline may have taken the release over while this one was written.
        let taken_over = lock(&job.beat).phase == Phase::Released;
        match answer {
            Ok(true) => {
                // Settled before it stops releasing: the deadline tells a given-back handler.
                job.settled.store(SETTLED_RELEASED, Ordering::SeqCst);
                job.end_release();
                bump(&self.counters.released);
                tracing::info!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "released by its handler; claimable again at once, the attempt refunded"
                );
                Ok(true)
            }
            // The deadline's release landed first: the worker reports the job released.
            Ok(false) if taken_over => Ok(false),
            Ok(false) => {
                job.end_release();
                // Counted as any refused write of the worker's: cancelled when an operator
                // ended the job, else a stale write.
                if refused_at(self.counters, self.store, job, self.clock.reading()) {
                    job.settled.store(SETTLED_CANCELLED, Ordering::SeqCst);
                    tracing::warn!(
                        job_id = %lease.job_id, fence = lease.fence,
                        "release refused: an operator ended the job; nothing changed"
                    );
                } else {
                    job.settled.store(SETTLED_REFUSED, Ordering::SeqCst);
                    tracing::warn!(
                        job_id = %lease.job_id, fence = lease.fence,
                        "release refused: the lease is no longer current; nothing changed"
                    );
                }
                // The attempt is over: what the handler still winds down is told now.
                job.token.cancel();
                Ok(false)
            }
            Err(e) => {
                // Unless the deadline took it over (released, token cancelled), the attempt
                // goes on: renewed, timed, released at the deadline like any running one.
                job.resume(was);
                Err(e)
            }
        }
    }
}

impl JobContext<'_, SqliteStore> {
    /// Completes the job with `result` and runs `write` in the **same transaction**, so the
    /// handler's own writes commit only if the lease is still current
    /// ([`SqliteStore::complete_with`]).
    ///
    /// - `Ok(Some(t))`: everything committed; the job is done.
    /// - `Ok(None)`: the lease was no longer current (counted cancelled when an operator
    ///   ended the job, else a stale write), or the attempt was over already — settled by an
    ///   earlier `complete_with` or a [`release`](JobContext::release), or given up (past its
    ///   time limit: the failure stands; lost; released at the shutdown deadline); `write` did
    ///   not run, nothing changed.
    ///
    /// Either way the outcome is final for this attempt: what the handler returns afterwards is
    /// not written again. On `Err` nothing was written and the handler carries on (returning
    /// `Err` makes the attempt a failure, as usual).
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{NewJob, SqliteStore, Store, Worker};
    ///
    /// let path = dir.path().join("jobs.db");
    /// let store = SqliteStore::open(&path)?;
    /// store.enqueue_many(&[NewJob::new("invoice-9")?])?;
    ///
    /// Worker::sqlite(&path)
    ///     .drain(true)
    ///     .build(|ctx| {
    ///         ctx.complete_with("sent", |conn| {
    ///             conn.execute_batch("CREATE TABLE IF NOT EXISTS sent (id TEXT, fence INT)")?;
    ///             conn.execute("INSERT INTO sent VALUES (?1, ?2)", (ctx.job_id(), ctx.fence()))?;
    ///             Ok::<_, leasefence::HandlerError>(())
    ///         })?;
    ///         Ok(String::new()) // not written again
    ///     })?
    ///     .run()?;
    /// assert_eq!(store.state(leasefence::JobId::new("invoice-9")?)?.unwrap().result.as_deref(), Some("sent"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A clock reading that is not finite, busy or backend failures (converted into `E`), or
    /// `write`'s own error; then everything was rolled back.
    pub fn complete_with<T, E>(
        &self,
        result: &str,
        write: impl FnOnce(&rusqlite::Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<Option<T>, E>
    where
        E: From<Error>,
    {
        let now = self.clock.now()?;
        let was = self.job.finish();
        if was != Phase::Running || self.job.token.is_cancelled() {
            // Not running any more: settled already (completed by an earlier call, given back,
            // refused: the outcome is final, nothing is written or counted again), or given up
            // (past its time limit: the failure stands; lost; released at the shutdown
            // deadline). The attempt is over; nothing is written.
            self.job.resume(was);
            return Ok(None);
        }
        let lease = &self.job.lease;
        match self.store.complete_with(lease, now, result, write) {
            Ok(Some(value)) => {
                self.job.settled.store(SETTLED_COMPLETED, Ordering::SeqCst);
                bump(&self.counters.completed);
                tracing::info!(job_id = %lease.job_id, fence = lease.fence, "completed with writes");
                Ok(Some(value))
            }
            Ok(None) => {
                // Counted as any refused write of the worker's: cancelled when an operator
                // ended the job, else a stale write.
                if refused_at(self.counters, self.store, self.job, self.clock.reading()) {
                    self.job.settled.store(SETTLED_CANCELLED, Ordering::SeqCst);
                    tracing::warn!(
                        job_id = %lease.job_id, fence = lease.fence,
                        "completion refused: an operator ended the job; nothing written"
                    );
                } else {
                    self.job.settled.store(SETTLED_REFUSED, Ordering::SeqCst);
                    tracing::warn!(
                        job_id = %lease.job_id, fence = lease.fence,
                        "stale completion refused: the lease is no longer current; nothing written"
                    );
                }
                Ok(None)
            }
            Err(e) => {
                self.job.resume(was);
                Err(e)
            }
        }
    }
}
