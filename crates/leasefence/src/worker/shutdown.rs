//! [`ShutdownHandle`](crate::ShutdownHandle): stops a running worker and reads its counters from
//! anywhere.

use std::fmt;
use std::sync::Arc;

use super::cancel::CancelToken;
use super::stats::{Counters, WorkerStats};

/// Stops a running [`Worker`](crate::Worker) and reads its counters; clone it freely (into a
/// Ctrl-C handler,
/// another thread, …).
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
    pub(super) counters: Arc<Counters>,
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
    /// Asks the worker to stop: no new claims; [`Worker::run`](crate::Worker::run) returns after
    /// the graceful
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
