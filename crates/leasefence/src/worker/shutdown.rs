//! [`ShutdownHandle`](crate::ShutdownHandle): stops a running worker and reads its counters from
//! anywhere.

use std::fmt;
use std::sync::Arc;

use super::cancel::CancelToken;
use super::stats::{Counters, WorkerStats};

/// Stops a running [`Worker`](crate::Worker) and reads its counters; clone it freely (into a
/// signal handler, another thread, …).
///
/// [`shutdown`](Self::shutdown) is the graceful stop: running jobs get the shutdown deadline to
/// finish. [`shutdown_now`](Self::shutdown_now) cuts that deadline to zero — the usual answer to
/// a second Ctrl-C. With the cargo feature `signals`, `on_signals` wires both to the process's
/// SIGINT, SIGTERM and SIGHUP.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::Worker;
///
/// let worker = Worker::sqlite(dir.path().join("jobs.db"))
///     .build(|_ctx| Ok("ok".into()))?;
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
    pub(super) stop: CancelToken,
    pub(super) now: CancelToken,
    pub(super) counters: Arc<Counters>,
}

impl fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownHandle")
            .field("shutdown", &self.is_shutdown())
            .field("now", &self.is_shutdown_now())
            .field("stats", &self.stats())
            .finish()
    }
}

impl ShutdownHandle {
    /// Asks the worker to stop: no new claims; [`Worker::run`](crate::Worker::run) returns after
    /// the graceful shutdown (running jobs get the
    /// [shutdown deadline](crate::WorkerBuilder::shutdown_deadline) to finish). Idempotent;
    /// returns at once.
    pub fn shutdown(&self) {
        if !self.stop.is_cancelled() {
            tracing::info!("shutdown requested");
        }
        self.stop.cancel();
    }

    /// Like [`shutdown`](Self::shutdown), with the shutdown deadline cut to zero: no new
    /// claims, and every job still in flight has its token cancelled and its lease released
    /// (fenced, fence kept) at once, so another worker can claim it. Handlers then get a short
    /// grace (100 ms) to return before [`Worker::run`](crate::Worker::run) returns without
    /// them.
    ///
    /// May come at any time: before `run`, during a graceful shutdown already under way (the
    /// deadline it is waiting out ends now), or after. Idempotent; returns at once.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use std::time::Duration;
    /// use leasefence::{NewJob, SqliteStore, Store, Worker};
    ///
    /// let path = dir.path().join("jobs.db");
    /// SqliteStore::open(&path)?.enqueue_many(&[NewJob::new("slow")?])?;
    /// let worker = Worker::sqlite(&path)
    ///     .shutdown_deadline(Duration::from_secs(3600))
    ///     .build(|ctx| {
    ///         ctx.token().wait(); // runs until cancelled
    ///         Ok("never stored".into())
    ///     })?;
    /// let handle = worker.shutdown_handle();
    /// let running = std::thread::spawn(move || worker.run());
    /// while handle.stats().claimed == 0 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// handle.shutdown(); // the job would get an hour…
    /// handle.shutdown_now(); // …but is cancelled and released now
    /// let stats = running.join().unwrap()?;
    /// assert_eq!((stats.claimed, stats.released), (1, 1));
    /// # Ok(()) }
    /// ```
    pub fn shutdown_now(&self) {
        if !self.now.is_cancelled() {
            tracing::info!("immediate shutdown requested: in-flight jobs are released now");
        }
        self.stop.cancel();
        self.now.cancel();
    }

    /// Whether shutdown was requested (or the worker drained the queue).
    pub fn is_shutdown(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Whether [`shutdown_now`](Self::shutdown_now) was requested.
    pub fn is_shutdown_now(&self) -> bool {
        self.now.is_cancelled()
    }

    /// The worker's counters right now.
    pub fn stats(&self) -> WorkerStats {
        self.counters.snapshot()
    }
}
