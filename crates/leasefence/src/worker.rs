//! The worker runtime: claim → heartbeat → complete | fail | release, on a [`Clock`].
//!
//! A [`Worker`] runs a handler closure on `N` threads. Each thread opens its own store, claims
//! the best ready jobs ([`Store::claim_batch`]), and runs the handler on each with a
//! [`JobContext`]. While a job runs or waits its turn, a heartbeat renews its lease at a
//! fraction of its ttl. What the handler returns decides the write, and every write is fenced by
//! the store:
//!
//! | handler | write | when the lease is no longer current |
//! |---|---|---|
//! | `Ok(result)` | [`Store::complete_lease`], or [`Store::complete_batch`] with the other results of its batch | refused, counted in [`WorkerStats::stale_refused`] |
//! | `Err(e)` or a panic | [`Store::fail`] with [`Backoff`]: retrying, or dead after the last attempt | refused, counted the same way |
//! | [`JobContext::complete_with`] | the caller's writes commit with the completion | `Ok(None)`: nothing runs |
//!
//! When a renew is refused (the lease expired because the worker stalled, or the job was
//! cancelled), the context reports the lease as lost ([`JobContext::is_lost`]) and its
//! [`CancelToken`] fires. The handler may go on running — nothing stops a thread — but nothing it
//! tries to store is accepted any more.
//!
//! **Batches.** A thread starts by claiming one job at a time. While its handlers are quick, it
//! claims as many jobs as it can run in about 10 ms (at most [`WorkerBuilder::batch`], default
//! 32) in one transaction, and writes their results together in one more: two commits — two
//! fsyncs at `synchronous = FULL` — for the whole batch instead of two per job. Slow handlers
//! keep it at one job per claim, so no claimed job waits long behind another.
//!
//! Time for leases is read from a [`Clock`] ([`SystemClock`] by default); tests drive a
//! [`ManualClock`] instead of sleeping. Real time is only used for the short polling ticks
//! (heartbeat checks, the empty-queue poll, the shutdown deadline).
//!
//! On PostgreSQL the worker judges leases by the **database's clock** by default
//! (`Worker::postgres`): the store ignores the `now` it is given and reads
//! `clock_timestamp()` on the server, so workers on hosts whose clocks disagree — even by more
//! than the ttl — never both hold a live lease. When [`Worker::run`] starts on such a store
//! ([`Store::database_now`] is `Some`), the worker reads the database's clock once and from then
//! on advances it on a monotonic timer (or, when a [`Clock`] was given to the builder, reads
//! that clock shifted by the offset measured then), so heartbeats, [`JobContext::now`] and
//! [`JobContext::until`] are on the store's timescale.

use std::fmt;
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::sqlite::SqliteStore;
use crate::store::Store;
use crate::types::{Backoff, BatchSize, Failed, Fence, Lease, Now, Owner, Resource, Ttl};

/// How often the supervising thread looks at the clock to renew leases, in real time. Small
/// enough that a [`ManualClock`] moved by a test is noticed at once.
const TICK: Duration = Duration::from_millis(10);

/// How many times a write that met a busy database is tried again before giving up.
const BUSY_RETRIES: u32 = 3;
/// The default for [`WorkerBuilder::batch`].
const DEFAULT_BATCH: usize = 32;
/// How much handler time a batch claim aims for, and how long a result may wait to be
/// written with others.
const BATCH_WINDOW: Duration = Duration::from_millis(10);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---- clocks ---------------------------------------------------------------------------------

/// Where a worker reads the time for leases: seconds, on the same scale for every worker of a
/// store.
///
/// ```
/// use leasefence::{Clock, ManualClock, SystemClock};
/// assert!(SystemClock.now() > 1.6e9); // seconds since the Unix epoch
/// let clock = ManualClock::new(100.0);
/// clock.advance(5.0);
/// assert_eq!(clock.now(), 105.0);
/// ```
pub trait Clock: Send + Sync {
    /// The current reading in seconds. Must be finite and should never go backwards.
    fn now(&self) -> f64;
}

/// The system clock: seconds since the Unix epoch. The default [`Clock`] of a [`Worker`].
///
/// ```
/// use leasefence::{Clock, SystemClock};
/// let (a, b) = (SystemClock.now(), SystemClock.now());
/// assert!(b >= a);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// The database's clock as read once, advanced by a monotonic timer: the default clock of a
/// worker whose store judges leases by the database's clock.
#[derive(Debug)]
struct Anchored {
    at_start: f64,
    start: Instant,
}

impl Clock for Anchored {
    fn now(&self) -> f64 {
        self.at_start + self.start.elapsed().as_secs_f64()
    }
}

/// A clock that moves only when told to, shared by every clone: tests hand one to a worker and
/// move it with [`set`](ManualClock::set) and [`advance`](ManualClock::advance) instead of
/// sleeping.
///
/// ```
/// use leasefence::{Clock, ManualClock};
/// let clock = ManualClock::new(0.0);
/// let worker_side = clock.clone();
/// clock.set(10.0);
/// assert_eq!(clock.advance(2.5), 12.5);
/// assert_eq!(worker_side.now(), 12.5);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    bits: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: f64) -> Self {
        ManualClock {
            bits: Arc::new(AtomicU64::new(start.to_bits())),
        }
    }

    /// Sets the reading to `now`.
    pub fn set(&self, now: f64) {
        self.bits.store(now.to_bits(), Ordering::SeqCst);
    }

    /// Moves the clock forward by `seconds` and returns the new reading.
    pub fn advance(&self, seconds: f64) -> f64 {
        let mut new = 0.0;
        let _ = self
            .bits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |bits| {
                new = f64::from_bits(bits) + seconds;
                Some(new.to_bits())
            });
        new
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::SeqCst))
    }
}

// ---- cancellation -----------------------------------------------------------------------------

/// A flag that can be set once and waited on: the worker cancels a job's token when its lease
/// is lost or when shutdown gives up waiting for it. Clones share the flag.
///
/// ```
/// use std::time::Duration;
/// use leasefence::CancelToken;
///
/// let token = CancelToken::new();
/// assert!(!token.wait_timeout(Duration::from_millis(1))); // not cancelled: timed out
/// let other = token.clone();
/// std::thread::spawn(move || other.cancel());
/// assert!(token.wait_timeout(Duration::from_secs(10)));
/// assert!(token.is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<TokenInner>,
}

#[derive(Default)]
struct TokenInner {
    cancelled: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag and wakes every waiter. Idempotent.
    pub fn cancel(&self) {
        let _guard = lock(&self.inner.lock);
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.cv.notify_all();
    }

    /// Whether the token was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Blocks until the token is cancelled or `timeout` has passed (real time); returns whether
    /// it was cancelled. A handler can use this in place of `sleep` to stop early.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut guard = lock(&self.inner.lock);
        loop {
            if self.is_cancelled() {
                return true;
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return false;
            }
            guard = self
                .inner
                .cv
                .wait_timeout(guard, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Blocks until the token is cancelled.
    pub fn wait(&self) {
        while !self.wait_timeout(Duration::from_secs(3600)) {}
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

// ---- counters -----------------------------------------------------------------------------

#[derive(Default)]
struct Counters {
    claimed: AtomicU64,
    renewed: AtomicU64,
    completed: AtomicU64,
    retried: AtomicU64,
    dead: AtomicU64,
    lost: AtomicU64,
    stale_refused: AtomicU64,
    released: AtomicU64,
    errors: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> WorkerStats {
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
            errors: get(&self.errors),
        }
    }
}

/// What a worker has done so far; read it at any time with [`ShutdownHandle::stats`], and at
/// the end from [`Worker::run`].
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
///     .build(|ctx| if ctx.job_id() == "a" { Ok("fine".to_string()) } else { Err("broken") })?
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
    /// Leases lost while the handler ran: a renew was refused.
    pub lost: u64,
    /// Completions and failures the store refused because the lease was no longer current
    /// (lost, cancelled, or released at the shutdown deadline before the handler returned).
    pub stale_refused: u64,
    /// In-flight leases given back at shutdown (fence kept), claimable again at once.
    pub released: u64,
    /// Store errors met on the way (busy database, I/O); the worker went on.
    pub errors: u64,
}

impl WorkerStats {
    /// Failed attempts recorded: `retried + dead`.
    pub fn failed(&self) -> u64 {
        self.retried + self.dead
    }
}

/// How one claimed job ended, as passed to [`WorkerBuilder::on_outcome`].
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
    /// The store refused the completion or failure: the lease was no longer current (lost,
    /// released at shutdown, or the job was cancelled). Nothing was stored.
    Refused,
    /// The store could not record the outcome (busy past the retries, I/O error). The lease is
    /// left to expire, after which the job is claimable again.
    StoreError(String),
}

impl JobOutcome {
    /// Whether this attempt's result is the one stored.
    pub fn is_stored_result(&self) -> bool {
        matches!(self, JobOutcome::Completed)
    }
}

// ---- the job in flight --------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Claimed in a batch, its handler not started yet; the heartbeat renews.
    Queued,
    /// The handler runs (or its result waits to be written with the batch); the heartbeat
    /// renews.
    Running,
    /// The outcome is being written; the heartbeat stays away.
    Finishing,
    /// A renew was refused.
    Lost,
    /// Given back at shutdown.
    Released,
}

struct Beat {
    phase: Phase,
    until: f64,
    renewed_at: f64,
}

const UNSETTLED: u8 = 0;
const SETTLED_COMPLETED: u8 = 1;
const SETTLED_REFUSED: u8 = 2;

/// One claimed job, shared by its worker thread, its context and the heartbeat.
struct Job {
    lease: Lease,
    token: CancelToken,
    lost: AtomicBool,
    /// Set when the handler completed through `JobContext::complete_with`.
    settled: AtomicU8,
    /// Held across every renew and release, so that a write never races the outcome's.
    beat: Mutex<Beat>,
}

impl Job {
    /// Stops the heartbeat before the outcome is written; returns the phase it was in.
    fn finish(&self) -> Phase {
        let mut beat = lock(&self.beat);
        let was = beat.phase;
        if was == Phase::Running {
            beat.phase = Phase::Finishing;
        }
        was
    }

    /// Lets the heartbeat resume after an outcome that was not written.
    fn resume(&self, was: Phase) {
        let mut beat = lock(&self.beat);
        if was == Phase::Running && beat.phase == Phase::Finishing {
            beat.phase = Phase::Running;
        }
    }
}

struct Slot {
    /// The jobs of the thread's current batch, until every one has its outcome.
    jobs: Mutex<Vec<Arc<Job>>>,
    /// The thread's last claim found no ready job.
    idle: AtomicBool,
}

type Handler<S> = dyn Fn(&JobContext<'_, S>) -> std::result::Result<String, String> + Send + Sync;
type OutcomeHook = dyn Fn(&Lease, &JobOutcome) + Send + Sync;
type Opener<S> = dyn Fn() -> Result<S> + Send + Sync;

struct Config {
    ttl: Ttl,
    heartbeat: f64,
    owner_prefix: String,
    poll: Duration,
    backoff: Backoff,
    deadline: Duration,
    drain: bool,
    batch: usize,
}

/// What every thread of one worker shares.
struct Shared<S> {
    config: Config,
    clock: Arc<dyn Clock>,
    /// No clock was given to the builder: [`SystemClock`].
    clock_is_default: bool,
    /// Seconds added to every reading of `clock` (f64 bits): the database's clock minus the
    /// worker's, measured when [`Worker::run`] starts on a store that judges leases by the
    /// database's clock; 0 otherwise.
    offset: AtomicU64,
    handler: Box<Handler<S>>,
    on_outcome: Option<Box<OutcomeHook>>,
    counters: Arc<Counters>,
    stop: CancelToken,
    slots: Vec<Slot>,
    fatal: Mutex<Option<Error>>,
}

impl<S> Shared<S> {
    fn now(&self) -> Result<Now> {
        Now::new(self.clock_now())
    }

    /// The worker's clock on the store's timescale.
    fn clock_now(&self) -> f64 {
        self.clock.now() + f64::from_bits(self.offset.load(Ordering::SeqCst))
    }

    fn drained(&self) -> bool {
        self.slots
            .iter()
            .all(|s| s.idle.load(Ordering::SeqCst) && lock(&s.jobs).is_empty())
    }

    fn in_flight(&self) -> Vec<Arc<Job>> {
        self.slots
            .iter()
            .flat_map(|s| lock(&s.jobs).clone())
            .collect()
    }

    /// Records an error that stops the worker, then asks every thread to stop.
    fn fatal(&self, error: Error) {
        tracing::error!(%error, "worker stopping on a store error");
        lock(&self.fatal).get_or_insert(error);
        self.stop.cancel();
    }
}

// ---- the context handed to the handler ---------------------------------------------------------

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
///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(format!("{}px", width / 2))
///     })?
///     .run()?;
/// assert_eq!(stats.completed, 1);
/// # Ok(()) }
/// ```
pub struct JobContext<'a, S = SqliteStore> {
    job: &'a Job,
    store: &'a S,
    shared: &'a Shared<S>,
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

    /// The attempt number, starting at 1; equal to the fence.
    pub fn attempt(&self) -> i64 {
        self.job.lease.fence
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
    /// by the database's clock, the worker's [`Clock`] shifted by the offset measured when the
    /// worker started.
    pub fn now(&self) -> f64 {
        self.shared.clock_now()
    }

    /// `true` once a renew was refused: the lease is gone and nothing this attempt stores will
    /// be accepted. The [`token`](Self::token) is cancelled at the same moment.
    pub fn is_lost(&self) -> bool {
        self.job.lost.load(Ordering::SeqCst)
    }

    /// `true` once the token was cancelled: the lease was lost, or shutdown stopped waiting for
    /// this job and gave its lease back.
    pub fn is_cancelled(&self) -> bool {
        self.job.token.is_cancelled()
    }

    /// `true` once the worker was asked to shut down; the job may still finish before the
    /// shutdown deadline.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.stop.is_cancelled()
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
    /// ([`Store::admit`]): `true` when no newer generation has been admitted for it. Call it
    /// right before each write to an outside system; a `false` means a newer attempt has
    /// written there, so this one must not.
    ///
    /// The gate orders admissions; it cannot reach into the outside system. For a write that
    /// must never land late, also pass [`fence`](Self::fence) along and let that system keep
    /// only the highest one.
    ///
    /// # Errors
    /// As [`Store::admit`].
    pub fn admit(&self, resource: &str) -> Result<bool> {
        let admitted = self.store.admit(Resource::new(resource)?, self.fence())?;
        if !admitted {
            tracing::warn!(
                job_id = %self.job_id(), fence = self.fence(), resource,
                "fence gate refused a stale write"
            );
        }
        Ok(admitted)
    }
}

impl JobContext<'_, SqliteStore> {
    /// Completes the job with `result` and runs `write` in the **same transaction**, so the
    /// handler's own writes commit only if the lease is still current
    /// ([`SqliteStore::complete_with`]).
    ///
    /// - `Ok(Some(t))`: everything committed; the job is done.
    /// - `Ok(None)`: the lease was no longer current; `write` did not run, nothing changed.
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
    ///             Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    ///         })?;
    ///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(String::new()) // not written again
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
        let now = self.shared.now()?;
        let was = self.job.finish();
        let lease = &self.job.lease;
        match self.store.complete_with(lease, now, result, write) {
            Ok(Some(value)) => {
                self.job.settled.store(SETTLED_COMPLETED, Ordering::SeqCst);
                bump(&self.shared.counters.completed);
                tracing::info!(job_id = %lease.job_id, fence = lease.fence, "completed with writes");
                Ok(Some(value))
            }
            Ok(None) => {
                self.job.settled.store(SETTLED_REFUSED, Ordering::SeqCst);
                bump(&self.shared.counters.stale_refused);
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "stale completion refused: the lease is no longer current; nothing written"
                );
                Ok(None)
            }
            Err(e) => {
                self.job.resume(was);
                Err(e)
            }
        }
    }
}

// ---- the builder ----------------------------------------------------------------------------

/// Configures a [`Worker`]; made by [`Worker::builder`] or [`Worker::sqlite`], finished by
/// [`build`](Self::build) with the handler.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use std::time::Duration;
/// use leasefence::{Backoff, Worker};
///
/// let worker = Worker::sqlite(dir.path().join("jobs.db"))
///     .concurrency(4)
///     .ttl(30.0)
///     .heartbeat_fraction(1.0 / 3.0)
///     .owner_prefix("thumbnailer")
///     .poll_interval(Duration::from_millis(200))
///     .backoff(Backoff { base: 2.0, factor: 2.0, max: 600.0, jitter: 0.1 })
///     .shutdown_deadline(Duration::from_secs(5))
///     .build(|ctx| Ok::<_, String>(format!("{} done", ctx.job_id())))?;
/// # drop(worker);
/// # Ok(()) }
/// ```
pub struct WorkerBuilder<S> {
    open: Box<Opener<S>>,
    concurrency: usize,
    ttl: f64,
    heartbeat_fraction: f64,
    owner_prefix: Option<String>,
    poll: Duration,
    backoff: Backoff,
    deadline: Duration,
    drain: bool,
    batch: usize,
    clock: Arc<dyn Clock>,
    clock_is_default: bool,
    on_outcome: Option<Box<OutcomeHook>>,
}

impl<S> fmt::Debug for WorkerBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("concurrency", &self.concurrency)
            .field("ttl", &self.ttl)
            .field("heartbeat_fraction", &self.heartbeat_fraction)
            .field("owner_prefix", &self.owner_prefix)
            .field("poll", &self.poll)
            .field("backoff", &self.backoff)
            .field("deadline", &self.deadline)
            .field("drain", &self.drain)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl<S: Store + Send + 'static> WorkerBuilder<S> {
    fn new(open: Box<Opener<S>>) -> Self {
        WorkerBuilder {
            open,
            concurrency: 1,
            ttl: 30.0,
            heartbeat_fraction: 1.0 / 3.0,
            owner_prefix: None,
            poll: Duration::from_millis(500),
            backoff: Backoff::default(),
            deadline: Duration::from_secs(10),
            drain: false,
            batch: DEFAULT_BATCH,
            clock: Arc::new(SystemClock),
            clock_is_default: true,
            on_outcome: None,
        }
    }

    /// The most jobs one thread claims in one transaction (default 32; 1 claims one job at a
    /// time).
    ///
    /// Each thread sizes its claims by how long its handlers take: it starts with one job,
    /// and while handlers are quick it claims as many as it can run in about 10 ms (at most
    /// `max`), and writes their results with one [`Store::complete_batch`] — one commit, one
    /// fsync, for the whole batch. Slow handlers keep it at one job per claim, so a claimed
    /// job never waits long behind another. Jobs waiting in a batch are renewed by the
    /// heartbeat like running ones, a result waits at most ~10 ms before it is written, and on
    /// shutdown the jobs not started yet are released at once (fenced) for others to claim.
    pub fn batch(mut self, max: usize) -> Self {
        self.batch = max;
        self
    }

    /// Number of worker threads, each with its own store (default 1).
    pub fn concurrency(mut self, threads: usize) -> Self {
        self.concurrency = threads;
        self
    }

    /// Lease duration in seconds of the [`Clock`] (default 30).
    pub fn ttl(mut self, seconds: f64) -> Self {
        self.ttl = seconds;
        self
    }

    /// The heartbeat renews a running job's lease every `fraction · ttl` seconds of the clock
    /// (default 1/3: two chances to renew before the lease runs out). Between 0 and 1.
    pub fn heartbeat_fraction(mut self, fraction: f64) -> Self {
        self.heartbeat_fraction = fraction;
        self
    }

    /// Owner names are `{prefix}-{thread}`; the default prefix is `{hostname}-{pid}`.
    pub fn owner_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.owner_prefix = Some(prefix.into());
        self
    }

    /// How long (real time) an idle thread waits before looking for a ready job again
    /// (default 500 ms). Shutdown interrupts the wait.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll = interval;
        self
    }

    /// The retry schedule after a handler failure (default [`Backoff::default`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long (real time) shutdown waits for in-flight jobs before it cancels their tokens
    /// and releases their leases (default 10 s).
    pub fn shutdown_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// With `true`, [`Worker::run`] also returns once no job is ready and none is in flight
    /// (default `false`: run until [`ShutdownHandle::shutdown`]).
    pub fn drain(mut self, drain: bool) -> Self {
        self.drain = drain;
        self
    }

    /// The clock for leases (default [`SystemClock`]).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self.clock_is_default = false;
        self
    }

    /// Called on the worker thread after every claimed job with how it ended (for progress
    /// displays and metrics). A panic in the hook is caught and counted in
    /// [`WorkerStats::errors`].
    pub fn on_outcome(
        mut self,
        hook: impl Fn(&Lease, &JobOutcome) + Send + Sync + 'static,
    ) -> Self {
        self.on_outcome = Some(Box::new(hook));
        self
    }

    /// Checks the settings and makes the worker with `handler`, which every thread shares.
    ///
    /// The handler returns the result to store, or an error whose `Display` is stored as the
    /// failure. A panic is caught and counts as a failure.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `concurrency` (0), `ttl` (not finite and `> 0`),
    /// `heartbeat_fraction` (not strictly between 0 and 1), `owner` (an empty prefix) or
    /// `poll_interval` (zero).
    pub fn build<H, E>(self, handler: H) -> Result<Worker<S>>
    where
        H: Fn(&JobContext<'_, S>) -> std::result::Result<String, E> + Send + Sync + 'static,
        E: Display,
    {
        if self.concurrency == 0 {
            return Err(Error::invalid("concurrency", "must be at least 1"));
        }
        let ttl = Ttl::new(self.ttl)?;
        let fraction = self.heartbeat_fraction;
        if !(fraction > 0.0 && fraction < 1.0) {
            return Err(Error::invalid(
                "heartbeat_fraction",
                format!("must be strictly between 0 and 1, got {fraction}"),
            ));
        }
        if self.batch == 0 {
            return Err(Error::invalid("batch", "must be at least 1"));
        }
        if self.poll.is_zero() {
            return Err(Error::invalid("poll_interval", "must be greater than 0"));
        }
        let owner_prefix = self.owner_prefix.unwrap_or_else(default_owner_prefix);
        Owner::new(&owner_prefix)?;
        let shared = Shared {
            config: Config {
                ttl,
                heartbeat: ttl.seconds() * fraction,
                owner_prefix,
                poll: self.poll,
                backoff: self.backoff,
                deadline: self.deadline,
                drain: self.drain,
                batch: self.batch,
            },
            clock: self.clock,
            clock_is_default: self.clock_is_default,
            offset: AtomicU64::new(0f64.to_bits()),
            handler: Box::new(move |ctx| handler(ctx).map_err(|e| e.to_string())),
            on_outcome: self.on_outcome,
            counters: Arc::default(),
            stop: CancelToken::new(),
            slots: (0..self.concurrency)
                .map(|_| Slot {
                    jobs: Mutex::new(Vec::new()),
                    idle: AtomicBool::new(false),
                })
                .collect(),
            fatal: Mutex::new(None),
        };
        Ok(Worker {
            open: self.open,
            shared: Arc::new(shared),
        })
    }
}

/// `{hostname}-{pid}`, so that workers on different machines and processes never share an
/// owner name.
fn default_owner_prefix() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}

// ---- the worker -----------------------------------------------------------------------------

/// A pool of threads that claim jobs, run a handler on each, keep its lease alive, and store
/// its outcome through the fence. See the [module docs](crate::worker) for the whole cycle.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::{NewJob, SqliteStore, Store, Worker};
///
/// let path = dir.path().join("jobs.db");
/// let store = SqliteStore::open(&path)?;
/// store.enqueue_many(&[
///     NewJob::new("greet-1")?.payload(b"ada".to_vec()),
///     NewJob::new("greet-2")?.payload(b"grace".to_vec()),
/// ])?;
///
/// let stats = Worker::sqlite(&path)
///     .concurrency(2)
///     .ttl(30.0)
///     .drain(true) // return once the queue is empty
///     .build(|ctx| {
///         let name = String::from_utf8_lossy(ctx.payload().unwrap_or_default());
///         Ok::<_, String>(format!("hello, {name}"))
///     })?
///     .run()?;
///
/// assert_eq!(stats.completed, 2);
/// let row = store.state(leasefence::JobId::new("greet-2")?)?.unwrap();
/// assert_eq!(row.result.as_deref(), Some("hello, grace"));
/// # Ok(()) }
/// ```
pub struct Worker<S = SqliteStore> {
    open: Box<Opener<S>>,
    shared: Arc<Shared<S>>,
}

impl<S> fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("threads", &self.shared.slots.len())
            .field("owner_prefix", &self.shared.config.owner_prefix)
            .field("stats", &self.shared.counters.snapshot())
            .finish_non_exhaustive()
    }
}

impl Worker<SqliteStore> {
    /// A builder for a worker on the SQLite file at `path`; each thread opens its own
    /// [`SqliteStore`] (creating the file and table if needed).
    pub fn sqlite(path: impl Into<PathBuf>) -> WorkerBuilder<SqliteStore> {
        let path = path.into();
        WorkerBuilder::new(Box::new(move || SqliteStore::open(&path)))
    }
}

#[cfg(feature = "postgres")]
impl Worker<crate::PgStore> {
    /// A builder for a worker on the PostgreSQL database at `url` (a `postgres://` URL or
    /// libpq `key=value` pairs), in the default schema, judging leases by the **database's
    /// clock**: workers on hosts whose clocks disagree still agree on when a lease expires.
    /// Each thread opens its own [`PgStore`](crate::PgStore) (creating the schema if needed).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), leasefence::Error> {
    /// use leasefence::Worker;
    ///
    /// let stats = Worker::postgres("postgres://postgres@127.0.0.1/test")
    ///     .concurrency(4)
    ///     .drain(true)
    ///     .build(|ctx| Ok::<_, String>(format!("did {}", ctx.lease().job_id)))?
    ///     .run()?;
    /// println!("{stats:?}");
    /// # Ok(()) }
    /// ```
    pub fn postgres(url: impl Into<String>) -> WorkerBuilder<crate::PgStore> {
        Self::postgres_with(url, crate::PgOptions::new())
    }

    /// As [`Worker::postgres`], with the store opened by `options` (schema, timeouts) — always
    /// with [`database_clock`](crate::PgOptions::database_clock) on. For a worker that judges
    /// leases by its own clock instead, use [`Worker::builder`] with a store opened without it.
    pub fn postgres_with(
        url: impl Into<String>,
        options: crate::PgOptions,
    ) -> WorkerBuilder<crate::PgStore> {
        let url = url.into();
        let options = options.database_clock(true);
        WorkerBuilder::new(Box::new(move || options.open(&url)))
    }
}

impl<S: Store + Send + 'static> Worker<S> {
    /// A builder for a worker on any backend: `open` is called once per thread (plus once for
    /// the heartbeat) when [`run`](Self::run) starts, because a store is used by one thread at
    /// a time.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use std::time::Duration;
    /// use leasefence::{SqliteOptions, Worker};
    ///
    /// let path = dir.path().join("jobs.db");
    /// let worker = Worker::builder(move || {
    ///     SqliteOptions::new().busy_timeout(Duration::from_secs(2)).open(&path)
    /// })
    /// .drain(true)
    /// .build(|_ctx| Ok::<_, String>("ok".into()))?;
    /// assert_eq!(worker.run()?.claimed, 0);
    /// # Ok(()) }
    /// ```
    pub fn builder(open: impl Fn() -> Result<S> + Send + Sync + 'static) -> WorkerBuilder<S> {
        WorkerBuilder::new(Box::new(open))
    }

    /// A handle to stop the worker and read its counters from another thread (or a signal
    /// handler).
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            stop: self.shared.stop.clone(),
            counters: self.shared.counters.clone(),
        }
    }

    /// Runs until [`ShutdownHandle::shutdown`] (or, with [`drain`](WorkerBuilder::drain), until
    /// no job is ready and none is in flight), then shuts down gracefully: no more claims,
    /// in-flight jobs get until the shutdown deadline to finish, then their tokens are cancelled
    /// and their leases released (fenced, fence kept) so another worker can claim them at once.
    /// Returns the final counters.
    ///
    /// Threads whose handler still has not returned after a second deadline are left running
    /// in the background; whatever they try to store later is refused by the fence.
    ///
    /// # Errors
    /// A store that could not be opened (before anything was claimed), a non-finite clock
    /// reading, or a non-retryable store error while claiming (the worker then shut down
    /// gracefully first). Busy databases are retried, not returned.
    ///
    /// # Panics
    /// When a thread cannot be spawned.
    pub fn run(self) -> Result<WorkerStats> {
        let mut shared = self.shared;
        let mut stores = Vec::with_capacity(shared.slots.len() + 1);
        for _ in 0..=shared.slots.len() {
            stores.push((self.open)()?);
        }
        let beat_store = stores
            .pop()
            .expect("one store per thread plus the heartbeat's");
        let asked = Instant::now();
        if let Some(database) = beat_store.database_now()? {
            // The reading was taken somewhere during the round trip: assume halfway.
            let reading = database.seconds() + asked.elapsed().as_secs_f64() / 2.0;
            match Arc::get_mut(&mut shared) {
                // No clock of the caller's to respect: follow the database's on a monotonic
                // timer, so a step of this host's clock cannot shift the heartbeats.
                Some(only) if only.clock_is_default => {
                    only.clock = Arc::new(Anchored {
                        at_start: reading,
                        start: Instant::now(),
                    });
                }
                _ => {
                    let offset = reading - shared.clock.now();
                    shared.offset.store(offset.to_bits(), Ordering::SeqCst);
                }
            }
            tracing::info!(
                database = reading,
                "the store judges leases by the database's clock; the worker's clock follows it"
            );
        }
        tracing::info!(
            threads = shared.slots.len(),
            owner_prefix = %shared.config.owner_prefix,
            ttl = shared.config.ttl.seconds(),
            "worker started"
        );
        let threads: Vec<JoinHandle<()>> = stores
            .into_iter()
            .enumerate()
            .map(|(index, store)| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("leasefence-worker-{index}"))
                    .spawn(move || work(&shared, index, store))
                    .expect("spawn a worker thread")
            })
            .collect();

        // Running: heartbeats until asked to stop (or drained).
        loop {
            heartbeat(&shared, &beat_store);
            if shared.stop.is_cancelled() {
                break;
            }
            if shared.config.drain && shared.drained() {
                tracing::info!("queue drained: no ready job, none in flight");
                shared.stop.cancel();
                break;
            }
            if threads.iter().all(JoinHandle::is_finished) {
                break;
            }
            shared.stop.wait_timeout(TICK);
        }

        // Shutting down: keep renewing what is in flight until it finishes or the deadline.
        let deadline = Instant::now() + shared.config.deadline;
        while !threads.iter().all(JoinHandle::is_finished) {
            if Instant::now() >= deadline {
                release_in_flight(&shared, &beat_store);
                break;
            }
            heartbeat(&shared, &beat_store);
            std::thread::sleep(TICK.min(deadline.saturating_duration_since(Instant::now())));
        }
        let grace = Instant::now() + shared.config.deadline.max(Duration::from_millis(100));
        while !threads.iter().all(JoinHandle::is_finished) && Instant::now() < grace {
            std::thread::sleep(Duration::from_millis(5));
        }
        for thread in threads {
            if thread.is_finished() {
                if thread.join().is_err() {
                    bump(&shared.counters.errors);
                    tracing::error!("a worker thread panicked outside its handler");
                }
            } else {
                tracing::warn!("a handler ignored its cancellation; leaving its thread behind");
            }
        }
        let stats = shared.counters.snapshot();
        tracing::info!(?stats, "worker stopped");
        match lock(&shared.fatal).take() {
            Some(error) => Err(error),
            None => Ok(stats),
        }
    }
}

/// Stops a running [`Worker`] and reads its counters; clone it freely (into a Ctrl-C handler,
/// another thread, …).
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::Worker;
///
/// let worker = Worker::sqlite(dir.path().join("jobs.db"))
///     .build(|_ctx| Ok::<_, String>("ok".into()))?;
/// let handle = worker.shutdown_handle();
/// let running = std::thread::spawn(move || worker.run());
/// handle.shutdown(); // stop claiming, wait for in-flight jobs, release the rest
/// let stats = running.join().unwrap()?;
/// assert_eq!(stats, handle.stats());
/// assert!(handle.is_shutdown());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ShutdownHandle {
    stop: CancelToken,
    counters: Arc<Counters>,
}

impl fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownHandle")
            .field("shutdown", &self.is_shutdown())
            .field("stats", &self.stats())
            .finish()
    }
}

impl ShutdownHandle {
    /// Asks the worker to stop: no new claims; [`Worker::run`] returns after the graceful
    /// shutdown. Idempotent; returns at once.
    pub fn shutdown(&self) {
        if !self.stop.is_cancelled() {
            tracing::info!("shutdown requested");
        }
        self.stop.cancel();
    }

    /// Whether shutdown was requested (or the worker drained the queue).
    pub fn is_shutdown(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// The worker's counters right now.
    pub fn stats(&self) -> WorkerStats {
        self.counters.snapshot()
    }
}

// ---- the threads ----------------------------------------------------------------------------

/// One worker thread: claim, run, record, until asked to stop.
fn work<S: Store>(shared: &Shared<S>, index: usize, store: S) {
    let owner = format!("{}-{index}", shared.config.owner_prefix);
    let slot = &shared.slots[index];
    // How many jobs the next claim asks for: starts at one, follows the handlers' speed.
    let mut want = 1;
    while !shared.stop.is_cancelled() {
        let now = match shared.now() {
            Ok(now) => now,
            Err(e) => return shared.fatal(e),
        };
        let claimed = Owner::new(&owner)
            .and_then(|o| store.claim_batch(o, now, shared.config.ttl, BatchSize::new(want)?));
        match claimed {
            Ok(leases) if !leases.is_empty() => {
                slot.idle.store(false, Ordering::SeqCst);
                let per_job = run_batch(shared, slot, &store, leases, now.seconds());
                want = batch_size_for(per_job, shared);
            }
            Ok(_) => {
                slot.idle.store(true, Ordering::SeqCst);
                shared.stop.wait_timeout(shared.config.poll);
            }
            Err(e) if e.is_retryable() => {
                slot.idle.store(false, Ordering::SeqCst);
                bump(&shared.counters.errors);
                tracing::warn!(%owner, error = %e, "claim_next met a busy database; trying again");
                shared.stop.wait_timeout(shared.config.poll);
            }
            Err(e) => {
                bump(&shared.counters.errors);
                shared.fatal(e);
            }
        }
    }
}

/// The next claim's size: as many jobs as fit in [`BATCH_WINDOW`] at `per_job` each (and in a
/// quarter of the heartbeat interval), between 1 and the configured batch.
fn batch_size_for<S>(per_job: Duration, shared: &Shared<S>) -> usize {
    let window = BATCH_WINDOW
        .as_secs_f64()
        .min(shared.config.heartbeat / 4.0);
    let fits = window / per_job.as_secs_f64().max(1e-9);
    (fits as usize).clamp(1, shared.config.batch)
}

/// Runs the handlers of one claimed batch in order and stores their outcomes; returns the
/// mean time per job. Results are written together (one transaction) at the end of the
/// batch, or earlier once the oldest has waited [`BATCH_WINDOW`].
fn run_batch<S: Store>(
    shared: &Shared<S>,
    slot: &Slot,
    store: &S,
    leases: Vec<Lease>,
    claimed_at: f64,
) -> Duration {
    let counters = &shared.counters;
    let jobs: Vec<Arc<Job>> = leases
        .into_iter()
        .map(|lease| {
            bump(&counters.claimed);
            tracing::info!(
                job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner,
                until = lease.until, "claimed"
            );
            Arc::new(Job {
                token: CancelToken::new(),
                lost: AtomicBool::new(false),
                settled: AtomicU8::new(UNSETTLED),
                beat: Mutex::new(Beat {
                    phase: Phase::Queued,
                    until: lease.until,
                    renewed_at: claimed_at,
                }),
                lease,
            })
        })
        .collect();
    *lock(&slot.jobs) = jobs.clone();
    let started = Instant::now();
    let mut ran = 0u32;
    let mut results: Vec<(Arc<Job>, String)> = Vec::new();
    let mut oldest: Option<Instant> = None;
    for job in &jobs {
        if oldest.is_some_and(|t| t.elapsed() >= BATCH_WINDOW) {
            store_results(shared, store, std::mem::take(&mut results));
            oldest = None;
        }
        if shared.stop.is_cancelled() {
            break; // what is still queued is released below
        }
        {
            let mut beat = lock(&job.beat);
            if beat.phase != Phase::Queued {
                continue; // lost while it waited (renew refused) or released at the deadline
            }
            beat.phase = Phase::Running;
        }
        ran += 1;
        let ctx = JobContext { job, store, shared };
        let returned = catch_unwind(AssertUnwindSafe(|| (shared.handler)(&ctx)));
        let settled = job.settled.load(Ordering::SeqCst);
        if settled == UNSETTLED
            && let Ok(Ok(result)) = returned
        {
            // Written with the batch; the heartbeat keeps the lease alive meanwhile.
            results.push((job.clone(), result));
            oldest.get_or_insert_with(Instant::now);
            continue;
        }
        // Any other outcome is written now, with the heartbeat stopped first.
        job.finish();
        let lease = &job.lease;
        let outcome = match (settled, returned) {
            (SETTLED_COMPLETED, _) => JobOutcome::Completed,
            (SETTLED_REFUSED, _) => JobOutcome::Refused,
            (_, Ok(Ok(_))) => unreachable!("an unsettled result is written with the batch"),
            (_, Ok(Err(error))) => record_failure(shared, store, lease, error),
            (_, Err(panic)) => {
                let error = format!("handler panicked: {}", panic_message(&*panic));
                record_failure(shared, store, lease, error)
            }
        };
        report(shared, lease, &outcome);
    }
    store_results(shared, store, results);
    release_queued(shared, store, &jobs);
    lock(&slot.jobs).clear();
    started.elapsed() / ran.max(1)
}

/// Hands the outcome to the `on_outcome` hook.
fn report<S>(shared: &Shared<S>, lease: &Lease, outcome: &JobOutcome) {
    if let Some(hook) = &shared.on_outcome
        && catch_unwind(AssertUnwindSafe(|| hook(lease, outcome))).is_err()
    {
        // The outcome is already stored; a broken hook must not take the thread down with it.
        bump(&shared.counters.errors);
        tracing::error!(job_id = %lease.job_id, fence = lease.fence, "the on_outcome hook panicked");
    }
}

/// Writes the waiting results: one `complete` for one, one `complete_batch` for several.
fn store_results<S: Store>(shared: &Shared<S>, store: &S, results: Vec<(Arc<Job>, String)>) {
    if results.is_empty() {
        return;
    }
    for (job, _) in &results {
        job.finish();
    }
    let written = busy_retry(shared, || {
        let now = shared.now()?;
        match results.as_slice() {
            [(job, result)] => Ok(vec![store.complete_lease(&job.lease, now, result)?]),
            _ => {
                let items: Vec<(&Lease, &str)> = results
                    .iter()
                    .map(|(job, result)| (&job.lease, result.as_str()))
                    .collect();
                store.complete_batch(&items, now)
            }
        }
    });
    for (k, (job, _)) in results.iter().enumerate() {
        let lease = &job.lease;
        let outcome = match &written {
            Ok(stored) if stored.get(k) == Some(&true) => {
                bump(&shared.counters.completed);
                tracing::info!(job_id = %lease.job_id, fence = lease.fence, "completed");
                JobOutcome::Completed
            }
            Ok(_) => {
                bump(&shared.counters.stale_refused);
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner,
                    "stale completion refused: the lease is no longer current; result not stored"
                );
                JobOutcome::Refused
            }
            Err(e) => store_error(shared, lease, "complete", e),
        };
        report(shared, lease, &outcome);
    }
}

/// Gives back, fenced, the jobs of a batch that were never started (the worker is stopping).
fn release_queued<S: Store>(shared: &Shared<S>, store: &S, jobs: &[Arc<Job>]) {
    for job in jobs {
        let mut beat = lock(&job.beat);
        if beat.phase != Phase::Queued {
            continue;
        }
        beat.phase = Phase::Released;
        let lease = &job.lease;
        match busy_retry(shared, || store.release_lease(lease)) {
            Ok(true) => {
                bump(&shared.counters.released);
                tracing::info!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "released unstarted at shutdown; claimable again at once"
                );
            }
            Ok(false) => tracing::warn!(
                job_id = %lease.job_id, fence = lease.fence,
                "release refused: the lease was no longer held"
            ),
            Err(e) => {
                bump(&shared.counters.errors);
                tracing::error!(
                    job_id = %lease.job_id, fence = lease.fence, error = %e,
                    "release failed; the lease will expire instead"
                );
            }
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Runs a store write, trying it again a few times while the database is busy.
fn busy_retry<S, T>(shared: &Shared<S>, mut write: impl FnMut() -> Result<T>) -> Result<T> {
    let mut tries = 0;
    loop {
        match write() {
            Err(e) if e.is_retryable() && tries < BUSY_RETRIES => {
                tries += 1;
                bump(&shared.counters.errors);
                std::thread::sleep(TICK * tries);
            }
            other => return other,
        }
    }
}

fn record_failure<S: Store>(
    shared: &Shared<S>,
    store: &S,
    lease: &Lease,
    error: String,
) -> JobOutcome {
    let counters = &shared.counters;
    let written = busy_retry(shared, || {
        let now = shared.now()?;
        let retry_at = shared.config.backoff.retry_at(lease, now);
        store.fail(lease, now, &error, Some(retry_at))
    });
    match written {
        Ok(Some(Failed::Retrying { at })) => {
            bump(&counters.retried);
            tracing::warn!(
                job_id = %lease.job_id, fence = lease.fence, %error, retry_at = at,
                "failed; will retry"
            );
            JobOutcome::Retrying { at, error }
        }
        Ok(Some(Failed::Dead)) => {
            bump(&counters.dead);
            tracing::error!(
                job_id = %lease.job_id, fence = lease.fence, %error,
                "failed on its last attempt; the job is dead"
            );
            JobOutcome::Dead { error }
        }
        Ok(None) => {
            bump(&counters.stale_refused);
            tracing::warn!(
                job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner, %error,
                "stale failure refused: the lease is no longer current; nothing stored"
            );
            JobOutcome::Refused
        }
        Err(e) => store_error(shared, lease, "fail", e),
    }
}

fn store_error<S>(shared: &Shared<S>, lease: &Lease, op: &str, e: impl Display) -> JobOutcome {
    bump(&shared.counters.errors);
    tracing::error!(
        job_id = %lease.job_id, fence = lease.fence, op, error = %e,
        "could not record the outcome; the lease will expire"
    );
    JobOutcome::StoreError(e.to_string())
}

/// Renews every running job whose last renewal is `heartbeat` seconds old on the clock. A
/// refused renew marks the job lost and cancels its token.
fn heartbeat<S: Store>(shared: &Shared<S>, store: &S) {
    for job in shared.in_flight() {
        let mut beat = lock(&job.beat);
        if !matches!(beat.phase, Phase::Running | Phase::Queued) {
            continue;
        }
        let now = shared.clock_now();
        if now < beat.renewed_at + shared.config.heartbeat {
            continue;
        }
        let lease = &job.lease;
        let renewed = busy_retry(shared, || {
            store.renew(
                lease.job(),
                lease.holder(),
                lease.fence,
                Now::new(now)?,
                shared.config.ttl,
            )
        });
        match renewed {
            Ok(true) => {
                beat.renewed_at = now;
                beat.until = now + shared.config.ttl.seconds();
                bump(&shared.counters.renewed);
                tracing::debug!(
                    job_id = %lease.job_id, fence = lease.fence, until = beat.until, "renewed"
                );
            }
            Ok(false) => {
                beat.phase = Phase::Lost;
                job.lost.store(true, Ordering::SeqCst);
                // Count before cancelling: whoever the token wakes must see the loss counted.
                bump(&shared.counters.lost);
                job.token.cancel();
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner, now,
                    until = beat.until,
                    "lease lost: renew refused; cancelling the handler, its writes will be refused"
                );
            }
            Err(e) => {
                bump(&shared.counters.errors);
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence, error = %e,
                    "renew failed; trying again on the next tick"
                );
            }
        }
    }
}

/// At the shutdown deadline: cancels every job still running and gives its lease back, fenced.
fn release_in_flight<S: Store>(shared: &Shared<S>, store: &S) {
    for job in shared.in_flight() {
        let mut beat = lock(&job.beat);
        if !matches!(beat.phase, Phase::Running | Phase::Queued) {
            continue;
        }
        beat.phase = Phase::Released;
        job.token.cancel();
        let lease = &job.lease;
        match busy_retry(shared, || store.release_lease(lease)) {
            Ok(true) => {
                bump(&shared.counters.released);
                tracing::info!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "released at the shutdown deadline; claimable again at once"
                );
            }
            Ok(false) => {
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "release refused: the lease was no longer held"
                );
            }
            Err(e) => {
                bump(&shared.counters.errors);
                tracing::error!(
                    job_id = %lease.job_id, fence = lease.fence, error = %e,
                    "release failed; the lease will expire instead"
                );
            }
        }
    }
}
