//! What a worker counts ([`WorkerStats`](crate::WorkerStats)) and how each claimed job ended
//! ([`JobOutcome`]).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub(super) struct Counters {
    pub(super) claimed: AtomicU64,
    pub(super) renewed: AtomicU64,
    pub(super) completed: AtomicU64,
    pub(super) retried: AtomicU64,
    pub(super) dead: AtomicU64,
    pub(super) lost: AtomicU64,
    pub(super) stale_refused: AtomicU64,
    pub(super) released: AtomicU64,
    pub(super) cancelled: AtomicU64,
    pub(super) timed_out: AtomicU64,
    pub(super) errors: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(super) fn snapshot(&self) -> WorkerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerStats {
            claimed: get(&self.claimed),
            renewed: get(&self.renewed),
            completed: get(&self.completed),
            retried: get(&self.retried),
            dead: get(&self.dead),
            lost: get(&self.lost),
            stale_refused: get(&self.stale_refused),
            released: get(&self.released),
            cancelled: get(&self.cancelled),
            timed_out: get(&self.timed_out),
            errors: get(&self.errors),
        }
    }
}

/// What a worker has done so far; read it at any time with
/// [`ShutdownHandle::stats`](crate::ShutdownHandle::stats), and at
/// the end from [`Worker::run`](crate::Worker::run).
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::{NewJob, SqliteStore, Store, Worker};
/// let path = dir.path().join("jobs.db");
/// SqliteStore::open(&path)?.enqueue_many(&[NewJob::new("a")?, NewJob::new("b")?.max_attempts(1)])?;
///
/// let stats = Worker::sqlite(&path)
///     .drain(true)
///     .build(|ctx| if ctx.job_id() == "a" { Ok("fine".into()) } else { Err("broken".into()) })?
///     .run()?;
/// assert_eq!((stats.claimed, stats.completed, stats.dead), (2, 1, 1));
/// assert_eq!(stats.failed(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Leases taken by `claim_next`.
    pub claimed: u64,
    /// Successful heartbeat renewals.
    pub renewed: u64,
    /// Jobs whose result was stored.
    pub completed: u64,
    /// Failed attempts (handler error or panic) scheduled for a retry.
    pub retried: u64,
    /// Failed attempts that were the job's last: the job is dead.
    pub dead: u64,
    /// Leases lost while the handler ran because another claim took them over or they
    /// expired (the worker stalled past its ttl): a renew was refused.
    pub lost: u64,
    /// Completions and failures the store refused because the lease had been taken over or
    /// had expired: the stale writes fencing is for. Neither a job released at the shutdown
    /// deadline (its outcome is not written at all) nor one an operator ended is counted here.
    pub stale_refused: u64,
    /// In-flight leases given back (fence kept, attempt refunded), claimable again at once: at
    /// shutdown, or by their handler ([`JobContext::release`](crate::JobContext::release),
    /// `AsyncJob::release` with feature `async`).
    pub released: u64,
    /// Jobs an operator cancelled, retried or deleted while this worker held them: the lease
    /// ended, nothing of the attempt was stored.
    pub cancelled: u64,
    /// Handlers stopped by the run-time limit
    /// ([`WorkerBuilder::timeout`](crate::WorkerBuilder::timeout)); each attempt is recorded as
    /// a failure (counted in `retried` or `dead` too).
    pub timed_out: u64,
    /// Store errors met on the way (busy database, I/O); the worker went on.
    pub errors: u64,
}

impl WorkerStats {
    /// Failed attempts recorded: `retried + dead`.
    pub fn failed(&self) -> u64 {
        self.retried + self.dead
    }
}

/// How one claimed job ended, as passed to
/// [`WorkerBuilder::on_outcome`](crate::WorkerBuilder::on_outcome).
///
/// ```
/// use leasefence::JobOutcome;
/// let outcome = JobOutcome::Retrying { at: 12.0, error: "timeout".into() };
/// assert!(!outcome.is_stored_result());
/// assert!(JobOutcome::Completed.is_stored_result());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum JobOutcome {
    /// The result was stored and the job is done.
    Completed,
    /// The failure was recorded; the job runs again from `at` on.
    Retrying {
        /// The clock reading from which the job is claimable again.
        at: f64,
        /// The handler's error (or panic message).
        error: String,
    },
    /// The failure was recorded and was the last attempt: the job is dead.
    Dead {
        /// The handler's error (or panic message).
        error: String,
    },
    /// The store refused the completion or failure: the lease had been taken over by another
    /// claim or had expired (also a job of a batch whose lease was lost before its handler
    /// started: it never ran). Nothing was stored.
    Refused,
    /// An operator cancelled, retried or deleted the job while the handler ran (or before it
    /// started, while the job waited in its batch): the lease had ended, nothing was stored.
    Cancelled,
    /// The lease was given back (fenced, fence kept, attempt refunded) at the shutdown deadline
    /// while the handler ran, at shutdown before it started (a job waiting in its batch), or
    /// by the handler itself
    /// ([`JobContext::release`](crate::JobContext::release)): whatever the handler returned was
    /// not written, and the job is claimable again at once.
    Released,
    /// The store could not record the outcome (busy past the retries, a connection to the
    /// database server that stayed down for a ttl, I/O error). The lease is left to expire,
    /// after which the job is claimable again. (A result the store can never hold — a NUL
    /// byte on PostgreSQL, a body larger than the server takes — is not this: the attempt is
    /// recorded as failed, its error starting "the result could not be stored: ".)
    StoreError(String),
}

impl JobOutcome {
    /// Whether this attempt's result is the one stored.
    pub fn is_stored_result(&self) -> bool {
        matches!(self, JobOutcome::Completed)
    }
}
