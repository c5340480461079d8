//! Instant wake-up on SQLite: a watch that returns as soon as another connection commits to the
//! same file (`PRAGMA data_version`, polled every 2 ms on a read-only connection of its own),
//! and at once when a store of this process enqueued (an in-process notifier per file).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::store::Watch;

/// How often the watch reads `PRAGMA data_version` to notice other processes' commits.
const POLL: Duration = Duration::from_millis(2);

/// The in-process notifier of one database file: a generation counter and its condvar.
#[derive(Default)]
pub(super) struct Notifier {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Notifier {
    /// Tells every watch of this file in this process that jobs may be ready.
    pub(super) fn notify(&self) {
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *generation = generation.wrapping_add(1);
        self.cv.notify_all();
    }

    /// How many notifications there have been (wrapping).
    pub(super) fn generation(&self) -> u64 {
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits up to `timeout` for a generation other than `seen`; returns whether one came.
    fn wait_past(&self, seen: u64, timeout: Duration) -> bool {
        let guard = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |g| *g == seen)
            .unwrap_or_else(PoisonError::into_inner);
        *guard != seen
    }
}

/// The notifier of the file at `path` (canonicalised, so every spelling of one file shares it).
pub(super) fn notifier(path: &Path) -> Arc<Notifier> {
    static NOTIFIERS: Registry<PathBuf, Notifier> = OnceLock::new();
    shared(&NOTIFIERS, canonical(path))
}

/// A process-wide map from a key to the one value of that key that is still in use.
pub(super) type Registry<K, V> = OnceLock<Mutex<HashMap<K, Weak<V>>>>;

/// The value of `key` in `registry`: the one in use, or a new one (entries no longer in use
/// are dropped meanwhile).
pub(super) fn shared<K: std::hash::Hash + Eq, V: Default>(
    registry: &Registry<K, V>,
    key: K,
) -> Arc<V> {
    let made: std::result::Result<_, std::convert::Infallible> =
        shared_with(registry, key, || Ok(V::default()));
    made.unwrap_or_else(|never| match never {})
}

/// [`shared`] with a value made by `make` when none is in use (the registry stays locked
/// meanwhile, so two callers never make two).
pub(super) fn shared_with<K: std::hash::Hash + Eq, V, E>(
    registry: &Registry<K, V>,
    key: K,
    make: impl FnOnce() -> std::result::Result<V, E>,
) -> std::result::Result<Arc<V>, E> {
    let mut map = registry
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = map.get(&key).and_then(Weak::upgrade) {
        return Ok(existing);
    }
    map.retain(|_, weak| weak.strong_count() > 0);
    let fresh = Arc::new(make()?);
    map.insert(key, Arc::downgrade(&fresh));
    Ok(fresh)
}

/// One SQLite file as a key: its canonical path (every spelling of it is one key) and, on
/// Unix, its device and inode, so a file replaced at the same path (deleted and created again,
/// restored from a backup) is another file, with a writer of its own — the old file's writer,
/// kept by the stores still open on it, would commit into the unlinked file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct FileKey {
    path: PathBuf,
    identity: (u64, u64),
}

/// The file at `path` as a key, when it is a file: `None` for an in-memory database
/// (`:memory:`, even where a file of that name exists: SQLite opens no file for it) or a
/// temporary one (`""`), which each connection has to itself, so no other connection may
/// write for it.
pub(super) fn file_key(path: &Path) -> Option<FileKey> {
    if path.as_os_str().is_empty() || path.as_os_str() == ":memory:" {
        return None;
    }
    let path = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&path)
        .ok()
        .filter(std::fs::Metadata::is_file)?;
    Some(FileKey {
        path,
        identity: identity(&meta),
    })
}

/// The file's device and inode.
#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// No identity beyond the path where the platform has no inode.
#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// `path` canonicalised (as given when it cannot be), so every spelling of one file is one key.
pub(super) fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A [`Watch`] on one SQLite file.
pub(super) struct SqliteWatch {
    conn: Connection,
    data_version: i64,
    notifier: Arc<Notifier>,
    seen: u64,
}

impl SqliteWatch {
    pub(super) fn open(path: &Path, notifier: Arc<Notifier>) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY.union(OpenFlags::SQLITE_OPEN_NO_MUTEX);
        let conn = Connection::open_with_flags(path, flags).map_err(|e| Error::CannotOpen {
            path: path.to_path_buf(),
            source: crate::error::BackendError::new(e),
        })?;
        let mut watch = SqliteWatch {
            conn,
            data_version: 0,
            seen: notifier.generation(),
            notifier,
        };
        watch.data_version = watch.read_version()?;
        Ok(watch)
    }

    fn read_version(&self) -> Result<i64> {
        self.conn
            .pragma_query_value(None, "data_version", |r| r.get(0))
            .map_err(|e| Error::Backend(crate::error::BackendError::new(e)))
    }
}

impl Watch for SqliteWatch {
    fn wait(&mut self, timeout: Duration) -> Result<bool> {
        // Never, for a timeout too long to add to now (`Duration::MAX`: wait on).
        let deadline = Deadline::after(timeout);
        loop {
            let version = self.read_version()?;
            if version != self.data_version {
                self.data_version = version;
                self.seen = self.notifier.generation();
                return Ok(true);
            }
            let left = deadline.left();
            if left.is_zero() {
                return Ok(false);
            }
            if self.notifier.wait_past(self.seen, left.min(POLL)) {
                self.seen = self.notifier.generation();
                // The committing connection is done by the time it notifies.
                self.data_version = self.read_version()?;
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
mod tests;
