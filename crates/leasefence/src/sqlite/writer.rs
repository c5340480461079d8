//! This process's writer of a file: one connection through which every store of this process
//! on that file (with the same settings) runs its write transactions, one at a time.
//!
//! Why one connection: SQLite drops a connection's whole page cache when it begins a
//! transaction after another connection changed the file. Threads that each wrote through
//! their own connection therefore began nearly every transaction with an empty cache, reading
//! back every page they touched, so four threads did less than one. Through one writer the
//! cache stays warm however many threads write, and its prepared statements are shared too.
//!
//! The stores take turns at the file's [`WriteGate`] (one per file, shared by the writers of
//! stores opened with other settings, such as another durability or busy timeout); waiting
//! there counts against each store's own busy timeout (and answers
//! [`Error::Busy`](crate::Error::Busy) past it), as waiting for SQLite's lock does. Writes of other processes still meet this one at SQLite's lock.
//! Every write transaction of a store runs on the writer: the contract's writes, the batches,
//! the operator verbs and `complete_with`. Each store keeps its own connection for reads, for
//! the migration when it opens, and for the single-statement writes (`pause`, a
//! schedule's upsert), which meet the writer at SQLite's lock as another process's would.
//!
//! An in-memory or temporary database has no writer: each connection has its own.

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use super::SqliteStore;
use super::connection::{GateHeld, WriteGate};
use super::group::Settings;
use super::watch::{FileKey, Registry, shared, shared_with};
use crate::error::Result;

/// The writer of one file (with one set of connection settings) in this process.
pub(super) struct Writer {
    /// The file's gate, shared with the writers of the file with other settings.
    gate: Arc<WriteGate>,
    store: Mutex<SqliteStore>,
}

/// The writer, held: its store, for one write transaction (or a group's).
pub(super) struct Writing<'w> {
    // Declared first, so dropped first: the store is given back before the gate opens.
    store: MutexGuard<'w, SqliteStore>,
    _gate: GateHeld<'w>,
}

impl Deref for Writing<'_> {
    type Target = SqliteStore;

    fn deref(&self) -> &SqliteStore {
        &self.store
    }
}

impl Writer {
    /// Waits up to `limit` for this process's other stores to be done writing, then holds
    /// the writer; `SQLITE_BUSY` when they are not done in time.
    pub(super) fn enter(&self, limit: Duration) -> rusqlite::Result<Writing<'_>> {
        let gate = self.gate.enter(limit)?;
        // Uncontended: only the holder of the gate locks it.
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Writing { store, _gate: gate })
    }
}

impl Writing<'_> {
    /// The writer, for a transaction of the store opened as `path`: its errors name the file as
    /// that store was opened (the writer was opened by the first store of the file, perhaps
    /// under another name: a symlink, another spelling).
    pub(super) fn named(mut self, path: &std::path::Path) -> Self {
        if self.store.path != path {
            self.store.path = path.to_path_buf();
        }
        self
    }
}

/// The writer of the file and `settings`, opened by `open` when this process has none yet.
pub(super) fn writer(
    settings: Settings,
    open: impl FnOnce() -> Result<SqliteStore>,
) -> Result<Arc<Writer>> {
    static WRITERS: Registry<Settings, Writer> = OnceLock::new();
    static GATES: Registry<FileKey, WriteGate> = OnceLock::new();
    let gate = shared(&GATES, settings.0.clone());
    shared_with(&WRITERS, settings, || {
        Ok(Writer {
            gate,
            store: Mutex::new(open()?),
        })
    })
}
