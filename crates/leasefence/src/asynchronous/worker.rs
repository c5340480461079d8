//! [`AsyncWorker`]: the worker for tokio services — `async fn` handlers, the same fencing.
//!
//! One task claims (a batch of up to the free slots, in one store call), one task per job runs
//! the handler, and one heartbeat task renews every held lease in **one** store call per tick
//! (`renew_batch`). A refused renew ends the lease: the handler's [`AsyncJob::lost`] fires and
//! whatever it returns is not written. Results and failures are written only through the fenced
//! `complete` and `fail`, so a handler that finished after a takeover is refused by the store.
//!
//! Its settings are checked in `builder.rs`; a job's task (its handler, then its outcome's
//! fenced write) is `outcome.rs`; the heartbeat and the expiry by the worker's own clock are
//! `beat.rs`; this file holds a run's held leases, the claim loop and the shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::beat::{expiry, heartbeat};
use super::builder::AsyncWorkerBuilder;
use super::job::{AsyncJob, Loss};
use super::outcome::run_job;
use super::store::AsyncStore;
use crate::error::{Error, Result};
use crate::store::Store as _;
use crate::types::{Backoff, BatchSize, Lease, Now, Owner, Queues, Ttl};
use crate::worker::{HandlerError, JobOutcome, RECONNECT_WAIT, WorkerStats, is_connection_fault};

/// What an async handler returns: the result to store, or the error to record.
pub type AsyncResult = std::result::Result<String, HandlerError>;

pub(super) type Handler =
    dyn Fn(AsyncJob) -> std::pin::Pin<Box<dyn Future<Output = AsyncResult> + Send>> + Send + Sync;
pub(super) type OnOutcome = dyn Fn(&Lease, &JobOutcome) + Send + Sync;

/// How often a busy store is tried again at once for one outcome's write.
const WRITE_RETRIES: u32 = 5;

/// A write's answer after [`Inner::write`]'s retries, and whether an earlier try may have
/// taken effect without its answer arriving (its connection was lost during the call, or a
/// server in between answered Unavailable): a refusal then may be that try's own success,
/// which the caller tells by reading the job back.
pub(super) struct Written<T> {
    pub(super) answer: Result<T>,
    pub(super) maybe_landed: bool,
}

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
    pub(super) stats: Mutex<WorkerStats>,
}

/// One [`AsyncWorker::run`]: the leases it holds now, by job and fence. Each run has its own,
/// so that stopping one run of a worker (clones share it) leaves another run's jobs alone.
pub(super) struct Run {
    pub(super) inner: Arc<Inner>,
    pub(super) held: Mutex<HashMap<Key, Held>>,
    /// Set when the shutdown deadline has passed: a handler still winding down after it
    /// released its own lease (no longer held) is dropped then.
    pub(super) past_deadline: watch::Sender<bool>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    pub(super) fn count(&self, f: impl FnOnce(&mut WorkerStats)) {
        f(&mut lock(&self.stats));
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

    /// Runs a write of `lease`'s, trying it again a few times while the store is busy, and —
    /// for as long as a ttl, after which the lease it writes under has expired and the write
    /// would be refused anyway — while the connection to the database server fails (a
    /// restart, an ended session: each try opens a new one) or no connection comes free
    /// within the store's `acquire_timeout` (a pool busy with other calls). Every try is the
    /// same fenced write, so a repeat can never store anything the first could not.
    pub(super) async fn write<T: Send + 'static>(
        &self,
        lease: &Lease,
        op: impl Fn(&crate::AnyStore) -> Result<T> + Clone + Send + 'static,
    ) -> Written<T> {
        let mut tries = 0u32;
        let mut maybe_landed = false;
        // No limit when the clock cannot add the ttl (at most Ttl::MAX, 1e12 s).
        let give_up = Duration::try_from_secs_f64(self.ttl.seconds())
            .ok()
            .and_then(|ttl| tokio::time::Instant::now().checked_add(ttl));
        loop {
            let answer = self.store.call(op.clone()).await;
            match &answer {
                Err(e) if e.is_retryable() && tries < WRITE_RETRIES => {
                    // A server in between answers Unavailable also when its reply was cut
                    // short after the write: that try may have taken effect.
                    maybe_landed |= matches!(e, Error::Unavailable { .. });
                    tries += 1;
                    self.count(|s| s.errors += 1);
                    tokio::time::sleep(Duration::from_millis(25) * tries).await;
                }
                // A pool that stays busy past the quick retries above is waited out as a
                // failed connection is, not given up with the outcome (the job would run again).
                Err(e)
                    if (is_connection_fault(e) || matches!(e, Error::Unavailable { .. }))
                        && give_up.is_none_or(|at| tokio::time::Instant::now() < at) =>
                {
                    maybe_landed |=
                        matches!(e, Error::ConnectionLost { .. } | Error::Unavailable { .. });
                    self.count(|s| s.errors += 1);
                    tracing::warn!(
                        job_id = %lease.job_id, fence = lease.fence, error = %e,
                        "a write could not reach the database; trying again"
                    );
                    tokio::time::sleep(RECONNECT_WAIT).await;
                }
                _ => {
                    return Written {
                        answer,
                        maybe_landed,
                    };
                }
            }
        }
    }
}

impl Run {
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

    /// Ends the lease `key`, whose release its job's task was writing, for `loss` (released,
    /// or refused): its handler's signal fires, and it is no longer held — neither renewed nor
    /// given back at the shutdown.
    pub(super) fn settle(&self, key: &Key, loss: Loss) {
        if let Some(h) = lock(&self.held).remove(key) {
            h.lost.send_replace(Some(loss));
        }
    }

    /// A release of `key` that did not reach the store: the lease runs on as before, renewed
    /// and ended like any other.
    pub(super) fn resume(&self, key: &Key) {
        if let Some(h) = lock(&self.held).get_mut(key) {
            h.writing = false;
        }
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
    /// are dropped and their leases given back (fence kept). The deadline starts when
    /// `shutdown` resolves, also while a claim is waiting on the store (a locked file, an
    /// unreachable server): what that claim takes is given back unstarted when it returns.
    ///
    /// Each run holds its own leases: clones of one worker may run at once (sharing its
    /// settings and counters), and stopping one run leaves the others' jobs alone.
    ///
    /// # Errors
    /// A store error that retrying cannot cure while claiming (the running jobs are shut down
    /// first). Busy and unavailable stores are retried, and so are failed connections to a
    /// database server (a restart, an ended session, no connection to spare): the claim is
    /// made again on a new connection.
    pub async fn run(&self, shutdown: impl Future<Output = ()> + Send) -> Result<WorkerStats> {
        let inner = &self.inner;
        let run = Arc::new(Run {
            inner: Arc::clone(inner),
            held: Mutex::new(HashMap::new()),
            past_deadline: watch::Sender::new(false),
        });
        // The store's clock against this process's (a store judging leases by the database's
        // clock), so that a lease is given up when it ends on the store's timescale.
        let offset = match inner.store.call(|s| s.database_now()).await {
            Ok(Some(database)) => database.seconds() - Now::system().seconds(),
            _ => 0.0,
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let beat = tokio::spawn(heartbeat(Arc::clone(&run), stop_rx.clone(), offset));
        let expiring = tokio::spawn(expiry(Arc::clone(&run), stop_rx, offset));
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut fatal = None;
        // A claim still waiting on the store when the shutdown came.
        let mut in_flight: Option<JoinHandle<Result<Vec<Lease>>>> = None;
        tokio::pin!(shutdown);
        loop {
            let free = inner.concurrency - tasks.len();
            let claimed = if free > 0 {
                let (queues, owner, ttl) = (inner.queues.clone(), inner.owner.clone(), inner.ttl);
                let n = BatchSize::new(free)?;
                let store = inner.store.clone();
                // A task of its own, so that the shutdown is seen while it waits.
                let mut claim = tokio::spawn(async move {
                    store
                        .call(move |s| {
                            s.claim_batch_in(&queues, Owner::new(&owner)?, Now::system(), ttl, n)
                        })
                        .await
                });
                tokio::select! {
                    answer = &mut claim => answer.unwrap_or_else(|e| Err(claim_failure(e))),
                    _ = &mut shutdown => {
                        in_flight = Some(claim);
                        break;
                    }
                }
            } else {
                Ok(Vec::new())
            };
            // `pause`: how long to wait before claiming again when idle (nothing claimed);
            // `none_ready`: the store said nothing is ready (a drained run may end) — not the
            // same when the claim failed.
            let (pause, none_ready) = match claimed {
                Ok(leases) => {
                    let got = !leases.is_empty();
                    for lease in leases {
                        start(&run, &mut tasks, lease);
                    }
                    (if got { None } else { Some(inner.poll) }, !got)
                }
                Err(e) if e.is_retryable() => {
                    inner.count(|s| s.errors += 1);
                    tracing::warn!(error = %e, "claiming met a busy or unavailable store; trying again");
                    (Some(inner.poll), false)
                }
                // The server restarted, ended the session or has no connection to spare: a
                // claim whose answer was lost may have taken a lease, which expires unused
                // (its fence is never handed out again). Claim again on a new connection.
                Err(e) if is_connection_fault(&e) => {
                    inner.count(|s| s.errors += 1);
                    tracing::warn!(error = %e, "claiming met a failed database connection; trying again");
                    (Some(inner.poll.min(RECONNECT_WAIT * 5)), false)
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
            // Wait for a slot, the pause (when idle), or the shutdown.
            let idle = pause.is_some();
            let pause = match pause {
                Some(pause) => pause,
                None if free == 0 => inner.poll,
                None => Duration::ZERO,
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
        run.past_deadline.send_replace(true);
        let running: Vec<Key> = lock(&run.held).keys().cloned().collect();
        for k in &running {
            run.end(k, Loss::Shutdown);
        }
        while tasks.join_next().await.is_some() {}
        let mut left: Vec<Lease> = lock(&run.held)
            .drain()
            .filter(|(_, h)| *h.lost.borrow() == Some(Loss::Shutdown))
            .map(|(_, h)| h.lease)
            .collect();
        // What a claim in flight at the shutdown took was never started: it goes back too.
        if let Some(claim) = in_flight {
            match claim.await.unwrap_or_else(|e| Err(claim_failure(e))) {
                Ok(leases) => {
                    inner.count(|s| s.claimed += leases.len() as u64);
                    left.extend(leases);
                }
                Err(e) => {
                    inner.count(|s| s.errors += 1);
                    tracing::warn!(error = %e, "the claim in flight at the shutdown failed");
                }
            }
        }
        for lease in left {
            let l = lease.clone();
            match inner
                .write(&lease, move |s| s.release_lease(&l))
                .await
                .answer
            {
                Ok(true) => {
                    inner.count(|s| s.released += 1);
                    inner.report(&lease, &JobOutcome::Released);
                }
                Ok(false) => tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "release refused at shutdown: the lease was no longer held"
                ),
                Err(e) => {
                    inner.count(|s| s.errors += 1);
                    tracing::error!(
                        job_id = %lease.job_id, fence = lease.fence, error = %e,
                        "release failed at shutdown; the lease will expire instead"
                    );
                }
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

/// Holds a claimed lease in `run` and starts its job's task.
fn start(run: &Arc<Run>, tasks: &mut JoinSet<()>, lease: Lease) {
    run.inner.count(|s| s.claimed += 1);
    let (tx, rx) = watch::channel(None);
    let (release, releases) = tokio::sync::mpsc::unbounded_channel();
    let job = AsyncJob::new(lease.clone(), rx, run.inner.store.clone(), release);
    let held = Held {
        lease,
        lost: tx,
        writing: false,
    };
    lock(&run.held).insert(key(&held.lease), held);
    tasks.spawn(run_job(Arc::clone(run), job, releases));
}

/// A claim's task that did not finish (it panicked): an error of the claim.
fn claim_failure(e: tokio::task::JoinError) -> Error {
    Error::Unsupported {
        database: "the claim".into(),
        detail: format!("the call did not finish: {e}"),
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
    fn hold(run: &Run, id: &str) -> (Key, watch::Receiver<Option<Loss>>) {
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
        lock(&run.held).insert(k.clone(), held);
        (k, rx)
    }

    /// A lease ends once: the first reason stands, and a lease whose outcome is being written
    /// is not ended at all (its write is fenced; the shutdown must not release it).
    #[tokio::test]
    async fn a_lease_ends_once_and_never_while_its_outcome_is_written() {
        let (_dir, w) = worker().await;
        let run = Run {
            inner: Arc::clone(&w.inner),
            held: Mutex::new(HashMap::new()),
            past_deadline: watch::Sender::new(false),
        };
        let inner = &run;
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
