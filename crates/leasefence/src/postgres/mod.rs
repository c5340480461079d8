//! The shared backend: PostgreSQL, for workers on many hosts (feature `postgres`).
//!
//! The same contract as the SQLite backend, with the same SQL file names. Atomicity comes from
//! single statements, not from SERIALIZABLE: every guarded write is one `UPDATE` whose `WHERE`
//! carries owner, fence, `done` and the lease check, so under READ COMMITTED a concurrent
//! writer waits for the row lock and then re-checks that `WHERE` on the row as the winner left
//! it. `claim_next` picks rows with `FOR UPDATE SKIP LOCKED`. Every session runs with
//! `synchronous_commit = on`.

use std::time::Duration;

use postgres::Config;
use r2d2::{ManageConnection as _, Pool, PooledConnection};

mod enqueue;
mod errors;
mod ledger;
mod observe;
mod operator;
mod pool;
mod reads;
mod rows;
#[cfg(feature = "cron")]
mod schedule;
mod store;
mod tls;
pub use tls::pg_connect;
mod watch;
use errors::map_error;
use pool::Manager;

use crate::error::{BackendError, Error, Result};
use crate::types::{Fence, JobId, Lease, Now, Owner, Ttl};

/// The longest connect, lock or network timeout: 2^31 - 1 ms, the range of PostgreSQL's
/// `lock_timeout` and of the kernel's `TCP_USER_TIMEOUT`.
const MAX_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// The schema, one numbered migration per step, recorded in `schema_migrations` of the store's
/// schema. Every migration is idempotent.
const MIGRATIONS: [&str; 8] = [
    include_str!("migrations/0001_jobs.sql"),
    include_str!("migrations/0002_queue.sql"),
    include_str!("migrations/0003_attempts.sql"),
    include_str!("migrations/0004_queues.sql"),
    include_str!("migrations/0005_ledger.sql"),
    include_str!("migrations/0006_schedules.sql"),
    include_str!("migrations/0007_dashboard.sql"),
    include_str!("migrations/0008_ledger_plans.sql"),
];

mod sql;

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
    network_timeout: Duration,
    database_clock: bool,
    init: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "leasefence".into(),
            pool_size: 8,
            connect_timeout: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(5),
            network_timeout: Duration::from_secs(10),
            database_clock: false,
            init: true,
        }
    }
}

impl PgOptions {
    /// The defaults: schema `leasefence`, a pool of 8 connections, 5 s to connect, 5 s lock
    /// timeout, 10 s network timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// The schema that holds the store's tables (default `leasefence`); created if absent
    /// (unless [`init`](Self::init) is off). A lower-case SQL identifier: letters, digits and
    /// `_`, not starting with a digit, at most 63 bytes.
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
    /// [`Error::CannotConnect`] (default 5 s; at most about 24.8 days, or `open` fails with
    /// [`Error::InvalidArgument`] naming `connect_timeout`).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a statement waits for a row lock held by another transaction before it fails
    /// with [`Error::Busy`] (PostgreSQL's `lock_timeout`; default 5 s; at most 2^31 - 1 ms,
    /// about 24.8 days, PostgreSQL's limit, or `open` fails with [`Error::InvalidArgument`]
    /// naming `lock_timeout`).
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// How long a connection may go unanswered by the network before the call on it fails
    /// with [`Error::ConnectionLost`] (default 10 s): what was sent stays unacknowledged that
    /// long (`TCP_USER_TIMEOUT`), or the server's host stops answering TCP keepalive probes
    /// (idle a third of it, then 3 probes a sixth of it apart, each at least 1 s and at most
    /// 32,767 s, the kernel's range). A cut
    /// network makes a call fail within about this time instead of hanging until the kernel
    /// gives up (minutes). A slow statement or an idle connection is not affected: the
    /// server's host still acknowledges and answers. A connection string that sets
    /// `tcp_user_timeout` or `keepalives_idle` itself keeps its own values. At most 2^31 - 1 ms
    /// (about 24.8 days, the kernel's limit), or `open` fails with [`Error::InvalidArgument`]
    /// naming `network_timeout`.
    pub fn network_timeout(mut self, timeout: Duration) -> Self {
        self.network_timeout = timeout.max(Duration::from_secs(1));
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

    /// Whether `open` may create the schema and its tables (default `true`). With `false`, a
    /// schema without a `jobs` table is refused with [`Error::SchemaMismatch`] and nothing is
    /// created — what a read-only tool wants, so that a mistyped schema name is an error, not a
    /// new empty schema. A schema that exists is still brought up to the latest migration, as
    /// [`SqliteOptions::init`](crate::SqliteOptions::init)`(false)` does on SQLite.
    pub fn init(mut self, init: bool) -> Self {
        self.init = init;
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
    /// - [`Error::InvalidArgument`] naming `url` when it does not parse, `schema` when the
    ///   schema name is not a plain identifier or names a system schema (`pg_*`,
    ///   `information_schema`), or the timeout that is longer than 2^31 - 1 ms.
    /// - [`Error::CannotConnect`] when no connection could be made within the connect timeout.
    /// - [`Error::SchemaMismatch`] when the schema holds a `jobs` table lacking one of the
    ///   contract's six columns, or (with [`init`](Self::init) off) holds no `jobs` table;
    ///   nothing is created or altered then.
    /// - [`Error::Busy`] or [`Error::Backend`] for lock contention or other database failures.
    pub fn open(&self, url: &str) -> Result<PgStore> {
        self.check_timeouts()?;
        let schema = schema_name(&self.schema)?;
        let config = self.connection_config(url)?;
        let target = describe(&config);
        let listen_config = std::sync::Arc::new(config.clone());
        let manager = Manager {
            config,
            schema: schema.to_owned(),
            lock_timeout_ms: self.lock_timeout.as_millis().max(1).to_string(),
        };
        // The first connection is made here, not by the pool: the pool retries until its
        // timeout and keeps only the driver's summary ("db error"), while this one fails at
        // once with the server's own reason (unknown database, authentication failed,
        // connection refused), bounded by the connect timeout. It runs the migrations.
        let mut first = manager.connect().map_err(|e| Error::CannotConnect {
            target: target.clone(),
            source: BackendError::with_causes(e),
        })?;
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
            listen_config,
        };
        store.migrate(&mut first, self.init)?;
        Ok(store)
    }

    /// Checks what [`open`](Self::open) checks before it connects — the connection string, the
    /// schema name and the timeouts — without connecting: for a tool that opens its stores
    /// later (a worker's threads) and wants bad settings refused at once.
    ///
    /// ```
    /// use leasefence::PgOptions;
    ///
    /// assert!(PgOptions::new().check("postgres://app@db.internal/jobs").is_ok());
    /// let bad = PgOptions::new().check("postgres://app@db.internal/jobs?bogus=1").unwrap_err();
    /// assert_eq!(bad.argument(), Some("url"));
    /// let bad = PgOptions::new().schema("Bad Name").check("host=db.internal").unwrap_err();
    /// assert_eq!(bad.argument(), Some("schema"));
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] as [`open`](Self::open) gives it, naming `url`, `schema` or
    /// the timeout.
    pub fn check(&self, url: &str) -> Result<()> {
        self.check_timeouts()?;
        schema_name(&self.schema)?;
        self.connection_config(url).map(drop)
    }

    /// Each timeout within what the server, the kernel and the pool take: PostgreSQL's
    /// `lock_timeout` and the kernel's `TCP_USER_TIMEOUT` are 32-bit counts of milliseconds,
    /// and the pool adds the connect timeout to the clock.
    fn check_timeouts(&self) -> Result<()> {
        for (argument, timeout) in [
            ("connect_timeout", self.connect_timeout),
            ("lock_timeout", self.lock_timeout),
            ("network_timeout", self.network_timeout),
        ] {
            if timeout > MAX_TIMEOUT {
                return Err(Error::invalid(
                    argument,
                    format!(
                        "must be at most {} ms (about 24.8 days), got {timeout:?}",
                        MAX_TIMEOUT.as_millis()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The driver's configuration of `url`, with this store's connect and network timeouts, and
    /// `application_name` `leasefence` unless the string names one.
    fn connection_config(&self, url: &str) -> Result<Config> {
        let mut config: Config = url.parse().map_err(|e: postgres::Error| {
            // `sslmode = verify-full` is the same word in a libpq string.
            let words: String = url.split_whitespace().collect();
            let why = if words.to_ascii_lowercase().contains("sslmode=verify") {
                "sslmode verify-ca and verify-full are not supported (no certificate is \
                 verified); sslmode=require encrypts the connection"
                    .to_owned()
            } else {
                errors::config_cause(&e)
            };
            Error::invalid("url", format!("not a PostgreSQL connection string: {why}"))
        })?;
        tls::check(&config)?;
        config.connect_timeout(self.connect_timeout);
        self.apply_network_timeout(&mut config);
        // A DBA finds the sessions in `pg_stat_activity` by name (a string's own is kept).
        if config.get_application_name().is_none() {
            config.application_name("leasefence");
        }
        Ok(config)
    }

    /// Sets the TCP timeouts of [`network_timeout`](Self::network_timeout) on `config`, where
    /// the connection string did not set its own.
    fn apply_network_timeout(&self, config: &mut Config) {
        let t = self.network_timeout;
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(t);
        }
        // The driver's default idle time is 2 hours: a string that says otherwise is kept.
        if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
            // Linux takes 1 to 32,767 s for the idle time and the interval.
            let (second, most) = (Duration::from_secs(1), Duration::from_secs(32_767));
            config.keepalives(true);
            config.keepalives_idle((t / 3).clamp(second, most));
            config.keepalives_interval((t / 6).clamp(second, most));
            config.keepalives_retries(3);
        }
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
/// let lease = store.claim(job, me, Now::new(100.0)?, Ttl::new(30.0)?)?.expect("claimable");
/// assert_eq!((lease.fence, lease.until), (1, 130.0));
/// assert!(store.complete_lease(&lease, Now::new(110.0)?, "done")?);
/// # Ok(()) }
/// ```
pub struct PgStore {
    pool: Pool<Manager>,
    schema: String,
    target: String,
    database_clock: bool,
    /// How a watch connects (`Store::watch`); holds the password, so never shown by `Debug`.
    listen_config: std::sync::Arc<Config>,
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

    /// A watch on this store's schema, on a connection of its own (`Store::watch`).
    fn open_watch(&self) -> Result<watch::PgWatch> {
        watch::PgWatch::open(&self.listen_config, &self.schema, &self.target)
    }

    /// The database's clock: `extract(epoch from clock_timestamp())`, seconds since the Unix
    /// epoch on the server. The clock every operation uses when the store was opened with
    /// [`PgOptions::database_clock`].
    ///
    /// # Errors
    /// Connection or backend failures.
    pub fn now(&self) -> Result<Now> {
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::DATABASE_NOW).map_err(|e| self.err(e))?;
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
        key("job_id", &lease.job_id)?;
        text("owner", &lease.owner)?;
        text("result", result)?;
        let now = self.clock(now)?;
        let mut conn = self.conn()?;
        let complete = conn.prepared(sql::COMPLETE).map_err(|e| self.err(e))?;
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
            // Refused: complete.sql counted it in the ledger; nothing of the caller's is written.
            tx.commit().map_err(|e| self.err(e))?;
            return Ok(None);
        }
        let value = write(&mut tx)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(value))
    }

    fn conn(&self) -> Result<Conn> {
        self.pool.get().map_err(|e| Error::CannotConnect {
            target: self.target.clone(),
            source: BackendError::with_causes(e),
        })
    }

    fn err(&self, e: postgres::Error) -> Error {
        map_error(&self.target, e)
    }

    /// Brings the schema up to the latest migration, in one transaction under an advisory lock
    /// (so concurrent starts do not race). Only adds tables, columns and indexes; without
    /// `init`, a schema with no `jobs` table is refused before anything is created.
    fn migrate(&self, conn: &mut postgres::Client, init: bool) -> Result<()> {
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let key = format!("leasefence.migrate.{}", self.schema);
        tx.execute(sql::MIGRATE_LOCK, &[&key, &self.schema])
            .map_err(|e| self.err(e))?;
        // A `jobs` table that is not the contract's is refused before anything is created or
        // altered (the transaction rolls back with the error).
        let columns: Vec<String> = tx
            .query(sql::JOB_COLUMNS, &[&self.schema])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let missing: Vec<&str> = crate::JOB_COLUMNS
            .into_iter()
            .filter(|c| !columns.is_empty() && !columns.iter().any(|have| have == c))
            .collect();
        if columns.is_empty() && !init {
            return Err(Error::SchemaMismatch {
                path: format!("schema {} on {}", self.schema, self.target).into(),
                detail: "no `jobs` table; run `leasefence init` (or `PgStore::open`) first".into(),
            });
        }
        if !missing.is_empty() {
            return Err(Error::SchemaMismatch {
                path: format!("schema {} on {}", self.schema, self.target).into(),
                detail: format!(
                    "table `jobs` lacks column{} {}",
                    if missing.len() > 1 { "s" } else { "" },
                    missing.join(", ")
                ),
            });
        }
        tx.batch_execute(sql::MIGRATE_SCHEMA)
            .map_err(|e| self.err(e))?;
        let applied: i32 = tx
            .query_one(sql::MIGRATIONS_APPLIED, &[])
            .map_err(|e| self.err(e))?
            .get(0);
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            let version = index as i32 + 1;
            if version <= applied {
                continue;
            }
            tx.batch_execute(migration).map_err(|e| self.err(e))?;
            tx.execute(sql::MIGRATION_RECORD, &[&version])
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
            sql::RENEW,
            &[
                &key("job_id", job_id.as_str())?,
                &text("owner", owner.as_str())?,
                &fence,
                &now.seconds(),
                &until,
            ],
        )
    }

    /// Takes the transaction-scoped per-id locks of `sql/lock_ids.sql`.
    fn lock_ids(&self, tx: &mut postgres::Transaction<'_>, ids: &[&str]) -> Result<()> {
        let space = format!("leasefence.ids.{}", self.schema);
        tx.execute(sql::LOCK_IDS, &[&space, &ids])
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

#[cfg(test)]
mod tests;

/// A schema name that can be spliced into SQL as a quoted identifier.
fn schema_name(schema: &str) -> Result<&str> {
    let mut chars = schema.chars();
    let plain = matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && schema.len() <= 63;
    // PostgreSQL reserves `pg_*` names (its catalog, `pg_temp`: refused by the server, or a
    // session's own temporary schema), and `information_schema` is the standard's catalog.
    if plain && (schema.starts_with("pg_") || schema == "information_schema") {
        return Err(Error::invalid(
            "schema",
            format!("{schema:?} is a system schema of PostgreSQL; choose a schema of your own"),
        ));
    }
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
            // No host name holds an `@`: this one is the tail of a password with an unencoded
            // `@` (`postgres://app:pa@ss@host`, which the driver splits at the first `@`).
            postgres::config::Host::Tcp(name) => match name.rsplit_once('@') {
                Some((_, host)) => format!("***@{host}"),
                None => name.clone(),
            },
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
