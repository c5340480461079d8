//! One store type for either backend, chosen at run time from a database string: a
//! `postgres://` URL or an SQLite file path.
//!
//! A command-line tool or a service that takes its database from configuration does not know
//! at compile time which backend it gets. [`Target::parse`] tells the two apart and
//! [`AnyStore`] implements [`Store`] by handing every call to the backend it holds, so the
//! semantics are exactly those of [`SqliteStore`] or `PgStore`.

use crate::error::{Error, Result};
use crate::sqlite::{SqliteOptions, SqliteStore};
use crate::store::{Observe, Store};
use crate::types::{
    AuditEntry, AuditRecord, BatchSize, Enqueued, Failed, Fence, FenceRecord, History, JobId,
    JobInfo, JobPage, JobQuery, JobState, Lease, NewJob, Now, Overview, Owner, Queue, QueueInfo,
    Queues, Resource, Stats, Status, Ttl,
};
#[cfg(feature = "postgres")]
use crate::{PgOptions, PgStore};

mod target;
pub use target::Target;

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

    fn enqueue_jobs(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        delegate!(self, s => s.enqueue_jobs(jobs))
    }

    fn claim_next_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        delegate!(self, s => s.claim_next_in(queues, owner, now, ttl))
    }

    fn claim_batch_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: BatchSize,
    ) -> Result<Vec<Lease>> {
        delegate!(self, s => s.claim_batch_in(queues, owner, now, ttl, n))
    }

    fn pause(&self, queue: &Queue) -> Result<bool> {
        delegate!(self, s => s.pause(queue))
    }

    fn resume(&self, queue: &Queue) -> Result<bool> {
        delegate!(self, s => s.resume(queue))
    }

    fn queues(&self, now: Now) -> Result<Vec<QueueInfo>> {
        delegate!(self, s => s.queues(now))
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

    fn retry(&self, job_ids: &[JobId<'_>], now: Now) -> Result<Vec<bool>> {
        delegate!(self, s => s.retry(job_ids, now))
    }

    fn retry_dead_in(&self, queues: &Queues, now: Now) -> Result<u64> {
        delegate!(self, s => s.retry_dead_in(queues, now))
    }

    fn retry_dead(&self, now: Now) -> Result<u64> {
        delegate!(self, s => s.retry_dead(now))
    }

    fn delete(&self, job_ids: &[JobId<'_>]) -> Result<Vec<bool>> {
        delegate!(self, s => s.delete(job_ids))
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

    fn history(&self, job_id: JobId<'_>) -> Result<Option<History>> {
        delegate!(self, s => s.history(job_id))
    }

    #[cfg(feature = "cron")]
    fn add_schedule(&self, schedule: &crate::Schedule, now: Now) -> Result<bool> {
        delegate!(self, s => s.add_schedule(schedule, now))
    }

    #[cfg(feature = "cron")]
    fn remove_schedule(&self, name: crate::ScheduleName<'_>) -> Result<bool> {
        delegate!(self, s => s.remove_schedule(name))
    }

    #[cfg(feature = "cron")]
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>> {
        delegate!(self, s => s.schedules())
    }

    #[cfg(feature = "cron")]
    fn enqueue_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[crate::SlotRun],
    ) -> Result<Option<Vec<Option<Enqueued>>>> {
        delegate!(self, s => s.enqueue_slots(scheduler, now, runs))
    }

    fn stats(&self, now: Now) -> Result<Stats> {
        delegate!(self, s => s.stats(now))
    }

    fn admit(&self, resource: Resource<'_>, fence: Fence) -> Result<bool> {
        delegate!(self, s => s.admit(resource, fence))
    }

    fn watch(&self) -> Result<Option<Box<dyn crate::store::Watch>>> {
        delegate!(self, s => s.watch())
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

impl Observe for AnyStore {
    fn overview(&self, now: Now) -> Result<Overview> {
        delegate!(self, s => s.overview(now))
    }

    fn find_jobs(&self, now: Now, query: &JobQuery) -> Result<JobPage> {
        delegate!(self, s => s.find_jobs(now, query))
    }

    fn fences(&self, after: Option<Resource<'_>>, limit: usize) -> Result<Vec<FenceRecord>> {
        delegate!(self, s => s.fences(after, limit))
    }

    fn record_audit(&self, record: &AuditRecord<'_>, at: Now) -> Result<i64> {
        delegate!(self, s => s.record_audit(record, at))
    }

    fn audit_log(&self, before: Option<i64>, limit: usize) -> Result<Vec<AuditEntry>> {
        delegate!(self, s => s.audit_log(before, limit))
    }
}
