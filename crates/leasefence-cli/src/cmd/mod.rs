//! One module per subcommand, each with its clap `Args` and a `run` function.

pub mod admit;
pub mod args;
pub mod cancel;
pub mod claim;
pub mod claim_batch;
pub mod complete;
pub mod delete;
pub mod demo;
pub mod enqueue;
pub mod fail;
pub mod history;
pub mod init;
pub mod list;
pub mod purge;
pub mod queue;
pub mod release;
pub mod renew;
pub mod retry;
pub mod schedule;
pub mod serve;
pub mod shared;
pub mod state;
pub mod stats;
pub mod time;
pub mod work;

use leasefence::{AnyStore, Clock as _, Fence, JobId, Now, Owner, Store as _, SystemClock, Ttl};

use crate::ctx::Ctx;

/// The clock reading a command works at on `store`: `--now` if given; otherwise the store's
/// own clock when it judges leases by one (PostgreSQL opened by [`Ctx::open`] without
/// `--now`), else the system clock.
///
/// # Errors
/// Connection or backend failures reading the database's clock.
pub fn now_on(store: &AnyStore, given: Option<f64>) -> leasefence::Result<f64> {
    match given {
        Some(now) => Ok(now),
        None => Ok(match store.database_now()? {
            Some(now) => now.seconds(),
            None => SystemClock.now(),
        }),
    }
}

/// The one call of [`Store::claim`](leasefence::Store::claim) in the CLI: the fence and the
/// lease end of a granted claim, as the store handed them out (on the database's clock when
/// the store judges by it), so nothing is read back.
///
/// # Errors
/// As `Store::claim`.
pub fn claim(
    store: &AnyStore,
    job: JobId<'_>,
    owner: Owner<'_>,
    now: Now,
    ttl: Ttl,
) -> leasefence::Result<Option<(Fence, f64)>> {
    Ok(store
        .claim(job, owner, now, ttl)?
        .map(|lease| (lease.fence, lease.until)))
}

/// Runs `op` on the database of `ctx` at the command's clock reading, and returns the reading
/// with the result. A given `--now` is checked before the database is opened (as the library's
/// free functions do); otherwise the reading is taken once the store is open, from the store's
/// clock when it judges leases by one ([`now_on`]).
///
/// # Errors
/// A reading that is not finite, opening errors, or `op`'s.
pub fn at_now<T>(
    ctx: &Ctx,
    given: Option<f64>,
    op: impl FnOnce(&AnyStore, Now) -> leasefence::Result<T>,
) -> leasefence::Result<(f64, T)> {
    given.map(Now::new).transpose()?;
    run_at_now(ctx.open(given.is_some())?, given, op)
}

/// As [`at_now`] for a command that only reads: the database is opened with
/// [`Ctx::open_existing`], so a PostgreSQL schema that does not exist is not created.
///
/// # Errors
/// As [`at_now`].
pub fn read_at_now<T>(
    ctx: &Ctx,
    given: Option<f64>,
    op: impl FnOnce(&AnyStore, Now) -> leasefence::Result<T>,
) -> leasefence::Result<(f64, T)> {
    given.map(Now::new).transpose()?;
    run_at_now(ctx.open_existing(given.is_some())?, given, op)
}

/// Runs `op` on `store` at the command's clock reading ([`now_on`]).
fn run_at_now<T>(
    store: AnyStore,
    given: Option<f64>,
    op: impl FnOnce(&AnyStore, Now) -> leasefence::Result<T>,
) -> leasefence::Result<(f64, T)> {
    let now = now_on(&store, given)?;
    let value = op(&store, Now::new(now)?)?;
    Ok((now, value))
}
