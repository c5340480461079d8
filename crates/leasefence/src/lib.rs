//! Time-limited job leases with **fencing tokens**: a worker that stalled past its lease can
//! still wake up and run, but it can no longer store anything.
//!
//! Every `claim` of a job hands out a fence one higher than the last. `renew`, `complete` and
//! `release` succeed only for the current owner **and** the current fence while the lease is
//! live, so a late write from an older generation is refused instead of overwriting the result
//! of the worker that replaced it:
//!
//! ```text
//! claim A  fence=1 ──► lease expires ──► claim B fence=2 ──► complete(B, 2)  ✔
//!                                        complete(A, 1) ──────────────────►  ✘ refused
//! ```
//!
//! # Example
//!
//! The free functions are the contract's eight operations on an SQLite file, one connection
//! per call. Time is an argument (seconds, any epoch), so the story below needs no sleeping.
//!
//! ```
//! # fn main() -> Result<(), leasefence::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = dir.path().join("jobs.db");
//! use leasefence::{claim, complete, enqueue, init_db, renew, state};
//!
//! init_db(&db)?;
//! enqueue(&db, "report-2026-11")?;
//!
//! // A claims at t=0 for 10 s, then stalls.
//! let a = claim(&db, "report-2026-11", "A", 0.0, 10.0)?.unwrap();
//! // At t=10 the lease has expired; B claims and finishes.
//! let b = claim(&db, "report-2026-11", "B", 10.0, 10.0)?.unwrap();
//! assert!(b > a);
//! assert!(complete(&db, "report-2026-11", "B", b, 12.0, "B's numbers")?);
//!
//! // A wakes up: everything it tries to store is refused.
//! assert!(!renew(&db, "report-2026-11", "A", a, 13.0, 10.0)?);
//! assert!(!complete(&db, "report-2026-11", "A", a, 13.0, "A's stale numbers")?);
//!
//! let row = state(&db, "report-2026-11")?.unwrap();
//! assert_eq!(row.result.as_deref(), Some("B's numbers"));
//! assert_eq!((row.owner.as_deref(), row.fence, row.done), (Some("B"), 2, true));
//! # Ok(()) }
//! ```
//!
//! A long-running worker keeps one [`SqliteStore`] (one connection, cached statements) and calls
//! the same operations through the [`Store`] trait.
//!
//! To run many jobs, a [`Worker`] claims whatever is ready ([`Store::claim_next`]), renews the
//! lease while a handler runs, tells the handler when its lease is lost, and stores the outcome
//! (result, or failure with backoff) only through the fence. See the [`worker`] module and the
//! guide (`docs/guide.md`) for retries and fenced side effects. A [`ShutdownHandle`] stops it:
//! gracefully, or at once ([`ShutdownHandle::shutdown_now`]); with the cargo feature `signals`,
//! `ShutdownHandle::on_signals` does so on SIGINT, SIGTERM and SIGHUP.
//!
//! With the cargo feature `cron`, a [`Schedule`] enqueues a job at every slot of a cron
//! expression; the scheduler that enqueues them is a role any worker can take
//! (`WorkerBuilder::scheduler`), held under a lease and fence of its own, so no slot is ever
//! enqueued twice and a stalled scheduler's late enqueue is refused.
//!
//! With the cargo feature `async`, [`AsyncStore`] runs the same calls for tokio services (each
//! on tokio's blocking pool, never on the runtime's threads) and [`AsyncWorker`] takes
//! `async fn` handlers, with the same fencing: a lease that ends under a handler drops it and
//! nothing of it is written. `leasefence serve` (crate `leasefence-server`) is built on them and
//! offers the contract over HTTP.
//!
//! # Backends
//!
//! - [`SqliteStore`]: one file on one machine, WAL, `synchronous = FULL`. Always built.
//! - `PgStore` (cargo feature `postgres`): the same [`Store`] contract on PostgreSQL, for
//!   workers on many hosts, through a connection pool. Every guarded write is one statement
//!   whose `WHERE` carries owner, fence, `done` and the lease check; `claim_next` takes rows
//!   with `FOR UPDATE SKIP LOCKED`; sessions run with `synchronous_commit = on`. Tables live in
//!   a configurable schema (default `leasefence`), created by numbered migrations under an
//!   advisory lock. `now` is the caller's clock by default; `PgOptions::database_clock` makes
//!   every operation read the database's clock instead, so workers on hosts whose clocks
//!   disagree still agree on when a lease expires; `Worker::postgres` uses it by default.
//!   PostgreSQL `text` cannot hold NUL bytes, so `PgStore` refuses ids, owners and results
//!   containing one as invalid arguments, and job ids longer than `PgStore::MAX_KEY_BYTES`.
//!   With the feature `postgres-tls`, `sslmode=require` in the target connects over TLS
//!   (encrypted, the certificate not verified, as libpq's `require`); without it such a target
//!   is refused.
//! - [`AnyStore`] / [`Target`]: either backend chosen by a string at run time — a
//!   `postgres://` URL or an SQLite path — as the `leasefence` command's `--db` takes it.
//!
//! See `docs/backends.md` for what each backend guarantees, which statement makes each
//! operation atomic, durability, clocks, and when to move from SQLite to PostgreSQL.
//!
//! # Guarantees
//!
//! - `claim` checks and writes in one `BEGIN IMMEDIATE` transaction: of any number of
//!   concurrent claims of a claimable job — threads or processes — exactly one gets a fence.
//! - A fence is never issued twice for the same job: not after a restart (`init_db` never resets
//!   a row), a release (the fence is kept), a re-enqueue (a known id is left untouched), or a
//!   power loss (WAL with `synchronous = FULL` by default).
//! - `renew` and `complete` require owner, fence, `done = 0` and a live lease (`until > now`);
//!   `release` requires owner, fence and `done = 0`. A refused call changes nothing.
//! - Bad arguments ([`Error::InvalidArgument`]) and lock contention past the busy timeout
//!   ([`Error::Busy`], retryable) are errors, never wrong answers, and change nothing.
//!
//! # Not guaranteed
//!
//! - **Exactly-once execution.** A stalled worker may still *run* after losing its lease; it
//!   only cannot *store*.
//! - **Clock agreement between machines.** `now` is the caller's; a worker whose clock runs
//!   ahead treats leases as expired early. Use one clock source for all workers of a store.
//! - **Fencing of external side effects.** A system outside the store is protected only if it
//!   checks the fence itself (or is idempotent).
//! - **The throughput of a large distributed queue.** SQLite serialises writers on one machine.

#![cfg_attr(docsrs, feature(doc_cfg))]

use std::path::Path;
use std::sync::Barrier;

#[cfg(feature = "async")]
mod asynchronous;
/// When a wait ends, for timeouts of any length (`Duration::MAX`: wait on).
mod deadline;
mod error;
/// Opening either backend from a database string (`AnyStore`, `Target`).
mod open;
/// The PostgreSQL backend; the folder is `postgres/` like `sqlite/`, the module is `pg` so that
/// the crate root can re-export the driver as `leasefence::postgres`.
#[cfg(feature = "postgres")]
#[path = "postgres/mod.rs"]
mod pg;
/// The decisions above the seam that every backend shares (batch order, default retry time).
mod policy;
/// Periodic jobs above the seam: which slots are due, and the scheduler role.
#[cfg(feature = "cron")]
mod schedule;
mod sqlite;
mod store;
mod types;
pub mod worker;

#[cfg(feature = "async")]
#[cfg_attr(docsrs, doc(cfg(feature = "async")))]
pub use asynchronous::{
    AsyncJob, AsyncOptions, AsyncResult, AsyncStore, AsyncWorker, AsyncWorkerBuilder, Loss,
};
pub use error::{BackendError, Error, Result, chain as error_chain};
pub use open::{AnyOptions, AnyStore, Target};
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use pg::{PgOptions, PgStore, pg_connect};
#[cfg(feature = "cron")]
#[cfg_attr(docsrs, doc(cfg(feature = "cron")))]
pub use schedule::{Due, SCHEDULER_JOB, SCHEDULER_QUEUE, Scheduler, Step, Tick, due_runs, tick};
pub use sqlite::{GroupCommitStats, JOB_COLUMNS, SqliteOptions, SqliteStore, Synchronous};
pub use store::{Observe, Store, Watch};
/// How leasefence's errors print a number (`1e300`, not its 301 digits); for the command line,
/// the server and the Python package, which refuse numbers of their own.
#[doc(hidden)]
pub use types::args::Seconds;
pub use types::{
    Attempt, AttemptOutcome, AuditEntry, AuditRecord, Backoff, BatchSize, DEFAULT_QUEUE,
    EXPIRING_WITHIN, Enqueued, Failed, Fence, FenceRecord, History, JobCursor, JobId, JobInfo,
    JobOrder, JobPage, JobQuery, JobState, Lease, MAX_AUDIT_LEN, MAX_KEY_LEN, MAX_QUEUE_NAME,
    MAX_WINDOW, Minute, NewJob, Now, Overview, Owner, Queue, QueueInfo, Queues, Refusal, Resource,
    Stats, Status, THROUGHPUT_MINUTES, Ttl, WriteOp,
};
#[cfg(feature = "cron")]
#[cfg_attr(docsrs, doc(cfg(feature = "cron")))]
pub use types::{MAX_SCHEDULE_NAME, Schedule, ScheduleInfo, ScheduleName, SlotRun, run_id};
pub use worker::{
    CancelToken, Clock, HandlerError, JobContext, JobOutcome, ManualClock, OUTAGE_TARGET,
    ShutdownHandle, SystemClock, Worker, WorkerBuilder, WorkerStats,
};

/// The SQLite driver, re-exported for [`SqliteStore::complete_with`], whose closure writes
/// through it inside the store's transaction. Nothing else in the API exposes it.
pub use rusqlite;

/// The PostgreSQL driver, re-exported for [`PgStore::complete_with`], whose closure writes
/// through its transaction. Nothing else in the API exposes it.
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The guide's examples (`docs/guide.md`: the worker, retries, fenced side effects), compiled
/// and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide.md")]
pub struct GuideDoctests;

/// Opens an existing, initialised database for one call, creating nothing on the way (an
/// older store is brought up to the latest migration).
fn existing(path: &Path) -> Result<SqliteStore> {
    SqliteOptions::new().init(false).open(path)
}

/// Creates the `jobs` table (and the file) if absent. Idempotent: running it again — a worker
/// restart — never resets any row, above all never a fence. Also switches the file to WAL.
///
/// # Errors
/// [`Error::NotADatabase`] for a file that is not SQLite and [`Error::SchemaMismatch`] for a
/// `jobs` table lacking one of the six columns; in both cases the file is not modified.
/// [`Error::CannotOpen`] when the folder does not exist. Busy or backend failures.
pub fn init_db(path: impl AsRef<Path>) -> Result<(), Error> {
    SqliteStore::open(path).map(drop)
}

/// Adds `job_id` with the default state and returns `true`; a known id returns `false` with its
/// row untouched. See [`Store::enqueue`].
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty `job_id`; opening errors as for every call
/// ([`Error::CannotOpen`] when the file does not exist, [`Error::SchemaMismatch`] before
/// `init_db`); busy or backend failures.
pub fn enqueue(path: impl AsRef<Path>, job_id: &str) -> Result<bool, Error> {
    let job_id = JobId::new(job_id)?;
    existing(path.as_ref())?.enqueue(job_id)
}

/// The stored row of `job_id`, read through a connection of its own; `None` for an unknown id.
/// See [`Store::state`].
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty `job_id`; opening, busy or backend failures.
pub fn state(path: impl AsRef<Path>, job_id: &str) -> Result<Option<JobState>, Error> {
    let job_id = JobId::new(job_id)?;
    existing(path.as_ref())?.state(job_id)
}

/// Takes the lease on a claimable job (known, not done, `until <= now`, and attempts left for a
/// job with a budget) and returns the new fence; `None` otherwise. See [`Store::claim`].
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty `job_id` or `owner`, a non-finite `now`, or a `ttl`
/// that is not finite and `> 0`; opening, busy or backend failures. Nothing changes on error.
pub fn claim(
    path: impl AsRef<Path>,
    job_id: &str,
    owner: &str,
    now: f64,
    ttl: f64,
) -> Result<Option<i64>, Error> {
    let (job_id, owner, now, ttl) = claim_args(job_id, owner, now, ttl)?;
    let lease = existing(path.as_ref())?.claim(job_id, owner, now, ttl)?;
    Ok(lease.map(|lease| lease.fence))
}

fn claim_args<'a>(
    job_id: &'a str,
    owner: &'a str,
    now: f64,
    ttl: f64,
) -> Result<(JobId<'a>, Owner<'a>, Now, Ttl)> {
    let job_id = JobId::new(job_id)?;
    let owner = Owner::new(owner)?;
    let now = Now::new(now)?;
    let ttl = Ttl::new(ttl)?;
    ttl.until(now)?;
    Ok((job_id, owner, now, ttl))
}

/// Extends a live lease held by `owner` under `fence` to `now + ttl`; `false` (and no change)
/// when owner or fence do not match, the job is done, or the lease has expired. See
/// [`Store::renew`].
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty `job_id` or `owner`, a non-finite `now`, or a `ttl`
/// that is not finite and `> 0`; opening, busy or backend failures.
pub fn renew(
    path: impl AsRef<Path>,
    job_id: &str,
    owner: &str,
    fence: i64,
    now: f64,
    ttl: f64,
) -> Result<bool, Error> {
    let (job_id, owner, now, ttl) = claim_args(job_id, owner, now, ttl)?;
    existing(path.as_ref())?.renew(job_id, owner, fence, now, ttl)
}

/// Stores `result` and marks the job done, only while the lease of `owner` under `fence` is
/// current; `false` otherwise, and the earlier result stays. See [`Store::complete`].
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty `job_id` or `owner` or a non-finite `now`; opening,
/// busy or backend failures.
pub fn complete(
    path: impl AsRef<Path>,
    job_id: &str,
    owner: &str,
    fence: i64,
    now: f64,
    result: &str,
) -> Result<bool, Error> {
    let job_id = JobId::new(job_id)?;
    let owner = Owner::new(owner)?;
    let now = Now::new(now)?;
    existing(path.as_ref())?.complete(job_id, owner, fence, now, result)
}

/// Gives the lease back (`owner = NULL`, `until = 0`, fence kept) when `owner` and `fence`
/// match and the job is not done; `false` otherwise. See [`Store::release`].
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty `job_id` or `owner`; opening, busy or backend
/// failures.
pub fn release(
    path: impl AsRef<Path>,
    job_id: &str,
    owner: &str,
    fence: i64,
) -> Result<bool, Error> {
    let job_id = JobId::new(job_id)?;
    let owner = Owner::new(owner)?;
    existing(path.as_ref())?.release(job_id, owner, fence)
}

/// Races one [`claim`] per owner, each on its own thread and connection, all released at once
/// by a barrier. Returns the results in the order of `owners`: on a claimable job exactly one
/// owner gets a fence and all others get `None`.
///
/// # Errors
/// [`Error::InvalidArgument`] when any argument is bad (checked for every owner before any
/// thread starts, so nothing changes). Otherwise the first error any thread met, in input
/// order; the claims of the other threads may still have taken effect then.
pub fn claim_many(
    path: impl AsRef<Path>,
    job_id: &str,
    owners: &[&str],
    now: f64,
    ttl: f64,
) -> Result<Vec<Option<i64>>, Error> {
    for owner in owners {
        claim_args(job_id, owner, now, ttl)?;
    }
    JobId::new(job_id)?;
    let path = path.as_ref();
    let barrier = Barrier::new(owners.len());
    let results: Vec<Result<Option<i64>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = owners
            .iter()
            .map(|owner| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    claim(path, job_id, owner, now, ttl)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    results.into_iter().collect()
}
