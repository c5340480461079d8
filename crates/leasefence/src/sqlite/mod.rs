//! The embedded backend: one SQLite file, WAL journal, durable commits by default.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};

use crate::error::{BackendError, Error, Result};
use crate::store::Store;
use crate::types::{
    Backoff, Failed, Fence, JobId, JobInfo, JobState, Lease, NewJob, Now, Owner, Stats, Status,
    Ttl, batch_size, resource,
};

/// The schema, one numbered migration per step; `PRAGMA user_version` records how far a file
/// has come. Every migration is idempotent.
const MIGRATIONS: [&str; 2] = [
    include_str!("migrations/0001_jobs.sql"),
    include_str!("migrations/0002_queue.sql"),
];
const ENQUEUE: &str = include_str!("sql/enqueue.sql");
const STATE: &str = include_str!("sql/state.sql");
const CLAIM: &str = include_str!("sql/claim.sql");
const RENEW: &str = include_str!("sql/renew.sql");
const RENEW_BATCH: &str = include_str!("sql/renew_batch.sql");
const COMPLETE: &str = include_str!("sql/complete.sql");
const RELEASE: &str = include_str!("sql/release.sql");
const CLAIM_NEXT: &str = include_str!("sql/claim_next.sql");
/// `claim_next`: the same statement with `rowid = (SELECT … LIMIT 1)` for `rowid IN (…)`. A
/// scalar subquery needs no ephemeral table for its result, which halves the cost of a claim
/// at `synchronous = NORMAL`; one source of truth for what "ready" and "best" mean.
static CLAIM_ONE: LazyLock<String> = LazyLock::new(|| {
    let one = CLAIM_NEXT.replacen("WHERE rowid IN (", "WHERE rowid = (", 1);
    assert_ne!(one, CLAIM_NEXT, "claim_next.sql selects by `rowid IN (`");
    one
});
const FAIL: &str = include_str!("sql/fail.sql");
const CANCEL: &str = include_str!("sql/cancel.sql");
const PURGE: &str = include_str!("sql/purge.sql");
const ADMIT: &str = include_str!("sql/admit.sql");
const STATUS: &str = include_str!("sql/status.sql");
static LIST: LazyLock<String> =
    LazyLock::new(|| include_str!("sql/list.sql").replace("{status}", STATUS));
static STATS: LazyLock<String> =
    LazyLock::new(|| include_str!("sql/stats.sql").replace("{status}", STATUS));

/// The six columns of the contract's `jobs` table, in order.
pub const JOB_COLUMNS: [&str; 6] = ["id", "owner", "until", "fence", "result", "done"];

/// How commits reach the disk (SQLite's `PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// `FULL` (the default): every commit is on disk before the call returns. A power loss can
    /// never make the store forget a fence it handed out.
    #[default]
    Full,
    /// `NORMAL`: in WAL mode a power loss (not a process crash) may roll back the last commits.
    /// A fence handed out just before the loss may then be handed out again. Opt in only if the
    /// fenced resources can tolerate that.
    Normal,
    /// `OFF`: no fsync at all; for tests and throwaway data.
    Off,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
            Synchronous::Off => "OFF",
        }
    }
}

/// Options for opening a [`SqliteStore`]. The defaults are the durable ones.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("jobs.db");
/// use std::time::Duration;
/// use leasefence::{SqliteOptions, Synchronous};
///
/// let store = SqliteOptions::new()
///     .busy_timeout(Duration::from_secs(1))
///     .synchronous(Synchronous::Full)
///     .open(&path)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    busy_timeout: Duration,
    synchronous: Synchronous,
    init: bool,
    max_size: Option<u64>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Full,
            init: true,
            max_size: None,
        }
    }
}

impl SqliteOptions {
    /// The defaults: 5 s busy timeout, `synchronous = FULL`, create the file and table if absent.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a call waits for another connection's write lock before it fails with
    /// [`Error::Busy`]. Default 5 s.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Commit durability. Default [`Synchronous::Full`].
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Whether `open` may create the file, switch it to WAL and create the `jobs` table
    /// (default `true`). With `false`, `open` modifies nothing: the file and a `jobs` table with
    /// the six columns must already exist.
    pub fn init(mut self, init: bool) -> Self {
        self.init = init;
        self
    }

    /// A size limit for the database file, in bytes (default: none, the disk is the limit).
    /// A write that would grow the file past it fails with [`Error::StorageFull`] and changes
    /// nothing — so a runaway producer cannot fill the disk the workers need. Rounded down to
    /// whole pages; a limit below the file's current size stops it from growing at all.
    pub fn max_size(mut self, bytes: u64) -> Self {
        self.max_size = Some(bytes);
        self
    }

    /// Opens (and with `init`, initialises) the database at `path`.
    ///
    /// Initialising is idempotent: an existing `jobs` table and its rows are never touched.
    ///
    /// # Errors
    /// - [`Error::CannotOpen`]: the folder does not exist, the file is unreadable, or `init` is
    ///   off and the file does not exist.
    /// - [`Error::NotADatabase`]: the file is not SQLite. It is left unmodified.
    /// - [`Error::SchemaMismatch`]: `jobs` lacks one of the six columns, or (without `init`) is
    ///   missing. The file is left unmodified.
    /// - [`Error::Busy`] or [`Error::Backend`] for lock contention or I/O failures.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref();
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if self.init {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let mut conn = Connection::open_with_flags(path, flags).map_err(|e| Error::CannotOpen {
            path: path.to_path_buf(),
            source: BackendError::new(e),
        })?;
        wait_when_busy(&mut conn, self.busy_timeout).map_err(|e| map_error(path, e))?;
        let store = SqliteStore {
            conn,
            path: path.to_path_buf(),
        };
        store.configure(self)?;
        Ok(store)
    }
}

/// A store on one SQLite file that keeps its connection and its prepared statements, so a
/// long-running worker does not reopen the file on every call.
///
/// A `SqliteStore` is `Send` but not `Sync`: give each thread its own (they share the file, and
/// SQLite's locks keep them consistent).
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("jobs.db");
/// use leasefence::{JobId, Now, Owner, SqliteStore, Store, Ttl};
///
/// let store = SqliteStore::open(&path)?;
/// let job = JobId::new("thumbnail-7")?;
/// let me = Owner::new("worker-a")?;
/// store.enqueue(job)?;
/// let fence = store.claim(job, me, Now::new(100.0)?, Ttl::new(30.0)?)?.expect("claimable");
/// assert!(store.complete(job, me, fence, Now::new(110.0)?, "done")?);
/// # Ok(()) }
/// ```
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the database at `path` with the default [`SqliteOptions`], creating the file and
    /// the `jobs` table if they do not exist yet.
    ///
    /// # Errors
    /// As [`SqliteOptions::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        SqliteOptions::new().open(path)
    }

    /// The path this store was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The durability level in force on this store's connection, as SQLite reports it.
    ///
    /// # Errors
    /// Backend failures only.
    pub fn synchronous(&self) -> Result<Synchronous> {
        let level: i64 = self
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        Ok(match level {
            0 => Synchronous::Off,
            1 => Synchronous::Normal,
            _ => Synchronous::Full,
        })
    }

    /// Completes `lease` and runs the caller's own writes in the **same transaction** as the
    /// fence check, so they commit only if the lease is still current.
    ///
    /// The guarded `complete` runs first, inside `BEGIN IMMEDIATE`. If the lease is no longer
    /// current, `write` is not called and `Ok(None)` is returned. Otherwise `write` gets the
    /// connection with the transaction open; if it returns `Ok(t)`, everything commits
    /// together and `Ok(Some(t))` is returned; if it returns `Err(e)`, everything — the
    /// completion included — is rolled back and `Err(e)` is returned.
    ///
    /// `write` must not commit or roll back the transaction itself.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{NewJob, Now, Owner, SqliteStore, Store, Ttl};
    ///
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// store.enqueue_many(&[NewJob::new("invoice-9")?])?;
    /// let lease = store.claim_next(Owner::new("w1")?, Now::new(0.0)?, Ttl::new(30.0)?)?.unwrap();
    ///
    /// let stored = store.complete_with(&lease, Now::new(5.0)?, "sent", |conn| {
    ///     conn.execute_batch("CREATE TABLE IF NOT EXISTS sent (id TEXT PRIMARY KEY, fence INT)")?;
    ///     conn.execute("INSERT INTO sent VALUES (?1, ?2)", (&lease.job_id, lease.fence))?;
    ///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    /// });
    /// assert!(matches!(stored, Ok(Some(()))));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Busy or backend failures converted into `E`, or `write`'s own error.
    pub fn complete_with<T, E>(
        &self,
        lease: &Lease,
        now: Now,
        result: &str,
        write: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<Option<T>, E>
    where
        E: From<Error>,
    {
        let now = now.seconds();
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        let changed = {
            let mut stmt = self
                .conn
                .prepare_cached(COMPLETE)
                .map_err(|e| self.err(e))?;
            stmt.execute(params![lease.job_id, lease.owner, lease.fence, now, result])
                .map_err(|e| self.err(e))?
        };
        if changed != 1 {
            return Ok(None);
        }
        let value = write(&self.conn)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(value))
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        map_error(&self.path, e)
    }

    fn configure(&self, options: &SqliteOptions) -> Result<()> {
        let conn = &self.conn;
        // The first read of the file: fails with NOTADB on a file that is not SQLite, before
        // anything could write to it.
        let columns = self.job_columns()?;
        if !columns.is_empty() {
            let missing: Vec<&str> = JOB_COLUMNS
                .iter()
                .copied()
                .filter(|c| !columns.iter().any(|have| have == c))
                .collect();
            if !missing.is_empty() {
                return Err(Error::SchemaMismatch {
                    path: self.path.clone(),
                    detail: format!(
                        "table `jobs` lacks column{} {}",
                        if missing.len() > 1 { "s" } else { "" },
                        missing.join(", ")
                    ),
                });
            }
        } else if !options.init {
            return Err(Error::SchemaMismatch {
                path: self.path.clone(),
                detail: "no `jobs` table; run `init_db` (or `leasefence init`) first".into(),
            });
        }
        conn.pragma_update(None, "synchronous", options.synchronous.pragma())
            .map_err(|e| self.err(e))?;
        if let Some(bytes) = options.max_size {
            let page_size: i64 = conn
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .map_err(|e| self.err(e))?;
            let pages = i64::try_from(bytes).unwrap_or(i64::MAX) / page_size.max(1);
            // SQLite never sets the limit below the current page count: the file then keeps
            // its size and cannot grow.
            conn.pragma_update(None, "max_page_count", pages.max(1))
                .map_err(|e| self.err(e))?;
        }
        if options.init {
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(|e| self.err(e))?;
            debug_assert!(
                mode.eq_ignore_ascii_case("wal") || mode == "memory",
                "{mode}"
            );
        }
        self.migrate()
    }

    /// Brings the schema up to the latest migration, in one `BEGIN IMMEDIATE` transaction.
    /// Only adds tables, columns and indexes (and fills new columns): the six contract columns
    /// of a row are never changed.
    fn migrate(&self) -> Result<()> {
        let latest = MIGRATIONS.len() as i64;
        if self.user_version()? >= latest {
            return Ok(());
        }
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        // Re-read under the write lock: another process may have migrated meanwhile.
        let from = self.user_version()?;
        for (version, migration) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
            let columns = self.job_columns()?;
            for statement in statements(migration) {
                if let Some(column) = added_column(statement)
                    && columns.iter().any(|c| c.eq_ignore_ascii_case(&column))
                {
                    continue; // a user's own column of that name: keep it
                }
                self.conn
                    .execute_batch(statement)
                    .map_err(|e| self.err(e))?;
            }
            let next = version as i64 + 1;
            self.conn
                .pragma_update(None, "user_version", next)
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    fn user_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// The column names of `jobs`; empty when the table does not exist.
    fn job_columns(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM pragma_table_info('jobs')")
            .map_err(|e| self.err(e))?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.err(e))?;
        Ok(names)
    }

    /// Runs one guarded write statement and reports whether it changed exactly one row.
    fn write_one(&self, sql: &str, params: impl rusqlite::Params) -> Result<bool> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let changed = stmt.execute(params).map_err(|e| self.err(e))?;
        Ok(changed == 1)
    }
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
fn wait_when_busy(conn: &mut Connection, limit: Duration) -> rusqlite::Result<()> {
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

/// The statements of a SQL file, without comments-only fragments.
fn statements(sql: &str) -> impl Iterator<Item = &str> {
    sql.split(';').map(str::trim).filter(|s| {
        s.lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
    })
}

/// The column an `ALTER TABLE jobs ADD COLUMN name …` statement adds.
fn added_column(statement: &str) -> Option<String> {
    let code: Vec<&str> = statement
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    let code = code.join(" ");
    let rest = code.split("ADD COLUMN").nth(1)?;
    rest.split_whitespace().next().map(str::to_owned)
}

/// A `BEGIN IMMEDIATE` transaction on a shared connection, rolled back on drop unless committed.
struct Immediate<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> Immediate<'c> {
    fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        // Cached like every other statement: parsing BEGIN and COMMIT on each call costs a
        // measurable share of a cycle at synchronous = NORMAL.
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate { conn, open: true })
    }

    fn commit(mut self) -> rusqlite::Result<()> {
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

impl Store for SqliteStore {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool> {
        let none: Option<&[u8]> = None;
        self.write_one(ENQUEUE, params![job_id.as_str(), none, 0, 0.0, 0])
    }

    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>> {
        let mut stmt = self.conn.prepare_cached(STATE).map_err(|e| self.err(e))?;
        stmt.query_row(params![job_id.as_str()], |r| {
            Ok(JobState {
                id: r.get(0)?,
                owner: r.get(1)?,
                until: r.get(2)?,
                fence: r.get(3)?,
                result: r.get(4)?,
                done: r.get::<_, i64>(5)? != 0,
            })
        })
        .optional()
        .map_err(|e| self.err(e))
    }

    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Fence>> {
        let until = ttl.until(now)?;
        let now = now.seconds();
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        let fence = {
            let mut stmt = self.conn.prepare_cached(CLAIM).map_err(|e| self.err(e))?;
            stmt.query_row(params![job_id.as_str(), owner.as_str(), until, now], |r| {
                r.get::<_, Fence>(0)
            })
            .optional()
            .map_err(|e| self.err(e))?
        };
        tx.commit().map_err(|e| self.err(e))?;
        Ok(fence)
    }

    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool> {
        let until = ttl.until(now)?;
        let now = now.seconds();
        self.write_one(
            RENEW,
            params![job_id.as_str(), owner.as_str(), fence, now, until],
        )
    }

    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> Result<bool> {
        let now = now.seconds();
        self.write_one(
            COMPLETE,
            params![job_id.as_str(), owner.as_str(), fence, now, result],
        )
    }

    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool> {
        self.write_one(RELEASE, params![job_id.as_str(), owner.as_str(), fence])
    }

    fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<bool>> {
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        let mut inserted = Vec::with_capacity(jobs.len());
        {
            let mut stmt = self.conn.prepare_cached(ENQUEUE).map_err(|e| self.err(e))?;
            for job in jobs {
                let changed = stmt
                    .execute(params![
                        job.id(),
                        job.payload_bytes(),
                        job.priority_value(),
                        job.not_before_value(),
                        job.max_attempts_value(),
                    ])
                    .map_err(|e| self.err(e))?;
                inserted.push(changed == 1);
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(inserted)
    }

    fn claim_next(&self, owner: Owner<'_>, now: Now, ttl: Ttl) -> Result<Option<Lease>> {
        let until = ttl.until(now)?;
        let now = now.seconds();
        // One statement, so one implicit transaction: it takes the write lock before it reads
        // (as BEGIN IMMEDIATE would) and commits when it finishes.
        let mut stmt = self
            .conn
            .prepare_cached(&CLAIM_ONE)
            .map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query(params![owner.as_str(), until, now, 1])
            .map_err(|e| self.err(e))?;
        let lease = match rows.next().map_err(|e| self.err(e))? {
            Some(row) => Some(claimed_lease(row, owner).map_err(|e| self.err(e))?),
            None => None,
        };
        // Step to the end: the commit happens there, and a failed commit must be an error.
        while rows.next().map_err(|e| self.err(e))?.is_some() {}
        Ok(lease)
    }

    fn claim_batch(&self, owner: Owner<'_>, now: Now, ttl: Ttl, n: usize) -> Result<Vec<Lease>> {
        let n = batch_size(n)?;
        if n == 1 {
            return Ok(self.claim_next(owner, now, ttl)?.into_iter().collect());
        }
        let until = ttl.until(now)?;
        let now = now.seconds();
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        let mut claimed = {
            let mut stmt = self
                .conn
                .prepare_cached(CLAIM_NEXT)
                .map_err(|e| self.err(e))?;
            stmt.query_map(params![owner.as_str(), until, now, limit], |r| {
                let order: (f64, i64) = (r.get(7)?, r.get(8)?);
                Ok((claimed_lease(r, owner)?, order))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.err(e))?
        };
        tx.commit().map_err(|e| self.err(e))?;
        // RETURNING has no order: hand the leases out best first, as claim_next would.
        claimed.sort_by(|(a, (a_nb, a_seq)), (b, (b_nb, b_seq))| {
            b.priority
                .cmp(&a.priority)
                .then(a_nb.total_cmp(b_nb))
                .then(a_seq.cmp(b_seq))
        });
        Ok(claimed.into_iter().map(|(lease, _)| lease).collect())
    }

    fn complete_batch(&self, completions: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>> {
        if completions.is_empty() {
            return Ok(Vec::new());
        }
        let now = now.seconds();
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        let mut stored = Vec::with_capacity(completions.len());
        {
            let mut stmt = self
                .conn
                .prepare_cached(COMPLETE)
                .map_err(|e| self.err(e))?;
            for (lease, result) in completions {
                let changed = stmt
                    .execute(params![lease.job_id, lease.owner, lease.fence, now, result])
                    .map_err(|e| self.err(e))?;
                stored.push(changed == 1);
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(stored)
    }

    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> Result<Option<Failed>> {
        let retry_at = retry_at.unwrap_or_else(|| Backoff::default().retry_at(lease, now));
        let (now, at) = (now.seconds(), retry_at.seconds());
        let mut stmt = self.conn.prepare_cached(FAIL).map_err(|e| self.err(e))?;
        let dead: Option<bool> = stmt
            .query_row(
                params![lease.job_id, lease.owner, lease.fence, now, error, at],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(dead.map(|dead| {
            if dead {
                Failed::Dead
            } else {
                Failed::Retrying { at }
            }
        }))
    }

    fn cancel(&self, job_id: JobId<'_>, now: Now) -> Result<bool> {
        self.write_one(CANCEL, params![job_id.as_str(), now.seconds()])
    }

    fn purge(&self, finished_before: Now) -> Result<u64> {
        let before = finished_before.seconds();
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        let mut deleted = 0;
        for statement in statements(PURGE) {
            let mut stmt = self
                .conn
                .prepare_cached(statement)
                .map_err(|e| self.err(e))?;
            deleted = stmt.execute(params![before]).map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(deleted as u64)
    }

    fn list(&self, now: Now, status: Option<Status>, limit: usize) -> Result<Vec<JobInfo>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(&LIST).map_err(|e| self.err(e))?;
        stmt.query_map(
            params![now.seconds(), status.map(Status::as_str), limit],
            |r| {
                Ok(JobInfo {
                    state: JobState {
                        id: r.get(0)?,
                        owner: r.get(1)?,
                        until: r.get(2)?,
                        fence: r.get(3)?,
                        result: r.get(4)?,
                        done: r.get::<_, i64>(5)? != 0,
                    },
                    payload: r.get(6)?,
                    priority: r.get(7)?,
                    not_before: r.get(8)?,
                    max_attempts: r.get(9)?,
                    error: r.get(10)?,
                    finished_at: r.get(11)?,
                    status: status_column(r, 12)?,
                })
            },
        )
        .and_then(|rows| rows.collect())
        .map_err(|e| self.err(e))
    }

    fn stats(&self, now: Now) -> Result<Stats> {
        let mut stmt = self.conn.prepare_cached(&STATS).map_err(|e| self.err(e))?;
        let counts = stmt
            .query_map(params![now.seconds()], |r| {
                Ok((status_column(r, 0)?, r.get::<_, i64>(1)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.err(e))?;
        let mut stats = Stats::default();
        for (status, count) in counts {
            *stats.slot(status) += count.max(0) as u64;
        }
        Ok(stats)
    }

    fn admit(&self, resource_name: &str, fence: Fence) -> Result<bool> {
        let resource_name = resource(resource_name)?;
        self.write_one(ADMIT, params![resource_name, fence])
    }

    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let until = ttl.until(now)?;
        let now = now.seconds();
        let tx = Immediate::begin(&self.conn).map_err(|e| self.err(e))?;
        let mut renewed = Vec::with_capacity(leases.len());
        {
            let mut stmt = self
                .conn
                .prepare_cached(RENEW_BATCH)
                .map_err(|e| self.err(e))?;
            for lease in leases {
                let changed = stmt
                    .execute(params![lease.job_id, lease.owner, lease.fence, now, until])
                    .map_err(|e| self.err(e))?;
                renewed.push(changed == 1);
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(renewed)
    }
}

/// The lease of one row returned by the claim statements.
fn claimed_lease(r: &rusqlite::Row<'_>, owner: Owner<'_>) -> rusqlite::Result<Lease> {
    Ok(Lease {
        job_id: r.get(0)?,
        owner: owner.as_str().to_owned(),
        fence: r.get(1)?,
        until: r.get(2)?,
        payload: r.get(3)?,
        priority: r.get(4)?,
        max_attempts: r.get(5)?,
        last_error: r.get(6)?,
    })
}

/// Reads a status name written by `status.sql`.
fn status_column(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Status> {
    let name: String = row.get(index)?;
    Status::parse(&name).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Sorts a driver error into the crate's error kinds.
fn map_error(path: &Path, e: rusqlite::Error) -> Error {
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
