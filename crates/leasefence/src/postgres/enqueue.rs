//! Enqueueing on PostgreSQL: the inserts of `enqueue_jobs`, in the store's own transaction or
//! in the caller's ([`PgStore::enqueue_in`]).

use postgres::ToStatement;

use super::{PgStore, key, sql};
use crate::error::{Error, Result};
use crate::types::{Enqueued, NewJob};

/// How many times an enqueue refused by a unique key is tried again when the job that held the
/// key was deleted before it could be named.
const VANISHED_RETRIES: usize = 3;

/// The fewest jobs one `enqueue_jobs` call inserts before it asks how many rows the planner
/// believes `jobs` holds (one more round trip, see [`PgStore::inform_planner`]).
const PLANNER_CHECK_AT: usize = 1_000;

impl PgStore {
    /// After an `enqueue_jobs` call that inserted `inserted` jobs (committed already): when
    /// that is at least [`PLANNER_CHECK_AT`] and PostgreSQL's planner still believes `jobs`
    /// holds fewer rows than this call alone added (`planner_rows.sql`: a table never analyzed,
    /// or analyzed while nearly empty, that autovacuum — a minute apart at best — has not
    /// reached yet), its statistics are refreshed now (`analyze_jobs.sql`). Without them a
    /// claim's plan sorts every ready job (a bitmap scan of the ready index the planner thinks
    /// empty) instead of walking `jobs_ready` to the first one: milliseconds per claim, growing
    /// with the backlog. At most a couple of times while a table fills, since each refresh
    /// raises the count. The jobs are stored either way: a failure here is logged, not
    /// returned.
    pub(super) fn inform_planner(&self, conn: &mut super::Conn, inserted: usize) {
        if inserted < PLANNER_CHECK_AT {
            return;
        }
        let refreshed = conn
            .query_one(sql::PLANNER_ROWS, &[])
            .map(|row| row.get::<_, f64>(0))
            .and_then(|believed| {
                if believed >= inserted as f64 {
                    return Ok(None);
                }
                conn.batch_execute(sql::ANALYZE_JOBS)
                    .map(|()| Some(believed))
            });
        match refreshed {
            Ok(Some(believed)) => tracing::debug!(
                inserted,
                believed,
                "planner statistics of jobs refreshed after a large enqueue"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                error = %self.err(e),
                "could not refresh the planner statistics of jobs after a large enqueue; \
                 autovacuum will"
            ),
        }
    }

    /// Inserts `jobs` in `tx`: the locks of their ids and unique keys (`lock_ids.sql`), then
    /// `enqueue.sql` per job and `enqueue_match.sql` to tell why one inserted nothing, then
    /// `notify.sql` (delivered when `tx` commits) if any was inserted.
    pub(super) fn enqueue_on(
        &self,
        tx: &mut postgres::Transaction<'_>,
        jobs: &[NewJob],
        insert: &(impl ToStatement + ?Sized),
        matching: &(impl ToStatement + ?Sized),
    ) -> Result<Vec<Enqueued>> {
        // The ids' locks (see lock_ids.sql) and, in the same buckets, the unique keys': the
        // window of unique_for is checked by a statement that must see every earlier enqueue of
        // its key.
        let unique: Vec<String> = jobs
            .iter()
            .filter_map(|job| {
                job.unique_key_value()
                    .map(|k| format!("\u{1f}unique\u{1f}{}\u{1f}{k}", job.queue_name()))
            })
            .collect();
        let mut locked: Vec<&str> = jobs.iter().map(NewJob::id).collect();
        locked.extend(unique.iter().map(String::as_str));
        self.lock_ids(tx, &locked)?;
        let mut outcomes = Vec::with_capacity(jobs.len());
        for job in jobs {
            let queue = job.queue_name().as_str();
            let mut tries = 0;
            let outcome = loop {
                let changed = tx
                    .execute(
                        insert,
                        &[
                            &job.id(),
                            &job.payload_bytes(),
                            &job.priority_value(),
                            &job.not_before_value(),
                            &i64::from(job.max_attempts_value()),
                            &queue,
                            &job.kind_name(),
                            &job.unique_key_value(),
                            &job.unique_for_value(),
                        ],
                    )
                    .map_err(|e| self.err(e))?;
                if changed == 1 {
                    break Enqueued::Inserted;
                }
                let row = tx
                    .query_opt(matching, &[&job.id(), &queue, &job.unique_key_value()])
                    .map_err(|e| self.err(e))?;
                match row {
                    Some(row) if row.get::<_, bool>(1) => break Enqueued::Known,
                    Some(row) => break Enqueued::Duplicate { of: row.get(0) },
                    // The job that held the key was deleted in between: insert again.
                    None if tries < VANISHED_RETRIES => tries += 1,
                    None => return Err(Error::Busy),
                }
            };
            outcomes.push(outcome);
        }
        if outcomes.iter().any(Enqueued::is_inserted) {
            // Delivered to the watches when this transaction commits, not before.
            tx.execute(sql::NOTIFY, &[&self.schema()])
                .map_err(|e| self.err(e))?;
        }
        Ok(outcomes)
    }

    /// Enqueues `jobs` inside **the caller's own transaction**, on the caller's connection to
    /// the store's database: the jobs exist if and only if the caller's other writes in `tx`
    /// commit — River's transactional enqueue. Each job is judged exactly as
    /// [`Store::enqueue_jobs`](crate::Store::enqueue_jobs) judges it (a known id untouched, a
    /// held unique key a duplicate), under the same per-id and per-key locks, and idle workers
    /// are woken when `tx` commits (not before, and not at all if it rolls back).
    ///
    /// The store's schema is put first on `tx`'s `search_path` for these statements only, and
    /// the caller's `search_path` is set back before this returns. `tx` must be `READ
    /// COMMITTED` (PostgreSQL's default): the fence floor of an id purged concurrently must be
    /// visible to the insert, which a `REPEATABLE READ` or `SERIALIZABLE` snapshot taken
    /// earlier would hide — so the job could be handed fences it already had. Any other
    /// isolation level is refused, with nothing written (READ UNCOMMITTED, which PostgreSQL
    /// runs as READ COMMITTED, is taken).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use leasefence::postgres::{Client, NoTls};
    /// use leasefence::{NewJob, PgStore};
    ///
    /// let store = PgStore::open("postgres://postgres@127.0.0.1/test")?;
    /// let mut client = Client::connect("postgres://postgres@127.0.0.1/test", NoTls)?;
    /// let mut tx = client.transaction()?;
    /// tx.execute("INSERT INTO orders (id) VALUES ('o-1')", &[])?;
    /// store.enqueue_in(&mut tx, &[NewJob::new("receipt-o-1")?.queue("emails")?])?;
    /// tx.commit()?; // the order and its job, together
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an id the backend cannot store, or naming `tx` when it is
    /// not `READ COMMITTED`; busy, connection or
    /// backend failures. The caller's transaction is left open either way (after an error
    /// PostgreSQL refuses further statements in it until it is rolled back).
    pub fn enqueue_in(
        &self,
        tx: &mut postgres::Transaction<'_>,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        for job in jobs {
            key("job_id", job.id())?;
        }
        let pushed = tx
            .query_one(sql::SEARCH_PATH_PUSH, &[&self.schema()])
            .map_err(|e| self.err(e))?;
        let previous: String = pushed.get(0);
        let isolation: String = pushed.get(2);
        // PostgreSQL runs READ UNCOMMITTED as READ COMMITTED (but reports it as asked).
        if !matches!(isolation.as_str(), "read committed" | "read uncommitted") {
            tx.execute(sql::SEARCH_PATH_POP, &[&previous])
                .map_err(|e| self.err(e))?;
            return Err(Error::invalid(
                "tx",
                format!(
                    "enqueue_in needs a READ COMMITTED transaction, not {isolation}: an older \
                     snapshot could hide the fence floor of an id purged meanwhile and hand \
                     its fences out again"
                ),
            ));
        }
        let outcomes = self.enqueue_on(tx, jobs, sql::ENQUEUE, sql::ENQUEUE_MATCH);
        // Set back even after an error, when the transaction still takes statements.
        let restored = tx.execute(sql::SEARCH_PATH_POP, &[&previous]);
        let outcomes = outcomes?;
        restored.map_err(|e| self.err(e))?;
        Ok(outcomes)
    }
}
