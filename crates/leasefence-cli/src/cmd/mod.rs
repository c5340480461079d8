//! One module per subcommand, each with its clap `Args` and a `run` function.

pub mod cancel;
pub mod claim;
pub mod complete;
pub mod demo;
pub mod enqueue;
pub mod init;
pub mod list;
pub mod purge;
pub mod queue;
pub mod release;
pub mod renew;
pub mod state;
pub mod stats;
pub mod work;

use std::time::{SystemTime, UNIX_EPOCH};

use leasefence::{AnyStore, Fence, JobId, Now, Owner, Store as _};

use crate::Ctx;

/// `--now` if given, else the system clock in seconds since the Unix epoch.
pub fn now_or_clock(now: Option<f64>) -> f64 {
    now.unwrap_or_else(unix_now)
}

/// The system clock in seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The clock reading a command works at on `store`: `--now` if given; otherwise on PostgreSQL
/// the database's clock (a store opened by [`Ctx::open`](crate::Ctx::open) without `--now`
/// judges leases by it too), else the system clock.
///
/// # Errors
/// Connection or backend failures reading the database's clock.
pub fn now_on(store: &AnyStore, given: Option<f64>) -> leasefence::Result<f64> {
    match (given, store.as_postgres()) {
        (Some(now), _) => Ok(now),
        (None, Some(pg)) => Ok(pg.now()?.seconds()),
        (None, None) => Ok(unix_now()),
    }
}

/// The lease end stored for `owner` under `fence`, read back: on the database's clock the
/// store chose `now` itself, so `now + ttl` computed here would only be close.
///
/// # Errors
/// Busy, connection or backend failures.
pub fn stored_until(
    store: &AnyStore,
    job: JobId<'_>,
    owner: Owner<'_>,
    fence: Fence,
) -> leasefence::Result<Option<f64>> {
    Ok(store
        .state(job)?
        .filter(|row| row.owner.as_deref() == Some(owner.as_str()) && row.fence == fence)
        .map(|row| row.until))
}

/// Runs `op` on the database of `ctx` at the command's clock reading, and returns the reading
/// with the result. On SQLite, or with `--now`, the reading is checked before the database is
/// opened (as the library's free functions do); on PostgreSQL without `--now` it is the
/// database's clock, read once the store is open.
///
/// # Errors
/// A reading that is not finite, opening errors, or `op`'s.
pub fn at_now<T>(
    ctx: &Ctx,
    given: Option<f64>,
    op: impl FnOnce(&AnyStore, Now) -> leasefence::Result<T>,
) -> leasefence::Result<(f64, T)> {
    if given.is_none() && ctx.target()?.is_postgres() {
        let store = ctx.open(false)?;
        let now = now_on(&store, None)?;
        let value = op(&store, Now::new(now)?)?;
        return Ok((now, value));
    }
    let now = now_or_clock(given);
    let checked = Now::new(now)?;
    let store = ctx.open(given.is_some())?;
    Ok((now, op(&store, checked)?))
}
