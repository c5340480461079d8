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
    HandlerError, JobOutcome, LOSS_OPERATOR, WorkerStats, default_owner_prefix, loss_reason,
};

/// What an async handler returns: the result to store, or the error to record.
pub type AsyncResult = std::result::Result<String, HandlerError>;

type Handler =
    dyn Fn(AsyncJob) -> std::pin::Pin<Box<dyn Future<Output = AsyncResult> + Send>> + Send + Sync;
type OnOutcome = dyn Fn(&Lease, &JobOutcome) + Send + Sync;

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
        if let Some(t) = self.timeout.filter(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(Error::invalid(
                "timeout",
                format!("must be seconds > 0, got {t}"),
            ));
        }
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
                heartbeat: Duration::from_secs_f64(self.ttl * self.heartbeat_fraction),
                queues,
                drain: self.drain,
                poll: self.poll,
                timeout: self.timeout,
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
    backoff: Backoff,
    shutdown_deadline: Duration,
    owner: String,
    handler: Box<Handler>,
    on_outcome: Option<Arc<OnOutcome>>,
    /// The leases held now, by job id.
    held: Mutex<HashMap<String, Held>>,
    stats: Mutex<WorkerStats>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn count(&self, f: impl FnOnce(&mut WorkerStats)) {
        f(&mut lock(&self.stats));
    }

    /// Ends the lease of `job_id` for `loss` (once): its handler's signal fires.
    fn end(&self, job_id: &str, loss: Loss) -> bool {
        let held = lock(&self.held);
        match held.get(job_id) {
            Some(h) if h.lost.borrow().is_none() => {
                h.lost.send_replace(Some(loss));
                true
            }
            _ => false,
        }
    }

    fn report(&self, lease: &Lease, outcome: &JobOutcome) {
        if let Some(f) = &self.on_outcome {
            f(lease, outcome);
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
                        lock(&inner.held).insert(lease.job_id.clone(), Held { lease, lost: tx });
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
        let left: Vec<Lease> = lock(&inner.held)
            .values()
            .map(|h| h.lease.clone())
            .collect();
        for lease in &left {
            inner.end(&lease.job_id, Loss::Shutdown);
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        for lease in left {
            let l = lease.clone();
            let released = inner
                .store
                .call(move |s| s.release_lease(&l))
                .await
                .unwrap_or(false);
            lock(&inner.held).remove(&lease.job_id);
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
    let signal = job.clone();
    // A task of its own, so that a panic is the attempt's failure, not the worker's.
    let mut work = AbortOnDrop(tokio::spawn((inner.handler)(job)));
    let limit = inner.timeout.map(Duration::from_secs_f64);
    // The handler, until it returns, its lease ends, or the time limit.
    let answer = tokio::select! {
        answer = &mut work.0 => Some(answer.unwrap_or_else(|e| Err(format!("the handler panicked: {e}").into()))),
        _ = signal.lost() => None,
        _ = async { match limit { Some(d) => tokio::time::sleep(d).await, None => std::future::pending().await } } => {
            inner.end(&lease.job_id, Loss::TimedOut);
            None
        }
    };
    // A handler whose lease ended is dropped at its next await.
    drop(work);
    let outcome = match (answer, signal.loss()) {
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
                .store
                .call(move |s| s.complete_lease(&l, Now::system(), &result))
                .await
            {
                Ok(true) => {
                    inner.count(|s| s.completed += 1);
                    JobOutcome::Completed
                }
                Ok(false) => {
                    inner.count(|s| s.stale_refused += 1);
                    JobOutcome::Refused
                }
                Err(e) => {
                    inner.count(|s| s.errors += 1);
                    JobOutcome::StoreError(e.to_string())
                }
            }
        }
        (Some(Err(e)), None) => fail(&inner, &lease, e.to_string()).await,
    };
    lock(&inner.held).remove(&lease.job_id);
    inner.report(&lease, &outcome);
}

/// Records a failed attempt through the fence: retried after the backoff, or dead.
async fn fail(inner: &Inner, lease: &Lease, error: String) -> JobOutcome {
    let (l, backoff, e) = (lease.clone(), inner.backoff, error.clone());
    let answer = inner
        .store
        .call(move |s| {
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
        Ok(None) => {
            inner.count(|s| s.stale_refused += 1);
            JobOutcome::Refused
        }
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
            .filter(|h| h.lost.borrow().is_none())
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
                // Why each refused one ended: one read each.
                let mut why = Vec::new();
                for (lease, ok) in batch.iter().zip(&taken) {
                    if !ok {
                        let now = s.database_now()?.unwrap_or_else(Now::system);
                        why.push((
                            lease.job_id.clone(),
                            loss_reason(s.inspect(lease.job(), now)?.as_ref(), lease),
                        ));
                    }
                }
                Ok((taken, why))
            })
            .await;
        match answer {
            Ok((taken, why)) => {
                let renewed = taken.iter().filter(|ok| **ok).count() as u64;
                inner.count(|s| s.renewed += renewed);
                for (job_id, reason) in why {
                    let loss = if reason == LOSS_OPERATOR {
                        Loss::Operator
                    } else {
                        Loss::TakenOver
                    };
                    if inner.end(&job_id, loss) {
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
