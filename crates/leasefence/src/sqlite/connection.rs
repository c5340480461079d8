//! The connection's plumbing: the busy handler, the in-process write gate, the
//! `BEGIN IMMEDIATE` guard and the mapping of driver errors onto the crate's error kinds.

use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

use crate::error::{BackendError, Error};

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
    const STARVING: Duration = Duration::from_millis(15);
    let mut first_refusal = Instant::now();
    // xorshift64; seeded per connection so that processes and threads do not share a sequence.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| u64::from(t.subsec_nanos()));
    let mut jitter = (u64::from(std::process::id()) << 32) ^ nanos ^ (conn as *const _ as u64) | 1;
    conn.busy_handler(Some(move |count: i32| {
        if count == 0 {
            first_refusal = Instant::now();
        }
        let waited = first_refusal.elapsed();
        if waited >= limit {
            return false;
        }
        jitter ^= jitter << 13;
        jitter ^= jitter >> 7;
        jitter ^= jitter << 17;
        // A waiter that has already waited long (the others kept winning) retries often, so
        // that it gets its turn: long sleeps keep throughput, this keeps the tail short.
        let ceiling = if waited >= STARVING {
            100
        } else {
            (50u64 << count.clamp(0, 7) as u32).min(4_000) // 50 µs … 4 ms
        };
        let micros = ceiling / 2 + jitter % (ceiling / 2);
        std::thread::sleep(Duration::from_micros(micros).min(limit - waited));
        true
    }))
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

/// A `BEGIN IMMEDIATE` transaction on a shared connection, rolled back on drop unless committed;
/// it holds the file's [`WriteGate`] (when it was given one) until it ends.
pub(super) struct Immediate<'c> {
    pub(super) conn: &'c Connection,
    pub(super) open: bool,
    /// Released after the transaction ends (fields drop after `Drop::drop`'s rollback).
    _gate: Option<GateHeld<'c>>,
}

impl<'c> Immediate<'c> {
    /// Begins, holding `gate` (already passed) until the transaction ends.
    pub(super) fn begin(
        conn: &'c Connection,
        gate: Option<GateHeld<'c>>,
    ) -> rusqlite::Result<Self> {
        // Cached like every other statement: parsing BEGIN and COMMIT on each call costs a
        // measurable share of a cycle at synchronous = NORMAL.
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate {
            conn,
            open: true,
            _gate: gate,
        })
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
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn the_gate_admits_one_store_at_a_time_and_answers_busy_past_the_limit() {
        let gate = WriteGate::default();
        let held = gate.enter(Duration::ZERO).unwrap();
        let started = Instant::now();
        let err = gate
            .enter(Duration::from_millis(50))
            .err()
            .expect("the gate is held");
        assert!(started.elapsed() >= Duration::from_millis(45), "it waited");
        assert_eq!(err.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
        assert!(matches!(map_error(Path::new("x"), err), Error::Busy));
        drop(held);
        let again = gate.enter(Duration::ZERO);
        assert!(again.is_ok(), "free again once the holder is done");
    }

    #[test]
    fn a_store_waiting_at_the_gate_passes_when_the_holder_leaves() {
        let gate = Arc::new(WriteGate::default());
        let held = gate.enter(Duration::ZERO).unwrap();
        let waiter = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                let began = Instant::now();
                let passed = gate.enter(Duration::from_secs(30)).is_ok();
                (began, passed, Instant::now())
            })
        };
        // The holder gives the waiter 100 ms to start waiting (the timestamps prove it did).
        std::thread::sleep(Duration::from_millis(100));
        let leaving = Instant::now();
        drop(held);
        let (began, passed, through) = waiter.join().unwrap();
        assert!(passed);
        assert!(began < leaving && through >= leaving);
        assert!(
            through - leaving < Duration::from_secs(10),
            "woken by the holder leaving, not by its own time limit"
        );
    }
}
