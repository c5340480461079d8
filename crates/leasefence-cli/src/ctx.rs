//! What every subcommand gets from the global flags, and the one place in the CLI that tells
//! SQLite from PostgreSQL: every verb opens its store here and then runs on `AnyStore` alone.

use std::path::{Path, PathBuf};

use leasefence::{AnyOptions, AnyStore, PgOptions, SqliteOptions, Synchronous, Target};
use serde_json::{Value, json};

use crate::output::Out;

/// The database used when neither `--db` nor `LEASEFENCE_DB` is given.
const DEFAULT_DB: &str = "leasefence.db";
/// The PostgreSQL schema used when neither `--pg-schema` nor `LEASEFENCE_PG_SCHEMA` is given.
const DEFAULT_PG_SCHEMA: &str = "leasefence";

/// What every subcommand gets from the global flags.
#[derive(Debug)]
pub struct Ctx {
    /// `--db` or `LEASEFENCE_DB`, if either was given.
    pub(crate) db: Option<PathBuf>,
    /// `--pg-schema` or `LEASEFENCE_PG_SCHEMA`, if either was given.
    pub(crate) pg_schema: Option<String>,
    /// Where results are printed.
    pub out: Out,
}

/// The database as shown to the user: the path, or the URL without its password, and on
/// PostgreSQL the schema.
#[derive(Debug)]
pub struct Shown {
    /// The SQLite path, or the redacted PostgreSQL URL.
    pub db: String,
    /// The schema, on PostgreSQL.
    pub schema: Option<String>,
}

impl Shown {
    /// `DB` or `DB, schema S`.
    pub fn with_schema(&self) -> String {
        match &self.schema {
            Some(schema) => format!("{}, schema {schema}", self.db),
            None => self.db.clone(),
        }
    }

    /// `"db"` and, on PostgreSQL, `"schema"` as JSON fields of `record`.
    pub fn add_to(&self, record: &mut Value) {
        record["db"] = json!(self.db);
        if let Some(schema) = &self.schema {
            record["schema"] = json!(schema);
        }
    }
}

impl Ctx {
    /// The database to use: the one given, or [`DEFAULT_DB`] in the working directory.
    fn db(&self) -> &Path {
        self.db.as_deref().unwrap_or(Path::new(DEFAULT_DB))
    }

    /// Which backend [`Ctx::db`] names: a `postgres://` URL, or an SQLite file.
    ///
    /// # Errors
    /// `InvalidArgument` naming `db` for an empty value.
    fn target(&self) -> leasefence::Result<Target> {
        match self.db().to_str() {
            Some(db) => Target::parse(db),
            // Not UTF-8: never a URL.
            None => Ok(Target::Sqlite(self.db().to_path_buf())),
        }
    }

    /// The PostgreSQL schema: `--pg-schema`, or `leasefence`.
    fn pg_schema(&self) -> &str {
        self.pg_schema.as_deref().unwrap_or(DEFAULT_PG_SCHEMA)
    }

    /// Options for a PostgreSQL store of this invocation: the schema, a small pool (one
    /// command makes a few calls in a row), and the database's clock unless the caller gives
    /// `now` itself.
    fn pg_options(&self, database_clock: bool) -> PgOptions {
        PgOptions::new()
            .schema(self.pg_schema())
            .pool_size(2)
            .database_clock(database_clock)
    }

    /// The database as shown in messages.
    ///
    /// # Errors
    /// `InvalidArgument` naming `db` for an empty value.
    pub fn shown(&self) -> leasefence::Result<Shown> {
        let target = self.target()?;
        Ok(Shown {
            schema: target.is_postgres().then(|| self.pg_schema().to_owned()),
            db: target.to_string(),
        })
    }

    /// Opens the database as the queue commands that write need it: an SQLite file that must
    /// exist and be initialised (nothing is created, exactly as the library's free functions),
    /// or a PostgreSQL schema (created if absent). On PostgreSQL the store judges leases by the
    /// database's clock unless `now_given`.
    ///
    /// # Errors
    /// `InvalidArgument` naming `db` or `schema`; the backend's opening errors.
    pub fn open(&self, now_given: bool) -> leasefence::Result<AnyStore> {
        AnyOptions::new()
            .sqlite(SqliteOptions::new().init(false))
            .postgres(self.pg_options(!now_given))
            .open_target(&self.target()?)
    }

    /// Opens the database as the read-only commands need it (`state`, `list`, `stats`,
    /// `history`, `queue list`, `schedule list`): as [`Ctx::open`], but a PostgreSQL schema
    /// without the store's tables is an error as an uninitialised SQLite file is, so that a
    /// mistyped `--pg-schema` creates nothing.
    ///
    /// # Errors
    /// As [`Ctx::open`]; `SchemaMismatch` for a schema with no `jobs` table.
    pub fn open_existing(&self, now_given: bool) -> leasefence::Result<AnyStore> {
        AnyOptions::new()
            .sqlite(SqliteOptions::new().init(false))
            .postgres(self.pg_options(!now_given).init(false))
            .open_target(&self.target()?)
    }

    /// Opens the database creating what is absent: the SQLite file and its table, or the
    /// PostgreSQL schema and its tables. Never resets a row.
    ///
    /// # Errors
    /// As [`Ctx::open`].
    pub fn init(&self) -> leasefence::Result<AnyStore> {
        AnyOptions::new()
            .sqlite(SqliteOptions::new())
            .postgres(self.pg_options(true))
            .open_target(&self.target()?)
    }

    /// A factory for the stores of a long-running worker, one per thread: each an existing,
    /// initialised SQLite file, or a PostgreSQL schema judging leases by the database's clock.
    ///
    /// # Errors
    /// `InvalidArgument` naming `db` for an empty value.
    pub fn opener(
        &self,
    ) -> leasefence::Result<impl Fn() -> leasefence::Result<AnyStore> + Send + Sync + 'static> {
        let target = self.target()?;
        let options = AnyOptions::new()
            .sqlite(SqliteOptions::new().init(false))
            .postgres(self.pg_options(true).pool_size(1));
        Ok(move || options.open_target(&target))
    }

    /// What `serve` opens: the target, and the PostgreSQL options (the schema, judging leases
    /// by the database's clock).
    ///
    /// # Errors
    /// `InvalidArgument` naming `db` for an empty value.
    pub fn server_target(&self) -> leasefence::Result<(Target, PgOptions)> {
        Ok((self.target()?, self.pg_options(true)))
    }

    /// The database `demo` runs in; see [`Scratch`].
    ///
    /// # Errors
    /// `InvalidArgument` naming `db` for an empty value; creating the temporary directory.
    pub fn scratch(&self) -> anyhow::Result<Scratch> {
        Scratch::new(self)
    }
}

/// What a store of the demo is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The story: creates the table (or schema) if absent.
    Story,
    /// Enqueueing the stress jobs (no fence is handed out): on SQLite without a per-commit
    /// fsync, since the workers' first durable commit syncs them.
    Setup,
    /// One worker thread's claims, renews and completes.
    Worker,
    /// Reading every job back for the verdict, through a store the workers never used.
    Verdict,
}

/// The database the demo runs in: a fresh temporary file or schema, removed at the end, unless
/// the user named the database (for PostgreSQL: the schema); then this run's job ids get a
/// unique prefix so that existing jobs are not disturbed. Every store it opens takes `now` from
/// the caller: the story gives its own times, and the stress run judges its invariants on its
/// own clock.
pub struct Scratch {
    target: Target,
    /// The PostgreSQL schema (unused on SQLite).
    schema: String,
    /// A database (file or schema) of the demo's own, removed at the end.
    pub temporary: bool,
    /// Prepended to every job id; empty in a temporary database.
    pub prefix: String,
    /// The temporary directory of a temporary SQLite file; removed when dropped.
    _tmp: Option<tempfile::TempDir>,
}

impl Scratch {
    fn new(ctx: &Ctx) -> anyhow::Result<Scratch> {
        use anyhow::Context as _;
        let unique = || format!("{}/", run_id());
        let target = ctx.target().context("demo")?;
        let mut scratch = Scratch {
            schema: ctx.pg_schema().to_owned(),
            temporary: false,
            prefix: unique(),
            _tmp: None,
            target,
        };
        match &scratch.target {
            Target::Postgres(_) if ctx.pg_schema.is_none() => {
                scratch.schema = format!("leasefence_{}", run_id().replace('-', "_"));
                (scratch.temporary, scratch.prefix) = (true, String::new());
            }
            Target::Sqlite(_) if ctx.db.is_none() => {
                let tmp = tempfile::Builder::new()
                    .prefix("leasefence-demo-")
                    .tempdir()
                    .context("creating a temporary directory for the demo database")?;
                scratch.target = Target::Sqlite(tmp.path().join("demo.db"));
                (scratch.temporary, scratch.prefix) = (true, String::new());
                scratch._tmp = Some(tmp);
            }
            _ => {}
        }
        Ok(scratch)
    }

    /// Makes SIGINT, SIGTERM and SIGHUP remove the demo's own database before the process
    /// exits (status 130), as its normal end does: the temporary file's folder, or the
    /// temporary schema (dropped over a connection of its own, waiting at most 5 s for the
    /// demo's locks). A database the user named is left alone. Nothing is installed when
    /// another handler already is. The flag returned is set once a signal has come: the demo
    /// then waits for the handler to end the process, instead of reporting the failures of
    /// calls on a database that is going away.
    pub fn remove_on_signal(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if !self.temporary {
            return interrupted;
        }
        let flag = interrupted.clone();
        let folder = self._tmp.as_ref().map(|tmp| tmp.path().to_owned());
        let schema = match &self.target {
            Target::Postgres(url) => Some((url.clone(), self.schema.clone())),
            Target::Sqlite(_) => None,
        };
        let _ = ctrlc::try_set_handler(move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            if let Some(folder) = &folder {
                // The demo's threads run on while this removes the folder, and one opening the
                // database between the removal of its files and of the folder makes SQLite
                // create the file again (the folder is then not empty): try again, bounded.
                for _ in 0..100 {
                    let _ = std::fs::remove_dir_all(folder);
                    if !folder.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            if let Some((url, schema)) = &schema {
                drop_schema(url, schema);
            }
            eprintln!("leasefence: interrupted: the demo's temporary database is removed");
            std::process::exit(130);
        });
        interrupted
    }

    /// The database as shown in messages.
    pub fn shown(&self) -> Shown {
        Shown {
            db: self.target.to_string(),
            schema: self.target.is_postgres().then(|| self.schema.clone()),
        }
    }

    /// What a temporary database of this backend is, in words.
    pub fn temporary_kind(&self) -> &'static str {
        if self.target.is_postgres() {
            "a fresh schema, dropped when the demo ends"
        } else {
            "a fresh temporary file, removed when the demo ends"
        }
    }

    /// How the backend makes commits durable, for the notes of the stress report.
    pub fn durability(&self) -> &'static str {
        if self.target.is_postgres() {
            "synchronous_commit = on"
        } else {
            "synchronous = FULL"
        }
    }

    /// How the stress jobs are enqueued, for the notes of the stress report.
    pub fn setup_note(&self) -> &'static str {
        if self.target.is_postgres() {
            "setup"
        } else {
            "setup, synchronous = NORMAL"
        }
    }

    /// A fresh store for `purpose`, taking `now` from the caller.
    ///
    /// # Errors
    /// `InvalidArgument` naming `schema`; the backend's opening errors.
    pub fn open(&self, purpose: Purpose) -> leasefence::Result<AnyStore> {
        let sqlite = match purpose {
            Purpose::Story => SqliteOptions::new(),
            Purpose::Setup => SqliteOptions::new()
                .init(false)
                .synchronous(Synchronous::Normal),
            Purpose::Worker | Purpose::Verdict => SqliteOptions::new().init(false),
        };
        AnyOptions::new()
            .sqlite(sqlite)
            .postgres(PgOptions::new().schema(&self.schema).pool_size(1))
            .open_target(&self.target)
    }
}

/// Drops the demo's own schema, also when the demo failed half-way; a temporary file goes with
/// its directory.
impl Drop for Scratch {
    fn drop(&mut self) {
        let (true, Target::Postgres(url)) = (self.temporary, &self.target) else {
            return;
        };
        drop_schema(url, &self.schema);
    }
}

/// Drops the demo's own `schema` over a connection of its own, waiting at most 5 s for locks
/// (the demo's threads may still hold some when a signal stops it); a failure is a warning.
fn drop_schema(url: &str, schema: &str) {
    // As the store connected (TLS with sslmode=require), or the drop would fail there.
    let dropped = leasefence::pg_connect(url).and_then(|mut client| {
        client.batch_execute(&format!(
            "SET lock_timeout = '5s'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
        ))
    });
    if let Err(e) = dropped {
        eprintln!("leasefence: warning: could not drop the demo's schema {schema}: {e}");
    }
}

/// A run id unique enough to keep two demo runs on one database apart.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("demo-{nanos:x}-{:x}", std::process::id())
}
