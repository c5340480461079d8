//! [`AsyncJob`]: what an async handler gets — the lease, and a signal that fires when the lease
//! is no longer the worker's.

use tokio::sync::{mpsc, oneshot, watch};

use super::store::AsyncStore;
use crate::store::Store as _;
use crate::types::{Fence, Lease};

/// Why a running job's lease ended before its handler did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// Another claim took the lease over, or it expired (the worker stalled past its ttl): a
    /// renew was refused. Nothing the handler returns is stored.
    TakenOver,
    /// An operator cancelled, retried, released or deleted the job.
    Operator,
    /// The handler ran past the worker's time limit; the attempt is recorded as failed.
    TimedOut,
    /// The worker is shutting down past its deadline: the lease is given back (fence kept).
    Shutdown,
    /// The handler gave the lease back itself, with [`AsyncJob::release`]: the job is
    /// claimable again at once and the attempt refunded.
    Released,
}

/// A handler's request to give its lease back, answered by its job's task.
pub(super) type ReleaseRequest = oneshot::Sender<crate::Result<bool>>;

/// One claimed job, handed to an [`AsyncWorker`](super::AsyncWorker) handler.
///
/// When the lease ends under the handler — taken over, ended by an operator, past the time
/// limit, or given back at the shutdown deadline — the worker **drops the handler's future**
/// (at its next `.await`) and writes nothing of it. Tasks the handler spawned itself are not
/// dropped: they can wait on [`AsyncJob::lost`] or check [`AsyncJob::is_lost`]. For a side
/// effect outside the store, [`AsyncJob::admit`] gates it on the fence; to give the attempt
/// back instead of failing it, [`AsyncJob::release`].
#[derive(Debug, Clone)]
pub struct AsyncJob {
    lease: Lease,
    lost: watch::Receiver<Option<Loss>>,
    store: AsyncStore,
    release: mpsc::UnboundedSender<ReleaseRequest>,
}

impl AsyncJob {
    pub(super) fn new(
        lease: Lease,
        lost: watch::Receiver<Option<Loss>>,
        store: AsyncStore,
        release: mpsc::UnboundedSender<ReleaseRequest>,
    ) -> Self {
        AsyncJob {
            lease,
            lost,
            store,
            release,
        }
    }

    /// The lease: job, queue, kind, owner, fence, end, payload and attempt.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The job's id.
    pub fn job_id(&self) -> &str {
        &self.lease.job_id
    }

    /// The lease's fencing token.
    pub fn fence(&self) -> Fence {
        self.lease.fence
    }

    /// Which attempt this is (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.lease.attempt
    }

    /// The payload (empty when the job has none).
    pub fn payload(&self) -> &[u8] {
        self.lease.payload.as_deref().unwrap_or_default()
    }

    /// The store, for the handler's own calls.
    pub fn store(&self) -> &AsyncStore {
        &self.store
    }

    /// Why the lease ended, once it has; `None` while it is the worker's.
    pub fn loss(&self) -> Option<Loss> {
        *self.lost.borrow()
    }

    /// Whether the lease has ended (taken over, ended by an operator, timed out, given back
    /// at shutdown or by [`release`](Self::release)).
    pub fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// Resolves when the lease ends, with why; never while it is the worker's. Use it in a
    /// `tokio::select!` beside the work.
    pub async fn lost(&self) -> Loss {
        let mut rx = self.lost.clone();
        loop {
            if let Some(loss) = *rx.borrow_and_update() {
                return loss;
            }
            if rx.changed().await.is_err() {
                // The worker is gone: the lease is no longer kept alive.
                return Loss::Shutdown;
            }
        }
    }

    /// The fence gate before a write to `resource` outside the store: `true` (and recorded)
    /// when this lease's fence is at least as high as every fence admitted for it before.
    /// Once the lease has ended ([`is_lost`](Self::is_lost): taken over, timed out, given
    /// back) it is `false` and nothing is admitted: the attempt is over.
    ///
    /// # Errors
    /// As [`Store::admit`](crate::Store::admit).
    pub async fn admit(&self, resource: &str) -> crate::Result<bool> {
        crate::Resource::new(resource)?;
        if self.is_lost() {
            return Ok(false);
        }
        let (resource, fence) = (resource.to_owned(), self.lease.fence);
        self.store
            .call(move |s| s.admit(crate::Resource::new(&resource)?, fence))
            .await
    }

    /// Gives this attempt back instead of failing it: the lease is released, fenced (only
    /// while this owner and fence still hold it, as [`Store::release`](crate::Store::release)
    /// does), the fence kept and the attempt refunded, so the job is claimable again at once and
    /// no attempt of its budget is spent. The worker reports the job
    /// [`JobOutcome::Released`](crate::JobOutcome::Released) and counts it in
    /// [`WorkerStats::released`](crate::WorkerStats::released), as the blocking worker's
    /// [`JobContext::release`](crate::JobContext::release) does.
    ///
    /// For a handler that was interrupted rather than failed (its work stopped from outside, a
    /// resource it needs going away), so that the job runs again elsewhere without counting
    /// this attempt.
    ///
    /// - `Ok(true)`: given back. The attempt is over: [`is_lost`](Self::is_lost) is true,
    ///   [`lost`](Self::lost) resolves with [`Loss::Released`], [`admit`](Self::admit)
    ///   answers `false`, and what the handler returns is not written. The handler may still
    ///   wind down (neither the heartbeat nor the time limit concern it any more) until the
    ///   worker's shutdown deadline, when its future is dropped.
    /// - `Ok(false)`: nothing changed. The lease had ended already (taken over, ended by an
    ///   operator, past the time limit, given back at the shutdown deadline or by an earlier
    ///   `release`), or the store refused the release (another claim took the lease over, or an
    ///   operator ended the job: then reported [`JobOutcome::Cancelled`](crate::JobOutcome::Cancelled));
    ///   as for any lease that ends under its handler, the worker then drops the handler's
    ///   future at its next `.await`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = dir.path().join("jobs.db");
    /// # leasefence::init_db(&db)?;
    /// use leasefence::{AsyncOptions, AsyncStore, AsyncWorker, JobId, NewJob, Store};
    ///
    /// let store = AsyncStore::open(db.to_str().unwrap(), AsyncOptions::new()).await?;
    /// store.call(|s| s.enqueue_job(NewJob::new("upload-7")?)).await?;
    /// let worker = AsyncWorker::builder(store.clone()).drain(true).build(|job| async move {
    ///     if job.fence() == 1 {
    ///         // Cut short by a maintenance window, not by a fault of the job: give it back.
    ///         assert!(job.release().await?);
    ///         return Ok("not written".into());
    ///     }
    ///     // Claimed again at once, under the next fence, and still its first attempt.
    ///     assert_eq!((job.fence(), job.attempt()), (2, 1));
    ///     Ok("uploaded".into())
    /// })?;
    /// let stats = worker.run(std::future::pending()).await?;
    /// assert_eq!((stats.released, stats.completed), (1, 1));
    /// let state = store.call(|s| s.state(JobId::new("upload-7")?)).await?.unwrap();
    /// assert_eq!((state.fence, state.result.as_deref()), (2, Some("uploaded")));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A store error that the worker's retries (a busy store, a failed connection, for up to a
    /// ttl) did not cure. The attempt then goes on as if `release` had not been called: the
    /// heartbeat renews the lease again and what the handler returns is recorded as usual.
    pub async fn release(&self) -> crate::Result<bool> {
        if self.is_lost() {
            return Ok(false);
        }
        let (reply, answer) = oneshot::channel();
        if self.release.send(reply).is_err() {
            // The job's task is over: its outcome is written or being written.
            return Ok(false);
        }
        // Dropped unanswered when the lease ended first (the job's task stopped listening).
        answer.await.unwrap_or(Ok(false))
    }
}
