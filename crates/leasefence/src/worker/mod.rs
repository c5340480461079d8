//! The worker runtime: claim → heartbeat → complete | fail | release, on a [`Clock`].
//!
//! A [`Worker`] runs a handler closure on `N` threads. Each thread opens its own store, claims
//! the best ready jobs ([`Store::claim_batch`](crate::Store::claim_batch)), and runs the handler
//! on each with a
//! [`JobContext`]. While a job runs or waits its turn, a heartbeat renews its lease at a
//! fraction of its ttl: one [`Store::renew_batch`](crate::Store::renew_batch) per tick for every
//! lease of the worker that is due, made without holding any job's lock, so a busy renewal
//! never stalls a thread that is finishing its job. What the handler returns decides the write,
//! and every write is fenced by the store:
//!
//! | handler | write | when the lease is no longer current |
//! |---|---|---|
//! | `Ok(result)` | [`Store::complete_lease`](crate::Store::complete_lease), or [`Store::complete_batch`](crate::Store::complete_batch) with the other results of its batch | refused, counted in [`WorkerStats::stale_refused`] |
//! | `Err(e)` or a panic | [`Store::fail`](crate::Store::fail) with [`Backoff`](crate::Backoff): retrying, or dead after the last attempt | refused, counted the same way |
//! | [`JobContext::complete_with`] | the caller's writes commit with the completion | `Ok(None)`: nothing runs |
//!
//! When a renew is refused (the lease expired because the worker stalled, or the job was
//! cancelled), the context reports the lease as lost ([`JobContext::is_lost`]) and its
//! [`CancelToken`] fires. The handler may go on running — nothing stops a thread — but nothing it
//! tries to store is accepted any more.
//!
//! **Batches.** A thread starts by claiming one job at a time. While its handlers are quick, it
//! claims as many jobs as it can run in about 10 ms (at most [`WorkerBuilder::batch`], default
//! 128) in one transaction, and writes their results together in one more: two commits — two
//! fsyncs at `synchronous = FULL` — for the whole batch instead of two per job. On SQLite at
//! `FULL` the threads of a worker also share those commits with each other (the store's
//! [group commit](crate::SqliteOptions::group_commit)). Slow handlers keep it at one job per
//! claim. The size follows the handlers' recent time: when quick handlers turn slow, the rest
//! of a batch claimed for quick ones waits behind them on its thread while another thread may
//! be idle (a smaller [`WorkerBuilder::batch`] bounds that for handlers of mixed speed).
//!
//! **Shutdown.** [`ShutdownHandle::shutdown`] stops the claims; jobs in flight get the
//! [shutdown deadline](WorkerBuilder::shutdown_deadline) to finish, then they are cancelled and
//! their leases released, fence kept, so another worker can claim them at once.
//! [`ShutdownHandle::shutdown_now`] cuts the deadline to zero, even while it is being waited
//! out. With the cargo feature `signals`, `ShutdownHandle::on_signals` makes the first SIGINT,
//! SIGTERM or SIGHUP a graceful shutdown and the second a `shutdown_now`.
//!
//! Time for leases is read from a [`Clock`] ([`SystemClock`] by default); tests drive a
//! [`ManualClock`] instead of sleeping. Real time is only used for the short polling ticks
//! (heartbeat checks, the empty-queue poll, the shutdown deadline).
//!
//! On PostgreSQL the worker judges leases by the **database's clock** by default
//! (`Worker::postgres`): the store ignores the `now` it is given and reads
//! `clock_timestamp()` on the server, so workers on hosts whose clocks disagree — even by more
//! than the ttl — never both hold a live lease. When [`Worker::run`] starts on such a store
//! ([`Store::database_now`](crate::Store::database_now) is `Some`), the worker reads the
//! database's clock once and from then
//! on advances it on a monotonic timer (or, when a [`Clock`] was given to the builder, reads
//! that clock shifted by the offset measured then), so heartbeats, [`JobContext::now`] and
//! [`JobContext::until`] are on the store's timescale.
//!
//! The code is one concern a file, each depending only on those listed before it: `sync`,
//! `clock`, `cancel`, `stats` and `job` are leaves; `context` is what a handler sees; `shared`
//! is the state every thread of one worker shares; `batch` runs a thread's claimed jobs and
//! writes their outcomes, `heartbeat` keeps their leases alive, `scheduler` (cargo feature
//! `cron`) runs the scheduler role on a thread; `run` is [`Worker`] and its
//! threads; `builder` configures it; `shutdown` is the handle that stops it, and `signals`
//! (cargo feature `signals`) wires that handle to the process's SIGINT, SIGTERM and SIGHUP.

mod sync;

mod cancel;
mod clock;
mod job;
mod loss;

// The async worker (feature `async`) judges a lost lease the same way.
#[cfg(feature = "async")]
pub(crate) use builder::default_owner_prefix;
#[cfg(feature = "async")]
pub(crate) use job::{LOSS_OPERATOR, LOSS_TAKEN_OVER};
#[cfg(feature = "async")]
pub(crate) use loss::reason as loss_reason;
mod stats;

mod context;
mod shared;

mod batch;
// The async worker reads a write whose answer was lost, and names a panic, the same way.
#[cfg(feature = "async")]
pub(crate) use batch::{completed_under, failed_under, panic_message};
#[cfg(feature = "async")]
pub(crate) use shared::{RECONNECT_WAIT, is_connection_fault};
mod heartbeat;
#[cfg(feature = "async")]
pub(crate) use heartbeat::pause_after_failure;

#[cfg(feature = "cron")]
mod scheduler;

mod builder;
mod run;
mod shutdown;
#[cfg(feature = "signals")]
mod signals;

pub use builder::WorkerBuilder;
pub use cancel::CancelToken;
pub use clock::{Clock, ManualClock, SystemClock};
pub use context::{HandlerError, JobContext};
pub use run::Worker;
pub use shared::OUTAGE_TARGET;
pub use shutdown::ShutdownHandle;
pub use stats::{JobOutcome, WorkerStats};
