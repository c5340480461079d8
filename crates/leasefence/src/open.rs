//! One store type for either backend, chosen at run time from a database string: a
//! `postgres://` URL or an SQLite file path.
//!
//! A command-line tool or a service that takes its database from configuration does not know
//! at compile time which backend it gets. [`Target::parse`] tells the two apart and
//! [`AnyStore`] implements [`Store`] by handing every call to the backend it holds, so the
//! semantics are exactly those of [`SqliteStore`] or `PgStore`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::sqlite::{SqliteOptions, SqliteStore};
use crate::store::Store;
use crate::types::{
    BatchSize, Failed, Fence, JobId, JobInfo, JobState, Lease, NewJob, Now, Owner, Resource, Stats,
    Status, Ttl,
};
#[cfg(feature = "postgres")]
use crate::{PgOptions, PgStore};

/// The URL schemes that select PostgreSQL, compared case-insensitively.
const PG_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];
/// The optional prefix that marks an SQLite path explicitly.
const SQLITE_SCHEME: &str = "sqlite://";
/// The libpq keywords whose `key=` at the start of a word makes a string a PostgreSQL
/// `key=value` connection string.
const PG_KEYS: [&str; 5] = ["host", "hostaddr", "port", "dbname", "user"];

/// Where a store lives, as given by a user: an SQLite file or a PostgreSQL connection string.
///
/// Parsing rules ([`Target::parse`]):
///
/// - `postgres://…` or `postgresql://…` (scheme in any case) is PostgreSQL; the whole string is
///   the connection URL, as libpq takes it.
/// - A libpq `key=value` string is PostgreSQL: one with a white-space separated word that
///   starts with `host=`, `hostaddr=`, `port=`, `dbname=` or `user=`
///   (`host=db user=app dbname=jobs`). Other keys (`password=`, `sslmode=`, …) may follow.
/// - `sqlite://PATH` is the SQLite file `PATH` (`sqlite:///abs/jobs.db` is `/abs/jobs.db`);
///   use it for a file whose name would otherwise read as `key=value`.
/// - Anything else is an SQLite file path, as before PostgreSQL existed.
///
/// ```
/// use std::path::Path;
/// use leasefence::Target;
///
/// # fn main() -> Result<(), leasefence::Error> {
/// assert_eq!(Target::parse("jobs.db")?, Target::Sqlite("jobs.db".into()));
/// assert_eq!(Target::parse("sqlite:///var/lib/jobs.db")?, Target::Sqlite("/var/lib/jobs.db".into()));
/// let pg = Target::parse("postgres://app:secret@db.internal/jobs")?;
/// assert!(pg.is_postgres());
/// // Displayed without the password.
/// assert_eq!(pg.to_string(), "postgres://app:***@db.internal/jobs");
/// let kv = Target::parse("host=db.internal user=app password=secret dbname=jobs")?;
/// assert_eq!(kv.to_string(), "host=db.internal user=app password=*** dbname=jobs");
/// assert!(Target::parse("").is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// An SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection string: a URL (`postgres://…` or `postgresql://…`, scheme in
    /// lower case) or libpq `key=value` pairs, as given.
    Postgres(String),
}

impl Target {
    /// Tells an SQLite path from a PostgreSQL URL (see [`Target`] for the rules).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `db` when `db` is empty or only white space, or when
    /// it is `sqlite://` with no path after it.
    pub fn parse(db: &str) -> Result<Target> {
        if db.trim().is_empty() {
            return Err(Error::invalid(
                "db",
                "is empty: give an SQLite file path or a postgres:// URL",
            ));
        }
        for scheme in PG_SCHEMES {
            if let Some(rest) = strip_prefix_ignore_case(db, scheme) {
                return Ok(Target::Postgres(format!("{scheme}{rest}")));
            }
        }
        if let Some(path) = strip_prefix_ignore_case(db, SQLITE_SCHEME) {
            if path.is_empty() {
                return Err(Error::invalid(
                    "db",
                    "`sqlite://` needs a file path after it (sqlite://jobs.db, sqlite:///abs/jobs.db)",
                ));
            }
            return Ok(Target::Sqlite(PathBuf::from(path)));
        }
        if is_key_value(db) {
            return Ok(Target::Postgres(db.to_owned()));
        }
        Ok(Target::Sqlite(PathBuf::from(db)))
    }

    /// Whether this is a PostgreSQL connection string.
    pub fn is_postgres(&self) -> bool {
        matches!(self, Target::Postgres(_))
    }

    /// The SQLite file, if this is one.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Target::Sqlite(path) => Some(path),
            Target::Postgres(_) => None,
        }
    }

    /// Opens the store with default options ([`SqliteStore::open`] creates the file and
    /// table; `PgStore::open` creates the schema `leasefence` and its tables).
    ///
    /// # Errors
    /// As [`AnyOptions::open_target`].
    pub fn open(&self) -> Result<AnyStore> {
        AnyOptions::new().open_target(self)
    }
}

impl FromStr for Target {
    type Err = Error;

    fn from_str(db: &str) -> Result<Target> {
        Target::parse(db)
    }
}

/// The path as given, or the URL with its password replaced by `***` (safe to print in logs).
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sqlite(path) => write!(f, "{}", path.display()),
            Target::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

/// As `Display`: a PostgreSQL URL's password never appears, not even in `{:?}` (a `Target`
/// inside a logged error or struct must not leak it).
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Target::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
        }
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Whether `db` is a libpq `key=value` string: a word starting with one of [`PG_KEYS`] and `=`.
fn is_key_value(db: &str) -> bool {
    db.split_whitespace().any(|word| {
        word.split_once('=')
            .is_some_and(|(key, _)| PG_KEYS.contains(&key))
    })
}

/// A `key=value` string with the value of every `password` key masked: `password=***`. Values
/// may be single-quoted with backslash escapes, and `=` may have spaces around it, as libpq
/// allows.
fn redact_key_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        // The next key: after white space, up to `=` (with optional spaces before it).
        let start = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        if rest.is_empty() {
            return out;
        }
        let key_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = &rest[..key_end];
        out.push_str(key);
        rest = &rest[key_end..];
        let spaces = rest.len() - rest.trim_start().len();
        if !rest[spaces..].starts_with('=') {
            continue; // not key=value: copied as it is
        }
        let after_eq = spaces + 1;
        let value_start = after_eq + (rest[after_eq..].len() - rest[after_eq..].trim_start().len());
        out.push_str(&rest[..value_start]);
        rest = &rest[value_start..];
        // The value: quoted up to the closing quote, or up to white space.
        let value_end = if let Some(quoted) = rest.strip_prefix('\'') {
            let mut escaped = false;
            let close = quoted.char_indices().find(|&(_, c)| {
                let end = !escaped && c == '\'';
                escaped = !escaped && c == '\\';
                end
            });
            close.map_or(rest.len(), |(i, _)| i + 2)
        } else {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        };
        if key == "password" {
            out.push_str("***");
        } else {
            out.push_str(&rest[..value_end]);
        }
        rest = &rest[value_end..];
    }
}

/// `url` with the password of its user info and any `password=` query parameter masked; a
/// `key=value` string with its `password` value masked.
fn redact(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return redact_key_value(url);
    };
    let authority_end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    let mut out = String::with_capacity(url.len());
    match url[start..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &url[start..start + at];
            out.push_str(&url[..start]);
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&url[start + at..authority_end]);
        }
        None => out.push_str(&url[..authority_end]),
    }
    let rest = &url[authority_end..];
    match rest.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(rest),
    }
    out
}

/// Options for opening an [`AnyStore`]: the SQLite options used when the database is a file,
/// the PostgreSQL options when it is a URL. The defaults are each backend's defaults.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = dir.path().join("jobs.db");
/// use leasefence::{AnyOptions, SqliteOptions};
///
/// let store = AnyOptions::new()
///     .sqlite(SqliteOptions::new().init(true))
///     .open(db.to_str().unwrap())?;
/// assert_eq!(store.backend(), "sqlite");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct AnyOptions {
    sqlite: SqliteOptions,
    #[cfg(feature = "postgres")]
    postgres: PgOptions,
}

impl AnyOptions {
    /// Each backend's default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// The options used when the database is an SQLite file.
    pub fn sqlite(mut self, options: SqliteOptions) -> Self {
        self.sqlite = options;
        self
    }

    /// The options used when the database is a PostgreSQL URL (feature `postgres`).
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, options: PgOptions) -> Self {
        self.postgres = options;
        self
    }

    /// Parses `db` ([`Target::parse`]) and opens it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `db` for an empty string; otherwise as
    /// [`AnyOptions::open_target`].
    pub fn open(&self, db: &str) -> Result<AnyStore> {
        self.open_target(&Target::parse(db)?)
    }

    /// Opens `target` with the options of its backend.
    ///
    /// # Errors
    /// - As [`SqliteOptions::open`] for a file, or `PgOptions::open` for a URL, except that a
    ///   URL that does not parse is an [`Error::InvalidArgument`] naming `db` (not `url`).
    /// - [`Error::InvalidArgument`] naming `db` for a PostgreSQL URL when the crate was built
    ///   without the `postgres` feature.
    pub fn open_target(&self, target: &Target) -> Result<AnyStore> {
        match target {
            Target::Sqlite(path) => self.sqlite.open(path).map(AnyStore::Sqlite),
            #[cfg(feature = "postgres")]
            Target::Postgres(url) => match self.postgres.open(url) {
                Ok(store) => Ok(AnyStore::Postgres(store)),
                // The URL is the caller's `db`: name that, not PgOptions::open's `url`.
                Err(Error::InvalidArgument {
                    argument: "url",
                    reason,
                }) => Err(Error::InvalidArgument {
                    argument: "db",
                    reason,
                }),
                Err(e) => Err(e),
            },
            #[cfg(not(feature = "postgres"))]
            Target::Postgres(_) => Err(Error::invalid(
                "db",
                "is a PostgreSQL URL, but this build of leasefence has no PostgreSQL support \
                 (built without the `postgres` feature)",
            )),
        }
    }
}

/// A store on either backend, chosen at run time; implements [`Store`] by delegating every
/// method to the store it holds, so its semantics are exactly that backend's.
///
/// Backend-specific calls stay on the backend types: match on the variant, e.g. for
/// [`SqliteStore::complete_with`] or `PgStore::now`.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("jobs.db");
/// # let db = path.to_str().unwrap();
/// use leasefence::{AnyStore, JobId, Now, Owner, Store, Ttl};
///
/// // `db` may be an SQLite path or a postgres:// URL, e.g. from `LEASEFENCE_DB`.
/// let store = AnyStore::open(db)?;
/// let (job, me) = (JobId::new("thumbnail-7")?, Owner::new("worker-1")?);
/// store.enqueue(job)?;
/// let lease = store.claim(job, me, Now::new(100.0)?, Ttl::new(30.0)?)?.expect("claimable");
/// assert!(store.complete_lease(&lease, Now::new(110.0)?, "ok")?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyStore {
    /// An SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL database (feature `postgres`).
    #[cfg(feature = "postgres")]
    Postgres(PgStore),
}

impl AnyStore {
    /// Parses `db` ([`Target::parse`]: a `postgres://` / `postgresql://` URL, or an SQLite
    /// file path, optionally as `sqlite://PATH`) and opens it with default options, creating
    /// the SQLite file and table, or the PostgreSQL schema `leasefence` and its tables, if
    /// absent.
    ///
    /// # Errors
    /// As [`AnyOptions::open`]: [`Error::InvalidArgument`] naming `db` for an empty string or
    /// a PostgreSQL URL without the `postgres` feature; the backend's opening errors.
    pub fn open(db: &str) -> Result<AnyStore> {
        AnyOptions::new().open(db)
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        match self {
            AnyStore::Sqlite(_) => "sqlite",
            #[cfg(feature = "postgres")]
            AnyStore::Postgres(_) => "postgres",
        }
    }

    /// The SQLite store, if this is one.
    pub fn as_sqlite(&self) -> Option<&SqliteStore> {
        match self {
            AnyStore::Sqlite(store) => Some(store),
            #[cfg(feature = "postgres")]
            AnyStore::Postgres(_) => None,
        }
    }

    /// The PostgreSQL store, if this is one (feature `postgres`).
    #[cfg(feature = "postgres")]
    pub fn as_postgres(&self) -> Option<&PgStore> {
        match self {
            AnyStore::Postgres(store) => Some(store),
            AnyStore::Sqlite(_) => None,
        }
    }
}

impl From<SqliteStore> for AnyStore {
    fn from(store: SqliteStore) -> Self {
        AnyStore::Sqlite(store)
    }
}

#[cfg(feature = "postgres")]
impl From<PgStore> for AnyStore {
    fn from(store: PgStore) -> Self {
        AnyStore::Postgres(store)
    }
}

/// Calls `$call` on the store inside `$self`, whichever backend it is.
macro_rules! delegate {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            AnyStore::Sqlite($store) => $call,
            #[cfg(feature = "postgres")]
            AnyStore::Postgres($store) => $call,
        }
    };
}

/// Every method delegates, the provided ones included: a backend that overrides one (PgStore's
/// `renew_lease` computes `until` from the database clock) keeps its behaviour.
impl Store for AnyStore {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool> {
        delegate!(self, s => s.enqueue(job_id))
    }

    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>> {
        delegate!(self, s => s.state(job_id))
    }

    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        delegate!(self, s => s.claim(job_id, owner, now, ttl))
    }

    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool> {
        delegate!(self, s => s.renew(job_id, owner, fence, now, ttl))
    }

    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> Result<bool> {
        delegate!(self, s => s.complete(job_id, owner, fence, now, result))
    }

    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool> {
        delegate!(self, s => s.release(job_id, owner, fence))
    }

    fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<bool>> {
        delegate!(self, s => s.enqueue_many(jobs))
    }

    fn enqueue_job(&self, job: NewJob) -> Result<bool> {
        delegate!(self, s => s.enqueue_job(job))
    }

    fn claim_next(&self, owner: Owner<'_>, now: Now, ttl: Ttl) -> Result<Option<Lease>> {
        delegate!(self, s => s.claim_next(owner, now, ttl))
    }

    fn claim_batch(
        &self,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> Result<Vec<Lease>> {
        delegate!(self, s => s.claim_batch(owner, now, ttl, n))
    }

    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> Result<Option<Failed>> {
        delegate!(self, s => s.fail(lease, now, error, retry_at))
    }

    fn cancel(&self, job_id: JobId<'_>, now: Now) -> Result<bool> {
        delegate!(self, s => s.cancel(job_id, now))
    }

    fn purge(&self, finished_before: Now) -> Result<u64> {
        delegate!(self, s => s.purge(finished_before))
    }

    fn list(
        &self,
        now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        delegate!(self, s => s.list(now, status, after, limit))
    }

    fn inspect(&self, job_id: JobId<'_>, now: Now) -> Result<Option<JobInfo>> {
        delegate!(self, s => s.inspect(job_id, now))
    }

    fn stats(&self, now: Now) -> Result<Stats> {
        delegate!(self, s => s.stats(now))
    }

    fn admit(&self, resource: Resource<'_>, fence: Fence) -> Result<bool> {
        delegate!(self, s => s.admit(resource, fence))
    }

    fn database_now(&self) -> Result<Option<Now>> {
        delegate!(self, s => s.database_now())
    }

    fn renew_lease(&self, lease: &mut Lease, now: Now, ttl: Ttl) -> Result<bool> {
        delegate!(self, s => s.renew_lease(lease, now, ttl))
    }

    fn complete_lease(&self, lease: &Lease, now: Now, result: &str) -> Result<bool> {
        delegate!(self, s => s.complete_lease(lease, now, result))
    }

    fn complete_batch(&self, completions: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>> {
        delegate!(self, s => s.complete_batch(completions, now))
    }

    fn release_lease(&self, lease: &Lease) -> Result<bool> {
        delegate!(self, s => s.release_lease(lease))
    }

    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>> {
        delegate!(self, s => s.renew_batch(leases, now, ttl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_and_everything_else_is_a_file() {
        let pg = |s: &str| Target::Postgres(s.to_owned());
        let file = |s: &str| Target::Sqlite(PathBuf::from(s));
        assert_eq!(
            Target::parse("postgres://u@h/d").unwrap(),
            pg("postgres://u@h/d")
        );
        assert_eq!(
            Target::parse("postgresql://h/d").unwrap(),
            pg("postgresql://h/d")
        );
        assert_eq!(
            Target::parse("POSTGRES://h/d").unwrap(),
            pg("postgres://h/d")
        );
        assert_eq!(Target::parse("sqlite://a/b.db").unwrap(), file("a/b.db"));
        assert_eq!(Target::parse("SQLite:///a.db").unwrap(), file("/a.db"));
        assert_eq!(Target::parse("jobs.db").unwrap(), file("jobs.db"));
        // libpq key=value strings, recognised by one of the connection keys.
        for kv in [
            "host=h user=u",
            "dbname=test",
            "user=postgres   port=5433",
            "sslmode=disable host=/run/postgresql",
        ] {
            assert_eq!(Target::parse(kv).unwrap(), pg(kv), "{kv}");
        }
        // Other `=` in a name, and other schemes, are file names.
        assert_eq!(Target::parse("a=b.db").unwrap(), file("a=b.db"));
        assert_eq!(
            Target::parse("sqlite://host=h.db").unwrap(),
            file("host=h.db")
        );
        assert_eq!(Target::parse("postgres:/x").unwrap(), file("postgres:/x"));
        for bad in ["", "  ", "sqlite://"] {
            let err = Target::parse(bad).unwrap_err();
            assert_eq!(err.argument(), Some("db"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn passwords_are_not_displayed() {
        let shown = |s: &str| Target::parse(s).unwrap().to_string();
        assert_eq!(shown("postgres://u:pw@h:5/d"), "postgres://u:***@h:5/d");
        assert_eq!(shown("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(
            shown("postgres://h/d?user=u&password=pw&sslmode=disable"),
            "postgres://h/d?user=u&password=***&sslmode=disable"
        );
        assert_eq!(shown("postgres://u:p@w@h/d"), "postgres://u:***@h/d");
        assert_eq!(shown("jobs.db"), "jobs.db");
        assert_eq!(
            shown("host=h password=pw user=u"),
            "host=h password=*** user=u"
        );
        assert_eq!(
            shown("host=h password = 'p w\\' x' dbname=d"),
            "host=h password = *** dbname=d"
        );
        assert_eq!(shown("dbname=d password="), "dbname=d password=***");
    }

    #[test]
    fn passwords_are_not_in_debug_output() {
        for url in [
            "postgres://app:s3cret-pw@db.internal:5432/jobs",
            "postgresql://db/jobs?user=app&password=s3cret-pw",
            "host=db user=app password=s3cret-pw dbname=jobs",
            "host=db password='s3cret-pw' dbname=jobs",
            "password = s3cret-pw host=db",
        ] {
            let target = Target::parse(url).unwrap();
            let debug = format!("{target:?} {target:#?}");
            assert!(!debug.contains("s3cret-pw"), "{debug}");
            assert!(debug.contains("Postgres"), "{debug}");
        }
        let kv = Target::parse("host=127.0.0.1 user=postgres password=secret dbname=test").unwrap();
        for shown in [format!("{kv:?}"), format!("{kv:#?}"), kv.to_string()] {
            assert!(!shown.contains("secret"), "{shown}");
            assert!(shown.contains("password=***"), "{shown}");
        }
        assert_eq!(
            format!("{:?}", Target::parse("jobs.db").unwrap()),
            r#"Sqlite("jobs.db")"#
        );
    }
}
