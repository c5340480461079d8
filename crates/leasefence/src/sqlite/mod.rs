//! The embedded backend: one SQLite file, WAL journal, durable commits by default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params};

mod complete;
mod connection;
mod enqueue;
mod group;
mod ledger;
mod observe;
mod operator;
mod reads;
mod rows;
#[cfg(feature = "cron")]
mod schedule;
mod sql;
mod store;
mod watch;
mod writer;

use crate::error::{BackendError, Error, Result};
use crate::types::{Lease, Now};
use connection::{Immediate, map_error, wait_when_busy};
pub use group::GroupCommitStats;

/// The schema, one numbered migration per step; `PRAGMA user_version` records how far a file
/// has come. Every migration is idempotent.
const MIGRATIONS: [&str; 7] = [
    include_str!("migrations/0001_jobs.sql"),
    include_str!("migrations/0002_queue.sql"),
    include_str!("migrations/0003_attempts.sql"),
    include_str!("migrations/0004_queues.sql"),
    include_str!("migrations/0005_ledger.sql"),
    include_str!("migrations/0006_schedules.sql"),
    include_str!("migrations/0007_dashboard.sql"),
];

/// The six columns of the contract's `jobs` table, in order.
pub const JOB_COLUMNS: [&str; 6] = ["id", "owner", "until", "fence", "result", "done"];

/// How commits reach the disk (SQLite's `PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// `FULL` (the default): every commit is on disk before the call returns. A power loss can
    /// never make the store forget a fence it handed out (set as `EXTRA` on a file not in WAL
    /// mode, to sync the folder after the unlink of the rollback journal that commits).
    #[default]
    Full,
    /// `NORMAL`: in WAL mode the WAL is synced only at checkpoints, so a power loss (not a
    /// process crash) rolls back **every commit since the last checkpoint** — in the power-cut
    /// tests 67–85 % of what was acknowledged. A claim rolled back while its job survives
    /// leaves the job at the old fence, so **the same fence number is then handed out again**
    /// to the next owner, as it is to a job lost with its claim and enqueued again (from fence
    /// 0). The file stays intact. Opt in only if a repeated fence is harmless to the resources.
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
    group_commit: Option<bool>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Full,
            init: true,
            max_size: None,
            group_commit: None,
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
    /// (default `true`). With `false`, `open` creates nothing: the file and a `jobs` table with
    /// the six columns must already exist (else [`Error::CannotOpen`] or
    /// [`Error::SchemaMismatch`], the file untouched). A `jobs` table that exists is still
    /// brought up to the latest migration — the seed's six-column table gains the queue's
    /// columns and the ledger's tables — as `PgOptions::init(false)`
    /// does on PostgreSQL.
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

    /// Whether this store's writes join the **group commit** of the other stores of this
    /// process on the same file with the same settings. Default: on at
    /// [`Synchronous::Full`], off otherwise.
    ///
    /// Writes made at the same time by threads with their own stores then share one
    /// transaction and one commit — one fsync for the whole group instead of one each — and
    /// only the group's leader waits for the file's lock (when another process holds it). Each
    /// write is still judged alone (its own fence check, its own answer: a refused or failed
    /// write never fails another; only a failure to begin the group's transaction, or to commit
    /// it for the file's lock, reaches every write of the group, none of which is then stored;
    /// a commit failing otherwise — a disk too full for the group — reruns each write alone),
    /// and each caller returns only once its write is committed. The writes grouped: `enqueue`,
    /// `claim`, `claim_next`, `claim_batch`, `renew`, `complete`, `complete_batch`, `release`
    /// and `fail` — so the [`Worker`](crate::Worker)'s threads share their claims' and results'
    /// commits. A failed batch stores none of its jobs, as alone. `renew_batch` and
    /// `enqueue_many` keep their own transactions. Waiting for the group's turn counts against
    /// the [busy timeout](Self::busy_timeout): a write that no group has taken by then is
    /// withdrawn, unrun, with [`Error::Busy`](crate::Error::Busy).
    ///
    /// Why not at `NORMAL`: there a commit costs no fsync, so a group saves little, while its
    /// callers all wait for the slowest call of the group (measured: 4 threads of single
    /// claim→complete 15 % slower grouped; docs/benchmarks.md).
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("jobs.db");
    /// use leasefence::{JobId, SqliteOptions, Store, Synchronous};
    ///
    /// // NORMAL does not group by default; this store asks for it.
    /// let store = SqliteOptions::new()
    ///     .synchronous(Synchronous::Normal)
    ///     .group_commit(true)
    ///     .open(&path)?;
    /// store.enqueue(JobId::new("a")?)?;
    /// assert_eq!(store.group_commit_stats().calls, 1);
    /// # Ok(()) }
    /// ```
    pub fn group_commit(mut self, group: bool) -> Self {
        self.group_commit = Some(group);
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
    /// - [`Error::SchemaMismatch`]: `jobs` lacks one of the six columns, declares one with a
    ///   type that cannot hold it (an `INTEGER PRIMARY KEY` id, a `TEXT` lease end), or
    ///   (without `init`) is missing. The file is left unmodified.
    /// - [`Error::Busy`] or [`Error::Backend`] for lock contention or I/O failures.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref();
        let mut store = self.open_alone(path)?;
        // A file, not an in-memory or temporary database (each connection has its own): its
        // stores in this process write through one writer, and group their commits.
        if let Some(file) = watch::file_key(path) {
            let settings = (
                file,
                self.synchronous.pragma(),
                self.max_size,
                self.busy_timeout,
            );
            let group = self
                .group_commit
                .unwrap_or(self.synchronous == Synchronous::Full);
            store.group = group.then(|| group::queue(settings.clone()));
            store.writer = Some(writer::writer(settings, || self.open_alone(path))?);
        }
        Ok(store)
    }

    /// A store with a connection of its own, configured (and the file migrated), before it
    /// joins this process's writer of the file; the writer itself is one.
    fn open_alone(&self, path: &Path) -> Result<SqliteStore> {
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
            notifier: watch::notifier(path),
            writer: None,
            busy_timeout: self.busy_timeout,
            group: None,
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
/// The stores of one process on one file (opened with the same options) run their write
/// transactions one at a time through one shared connection, the process's writer of the
/// file: threads then wait for each other without sleeping in the busy handler, and SQLite
/// keeps its page cache between their transactions (it drops it whenever another connection
/// wrote). Each store reads through its own connection. Waiting for the writer counts
/// against the [busy timeout](SqliteOptions::busy_timeout). An in-memory database
/// (`":memory:"`) has no shared writer: each store of one is a database of its own.
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
/// let lease = store.claim(job, me, Now::new(100.0)?, Ttl::new(30.0)?)?.expect("claimable");
/// assert_eq!((lease.fence, lease.until), (1, 130.0));
/// assert!(store.complete_lease(&lease, Now::new(110.0)?, "done")?);
/// # Ok(()) }
/// ```
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// Wakes this process's watches of the file (see [`Store::watch`](crate::Store::watch)).
    notifier: std::sync::Arc<watch::Notifier>,
    /// This process's writer of the file, through which the store's write transactions run
    /// (`None` for the writer itself, and for an in-memory or temporary database).
    writer: Option<std::sync::Arc<writer::Writer>>,
    /// How long a write waits for the writer and then for SQLite's lock.
    busy_timeout: Duration,
    /// The group commit this store's single writes join, if it groups them (see
    /// [`SqliteOptions::group_commit`]).
    group: Option<std::sync::Arc<group::CommitQueue>>,
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

    /// Begins a write transaction (`BEGIN IMMEDIATE`) on this store's own connection: for a
    /// store without a writer (the writer's own, an in-memory one), and for the migration,
    /// which runs before the store has its writer. Every other write transaction goes through
    /// [`transaction`](Self::transaction).
    fn begin(&self) -> rusqlite::Result<Immediate<'_>> {
        Immediate::begin(&self.conn)
    }

    /// How the group commit this store's single writes join has grouped them so far, counted
    /// for every store of this process that shares it (see [`SqliteOptions::group_commit`]);
    /// all zero when the store does not group its commits.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::{JobId, SqliteStore, Store};
    ///
    /// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
    /// store.enqueue(JobId::new("a")?)?;
    /// let stats = store.group_commit_stats();
    /// // One writer alone: a group of one.
    /// assert_eq!((stats.groups, stats.calls), (1, 1));
    /// # Ok(()) }
    /// ```
    pub fn group_commit_stats(&self) -> GroupCommitStats {
        self.group
            .as_ref()
            .map_or_else(GroupCommitStats::default, |group| group.stats())
    }

    /// The durability level in force on this store's connection, as SQLite reports it.
    ///
    /// # Errors
    /// Backend failures only.
    pub fn synchronous(&self) -> Result<Synchronous> {
        let level: i64 = self
            .conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
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
    ///     Ok::<_, leasefence::HandlerError>(())
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
        self.transaction(|s| {
            let changed = {
                let mut stmt = s.conn.prepare_cached(sql::COMPLETE).map_err(|e| s.err(e))?;
                stmt.execute(params![lease.job_id, lease.owner, lease.fence, now, result])
                    .map_err(|e| s.err(e))?
            };
            if changed != 1 {
                // Refused: counted in the ledger, and nothing of the caller's is written.
                s.refuse(&lease.job_id, lease.fence, crate::WriteOp::Complete)?;
                return Ok(None);
            }
            Ok(Some(write(&s.conn)?))
        })
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        map_error(&self.path, e)
    }

    fn configure(&self, options: &SqliteOptions) -> Result<()> {
        let conn = &self.conn;
        // The first read of the file: fails with NOTADB on a file that is not SQLite, before
        // anything could write to it.
        let typed = self.job_columns()?;
        let columns: Vec<String> = typed.iter().map(|(name, _)| name.clone()).collect();
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
            if let Some(detail) = mistyped(&typed) {
                return Err(Error::SchemaMismatch {
                    path: self.path.clone(),
                    detail,
                });
            }
        } else if !options.init {
            return Err(Error::SchemaMismatch {
                path: self.path.clone(),
                detail: "no `jobs` table; run `init_db` (or `leasefence init`) first".into(),
            });
        }
        if let Some(bytes) = options.max_size {
            let page_size: i64 = conn
                .pragma_query_value(None, "page_size", |r| r.get(0))
                .map_err(|e| self.err(e))?;
            let pages = i64::try_from(bytes).unwrap_or(i64::MAX) / page_size.max(1);
            // SQLite never sets the limit below the current page count: the file then keeps
            // its size and cannot grow.
            conn.pragma_update(None, "max_page_count", pages.max(1))
                .map_err(|e| self.err(e))?;
        }
        if options.init {
            let mode: String = conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
                .map_err(|e| self.err(e))?;
            if !(mode.eq_ignore_ascii_case("wal") || mode.eq_ignore_ascii_case("memory")) {
                return Err(Error::Unsupported {
                    database: self.path.display().to_string(),
                    detail: format!(
                        "journal_mode is {mode:?}, not WAL: SQLite could not enable WAL on \
                         this file system (it needs shared memory and byte-range locks)"
                    ),
                });
            }
        }
        connection::set_synchronous(conn, options.synchronous).map_err(|e| self.err(e))?;
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
        let tx = self.begin().map_err(|e| self.err(e))?;
        // Re-read under the write lock: another process may have migrated meanwhile.
        let from = self.user_version()?;
        for (version, migration) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
            let columns = self.job_columns()?;
            let existed =
                |column: &str| columns.iter().any(|(c, _)| c.eq_ignore_ascii_case(column));
            for statement in statements(migration) {
                if added_column(statement).is_some_and(|c| existed(&c)) {
                    continue; // a user's own column of that name, or ours: keep it
                }
                if filled_column(statement).is_some_and(|c| existed(&c)) {
                    // The fill of a column the migration did not add: a file whose
                    // user_version was lost (`sqlite3 .dump` leaves it out) runs its
                    // migrations again, and 0003 would overwrite every job's attempts.
                    continue;
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
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// The column names of `jobs`; empty when the table does not exist.
    /// The columns of `jobs` with their declared types, and whether each is an integer
    /// primary key (a rowid alias, which holds integers only).
    fn job_columns(&self) -> Result<Vec<(String, String)>> {
        let mut columns = Vec::new();
        self.conn
            .pragma(None, "table_info", "jobs", |r| {
                let mut declared = r.get::<_, String>("type")?;
                if r.get::<_, i64>("pk")? > 0 && declared.eq_ignore_ascii_case("integer") {
                    declared = "INTEGER PRIMARY KEY".to_owned();
                }
                columns.push((r.get::<_, String>("name")?, declared));
                Ok(())
            })
            .map_err(|e| self.err(e))?;
        Ok(columns)
    }

    /// Runs one guarded write statement and reports whether it changed exactly one row.
    fn write_one(&self, sql: &str, params: impl rusqlite::Params) -> Result<bool> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let changed = stmt.execute(params).map_err(|e| self.err(e))?;
        Ok(changed == 1)
    }
}

/// Why the six columns' declared types cannot hold what the contract stores in them, or
/// `None`: `id`, `owner` and `result` hold text (an `INTEGER PRIMARY KEY` id refuses every
/// text id), `until`, `fence` and `done` numbers (a `TEXT` one would store `130.0` as text,
/// which SQLite orders after every number: a lease that never ends). Judged by SQLite's own
/// type affinity rules, so `VARCHAR(64)`, `BIGINT` or `DOUBLE` pass as the seed's types do.
fn mistyped(columns: &[(String, String)]) -> Option<String> {
    #[derive(PartialEq)]
    enum Affinity {
        Integer,
        Text,
        Blob,
        Real,
        Numeric,
    }
    // https://www.sqlite.org/datatype3.html#determination_of_column_affinity
    let affinity = |declared: &str| {
        let t = declared.to_ascii_uppercase();
        if t.contains("INT") {
            Affinity::Integer
        } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
            Affinity::Text
        } else if t.contains("BLOB") || t.is_empty() {
            Affinity::Blob
        } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
            Affinity::Real
        } else {
            Affinity::Numeric
        }
    };
    let wrong: Vec<String> = columns
        .iter()
        .filter(|(name, declared)| {
            let a = affinity(declared);
            match name.as_str() {
                "id" | "owner" | "result" => !(a == Affinity::Text || a == Affinity::Blob),
                "until" | "fence" | "done" => a == Affinity::Text,
                _ => false,
            }
        })
        .map(|(name, declared)| format!("{name} {declared}"))
        .collect();
    (!wrong.is_empty()).then(|| {
        format!(
            "table `jobs` declares {}: the six columns are id TEXT, owner TEXT, until REAL, \
             fence INTEGER, result TEXT, done INTEGER (or types of the same affinity)",
            wrong.join(", ")
        )
    })
}

/// The statements of a SQL file, without comments-only fragments. A statement ends at a `;`
/// outside a `--` comment and a quoted string, except inside a `CREATE TRIGGER`, whose body's
/// statements end with its `END;`.
fn statements(sql: &str) -> Vec<&str> {
    let code = |s: &str| -> String {
        s.lines()
            .map(|l| l.split("--").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" ")
            .to_ascii_uppercase()
    };
    let mut ends = Vec::new();
    let (mut comment, mut quoted) = (false, false);
    let bytes = sql.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\n' => comment = false,
            b'-' if !quoted && bytes.get(i + 1) == Some(&b'-') => comment = true,
            b'\'' if !comment => quoted = !quoted,
            b';' if !comment && !quoted => ends.push(i),
            _ => {}
        }
    }
    ends.push(sql.len());
    let mut statements = Vec::new();
    let mut start = 0;
    for end in ends {
        let piece = sql[start..end].trim();
        let text = code(piece);
        if text.contains("CREATE TRIGGER") && !text.trim_end().ends_with("END") {
            continue; // inside a trigger's body: the statement goes on
        }
        if !text.trim().is_empty() {
            statements.push(piece);
        }
        start = (end + 1).min(sql.len());
    }
    statements
}

/// The column an `ALTER TABLE jobs ADD COLUMN name …` statement adds.
fn added_column(statement: &str) -> Option<String> {
    let code = code_of(statement);
    let rest = code.split("ADD COLUMN").nth(1)?;
    rest.split_whitespace().next().map(str::to_owned)
}

/// The column a migration's `UPDATE jobs SET column = …` fills, if `statement` is one.
fn filled_column(statement: &str) -> Option<String> {
    let code = code_of(statement);
    let rest = code.trim_start().strip_prefix("UPDATE jobs SET ")?;
    rest.split(['=', ' ']).next().map(str::to_owned)
}

/// `statement` without its comment lines, its words on one line one space apart (so that
/// `UPDATE jobs\n   SET x = …` reads as `UPDATE jobs SET x = …`).
fn code_of(statement: &str) -> String {
    let code: Vec<&str> = statement
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .flat_map(str::split_whitespace)
        .collect();
    code.join(" ")
}
