//! [`AsyncWorker`]: the worker for tokio services — `async fn` handlers, the same fencing.
//!
//! One task claims (a batch of up to the free slots, in one store call), one task per job runs
//! the handler, and one heartbeat task renews every held lease in **one** store call per tick
//! (`renew_batch`). A refused renew ends the lease: the handler's [`AsyncJob::lost`] fires and
//! whatever it returns is not written. Results and failures are written only through the fenced
//! `complete` and `fail`, so a handler that finished after a takeover is refused by the store.
//!
//! Its settings are checked in `builder.rs`; a job's task (its handler, then its outcome's
//! fenced write) is `outcome.rs`; this file holds the held leases, the claim loop, the shutdown
//! and the heartbeat.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::builder::AsyncWorkerBuilder;
use super::job::{AsyncJob, Loss};
use super::outcome::run_job;
use super::store::AsyncStore;
use crate::error::Result;
use crate::store::Store as _;
use crate::types::{Backoff, BatchSize, Lease, Now, Owner, Queues, Ttl};
use crate::worker::{
    HandlerError, JobOutcome, LOSS_OPERATOR, LOSS_TAKEN_OVER, WorkerStats, loss_reason,
};

/// What an async handler returns: the result to store, or the error to record.
pub type AsyncResult = std::result::Result<String, HandlerError>;

pub(super) type Handler =
    dyn Fn(AsyncJob) -> std::pin::Pin<Box<dyn Future<Output = AsyncResult> + Send>> + Send + Sync;
pub(super) type OnOutcome = dyn Fn(&Lease, &JobOutcome) + Send + Sync;

/// How often a busy or unavailable store is tried again for one outcome's write.
const WRITE_RETRIES: u32 = 5;

/// A held lease and the signal of its running handler.
pub(super) struct Held {
    pub(super) lease: Lease,
    pub(super) lost: watch::Sender<Option<Loss>>,
    /// The handler is over and its outcome is being written (fenced): neither a refused renew
    /// nor the shutdown deadline ends it any more.
    pub(super) writing: bool,
}

/// A held lease's key: the job and the fence (this worker may hold a newer lease of the same
/// job while an older task is still finishing).
pub(super) type Key = (String, crate::types::Fence);

pub(super) fn key(lease: &Lease) -> Key {
    (lease.job_id.clone(), lease.fence)
}

pub(super) struct Inner {
    pub(super) store: AsyncStore,
    pub(super) concurrency: usize,
    pub(super) ttl: Ttl,
    pub(super) heartbeat: Duration,
    pub(super) queues: Queues,
    pub(super) drain: bool,
    pub(super) poll: Duration,
    pub(super) timeout: Option<f64>,
    /// `timeout` as a duration, checked when built.
    pub(super) limit: Option<Duration>,
    pub(super) backoff: Backoff,
    pub(super) shutdown_deadline: Duration,
    pub(super) owner: String,
    pub(super) handler: Box<Handler>,
    pub(super) on_outcome: Option<Arc<OnOutcome>>,
    /// The leases held now, by job and fence.
    pub(super) held: Mutex<HashMap<Key, Held>>,
    pub(super) stats: Mutex<WorkerStats>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    pub(super) fn count(&self, f: impl FnOnce(&mut WorkerStats)) {
        f(&mut lock(&self.stats));
    }

    /// Ends the lease `key` for `loss` (once, and not once its outcome is being written): its
    /// handler's signal fires.
    pub(super) fn end(&self, key: &Key, loss: Loss) -> bool {
        let held = lock(&self.held);
        match held.get(key) {
            Some(h) if !h.writing && h.lost.borrow().is_none() => {
                h.lost.send_replace(Some(loss));
                true
            }
            _ => false,
        }
    }

    /// Why the lease `key` ended, or — when it has not — marks it as being written, so that
    /// nothing ends it any more. Taken under the lock, so a loss and a write never cross.
    pub(super) fn start_writing(&self, key: &Key) -> Option<Loss> {
        let mut held = lock(&self.held);
        let h = held.get_mut(key)?;
        let loss = *h.lost.borrow();
        if loss.is_none() {
            h.writing = true;
        }
        loss
    }

    /// The leases the heartbeat renews: held, not ended, and whose outcome is not being
    /// written (that write is fenced; renewing under it would only race it).
    pub(super) fn to_renew(&self) -> Vec<Lease> {
        lock(&self.held)
            .values()
            .filter(|h| !h.writing && h.lost.borrow().is_none())
            .map(|h| h.lease.clone())
            .collect()
    }

    pub(super) fn report(&self, lease: &Lease, outcome: &JobOutcome) {
        if let Some(f) = &self.on_outcome {
            // A panicking hook must not take the worker (or the release of its leases) down.
            let call = std::panic::AssertUnwindSafe(|| f(lease, outcome));
            if std::panic::catch_unwind(call).is_err() {
                tracing::error!(job_id = %lease.job_id, "the on_outcome hook panicked");
            }
        }
    }

    /// Runs a write, trying it again a few times while the store is busy or unavailable.
    pub(super) async fn write<T: Send + 'static>(
        &self,
        op: impl Fn(&crate::AnyStore) -> Result<T> + Clone + Send + 'static,
    ) -> Result<T> {
        let mut tries = 0u32;
        loop {
            match self.store.call(op.clone()).await {
                Err(e) if e.is_retryable() && tries < WRITE_RETRIES => {
                    tries += 1;
                    self.count(|s| s.errors += 1);
                    tokio::time::sleep(Duration::from_millis(25) * tries).await;
                }
                other => return other,
            }
        }
    }
}

/// The async worker: claims ready jobs, runs an `async fn` handler per job with heartbeats,
/// and stores each outcome only through the fence.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = dir.path().join("jobs.db");
/// # leasefence::init_db(&db)?;
/// use leasefence::{AsyncOptions, AsyncStore, AsyncWorker, NewJob, Store};
///
/// let store = AsyncStore::open(db.to_str().unwrap(), AsyncOptions::new()).await?;
/// store.call(|s| s.enqueue_job(NewJob::new("greet")?.payload("ada"))).await?;
/// let worker = AsyncWorker::builder(store.clone()).drain(true).build(|job| async move {
///     let name = String::from_utf8_lossy(job.payload()).into_owned();
///     Ok(format!("hello, {name}"))
/// })?;
/// let stats = worker.run(std::future::pending()).await?;
/// assert_eq!(stats.completed, 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncWorker {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for AsyncWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncWorker")
            .field("owner", &self.inner.owner)
            .field("concurrency", &self.inner.concurrency)
            .finish_non_exhaustive()
    }
}

impl AsyncWorker {
    /// A worker on `store`, to configure.
    pub fn builder(store: AsyncStore) -> AsyncWorkerBuilder {
        AsyncWorkerBuilder::new(store)
    }

    /// The owner its leases name.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// The counts so far (the same as [`Worker`](crate::Worker)'s).
    pub fn stats(&self) -> WorkerStats {
        *lock(&self.inner.stats)
    }

    /// Runs until `shutdown` resolves (or, with `drain`, until nothing is ready and nothing
    /// runs). Then no new claims; running handlers get the shutdown deadline, after which they
    /// are dropped and their leases given back (fence kept).
    ///
    /// # Errors
    /// A store error that retrying cannot cure while claiming (the running jobs are shut down
    /// first). Busy and unavailable stores are retried.
    pub async fn run(&self, shutdown: impl Future<Output = ()> + Send) -> Result<WorkerStats> {
        let inner = &self.inner;
        // The store's clock against this process's (a store judging leases by the database's
        // clock), so that a lease is given up when it ends on the store's timescale.
        let offset = match inner.store.call(|s| s.database_now()).await {
            Ok(Some(database)) => database.seconds() - Now::system().seconds(),
            _ => 0.0,
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let beat = tokio::spawn(heartbeat(Arc::clone(inner), stop_rx.clone(), offset));
        let expiring = tokio::spawn(expiry(Arc::clone(inner), stop_rx, offset));
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut fatal = None;
        tokio::pin!(shutdown);
        loop {
            let free = inner.concurrency - tasks.len();
            let claimed = if free > 0 {
                let (queues, owner, ttl) = (inner.queues.clone(), inner.owner.clone(), inner.ttl);
                let n = BatchSize::new(free)?;
                inner
                    .store
                    .call(move |s| {
                        s.claim_batch_in(&queues, Owner::new(&owner)?, Now::system(), ttl, n)
                    })
                    .await
            } else {
                Ok(Vec::new())
            };
            // `idle`: no job was claimed (wait a poll interval); `none_ready`: the store said
            // nothing is ready (a drained run may end) — not the same when the claim failed.
            let (idle, none_ready) = match claimed {
                Ok(leases) => {
                    let got = !leases.is_empty();
                    for lease in leases {
                        inner.count(|s| s.claimed += 1);
                        let (tx, rx) = watch::channel(None);
                        let job = AsyncJob::new(lease.clone(), rx, inner.store.clone());
                        let held = Held {
                            lease,
                            lost: tx,
                            writing: false,
                        };
                        lock(&inner.held).insert(key(&held.lease), held);
                        tasks.spawn(run_job(Arc::clone(inner), job));
                    }
                    (!got, !got)
                }
                Err(e) if e.is_retryable() => {
                    inner.count(|s| s.errors += 1);
                    tracing::warn!(error = %e, "claiming met a busy or unavailable store; trying again");
                    (true, false)
                }
                Err(e) => {
                    inner.count(|s| s.errors += 1);
                    fatal = Some(e);
                    break;
                }
            };
            if none_ready && inner.drain && tasks.is_empty() {
                break;
            }
            // Wait for a slot, the poll interval (when idle), or the shutdown.
            let pause = if idle || free == 0 {
                inner.poll
            } else {
                Duration::ZERO
            };
            tokio::select! {
                _ = &mut shutdown => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() && (free == 0 || idle) => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
        // No new claims. Running handlers get the deadline, then their leases go back.
        let deadline = tokio::time::sleep(inner.shutdown_deadline);
        tokio::pin!(deadline);
        while !tasks.is_empty() {
            tokio::select! {
                _ = tasks.join_next() => {}
                _ = &mut deadline => break,
            }
        }
        // Past the deadline: every handler still running is told to stop (its future is
        // dropped); outcomes already being written finish, fenced, and are not released.
        let running: Vec<Key> = lock(&inner.held).keys().cloned().collect();
        for k in &running {
            inner.end(k, Loss::Shutdown);
        }
        while tasks.join_next().await.is_some() {}
        let left: Vec<Lease> = lock(&inner.held)
            .drain()
            .filter(|(_, h)| *h.lost.borrow() == Some(Loss::Shutdown))
            .map(|(_, h)| h.lease)
            .collect();
        for lease in left {
            let l = lease.clone();
            let released = inner
                .write(move |s| s.release_lease(&l))
                .await
                .unwrap_or(false);
            if released {
                inner.count(|s| s.released += 1);
                inner.report(&lease, &JobOutcome::Released);
            }
        }
        let _ = stop_tx.send(true);
        let _ = beat.await;
        let _ = expiring.await;
        match fatal {
            Some(e) => Err(e),
            None => Ok(self.stats()),
        }
    }
}

/// How often held leases are checked against the clock.
const EXPIRY_TICK: Duration = Duration::from_millis(20);

/// Gives up, by this process's clock (`offset` puts it on the store's timescale), every held
/// lease whose end has passed with no renewal granted — a store that does not answer, a host
/// cut off from it: its handler's `lost` fires and the loss is counted. A task of its own, so
/// that a heartbeat waiting for the store delays nothing.
async fn expiry(inner: Arc<Inner>, mut stop: watch::Receiver<bool>, offset: f64) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(EXPIRY_TICK) => {}
        }
        let now = Now::system().seconds() + offset;
        let ended: Vec<Key> = lock(&inner.held)
            .iter()
            .filter(|(_, h)| !h.writing && h.lost.borrow().is_none() && now >= h.lease.until)
            .map(|(k, _)| k.clone())
            .collect();
        for k in ended {
            if inner.end(&k, Loss::TakenOver) {
                inner.count(|s| s.lost += 1);
                tracing::warn!(
                    job_id = %k.0, fence = k.1,
                    "the lease ended with no renewal granted; the handler is told"
                );
            }
        }
    }
}

/// Renews every held lease in one store call per tick; a refused one ends that lease, a
/// granted one runs on from the time it was asked (`offset`: the store's clock).
async fn heartbeat(inner: Arc<Inner>, mut stop: watch::Receiver<bool>, offset: f64) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(inner.heartbeat) => {}
        }
        let leases = inner.to_renew();
        if leases.is_empty() {
            continue;
        }
        let (batch, ttl) = (leases.clone(), inner.ttl);
        let asked = Now::system();
        let answer = inner
            .store
            .call(move |s| {
                let refs: Vec<&Lease> = batch.iter().collect();
                let taken = s.renew_batch(&refs, asked, ttl)?;
                // Why each refused one ended: one read each; a read that fails counts as
                // taken over (as in the blocking worker), never as a reason to keep it.
                let why: Vec<(Key, u8)> = batch
                    .iter()
                    .zip(&taken)
                    .filter(|(_, ok)| !**ok)
                    .map(|(lease, _)| {
                        let reason = s
                            .database_now()
                            .map(|now| now.unwrap_or_else(Now::system))
                            .and_then(|now| s.inspect(lease.job(), now))
                            .map(|info| loss_reason(info.as_ref(), lease))
                            .unwrap_or(LOSS_TAKEN_OVER);
                        (key(lease), reason)
                    })
                    .collect();
                Ok((taken, why))
            })
            .await;
        match answer {
            Ok((taken, why)) => {
                let renewed = taken.iter().filter(|ok| **ok).count() as u64;
                inner.count(|s| s.renewed += renewed);
                let until = asked.seconds() + offset + ttl.seconds();
                let mut held = lock(&inner.held);
                for (lease, _) in leases.iter().zip(&taken).filter(|(_, ok)| **ok) {
                    if let Some(h) = held.get_mut(&key(lease)) {
                        h.lease.until = h.lease.until.max(until);
                    }
                }
                drop(held);
                for (k, reason) in why {
                    let loss = if reason == LOSS_OPERATOR {
                        Loss::Operator
                    } else {
                        Loss::TakenOver
                    };
                    if inner.end(&k, loss) {
                        inner.count(|s| match loss {
                            Loss::Operator => s.cancelled += 1,
                            _ => s.lost += 1,
                        });
                    }
                }
            }
            Err(e) => {
                inner.count(|s| s.errors += 1);
                tracing::warn!(error = %e, "a heartbeat met a store error; renewing at the next tick");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker on a fresh SQLite file (kept alive by the returned directory).
    async fn worker() -> (tempfile::TempDir, AsyncWorker) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("jobs.db");
        crate::init_db(&db).unwrap();
        let store = AsyncStore::open(db.to_str().unwrap(), super::super::AsyncOptions::new())
            .await
            .unwrap();
        let w = AsyncWorker::builder(store)
            .owner("unit")
            .build(|_job| async { Ok(String::new()) })
            .unwrap();
        (dir, w)
    }

    /// A held lease of job `id` (fence 1), as the claim loop keeps it; its signal's receiver.
    fn hold(inner: &Inner, id: &str) -> (Key, watch::Receiver<Option<Loss>>) {
        let lease = Lease {
            job_id: id.into(),
            queue: "default".into(),
            kind: None,
            owner: "unit".into(),
            fence: 1,
            until: 30.0,
            payload: None,
            priority: 0,
            max_attempts: 0,
            last_error: None,
            attempt: 1,
        };
        let (tx, rx) = watch::channel(None);
        let k = key(&lease);
        let held = Held {
            lease,
            lost: tx,
            writing: false,
        };
        lock(&inner.held).insert(k.clone(), held);
        (k, rx)
    }

    /// A lease ends once: the first reason stands, and a lease whose outcome is being written
    /// is not ended at all (its write is fenced; the shutdown must not release it).
    #[tokio::test]
    async fn a_lease_ends_once_and_never_while_its_outcome_is_written() {
        let (_dir, w) = worker().await;
        let inner = &w.inner;
        let (a, a_rx) = hold(inner, "a");
        assert!(inner.end(&a, Loss::TakenOver));
        assert!(!inner.end(&a, Loss::Shutdown), "already ended");
        assert_eq!(*a_rx.borrow(), Some(Loss::TakenOver));
        assert_eq!(inner.start_writing(&a), Some(Loss::TakenOver));

        let (b, b_rx) = hold(inner, "b");
        assert_eq!(
            inner.start_writing(&b),
            None,
            "not ended: now being written"
        );
        assert!(!inner.end(&b, Loss::Shutdown));
        assert!(!inner.end(&b, Loss::Operator));
        assert_eq!(*b_rx.borrow(), None);

        // Neither is renewed any more; a lease still running is.
        let (d, _d_rx) = hold(inner, "d");
        let renewed: Vec<Key> = inner.to_renew().iter().map(key).collect();
        assert_eq!(renewed, [d]);

        let gone = ("c".to_owned(), 1);
        assert!(!inner.end(&gone, Loss::TakenOver), "not held");
        assert_eq!(inner.start_writing(&gone), None);
    }

    #[tokio::test]
    async fn the_worker_shows_its_owner_and_concurrency() {
        let (_dir, w) = worker().await;
        assert_eq!(w.owner(), "unit");
        let shown = format!("{w:?}");
        assert!(
            shown.starts_with("AsyncWorker")
                && shown.contains("\"unit\"")
                && shown.contains("concurrency: 1"),
            "{shown}"
        );
    }
}
