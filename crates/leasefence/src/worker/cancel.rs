//! [`CancelToken`]: the flag a worker sets when a job's lease is lost or shutdown gives up on it.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::sync::lock;
use crate::deadline::Deadline;

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
    /// Bumped by `nudge`: wakes `wait_nudged` waiters without cancelling.
    nudges: AtomicU64,
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
        self.wait_for(None, timeout)
    }

    /// How many nudges so far; pass it to [`wait_nudged`](Self::wait_nudged).
    pub(crate) fn nudges(&self) -> u64 {
        self.inner.nudges.load(Ordering::SeqCst)
    }

    /// Wakes the `wait_nudged` waiters without cancelling the token (the worker's wake-up:
    /// jobs may be ready).
    pub(crate) fn nudge(&self) {
        let _guard = lock(&self.inner.lock);
        self.inner.nudges.fetch_add(1, Ordering::SeqCst);
        self.inner.cv.notify_all();
    }

    /// As [`wait_timeout`](Self::wait_timeout), but also returns (`false`) as soon as a nudge
    /// came after `seen` — one taken by [`nudges`](Self::nudges) before the caller last looked
    /// for work, so a nudge in between is not missed.
    pub(crate) fn wait_nudged(&self, seen: u64, timeout: Duration) -> bool {
        self.wait_for(Some(seen), timeout)
    }

    /// Blocks until the token is cancelled (`true`), `timeout` has passed, or — with
    /// `nudged_since` — a nudge came after that count (`false` for both).
    fn wait_for(&self, nudged_since: Option<u64>, timeout: Duration) -> bool {
        let deadline = Deadline::after(timeout);
        let mut guard = lock(&self.inner.lock);
        loop {
            if self.is_cancelled() {
                return true;
            }
            if nudged_since.is_some_and(|seen| self.nudges() != seen) {
                return false;
            }
            let left = deadline.left();
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
