//! A worker whose connections to PostgreSQL fail under it (a server restart, a terminated
//! session): it waits and carries on with new connections instead of stopping, and a write
//! whose answer was lost with its connection is judged by reading the job back — never
//! written twice, never reported as refused when it was stored.
//!
//! The sessions are ended in the middle of a call: each case locks the schema's `jobs` table,
//! waits until the sessions it means are blocked on that lock, and terminates them
//! (`pg_terminate_backend`). A session ended while idle would not do: the pool notices that
//! at check-out and reconnects before the call.
//!
//! And a lease whose renewals all fail is given up by the worker's own clock when it ends
//! (SQLite, the file locked by another connection): the handler is told then.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use leasefence::postgres::{Client, NoTls};
use leasefence::{
    Error, JobId, JobOutcome, Lease, NewJob, Now, Owner, PgOptions, PgStore, Status, Store, Ttl,
    Worker, WorkerBuilder,
};

/// How long a case waits (real time) for something before failing.
const PATIENCE: Duration = Duration::from_secs(10);

#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn job(id: &str) -> NewJob {
    NewJob::new(id).unwrap()
}

/// `db`'s connection string with the sessions named `app` (`application_name`).
fn named(db: &PgDb, app: &str) -> String {
    named_url(&db.url, app)
}

fn raw(url: &str) -> Client {
    Client::connect(url, NoTls).expect("the test's own connection")
}

/// A lock on a schema's `jobs` table, held by a connection of the test's own (also used by
/// the async worker's fault cases).
pub(crate) struct Held {
    holder: Client,
    url: String,
}

impl Held {
    pub(crate) fn lock(url: &str, schema: &str) -> Held {
        let mut holder = raw(url);
        holder
            .batch_execute(&format!(
                "BEGIN; LOCK TABLE {schema}.jobs IN ACCESS EXCLUSIVE MODE"
            ))
            .unwrap();
        Held {
            holder,
            url: url.to_owned(),
        }
    }

    /// Waits until at least `n` sessions named `app` are blocked on the lock, terminates
    /// those, and lets go of the lock. Returns how many were ended.
    pub(crate) fn cut(mut self, app: &str, n: i64) -> i64 {
        let mut admin = raw(&self.url);
        let waiting = "SELECT count(*) FROM pg_stat_activity \
                       WHERE application_name = $1 AND wait_event_type = 'Lock'";
        let start = Instant::now();
        while admin.query_one(waiting, &[&app]).unwrap().get::<_, i64>(0) < n {
            if start.elapsed() > PATIENCE {
                let rows = admin
                    .query(
                        "SELECT coalesce(application_name, ''), coalesce(state, ''), \
                         coalesce(wait_event_type, ''), coalesce(query, '') FROM pg_stat_activity",
                        &[],
                    )
                    .unwrap();
                let seen: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        format!(
                            "{} | {} | {} | {}",
                            r.get::<_, String>(0),
                            r.get::<_, String>(1),
                            r.get::<_, String>(2),
                            r.get::<_, String>(3)
                        )
                    })
                    .collect();
                panic!(
                    "no {n} sessions of {app} blocked on the lock:\n{}",
                    seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let ended = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
                &[&app],
            )
            .unwrap()
            .len() as i64;
        self.holder.batch_execute("COMMIT").unwrap();
        ended
    }
}

/// A real [`Error::ConnectionLost`], from a store of its own whose session is ended while
/// its call waits on a lock.
fn lost_connection(url: &str, schema: &str) -> Error {
    let app = format!("{schema}_victim");
    let victim = PgOptions::new()
        .schema(schema)
        .pool_size(1)
        .open(&named_url(url, &app))
        .unwrap();
    // Locked first, so that the call is sure to wait on the lock.
    let held = Held::lock(url, schema);
    let call = std::thread::spawn(move || victim.state(JobId::new("any").unwrap()));
    assert_eq!(held.cut(&app, 1), 1);
    let error = call
        .join()
        .unwrap()
        .expect_err("the call's session was ended");
    assert!(matches!(error, Error::ConnectionLost { .. }), "{error:?}");
    error
}

pub(crate) fn named_url(url: &str, app: &str) -> String {
    if url.contains("://") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}application_name={app}")
    } else {
        format!("{url} application_name={app}")
    }
}

/// Claims that meet a lost connection are made again on a new one: the worker goes on and
/// finishes every job instead of stopping with the error.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claims_whose_connection_is_lost_are_made_again_and_the_worker_goes_on() {
    let Some(db) = PgDb::new() else { return };
    let app = db.schema.clone();
    let w = Worker::postgres_with(named(&db, &app), PgOptions::new().schema(&db.schema))
        .concurrency(2)
        .poll_interval(Duration::from_millis(2))
        .build(|ctx| Ok(format!("{} done", ctx.job_id())))
        .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    // Both threads' claims, blocked on the lock, lose their sessions.
    assert!(Held::lock(&db.url, &db.schema).cut(&app, 2) >= 2);
    db.store()
        .enqueue_many(&[job("a"), job("b"), job("c")])
        .unwrap();
    wait_until("every job completed", || {
        handle.stats().completed == 3 || handle.is_shutdown()
    });
    assert!(!handle.is_shutdown(), "a lost connection is not fatal");
    handle.shutdown();
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!(
        (stats.completed, stats.stale_refused, stats.lost),
        (3, 0, 0)
    );
    assert!(stats.errors >= 2, "the lost claims are counted: {stats:?}");
    for id in ["a", "b", "c"] {
        let state = db.store().state(JobId::new(id).unwrap()).unwrap().unwrap();
        assert!(state.done, "{id}");
        assert_eq!(state.result.as_deref(), Some(format!("{id} done").as_str()));
    }
}

/// An idle worker is woken by its watch; the watch's session ended under it is replaced, so a
/// later enqueue still wakes the worker at once, not after its (hour-long) poll.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn the_watch_listens_again_after_its_session_is_ended() {
    let Some(db) = PgDb::new() else { return };
    let app = db.schema.clone();
    let w = Worker::postgres_with(named(&db, &app), PgOptions::new().schema(&db.schema))
        .poll_interval(Duration::from_secs(3600))
        .build(|ctx| Ok(format!("{} done", ctx.job_id())))
        .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    let listening = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                     AND query LIKE '%LISTEN%' AND state = 'idle'";
    let mut admin = raw(&db.url);
    let mut watch_pid = 0i32;
    wait_until("the watch's session", || {
        let rows = admin.query(listening, &[&app]).unwrap();
        rows.first().map(|r| watch_pid = r.get(0)).is_some()
    });
    db.store().enqueue_many(&[job("a")]).unwrap();
    wait_until("a woken by the watch", || handle.stats().completed == 1);
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&watch_pid])
        .unwrap();
    wait_until("a new watch session", || {
        let rows = admin.query(listening, &[&app]).unwrap();
        rows.first()
            .is_some_and(|r| r.get::<_, i32>(0) != watch_pid)
    });
    db.store().enqueue_many(&[job("b")]).unwrap();
    wait_until("b woken by the new watch", || handle.stats().completed == 2);
    handle.shutdown();
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!(stats.completed, 2);
}

/// What [`AnswerLost`] does to the next completion or failure.
const PASS: u8 = 0;
/// Stored, then answered with a lost connection (the reply to the commit never arrived).
const STORED_ANSWER_LOST: u8 = 1;
/// Not stored (the connection was lost before the commit), and meanwhile the lease expired
/// and another worker took the job over (fence 2) and completed it.
const LOST_TAKEN_OVER: u8 = 2;
/// Not stored: this and every later completion or failure meets a lost connection, until the
/// case sets another mode (a server that stays out of reach).
const LOST_UNTIL_RESET: u8 = 3;
/// The next claim meets a lost connection (before it reaches the database).
const LOST_CLAIM: u8 = 4;
/// Stored, then answered `Unavailable`, as `HttpStore` answers when the server's reply was
/// cut short or the server lost its own database connection during the commit.
const STORED_ANSWER_UNAVAILABLE: u8 = 5;
/// Not stored: this and every later completion or failure is answered `Unavailable`, as
/// `HttpStore` answers while the database behind `leasefence serve` restarts, until the case
/// sets another mode.
const UNAVAILABLE_UNTIL_RESET: u8 = 6;

/// What the stores of an [`AnswerLost`] case were asked.
#[derive(Default)]
struct Calls {
    /// How many times the job was read (`inspect`), as the worker reads back a write whose
    /// answer was lost.
    inspects: AtomicUsize,
    /// How many completions or failures were answered `Unavailable` ([`UNAVAILABLE_UNTIL_RESET`]).
    unavailable: AtomicUsize,
    /// When each claim was made and when its answer came back.
    claims: Mutex<Vec<(Instant, Instant)>>,
}

/// A `PgStore` whose next completion or failure (or, with [`LOST_CLAIM`], claim) meets a lost
/// connection, as its mode says: [`PASS`], [`STORED_ANSWER_LOST`], [`LOST_TAKEN_OVER`],
/// [`LOST_UNTIL_RESET`] or [`LOST_CLAIM`].
struct AnswerLost {
    inner: PgStore,
    url: String,
    schema: String,
    lose: Arc<AtomicU8>,
    calls: Arc<Calls>,
}

impl AnswerLost {
    fn lost<T>(&self, job_id: &str, write: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        if self.lose.load(Ordering::SeqCst) == LOST_UNTIL_RESET {
            return Err(lost_connection(&self.url, &self.schema));
        }
        if self.lose.load(Ordering::SeqCst) == UNAVAILABLE_UNTIL_RESET {
            self.calls.unavailable.fetch_add(1, Ordering::SeqCst);
            return Err(Error::Unavailable {
                target: "http://127.0.0.1:7878".into(),
                reason: "the database behind the server is restarting".into(),
            });
        }
        match self.lose.swap(PASS, Ordering::SeqCst) {
            STORED_ANSWER_LOST => {
                write()?;
                Err(lost_connection(&self.url, &self.schema))
            }
            STORED_ANSWER_UNAVAILABLE => {
                write()?;
                Err(Error::Unavailable {
                    target: "http://127.0.0.1:7878".into(),
                    reason: "the answer was cut short".into(),
                })
            }
            LOST_TAKEN_OVER => {
                raw(&self.url)
                    .execute(
                        &format!("UPDATE {}.jobs SET until = 0 WHERE id = $1", self.schema),
                        &[&job_id],
                    )
                    .unwrap();
                let id = JobId::new(job_id).unwrap();
                let thief = Owner::new("thief").unwrap();
                let at = self.inner.now().unwrap();
                let lease = self
                    .inner
                    .claim(id, thief, at, Ttl::new(30.0).unwrap())
                    .unwrap()
                    .expect("the expired job is taken over");
                assert!(self.inner.complete_lease(&lease, at, "stolen").unwrap());
                Err(lost_connection(&self.url, &self.schema))
            }
            _ => write(),
        }
    }
}

/// A handler for an [`AnswerLost`] worker.
trait AnswerLostHandler:
    Fn(&leasefence::JobContext<'_, AnswerLost>) -> Result<String, leasefence::HandlerError>
    + Send
    + Sync
    + 'static
{
}

impl<F> AnswerLostHandler for F where
    F: Fn(&leasefence::JobContext<'_, AnswerLost>) -> Result<String, leasefence::HandlerError>
        + Send
        + Sync
        + 'static
{
}

/// The worker of an [`AnswerLost`] case and what its `on_outcome` hook saw.
fn answer_lost_worker(
    db: &PgDb,
    lose: &Arc<AtomicU8>,
    handler: impl AnswerLostHandler,
) -> (Worker<AnswerLost>, std::sync::mpsc::Receiver<JobOutcome>) {
    answer_lost_worker_with(db, lose, &Arc::default(), |b| b, handler)
}

/// [`answer_lost_worker`] with the worker's settings changed by `tune`, the stores' calls
/// recorded in `calls`.
fn answer_lost_worker_with(
    db: &PgDb,
    lose: &Arc<AtomicU8>,
    calls: &Arc<Calls>,
    tune: impl FnOnce(WorkerBuilder<AnswerLost>) -> WorkerBuilder<AnswerLost>,
    handler: impl AnswerLostHandler,
) -> (Worker<AnswerLost>, std::sync::mpsc::Receiver<JobOutcome>) {
    let (url, schema, lose) = (db.url.clone(), db.schema.clone(), lose.clone());
    let calls = calls.clone();
    let (tx, seen) = channel();
    let tx = Mutex::new(tx);
    let w = Worker::builder(move || {
        Ok(AnswerLost {
            inner: PgOptions::new()
                .schema(&schema)
                .pool_size(1)
                .database_clock(true)
                .open(&url)?,
            url: url.clone(),
            schema: schema.clone(),
            lose: lose.clone(),
            calls: calls.clone(),
        })
    })
    .poll_interval(Duration::from_millis(2))
    .drain(true)
    .on_outcome(move |_lease, outcome| {
        let _ = tx.lock().unwrap().send(outcome.clone());
    });
    let w = tune(w).build(handler).unwrap();
    (w, seen)
}

/// The completion was stored but its answer lost: the worker tries it again, is refused (the
/// job is done), reads the job back, and reports it completed — not refused, not an error.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_stored_before_its_answer_was_lost_is_reported_completed() {
    completion_stored_then_answered(STORED_ANSWER_LOST);
}

/// The same when the answer is `Unavailable` (a server in between, `HttpStore`): a write whose
/// answer never arrived may have taken effect there too, so the refusal of the try after it is
/// read back — completed, not refused.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_stored_before_its_answer_came_back_unavailable_is_reported_completed() {
    completion_stored_then_answered(STORED_ANSWER_UNAVAILABLE);
}

/// A worker's one completion is stored, then answered as `mode` says (once): it must be
/// reported completed, and stored once under fence 1.
fn completion_stored_then_answered(mode: u8) {
    let Some(db) = PgDb::new() else { return };
    db.store().enqueue_many(&[job("a")]).unwrap();
    let lose = Arc::new(AtomicU8::new(mode));
    let (w, seen) = answer_lost_worker(&db, &lose, |ctx| Ok(format!("{} done", ctx.job_id())));
    let stats = w.run().expect("run ends without an error");
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed), "{outcome:?}");
    assert_eq!(lose.load(Ordering::SeqCst), PASS, "answered so once");
    assert_eq!(
        (stats.completed, stats.stale_refused, stats.cancelled),
        (1, 0, 0),
        "{stats:?}"
    );
    let state = db.store().state(JobId::new("a").unwrap()).unwrap().unwrap();
    assert_eq!(
        (state.done, state.fence, state.result.as_deref()),
        (true, 1, Some("a done"))
    );
}

/// The same for a failure: recorded, answer lost, tried again and refused, read back: the
/// worker reports the retry it recorded (with the time the job runs again), not a cancel.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_failure_recorded_before_its_answer_was_lost_is_reported_retrying() {
    let Some(db) = PgDb::new() else { return };
    db.store().enqueue_many(&[job("a")]).unwrap();
    let lose = Arc::new(AtomicU8::new(STORED_ANSWER_LOST));
    let (w, seen) = answer_lost_worker(&db, &lose, |_ctx| Err("boom".into()));
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    handle.shutdown();
    let stats = run.join().unwrap().expect("run ends without an error");
    let info = db
        .store()
        .inspect(JobId::new("a").unwrap(), db.store().now().unwrap())
        .unwrap()
        .unwrap();
    match outcome {
        JobOutcome::Retrying { at, error } => {
            assert_eq!(error, "boom");
            assert_eq!(at, info.not_before, "the retry time stored");
        }
        other => panic!("expected Retrying, got {other:?}"),
    }
    assert_eq!(
        (stats.retried, stats.cancelled, stats.stale_refused),
        (1, 0, 0),
        "{stats:?}"
    );
    assert_eq!(info.error.as_deref(), Some("boom"));
    assert_eq!((info.state.fence, info.state.owner), (1, None));
    assert_ne!(info.status, Status::Dead);
}

impl Store for AnswerLost {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool, Error> {
        self.inner.enqueue(job_id)
    }
    fn state(&self, job_id: JobId<'_>) -> Result<Option<leasefence::JobState>, Error> {
        self.inner.state(job_id)
    }
    fn claim(
        &self,
        id: JobId<'_>,
        o: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>, Error> {
        self.inner.claim(id, o, now, ttl)
    }
    fn renew(
        &self,
        id: JobId<'_>,
        o: Owner<'_>,
        f: i64,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool, Error> {
        self.inner.renew(id, o, f, now, ttl)
    }
    fn complete(
        &self,
        id: JobId<'_>,
        o: Owner<'_>,
        f: i64,
        now: Now,
        r: &str,
    ) -> Result<bool, Error> {
        self.lost(id.as_str(), || self.inner.complete(id, o, f, now, r))
    }
    fn release(&self, id: JobId<'_>, o: Owner<'_>, f: i64) -> Result<bool, Error> {
        self.inner.release(id, o, f)
    }
    fn enqueue_jobs(&self, jobs: &[NewJob]) -> Result<Vec<leasefence::Enqueued>, Error> {
        self.inner.enqueue_jobs(jobs)
    }
    fn claim_batch_in(
        &self,
        queues: &leasefence::Queues,
        o: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: leasefence::BatchSize,
    ) -> Result<Vec<Lease>, Error> {
        let asked = Instant::now();
        let answer = if self.lose.load(Ordering::SeqCst) == LOST_CLAIM {
            self.lose.store(PASS, Ordering::SeqCst);
            Err(lost_connection(&self.url, &self.schema))
        } else {
            self.inner.claim_batch_in(queues, o, now, ttl, n)
        };
        let calls = &self.calls.claims;
        calls.lock().unwrap().push((asked, Instant::now()));
        answer
    }
    fn pause(&self, queue: &leasefence::Queue) -> Result<bool, Error> {
        self.inner.pause(queue)
    }
    fn resume(&self, queue: &leasefence::Queue) -> Result<bool, Error> {
        self.inner.resume(queue)
    }
    fn queues(&self, now: Now) -> Result<Vec<leasefence::QueueInfo>, Error> {
        self.inner.queues(now)
    }
    fn fail(
        &self,
        l: &Lease,
        now: Now,
        e: &str,
        at: Option<Now>,
    ) -> Result<Option<leasefence::Failed>, Error> {
        self.lost(&l.job_id, || self.inner.fail(l, now, e, at))
    }
    fn cancel(&self, id: JobId<'_>, now: Now) -> Result<bool, Error> {
        self.inner.cancel(id, now)
    }
    fn purge(&self, before: Now) -> Result<u64, Error> {
        self.inner.purge(before)
    }
    fn list(
        &self,
        now: Now,
        s: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<leasefence::JobInfo>, Error> {
        self.inner.list(now, s, after, limit)
    }
    fn history(&self, id: JobId<'_>) -> Result<Option<leasefence::History>, Error> {
        self.inner.history(id)
    }
    fn add_schedule(&self, schedule: &leasefence::Schedule, now: Now) -> leasefence::Result<bool> {
        self.inner.add_schedule(schedule, now)
    }
    fn remove_schedule(&self, name: leasefence::ScheduleName<'_>) -> leasefence::Result<bool> {
        self.inner.remove_schedule(name)
    }
    fn schedules(&self) -> leasefence::Result<Vec<leasefence::ScheduleInfo>> {
        self.inner.schedules()
    }
    fn enqueue_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[leasefence::SlotRun],
    ) -> leasefence::Result<Option<Vec<Option<leasefence::Enqueued>>>> {
        self.inner.enqueue_slots(scheduler, now, runs)
    }
    fn inspect(&self, id: JobId<'_>, now: Now) -> Result<Option<leasefence::JobInfo>, Error> {
        self.calls.inspects.fetch_add(1, Ordering::SeqCst);
        self.inner.inspect(id, now)
    }
    fn retry(&self, ids: &[JobId<'_>], now: Now) -> Result<Vec<bool>, Error> {
        self.inner.retry(ids, now)
    }
    fn retry_dead_in(&self, queues: &leasefence::Queues, now: Now) -> Result<u64, Error> {
        self.inner.retry_dead_in(queues, now)
    }
    fn delete(&self, ids: &[JobId<'_>]) -> Result<Vec<bool>, Error> {
        self.inner.delete(ids)
    }
    fn stats(&self, now: Now) -> Result<leasefence::Stats, Error> {
        self.inner.stats(now)
    }
    fn admit(&self, resource: leasefence::Resource<'_>, f: i64) -> Result<bool, Error> {
        self.inner.admit(resource, f)
    }
    fn database_now(&self) -> Result<Option<Now>, Error> {
        self.inner.database_now()
    }
    fn complete_lease(&self, l: &Lease, now: Now, r: &str) -> Result<bool, Error> {
        self.lost(&l.job_id, || self.inner.complete_lease(l, now, r))
    }
    fn complete_batch(&self, c: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>, Error> {
        let first = c.first().map_or(String::new(), |(l, _)| l.job_id.clone());
        self.lost(&first, || self.inner.complete_batch(c, now))
    }
    fn release_lease(&self, l: &Lease) -> Result<bool, Error> {
        self.inner.release_lease(l)
    }
    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>, Error> {
        self.inner.renew_batch(leases, now, ttl)
    }
}

/// A statement the server cancels (`statement_timeout`, here 50 ms while the table is locked)
/// rolled its transaction back: it is [`Error::Busy`], retryable, and nothing was written.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_statement_cancelled_by_statement_timeout_is_busy_and_writes_nothing() {
    let Some(db) = PgDb::new() else { return };
    db.store().enqueue_many(&[job("a")]).unwrap();
    let url = if db.url.contains("://") {
        let sep = if db.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20statement_timeout%3D50", db.url)
    } else {
        format!("{} options='-c statement_timeout=50'", db.url)
    };
    let impatient = PgOptions::new()
        .schema(&db.schema)
        .lock_timeout(Duration::from_secs(30))
        .open(&url)
        .unwrap();
    let held = Held::lock(&db.url, &db.schema);
    let owner = Owner::new("w").unwrap();
    let at = db.store().now().unwrap();
    let claimed = impatient.claim(JobId::new("a").unwrap(), owner, at, Ttl::new(30.0).unwrap());
    drop(held);
    let error = claimed.expect_err("cancelled after 50 ms");
    assert!(matches!(error, Error::Busy), "{error:?}");
    assert!(error.is_retryable());
    let state = db.store().state(JobId::new("a").unwrap()).unwrap().unwrap();
    assert_eq!((state.fence, state.owner), (0, None), "nothing written");
}

/// While every renewal fails (here: the SQLite file locked by another connection, so each one
/// is busy), the worker gives the lease up by its own clock when it ends: the handler is told
/// at `until`, not when the store answers again, and nothing it returns is stored.
#[test]
fn a_lease_that_runs_out_while_every_renewal_fails_is_given_up_at_its_end() {
    let db = Db::new();
    leasefence::SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_many(&[job("j")])
        .unwrap();
    let clock = leasefence::ManualClock::new(0.0);
    let path = db.path.clone();
    let (started_tx, started) = channel();
    let started_tx = Mutex::new(started_tx);
    let (told_tx, told) = channel();
    let told_tx = Mutex::new(told_tx);
    let (outcome_tx, outcomes) = channel();
    let outcome_tx = Mutex::new(outcome_tx);
    let w = Worker::builder(move || {
        leasefence::SqliteOptions::new()
            .busy_timeout(Duration::from_millis(1))
            .open(&path)
    })
    .clock(clock.clone())
    .ttl(30.0)
    .owner_prefix("w")
    .poll_interval(Duration::from_millis(2))
    .on_outcome(move |_, outcome| {
        let _ = outcome_tx.lock().unwrap().send(outcome.clone());
    })
    .build(move |ctx| {
        started_tx.lock().unwrap().send(()).unwrap();
        let cancelled = ctx.token().wait_timeout(Duration::from_secs(30));
        told_tx.lock().unwrap().send(cancelled).unwrap();
        Ok("late".to_string())
    })
    .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    started.recv_timeout(PATIENCE).unwrap();
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    // Renewals are due from 10 s on; each one is busy.
    clock.set(29.0);
    wait_until("renewals failing", || handle.stats().errors >= 3);
    assert!(
        told.recv_timeout(Duration::from_millis(100)).is_err(),
        "not told while the lease lasts"
    );
    assert_eq!(handle.stats().lost, 0);
    clock.set(30.0);
    let cancelled = told
        .recv_timeout(PATIENCE)
        .expect("told at the lease's end");
    assert!(cancelled, "told by its token, not by its time running out");
    assert_eq!(handle.stats().lost, 1);
    // Its late result meets the locked file too: not stored. The lock is let go only then — a
    // renewal asked before the lease's end and still waiting on the heartbeat's thread could
    // otherwise be granted after it (judged at the time it was asked) and take the write.
    let outcome = outcomes.recv_timeout(PATIENCE).expect("an outcome");
    assert!(
        matches!(outcome, leasefence::JobOutcome::StoreError(_)),
        "{outcome:?}"
    );
    handle.shutdown();
    blocker.execute_batch("ROLLBACK").unwrap();
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!((stats.completed, stats.lost), (0, 1), "{stats:?}");
    // Nothing stored. (A claim already waiting on the lock when the worker was stopped may
    // have taken the expired job again, under fence 2, and given it back at the shutdown.)
    let row = db.row("j").unwrap();
    assert_eq!(
        (row.result.as_deref(), row.done),
        (None, 0),
        "nothing stored"
    );
    assert_eq!(
        row.fence,
        i64::try_from(stats.claimed).unwrap(),
        "{row:?} {stats:?}"
    );
}

/// A completion whose connection is lost, and lost again on every try for a whole ttl (1 s
/// here): the worker gives up, reports the store error, and leaves the lease to expire. It
/// does not read the job back after giving up — the server is taken to be out of reach — and
/// never reports a completion it could not make. Once the server is back, the expired job is
/// claimed again (fence 2) and completed.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_whose_connection_stays_lost_for_a_ttl_is_reported_a_store_error() {
    let Some(db) = PgDb::new() else { return };
    db.store().enqueue_many(&[job("a")]).unwrap();
    let lose = Arc::new(AtomicU8::new(LOST_UNTIL_RESET));
    let calls = Arc::new(Calls::default());
    let handler = |ctx: &leasefence::JobContext<'_, AnswerLost>| {
        Ok(format!("{} done under {}", ctx.job_id(), ctx.fence()))
    };
    let (w, seen) = answer_lost_worker_with(&db, &lose, &calls, |b| b.ttl(1.0), handler);
    let run = std::thread::spawn(move || w.run());
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    assert!(
        matches!(&outcome, JobOutcome::StoreError(e) if e.starts_with("lost the connection")),
        "{outcome:?}"
    );
    assert_eq!(
        calls.inspects.load(Ordering::SeqCst),
        0,
        "read back after giving up"
    );
    // Nothing stored. (The worker gave up when the lease ran out: the job may already be
    // claimed again, under fence 2.)
    let state = db.store().state(JobId::new("a").unwrap()).unwrap().unwrap();
    assert_eq!(
        (state.done, state.result.as_deref()),
        (false, None),
        "{state:?}"
    );
    // The server is back: the job, its lease run out, is taken again and completed.
    lose.store(PASS, Ordering::SeqCst);
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed), "{outcome:?}");
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!(
        (stats.claimed, stats.completed, stats.stale_refused),
        (2, 1, 0),
        "{stats:?}"
    );
    assert!(stats.errors >= 2, "every lost try is counted: {stats:?}");
    let state = db.store().state(JobId::new("a").unwrap()).unwrap().unwrap();
    assert_eq!(
        (state.done, state.fence, state.result.as_deref()),
        (true, 2, Some("a done under 2"))
    );
}

/// A completion answered `Unavailable` again and again — `HttpStore` while the database behind
/// `leasefence serve` restarts — is tried again for as long as the lease may be live, as a lost
/// connection is, not given up after the few quick retries of a busy store: once the server
/// answers, it is stored under its own fence and reported completed, and the job runs once.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_answered_unavailable_for_a_while_is_stored_once_the_server_answers() {
    let Some(db) = PgDb::new() else { return };
    db.store().enqueue_many(&[job("a")]).unwrap();
    let lose = Arc::new(AtomicU8::new(UNAVAILABLE_UNTIL_RESET));
    let calls = Arc::new(Calls::default());
    let handler = |ctx: &leasefence::JobContext<'_, AnswerLost>| {
        Ok(format!("{} done under {}", ctx.job_id(), ctx.fence()))
    };
    let (w, seen) = answer_lost_worker_with(&db, &lose, &calls, |b| b.ttl(30.0), handler);
    let run = std::thread::spawn(move || w.run());
    // Past the quick retries (3, ~60 ms): eight answers `Unavailable`, or an early outcome.
    let since = Instant::now();
    let early = loop {
        if calls.unavailable.load(Ordering::SeqCst) >= 8 {
            break None;
        }
        assert!(
            since.elapsed() < PATIENCE,
            "the completion stopped being tried"
        );
        if let Ok(outcome) = seen.recv_timeout(Duration::from_millis(10)) {
            break Some(outcome);
        }
    };
    assert_eq!(early, None, "an outcome while the server was unavailable");
    lose.store(PASS, Ordering::SeqCst);
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed), "{outcome:?}");
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!(
        (
            stats.claimed,
            stats.completed,
            stats.stale_refused,
            stats.cancelled
        ),
        (1, 1, 0, 0),
        "{stats:?}"
    );
    let state = db.store().state(JobId::new("a").unwrap()).unwrap().unwrap();
    assert_eq!(
        (state.done, state.fence, state.result.as_deref()),
        (true, 1, Some("a done under 1"))
    );
}

/// After a claim meets a lost connection (a server restarting, say) the worker waits before it
/// claims again — its poll interval, but no more than half a second — rather than hammering
/// the server, or leaving its queue for a whole poll interval.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn after_a_lost_claim_the_worker_waits_half_a_second_at_most_before_claiming_again() {
    let Some(db) = PgDb::new() else { return };
    let lose = Arc::new(AtomicU8::new(LOST_CLAIM));
    let calls = Arc::new(Calls::default());
    let handler = |ctx: &leasefence::JobContext<'_, AnswerLost>| Ok(ctx.job_id().to_owned());
    let tune = |b: WorkerBuilder<AnswerLost>| b.drain(false).poll_interval(Duration::from_secs(60));
    let (w, _) = answer_lost_worker_with(&db, &lose, &calls, tune, handler);
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    wait_until("a claim after the lost one", || {
        calls.claims.lock().unwrap().len() >= 2
    });
    handle.shutdown();
    let stats = run.join().unwrap().expect("a lost claim is not fatal");
    assert!(stats.errors >= 1, "{stats:?}");
    let claims = calls.claims.lock().unwrap();
    let waited = claims[1].0 - claims[0].1;
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(30),
        "claimed again {waited:?} after the lost claim"
    );
}

/// The other side of a lost answer: the completion was *not* stored, and meanwhile another
/// worker took the expired job over (fence 2) and completed it. The retry is refused and the
/// job read back is done under another fence: a stale completion, reported `Refused` — not
/// mistaken for this worker's own — and the other worker's result stands.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_lost_completion_whose_job_was_taken_over_meanwhile_is_reported_refused() {
    let Some(db) = PgDb::new() else { return };
    db.store().enqueue_many(&[job("a")]).unwrap();
    let lose = Arc::new(AtomicU8::new(LOST_TAKEN_OVER));
    let (w, seen) = answer_lost_worker(&db, &lose, |ctx| Ok(format!("{} done", ctx.job_id())));
    let stats = w.run().expect("run ends without an error");
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    assert!(matches!(outcome, JobOutcome::Refused), "{outcome:?}");
    assert_eq!((stats.completed, stats.stale_refused), (0, 1), "{stats:?}");
    let state = db.store().state(JobId::new("a").unwrap()).unwrap().unwrap();
    assert_eq!(
        (state.done, state.fence, state.result.as_deref()),
        (true, 2, Some("stolen"))
    );
}

/// The same for a failure: not recorded, the job taken over and completed meanwhile: the
/// retried failure is refused and reported `Refused`, not a retry this worker never recorded.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_lost_failure_whose_job_was_taken_over_meanwhile_is_reported_refused() {
    let Some(db) = PgDb::new() else { return };
    db.store().enqueue_many(&[job("a")]).unwrap();
    let lose = Arc::new(AtomicU8::new(LOST_TAKEN_OVER));
    let (w, seen) = answer_lost_worker(&db, &lose, |_ctx| Err("boom".into()));
    let stats = w.run().expect("run ends without an error");
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    assert!(matches!(outcome, JobOutcome::Refused), "{outcome:?}");
    assert_eq!((stats.retried, stats.stale_refused), (0, 1), "{stats:?}");
    let info = db
        .store()
        .inspect(JobId::new("a").unwrap(), db.store().now().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((info.state.fence, info.state.done), (2, true));
    assert_eq!(info.error, None, "this worker's failure was never recorded");
}

/// A last attempt's failure, recorded but its answer lost: the job read back is dead (and so
/// done) under the lease's fence with this error — reported `Dead`, not refused.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_last_failure_recorded_before_its_answer_was_lost_is_reported_dead() {
    let Some(db) = PgDb::new() else { return };
    db.store()
        .enqueue_many(&[job("a").max_attempts(1)])
        .unwrap();
    let lose = Arc::new(AtomicU8::new(STORED_ANSWER_LOST));
    let (w, seen) = answer_lost_worker(&db, &lose, |_ctx| Err("boom".into()));
    let stats = w.run().expect("run ends without an error");
    let outcome = seen.recv_timeout(PATIENCE).unwrap();
    assert!(
        matches!(&outcome, JobOutcome::Dead { error } if error == "boom"),
        "{outcome:?}"
    );
    assert_eq!(
        (stats.dead, stats.cancelled, stats.stale_refused),
        (1, 0, 0),
        "{stats:?}"
    );
    let info = db
        .store()
        .inspect(JobId::new("a").unwrap(), db.store().now().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((info.status, info.state.fence), (Status::Dead, 1));
}

/// The backend pids of the sessions named `app`.
pub(crate) fn sessions(admin: &mut Client, app: &str) -> Vec<i32> {
    admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Terminates the backend `pid` and waits until the server has ended it.
fn terminate(admin: &mut Client, pid: i32) {
    let ended: bool = admin
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap()
        .get(0);
    assert!(ended, "pg_terminate_backend({pid}) refused");
    wait_until("the terminated session to end", || {
        admin
            .query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .unwrap()
            .is_empty()
    });
}

/// A pooled session the server ended while it sat idle in the pool (an idle timeout, an
/// operator's `pg_terminate_backend`) is noticed at check-out and replaced: the next call
/// works instead of failing with a lost connection.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_session_ended_while_idle_in_the_pool_is_replaced_before_the_next_call() {
    let Some(db) = PgDb::new() else { return };
    let app = format!("{}_idle", db.schema);
    let store = PgOptions::new()
        .schema(&db.schema)
        .pool_size(1)
        .open(&named(&db, &app))
        .unwrap();
    store.enqueue_many(&[job("a")]).unwrap();
    let mut admin = raw(&db.url);
    let before = sessions(&mut admin, &app);
    assert_eq!(before.len(), 1, "one pooled session: {before:?}");
    terminate(&mut admin, before[0]);
    assert_eq!(
        store
            .state(JobId::new("a").unwrap())
            .unwrap()
            .map(|s| s.fence),
        Some(0)
    );
    let after = sessions(&mut admin, &app);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before, "the ended session was replaced");
}

/// A session ended in the middle of a transaction, between two statements, is a lost
/// connection on the next one (here `complete_with`'s commit): the driver finds the socket
/// closed. Nothing of the transaction is stored, and the next call works on a new session.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_session_ended_inside_a_transaction_is_a_lost_connection_and_nothing_is_stored() {
    let Some(db) = PgDb::new() else { return };
    let store = PgOptions::new()
        .schema(&db.schema)
        .pool_size(1)
        .open(&db.url)
        .unwrap();
    store.enqueue_many(&[job("a")]).unwrap();
    let me = Owner::new("w").unwrap();
    let lease = store
        .claim(
            JobId::new("a").unwrap(),
            me,
            Now::new(1.0).unwrap(),
            Ttl::new(100.0).unwrap(),
        )
        .unwrap()
        .expect("claimable");
    let mut admin = raw(&db.url);
    let answer = store.complete_with(&lease, Now::new(2.0).unwrap(), "done", |tx| {
        let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        terminate(&mut admin, pid);
        Ok::<_, Error>(())
    });
    match &answer {
        Err(Error::ConnectionLost { target, .. }) => {
            assert!(target.contains("dbname="), "{target}")
        }
        other => panic!("expected ConnectionLost, got {other:?}"),
    }
    let row = db.row("a").unwrap();
    assert_eq!((row.fence, row.done, row.result), (1, 0, None));
    assert!(
        store
            .complete_lease(&lease, Now::new(3.0).unwrap(), "done")
            .unwrap()
    );
    assert_eq!(db.row("a").unwrap().result.as_deref(), Some("done"));
}
