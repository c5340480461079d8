//! [`Watch`]: how an idle worker learns that jobs may be ready, handed out by
//! [`Store::watch`](crate::Store::watch).

use crate::error::Result;

/// A way to learn, without polling the queue, that jobs may have become ready: what an idle
/// [`Worker`](crate::Worker) waits on ([`Store::watch`](crate::Store::watch)). A hint, never a
/// promise: after a wake-up the caller still claims, and may find nothing.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use std::time::Duration;
/// use leasefence::{NewJob, SqliteStore, Store};
/// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
/// let mut watch = store.watch()?.expect("SQLite has a watch");
/// assert!(!watch.wait(Duration::from_millis(10))?); // nothing happened
/// store.enqueue_job(NewJob::new("j")?)?;
/// assert!(watch.wait(Duration::from_secs(5))?); // woken by the enqueue
/// # Ok::<(), leasefence::Error>(())
/// ```
pub trait Watch: Send {
    /// Blocks for at most `timeout` (real time) until the store may have new ready jobs —
    /// something was enqueued, retried or resumed, or (SQLite) anything was committed by
    /// another connection — and returns `true`; `false` when the time ran out first.
    ///
    /// # Errors
    /// Connection or backend failures; the caller falls back to polling.
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool>;

    /// Gives up the watch's own connection, if it holds one, until the next
    /// [`wait`](Watch::wait) makes a new one. The worker calls it while its claims cannot
    /// reach the store: a server out of connections then gets this one back for the claims —
    /// otherwise every worker of a fleet could hold just its watch's session and wait for
    /// another, none of them claiming. The default does nothing (a watch without a
    /// connection of its own).
    fn disconnect(&mut self) {}
}
