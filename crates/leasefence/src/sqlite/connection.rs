//! The connection's plumbing: the busy handler, the in-process write gate, the
//! `BEGIN IMMEDIATE` guard and the mapping of driver errors onto the crate's error kinds.

use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

use crate::error::{BackendError, Error};

/// Sets `synchronous` on `conn` (once the file's journal mode is settled). `FULL` leaves the
/// unlink that commits a rollback journal unsynced: a power cut can bring the journal back, and
/// SQLite then rolls the acknowledged commit back. So at
/// [`Synchronous::Full`](super::Synchronous::Full) a file not in WAL mode (one the `sqlite3`
/// shell made, opened without init, which keeps its mode) gets `EXTRA`, which syncs the folder
/// after that unlink; in WAL mode the two are the same and FULL is kept.
pub(super) fn set_synchronous(
    conn: &Connection,
    synchronous: super::Synchronous,
) -> rusqlite::Result<()> {
    let mut level = synchronous.pragma();
    if synchronous == super::Synchronous::Full {
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            level = "EXTRA";
        }
    }
    conn.pragma_update(None, "synchronous", level)
}

/// Installs the busy handler: while another connection holds the write lock, wait in short,
/// jittered sleeps (from 25–50 µs, doubling, to at most 2–4 ms) until `limit` has passed since
/// the first refusal, then give up with `SQLITE_BUSY` ([`Error::Busy`]).
///
/// SQLite's own busy timeout sleeps up to 100 ms between tries, so a waiter can sleep through
/// many releases of the lock and a claim can stall for a tenth of a second under contention.
/// Much shorter sleeps (at most 1 ms) kept latency low but cost throughput at
/// `synchronous = FULL`: waiters woke so often that the lock changed hands between nearly
/// every transaction; a 4 ms ceiling lets a writer run on. Long sleeps starve the unlucky,
/// though (a 164 ms claim among eight processes), so a waiter that has waited 15 ms already
/// retries every 50–100 µs until it gets its turn. The jitter keeps waiters from waking in
/// lockstep. (`cargo xtask bench` measures both sides: docs/benchmarks.md.)
pub(super) fn wait_when_busy(conn: &mut Connection, limit: Duration) -> rusqlite::Result<()> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| u64::from(t.subsec_nanos()));
    let jitter = Jitter::seeded(std::process::id(), nanos, conn as *const _ as u64);
    let mut waiter = Waiter::new(limit, jitter, Instant::now());
    conn.busy_handler(Some(move |count: i32| {
        match waiter.refused(count, Instant::now()) {
            Some(sleep) => {
                std::thread::sleep(sleep);
                true
            }
            None => false,
        }
    }))
}

/// The busy handler's state: when the current wait began, and the jitter of its sleeps.
struct Waiter {
    limit: Duration,
    jitter: Jitter,
    first_refusal: Instant,
}

impl Waiter {
    fn new(limit: Duration, jitter: Jitter, now: Instant) -> Waiter {
        Waiter {
            limit,
            jitter,
            first_refusal: now,
        }
    }

    /// The `count`th refusal (from 0; SQLite counts each wait anew) at `now`: how long to
    /// sleep before trying again, or `None` to give up, `limit` after the wait's first refusal.
    fn refused(&mut self, count: i32, now: Instant) -> Option<Duration> {
        if count == 0 {
            self.first_refusal = now;
        }
        let waited = now.saturating_duration_since(self.first_refusal);
        if waited >= self.limit {
            return None;
        }
        let draw = self.jitter.below(ceiling(count, waited));
        Some(nap(draw, self.limit, waited))
    }
}

/// The sleep of a waiter that drew `micros` and has waited `waited` of its `limit`: the draw,
/// cut short so that it never sleeps past the limit.
fn nap(micros: u64, limit: Duration, waited: Duration) -> Duration {
    Duration::from_micros(micros).min(limit.saturating_sub(waited))
}

/// The longest sleep (µs) of the `count`th retry (from 0) of a waiter that has waited `waited`:
/// 50 µs, doubling, to 4 ms; 100 µs once it has waited 15 ms (the others kept winning), so
/// that it gets its turn: long sleeps keep throughput, this keeps the tail short.
fn ceiling(count: i32, waited: Duration) -> u64 {
    const STARVING: Duration = Duration::from_millis(15);
    if waited >= STARVING {
        100
    } else {
        (50u64 << count.clamp(0, 7) as u32).min(4_000)
    }
}

/// The busy handler's jitter: xorshift64 (Marsaglia's 13, 7, 17), seeded per connection so
/// that processes and threads do not share a sequence.
struct Jitter(u64);

impl Jitter {
    /// Seeded from the process id, the clock's nanoseconds and the connection's address; never
    /// zero (xorshift would stay at zero).
    fn seeded(process: u32, nanos: u64, connection: u64) -> Jitter {
        Jitter((u64::from(process) << 32) ^ nanos ^ connection | 1)
    }

    /// The next state.
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A sleep in `[ceiling / 2, ceiling)` µs.
    fn below(&mut self, ceiling: u64) -> u64 {
        ceiling / 2 + self.next() % (ceiling / 2)
    }
}

/// The write gate of one file in this process (part of its [`Writer`](super::writer::Writer)):
/// the stores of this process take turns at it before `BEGIN IMMEDIATE`, so the threads of one
/// process wait for each other's write transactions on a condition variable (woken the moment
/// the writer is done) rather than in the busy handler's sleeps, which wake late or early and,
/// at `synchronous = NORMAL`, cost more than the transactions they wait for. Other processes still meet at SQLite's lock
/// (the busy handler). Waiting at the gate counts against the busy timeout: a store that
/// cannot pass it in time answers [`Error::Busy`], as when another process holds the lock.
#[derive(Default)]
pub(super) struct WriteGate {
    /// Whether a store of this process is inside a write transaction on the file.
    held: Mutex<bool>,
    free: Condvar,
}

/// Holds the gate until dropped.
pub(super) struct GateHeld<'g>(&'g WriteGate);

impl WriteGate {
    fn lock(&self) -> MutexGuard<'_, bool> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Passes the gate, waiting up to `limit` for the store inside to leave; `SQLITE_BUSY`
    /// when it does not leave in time.
    pub(super) fn enter(&self, limit: Duration) -> rusqlite::Result<GateHeld<'_>> {
        let held = self.lock();
        let (mut held, _) = self
            .free
            .wait_timeout_while(held, limit, |held| *held)
            .unwrap_or_else(PoisonError::into_inner);
        if *held {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                Some("another store of this process kept writing to the file".into()),
            ));
        }
        *held = true;
        Ok(GateHeld(self))
    }
}

impl Drop for GateHeld<'_> {
    fn drop(&mut self) {
        *self.0.lock() = false;
        self.0.free.notify_one();
    }
}

/// A `BEGIN IMMEDIATE` transaction on a shared connection, rolled back on drop unless committed.
pub(super) struct Immediate<'c> {
    pub(super) conn: &'c Connection,
    pub(super) open: bool,
}

impl<'c> Immediate<'c> {
    /// Begins.
    pub(super) fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        // Cached like every other statement: parsing BEGIN and COMMIT on each call costs a
        // measurable share of a cycle at synchronous = NORMAL.
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate { conn, open: true })
    }

    pub(super) fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        if self.open {
            // Nothing useful can be done with a failed rollback here; SQLite rolls an
            // unfinished transaction back itself when the connection is next used or closed.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// A copy of a driver error, for each caller of a group whose transaction it failed (the
/// driver's errors cannot be cloned): SQLite's codes and message are kept.
pub(super) fn copy_error(e: &rusqlite::Error) -> rusqlite::Error {
    match e {
        rusqlite::Error::SqliteFailure(code, message) => {
            rusqlite::Error::SqliteFailure(*code, message.clone())
        }
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}

/// Sorts a driver error into the crate's error kinds.
pub(super) fn map_error(path: &Path, e: rusqlite::Error) -> Error {
    let database = || path.display().to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Error::Busy,
        Some(ErrorCode::DiskFull) => Error::StorageFull {
            database: database(),
        },
        Some(ErrorCode::ReadOnly) => Error::ReadOnly {
            database: database(),
            source: BackendError::new(e),
        },
        Some(ErrorCode::DatabaseCorrupt) => Error::Corrupt {
            database: database(),
            source: BackendError::new(e),
        },
        Some(ErrorCode::NotADatabase) => Error::NotADatabase {
            path: path.to_path_buf(),
        },
        Some(ErrorCode::CannotOpen) => Error::CannotOpen {
            path: path.to_path_buf(),
            source: BackendError::new(e),
        },
        _ => Error::Backend(BackendError::new(e)),
    }
}

#[cfg(test)]
mod tests;
