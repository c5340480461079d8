//! The operator's view of a store: what a dashboard reads (the overview, a job search, the
//! fence gate) and the audit log of the actions it takes.

use crate::error::Result;
use crate::types::{
    AuditEntry, AuditRecord, FenceRecord, JobPage, JobQuery, Now, Overview, Resource,
};

/// The reads behind `leasefence serve`'s dashboard, and its audit log. A backend implements it
/// beside [`Store`](crate::Store); [`SqliteStore`](crate::SqliteStore), `PgStore` and
/// [`AnyStore`](crate::AnyStore) do. Every read is bounded: it walks an index of the jobs it
/// reports, or at most a window of jobs, never the whole table.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::{JobQuery, NewJob, Now, Observe, Owner, SqliteStore, Status, Store, Ttl};
/// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
/// store.enqueue_many(&[NewJob::new("a")?, NewJob::new("b")?.queue("mail")?])?;
/// let now = Now::new(1_000.0)?;
/// store.claim_next(Owner::new("w1")?, now, Ttl::new(30.0)?)?;
/// let overview = store.overview(now)?;
/// assert_eq!((overview.totals.leased, overview.totals.ready), (1, 1));
/// assert_eq!(overview.expiring_soon, 1); // its lease ends within a minute
/// let leased = JobQuery { status: Some(Status::Leased), ..JobQuery::default() };
/// let page = store.find_jobs(now, &leased)?;
/// assert_eq!(page.jobs[0].state.owner.as_deref(), Some("w1"));
/// assert!(page.next.is_none()); // nothing left to look at
/// # Ok(()) }
/// ```
pub trait Observe {
    /// The store at a glance at `now`: the counts by status and queue, the leases that end
    /// within a minute, the oldest ready job, the stale writes refused and the throughput of
    /// the last minutes ([`Overview`]). One snapshot; a read.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn overview(&self, now: Now) -> Result<Overview>;

    /// One page of the jobs that match `query` at `now`, with the cursor of the next. A page
    /// looks at no more than `query.window` jobs — the next ones in enqueue order after the
    /// cursor, or with an id prefix the next ids of its range — so a sparse filter gives a
    /// short (even empty) page whose [`JobPage::next`] goes on where it stopped. `None` there
    /// means nothing is left to look at. One snapshot; a read.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) for a query [`JobQuery::check`]
    /// refuses; busy or backend failures.
    fn find_jobs(&self, now: Now, query: &JobQuery) -> Result<JobPage>;

    /// The fence gate's resources in the byte order of their names (on every backend, whatever
    /// a PostgreSQL database's collation), after `after` when given, at most `limit`, each
    /// with the highest fence [admitted](crate::Store::admit) for it. A read.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn fences(&self, after: Option<Resource<'_>>, limit: usize) -> Result<Vec<FenceRecord>>;

    /// Appends an operator action to the audit log, dated `at`, and returns its position. An
    /// operator record, not a lease write: not fenced. Durable like every commit.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) naming the field
    /// [`AuditRecord::check`] refuses; busy or backend failures, and then nothing was added.
    fn record_audit(&self, record: &AuditRecord<'_>, at: Now) -> Result<i64>;

    /// The audit log, newest first: the entries before position `before` when given, at
    /// most `limit`. A read.
    ///
    /// # Errors
    /// Busy or backend failures.
    fn audit_log(&self, before: Option<i64>, limit: usize) -> Result<Vec<AuditEntry>>;
}
