//! [`AsyncWorker`]: the worker for tokio services — `async fn` handlers, the same fencing.
//!
//! One task claims (a batch of up to the free slots, in one store call), one task per job runs
//! the handler, and one heartbeat task renews every held lease in **one** store call per tick
//! (`renew_batch`). A refused renew ends the lease: the handler's [`AsyncJob::lost`] fires and
//! whatever it returns is not written. Results and failures are written only through the fenced
//! `complete` and `fail`, so a handler that finished after a takeover is refused by the store.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::job::{AsyncJob, Loss};
use super::store::AsyncStore;
use crate::error::{Error, Result};
use crate::store::Store as _;
use crate::types::{Backoff, BatchSize, Lease, Now, Owner, Queues, Ttl};
use crate::worker::{
    HandlerError, JobOutcome, LOSS_OPERATOR, LOSS_TAKEN_OVER, WorkerStats, default_owner_prefix,
    loss_reason,
};

/// What an async handler returns: the result to store, or the error to record.
pub type AsyncResult = std::result::Result<String, HandlerError>;

type Handler =
    dyn Fn(AsyncJob) -> std::pin::Pin<Box<dyn Future<Output = AsyncResult> + Send>> + Send + Sync;
type OnOutcome = dyn Fn(&Lease, &JobOutcome) + Send + Sync;

/// How often a busy or unavailable store is tried again for one outcome's write.
const WRITE_RETRIES: u32 = 5;

/// Configures an [`AsyncWorker`]; see [`AsyncWorker::builder`].
pub struct AsyncWorkerBuilder {
    store: AsyncStore,
    concurrency: usize,
    ttl: f64,
    heartbeat_fraction: f64,
    queues: Vec<String>,
    drain: bool,
    poll: Duration,
    timeout: Option<f64>,
    backoff: Backoff,
    shutdown_deadline: Duration,
    owner: Option<String>,
    on_outcome: Option<Arc<OnOutcome>>,
}

impl std::fmt::Debug for AsyncWorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncWorkerBuilder")
            .field("store", &self.store)
            .field("concurrency", &self.concurrency)
            .field("ttl", &self.ttl)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

impl AsyncWorkerBuilder {
    /// How many jobs run at once (default 1).
    pub fn concurrency(mut self, jobs: usize) -> Self {
        self.concurrency = jobs;
        self
    }

    /// The lease length in seconds (default 30); leases are renewed every third of it.
    pub fn ttl(mut self, seconds: f64) -> Self {
        self.ttl = seconds;
        self
    }

    /// The share of the ttl between heartbeats (default 1/3), strictly between 0 and 1.
    pub fn heartbeat_fraction(mut self, fraction: f64) -> Self {
        self.heartbeat_fraction = fraction;
        self
    }

    /// Serve only this queue (call again for more); default: every queue.
    pub fn queue(mut self, name: impl Into<String>) -> Self {
        self.queues.push(name.into());
        self
    }

    /// Stop once nothing is ready and nothing runs (default: keep polling).
    pub fn drain(mut self, drain: bool) -> Self {
        self.drain = drain;
        self
    }

    /// How long to wait between looks at an empty queue (default 500 ms).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll = interval;
        self
    }

    /// A run-time limit per job in seconds: past it the handler is dropped and the attempt
    /// fails with `timed out after …` (default: none).
    pub fn timeout(mut self, seconds: f64) -> Self {
        self.timeout = Some(seconds);
        self
    }

    /// The retry delays of failed attempts (default [`Backoff::default`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long running handlers may go on after shutdown is asked (default 10 s); then they
    /// are dropped and their leases given back (fence kept).
    pub fn shutdown_deadline(mut self, deadline: Duration) -> Self {
        self.shutdown_deadline = deadline;
        self
    }

    /// The owner every lease of this worker names (default `{hostname}-{pid}-async`).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Called once per claimed job with how it ended.
    pub fn on_outcome(mut self, f: impl Fn(&Lease, &JobOutcome) + Send + Sync + 'static) -> Self {
        self.on_outcome = Some(Arc::new(f));
        self
    }

    /// The worker, running `handler` for each job.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `concurrency` (0), `ttl`, `heartbeat_fraction`,
    /// `timeout`, `poll_interval` (zero), `owner` or `queue`.
    pub fn build<H, F>(self, handler: H) -> Result<AsyncWorker>
    where
        H: Fn(AsyncJob) -> F + Send + Sync + 'static,
        F: Future<Output = AsyncResult> + Send + 'static,
    {
        if self.concurrency == 0 {
            return Err(Error::invalid("concurrency", "must be at least 1"));
        }
        let ttl = Ttl::new(self.ttl)?;
        if !(self.heartbeat_fraction > 0.0 && self.heartbeat_fraction < 1.0) {
            return Err(Error::invalid(
                "heartbeat_fraction",
                format!(
                    "must be strictly between 0 and 1, got {}",
                    self.heartbeat_fraction
                ),
            ));
        }
        let heartbeat = Duration::try_from_secs_f64(self.ttl * self.heartbeat_fraction)
            .map_err(|_| Error::invalid("ttl", format!("{} s is too long a lease", self.ttl)))?;
        let limit = match self.timeout {
            None => None,
            Some(t) if t.is_finite() && t > 0.0 => Some(
                Duration::try_from_secs_f64(t)
                    .map_err(|_| Error::invalid("timeout", format!("{t} s is too long")))?,
            ),
            Some(t) => {
                return Err(Error::invalid(
                    "timeout",
                    format!("must be seconds > 0, got {t}"),
                ));
            }
        };
        if self.poll.is_zero() {
            return Err(Error::invalid("poll_interval", "must be greater than 0"));
        }
        let owner = self
            .owner
            .unwrap_or_else(|| format!("{}-async", default_owner_prefix()));
        Owner::new(&owner)?;
        let queues = match self.queues.is_empty() {
            true => Queues::All,
            false => Queues::only(self.queues.iter().map(String::as_str))?,
        };
        Ok(AsyncWorker {
            inner: Arc::new(Inner {
                store: self.store,
                concurrency: self.concurrency,
                ttl,
                heartbeat,
                queues,
                drain: self.drain,
                poll: self.poll,
                timeout: self.timeout,
                limit,
                backoff: self.backoff,
                shutdown_deadline: self.shutdown_deadline,
                owner,
                handler: Box::new(move |job| Box::pin(handler(job))),
                on_outcome: self.on_outcome,
                held: Mutex::new(HashMap::new()),
                stats: Mutex::new(WorkerStats::default()),
            }),
        })
    }
}

/// A held lease and the signal of its running handler.
struct Held {
    lease: Lease,
    lost: watch::Sender<Option<Loss>>,
    /// The handler is over and its outcome is being written (fenced): neither a refused renew
    /// nor the shutdown deadline ends it any more.
    writing: bool,
}

/// A held lease's key: the job and the fence (this worker may hold a newer lease of the same
/// job while an older task is still finishing).
type Key = (String, crate::types::Fence);

fn key(lease: &Lease) -> Key {
    (lease.job_id.clone(), lease.fence)
}

struct Inner {
    store: AsyncStore,
    concurrency: usize,
    ttl: Ttl,
    heartbeat: Duration,
    queues: Queues,
    drain: bool,
    poll: Duration,
    timeout: Option<f64>,
    /// `timeout` as a duration, checked when built.
    limit: Option<Duration>,
    backoff: Backoff,
    shutdown_deadline: Duration,
    owner: String,
    handler: Box<Handler>,
    on_outcome: Option<Arc<OnOutcome>>,
    /// The leases held now, by job and fence.
    held: Mutex<HashMap<Key, Held>>,
    stats: Mutex<WorkerStats>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn count(&self, f: impl FnOnce(&mut WorkerStats)) {
        f(&mut lock(&self.stats));
    }

    /// Ends the lease `key` for `loss` (once, and not once its outcome is being written): its
    /// handler's signal fires.
    fn end(&self, key: &Key, loss: Loss) -> bool {
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
    fn start_writing(&self, key: &Key) -> Option<Loss> {
        let mut held = lock(&self.held);
        let h = held.get_mut(key)?;
        let loss = *h.lost.borrow();
        if loss.is_none() {
            h.writing = true;
        }
        loss
    }

    fn report(&self, lease: &Lease, outcome: &JobOutcome) {
        if let Some(f) = &self.on_outcome {
            // A panicking hook must not take the worker (or the release of its leases) down.
            let call = std::panic::AssertUnwindSafe(|| f(lease, outcome));
            if std::panic::catch_unwind(call).is_err() {
                tracing::error!(job_id = %lease.job_id, "the on_outcome hook panicked");
            }
        }
    }

    /// Runs a write, trying it again a few times while the store is busy or unavailable.
    async fn write<T: Send + 'static>(
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
    inner: Arc<Inner>,
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
        AsyncWorkerBuilder {
            store,
            concurrency: 1,
            ttl: 30.0,
            heartbeat_fraction: 1.0 / 3.0,
            queues: Vec::new(),
            drain: false,
            poll: Duration::from_millis(500),
            timeout: None,
            backoff: Backoff::default(),
            shutdown_deadline: Duration::from_secs(10),
            owner: None,
            on_outcome: None,
        }
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
        let (stop_tx, stop_rx) = watch::channel(false);
        let beat = tokio::spawn(heartbeat(Arc::clone(inner), stop_rx));
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
            let idle = match claimed {
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
                    !got
                }
                Err(e) if e.is_retryable() => {
                    inner.count(|s| s.errors += 1);
                    tracing::warn!(error = %e, "claiming met a busy or unavailable store; trying again");
                    true
                }
                Err(e) => {
                    inner.count(|s| s.errors += 1);
                    fatal = Some(e);
                    break;
                }
            };
            if idle && inner.drain && tasks.is_empty() {
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
        match fatal {
            Some(e) => Err(e),
            None => Ok(self.stats()),
        }
    }
}

/// Aborts the handler's task when dropped: a handler never outlives its job's task (a lost
/// lease, the time limit or the shutdown deadline).
struct AbortOnDrop(tokio::task::JoinHandle<AsyncResult>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one job's handler and writes its outcome through the fence.
async fn run_job(inner: Arc<Inner>, job: AsyncJob) {
    let lease = job.lease().clone();
    let k = key(&lease);
    let signal = job.clone();
    // A task of its own, so that a panic is the attempt's failure, not the worker's.
    let mut work = AbortOnDrop(tokio::spawn((inner.handler)(job)));
    let limit = inner.limit;
    // The handler, until it returns, its lease ends, or the time limit.
    let answer = tokio::select! {
        answer = &mut work.0 => Some(answer.unwrap_or_else(|e| Err(format!("the handler panicked: {e}").into()))),
        _ = signal.lost() => None,
        _ = async { match limit { Some(d) => tokio::time::sleep(d).await, None => std::future::pending().await } } => {
            inner.end(&k, Loss::TimedOut);
            None
        }
    };
    // A handler whose lease ended is dropped at its next await.
    drop(work);
    let outcome = match (answer, inner.start_writing(&k)) {
        (_, Some(Loss::Shutdown)) => return, // released by `run`
        (_, Some(Loss::TakenOver)) => JobOutcome::Refused,
        (_, Some(Loss::Operator)) => JobOutcome::Cancelled,
        (_, Some(Loss::TimedOut)) | (None, None) => {
            inner.count(|s| s.timed_out += 1);
            let limit = inner.timeout.unwrap_or(0.0);
            fail(
                &inner,
                &lease,
                format!("timed out after {limit} s (the worker's time limit)"),
            )
            .await
        }
        (Some(Ok(result)), None) => {
            let l = lease.clone();
            match inner
                .write(move |s| s.complete_lease(&l, Now::system(), &result))
                .await
            {
                Ok(true) => {
                    inner.count(|s| s.completed += 1);
                    JobOutcome::Completed
                }
                Ok(false) => refused(&inner, &lease).await,
                Err(e) => {
                    inner.count(|s| s.errors += 1);
                    JobOutcome::StoreError(e.to_string())
                }
            }
        }
        (Some(Err(e)), None) => fail(&inner, &lease, e.to_string()).await,
    };
    lock(&inner.held).remove(&k);
    inner.report(&lease, &outcome);
}

/// A write of `lease`'s outcome the store refused: an operator ended the job (counted as
/// cancelled), or the lease was taken over (a stale write refused). A read that fails counts
/// as taken over, as in the blocking worker.
async fn refused(inner: &Inner, lease: &Lease) -> JobOutcome {
    let l = lease.clone();
    let reason = inner
        .store
        .call(move |s| {
            let now = s.database_now()?.unwrap_or_else(Now::system);
            Ok(loss_reason(s.inspect(l.job(), now)?.as_ref(), &l))
        })
        .await
        .unwrap_or(LOSS_TAKEN_OVER);
    if reason == LOSS_OPERATOR {
        inner.count(|s| s.cancelled += 1);
        JobOutcome::Cancelled
    } else {
        inner.count(|s| s.stale_refused += 1);
        JobOutcome::Refused
    }
}

/// Records a failed attempt through the fence: retried after the backoff, or dead.
async fn fail(inner: &Inner, lease: &Lease, error: String) -> JobOutcome {
    let (l, backoff, e) = (lease.clone(), inner.backoff, error.clone());
    let answer = inner
        .write(move |s| {
            let now = s.database_now()?.unwrap_or_else(Now::system);
            s.fail(&l, now, &e, Some(backoff.retry_at(&l, now)))
        })
        .await;
    match answer {
        Ok(Some(crate::Failed::Retrying { at })) => {
            inner.count(|s| s.retried += 1);
            JobOutcome::Retrying { at, error }
        }
        Ok(Some(crate::Failed::Dead)) => {
            inner.count(|s| s.dead += 1);
            JobOutcome::Dead { error }
        }
        Ok(None) => refused(inner, lease).await,
        Err(e) => {
            inner.count(|s| s.errors += 1);
            JobOutcome::StoreError(e.to_string())
        }
    }
}

/// Renews every held lease in one store call per tick; a refused one ends that lease.
async fn heartbeat(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(inner.heartbeat) => {}
        }
        let leases: Vec<Lease> = lock(&inner.held)
            .values()
            .filter(|h| !h.writing && h.lost.borrow().is_none())
            .map(|h| h.lease.clone())
            .collect();
        if leases.is_empty() {
            continue;
        }
        let (batch, ttl) = (leases.clone(), inner.ttl);
        let answer = inner
            .store
            .call(move |s| {
                let refs: Vec<&Lease> = batch.iter().collect();
                let taken = s.renew_batch(&refs, Now::system(), ttl)?;
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
