//! [`AsyncWorkerBuilder`]: an async worker's settings, checked by
//! [`build`](AsyncWorkerBuilder::build) into an [`AsyncWorker`].

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::job::AsyncJob;
use super::store::AsyncStore;
use super::worker::{AsyncResult, AsyncWorker, Inner, OnOutcome};
use crate::error::{Error, Result};
use crate::types::{Backoff, Lease, Owner, Queues, Ttl};
use crate::worker::{JobOutcome, WorkerStats, default_owner_prefix};

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
    /// The defaults, for [`AsyncWorker::builder`].
    pub(super) fn new(store: AsyncStore) -> Self {
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
    ///
    /// A renewal that fails (a busy database, a server down) is tried again a tenth of what
    /// the lease then has left, `(1 − fraction) · ttl / 10` (at least 10 ms, at most 1 s),
    /// after the failed try began — as [`WorkerBuilder::heartbeat_fraction`](crate::WorkerBuilder::heartbeat_fraction)
    /// says of the blocking worker.
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
                    crate::types::args::Seconds(self.heartbeat_fraction)
                ),
            ));
        }
        // At most Ttl::MAX (10^12 s) times a fraction below 1: a Duration holds it.
        let heartbeat = Duration::from_secs_f64(ttl.seconds() * self.heartbeat_fraction);
        let limit = match self.timeout {
            None => None,
            Some(t) if t.is_finite() && t > 0.0 => Some(
                Duration::try_from_secs_f64(t)
                    .map_err(|_| Error::invalid("timeout", format!("{t} s is too long")))?,
            ),
            Some(t) => {
                return Err(Error::invalid(
                    "timeout",
                    format!(
                        "must be seconds > 0, got {}",
                        crate::types::args::Seconds(t)
                    ),
                ));
            }
        };
        if self.poll.is_zero() {
            return Err(Error::invalid("poll_interval", "must be greater than 0"));
        }
        self.backoff.check()?;
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
                stats: Mutex::new(WorkerStats::default()),
            }),
        })
    }
}
