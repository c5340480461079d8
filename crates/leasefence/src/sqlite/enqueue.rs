//! Enqueueing on SQLite: the inserts of `enqueue_jobs`, on the store's own connection inside
//! its `BEGIN IMMEDIATE`, or on the caller's ([`SqliteStore::enqueue_in`]).

use rusqlite::{Connection, params};

use super::{SqliteStore, connection::map_error, sql};
use crate::error::{Error, Result};
use crate::types::{Enqueued, NewJob};

/// Inserts `jobs` on `conn`, inside a transaction the caller holds: `enqueue.sql` per job, and
/// `enqueue_match.sql` to tell why one inserted nothing. `err` maps the driver's errors.
pub(super) fn enqueue_on(
    conn: &Connection,
    jobs: &[NewJob],
    err: &dyn Fn(rusqlite::Error) -> Error,
) -> Result<Vec<Enqueued>> {
    let mut outcomes = Vec::with_capacity(jobs.len());
    let mut insert = conn.prepare_cached(sql::ENQUEUE).map_err(err)?;
    let mut matching = conn.prepare_cached(sql::ENQUEUE_MATCH).map_err(err)?;
    for job in jobs {
        let queue = job.queue_name().as_str();
        let changed = insert
            .execute(params![
                job.id(),
                job.payload_bytes(),
                job.priority_value(),
                job.not_before_value(),
                job.max_attempts_value(),
                queue,
                job.kind_name(),
                job.unique_key_value(),
                job.unique_for_value(),
            ])
            .map_err(err)?;
        if changed == 1 {
            outcomes.push(Enqueued::Inserted);
            continue;
        }
        // Under the same write lock: the row the insert met is still there.
        let (id, known): (String, bool) = matching
            .query_row(params![job.id(), queue, job.unique_key_value()], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(err)?;
        outcomes.push(if known {
            Enqueued::Known
        } else {
            Enqueued::Duplicate { of: id }
        });
    }
    Ok(outcomes)
}

impl SqliteStore {
    /// Enqueues `jobs` inside **the caller's own transaction**, on the caller's connection to
    /// the store's file: the jobs exist if and only if the caller's other writes in `tx`
    /// commit — an order row and the job that mails its receipt, never one without the other.
    /// Each job is judged exactly as [`Store::enqueue_jobs`](crate::Store::enqueue_jobs) judges
    /// it (a known id untouched, a held unique key a duplicate), as seen by `tx`.
    ///
    /// The file must have been opened by a [`SqliteStore`] once (its schema is then in place).
    /// Begin `tx` with [`TransactionBehavior::Immediate`](rusqlite::TransactionBehavior) so
    /// that it holds the write lock from the start, as the store's own transactions do; a
    /// deferred transaction that read first may fail with [`Error::Busy`] when it upgrades.
    /// Idle workers on the file notice the commit within a few milliseconds (their watch reads
    /// `PRAGMA data_version`).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use leasefence::rusqlite::{Connection, TransactionBehavior};
    /// use leasefence::{Enqueued, JobId, NewJob, SqliteStore, Store};
    ///
    /// let path = dir.path().join("shop.db");
    /// let store = SqliteStore::open(&path)?; // creates the jobs table
    /// let mut conn = Connection::open(&path)?;
    /// conn.execute_batch("CREATE TABLE orders (id TEXT PRIMARY KEY)")?;
    ///
    /// let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    /// tx.execute("INSERT INTO orders VALUES ('o-1')", [])?;
    /// let job = NewJob::new("receipt-o-1")?.queue("emails")?;
    /// assert_eq!(SqliteStore::enqueue_in(&tx, &[job])?, [Enqueued::Inserted]);
    /// tx.commit()?; // the order and its job, together
    /// assert!(store.state(JobId::new("receipt-o-1")?)?.is_some());
    ///
    /// let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    /// tx.execute("INSERT INTO orders VALUES ('o-2')", [])?;
    /// SqliteStore::enqueue_in(&tx, &[NewJob::new("receipt-o-2")?])?;
    /// drop(tx); // rolled back: neither the order nor its job
    /// assert!(store.state(JobId::new("receipt-o-2")?)?.is_none());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Busy`] when the write lock cannot be had within the connection's busy timeout;
    /// backend failures (a file without the store's schema among them). The caller's
    /// transaction is left open either way: rolling it back is the caller's decision.
    pub fn enqueue_in(tx: &rusqlite::Transaction<'_>, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let path = std::path::PathBuf::from(tx.path().unwrap_or_default());
        enqueue_on(tx, jobs, &|e| map_error(&path, e))
    }
}
