//! Simulated power loss below SQLite, for leasefence's reliability tests.
//!
//! A SIGKILL loses a process but not the operating system's page cache: every write the process
//! made is still on its way to the disk. A power cut loses the page cache too. This crate
//! simulates that one level below SQLite, as SQLite's own crash tests and LazyFS do: a VFS,
//! registered as SQLite's default, records every write, truncate and sync of the files under
//! one folder. What a file held at its last successful sync is its durable image; the writes
//! since live only in the page cache. At a cut (armed to fall on the n-th I/O call, or made
//! at once) each of those unsynced operations, taken in a random order, is dropped, applied
//! whole or torn (a random subset of its 512-byte sectors applied); every later I/O call on the
//! folder's files fails. After every connection is closed, [`PowerCut::reboot`] writes the
//! images onto the real files and drops the shared-memory wal-index, and the folder is a disk
//! after a power loss.
//!
//! The folder is modelled too: a file created or deleted since its folder was last synced (the
//! `unix` VFS syncs it at the first sync of a new journal or WAL, and after a delete it is asked
//! to sync) may, at a cut, vanish or come back as the disk last held it. The wal-index is shared
//! memory, lost at every cut.
//!
//! ```
//! use leasefence::{JobId, Now, Owner, SqliteStore, Store, Ttl};
//! use leasefence_powercut::PowerCut;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("jobs.db");
//! let power = PowerCut::new(dir.path(), 7);
//! let job = JobId::new("j").unwrap();
//! {
//!     let store = SqliteStore::open(&path).unwrap(); // synchronous = FULL
//!     store.enqueue(job).unwrap();
//!     power.cut();
//!     // the power is off: nothing more reaches the disk
//!     let me = Owner::new("w").unwrap();
//!     assert!(store.claim(job, me, Now::new(1.0).unwrap(), Ttl::new(5.0).unwrap()).is_err());
//! }
//! power.reboot().unwrap();
//! let store = SqliteStore::open(&path).unwrap();
//! // the acknowledged enqueue survived the cut
//! assert!(store.state(job).unwrap().is_some());
//! ```
#![warn(missing_docs)]

mod disk;
mod vfs;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use leasefence::rusqlite::{Connection, OpenFlags, config::DbConfig};

pub use disk::{CutReport, SECTOR};

/// One power-cut disk at a time per process: tests that cut the power run one after another.
static SERIAL: Mutex<()> = Mutex::new(());

/// The simulated disk over one folder, for as long as this value lives (one at a time per
/// process; a second [`PowerCut::new`] waits for the first to be dropped).
pub struct PowerCut {
    _serial: MutexGuard<'static, ()>,
}

impl std::fmt::Debug for PowerCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PowerCut")
            .field("cut", &self.is_cut())
            .field("events", &self.events())
            .finish()
    }
}

impl PowerCut {
    /// Installs the VFS (once per process, as SQLite's default) and puts the files under
    /// `root` (an existing folder) on the simulated disk, with `seed` choosing what cuts keep.
    /// Files opened before this call are not tracked; open the stores afterwards.
    ///
    /// # Panics
    /// If `root` cannot be resolved.
    pub fn new(root: &Path, seed: u64) -> PowerCut {
        let serial = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        vfs::install();
        let root = root
            .canonicalize()
            .unwrap_or_else(|e| panic!("root {}: {e}", root.display()));
        disk::reset(Some(root.to_string_lossy().into_owned()), seed);
        PowerCut { _serial: serial }
    }

    /// Arms the cut to fall on the `events`-th tracked I/O call (write, truncate or sync) from
    /// now; 0 counts as 1.
    pub fn arm(&self, events: u64) {
        disk::arm(events);
    }

    /// Cuts the power now (nothing if it is already off).
    pub fn cut(&self) {
        disk::cut_now();
    }

    /// Whether the power is off.
    pub fn is_cut(&self) -> bool {
        disk::is_cut()
    }

    /// Tracked I/O calls made since [`PowerCut::new`] (refused ones after a cut not counted).
    pub fn events(&self) -> u64 {
        disk::events()
    }

    /// Successful syncs of a database file itself (not of its WAL) since [`PowerCut::new`]: in
    /// WAL mode, checkpoints (and the first commits of a new file).
    pub fn checkpoints(&self) -> u64 {
        disk::checkpoints()
    }

    /// Restarts the machine: cuts the power if it is still on, writes what the cut left onto
    /// the real files and powers up again. Returns what the cut did.
    ///
    /// # Errors
    /// A file of the disk still open (every connection must be closed first), or a write back
    /// failing.
    pub fn reboot(&self) -> Result<CutReport, String> {
        disk::reboot()
    }
}

/// Opens a database file after a [`PowerCut::reboot`] through SQLite's own `unix` VFS (not the
/// simulated disk), so that what is read is what the real file holds, and checks it with
/// `PRAGMA integrity_check`. The connection leaves the WAL as it is when it closes (no
/// checkpoint): the next checkpoint runs on the simulated disk, where a cut can fall on it.
///
/// # Errors
/// The file cannot be opened, or is not intact (the integrity check's first line).
pub fn open_intact(path: &Path) -> Result<Connection, String> {
    let conn =
        Connection::open_with_flags_and_vfs(path, OpenFlags::SQLITE_OPEN_READ_WRITE, c"unix")
            .map_err(|e| format!("open: {e}"))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .map_err(|e| format!("db_config: {e}"))?;
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| format!("integrity_check: {e}"))?;
    if integrity != "ok" {
        return Err(format!("integrity_check: {integrity}"));
    }
    Ok(conn)
}

/// The seed of a test's cuts: `LEASEFENCE_POWER_SEED` when set (to replay a run), else one
/// from the clock. Tests print it.
pub fn seed() -> u64 {
    std::env::var("LEASEFENCE_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

impl Drop for PowerCut {
    fn drop(&mut self) {
        disk::reset(None, 0);
    }
}
