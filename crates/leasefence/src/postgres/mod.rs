//! The shared backend: PostgreSQL, for workers on many hosts (feature `postgres`).
//!
//! The same contract as the SQLite backend, with the same SQL file names. Atomicity comes from
//! single statements, not from SERIALIZABLE: every guarded write is one `UPDATE` whose `WHERE`
//! carries owner, fence, `done` and the lease check, so under READ COMMITTED a concurrent
//! writer waits for the row lock and then re-checks that `WHERE` on the row as the winner left
//! it. `claim_next` picks rows with `FOR UPDATE SKIP LOCKED`. Every session runs with
//! `synchronous_commit = on`.

use std::sync::LazyLock;
use std::time::Duration;

use postgres::Config;
use postgres::error::SqlState;
use r2d2::{Pool, PooledConnection};

mod pool;
use pool::Manager;

use crate::error::{BackendError, Error, Result};
use crate::store::Store;
use crate::types::{
    Backoff, Failed, Fence, JobId, JobInfo, JobState, Lease, NewJob, Now, Owner, Stats, Status,
    Ttl, batch_size, resource,
};

/// The schema, one numbered migration per step, recorded in `schema_migrations` of the store's
/// schema. Every migration is idempotent.
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
const COMPLETE_BATCH: &str = include_str!("sql/complete_batch.sql");
const RELEASE: &str = include_str!("sql/release.sql");
const CLAIM_NEXT: &str = include_str!("sql/claim_next.sql");
const FAIL: &str = include_str!("sql/fail.sql");
const CANCEL: &str = include_str!("sql/cancel.sql");
const PURGE: &str = include_str!("sql/purge.sql");
const ADMIT: &str = include_str!("sql/admit.sql");
/// The database's clock: seconds since the Unix epoch on the server.
const CLOCK: &str = "SELECT extract(epoch FROM clock_timestamp())::float8";
const STATUS: &str = include_str!("sql/status.sql");
/// Serialises `enqueue` and `purge` per job id (PostgreSQL-only; SQLite serialises all writers).
/// Without it, under READ COMMITTED an enqueue whose snapshot predates a concurrent purge's
/// commit would read no fence floor, wait for the purge to delete the old row, and insert the
/// id from an older floor: a fence handed out again. Taking the id's lock first, in its own
/// statement, makes the insert's snapshot see the purge's floor. Keys in a fixed order: no
/// deadlocks between batches.
///
/// The locks are per bucket of ids (256 of them, by hash: `& 255`), not per id: a
/// transaction can hold only so many locks (PostgreSQL's shared lock table, sized by
/// `max_locks_per_transaction`), and one lock per id made an `enqueue_many` of 20,000 jobs
/// fail with "out of shared memory". Ids sharing a bucket only wait for each other.
const LOCK_IDS: &str = "SELECT pg_advisory_xact_lock(hashtext($1), k) \
     FROM (SELECT DISTINCT hashtext(id) & 255 AS k FROM unnest($2::text[]) AS id ORDER BY 1) \
     AS keys";
/// The ids a purge would delete, to lock before deleting them.
const PURGEABLE: &str = "SELECT id FROM jobs WHERE done = 1 AND finished_at < $1";
static LIST: LazyLock<String> =
    LazyLock::new(|| include_str!("sql/list.sql").replace("{status}", STATUS));
static STATS: LazyLock<String> =
    LazyLock::new(|| include_str!("sql/stats.sql").replace("{status}", STATUS));

type Conn = PooledConnection<Manager>;

/// Options for opening a [`PgStore`]. The defaults are the durable ones.
///
/// ```no_run
/// # fn main() -> Result<(), leasefence::Error> {
/// use std::time::Duration;
/// use leasefence::PgOptions;
///
/// let store = PgOptions::new()
///     .schema("billing_jobs")
///     .pool_size(8)
///     .lock_timeout(Duration::from_secs(1))
///     .open("host=127.0.0.1 user=postgres dbname=test")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PgOptions {
    schema: String,
    pool_size: u32,
    connect_timeout: Duration,
    lock_timeout: Duration,
    database_clock: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "leasefence".into(),
            pool_size: 8,
            connect_timeout: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(5),
            database_clock: false,
        }
    }
}

impl PgOptions {
    /// The defaults: schema `leasefence`, a pool of 8 connections, 5 s to connect, 5 s lock
    /// timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// The schema that holds the store's tables (default `leasefence`); created if absent. A
    /// lower-case SQL identifier: letters, digits and `_`, not starting with a digit, at most
    /// 63 bytes.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The largest number of connections the store keeps open (default 8).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How long `open` and every call wait for a connection before failing with
    /// [`Error::CannotConnect`] (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a statement waits for a row lock held by another transaction before it fails
    /// with [`Error::Busy`] (PostgreSQL's `lock_timeout`; default 5 s).
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Whether operations take `now` from the database instead of the caller (default `false`:
    /// the caller's clock, as on SQLite).
    ///
    /// With the database clock, every operation that judges a lease (`claim`, `renew`,
    /// `complete`, `claim_next`/`claim_batch`, `fail`, `cancel`, `list`, `stats`) ignores its
    /// `now` argument and reads PostgreSQL's `extract(epoch from clock_timestamp())` — seconds
    /// since the Unix epoch on the server's clock — at the start of the call, so workers on
    /// hosts whose clocks disagree still agree on when a lease expires. Absolute times the
    /// caller passes (`retry_at`, `not_before`, `purge`'s cutoff) must then be on that clock
    /// too; [`PgStore::now`] reads it.
    pub fn database_clock(mut self, on: bool) -> Self {
        self.database_clock = on;
        self
    }

    /// Connects to the database described by `url` (a `postgres://…` URL or `key=value`
    /// pairs, as libpq takes them), creates the schema and its tables if absent and applies
    /// the migrations not applied yet.
    ///
    /// Initialising is idempotent and safe to run from many processes at once: it runs in one
    /// transaction under a transaction-scoped advisory lock, and never touches a row.
    ///
    /// # Errors
    /// - [`Error::InvalidArgument`] naming `url` when it does not parse, or `schema` when the
    ///   schema name is not a plain identifier.
    /// - [`Error::CannotConnect`] when no connection could be made within the connect timeout.
    /// - [`Error::Busy`] or [`Error::Backend`] for lock contention or other database failures.
    pub fn open(&self, url: &str) -> Result<PgStore> {
        let schema = schema_name(&self.schema)?;
        let mut config: Config = url.parse().map_err(|e| {
            Error::invalid("url", format!("not a PostgreSQL connection string: {e}"))
        })?;
        config.connect_timeout(self.connect_timeout);
        let target = describe(&config);
        let manager = Manager {
            config,
            setup: format!(
                "SET search_path TO \"{schema}\"; SET synchronous_commit TO on; \
                 SET lock_timeout TO {}",
                self.lock_timeout.as_millis().max(1)
            ),
        };
        let pool = Pool::builder()
            .max_size(self.pool_size)
            .min_idle(Some(0))
            .connection_timeout(self.connect_timeout)
            .build_unchecked(manager);
        let store = PgStore {
            pool,
            schema: schema.to_owned(),
            target,
            database_clock: self.database_clock,
        };
        store.migrate()?;
        Ok(store)
    }
}

/// A store on a PostgreSQL database, shared by workers on many hosts. Holds a pool of
/// connections, so one `PgStore` may be shared by many threads (it is `Send + Sync`).
///
/// ```no_run
/// # fn main() -> Result<(), leasefence::Error> {
/// use leasefence::{JobId, Now, Owner, PgStore, Store, Ttl};
///
/// let store = PgStore::open("postgres://postgres@127.0.0.1/test")?;
/// let job = JobId::new("thumbnail-7")?;
/// let me = Owner::new("worker-a")?;
/// store.enqueue(job)?;
/// let fence = store.claim(job, me, Now::new(100.0)?, Ttl::new(30.0)?)?.expect("claimable");
/// assert!(store.complete(job, me, fence, Now::new(110.0)?, "done")?);
/// # Ok(()) }
/// ```
pub struct PgStore {
    pool: Pool<Manager>,
    schema: String,
    target: String,
    database_clock: bool,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .field("schema", &self.schema)
            .field("database_clock", &self.database_clock)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// The longest job id or fence-gate resource name this backend takes, in bytes; longer
    /// ones are refused as invalid arguments. They are primary keys, and a PostgreSQL B-tree
    /// entry must fit in a third of a page (2704 bytes). SQLite has no such limit.
    pub const MAX_KEY_BYTES: usize = 2048;

    /// Connects with the default [`PgOptions`] (schema `leasefence`) and initialises the
    /// schema if needed.
    ///
    /// # Errors
    /// As [`PgOptions::open`].
    pub fn open(url: &str) -> Result<Self> {
        PgOptions::new().open(url)
    }

    /// The schema that holds this store's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The database's clock: `extract(epoch from clock_timestamp())`, seconds since the Unix
    /// epoch on the server. The clock every operation uses when the store was opened with
    /// [`PgOptions::database_clock`].
    ///
    /// # Errors
    /// Connection or backend failures.
    pub fn now(&self) -> Result<Now> {
        let mut conn = self.conn()?;
        let statement = conn.prepared(CLOCK).map_err(|e| self.err(e))?;
        let seconds: f64 = conn
            .query_one(&statement, &[])
            .map_err(|e| self.err(e))?
            .get(0);
        Now::new(seconds)
    }

    /// Whether operations read `now` from the database (see [`PgOptions::database_clock`]).
    pub fn uses_database_clock(&self) -> bool {
        self.database_clock
    }

    /// The clock reading an operation judges by: the caller's, or the database's.
    fn clock(&self, given: Now) -> Result<Now> {
        if self.database_clock {
            self.now()
        } else {
            Ok(given)
        }
    }

    /// Completes `lease` and runs the caller's own writes in the **same transaction** as the
    /// fence check, so they commit only if the lease is still current.
    ///
    /// The guarded `complete` runs first. If the lease is no longer current, `write` is not
    /// called and `Ok(None)` is returned. Otherwise `write` gets the open transaction; if it
    /// returns `Ok(t)`, everything commits together and `Ok(Some(t))` is returned; if it
    /// returns `Err(e)`, everything — the completion included — is rolled back and `Err(e)` is
    /// returned. The completed row stays locked until the commit, so no other writer can
    /// change it in between.
    ///
    /// `write` must not commit or roll back the transaction itself.
    ///
    /// # Errors
    /// Busy, connection or backend failures converted into `E`, or `write`'s own error.
    pub fn complete_with<T, E>(
        &self,
        lease: &Lease,
        now: Now,
        result: &str,
        write: impl FnOnce(&mut postgres::Transaction<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<Option<T>, E>
    where
        E: From<Error>,
    {
        text("result", result)?;
        let now = self.clock(now)?;
        let mut conn = self.conn()?;
        let complete = conn.prepared(COMPLETE).map_err(|e| self.err(e))?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let changed = tx
            .execute(
                &complete,
                &[
                    &lease.job_id,
                    &lease.owner,
                    &lease.fence,
                    &now.seconds(),
                    &result,
                ],
            )
            .map_err(|e| self.err(e))?;
        if changed != 1 {
            return Ok(None);
        }
        let value = write(&mut tx)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(value))
    }

    fn conn(&self) -> Result<Conn> {
        self.pool.get().map_err(|e| Error::CannotConnect {
            target: self.target.clone(),
            source: BackendError::new(e),
        })
    }

    fn err(&self, e: postgres::Error) -> Error {
        map_error(&self.target, e)
    }

    /// Brings the schema up to the latest migration, in one transaction under an advisory lock
    /// (so concurrent starts do not race). Only adds tables, columns and indexes.
    fn migrate(&self) -> Result<()> {
        let mut conn = self.conn()?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let key = format!("leasefence.migrate.{}", self.schema);
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1)::bigint)",
            &[&key],
        )
        .map_err(|e| self.err(e))?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
             CREATE TABLE IF NOT EXISTS \"{schema}\".schema_migrations (
                 version    INTEGER PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
            schema = self.schema
        ))
        .map_err(|e| self.err(e))?;
        let applied: i32 = tx
            .query_one(
                "SELECT coalesce(max(version), 0) FROM schema_migrations",
                &[],
            )
            .map_err(|e| self.err(e))?
            .get(0);
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            let version = index as i32 + 1;
            if version <= applied {
                continue;
            }
            tx.batch_execute(migration).map_err(|e| self.err(e))?;
            tx.execute(
                "INSERT INTO schema_migrations (version) VALUES ($1)",
                &[&version],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// `renew` at a clock reading already resolved by [`PgStore::clock`].
    fn renew_at(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool> {
        let until = ttl.until(now)?;
        self.write_one(
            RENEW,
            &[
                &key("job_id", job_id.as_str())?,
                &text("owner", owner.as_str())?,
                &fence,
                &now.seconds(),
                &until,
            ],
        )
    }

    /// Takes the transaction-scoped per-id locks of [`LOCK_IDS`].
    fn lock_ids(&self, tx: &mut postgres::Transaction<'_>, ids: &[&str]) -> Result<()> {
        let space = format!("leasefence.ids.{}", self.schema);
        tx.execute(LOCK_IDS, &[&space, &ids])
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Runs one guarded write statement and reports whether it changed exactly one row.
    fn write_one(
        &self,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<bool> {
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql).map_err(|e| self.err(e))?;
        let changed = conn.execute(&statement, params).map_err(|e| self.err(e))?;
        Ok(changed == 1)
    }
}

/// A schema name that can be spliced into SQL as a quoted identifier.
fn schema_name(schema: &str) -> Result<&str> {
    let mut chars = schema.chars();
    let plain = matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && schema.len() <= 63;
    if plain {
        Ok(schema)
    } else {
        Err(Error::invalid(
            "schema",
            format!(
                "must be a lower-case identifier (a-z, 0-9, _; not starting with a digit; at \
                 most 63 bytes), got {schema:?}"
            ),
        ))
    }
}

/// Where a config points, without its password.
fn describe(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    format!(
        "host={} port={} user={} dbname={}",
        if hosts.is_empty() {
            "localhost".into()
        } else {
            hosts.join(",")
        },
        if ports.is_empty() {
            "5432".into()
        } else {
            ports.join(",")
        },
        config.get_user().unwrap_or("?"),
        config.get_dbname().unwrap_or("?"),
    )
}

/// PostgreSQL `text` cannot hold a NUL byte (SQLite's can): such a value is refused as an
/// invalid argument before anything is sent, instead of surfacing as an encoding error.
fn text<'a>(argument: &'static str, value: &'a str) -> Result<&'a str> {
    if value.contains('\0') {
        Err(Error::invalid(
            argument,
            "contains a NUL byte, which PostgreSQL text cannot store",
        ))
    } else {
        Ok(value)
    }
}

/// A primary-key value (`job_id`, `resource`): [`text`], and at most
/// [`PgStore::MAX_KEY_BYTES`] long, refused as an invalid argument instead of failing in the
/// index.
fn key<'a>(argument: &'static str, value: &'a str) -> Result<&'a str> {
    let value = text(argument, value)?;
    if value.len() > PgStore::MAX_KEY_BYTES {
        return Err(Error::invalid(
            argument,
            format!(
                "is {} bytes long; the PostgreSQL backend takes at most {}",
                value.len(),
                PgStore::MAX_KEY_BYTES
            ),
        ));
    }
    Ok(value)
}

fn to_u32(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

fn job_state(r: &postgres::Row) -> JobState {
    JobState {
        id: r.get(0),
        owner: r.get(1),
        until: r.get(2),
        fence: r.get(3),
        result: r.get(4),
        done: r.get::<_, i32>(5) != 0,
    }
}

impl Store for PgStore {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool> {
        let inserted = self.enqueue_many(&[NewJob::new(job_id.as_str())?])?;
        Ok(inserted == [true])
    }

    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>> {
        let mut conn = self.conn()?;
        let statement = conn.prepared(STATE).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(&statement, &[&key("job_id", job_id.as_str())?])
            .map_err(|e| self.err(e))?;
        Ok(row.as_ref().map(job_state))
    }

    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Fence>> {
        let now = self.clock(now)?;
        let until = ttl.until(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(CLAIM).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(
                &statement,
                &[
                    &key("job_id", job_id.as_str())?,
                    &text("owner", owner.as_str())?,
                    &until,
                    &now.seconds(),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| r.get(0)))
    }

    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool> {
        let now = self.clock(now)?;
        self.renew_at(job_id, owner, fence, now, ttl)
    }

    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> Result<bool> {
        let now = self.clock(now)?;
        self.write_one(
            COMPLETE,
            &[
                &key("job_id", job_id.as_str())?,
                &text("owner", owner.as_str())?,
                &fence,
                &now.seconds(),
                &text("result", result)?,
            ],
        )
    }

    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool> {
        self.write_one(
            RELEASE,
            &[
                &key("job_id", job_id.as_str())?,
                &text("owner", owner.as_str())?,
                &fence,
            ],
        )
    }

    fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<bool>> {
        for job in jobs {
            key("job_id", job.id())?;
        }
        let mut conn = self.conn()?;
        let stmt = conn.prepared(ENQUEUE).map_err(|e| self.err(e))?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let ids: Vec<&str> = jobs.iter().map(NewJob::id).collect();
        self.lock_ids(&mut tx, &ids)?;
        let mut inserted = Vec::with_capacity(jobs.len());
        for job in jobs {
            let changed = tx
                .execute(
                    &stmt,
                    &[
                        &job.id(),
                        &job.payload_bytes(),
                        &job.priority_value(),
                        &job.not_before_value(),
                        &i64::from(job.max_attempts_value()),
                    ],
                )
                .map_err(|e| self.err(e))?;
            inserted.push(changed == 1);
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(inserted)
    }

    fn claim_batch(&self, owner: Owner<'_>, now: Now, ttl: Ttl, n: usize) -> Result<Vec<Lease>> {
        let n = batch_size(n)?;
        let now = self.clock(now)?;
        let until = ttl.until(now)?;
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        text("owner", owner.as_str())?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(CLAIM_NEXT).map_err(|e| self.err(e))?;
        let rows = conn
            .query(
                &statement,
                &[&owner.as_str(), &until, &now.seconds(), &limit],
            )
            .map_err(|e| self.err(e))?;
        let mut claimed: Vec<(Lease, (f64, i64))> = rows
            .iter()
            .map(|r| {
                let lease = Lease {
                    job_id: r.get(0),
                    owner: owner.as_str().to_owned(),
                    fence: r.get(1),
                    until: r.get(2),
                    payload: r.get(3),
                    priority: r.get(4),
                    max_attempts: to_u32(r.get(5)),
                    last_error: r.get(6),
                };
                (lease, (r.get(7), r.get(8)))
            })
            .collect();
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
        for (lease, result) in completions {
            key("job_id", &lease.job_id)?;
            text("owner", &lease.owner)?;
            text("result", result)?;
        }
        // Judged one after another, a repeated (id, owner, fence) can never be stored: the
        // first one stored it, or it was refused. Send each once; the repeats are refused.
        // (Different owners or fences of one id are all sent: at most one matches the row.)
        let mut seen = std::collections::HashSet::new();
        let mut sent = Vec::with_capacity(completions.len());
        let (mut ids, mut owners, mut fences, mut results) = (vec![], vec![], vec![], vec![]);
        for (k, (lease, result)) in completions.iter().enumerate() {
            if seen.insert((&lease.job_id, &lease.owner, lease.fence)) {
                sent.push(k);
                ids.push(lease.job_id.as_str());
                owners.push(lease.owner.as_str());
                fences.push(lease.fence);
                results.push(*result);
            }
        }
        let now = self.clock(now)?.seconds();
        let mut conn = self.conn()?;
        let statement = conn.prepared(COMPLETE_BATCH).map_err(|e| self.err(e))?;
        let rows = conn
            .query(&statement, &[&ids, &owners, &fences, &now, &results])
            .map_err(|e| self.err(e))?;
        let mut stored = vec![false; completions.len()];
        for row in rows {
            // WITH ORDINALITY counts from 1.
            let position: i64 = row.get(0);
            if let Some(&k) = usize::try_from(position - 1).ok().and_then(|i| sent.get(i)) {
                stored[k] = true;
            }
        }
        Ok(stored)
    }

    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> Result<Option<Failed>> {
        let now = self.clock(now)?;
        let retry_at = retry_at.unwrap_or_else(|| Backoff::default().retry_at(lease, now));
        let (now, at) = (now.seconds(), retry_at.seconds());
        text("error", error)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(FAIL).map_err(|e| self.err(e))?;
        let row = conn
            .query_opt(
                &statement,
                &[&lease.job_id, &lease.owner, &lease.fence, &now, &error, &at],
            )
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| {
            if r.get::<_, i32>(0) != 0 {
                Failed::Dead
            } else {
                Failed::Retrying { at }
            }
        }))
    }

    fn cancel(&self, job_id: JobId<'_>, now: Now) -> Result<bool> {
        let now = self.clock(now)?;
        self.write_one(CANCEL, &[&key("job_id", job_id.as_str())?, &now.seconds()])
    }

    fn purge(&self, finished_before: Now) -> Result<u64> {
        let before = finished_before.seconds();
        let mut conn = self.conn()?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let ids: Vec<String> = tx
            .query(PURGEABLE, &[&before])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.lock_ids(&mut tx, &refs)?;
        let deleted: i64 = tx
            .query_one(PURGE, &[&before, &refs])
            .map_err(|e| self.err(e))?
            .get(0);
        tx.commit().map_err(|e| self.err(e))?;
        Ok(deleted.max(0) as u64)
    }

    fn list(&self, now: Now, status: Option<Status>, limit: usize) -> Result<Vec<JobInfo>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let now = self.clock(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(&LIST).map_err(|e| self.err(e))?;
        let rows = conn
            .query(
                &statement,
                &[&now.seconds(), &status.map(Status::as_str), &limit],
            )
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                Ok(JobInfo {
                    state: job_state(r),
                    payload: r.get(6),
                    priority: r.get(7),
                    not_before: r.get(8),
                    max_attempts: to_u32(r.get(9)),
                    error: r.get(10),
                    finished_at: r.get(11),
                    status: Status::parse(r.get(12))?,
                })
            })
            .collect()
    }

    fn stats(&self, now: Now) -> Result<Stats> {
        let now = self.clock(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(&STATS).map_err(|e| self.err(e))?;
        let rows = conn
            .query(&statement, &[&now.seconds()])
            .map_err(|e| self.err(e))?;
        let mut stats = Stats::default();
        for r in &rows {
            let status = Status::parse(r.get(0))?;
            *stats.slot(status) += r.get::<_, i64>(1).max(0) as u64;
        }
        Ok(stats)
    }

    /// As the trait's, but `lease.until` is computed from the clock the renew was judged by
    /// (the database's, with [`PgOptions::database_clock`]).
    fn renew_lease(&self, lease: &mut Lease, now: Now, ttl: Ttl) -> Result<bool> {
        let now = self.clock(now)?;
        let renewed = self.renew_at(lease.job(), lease.holder(), lease.fence, now, ttl)?;
        if renewed {
            lease.until = ttl.until(now)?;
        }
        Ok(renewed)
    }

    fn database_now(&self) -> Result<Option<Now>> {
        if self.database_clock {
            self.now().map(Some)
        } else {
            Ok(None)
        }
    }

    fn admit(&self, resource_name: &str, fence: Fence) -> Result<bool> {
        let resource_name = key("resource", resource(resource_name)?)?;
        self.write_one(ADMIT, &[&resource_name, &fence])
    }

    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        for lease in leases {
            key("job_id", &lease.job_id)?;
            text("owner", &lease.owner)?;
        }
        // Judged one after another, a repeated (id, owner, fence) gets the first one's answer:
        // renewed to the same `until` again, or refused again. Send each once (one UPDATE
        // changes a row at most once) and give the repeats the answer of the one sent.
        let mut first = std::collections::HashMap::new();
        let mut sent_as = Vec::with_capacity(leases.len());
        let (mut ids, mut owners, mut fences) = (vec![], vec![], vec![]);
        for lease in leases {
            let position = *first
                .entry((&lease.job_id, &lease.owner, lease.fence))
                .or_insert_with(|| {
                    ids.push(lease.job_id.as_str());
                    owners.push(lease.owner.as_str());
                    fences.push(lease.fence);
                    ids.len()
                });
            sent_as.push(position);
        }
        let now = self.clock(now)?;
        let until = ttl.until(now)?;
        let mut conn = self.conn()?;
        let statement = conn.prepared(RENEW_BATCH).map_err(|e| self.err(e))?;
        let rows = conn
            .query(
                &statement,
                &[&ids, &owners, &fences, &now.seconds(), &until],
            )
            .map_err(|e| self.err(e))?;
        // WITH ORDINALITY counts from 1, as `sent_as` does.
        let renewed: std::collections::HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
        Ok(sent_as
            .into_iter()
            .map(|position| i64::try_from(position).is_ok_and(|p| renewed.contains(&p)))
            .collect())
    }
}

/// Sorts a driver error into the crate's error kinds.
fn map_error(target: &str, e: postgres::Error) -> Error {
    let busy = [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::LOCK_NOT_AVAILABLE,
    ];
    match e.code() {
        Some(code) if busy.contains(code) => Error::Busy,
        Some(&SqlState::DISK_FULL) => Error::StorageFull {
            database: target.to_owned(),
        },
        Some(&SqlState::READ_ONLY_SQL_TRANSACTION) => Error::ReadOnly {
            database: target.to_owned(),
            source: BackendError::new(e),
        },
        // Class 08 (connection exception) and 57P01..57P03 (the server shut the session down,
        // e.g. pg_terminate_backend), or a socket closed under us.
        Some(code)
            if code.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                ]
                .contains(code) =>
        {
            Error::ConnectionLost {
                target: target.to_owned(),
                source: BackendError::new(e),
            }
        }
        None if e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) =>
        {
            Error::ConnectionLost {
                target: target.to_owned(),
                source: BackendError::new(e),
            }
        }
        _ => Error::Backend(BackendError::new(e)),
    }
}
