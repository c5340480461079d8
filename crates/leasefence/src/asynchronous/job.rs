//! [`AsyncJob`]: what an async handler gets — the lease, and a signal that fires when the lease
//! is no longer the worker's.

use tokio::sync::watch;

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
}

/// One claimed job, handed to an [`AsyncWorker`](super::AsyncWorker) handler.
///
/// When the lease ends under the handler — taken over, ended by an operator, past the time
/// limit, or given back at the shutdown deadline — the worker **drops the handler's future**
/// (at its next `.await`) and writes nothing of it. Tasks the handler spawned itself are not
/// dropped: they can wait on [`AsyncJob::lost`] or check [`AsyncJob::is_lost`]. For a side
/// effect outside the store, [`AsyncJob::admit`] gates it on the fence.
#[derive(Debug, Clone)]
pub struct AsyncJob {
    lease: Lease,
    lost: watch::Receiver<Option<Loss>>,
    store: AsyncStore,
}

impl AsyncJob {
    pub(super) fn new(
        lease: Lease,
        lost: watch::Receiver<Option<Loss>>,
        store: AsyncStore,
    ) -> Self {
        AsyncJob { lease, lost, store }
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

    /// Whether the lease has ended (taken over, ended by an operator, timed out or given back
    /// at shutdown).
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
}
