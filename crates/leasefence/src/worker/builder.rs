//! [`WorkerBuilder`]: a worker's settings, checked by [`build`](WorkerBuilder::build), and the
//! constructors of [`Worker`] that make one.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::batch::DEFAULT_BATCH;
use super::cancel::CancelToken;
use super::clock::{Clock, SystemClock, WorkerClock};
use super::context::{HandlerError, JobContext};
use super::run::{Opener, Worker};
use super::shared::{Config, Handler, OutcomeHook, Shared, Slot};
use super::stats::JobOutcome;
use crate::error::{Error, Result};
use crate::sqlite::{SqliteOptions, SqliteStore};
use crate::store::Store;
use crate::types::{Backoff, Lease, NewJob, Owner, Queue, Queues, Ttl};

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
///     .build(|ctx| Ok(format!("{} done", ctx.job_id())))?;
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
    timeout: Option<f64>,
    drain: bool,
    batch: usize,
    #[cfg(feature = "cron")]
    scheduler: bool,
    clock: Arc<dyn Clock>,
    clock_is_default: bool,
    on_outcome: Option<Box<OutcomeHook>>,
    queues: Vec<(String, usize)>,
    kinds: Vec<(String, Box<Handler<S>>)>,
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
            .field("timeout", &self.timeout)
            .field("drain", &self.drain)
            .field("batch", &self.batch)
            .field("queues", &self.queues)
            .field(
                "kinds",
                &self.kinds.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
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
            timeout: None,
            drain: false,
            batch: DEFAULT_BATCH,
            #[cfg(feature = "cron")]
            scheduler: false,
            clock: Arc::new(SystemClock),
            clock_is_default: true,
            on_outcome: None,
            queues: Vec::new(),
            kinds: Vec::new(),
        }
    }

    /// Serves the queue `name` with `threads` threads of its own, which claim only its jobs.
    /// Call it once per queue; a worker given no queue has [`concurrency`](Self::concurrency)
    /// threads that claim from every queue. A paused queue's threads wait until it is resumed.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{NewJob, SqliteStore, Store, Worker};
    /// let path = dir.path().join("jobs.db");
    /// let store = SqliteStore::open(&path)?;
    /// store.enqueue_job(NewJob::new("mail-1")?.queue("emails")?)?;
    /// store.enqueue_job(NewJob::new("video-1")?.queue("video")?)?;
    /// let stats = Worker::sqlite(&path)
    ///     .queue("emails", 2) // two threads for emails, none for video
    ///     .drain(true)
    ///     .build(|ctx| Ok(format!("sent {}", ctx.job_id())))?
    ///     .run()?;
    /// assert_eq!(stats.completed, 1); // video-1 is still waiting
    /// # Ok(()) }
    /// ```
    pub fn queue(mut self, name: impl Into<String>, threads: usize) -> Self {
        self.queues.push((name.into(), threads));
        self
    }

    /// Runs the jobs of kind `kind` ([`NewJob::kind`]) with `handler`. Once any kind is
    /// registered, a job is routed by its kind: a job of a registered kind runs that kind's
    /// handler; a job of any other kind is never run by other code — its attempt fails with
    /// the error `no handler for kind "…" on this worker` (retried per the backoff, so a
    /// worker that has the handler may take it); a job without a kind runs the handler given
    /// to [`build`](Self::build), or fails the same way after
    /// [`build_kinds`](Self::build_kinds).
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{NewJob, SqliteStore, Store, Worker};
    /// let path = dir.path().join("jobs.db");
    /// let store = SqliteStore::open(&path)?;
    /// store.enqueue_job(NewJob::new("a")?.kind("email")?)?;
    /// store.enqueue_job(NewJob::new("b")?.kind("resize")?)?;
    /// let stats = Worker::sqlite(&path)
    ///     .kind("email", |ctx| Ok(format!("mailed {}", ctx.job_id())))
    ///     .kind("resize", |ctx| Ok(format!("resized {}", ctx.job_id())))
    ///     .drain(true)
    ///     .build_kinds()?
    ///     .run()?;
    /// assert_eq!(stats.completed, 2);
    /// # Ok(()) }
    /// ```
    pub fn kind<H>(mut self, kind: impl Into<String>, handler: H) -> Self
    where
        H: Fn(&JobContext<'_, S>) -> std::result::Result<String, HandlerError>
            + Send
            + Sync
            + 'static,
    {
        self.kinds.push((
            kind.into(),
            Box::new(move |ctx| handler(ctx).map_err(|e| e.to_string())),
        ));
        self
    }

    /// As [`build`](Self::build) with no handler for jobs without a kind: the worker runs only
    /// the kinds registered with [`kind`](Self::kind).
    ///
    /// # Errors
    /// As [`build`](Self::build), and [`Error::InvalidArgument`] naming `kind` when no kind was
    /// registered.
    pub fn build_kinds(self) -> Result<Worker<S>> {
        if self.kinds.is_empty() {
            return Err(Error::invalid(
                "kind",
                "register at least one kind with WorkerBuilder::kind, or give build a handler",
            ));
        }
        self.finish(None)
    }

    /// The most jobs one thread claims in one transaction (default 128; 1 claims one job at a
    /// time).
    ///
    /// Each thread sizes its claims by how long its handlers take: it starts with one job,
    /// and while handlers are quick it claims as many as it can run in about 10 ms (at most
    /// `max`), and writes their results with one
    /// [`Store::complete_batch`](crate::Store::complete_batch) — one commit, one
    /// fsync, for the whole batch. Slow handlers keep it at one job per claim; the size
    /// follows the handlers' recent time, so when quick handlers turn slow, the rest of a
    /// batch claimed for quick ones waits behind them on its thread (for at most the batch
    /// size × the slow time) while another thread may be idle — lower `max` for handlers of
    /// mixed speed. Jobs waiting in a batch are renewed by the
    /// heartbeat like running ones, a result waits at most ~10 ms before it is written, and on
    /// shutdown the jobs not started yet are released at once (fenced) for others to claim.
    pub fn batch(mut self, max: usize) -> Self {
        self.batch = max;
        self
    }

    /// Number of worker threads, each with its own store (default 1), claiming from every
    /// queue. With named queues ([`queue`](Self::queue)) each queue has its own threads
    /// instead and this is not used.
    pub fn concurrency(mut self, threads: usize) -> Self {
        self.concurrency = threads;
        self
    }

    /// Lease duration in seconds of the [`Clock`](crate::Clock) (default 30).
    pub fn ttl(mut self, seconds: f64) -> Self {
        self.ttl = seconds;
        self
    }

    /// The heartbeat renews a running job's lease every `fraction · ttl` seconds of the clock
    /// (default 1/3: two chances to renew before the lease runs out). Between 0 and 1.
    ///
    /// A renewal that fails (a busy database, a server down or answering 503) is tried again a
    /// tenth of what the lease then has left, `(1 − fraction) · ttl / 10` (at least 10 ms, at
    /// most 1 s), after the failed try began — at once when the try itself took that long (a
    /// busy database's timeout): a store that fails at once is not asked every tick, and one
    /// that answers again before the lease ends still renews it.
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

    /// The retry schedule after a handler failure (default
    /// [`Backoff::default`](crate::Backoff::default)).
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

    /// A run-time limit per job, in seconds of the [`Clock`](crate::Clock) (default: none).
    /// When a handler has run this long, its token is cancelled, the heartbeat stops renewing
    /// its lease, and the attempt is recorded as a failure (`timed out after … s`), retried
    /// per the backoff or dead after the last attempt — whatever the handler returns. A
    /// handler that ignores its token keeps running, but its lease then expires and another
    /// worker may take the job.
    pub fn timeout(mut self, seconds: f64) -> Self {
        self.timeout = Some(seconds);
        self
    }

    /// With `true`, [`Worker::run`] also returns once no job is ready and none is in flight
    /// (default `false`: run until [`ShutdownHandle::shutdown`](crate::ShutdownHandle::shutdown)).
    pub fn drain(mut self, drain: bool) -> Self {
        self.drain = drain;
        self
    }

    /// With `true`, the worker also takes the **scheduler role** when no other worker holds
    /// it: a thread of its own (with one more store connection) runs a
    /// [`Scheduler`](crate::Scheduler) as `<owner prefix>-scheduler`, which enqueues the due
    /// runs of every [`Schedule`](crate::Schedule) under a lease and fence of its own, and gives
    /// the role back when the worker stops. Any number of workers may ask for it: one holds
    /// it, the others stand by and take over within a lease's time when it stops or stalls.
    /// The clock must be Unix seconds (the default [`SystemClock`] is). Default `false`. Needs
    /// the cargo feature `cron`.
    #[cfg(feature = "cron")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cron")))]
    pub fn scheduler(mut self, on: bool) -> Self {
        self.scheduler = on;
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
    /// [`WorkerStats::errors`](crate::WorkerStats::errors).
    pub fn on_outcome(
        mut self,
        hook: impl Fn(&Lease, &JobOutcome) + Send + Sync + 'static,
    ) -> Self {
        self.on_outcome = Some(Box::new(hook));
        self
    }

    /// Checks the settings and makes the worker with `handler`, which every thread shares.
    ///
    /// The handler returns the result to store, or a
    /// [`HandlerError`](crate::HandlerError) — any error, `&str` or `String`, through `?` or
    /// `.into()` — whose `Display` is stored as the failure. A panic is caught and counts as a
    /// failure. The error type is fixed, so `Ok(format!(…))` needs no annotation:
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let worker = leasefence::Worker::sqlite(dir.path().join("jobs.db")).build(|ctx| {
    ///     let n: u32 = String::from_utf8_lossy(ctx.payload().unwrap_or_default()).parse()?;
    ///     if n == 0 {
    ///         return Err("zero is not a size".into());
    ///     }
    ///     Ok(format!("{} resized to {n}", ctx.job_id()))
    /// })?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `concurrency` (0 without named queues), `ttl` (not finite and `> 0`),
    /// `heartbeat_fraction` (not strictly between 0 and 1), `owner` (an empty prefix),
    /// `poll_interval` (zero), `queue` (an invalid name, one given twice, or 0 threads) or
    /// `kind` (an invalid kind, or one registered twice).
    pub fn build<H>(self, handler: H) -> Result<Worker<S>>
    where
        H: Fn(&JobContext<'_, S>) -> std::result::Result<String, HandlerError>
            + Send
            + Sync
            + 'static,
    {
        self.finish(Some(Box::new(move |ctx| {
            handler(ctx).map_err(|e| e.to_string())
        })))
    }

    /// The threads' queues: one [`Queues::All`] per thread without named queues, else the
    /// named queue's own threads.
    fn slots(&self) -> Result<Vec<Slot>> {
        if self.queues.is_empty() {
            return Ok((0..self.concurrency)
                .map(|_| Slot::new(Queues::All))
                .collect());
        }
        let mut slots = Vec::new();
        let mut seen = Vec::new();
        for (name, threads) in &self.queues {
            let queue = Queue::new(name.clone())?;
            if seen.contains(&queue) {
                return Err(Error::invalid(
                    "queue",
                    format!("the queue {name:?} is given twice"),
                ));
            }
            if *threads == 0 {
                return Err(Error::invalid(
                    "queue",
                    format!("the queue {name:?} needs at least 1 thread"),
                ));
            }
            slots.extend((0..*threads).map(|_| Slot::new(Queues::one(queue.clone()))));
            seen.push(queue);
        }
        Ok(slots)
    }

    fn finish(self, handler: Option<Box<Handler<S>>>) -> Result<Worker<S>> {
        // Not used with named queues (each has its own threads), so not checked then.
        if self.concurrency == 0 && self.queues.is_empty() {
            return Err(Error::invalid("concurrency", "must be at least 1"));
        }
        let ttl = Ttl::new(self.ttl)?;
        let fraction = self.heartbeat_fraction;
        if !(fraction > 0.0 && fraction < 1.0) {
            return Err(Error::invalid(
                "heartbeat_fraction",
                format!(
                    "must be strictly between 0 and 1, got {}",
                    crate::types::args::Seconds(fraction)
                ),
            ));
        }
        if self.batch == 0 {
            return Err(Error::invalid("batch", "must be at least 1"));
        }
        self.backoff.check()?;
        if self.poll.is_zero() {
            return Err(Error::invalid("poll_interval", "must be greater than 0"));
        }
        if let Some(limit) = self.timeout
            && !(limit.is_finite() && limit > 0.0)
        {
            return Err(Error::invalid(
                "timeout",
                format!(
                    "must be a finite number of seconds > 0, got {}",
                    crate::types::args::Seconds(limit)
                ),
            ));
        }
        let slots = self.slots()?;
        let mut kinds = std::collections::BTreeMap::new();
        for (kind, kind_handler) in self.kinds {
            // The same rules as a job's kind.
            NewJob::new("-")?.kind(kind.clone())?;
            if kinds.insert(kind.clone(), kind_handler).is_some() {
                return Err(Error::invalid(
                    "kind",
                    format!("the kind {kind:?} is registered twice"),
                ));
            }
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
                timeout: self.timeout,
                drain: self.drain,
                batch: self.batch,
                #[cfg(feature = "cron")]
                scheduler: self.scheduler,
            },
            clock: WorkerClock::new(self.clock, self.clock_is_default),
            handler,
            kinds,
            on_outcome: self.on_outcome,
            counters: Arc::default(),
            stop: CancelToken::new(),
            now: CancelToken::new(),
            slots,
            fatal: Default::default(),
            outage: std::sync::Mutex::new(None),
            in_outage: Default::default(),
        };
        Ok(Worker {
            open: self.open,
            shared: Arc::new(shared),
        })
    }
}

/// `{hostname}-{pid}`, so that workers on different machines and processes never share an
/// owner name.
pub(crate) fn default_owner_prefix() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}

impl Worker<SqliteStore> {
    /// A builder for a worker on the SQLite file at `path`; each thread opens its own
    /// [`SqliteStore`] (creating the file and table if needed).
    pub fn sqlite(path: impl Into<PathBuf>) -> WorkerBuilder<SqliteStore> {
        Self::sqlite_with(path, SqliteOptions::new())
    }

    /// As [`Worker::sqlite`], with every thread's store opened by `options` (durability, busy
    /// timeout, size limit).
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{SqliteOptions, Synchronous, Worker};
    ///
    /// // Faster commits; a power loss may forget the last ones (see `Synchronous::Normal`).
    /// let options = SqliteOptions::new().synchronous(Synchronous::Normal);
    /// let stats = Worker::sqlite_with(dir.path().join("jobs.db"), options)
    ///     .drain(true)
    ///     .build(|_ctx| Ok("ok".into()))?
    ///     .run()?;
    /// assert_eq!(stats.claimed, 0);
    /// # Ok(()) }
    /// ```
    pub fn sqlite_with(
        path: impl Into<PathBuf>,
        options: SqliteOptions,
    ) -> WorkerBuilder<SqliteStore> {
        let path = path.into();
        WorkerBuilder::new(Box::new(move || options.open(&path)))
    }
}

#[cfg(feature = "postgres")]
impl Worker<crate::PgStore> {
    /// A builder for a worker on the PostgreSQL database at `url` (a `postgres://` URL or
    /// libpq `key=value` pairs), in the default schema, judging leases by the **database's
    /// clock**: workers on hosts whose clocks disagree still agree on when a lease expires.
    /// Each thread opens its own [`PgStore`](crate::PgStore) (creating the schema if needed),
    /// and so does the heartbeat: each of those stores holds **one connection** (a pool of
    /// size 1, as a store is used by one thread at a time). One more session `LISTEN`s for
    /// enqueues (the store's [`Watch`](crate::Watch)), so a worker of `N` threads keeps
    /// `N + 2` sessions open on the server.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), leasefence::Error> {
    /// use leasefence::Worker;
    ///
    /// let stats = Worker::postgres("postgres://postgres@127.0.0.1/test")
    ///     .concurrency(4)
    ///     .drain(true)
    ///     .build(|ctx| Ok(format!("did {}", ctx.lease().job_id)))?
    ///     .run()?;
    /// println!("{stats:?}");
    /// # Ok(()) }
    /// ```
    pub fn postgres(url: impl Into<String>) -> WorkerBuilder<crate::PgStore> {
        Self::postgres_with(url, crate::PgOptions::new())
    }

    /// As [`Worker::postgres`], with the stores opened by `options` (schema, timeouts) —
    /// always with [`database_clock`](crate::PgOptions::database_clock) on and a
    /// [`pool_size`](crate::PgOptions::pool_size) of 1: one connection per thread, plus one for
    /// the heartbeat and one for the watch. For a worker that judges leases by its own clock instead, use
    /// [`Worker::builder`] with a store opened without it.
    pub fn postgres_with(
        url: impl Into<String>,
        options: crate::PgOptions,
    ) -> WorkerBuilder<crate::PgStore> {
        let url = url.into();
        // One store per thread, used by that thread only: one connection is all it needs.
        let options = options.database_clock(true).pool_size(1);
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
    /// .build(|_ctx| Ok("ok".into()))?;
    /// assert_eq!(worker.run()?.claimed, 0);
    /// # Ok(()) }
    /// ```
    pub fn builder(open: impl Fn() -> Result<S> + Send + Sync + 'static) -> WorkerBuilder<S> {
        WorkerBuilder::new(Box::new(open))
    }
}
