//! What every thread of one worker shares: its settings, clock, handler, counters, stop tokens
//! and the jobs each thread holds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cancel::CancelToken;
use super::clock::WorkerClock;
use super::context::JobContext;
use super::job::Job;
use super::stats::{Counters, JobOutcome, bump};
use super::sync::lock;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::types::{Backoff, Lease, Now, Queues, Ttl};

/// How often the supervising thread looks at the clock to renew leases, in real time. Small
/// enough that a [`ManualClock`](crate::ManualClock) moved by a test is noticed at once.
pub(super) const TICK: Duration = Duration::from_millis(10);

/// How many times a write that met a busy database is tried again before giving up.
const BUSY_RETRIES: u32 = 3;

/// How long a worker waits before trying again a call whose connection to the database
/// server failed (lost during the call, or none could be made).
pub(crate) const RECONNECT_WAIT: Duration = Duration::from_millis(100);

/// Whether `error` is a fault of the connection to a database server — lost during the call
/// (a restart, `pg_terminate_backend`, a network failure) or none could be made (the server
/// is down, or out of connections) — rather than an answer about the call. A worker waits and
/// tries again on a new connection instead of stopping.
pub(crate) fn is_connection_fault(error: &Error) -> bool {
    matches!(
        error,
        Error::ConnectionLost { .. } | Error::CannotConnect { .. }
    )
}

/// The `tracing` target of the two warnings a [`Worker`](crate::Worker) logs when its store —
/// the database, or the `leasefence serve` in front of it — becomes unreachable to its claims
/// (with the reason: connection refused, too many clients, …) and when it answers again
/// (with how long it was gone), so that a subscriber can show those alone — as the command
/// line's `work` does on stderr. The retries in between are `debug` lines of the worker's own
/// target.
///
/// ```
/// assert_eq!(leasefence::OUTAGE_TARGET, "leasefence::outage");
/// ```
pub const OUTAGE_TARGET: &str = "leasefence::outage";

/// `error` with the chain of its causes (the driver's reason: connection refused, too many
/// clients), as one line.
fn with_causes(error: &Error) -> String {
    // The worker retries by itself: the error's advice to its caller is not for the log.
    crate::error::chain(error).replace(" (retry the call)", "")
}

pub(super) type Handler<S> =
    dyn Fn(&JobContext<'_, S>) -> std::result::Result<String, String> + Send + Sync;
pub(super) type OutcomeHook = dyn Fn(&Lease, &JobOutcome) + Send + Sync;

/// A worker thread's share: the queues it claims from, the jobs it holds, and whether its last
/// claim found none.
pub(super) struct Slot {
    /// The queues this thread claims from.
    pub(super) queues: Queues,
    /// The jobs of the thread's current batch, until every one has its outcome.
    pub(super) jobs: Mutex<Vec<Arc<Job>>>,
    /// The thread's last claim found no ready job.
    pub(super) idle: AtomicBool,
}

impl Slot {
    pub(super) fn new(queues: Queues) -> Self {
        Slot {
            queues,
            jobs: Mutex::new(Vec::new()),
            idle: AtomicBool::new(false),
        }
    }
}

/// The checked settings of [`WorkerBuilder`](crate::WorkerBuilder).
pub(super) struct Config {
    pub(super) ttl: Ttl,
    /// Seconds of the clock between two renewals of a lease: `ttl · heartbeat_fraction`.
    pub(super) heartbeat: f64,
    pub(super) owner_prefix: String,
    pub(super) poll: Duration,
    pub(super) backoff: Backoff,
    pub(super) deadline: Duration,
    /// The run-time limit per job, in seconds of the clock.
    pub(super) timeout: Option<f64>,
    pub(super) drain: bool,
    pub(super) batch: usize,
    /// Whether a thread of the worker takes the scheduler role.
    #[cfg(feature = "cron")]
    pub(super) scheduler: bool,
}

/// What every thread of one worker shares.
pub(super) struct Shared<S> {
    pub(super) config: Config,
    pub(super) clock: WorkerClock,
    /// The handler of jobs without a kind (of every job when no kind is registered).
    pub(super) handler: Option<Box<Handler<S>>>,
    /// The handlers by kind ([`WorkerBuilder::kind`](crate::WorkerBuilder::kind)).
    pub(super) kinds: std::collections::BTreeMap<String, Box<Handler<S>>>,
    pub(super) on_outcome: Option<Box<OutcomeHook>>,
    pub(super) counters: Arc<Counters>,
    pub(super) stop: CancelToken,
    /// Set with `stop` by [`ShutdownHandle::shutdown_now`](crate::ShutdownHandle::shutdown_now):
    /// the shutdown deadline is cut to zero, so what is in flight is cancelled and released at
    /// once.
    pub(super) now: CancelToken,
    pub(super) slots: Vec<Slot>,
    pub(super) fatal: Mutex<Option<Error>>,
    /// When the store became unreachable to this worker's claims (`None` while it answers):
    /// an outage is logged once as it begins and once as it ends, not at every retry.
    pub(super) outage: Mutex<Option<std::time::Instant>>,
    /// Whether an outage is going on, for the watch thread (which gives up its connection
    /// meanwhile): set and cleared with `outage`.
    pub(super) in_outage: Arc<AtomicBool>,
}

impl<S> Shared<S> {
    pub(super) fn now(&self) -> Result<Now> {
        self.clock.now()
    }

    /// The worker's clock on the store's timescale.
    pub(super) fn clock_now(&self) -> f64 {
        self.clock.reading()
    }

    pub(super) fn drained(&self) -> bool {
        self.slots
            .iter()
            .all(|s| s.idle.load(Ordering::SeqCst) && lock(&s.jobs).is_empty())
    }

    pub(super) fn in_flight(&self) -> Vec<Arc<Job>> {
        self.slots
            .iter()
            .flat_map(|s| lock(&s.jobs).clone())
            .collect()
    }

    /// A claim or a renewal met an unreachable store (`error`: a connection fault, or a server
    /// that is unavailable) or a database busy past its busy timeout: the first of an outage
    /// is a warning naming the cause, the retries after it are debug lines. (A job's outcome held up says so itself:
    /// [`write_retry`].)
    pub(super) fn unreachable(&self, owner: &dyn std::fmt::Display, error: &Error) {
        let mut outage = lock(&self.outage);
        if outage.is_none() {
            *outage = Some(std::time::Instant::now());
            self.in_outage.store(true, Ordering::SeqCst);
            if matches!(error, Error::Busy) {
                tracing::warn!(
                    target: OUTAGE_TARGET, %owner, error = %with_causes(error),
                    "the database is busy (another connection holds its write lock past the \
                     busy timeout); trying again until it is free"
                );
            } else {
                tracing::warn!(
                    target: OUTAGE_TARGET, %owner, error = %with_causes(error),
                    "the store cannot be reached; trying again until it answers"
                );
            }
        } else {
            tracing::debug!(%owner, error = %error, "the store still cannot be reached");
        }
    }

    /// A claim or a renewal was answered: ends an outage, if one was going on, with a warning
    /// that says how long it lasted.
    pub(super) fn reachable(&self, owner: &dyn std::fmt::Display) {
        if let Some(began) = lock(&self.outage).take() {
            self.in_outage.store(false, Ordering::SeqCst);
            tracing::warn!(
                target: OUTAGE_TARGET, %owner, seconds = began.elapsed().as_secs_f64(),
                "the store answers again"
            );
        }
    }

    /// The flag an outage sets, shared with the watch thread.
    pub(super) fn outage_flag(&self) -> Arc<AtomicBool> {
        self.in_outage.clone()
    }

    /// Records an error that stops the worker, then asks every thread to stop.
    pub(super) fn fatal(&self, error: Error) {
        tracing::error!(%error, "worker stopping on a store error");
        lock(&self.fatal).get_or_insert(error);
        self.stop.cancel();
    }
}

impl<S: 'static> Shared<S> {
    /// The handler that runs the job of `lease`, or why none may: a job of a kind that no
    /// handler is registered for is never run by another kind's code.
    pub(super) fn handler_for(&self, lease: &Lease) -> std::result::Result<&Handler<S>, String> {
        if self.kinds.is_empty()
            && let Some(handler) = &self.handler
        {
            return Ok(handler);
        }
        let known = || {
            let names: Vec<&str> = self.kinds.keys().map(String::as_str).collect();
            names.join(", ")
        };
        match &lease.kind {
            Some(kind) => self.kinds.get(kind).map(|h| &**h).ok_or_else(|| {
                format!(
                    "no handler for kind {kind:?} on this worker (it handles: {})",
                    known()
                )
            }),
            None => self.handler.as_deref().ok_or_else(|| {
                format!(
                    "the job has no kind and this worker only runs the kinds {}",
                    known()
                )
            }),
        }
    }
}

/// A write's answer after [`write_retry`], and whether an earlier try may have taken effect
/// without its answer arriving (its connection was lost during the call, or a server in
/// between answered Unavailable): a refusal then may be the write's own earlier success, which
/// the caller tells by reading the job.
pub(super) struct Retried<T> {
    pub(super) answer: Result<T>,
    pub(super) maybe_landed: bool,
}

/// Runs a store write, trying it again a few times while the database is busy, and — for as
/// long as a ttl, after which the lease it writes under has expired and the write would be
/// refused anyway — while the connection to the database server fails. Every try is the same
/// fenced write, so a repeat can never store anything the first could not.
pub(super) fn write_retry<S, T>(
    shared: &Shared<S>,
    mut write: impl FnMut() -> Result<T>,
) -> Retried<T> {
    let mut tries = 0;
    let mut maybe_landed = false;
    // When this write first met the store unreachable, while it waits that out.
    let mut held_up: Option<std::time::Instant> = None;
    // A ttl is at most Ttl::MAX (1e12 s), which a Duration holds; `Deadline::after` waits on
    // when the clock cannot add it.
    let give_up = Deadline::after(Duration::from_secs_f64(shared.config.ttl.seconds()));
    let prefix = &shared.config.owner_prefix;
    loop {
        let answer = write();
        match &answer {
            Err(e) if e.is_retryable() && tries < BUSY_RETRIES => {
                // A server in between (`HttpStore`) answers Unavailable also when its reply
                // was cut short after the write: that try may have taken effect.
                maybe_landed |= matches!(e, Error::Unavailable { .. });
                tries += 1;
                bump(&shared.counters.errors);
                std::thread::sleep(TICK * tries);
            }
            // A server in between (`HttpStore`) that stays unavailable — the database behind
            // it restarting — is waited out as a connection fault is, not given up after the
            // few quick busy retries above.
            Err(e)
                if (is_connection_fault(e) || matches!(e, Error::Unavailable { .. }))
                    && !give_up.passed()
                    && !shared.now.is_cancelled() =>
            {
                maybe_landed |=
                    matches!(e, Error::ConnectionLost { .. } | Error::Unavailable { .. });
                bump(&shared.counters.errors);
                // An outage that only the outcome writes meet (every thread busy finishing
                // its jobs, none claiming) is said on the outage target the CLI prints: once
                // as this write is first held up, once as it is answered. Said per write, not
                // through the claims' outage state: a write failing alone while other calls
                // are answered neither flips that state back and forth nor leaves it open.
                match held_up {
                    None => {
                        held_up = Some(std::time::Instant::now());
                        tracing::warn!(
                            target: OUTAGE_TARGET, owner = %format_args!("{prefix}-writer"),
                            error = %with_causes(e),
                            "the store cannot be reached to write a job's outcome; trying \
                             again until it answers"
                        );
                    }
                    Some(_) => tracing::debug!(error = %e, "the outcome still cannot be written"),
                }
                std::thread::sleep(RECONNECT_WAIT);
            }
            _ => {
                let unanswered = answer.as_ref().is_err_and(|e| {
                    is_connection_fault(e) || matches!(e, Error::Unavailable { .. })
                });
                if let Some(began) = held_up
                    && !unanswered
                {
                    tracing::warn!(
                        target: OUTAGE_TARGET, owner = %format_args!("{prefix}-writer"),
                        seconds = began.elapsed().as_secs_f64(),
                        "the store answers again: the job's outcome is written"
                    );
                }
                return Retried {
                    answer,
                    maybe_landed,
                };
            }
        }
    }
}

/// [`write_retry`]'s answer alone, for writes whose refusal needs no second look.
pub(super) fn busy_retry<S, T>(shared: &Shared<S>, write: impl FnMut() -> Result<T>) -> Result<T> {
    write_retry(shared, write).answer
}
