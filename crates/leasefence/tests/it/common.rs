//! Fixtures shared by every test: a fresh database per test (an SQLite file, or a PostgreSQL
//! schema), an independent reader of the stored rows (`Probe`), and one `Api` over which each
//! contract case runs per configuration.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use leasefence::{
    AnyOptions, AnyStore, Error, JobId, JobState, Lease, NewJob, Now, Observe, Owner, PgOptions,
    PgStore, SqliteStore, Store, Ttl,
};

/// A store with the operator's views ([`Observe`]): what every backend of `backends!` is.
pub trait Viewed: Store + Observe {}
impl<T: Store + Observe> Viewed for T {}

/// One row of the audit log, read straight from the store: `(seq, at, actor, action, target,
/// result)`.
pub type AuditRow = (i64, f64, String, String, String, String);
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

/// A stored row, read straight from the file by a connection the code under test never saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub owner: Option<String>,
    pub until: f64,
    pub fence: i64,
    pub result: Option<String>,
    pub done: i64,
}

impl Row {
    /// A freshly enqueued row.
    pub fn fresh(id: &str) -> Row {
        Row {
            id: id.into(),
            owner: None,
            until: 0.0,
            fence: 0,
            result: None,
            done: 0,
        }
    }

    /// What `state` must return for this row.
    pub fn as_state(&self) -> JobState {
        JobState {
            id: self.id.clone(),
            owner: self.owner.clone(),
            until: self.until,
            fence: self.fence,
            result: self.result.clone(),
            done: self.done != 0,
        }
    }
}

/// A database file in its own temporary folder.
pub struct Db {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Db {
    /// A path where no file exists yet.
    pub fn empty() -> Db {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("jobs.db");
        Db { _dir: dir, path }
    }

    /// An initialised database.
    pub fn new() -> Db {
        let db = Db::empty();
        leasefence::init_db(&db.path).expect("init_db");
        db
    }

    /// An independent connection (read-write, for arranging state and for reading it back).
    pub fn raw(&self) -> Connection {
        let conn = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .expect("independent connection");
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        conn
    }

    /// The stored row of `id`, through an independent connection.
    pub fn row(&self, id: &str) -> Option<Row> {
        self.raw()
            .query_row(
                "SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?1",
                [id],
                |r| {
                    Ok(Row {
                        id: r.get(0)?,
                        owner: r.get(1)?,
                        until: r.get(2)?,
                        fence: r.get(3)?,
                        result: r.get(4)?,
                        done: r.get(5)?,
                    })
                },
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .expect("read row")
    }

    /// Every stored row, ordered by id: the whole observable state.
    pub fn rows(&self) -> Vec<Row> {
        let conn = self.raw();
        let mut stmt = conn
            .prepare("SELECT id, owner, until, fence, result, done FROM jobs ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| {
            Ok(Row {
                id: r.get(0)?,
                owner: r.get(1)?,
                until: r.get(2)?,
                fence: r.get(3)?,
                result: r.get(4)?,
                done: r.get(5)?,
            })
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// Writes a row exactly as given, bypassing the code under test.
    pub fn put(&self, row: &Row) {
        self.raw()
            .execute(
                "INSERT OR REPLACE INTO jobs (id, owner, until, fence, result, done) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    row.id, row.owner, row.until, row.fence, row.result, row.done
                ],
            )
            .expect("arrange row");
    }

    /// A job leased by `owner` under `fence` until `until`, arranged directly in the file.
    pub fn leased(&self, id: &str, owner: &str, fence: i64, until: f64) -> Row {
        let row = Row {
            owner: Some(owner.into()),
            until,
            fence,
            ..Row::fresh(id)
        };
        self.put(&row);
        row
    }

    /// The raw bytes of the file (to prove a refused call did not modify it).
    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.path).expect("read db file")
    }
}

/// The stored state of one backend, read and arranged through a connection of its own that the
/// code under test never saw. One contract case body runs against every backend through this.
pub trait Probe {
    /// The stored row of `id`.
    fn row(&self, id: &str) -> Option<Row>;
    /// Every stored row, ordered by id: the whole observable state.
    fn rows(&self) -> Vec<Row>;
    /// Writes a row exactly as given (insert or overwrite), bypassing the code under test.
    fn put(&self, row: &Row);
    /// Runs SQL that both dialects understand (e.g. a `DELETE`), bypassing the code under test.
    fn exec(&self, sql: &str);
    /// Opens a write transaction on another connection, runs `sql` in it and keeps it open;
    /// the returned function commits it.
    fn hold(&self, sql: &str) -> Box<dyn FnOnce() + Send>;
    /// As `hold`, but the returned function first waits until another connection waits for
    /// the held lock, then commits. PostgreSQL observes the waiter (`pg_blocking_pids`);
    /// SQLite's busy wait cannot be observed from outside, so there it gives the waiter 500 ms.
    fn hold_until_waited(&self, sql: &str) -> Box<dyn FnOnce() + Send> {
        let commit = self.hold(sql);
        Box::new(move || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            commit()
        })
    }
    /// Whether the backend's text type can store a NUL byte (SQLite: yes; PostgreSQL: no, and
    /// `PgStore` refuses such a value as an invalid argument).
    fn text_holds_nul(&self) -> bool;
    /// The queue columns of the row of `id`.
    fn queue_row(&self, id: &str) -> QueueRow;
    /// The highest fence admitted for `resource` by the fence gate.
    fn fence_gate(&self, resource: &str) -> Option<i64>;
    /// Whether the `queues` table marks `queue` paused (`None`: it has no row there).
    fn paused(&self, queue: &str) -> Option<bool>;
    /// The fence floor kept for a purged `id`: the highest fence ever handed out for it.
    fn fence_floor(&self, id: &str) -> Option<i64>;
    /// The longest job id the backend takes, in bytes (`None`: no limit short of memory).
    fn max_key_bytes(&self) -> Option<usize>;
    /// Everything the store keeps: every job with all its columns in enqueue order (SQLite's
    /// rowid, PostgreSQL's `seq`), every fence floor and every fence-gate entry (by key). The
    /// model-based tests compare this with the model after every step.
    fn stored(&self) -> Stored;
    /// The attempt ledger of `id`, by fence.
    fn attempts(&self, id: &str) -> Vec<AttemptRow>;
    /// The refused writes counted for `id`: `(fence, op, count)` by fence, then op.
    fn refusals(&self, id: &str) -> Vec<(i64, String, i64)>;
    /// The stored schedule `name`: `(cron, tz, queue, last_slot)`.
    fn schedule(&self, name: &str) -> Option<(String, String, String, i64)>;
    /// The audit log, oldest first.
    fn audit(&self) -> Vec<AuditRow>;

    /// A job leased by `owner` under `fence` until `until`, arranged directly in the store.
    fn leased(&self, id: &str, owner: &str, fence: i64, until: f64) -> Row {
        let row = Row {
            owner: Some(owner.into()),
            until,
            fence,
            ..Row::fresh(id)
        };
        self.put(&row);
        row
    }
}

impl Probe for Db {
    fn row(&self, id: &str) -> Option<Row> {
        Db::row(self, id)
    }
    fn rows(&self) -> Vec<Row> {
        Db::rows(self)
    }
    fn put(&self, row: &Row) {
        Db::put(self, row)
    }
    fn exec(&self, sql: &str) {
        self.raw().execute_batch(sql).expect("exec")
    }
    fn hold(&self, sql: &str) -> Box<dyn FnOnce() + Send> {
        let holder = self.raw();
        holder
            .execute_batch(&format!("BEGIN IMMEDIATE; {sql}"))
            .expect("hold");
        Box::new(move || holder.execute_batch("COMMIT").expect("commit"))
    }
    fn text_holds_nul(&self) -> bool {
        true
    }
    fn max_key_bytes(&self) -> Option<usize> {
        None
    }
    fn queue_row(&self, id: &str) -> QueueRow {
        self.raw()
            .query_row(
                "SELECT payload, priority, not_before, max_attempts, error, outcome, finished_at, \
                 attempts, queue, kind, unique_key FROM jobs WHERE id = ?1",
                [id],
                |r| {
                    Ok(QueueRow {
                        payload: r.get(0)?,
                        priority: r.get(1)?,
                        not_before: r.get(2)?,
                        max_attempts: r.get(3)?,
                        error: r.get(4)?,
                        outcome: r.get(5)?,
                        finished_at: r.get(6)?,
                        attempts: r.get(7)?,
                        queue: r.get(8)?,
                        kind: r.get(9)?,
                        unique_key: r.get(10)?,
                    })
                },
            )
            .unwrap()
    }
    fn paused(&self, queue: &str) -> Option<bool> {
        self.raw()
            .query_row(
                "SELECT paused <> 0 FROM queues WHERE name = ?1",
                [queue],
                |r| r.get(0),
            )
            .optional()
            .unwrap()
    }
    fn fence_gate(&self, resource: &str) -> Option<i64> {
        self.raw()
            .query_row(
                "SELECT fence FROM fence_gate WHERE resource = ?1",
                [resource],
                |r| r.get(0),
            )
            .ok()
    }
    fn fence_floor(&self, id: &str) -> Option<i64> {
        self.raw()
            .query_row("SELECT fence FROM fence_floor WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .ok()
    }
    fn stored(&self) -> Stored {
        sqlite_stored(&self.raw())
    }
    fn attempts(&self, id: &str) -> Vec<AttemptRow> {
        let conn = self.raw();
        let mut stmt = conn
            .prepare(
                "SELECT fence, owner, outcome, error, claimed_at IS NOT NULL, \
                        ended_at IS NOT NULL FROM attempts WHERE job_id = ?1 ORDER BY fence",
            )
            .unwrap();
        stmt.query_map([id], |r| {
            Ok(AttemptRow {
                fence: r.get(0)?,
                owner: r.get(1)?,
                outcome: r.get(2)?,
                error: r.get(3)?,
                claimed: r.get(4)?,
                ended: r.get(5)?,
            })
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }
    fn refusals(&self, id: &str) -> Vec<(i64, String, i64)> {
        let conn = self.raw();
        let mut stmt = conn
            .prepare("SELECT fence, op, count FROM refusals WHERE job_id = ?1 ORDER BY fence, op")
            .unwrap();
        stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }
    fn audit(&self) -> Vec<AuditRow> {
        let conn = self.raw();
        let mut stmt = conn
            .prepare("SELECT seq, at, actor, action, target, result FROM audit ORDER BY seq")
            .unwrap();
        stmt.query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }
    fn schedule(&self, name: &str) -> Option<(String, String, String, i64)> {
        self.raw()
            .query_row(
                "SELECT cron, tz, queue, last_slot FROM schedules WHERE name = ?1",
                [name],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .unwrap()
    }
}

/// `Probe::stored` through the given connection to an SQLite file.
pub fn sqlite_stored(conn: &Connection) -> Stored {
    let jobs = conn
        .prepare_cached(STORED_JOBS_SQLITE)
        .unwrap()
        .query_map([], |r| {
            Ok((
                Row {
                    id: r.get(0)?,
                    owner: r.get(1)?,
                    until: r.get(2)?,
                    fence: r.get(3)?,
                    result: r.get(4)?,
                    done: r.get(5)?,
                },
                QueueRow {
                    payload: r.get(6)?,
                    priority: r.get(7)?,
                    not_before: r.get(8)?,
                    max_attempts: r.get(9)?,
                    error: r.get(10)?,
                    outcome: r.get(11)?,
                    finished_at: r.get(12)?,
                    attempts: r.get(13)?,
                    queue: r.get(14)?,
                    kind: r.get(15)?,
                    unique_key: r.get(16)?,
                },
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let pairs = |sql: &str| -> Vec<(String, i64)> {
        conn.prepare_cached(sql)
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let ledger = conn
        .prepare_cached(
            "SELECT job_id, fence, owner, outcome, error FROM attempts ORDER BY job_id, fence",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let refusals = conn
        .prepare_cached("SELECT job_id, fence, op, count FROM refusals ORDER BY job_id, fence, op")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    Stored {
        jobs,
        fence_floor: pairs("SELECT id, fence FROM fence_floor ORDER BY id"),
        fence_gate: pairs("SELECT resource, fence FROM fence_gate ORDER BY resource"),
        ledger,
        refusals,
    }
}

/// Every column of `jobs` in enqueue order, for `Probe::stored`.
const STORED_JOBS_SQLITE: &str = "SELECT id, owner, until, fence, result, done, payload, \
     priority, not_before, max_attempts, error, outcome, finished_at, attempts, queue, kind, unique_key FROM jobs \
     ORDER BY rowid";

/// One attempt as `Stored` lists it: `(job id, fence, owner, outcome, error)`.
pub type LedgerRow = (String, i64, String, Option<String>, Option<String>);

/// Everything a store keeps, read independently (`Probe::stored`).
#[derive(Debug, PartialEq)]
pub struct Stored {
    /// Every job, in enqueue order: the six contract columns and the queue columns.
    pub jobs: Vec<(Row, QueueRow)>,
    /// `(id, fence)` of every fence floor, by id.
    pub fence_floor: Vec<(String, i64)>,
    /// `(resource, fence)` of every fence-gate entry, by resource.
    pub fence_gate: Vec<(String, i64)>,
    /// The attempt ledger: `(job id, fence, owner, outcome, error)` by job id, then fence.
    pub ledger: Vec<LedgerRow>,
    /// The refused writes: `(job id, fence, op, count)` by job id, fence, op.
    pub refusals: Vec<(String, i64, String, i64)>,
}

/// One row of the attempt ledger, read independently.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRow {
    pub fence: i64,
    pub owner: String,
    /// How it ended (`None`: open).
    pub outcome: Option<String>,
    pub error: Option<String>,
    /// Whether it has a claim time and an end time.
    pub claimed: bool,
    pub ended: bool,
}

impl AttemptRow {
    /// `(fence, owner, outcome)`, for compact assertions.
    pub fn brief(&self) -> (i64, &str, Option<&str>) {
        (self.fence, self.owner.as_str(), self.outcome.as_deref())
    }
}

/// The queue columns of one row, read independently.
#[derive(Debug, PartialEq)]
pub struct QueueRow {
    pub payload: Option<Vec<u8>>,
    pub priority: i64,
    pub not_before: f64,
    pub max_attempts: i64,
    pub error: Option<String>,
    pub outcome: Option<String>,
    pub finished_at: Option<f64>,
    /// Attempts spent: claims less the leases given back by `release`.
    pub attempts: i64,
    pub queue: String,
    pub kind: Option<String>,
    pub unique_key: Option<String>,
}

/// The PostgreSQL database the `pg` and `any_pg` configurations run against:
/// `LEASEFENCE_TEST_PG` (`host=127.0.0.1 user=postgres dbname=test`, or a `postgres://` URL).
/// Unset, the PostgreSQL cases are compiled as ignored (build.rs) and never get here; a direct
/// call prints why and returns `None` — except in CI (`CI` set), where that is a failure.
pub fn pg_url() -> Option<String> {
    match std::env::var("LEASEFENCE_TEST_PG") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI is set but LEASEFENCE_TEST_PG is not: the PostgreSQL cases must run in CI, \
             never skip (e.g. LEASEFENCE_TEST_PG='host=127.0.0.1 user=postgres dbname=test')"
        ),
        _ => {
            eprintln!("skipped: LEASEFENCE_TEST_PG is not set, so the PostgreSQL case did not run");
            None
        }
    }
}

/// A fresh, uniquely named schema in the test database, dropped afterwards; the PostgreSQL
/// counterpart of `Db`. `raw` is an independent connection.
pub struct PgDb {
    pub url: String,
    pub schema: String,
    raw: Mutex<leasefence::postgres::Client>,
}

impl PgDb {
    /// A fresh initialised schema, or `None` (with the reason printed) when no database is
    /// configured. A configured database that cannot be reached is a failure, never a skip.
    pub fn new() -> Option<PgDb> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let url = pg_url()?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "lf_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let raw = leasefence::postgres::Client::connect(&url, leasefence::postgres::NoTls)
            .unwrap_or_else(|e| panic!("LEASEFENCE_TEST_PG={url:?} is set but unreachable: {e}"));
        let db = PgDb {
            url,
            schema,
            raw: Mutex::new(raw),
        };
        drop(db.store());
        db.exec(&format!("SET search_path TO {}", db.schema));
        Some(db)
    }

    /// Options for a store on this schema.
    pub fn options(&self) -> PgOptions {
        PgOptions::new().schema(&self.schema).pool_size(4)
    }

    /// A store on this schema.
    pub fn store(&self) -> PgStore {
        self.options().open(&self.url).expect("open PgStore")
    }

    /// `Probe::hold`, also returning the backend pid of the holding connection.
    pub fn hold_with_pid(&self, sql: &str) -> (i32, Box<dyn FnOnce() + Send>) {
        let mut holder =
            leasefence::postgres::Client::connect(&self.url, leasefence::postgres::NoTls)
                .expect("holder connection");
        holder
            .batch_execute(&format!("SET search_path TO {}; BEGIN; {sql}", self.schema))
            .expect("hold");
        let pid: i32 = holder
            .query_one("SELECT pg_backend_pid()", &[])
            .expect("pid")
            .get(0);
        let commit = Box::new(move || holder.batch_execute("COMMIT").expect("commit"));
        (pid, commit)
    }

    /// The first column of every row `sql` returns, as `i64`.
    pub fn query_i64(&self, sql: &str) -> Vec<i64> {
        let rows = self.raw.lock().unwrap().query(sql, &[]).expect("query");
        rows.iter().map(|r| r.get(0)).collect()
    }

    /// The first column of every row `sql` returns, as text.
    pub fn query_strings(&self, sql: &str) -> Vec<String> {
        let rows = self.raw.lock().unwrap().query(sql, &[]).expect("query");
        rows.iter().map(|r| r.get(0)).collect()
    }

    /// The database's clock, read on the independent connection: seconds since the Unix epoch.
    pub fn server_now(&self) -> f64 {
        self.raw
            .lock()
            .unwrap()
            .query_one("SELECT extract(epoch from clock_timestamp())::float8", &[])
            .expect("server clock")
            .get(0)
    }

    /// Waits until some session is blocked by the backend `holder` (see `await_blocked_by`).
    #[track_caller]
    pub fn await_blocked_by(&self, holder: i32) {
        await_blocked_by(&mut self.raw.lock().unwrap(), holder)
    }

    /// The plan of `sql`, with sequential scans discouraged so that the chosen index shows on
    /// an almost empty table.
    pub fn explain(&self, sql: &str) -> String {
        let mut raw = self.raw.lock().unwrap();
        let mut tx = raw.transaction().unwrap();
        tx.batch_execute("SET LOCAL enable_seqscan = off").unwrap();
        let rows = tx.query(&format!("EXPLAIN {sql}"), &[]).expect("explain");
        rows.iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn read(
        &self,
        sql: &str,
        params: &[&(dyn leasefence::postgres::types::ToSql + Sync)],
    ) -> Vec<Row> {
        let rows = self
            .raw
            .lock()
            .unwrap()
            .query(sql, params)
            .expect("read rows");
        rows.iter()
            .map(|r| Row {
                id: r.get(0),
                owner: r.get(1),
                until: r.get(2),
                fence: r.get(3),
                result: r.get(4),
                done: i64::from(r.get::<_, i32>(5)),
            })
            .collect()
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if let Ok(mut raw) = self.raw.lock() {
            let _ = raw.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}

impl Probe for PgDb {
    fn row(&self, id: &str) -> Option<Row> {
        self.read(
            "SELECT id, owner, until, fence, result, done FROM jobs WHERE id = $1",
            &[&id],
        )
        .pop()
    }
    fn rows(&self) -> Vec<Row> {
        self.read(
            "SELECT id, owner, until, fence, result, done FROM jobs ORDER BY id COLLATE \"C\"",
            &[],
        )
    }
    fn put(&self, row: &Row) {
        let done = i32::try_from(row.done).unwrap();
        self.raw
            .lock()
            .unwrap()
            .execute(
                "INSERT INTO jobs (id, owner, until, fence, result, done) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (id) DO UPDATE SET owner = $2, until = $3, fence = $4, \
                 result = $5, done = $6",
                &[
                    &row.id,
                    &row.owner,
                    &row.until,
                    &row.fence,
                    &row.result,
                    &done,
                ],
            )
            .expect("arrange row");
    }
    fn exec(&self, sql: &str) {
        self.raw.lock().unwrap().batch_execute(sql).expect("exec")
    }
    fn hold(&self, sql: &str) -> Box<dyn FnOnce() + Send> {
        self.hold_with_pid(sql).1
    }
    fn hold_until_waited(&self, sql: &str) -> Box<dyn FnOnce() + Send> {
        let (pid, commit) = self.hold_with_pid(sql);
        let mut watcher =
            leasefence::postgres::Client::connect(&self.url, leasefence::postgres::NoTls)
                .expect("watcher connection");
        Box::new(move || {
            await_blocked_by(&mut watcher, pid);
            commit()
        })
    }
    fn text_holds_nul(&self) -> bool {
        false
    }
    fn max_key_bytes(&self) -> Option<usize> {
        Some(PgStore::MAX_KEY_BYTES)
    }
    fn queue_row(&self, id: &str) -> QueueRow {
        let r = self
            .raw
            .lock()
            .unwrap()
            .query_one(
                "SELECT payload, priority, not_before, max_attempts, error, outcome, finished_at, \
                 attempts, queue, kind, unique_key FROM jobs WHERE id = $1",
                &[&id],
            )
            .expect("queue row");
        QueueRow {
            payload: r.get(0),
            priority: r.get(1),
            not_before: r.get(2),
            max_attempts: r.get(3),
            error: r.get(4),
            outcome: r.get(5),
            finished_at: r.get(6),
            attempts: r.get(7),
            queue: r.get(8),
            kind: r.get(9),
            unique_key: r.get(10),
        }
    }
    fn paused(&self, queue: &str) -> Option<bool> {
        self.raw
            .lock()
            .unwrap()
            .query_opt("SELECT paused FROM queues WHERE name = $1", &[&queue])
            .expect("paused")
            .map(|r| r.get(0))
    }
    fn fence_gate(&self, resource: &str) -> Option<i64> {
        self.raw
            .lock()
            .unwrap()
            .query_opt(
                "SELECT fence FROM fence_gate WHERE resource = $1",
                &[&resource],
            )
            .expect("fence gate")
            .map(|r| r.get(0))
    }
    fn fence_floor(&self, id: &str) -> Option<i64> {
        self.raw
            .lock()
            .unwrap()
            .query_opt("SELECT fence FROM fence_floor WHERE id = $1", &[&id])
            .expect("fence floor")
            .map(|r| r.get(0))
    }
    fn attempts(&self, id: &str) -> Vec<AttemptRow> {
        self.raw
            .lock()
            .unwrap()
            .query(
                "SELECT fence, owner, outcome, error, claimed_at IS NOT NULL, \
                        ended_at IS NOT NULL FROM attempts WHERE job_id = $1 ORDER BY fence",
                &[&id],
            )
            .expect("attempts")
            .iter()
            .map(|r| AttemptRow {
                fence: r.get(0),
                owner: r.get(1),
                outcome: r.get(2),
                error: r.get(3),
                claimed: r.get(4),
                ended: r.get(5),
            })
            .collect()
    }
    fn refusals(&self, id: &str) -> Vec<(i64, String, i64)> {
        self.raw
            .lock()
            .unwrap()
            .query(
                "SELECT fence, op, count FROM refusals WHERE job_id = $1 ORDER BY fence, op",
                &[&id],
            )
            .expect("refusals")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    }
    fn audit(&self) -> Vec<AuditRow> {
        self.raw
            .lock()
            .unwrap()
            .query(
                "SELECT seq, at, actor, action, target, result FROM audit ORDER BY seq",
                &[],
            )
            .expect("audit")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
            .collect()
    }
    fn schedule(&self, name: &str) -> Option<(String, String, String, i64)> {
        self.raw
            .lock()
            .unwrap()
            .query_opt(
                "SELECT cron, tz, queue, last_slot FROM schedules WHERE name = $1",
                &[&name],
            )
            .expect("schedule")
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    }
    fn stored(&self) -> Stored {
        let mut raw = self.raw.lock().unwrap();
        let jobs = raw
            .query(
                "SELECT id, owner, until, fence, result, done, payload, priority, not_before, \
                 max_attempts, error, outcome, finished_at, attempts, queue, kind, unique_key \
                 FROM jobs ORDER BY seq",
                &[],
            )
            .expect("stored jobs")
            .iter()
            .map(|r| {
                (
                    Row {
                        id: r.get(0),
                        owner: r.get(1),
                        until: r.get(2),
                        fence: r.get(3),
                        result: r.get(4),
                        done: i64::from(r.get::<_, i32>(5)),
                    },
                    QueueRow {
                        payload: r.get(6),
                        priority: r.get(7),
                        not_before: r.get(8),
                        max_attempts: r.get(9),
                        error: r.get(10),
                        outcome: r.get(11),
                        finished_at: r.get(12),
                        attempts: r.get(13),
                        queue: r.get(14),
                        kind: r.get(15),
                        unique_key: r.get(16),
                    },
                )
            })
            .collect();
        let mut pairs = |sql: &str| -> Vec<(String, i64)> {
            raw.query(sql, &[])
                .expect("stored pairs")
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect()
        };
        let fence_floor = pairs("SELECT id, fence FROM fence_floor ORDER BY id COLLATE \"C\"");
        let fence_gate =
            pairs("SELECT resource, fence FROM fence_gate ORDER BY resource COLLATE \"C\"");
        let ledger = raw
            .query(
                "SELECT job_id, fence, owner, outcome, error FROM attempts \
                 ORDER BY job_id COLLATE \"C\", fence",
                &[],
            )
            .expect("stored ledger")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect();
        let refusals = raw
            .query(
                "SELECT job_id, fence, op, count FROM refusals \
                 ORDER BY job_id COLLATE \"C\", fence, op COLLATE \"C\"",
                &[],
            )
            .expect("stored refusals")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        Stored {
            jobs,
            fence_floor,
            fence_gate,
            ledger,
            refusals,
        }
    }
}

/// Waits until some session is blocked by the backend `holder` (`pg_blocking_pids`): the
/// condition a test of a lock waits for, instead of sleeping. Panics after 10 s.
#[track_caller]
pub fn await_blocked_by(client: &mut leasefence::postgres::Client, holder: i32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let blocked: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&holder],
            )
            .expect("pg_blocking_pids")
            .get(0);
        if blocked > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no session waited for backend {holder}'s locks within 10 s"
        );
        std::thread::yield_now();
    }
}

/// Runs the stock `sqlite3` shell on `path` and returns its standard output.
pub fn sqlite3(path: &Path, sql: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(path)
        .arg(sql)
        .output()
        .expect("the stock sqlite3 shell must be installed (apt-get install sqlite3)");
    assert!(
        out.status.success(),
        "sqlite3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Asserts that `result` is an invalid-argument error naming `argument`, in its accessor and in
/// its message.
#[track_caller]
pub fn assert_invalid<T: std::fmt::Debug>(result: Result<T, Error>, argument: &str) {
    match result {
        Err(e @ Error::InvalidArgument { .. }) => {
            assert_eq!(e.argument(), Some(argument), "{e}");
            assert!(
                e.to_string().contains(&format!("`{argument}`")),
                "message must name `{argument}`: {e}"
            );
            assert!(!e.is_retryable());
        }
        other => panic!("expected invalid argument `{argument}`, got {other:?}"),
    }
}

/// The contract's operations on one path, as one configuration of the code under test sees
/// them. Every contract case runs once per implementation.
pub trait Api {
    fn enqueue(&self, id: &str) -> Result<bool, Error>;
    fn state(&self, id: &str) -> Result<Option<JobState>, Error>;
    fn claim(&self, id: &str, owner: &str, now: f64, ttl: f64) -> Result<Option<i64>, Error>;
    fn renew(&self, id: &str, owner: &str, fence: i64, now: f64, ttl: f64) -> Result<bool, Error>;
    fn complete(
        &self,
        id: &str,
        owner: &str,
        fence: i64,
        now: f64,
        result: &str,
    ) -> Result<bool, Error>;
    fn release(&self, id: &str, owner: &str, fence: i64) -> Result<bool, Error>;
}

/// The seed's free functions: one connection per call.
pub struct Seed(pub PathBuf);

impl Api for Seed {
    fn enqueue(&self, id: &str) -> Result<bool, Error> {
        leasefence::enqueue(&self.0, id)
    }
    fn state(&self, id: &str) -> Result<Option<JobState>, Error> {
        leasefence::state(&self.0, id)
    }
    fn claim(&self, id: &str, owner: &str, now: f64, ttl: f64) -> Result<Option<i64>, Error> {
        leasefence::claim(&self.0, id, owner, now, ttl)
    }
    fn renew(&self, id: &str, owner: &str, fence: i64, now: f64, ttl: f64) -> Result<bool, Error> {
        leasefence::renew(&self.0, id, owner, fence, now, ttl)
    }
    fn complete(
        &self,
        id: &str,
        owner: &str,
        fence: i64,
        now: f64,
        result: &str,
    ) -> Result<bool, Error> {
        leasefence::complete(&self.0, id, owner, fence, now, result)
    }
    fn release(&self, id: &str, owner: &str, fence: i64) -> Result<bool, Error> {
        leasefence::release(&self.0, id, owner, fence)
    }
}

/// A kept store — an `SqliteStore` (one connection, cached statements) or a `PgStore` (a
/// pool) — as a long-running worker uses it.
pub struct Kept<S: Store>(pub S);

impl<S: Store> Api for Kept<S> {
    fn enqueue(&self, id: &str) -> Result<bool, Error> {
        self.0.enqueue(JobId::new(id)?)
    }
    fn state(&self, id: &str) -> Result<Option<JobState>, Error> {
        self.0.state(JobId::new(id)?)
    }
    fn claim(&self, id: &str, owner: &str, now: f64, ttl: f64) -> Result<Option<i64>, Error> {
        claim_by_name(&self.0, id, owner, now, ttl)
    }
    fn renew(&self, id: &str, owner: &str, fence: i64, now: f64, ttl: f64) -> Result<bool, Error> {
        self.0.renew(
            JobId::new(id)?,
            Owner::new(owner)?,
            fence,
            Now::new(now)?,
            Ttl::new(ttl)?,
        )
    }
    fn complete(
        &self,
        id: &str,
        owner: &str,
        fence: i64,
        now: f64,
        result: &str,
    ) -> Result<bool, Error> {
        self.0.complete(
            JobId::new(id)?,
            Owner::new(owner)?,
            fence,
            Now::new(now)?,
            result,
        )
    }
    fn release(&self, id: &str, owner: &str, fence: i64) -> Result<bool, Error> {
        self.0.release(JobId::new(id)?, Owner::new(owner)?, fence)
    }
}

/// `LEASEFENCE_TEST_PG` as a URL: `AnyStore` recognises PostgreSQL by its URL only.
pub fn as_url(conn: &str) -> String {
    if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        return conn.to_owned();
    }
    let get = |key: &str| {
        conn.split_whitespace()
            .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
    };
    let user = get("user").map_or(String::new(), |u| match get("password") {
        Some(p) => format!("{u}:{p}@"),
        None => format!("{u}@"),
    });
    let port = get("port").map_or(String::new(), |p| format!(":{p}"));
    format!(
        "postgres://{user}{}{port}/{}",
        get("host").unwrap_or("localhost"),
        get("dbname").unwrap_or("")
    )
}

impl PgDb {
    /// An `AnyStore` on this schema, opened from a `postgres://` URL as the CLI opens one.
    pub fn any_store(&self, options: PgOptions) -> AnyStore {
        let store = AnyOptions::new()
            .postgres(options)
            .open(&as_url(&self.url))
            .expect("open AnyStore on PostgreSQL");
        assert_eq!(store.backend(), "postgres");
        store
    }
}

impl Db {
    /// An `AnyStore` on this file, opened from its path as the CLI opens one.
    pub fn any_store(&self) -> AnyStore {
        let store = AnyStore::open(self.path.to_str().expect("utf-8 path")).expect("open AnyStore");
        assert_eq!(store.backend(), "sqlite");
        store
    }
}

/// The backends every shared case runs on, one function each; `backends!` lists them once.
/// A case gets the operations as `Api`, the stored state through an independent `Probe`, and
/// the kept store itself (for the queue operations). Adding a backend: one function here and
/// one line in `backends!`.
pub mod on {
    use super::*;

    /// The seed's free functions (a connection per call) as `Api`; a kept `SqliteStore` on the
    /// same file as the store.
    pub fn seed(case: impl FnOnce(&dyn Api, &Db, &dyn Viewed)) {
        let db = Db::new();
        let store = SqliteStore::open(&db.path).expect("open store");
        case(&Seed(db.path.clone()), &db, &store);
    }

    /// One `SqliteStore` kept across calls.
    pub fn kept(case: impl FnOnce(&dyn Api, &Db, &dyn Viewed)) {
        let db = Db::new();
        let api = Kept(SqliteStore::open(&db.path).expect("open store"));
        case(&api, &db, &api.0);
    }

    /// `AnyStore` opened from the file's path: every call goes through its forwarding.
    pub fn any_sqlite(case: impl FnOnce(&dyn Api, &Db, &dyn Viewed)) {
        let db = Db::new();
        let api = Kept(db.any_store());
        case(&api, &db, &api.0);
    }

    /// One `PgStore` on a fresh schema.
    pub fn pg(case: impl FnOnce(&dyn Api, &PgDb, &dyn Viewed)) {
        let Some(db) = PgDb::new() else { return };
        let api = Kept(db.store());
        case(&api, &db, &api.0);
    }

    /// `AnyStore` opened from a `postgres://` URL on a fresh schema.
    pub fn any_pg(case: impl FnOnce(&dyn Api, &PgDb, &dyn Viewed)) {
        let Some(db) = PgDb::new() else { return };
        let api = Kept(db.any_store(db.options()));
        case(&api, &db, &api.0);
    }
}

/// The one list of backends: a `#[test]` per backend, each running `$run` (a closure taking
/// `(&dyn Api, &Db or &PgDb, &dyn Viewed)`). `sqlite` lists the SQLite backends, `all` every
/// backend; the PostgreSQL ones are reported as ignored when `LEASEFENCE_TEST_PG` is unset.
macro_rules! backends {
    (sqlite $run:expr) => {
        #[test]
        fn seed() {
            crate::common::on::seed($run)
        }
        #[test]
        fn kept() {
            crate::common::on::kept($run)
        }
        #[test]
        fn any_sqlite() {
            crate::common::on::any_sqlite($run)
        }
    };
    (all $run:expr) => {
        crate::common::backends!(sqlite $run);
        #[test]
        #[cfg_attr(not(leasefence_pg), ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case")]
        fn pg() {
            crate::common::on::pg($run)
        }
        #[test]
        #[cfg_attr(not(leasefence_pg), ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case")]
        fn any_pg() {
            crate::common::on::any_pg($run)
        }
    };
}
pub(crate) use backends;

/// Defines a shared case once and runs it on every backend of `backends!`: `seed` (free
/// functions, a connection per call), `kept` (one `SqliteStore`), `any_sqlite` (`AnyStore` on
/// a path), `pg` (one `PgStore` on a fresh schema) and `any_pg` (`AnyStore` on a URL). The body
/// sees the stored state only through `Probe`; the three-argument form also gets the kept
/// store for the queue operations.
///
/// A case that needs SQLite itself (its file, a trigger) is marked `sqlite_only`; its body
/// gets the `Db` and runs on the SQLite backends.
///
/// ```ignore
/// contract!(fn refuses_a_stale_fence(api, db) { ... });
/// contract!(fn claim_next_skips_a_leased_job(api, db, s) { ... });
/// contract!(sqlite_only fn rolls_back_on_a_trigger_error(api, db) { ... });
/// ```
macro_rules! contract {
    (sqlite_only $(#[$meta:meta])* fn $name:ident($api:ident, $db:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use crate::common::*;

            fn case($api: &dyn Api, $db: &Db) $body

            crate::common::backends!(sqlite |api, db, _store| case(api, db));
        }
    };
    (viewed $(#[$meta:meta])* fn $name:ident($api:ident, $db:ident, $s:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use crate::common::*;

            #[allow(unused_variables)]
            fn case($api: &dyn Api, $db: &dyn Probe, $s: &dyn Viewed) $body

            crate::common::backends!(all |api, db, store| case(api, db, store));
        }
    };
    ($(#[$meta:meta])* fn $name:ident($api:ident, $db:ident) $body:block) => {
        crate::common::contract!($(#[$meta])* fn $name($api, $db, _store) $body);
    };
    ($(#[$meta:meta])* fn $name:ident($api:ident, $db:ident, $s:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use crate::common::*;

            #[allow(unused_variables)]
            fn case($api: &dyn Api, $db: &dyn Probe, $s: &dyn leasefence::Store) $body

            crate::common::backends!(all |api, db, store| case(api, db, store));
        }
    };
}
pub(crate) use contract;

/// Shorthands for the validated argument types.
pub fn now(t: f64) -> Now {
    Now::new(t).unwrap()
}
pub fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}
pub fn owner(o: &str) -> Owner<'_> {
    Owner::new(o).unwrap()
}
pub fn job(id: &str) -> NewJob {
    NewJob::new(id).unwrap()
}
pub fn ids(leases: &[Lease]) -> Vec<&str> {
    leases.iter().map(|l| l.job_id.as_str()).collect()
}
/// A kept `SqliteStore` on `db`.
pub fn open(db: &Db) -> SqliteStore {
    SqliteStore::open(&db.path).unwrap()
}

/// `Store::claim` as the fence it handed out. Every test that calls a store's `claim` goes
/// through `claim_fence` (typed arguments) or `claim_by_name` (strings), so a change of its
/// return type is adapted here, in one place.
pub trait ClaimFence {
    fn claim_fence(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<i64>, Error>;
}

impl<S: Store + ?Sized> ClaimFence for S {
    fn claim_fence(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<i64>, Error> {
        Ok(self
            .claim(job_id, owner, now, ttl)?
            .map(|lease| lease.fence))
    }
}

/// `claim_fence` with the arguments as plain values, validated here.
pub fn claim_by_name(
    store: &dyn Store,
    id: &str,
    owner: &str,
    now: f64,
    ttl: f64,
) -> Result<Option<i64>, Error> {
    store.claim_fence(
        JobId::new(id)?,
        Owner::new(owner)?,
        Now::new(now)?,
        Ttl::new(ttl)?,
    )
}

/// A lease as `claim_next` would have handed it out for a row arranged directly.
pub fn lease_of(id: &str, owner: &str, fence: i64, until: f64) -> Lease {
    Lease {
        job_id: id.into(),
        queue: leasefence::DEFAULT_QUEUE.to_owned(),
        kind: None,
        owner: owner.into(),
        fence,
        until,
        payload: None,
        priority: 0,
        max_attempts: 0,
        last_error: None,
        attempt: u32::try_from(fence).unwrap_or(0),
    }
}

/// A batch size for `claim_batch`; panics on 0 (the invalid size is tested through
/// `BatchSize::new` itself, in `seam` and `claim_batch`).
pub fn bs(n: usize) -> leasefence::BatchSize {
    leasefence::BatchSize::new(n).expect("a batch size of at least 1")
}

/// A fence-gate resource name for `admit`; panics on an empty name (tested through
/// `Resource::new` itself).
pub fn res(name: &str) -> leasefence::Resource<'_> {
    leasefence::Resource::new(name).expect("a non-empty resource name")
}
