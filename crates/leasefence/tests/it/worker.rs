//! The worker runtime on a manual clock: lost leases, refused stale writes, fenced side effects,
//! retries, dead jobs, scheduling and graceful shutdown. Each case asserts what the worker
//! returned, its counters, and the stored rows read back through an independent connection.
//!
//! No case sleeps on the lease clock: time moves only when a case moves the `ManualClock`. Real
//! time is used only to wait (bounded) for the worker's threads to notice.
//!
//! The cases defined with `worker_case!` run on both backends (`::sqlite`, `::pg`); the others
//! say why they are SQLite-only.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::logs;
use leasefence::{
    Backoff, Error, JobId, JobOutcome, Lease, ManualClock, NewJob, Now, Owner, PgStore,
    ShutdownHandle, SqliteOptions, SqliteStore, Status, Store, Ttl, Worker, WorkerBuilder,
    WorkerStats,
};

type BoxError = Box<dyn StdError + Send + Sync>;

/// How long a case waits (real time) for the worker to notice something before failing.
const PATIENCE: Duration = Duration::from_secs(10);

fn job(id: &str) -> NewJob {
    NewJob::new(id).unwrap()
}

fn open(db: &Db) -> SqliteStore {
    SqliteStore::open(&db.path).unwrap()
}

/// Opens one store of a backend; what `Worker::builder` takes.
type Opener<S> = Arc<dyn Fn() -> Result<S, Error> + Send + Sync>;

/// The backend a worker case runs on: its independent probe and a way to open its stores.
trait Bench {
    type S: Store + Send + 'static;
    /// The stored rows, read independently of the code under test.
    fn db(&self) -> &dyn Probe;
    /// Opens a store judged by the caller's clock (so a `ManualClock` drives the leases).
    fn opener(&self) -> Opener<Self::S>;
    /// A store of the case's own.
    fn open(&self) -> Self::S {
        (self.opener())().unwrap()
    }
}

/// SQLite: a fresh file.
struct SqliteBench(Db);

impl Bench for SqliteBench {
    type S = SqliteStore;
    fn db(&self) -> &dyn Probe {
        &self.0
    }
    fn opener(&self) -> Opener<SqliteStore> {
        let path = self.0.path.clone();
        Arc::new(move || SqliteStore::open(&path))
    }
}

/// PostgreSQL: a fresh schema; each store holds one connection, as a worker's do.
struct PgBench(PgDb);

impl Bench for PgBench {
    type S = PgStore;
    fn db(&self) -> &dyn Probe {
        &self.0
    }
    fn opener(&self) -> Opener<PgStore> {
        let (url, options) = (self.0.url.clone(), self.0.options().pool_size(1));
        Arc::new(move || options.open(&url))
    }
}

/// Defines a worker case once, generic over its [`Bench`], and runs it as `::sqlite` and `::pg`
/// (ignored, with the reason, without `LEASEFENCE_TEST_PG`).
macro_rules! worker_case {
    ($(#[$meta:meta])* fn $name:ident($t:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn case<B: Bench>($t: &B) $body

            #[test]
            fn sqlite() {
                case(&SqliteBench(Db::new()));
            }

            #[test]
            #[cfg_attr(not(leasefence_pg), ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case")]
            fn pg() {
                let Some(db) = PgDb::new() else { return };
                case(&PgBench(db));
            }
        }
    };
}

/// A worker on the bench's stores driven by `clock`, owners `{prefix}-{thread}`, polling every
/// 2 ms.
fn worker<B: Bench>(t: &B, clock: &ManualClock, prefix: &str) -> WorkerBuilder<B::S> {
    let open = t.opener();
    Worker::builder(move || open())
        .clock(clock.clone())
        .owner_prefix(prefix)
        .poll_interval(Duration::from_millis(2))
        .shutdown_deadline(Duration::from_secs(5))
}

/// A worker on the SQLite file of `db` (for the SQLite-only cases).
fn sqlite_worker(db: &Db, clock: &ManualClock, prefix: &str) -> WorkerBuilder<SqliteStore> {
    Worker::sqlite(&db.path)
        .clock(clock.clone())
        .owner_prefix(prefix)
        .poll_interval(Duration::from_millis(2))
        .shutdown_deadline(Duration::from_secs(5))
}

type Running = JoinHandle<Result<WorkerStats, Error>>;

/// Runs a worker on its own thread.
fn spawn<S: Store + Send + 'static>(worker: Worker<S>) -> (ShutdownHandle, Running) {
    let handle = worker.shutdown_handle();
    (handle, std::thread::spawn(move || worker.run()))
}

/// Runs a draining worker (`.drain(true)`) to its end.
trait RunDrained {
    fn run_drained(self) -> WorkerStats;
}

impl<S: Store + Send + 'static> RunDrained for Worker<S> {
    #[track_caller]
    fn run_drained(self) -> WorkerStats {
        run_to_end(self).unwrap()
    }
}

/// Runs a worker that must end by itself (it drains, or meets a fatal error) and returns what
/// `run` returned. Fails the case if it has not ended within `PATIENCE` — a job handed out again
/// and again would otherwise keep it running forever — after shutting it down.
#[track_caller]
fn run_to_end<S: Store + Send + 'static>(worker: Worker<S>) -> Result<WorkerStats, Error> {
    let (handle, run) = spawn(worker);
    if !ends_within(&run, PATIENCE) {
        handle.shutdown();
        panic!(
            "the worker did not end by itself within {PATIENCE:?}: {:?}",
            handle.stats()
        );
    }
    run.join().unwrap()
}

/// Shuts a worker down and returns its final counters. Fails the case, instead of hanging, if
/// `run` has not returned within twice `PATIENCE` (the shutdown deadline of `worker` is half of
/// it).
#[track_caller]
fn stop(handle: &ShutdownHandle, run: Running) -> WorkerStats {
    handle.shutdown();
    assert!(
        ends_within(&run, 2 * PATIENCE),
        "the worker did not stop after shutdown: {:?}",
        handle.stats()
    );
    run.join().unwrap().unwrap()
}

/// Whether `run` returns within `limit` (real time).
fn ends_within(run: &Running, limit: Duration) -> bool {
    let start = Instant::now();
    while !run.is_finished() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Waits (real time, bounded) until `cond` holds.
#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Gives the worker's threads time to do something they must not do.
fn settle() {
    std::thread::sleep(Duration::from_millis(60));
}

#[track_caller]
fn recv<T>(rx: &Receiver<T>) -> T {
    rx.recv_timeout(PATIENCE).expect("message from the handler")
}

/// A one-shot gate the test opens for a blocked handler (a `Receiver` is not `Sync`).
#[derive(Clone)]
struct Gate(Arc<Mutex<Receiver<()>>>);

impl Gate {
    fn new() -> (Sender<()>, Gate) {
        let (tx, rx) = channel();
        (tx, Gate(Arc::new(Mutex::new(rx))))
    }
    fn wait(&self) {
        self.0
            .lock()
            .unwrap()
            .recv_timeout(PATIENCE)
            .expect("the test opens the gate");
    }
}

/// The queue columns the worker writes besides the six, read independently.
fn failure(db: &dyn Probe, id: &str) -> (Option<String>, Option<String>, f64) {
    let q = db.queue_row(id);
    (q.error, q.outcome, q.not_before)
}

/// The side-effect ledger written by handlers, and the fence gate, read independently.
fn ledger(db: &Db) -> Vec<(String, i64, String)> {
    let conn = db.raw();
    let mut stmt = conn
        .prepare("SELECT job, fence, note FROM ledger ORDER BY rowid")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn gate(db: &dyn Probe, resource: &str) -> Option<i64> {
    db.fence_gate(resource)
}

fn done_row(id: &str, owner: &str, fence: i64, until: f64, result: &str) -> Row {
    Row {
        owner: Some(owner.into()),
        until,
        fence,
        result: Some(result.into()),
        done: 1,
        ..Row::fresh(id)
    }
}

mod lost_lease {
    use super::*;

    /// The story of the crate, with the runtime: A stalls past its lease, is told so, B finishes
    /// the job with fenced side effects, and everything A tries afterwards is refused.
    ///
    /// SQLite only: B's side effects go through `JobContext::complete_with`, whose closure gets
    /// the SQLite connection (PostgreSQL's is `PgStore::complete_with`, covered in `postgres`).
    #[test]
    fn a_stalled_handler_is_told_and_only_the_live_holders_result_and_side_effects_are_stored() {
        let db = Db::new();
        db.raw()
            .execute_batch("CREATE TABLE ledger (job TEXT, fence INTEGER, note TEXT)")
            .unwrap();
        open(&db)
            .enqueue_many(&[job("report").payload(b"q3".to_vec())])
            .unwrap();
        let clock = ManualClock::new(100.0);
        let logs = logs::capture("lost-lease-ledger");
        let refusal = "fence gate refused a stale write";

        let (started_tx, started) = channel();
        let (told_tx, told) = channel();
        let (go, a_gate) = Gate::new();
        let (admitted_tx, admitted) = channel();
        let a = sqlite_worker(&db, &clock, "A")
            .ttl(10.0)
            .build(move |ctx| {
                started_tx.send((ctx.fence(), ctx.payload().map(<[u8]>::to_vec)))?;
                // The stall: A does not get to run again until the test says so.
                let cancelled = ctx.token().wait_timeout(PATIENCE);
                told_tx.send((cancelled, ctx.is_lost(), ctx.is_cancelled()))?;
                a_gate.wait();
                // A's side effect, through the fence gate: refused, B's generation got there.
                let admitted = ctx.admit("lost-lease-ledger")?;
                admitted_tx.send(admitted)?;
                Ok::<_, BoxError>("A's stale result".to_string())
            })
            .unwrap();
        let (a_handle, a_run) = spawn(a);

        assert_eq!(recv(&started), (1, Some(b"q3".to_vec())));
        assert_eq!(
            db.row("report").unwrap(),
            Row {
                owner: Some("A-0".into()),
                until: 110.0,
                fence: 1,
                ..Row::fresh("report")
            }
        );

        // While A is alive its heartbeat renews at a third of the ttl.
        clock.set(104.0);
        wait_until("A's first renewal", || a_handle.stats().renewed == 1);
        assert_eq!(db.row("report").unwrap().until, 114.0);

        // A stalls past its lease: the next renew is refused and A is told.
        clock.set(120.0);
        assert_eq!(recv(&told), (true, true, true));
        // counted right after the token fired, on the heartbeat's thread
        wait_until("the lost lease counted", || a_handle.stats().lost == 1);
        let after_loss = db.row("report").unwrap();
        assert_eq!(
            (
                after_loss.owner.as_deref(),
                after_loss.fence,
                after_loss.until
            ),
            (Some("A-0"), 1, 114.0),
            "a refused renew changes nothing"
        );

        // B claims the expired job and finishes it, its side effects in the same transaction.
        let b_stats = sqlite_worker(&db, &clock, "B")
            .ttl(10.0)
            .drain(true)
            .build(|ctx| {
                assert!(
                    ctx.admit("lost-lease-ledger")?,
                    "the live generation is admitted"
                );
                ctx.complete_with("B's result", |conn| {
                    conn.execute(
                        "INSERT INTO ledger VALUES (?1, ?2, 'B')",
                        (ctx.job_id(), ctx.fence()),
                    )?;
                    Ok::<_, BoxError>(())
                })?
                .expect("B holds the live lease");
                Ok::<_, BoxError>("not written again".to_string())
            })
            .unwrap()
            .run_drained();
        assert_eq!(
            (b_stats.claimed, b_stats.completed, b_stats.stale_refused),
            (1, 1, 0)
        );

        assert_eq!(
            logs.with(refusal),
            Vec::<String>::new(),
            "B's admission is no warning"
        );

        // A wakes up: its gate check and its completion are both refused, the refusal logged
        // as a warning naming A's fence.
        go.send(()).unwrap();
        assert!(!recv(&admitted));
        let warned = logs.with(refusal);
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].contains("WARN") && warned[0].contains("fence=1"),
            "{warned:?}"
        );
        wait_until("A's refused completion", || {
            a_handle.stats().stale_refused == 1
        });
        let a_stats = stop(&a_handle, a_run);
        assert_eq!(
            (
                a_stats.claimed,
                a_stats.renewed,
                a_stats.lost,
                a_stats.stale_refused,
                a_stats.completed,
                a_stats.released
            ),
            (1, 1, 1, 1, 0, 0)
        );

        assert_eq!(
            db.row("report").unwrap(),
            done_row("report", "B-0", 2, 130.0, "B's result")
        );
        assert_eq!(ledger(&db), [("report".to_string(), 2, "B".to_string())]);
        assert_eq!(gate(&db, "lost-lease-ledger"), Some(2));
    }

    /// SQLite only, as above: `JobContext::complete_with` is SQLite's.
    #[test]
    fn a_stale_complete_with_runs_none_of_the_handlers_writes() {
        let db = Db::new();
        db.raw()
            .execute_batch("CREATE TABLE ledger (job TEXT, fence INTEGER, note TEXT)")
            .unwrap();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (told_tx, told) = channel();
        let (go, a_gate) = Gate::new();
        let (wrote_tx, wrote) = channel();
        let a = sqlite_worker(&db, &clock, "A")
            .ttl(10.0)
            .build(move |ctx| {
                ctx.token().wait();
                told_tx.send(ctx.is_lost())?;
                a_gate.wait();
                let stored = ctx.complete_with("A", |conn| {
                    conn.execute("INSERT INTO ledger VALUES (?1, ?2, 'A')", (ctx.job_id(), 1))?;
                    Ok::<_, BoxError>(())
                })?;
                wrote_tx.send(stored.is_some())?;
                Ok::<_, BoxError>("ignored: complete_with settled the attempt".to_string())
            })
            .unwrap();
        let (a_handle, a_run) = spawn(a);
        wait_until("A's claim", || a_handle.stats().claimed == 1);

        clock.set(10.0); // now == until: expired
        assert!(recv(&told));
        // Another holder takes and finishes the job by hand.
        let s = open(&db);
        let b = s
            .claim_next(
                Owner::new("B").unwrap(),
                Now::new(10.0).unwrap(),
                Ttl::new(5.0).unwrap(),
            )
            .unwrap()
            .expect("the expired job is claimable");
        assert_eq!(b.fence, 2);
        assert!(s.complete_lease(&b, Now::new(11.0).unwrap(), "B").unwrap());

        go.send(()).unwrap();
        assert!(!recv(&wrote));
        let a_stats = stop(&a_handle, a_run);
        assert_eq!(
            (a_stats.lost, a_stats.stale_refused, a_stats.completed),
            (1, 1, 0)
        );
        assert_eq!(db.row("j").unwrap(), done_row("j", "B", 2, 15.0, "B"));
        assert_eq!(ledger(&db), []);
    }

    /// A stalls past its lease and is told; B claims the job and is still working when A's
    /// handler returns `outcome`. A's late completion or failure is refused by the fence and
    /// leaves B's lease exactly as it was; then B finishes.
    fn a_late_outcome_is_refused_while_the_new_holder_works<B: Bench>(
        t: &B,
        outcome: Result<&'static str, &'static str>,
    ) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (told_tx, told) = channel();
        let (go, a_gate) = Gate::new();
        let a = worker(t, &clock, "A")
            .ttl(10.0)
            .build(move |ctx| {
                ctx.token().wait();
                told_tx.send(ctx.is_lost()).map_err(|e| e.to_string())?;
                a_gate.wait();
                outcome.map(str::to_string).map_err(Into::into)
            })
            .unwrap();
        let (a_handle, a_run) = spawn(a);
        wait_until("A's claim", || a_handle.stats().claimed == 1);

        clock.set(10.0); // now == until: expired, A's next renew is refused
        assert!(recv(&told));
        let s = t.open();
        let b = s
            .claim_next(
                Owner::new("B").unwrap(),
                Now::new(10.0).unwrap(),
                Ttl::new(30.0).unwrap(),
            )
            .unwrap()
            .expect("the expired job is claimable");
        assert_eq!(b.fence, 2);
        let b_holds = Row {
            owner: Some("B".into()),
            until: 40.0,
            fence: 2,
            ..Row::fresh("j")
        };
        assert_eq!(db.row("j").unwrap(), b_holds);

        go.send(()).unwrap(); // A returns while B's lease is live
        wait_until("A's refused outcome", || {
            a_handle.stats().stale_refused == 1
        });
        let a_stats = stop(&a_handle, a_run);
        assert_eq!(
            (
                a_stats.lost,
                a_stats.stale_refused,
                a_stats.completed,
                a_stats.failed()
            ),
            (1, 1, 0, 0)
        );
        assert_eq!(db.row("j").unwrap(), b_holds, "B's lease is untouched");
        assert_eq!(failure(db, "j"), (None, None, 0.0));

        assert!(s.complete_lease(&b, Now::new(11.0).unwrap(), "B").unwrap());
        assert_eq!(db.row("j").unwrap(), done_row("j", "B", 2, 40.0, "B"));
    }

    worker_case!(
        fn a_late_result_from_a_stalled_handler_is_refused_while_the_new_holder_works(t) {
            a_late_outcome_is_refused_while_the_new_holder_works(t, Ok("A's late result"));
        }
    );

    worker_case!(
        fn a_late_failure_from_a_stalled_handler_is_refused_while_the_new_holder_works(t) {
            a_late_outcome_is_refused_while_the_new_holder_works(t, Err("A's late error"));
        }
    );

    worker_case!(
        fn a_job_cancelled_while_it_runs_stops_its_handler_and_keeps_no_result(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (told_tx, told) = channel();
        let told_tx = Mutex::new(told_tx);
        let a = worker(t, &clock, "A")
            .ttl(30.0)
            .build(move |ctx| {
                // Woken by the cancellation, not by a shutdown: it is told before any stop.
                let woken = ctx.token().wait_timeout(PATIENCE);
                told_tx.lock().unwrap().send((woken, ctx.is_lost()))?;
                Ok(format!("lost={}", ctx.is_lost()))
            })
            .unwrap();
        let (handle, run) = spawn(a);
        wait_until("the claim", || handle.stats().claimed == 1);
        assert!(
            t.open()
                .cancel(JobId::new("j").unwrap(), Now::new(1.0).unwrap())
                .unwrap()
        );
        clock.set(10.0); // the next heartbeat is due, and refused: the job is done
        assert_eq!(recv(&told), (true, true), "the handler is told the lease is gone");
        wait_until("the cancellation seen", || handle.stats().cancelled == 1);
        let stats = stop(&handle, run);
        // Counted as an operator's cancellation, not as a lost lease or a stale write.
        assert_eq!(
            (stats.cancelled, stats.lost, stats.stale_refused, stats.completed, stats.renewed),
            (1, 0, 0, 0, 0),
            "{stats:?}"
        );
        let row = db.row("j").unwrap();
        assert_eq!((row.result, row.done, row.fence), (None, 1, 1));
        assert_eq!(failure(db, "j").1.as_deref(), Some("cancelled"));
        }
    );

    worker_case!(
        /// An operator's delete, or an operator's release under the holder's own fence, ends
        /// a running job's lease just as a cancel does: both are counted as cancelled, neither
        /// as a lost lease nor as a stale write, and each handler is told by its token.
        fn a_job_deleted_or_released_by_an_operator_counts_as_cancelled(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("deleted"), job("released")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (lease_tx, leases) = channel();
        let (told_tx, told) = channel();
        let (lease_tx, told_tx) = (Mutex::new(lease_tx), Mutex::new(told_tx));
        let w = worker(t, &clock, "A")
            .ttl(30.0)
            .concurrency(2)
            .batch(1)
            .build(move |ctx| {
                lease_tx.lock().unwrap().send(ctx.lease().clone())?;
                let woken = ctx.token().wait_timeout(PATIENCE);
                told_tx.lock().unwrap().send((ctx.job_id().to_owned(), woken, ctx.is_lost()))?;
                Ok("not stored".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        let mut held: Vec<Lease> = vec![recv(&leases), recv(&leases)];
        held.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        let store = t.open();
        assert_eq!(store.delete(&[JobId::new("deleted").unwrap()]).unwrap(), [true]);
        assert!(store.release_lease(&held[1]).unwrap(), "the operator gives the lease back");
        clock.set(10.0); // both renewals are due, and refused
        let mut seen = vec![recv(&told), recv(&told)];
        seen.sort();
        assert_eq!(
            seen,
            [("deleted".to_owned(), true, true), ("released".to_owned(), true, true)]
        );
        wait_until("both counted", || handle.stats().cancelled == 2);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.cancelled, stats.lost, stats.stale_refused, stats.completed),
            (2, 0, 0, 0),
            "{stats:?}"
        );
        assert!(db.row("deleted").is_none());
        assert_eq!(db.row("released").unwrap().result, None);
        }
    );

    worker_case!(
        /// A handler that returns after an operator cancelled its job, before any heartbeat
        /// noticed: the store refuses the completion, and asking why counts it as cancelled —
        /// not as a stale write.
        fn a_completion_refused_after_an_unnoticed_cancel_counts_as_cancelled(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (started_tx, started) = channel();
        let (go_tx, go) = channel::<()>();
        let (started_tx, go) = (Mutex::new(started_tx), Mutex::new(go));
        let (seen_tx, seen) = channel();
        let w = worker(t, &clock, "A")
            .ttl(30.0)
            .on_outcome(move |_, outcome| {
                let _ = seen_tx.send(outcome.clone());
            })
            .build(move |ctx| {
                started_tx.lock().unwrap().send(())?;
                go.lock().unwrap().recv()?;
                Ok(format!("lost={}", ctx.is_lost()))
            })
            .unwrap();
        let (handle, run) = spawn(w);
        recv(&started);
        assert!(t.open().cancel(JobId::new("j").unwrap(), Now::new(1.0).unwrap()).unwrap());
        go_tx.send(()).unwrap(); // the clock stays at 0: no renewal is due, none noticed it
        assert_eq!(recv(&seen), JobOutcome::Cancelled);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.cancelled, stats.stale_refused, stats.lost, stats.completed),
            (1, 0, 0, 0),
            "{stats:?}"
        );
        assert_eq!(db.row("j").unwrap().result, None);
        }
    );

    worker_case!(
        /// `ctx.check_lease()` asks the store before a side effect: current while the lease
        /// is, `false` at once after an operator cancelled the job — before any heartbeat
        /// noticed — and then the job is lost, its token cancelled, counted as cancelled.
        fn check_lease_tells_a_handler_at_once_that_its_job_was_cancelled(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (checked_tx, checked) = channel();
        let (go_tx, go) = channel::<()>();
        let (checked_tx, go) = (Mutex::new(checked_tx), Mutex::new(go));
        let a = worker(t, &clock, "A")
            .ttl(30.0)
            .build(move |ctx| {
                let first = ctx.check_lease()?;
                checked_tx.lock().unwrap().send(first)?;
                go.lock().unwrap().recv()?;
                let second = ctx.check_lease()?;
                let seen = (second, ctx.is_lost(), ctx.is_cancelled());
                checked_tx.lock().unwrap().send(seen.0)?;
                assert_eq!(seen, (false, true, true));
                Ok("the side effect was not made".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(a);
        assert!(recv(&checked), "current while the lease is");
        assert!(t.open().cancel(JobId::new("j").unwrap(), Now::new(1.0).unwrap()).unwrap());
        go_tx.send(()).unwrap();
        assert!(!recv(&checked), "cancelled: no longer current");
        wait_until("the handler's end", || handle.stats().cancelled == 1);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.cancelled, stats.lost, stats.stale_refused, stats.completed, stats.renewed),
            (1, 0, 0, 0, 0),
            "{stats:?}"
        );
        assert_eq!(db.row("j").unwrap().result, None);
        }
    );

    worker_case!(
        /// A handler past the run-time limit on the worker's clock is cancelled, and its
        /// attempt is recorded as a timeout failure even though it returns `Ok` afterwards.
        fn a_handler_past_its_time_limit_is_cancelled_and_its_attempt_fails(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("slow").max_attempts(2)]).unwrap();
        let clock = ManualClock::new(0.0);
        let (started_tx, started) = channel();
        let started_tx = Mutex::new(started_tx);
        let w = worker(t, &clock, "A")
            .ttl(12.0)
            .timeout(5.0)
            .backoff(leasefence::Backoff { base: 100.0, factor: 2.0, max: 100.0, jitter: 0.0 })
            .build(move |ctx| {
                let tx = started_tx.lock().unwrap().clone();
                tx.send((ctx.attempt(), false, ctx.is_timed_out(), ctx.is_lost()))?;
                let cancelled = ctx.token().wait_timeout(PATIENCE);
                tx.send((ctx.attempt(), cancelled, ctx.is_timed_out(), ctx.is_lost()))?;
                // Winding down: some ten ticks in flight, timed out, counted once.
                std::thread::sleep(Duration::from_millis(100));
                Ok("finished anyway".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        assert_eq!(recv(&started), (1, false, false, false), "not timed out at the start");
        // The renewal due at ttl/3 = 4 comes on a tick that checked the limit first.
        clock.set(4.5);
        wait_until("the renewal before the limit", || handle.stats().renewed == 1);
        assert_eq!(handle.stats().timed_out, 0, "not timed out before the limit");
        clock.set(5.0); // the limit: cancelled at the next tick
        assert_eq!(recv(&started), (1, true, true, false), "cancelled, timed out, not lost");
        wait_until("the timeout failure", || handle.stats().retried == 1);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.timed_out, stats.retried, stats.completed, stats.stale_refused),
            (1, 1, 0, 0),
            "{stats:?}"
        );
        let row = db.row("slow").unwrap();
        assert_eq!((row.result, row.done, row.owner), (None, 0, None));
        let (error, _, retry_at) = failure(db, "slow");
        assert_eq!(error.as_deref(), Some("timed out after 5 s (the worker's time limit)"));
        assert_eq!(retry_at, 105.0, "retried per the backoff, from the failure at 5");
        }
    );
}

mod heartbeat {
    use super::*;

    worker_case!(
        fn renews_every_third_of_the_ttl_on_the_clock_and_the_job_outlives_its_first_lease(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("long")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (go, g) = Gate::new();
        let w = worker(t, &clock, "w")
            .ttl(30.0)
            .build(move |ctx| {
                g.wait();
                Ok(format!(
                    "finished at {} with until {}",
                    ctx.now(),
                    ctx.until()
                ))
            })
            .unwrap();
        let (handle, run) = spawn(w);
        wait_until("the claim", || handle.stats().claimed == 1);

        clock.set(9.99);
        settle();
        assert_eq!(handle.stats().renewed, 0, "not due before ttl/3");
        assert_eq!(db.row("long").unwrap().until, 30.0);

        clock.set(10.0);
        wait_until("the first renewal", || handle.stats().renewed == 1);
        assert_eq!(db.row("long").unwrap().until, 40.0);

        clock.set(35.0); // past the first lease, inside the renewed one
        wait_until("the second renewal", || handle.stats().renewed == 2);
        assert_eq!(db.row("long").unwrap().until, 65.0);

        go.send(()).unwrap();
        wait_until("the completion", || handle.stats().completed == 1);
        let stats = stop(&handle, run);
        assert_eq!((stats.renewed, stats.lost, stats.completed), (2, 0, 1));
        assert_eq!(
            db.row("long").unwrap(),
            done_row("long", "w-0", 1, 65.0, "finished at 35 with until 65")
        );
        }
    );

    /// How the next `renew_batch` through a [`Stall`] store goes.
    #[derive(Default)]
    enum Next {
        #[default]
        Pass,
        /// Fails with `Error::Busy`, as a database locked past the busy timeout would.
        Busy,
        /// Blocks (before reaching the database) until the case unblocks it.
        Block,
        /// Fails with `Error::Busy`, this call and every later one (claims too) until the case
        /// sets another `Next`: a database that stays unavailable.
        Down,
    }

    #[derive(Default)]
    struct CtlState {
        next: Next,
        blocked: bool,
        /// How many leases each `renew_batch` carried, in call order.
        batches: Vec<usize>,
        /// Single `renew` calls.
        renews: usize,
        /// A release waits (bounded) for a `fail` to be tried first.
        hold_release: bool,
        /// `fail` calls.
        fails: usize,
        /// How many jobs each `claim_batch_in` asked for, in call order.
        asked: Vec<usize>,
        /// How long every `complete_lease` and `complete_batch` takes before it reaches the
        /// database: a store slow to commit.
        slow_commit: Duration,
        /// `database_now` answers this reading, taken halfway through a round trip of
        /// `round_trip`: a store on a database's clock, far away.
        database_clock: Option<(f64, Duration)>,
        /// How long the last `database_now` took, from call to answer.
        database_took: Option<Duration>,
        /// How many results each `complete_lease` (one) and `complete_batch` wrote, in call
        /// order: one transaction each.
        commits: Vec<usize>,
        /// `watch` hands out a watch whose every wait fails: the database named here is full.
        failing_watch: Option<String>,
        /// How many times that watch was waited on.
        watch_waits: usize,
        /// Single-job `claim` calls.
        claims: usize,
    }

    /// Shared by every store of one worker: what the next renewal meets, and what was asked.
    #[derive(Default)]
    pub(super) struct Ctl {
        state: Mutex<CtlState>,
        cv: Condvar,
    }

    impl Ctl {
        fn next(&self, next: Next) {
            self.state.lock().unwrap().next = next;
        }
        fn batches(&self) -> Vec<usize> {
            self.state.lock().unwrap().batches.clone()
        }
        /// How many jobs each claim asked for, in call order.
        pub(super) fn asked(&self) -> Vec<usize> {
            self.state.lock().unwrap().asked.clone()
        }
        /// How many results each completion transaction wrote, in call order.
        pub(super) fn commits(&self) -> Vec<usize> {
            self.state.lock().unwrap().commits.clone()
        }
        /// Makes every completion take `d` before it reaches the database.
        pub(super) fn slow_commit(&self, d: Duration) {
            self.state.lock().unwrap().slow_commit = d;
        }
        /// Holds the calling thread for the configured commit time (the lock not held).
        fn commit_delay(&self) {
            let d = self.state.lock().unwrap().slow_commit;
            std::thread::sleep(d);
        }
        fn renews(&self) -> usize {
            self.state.lock().unwrap().renews
        }
        fn claims(&self) -> usize {
            self.state.lock().unwrap().claims
        }
        fn is_blocked(&self) -> bool {
            self.state.lock().unwrap().blocked
        }
        /// Waits (bounded) until a renewal is blocked inside the store.
        #[track_caller]
        fn wait_blocked(&self) {
            let st = self.state.lock().unwrap();
            let (st, timeout) = self
                .cv
                .wait_timeout_while(st, PATIENCE, |s| !s.blocked)
                .unwrap();
            assert!(
                !timeout.timed_out() && st.blocked,
                "no renewal reached the store"
            );
        }
        fn unblock(&self) {
            self.state.lock().unwrap().blocked = false;
            self.cv.notify_all();
        }
    }

    /// A watch that fails every wait with an error that is not a connection fault.
    struct FailingWatch {
        database: String,
        ctl: Arc<Ctl>,
    }

    impl leasefence::Watch for FailingWatch {
        fn wait(&mut self, _: Duration) -> Result<bool, Error> {
            self.ctl.state.lock().unwrap().watch_waits += 1;
            Err(Error::StorageFull {
                database: self.database.clone(),
            })
        }
    }

    /// A store that forwards everything to `inner`, except that a `renew_batch` can be made to
    /// meet a busy database or to block, as the case's [`Ctl`] says.
    pub(super) struct Stall<S> {
        inner: S,
        ctl: Arc<Ctl>,
    }

    impl<S: Store> Store for Stall<S> {
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
            self.ctl.state.lock().unwrap().claims += 1;
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
            self.ctl.state.lock().unwrap().renews += 1;
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
            self.inner.complete(id, o, f, now, r)
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
            let mut st = self.ctl.state.lock().unwrap();
            // A database that stays unavailable answers no claim either.
            if matches!(st.next, Next::Down) {
                return Err(Error::Busy);
            }
            st.asked.push(n.get());
            drop(st);
            self.inner.claim_batch_in(queues, o, now, ttl, n)
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
            self.ctl.state.lock().unwrap().fails += 1;
            self.ctl.cv.notify_all();
            self.inner.fail(l, now, e, at)
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
        fn add_schedule(
            &self,
            schedule: &leasefence::Schedule,
            now: Now,
        ) -> leasefence::Result<bool> {
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
            let Some((reading, round_trip)) = self.ctl.state.lock().unwrap().database_clock else {
                return self.inner.database_now();
            };
            let called = Instant::now();
            std::thread::sleep(round_trip / 2);
            let answer = Now::new(reading)?;
            std::thread::sleep(round_trip / 2);
            self.ctl.state.lock().unwrap().database_took = Some(called.elapsed());
            Ok(Some(answer))
        }
        fn watch(&self) -> Result<Option<Box<dyn leasefence::Watch>>, Error> {
            let failing = self.ctl.state.lock().unwrap().failing_watch.clone();
            match failing {
                Some(database) => Ok(Some(Box::new(FailingWatch {
                    database,
                    ctl: self.ctl.clone(),
                }))),
                None => self.inner.watch(),
            }
        }
        fn complete_lease(&self, l: &Lease, now: Now, r: &str) -> Result<bool, Error> {
            self.ctl.state.lock().unwrap().commits.push(1);
            self.ctl.commit_delay();
            self.inner.complete_lease(l, now, r)
        }
        fn complete_batch(&self, c: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>, Error> {
            self.ctl.state.lock().unwrap().commits.push(c.len());
            self.ctl.commit_delay();
            self.inner.complete_batch(c, now)
        }
        fn release_lease(&self, l: &Lease) -> Result<bool, Error> {
            let st = self.ctl.state.lock().unwrap();
            if st.hold_release {
                // Gives a racing outcome every chance to get in first; bounded, as it must not.
                let wait = Duration::from_millis(300);
                let (st, _) = self
                    .ctl
                    .cv
                    .wait_timeout_while(st, wait, |s| s.fails == 0)
                    .unwrap();
                drop(st);
            } else {
                drop(st);
            }
            self.inner.release_lease(l)
        }
        fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>, Error> {
            let mut st = self.ctl.state.lock().unwrap();
            st.batches.push(leases.len());
            match std::mem::take(&mut st.next) {
                Next::Pass => {}
                Next::Busy => return Err(Error::Busy),
                Next::Down => {
                    st.next = Next::Down;
                    return Err(Error::Busy);
                }
                Next::Block => {
                    st.blocked = true;
                    self.ctl.cv.notify_all();
                    let (st, _) = self
                        .ctl
                        .cv
                        .wait_timeout_while(st, PATIENCE, |s| s.blocked)
                        .unwrap();
                    drop(st);
                }
            }
            self.inner.renew_batch(leases, now, ttl)
        }
    }

    /// A worker like [`worker`] whose stores are [`Stall`]s sharing `ctl`, with `n` threads
    /// (one lease each) and a ttl of 30: every lease is due at 10, 20, … on the clock.
    pub(super) fn stalling<B: Bench>(
        t: &B,
        clock: &ManualClock,
        ctl: &Arc<Ctl>,
        n: usize,
    ) -> WorkerBuilder<Stall<B::S>> {
        let (open, ctl) = (t.opener(), ctl.clone());
        Worker::builder(move || {
            Ok(Stall {
                inner: open()?,
                ctl: ctl.clone(),
            })
        })
        .clock(clock.clone())
        .owner_prefix("held")
        .poll_interval(Duration::from_millis(2))
        .shutdown_deadline(Duration::from_secs(5))
        .concurrency(n)
        .ttl(30.0)
    }

    worker_case!(
        /// A scheduler that reads the role held by another (live) or finished stands by on
        /// that read: it does not try a claim the store would only refuse.
        fn a_standby_scheduler_reads_the_role_and_tries_no_claim(t) {
        let ctl = Arc::new(Ctl::default());
        let store = Stall {
            inner: t.open(),
            ctl: ctl.clone(),
        };
        let mut a = leasefence::Scheduler::new(&store, "a", ttl(30.0)).unwrap();
        let mut b = leasefence::Scheduler::new(&store, "b", ttl(30.0)).unwrap();
        assert!(matches!(a.step(now(0.0)).unwrap(), leasefence::Step::Ticked(_)));
        assert_eq!(ctl.claims(), 1, "a claimed the role");
        assert_eq!(b.step(now(10.0)).unwrap(), leasefence::Step::Standby);
        assert_eq!(ctl.claims(), 1, "b read a's live lease and claimed nothing");
        // The role's job cancelled (done): after a's lease, a newcomer stands by on the read.
        let role = JobId::new(leasefence::SCHEDULER_JOB).unwrap();
        assert!(store.cancel(role, now(11.0)).unwrap());
        assert_eq!(b.step(now(100.0)).unwrap(), leasefence::Step::Standby);
        assert_eq!(ctl.claims(), 1, "b read the finished role and claimed nothing");
        assert_eq!(t.db().row(leasefence::SCHEDULER_JOB).unwrap().fence, 1);
        }
    );

    worker_case!(
        /// A store on a database's clock answers a reading taken somewhere in the round trip;
        /// the worker takes it to be from halfway, so its clock starts `round trip / 2` past
        /// the reading — never behind it, and not a whole round trip ahead.
        fn the_worker_takes_the_databases_reading_to_be_from_halfway_through_its_round_trip(t) {
        t.open().enqueue_many(&[job("one")]).unwrap();
        let ctl = Arc::new(Ctl::default());
        ctl.state.lock().unwrap().database_clock = Some((5_000.0, Duration::from_millis(400)));
        // The caller's clock does not move, so the worker's reads the reading plus its offset.
        let clock = ManualClock::new(0.0);
        let seen = Arc::new(Mutex::new(None));
        let record = seen.clone();
        let stats = stalling(t, &clock, &ctl, 1)
            .drain(true)
            .build(move |ctx| {
                *record.lock().unwrap() = Some(ctx.now());
                Ok("done".to_owned())
            })
            .unwrap()
            .run_drained();
        assert_eq!(stats.completed, 1);
        let took = ctl.state.lock().unwrap().database_took.unwrap().as_secs_f64();
        let ahead = seen.lock().unwrap().unwrap() - 5_000.0;
        // The worker's own round trip is the store's and a little more: half of it is at
        // least half the store's, and far less than the whole.
        assert!(took / 2.0 <= ahead && ahead < took, "{ahead} s ahead after {took} s");
        }
    );

    worker_case!(
        /// A watch that fails with anything but a lost connection is given up at once (idle
        /// threads poll instead, and the jobs still run), with a warning saying so.
        fn a_watch_failing_other_than_by_a_lost_connection_is_given_up_for_polling(t) {
        let database = logs::marker("watch-gives-up");
        let logs = logs::capture(&database);
        let ctl = Arc::new(Ctl::default());
        ctl.state.lock().unwrap().failing_watch = Some(database);
        let (handle, run) = spawn(stalling(t, &ManualClock::new(0.0), &ctl, 1)
            .build(|ctx| Ok::<_, BoxError>(ctx.job_id().to_owned()))
            .unwrap());
        wait_until("the watch's failure logged", || !logs.with("full").is_empty());
        t.open().enqueue_many(&[job("polled")]).unwrap();
        wait_until("the job run by polling", || handle.stats().completed == 1);
        stop(&handle, run);
        let lines = logs.with("full");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("the store's watch failed: idle threads poll"), "{lines:?}");
        assert_eq!(ctl.state.lock().unwrap().watch_waits, 1, "waited on again after it failed");
        }
    );

    /// `n` jobs `j00`, `j01`, …, enqueued.
    fn held_ids<B: Bench>(t: &B, n: usize) -> Vec<String> {
        let ids: Vec<String> = (0..n).map(|k| format!("j{k:02}")).collect();
        t.open()
            .enqueue_many(&ids.iter().map(|id| job(id)).collect::<Vec<_>>())
            .unwrap();
        ids
    }

    /// How many leases the held-leases cases hold: 64 on SQLite; on PostgreSQL 16, one session
    /// per thread on a server shared with other test runs (`max_connections` is 100).
    fn held<B: Bench>(t: &B) -> usize {
        if t.db().max_key_bytes().is_some() {
            16
        } else {
            64
        }
    }

    /// Every stored `until`, by id.
    fn untils(db: &dyn Probe) -> Vec<f64> {
        db.rows().iter().map(|r| r.until).collect()
    }

    worker_case!(
        /// The issue's target: with 64 leases held and the one renewal that covers them meeting
        /// a busy database, no lease expires — the renewal is made again (after the heartbeat's
        /// pause: this store's Busy comes at once).
        fn with_64_held_leases_a_busy_renewal_lets_no_lease_expire(t) {
            let db = t.db();
            let n = held(t);
            held_ids(t, n);
            let clock = ManualClock::new(0.0);
            let ctl = Arc::new(Ctl::default());
            let (started_tx, started) = channel();
            let go = leasefence::CancelToken::new();
            let release = go.clone();
            let started_tx = Mutex::new(started_tx);
            let w = stalling(t, &clock, &ctl, n)
                .build(move |ctx| {
                    started_tx.lock().unwrap().send(ctx.job_id().to_string()).unwrap();
                    go.wait_timeout(PATIENCE);
                    Ok(format!("{} held until {}", ctx.job_id(), ctx.until()))
                })
                .unwrap();
            let (handle, run) = spawn(w);
            for _ in 0..n {
                recv(&started);
            }
            assert_eq!(handle.stats().claimed, n as u64);
            assert_eq!(untils(db), vec![30.0; n]);

            ctl.next(Next::Busy);
            clock.set(10.0);
            // Counted once the answers are applied, after the commit.
            wait_until("every lease renewed at 10", || handle.stats().renewed == n as u64);
            assert_eq!(untils(db), vec![40.0; n]);
            // One call for every due lease: the busy one, then the one after the pause.
            assert_eq!(ctl.batches(), [n, n]);
            assert_eq!(ctl.renews(), 0, "no lease renewed on its own");
            let stats = handle.stats();
            assert_eq!((stats.renewed, stats.lost), (n as u64, 0));
            assert!(stats.errors >= 1, "{stats:?}");

            // Past the first lease's end: every lease is live, renewed again.
            clock.set(35.0);
            wait_until("every lease renewed at 35", || handle.stats().renewed == 2 * n as u64);
            assert_eq!(untils(db), vec![65.0; n]);
            for row in db.rows() {
                assert_eq!((row.fence, row.done), (1, 0), "{row:?}");
                assert!(row.owner.as_deref().unwrap().starts_with("held-"), "{row:?}");
            }
            release.cancel();
            wait_until("every completion", || handle.stats().completed == n as u64);
            let stats = stop(&handle, run);
            assert_eq!(
                (stats.claimed, stats.completed, stats.renewed, stats.lost, stats.stale_refused),
                (n as u64, n as u64, 2 * n as u64, 0, 0)
            );
            for row in db.rows() {
                assert_eq!(row.result, Some(format!("{} held until 65", row.id)));
            }
        }
    );

    worker_case!(
        /// A database that answers no renewal (busy, unreachable): when the lease has run out
        /// by the worker's own clock, the handler is told (its token cancelled) and the job
        /// counted lost — while the store still answers nothing, not once it answers again.
        fn a_lease_that_runs_out_unrenewed_is_lost_by_the_workers_own_clock(t) {
            let db = t.db();
            t.open().enqueue_many(&[job("j")]).unwrap();
            let clock = ManualClock::new(0.0);
            let ctl = Arc::new(Ctl::default());
            let (told_tx, told) = channel();
            let told_tx = Mutex::new(told_tx);
            let w = stalling(t, &clock, &ctl, 1)
                .build(move |ctx| {
                    let cancelled = ctx.token().wait_timeout(PATIENCE);
                    told_tx.lock().unwrap().send(cancelled).unwrap();
                    Ok("late".into())
                })
                .unwrap();
            let (handle, run) = spawn(w);
            wait_until("the claim", || handle.stats().claimed == 1);

            ctl.next(Next::Down);
            clock.set(10.0);
            wait_until("a renewal refused as busy", || handle.stats().errors >= 1);
            clock.set(30.0); // the lease's end: nothing renewed it
            assert!(recv(&told), "the handler's token was cancelled");
            let stats = handle.stats();
            assert_eq!((stats.lost, stats.renewed, stats.completed), (1, 0, 0), "{stats:?}");
            // Stopped while the store still answers nothing, claims included: with the lease
            // run out, a worker let through first would claim the job again (fence 2) before
            // it stopped (as it did, now and then, on a loaded machine while claims were let
            // through during the outage).
            let stats = stop(&handle, run);
            ctl.next(Next::Pass);
            assert_eq!((stats.lost, stats.completed), (1, 0), "{stats:?}");
            let row = db.row("j").unwrap();
            assert_eq!((row.done, row.fence, row.result.as_deref()), (0, 1, None), "{row:?}");
        }
    );

    worker_case!(
        /// The heartbeat holds no job's lock while it waits for the database: a job finishing
        /// during a renewal that hangs is stored at once, and the renewal's refusal of that
        /// finished job afterwards does not mark it lost.
        fn a_renewal_that_hangs_blocks_no_job_from_finishing(t) {
            let db = t.db();
            let n = held(t);
            held_ids(t, n);
            let clock = ManualClock::new(0.0);
            let ctl = Arc::new(Ctl::default());
            let (started_tx, started) = channel();
            let started_tx = Mutex::new(started_tx);
            let (go, first) = (leasefence::CancelToken::new(), leasefence::CancelToken::new());
            let (release, finish_first) = (go.clone(), first.clone());
            let w = stalling(t, &clock, &ctl, n)
                .build(move |ctx| {
                    started_tx.lock().unwrap().send(()).unwrap();
                    if ctx.job_id() == "j00" { &first } else { &go }.wait_timeout(PATIENCE);
                    Ok(format!("{} done", ctx.job_id()))
                })
                .unwrap();
            let (handle, run) = spawn(w);
            for _ in 0..n {
                recv(&started);
            }

            ctl.next(Next::Block);
            clock.set(10.0);
            ctl.wait_blocked(); // the heartbeat waits inside renew_batch
            finish_first.cancel();
            // Counted once the write returned.
            wait_until("j00 stored while the renewal hangs", || handle.stats().completed == 1);
            assert_eq!(db.row("j00").unwrap().done, 1);
            assert!(ctl.is_blocked(), "the renewal still hangs");
            ctl.unblock();
            wait_until("the others renewed", || handle.stats().renewed == n as u64 - 1);
            // One more round: the heartbeat has applied every answer of the first one by then.
            clock.set(20.0);
            wait_until("the second round", || handle.stats().renewed == 2 * (n as u64 - 1));
            assert_eq!(ctl.batches(), [n, n - 1]);
            let stats = handle.stats();
            assert_eq!((stats.lost, stats.stale_refused), (0, 0), "{stats:?}");
            for row in db.rows() {
                if row.id == "j00" {
                    assert_eq!(row, done_row("j00", &row.owner.clone().unwrap(), 1, 30.0, "j00 done"));
                } else {
                    assert_eq!((row.until, row.done), (50.0, 0), "{row:?}");
                }
            }
            release.cancel();
            wait_until("every completion", || handle.stats().completed == n as u64);
            let stats = stop(&handle, run);
            assert_eq!((stats.completed, stats.lost, stats.stale_refused), (n as u64, 0, 0));
        }
    );

    worker_case!(
        /// At the shutdown deadline the heartbeat marks a running job released, then releases
        /// it: the cancelled handler's failure is not written at all (not raced against the
        /// release, not stored as a retry, not counted as a stale write), even while the
        /// release itself is slow.
        fn a_handler_cancelled_at_the_deadline_cannot_store_before_its_release(t) {
            let db = t.db();
            t.open().enqueue_many(&[job("j")]).unwrap();
            let clock = ManualClock::new(0.0);
            let ctl = Arc::new(Ctl::default());
            ctl.state.lock().unwrap().hold_release = true;
            let (started_tx, started) = channel();
            let started_tx = Mutex::new(started_tx);
            let w = stalling(t, &clock, &ctl, 1)
                .shutdown_deadline(Duration::from_millis(50))
                .build(move |ctx| {
                    started_tx.lock().unwrap().send(()).unwrap();
                    ctx.token().wait_timeout(PATIENCE);
                    Err("stopped".into())
                })
                .unwrap();
            let (handle, run) = spawn(w);
            recv(&started);
            let stats = stop(&handle, run);
            assert_eq!(
                (stats.released, stats.stale_refused, stats.retried, stats.dead),
                (1, 0, 0, 0),
                "{stats:?}"
            );
            assert_eq!(ctl.state.lock().unwrap().fails, 0, "a released job's failure is not written");
            assert_eq!(db.row("j").unwrap(), Row { fence: 1, ..Row::fresh("j") });
            assert_eq!(failure(db, "j"), (None, None, 0.0));
        }
    );

    /// `Worker::postgres` keeps one session per thread plus one for the heartbeat.
    #[test]
    #[cfg_attr(
        not(leasefence_pg),
        ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
    )]
    fn on_postgres_each_thread_the_heartbeat_and_the_watch_hold_one_connection() {
        let Some(db) = PgDb::new() else { return };
        let app = db.schema.clone();
        let url = if db.url.contains("://") {
            let sep = if db.url.contains('?') { '&' } else { '?' };
            format!("{}{sep}application_name={app}", db.url)
        } else {
            format!("{} application_name={app}", db.url)
        };
        db.store()
            .enqueue_many(&[job("a"), job("b"), job("c")])
            .unwrap();
        let (started_tx, started) = channel();
        let started_tx = Mutex::new(started_tx);
        let go = leasefence::CancelToken::new();
        let release = go.clone();
        let w = Worker::postgres_with(url, leasefence::PgOptions::new().schema(&db.schema))
            .concurrency(3)
            .poll_interval(Duration::from_millis(2))
            .drain(true)
            .build(move |ctx| {
                started_tx.lock().unwrap().send(()).unwrap();
                go.wait_timeout(PATIENCE);
                Ok(ctx.job_id().to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        for _ in 0..3 {
            recv(&started);
        }
        let sessions =
            format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'");
        assert_eq!(
            db.query_i64(&sessions),
            [5],
            "3 threads, the heartbeat and the watch, one session each"
        );
        release.cancel();
        assert!(ends_within(&run, PATIENCE), "{:?}", handle.stats());
        assert_eq!(run.join().unwrap().unwrap().completed, 3);
    }
}

/// SQLite only: `JobContext::complete_with` writes through the SQLite connection.
mod complete_with {
    use super::*;

    /// While `complete_with` holds its transaction open the heartbeat stays away from the job (a
    /// renew would wait for the lock and then be refused: the job is done by then); when the
    /// caller's write fails, everything is rolled back and the heartbeat takes the job up again.
    #[test]
    fn the_heartbeat_pauses_while_the_writes_run_and_resumes_when_they_fail() {
        let db = Db::new();
        db.raw()
            .execute_batch("CREATE TABLE ledger (job TEXT, fence INTEGER, note TEXT)")
            .unwrap();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        let clock = ManualClock::new(0.0);
        let handler_clock = clock.clone();
        let (failed_tx, failed) = channel();
        let (go, g) = Gate::new();
        let (done_tx, done) = channel();
        let w = sqlite_worker(&db, &clock, "w")
            .ttl(30.0)
            .build(move |ctx| {
                // 1. The caller's write fails: nothing is stored, the lease stays current.
                let first = ctx.complete_with("first", |conn| {
                    conn.execute("INSERT INTO ledger VALUES ('j', 1, 'half')", [])?;
                    Err::<(), BoxError>("downstream refused".into())
                });
                failed_tx.send(first.err().map(|e| e.to_string()))?;
                g.wait(); // meanwhile the test sees the heartbeat renew again
                // 2. A slow write, during which a renewal falls due.
                let stored = ctx.complete_with("second", |conn| {
                    handler_clock.set(25.0); // renewal due (every 10 s); the lease runs to 40
                    std::thread::sleep(Duration::from_millis(100)); // the heartbeat ticks every 10 ms
                    conn.execute(
                        "INSERT INTO ledger VALUES (?1, ?2, 'w')",
                        (ctx.job_id(), ctx.fence()),
                    )?;
                    Ok::<_, BoxError>(())
                })?;
                done_tx.send((stored.is_some(), ctx.is_lost(), ctx.is_cancelled()))?;
                Ok::<_, BoxError>("not written again".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);

        assert_eq!(recv(&failed), Some("downstream refused".to_string()));
        let leased = Row {
            owner: Some("w-0".into()),
            until: 30.0,
            fence: 1,
            ..Row::fresh("j")
        };
        assert_eq!(db.row("j").unwrap(), leased);
        assert_eq!(ledger(&db), []);
        clock.set(10.0);
        wait_until("the renewal after the failed write", || {
            handle.stats().renewed == 1
        });
        assert_eq!(db.row("j").unwrap().until, 40.0);

        go.send(()).unwrap();
        assert_eq!(recv(&done), (true, false, false));
        wait_until("the job to leave the worker", || {
            handle.stats().completed == 1
        });
        settle();
        let stats = stop(&handle, run);
        assert_eq!(
            (
                stats.renewed,
                stats.lost,
                stats.completed,
                stats.stale_refused
            ),
            (1, 0, 1, 0)
        );
        assert_eq!(
            db.row("j").unwrap(),
            done_row("j", "w-0", 1, 40.0, "second")
        );
        assert_eq!(ledger(&db), [("j".to_string(), 1, "w".to_string())]);
    }

    /// Once `complete_with` has settled the attempt, a second call changes nothing and does not
    /// ask the store (here it would meet a busy lock): `Ok(None)`, nothing counted — and the
    /// heartbeat stays away from the finished job.
    #[test]
    fn a_second_complete_with_after_the_attempt_is_settled_changes_nothing() {
        let db = Db::new();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        let clock = ManualClock::new(0.0);
        let handler_clock = clock.clone();
        let path = db.path.clone();
        let (seen_tx, seen) = channel();
        let w = store_errors::impatient(&db, &clock)
            .build(move |ctx| {
                let first = ctx.complete_with("first", |_conn| Ok::<_, BoxError>(1))?;
                // Another connection holds the write lock: the second call fails busy.
                let blocker = leasefence::rusqlite::Connection::open(&path)?;
                blocker.execute_batch("BEGIN IMMEDIATE")?;
                let second = ctx.complete_with("second", |_conn| Ok::<_, BoxError>(2));
                drop(blocker);
                // A renewal falls due: the heartbeat must leave the finished job alone.
                handler_clock.set(20.0);
                std::thread::sleep(Duration::from_millis(100)); // the heartbeat ticks every 10 ms
                seen_tx.send((
                    first,
                    second.map_err(|e| e.to_string()),
                    ctx.is_lost(),
                    ctx.is_cancelled(),
                ))?;
                Ok::<_, BoxError>("not written".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        let (first, second, lost, cancelled) = recv(&seen);
        assert_eq!(first, Some(1));
        assert_eq!(second, Ok(None), "settled: the store is not asked");
        assert_eq!((lost, cancelled), (false, false));
        wait_until("the job to leave the worker", || {
            handle.stats().completed == 1
        });
        settle();
        let stats = stop(&handle, run);
        assert_eq!(
            (
                stats.completed,
                stats.renewed,
                stats.lost,
                stats.stale_refused
            ),
            (1, 0, 0, 0)
        );
        assert_eq!(db.row("j").unwrap(), done_row("j", "w-0", 1, 30.0, "first"));
    }
}

/// SQLite only: busy databases are made with SQLite's own locks (`BEGIN IMMEDIATE` on another
/// connection, a 1 ms busy timeout); PostgreSQL's lock timeouts are covered in `postgres`.
mod store_errors {
    use super::*;

    /// A worker whose stores give up on a held lock after 1 ms.
    pub(super) fn impatient(db: &Db, clock: &ManualClock) -> WorkerBuilder<SqliteStore> {
        let path = db.path.clone();
        Worker::builder(move || {
            SqliteOptions::new()
                .busy_timeout(Duration::from_millis(1))
                .open(&path)
        })
        .clock(clock.clone())
        .owner_prefix("w")
        .poll_interval(Duration::from_millis(2))
        .shutdown_deadline(Duration::from_secs(5))
    }

    /// What the `on_outcome` hook saw: the outcome, the error counter at that moment, and when.
    type Seen = (JobOutcome, u64, Instant);

    /// A hook reporting to `tx` through the worker's own handle, set once it is built.
    fn report(
        tx: Sender<Seen>,
        handle: Arc<OnceLock<ShutdownHandle>>,
    ) -> impl Fn(&leasefence::Lease, &JobOutcome) + Send + Sync + 'static {
        let tx = Mutex::new(tx);
        move |_lease, outcome| {
            let errors = handle.get().map_or(u64::MAX, |h| h.stats().errors);
            let _ = tx
                .lock()
                .unwrap()
                .send((outcome.clone(), errors, Instant::now()));
        }
    }

    #[test]
    fn a_busy_database_while_claiming_is_waited_out_and_counted() {
        let db = Db::new();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        let blocker = db.raw();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let w = impatient(&db, &ManualClock::new(0.0))
            .build(|ctx| Ok(format!("{} done", ctx.job_id())))
            .unwrap();
        let (handle, run) = spawn(w);
        wait_until("busy claims", || handle.stats().errors >= 2);
        assert_eq!(handle.stats().claimed, 0);
        assert!(!handle.is_shutdown(), "busy is not fatal");
        blocker.execute_batch("ROLLBACK").unwrap();
        wait_until("the completion", || handle.stats().completed == 1);
        let stats = stop(&handle, run);
        assert_eq!((stats.claimed, stats.completed), (1, 1));
        assert!(stats.errors >= 2, "{stats:?}");
        assert_eq!(
            db.row("j").unwrap(),
            done_row("j", "w-0", 1, 30.0, "j done")
        );
    }

    #[test]
    fn a_store_error_while_claiming_stops_the_worker_and_run_returns_it() {
        let db = Db::new();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        db.raw()
            .execute_batch(
                "CREATE TRIGGER no_claims BEFORE UPDATE ON jobs WHEN NEW.owner IS NOT NULL \
                 BEGIN SELECT RAISE(ABORT, 'claims refused'); END;",
            )
            .unwrap();
        let w = sqlite_worker(&db, &ManualClock::new(0.0), "w")
            .build(|_ctx| Ok("never".into()))
            .unwrap();
        let handle = w.shutdown_handle();
        let err = run_to_end(w).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        assert!(err.to_string().contains("claims refused"), "{err}");
        assert!(handle.is_shutdown());
        let stats = handle.stats();
        assert_eq!((stats.claimed, stats.errors), (0, 1));
        assert_eq!(db.row("j").unwrap(), Row::fresh("j"));
    }

    #[test]
    fn a_clock_reading_that_is_not_a_number_stops_the_worker() {
        struct Broken;
        impl leasefence::Clock for Broken {
            fn now(&self) -> f64 {
                f64::NAN
            }
        }
        let db = Db::new();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        let w = sqlite_worker(&db, &ManualClock::new(0.0), "w")
            .clock(Broken)
            .build(|_ctx| Ok("never".into()))
            .unwrap();
        assert_invalid(run_to_end(w), "now");
        assert_eq!(db.row("j").unwrap(), Row::fresh("j"));
    }

    /// A write that stays busy is tried again three times, 10, 20 and 30 ms apart, then given up
    /// as a store error; the lease is left to expire.
    #[test]
    fn an_outcome_that_stays_busy_is_tried_three_more_times_then_given_up() {
        let db = Db::new();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        let path = db.path.clone();
        let (blocker_tx, blocker) = channel();
        let returned_at = Arc::new(Mutex::new(None));
        let returned = returned_at.clone();
        let (seen_tx, seen) = channel();
        let handle_slot: Arc<OnceLock<ShutdownHandle>> = Arc::default();
        let w = impatient(&db, &ManualClock::new(0.0))
            .on_outcome(report(seen_tx, handle_slot.clone()))
            .build(move |_ctx| {
                // Another connection takes the write lock and keeps it until the test lets go.
                let conn = leasefence::rusqlite::Connection::open(&path)?;
                conn.execute_batch("BEGIN IMMEDIATE")?;
                blocker_tx.send(conn).map_err(|_| "the test is gone")?;
                *returned.lock().unwrap() = Some(Instant::now());
                Ok::<_, BoxError>("r".to_string())
            })
            .unwrap();
        handle_slot.set(w.shutdown_handle()).unwrap();
        let (handle, run) = spawn(w);
        let held = recv(&blocker);
        let (outcome, errors, at) = recv(&seen);
        drop(held);
        let JobOutcome::StoreError(message) = &outcome else {
            panic!("expected a store error, got {outcome:?}")
        };
        assert!(message.contains("retry"), "a busy database: {message}");
        assert_eq!(errors, 4, "three busy retries and the give-up");
        let started = returned_at.lock().unwrap().unwrap();
        assert!(
            at.duration_since(started) >= Duration::from_millis(60),
            "the retries wait 10 + 20 + 30 ms: {:?}",
            at.duration_since(started)
        );
        let stats = stop(&handle, run);
        assert_eq!((stats.completed, stats.stale_refused), (0, 0));
        assert_eq!(
            db.row("j").unwrap(),
            Row {
                owner: Some("w-0".into()),
                until: 30.0,
                fence: 1,
                ..Row::fresh("j")
            },
            "left to expire"
        );
    }

    #[test]
    fn an_outcome_the_database_refuses_is_not_tried_again() {
        let db = Db::new();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        db.raw()
            .execute_batch(
                "CREATE TRIGGER no_results BEFORE UPDATE ON jobs WHEN NEW.done = 1 \
                 BEGIN SELECT RAISE(ABORT, 'results refused'); END;",
            )
            .unwrap();
        let (seen_tx, seen) = channel();
        let handle_slot: Arc<OnceLock<ShutdownHandle>> = Arc::default();
        let w = impatient(&db, &ManualClock::new(0.0))
            .drain(true)
            .on_outcome(report(seen_tx, handle_slot.clone()))
            .build(|_ctx| Ok("r".into()))
            .unwrap();
        handle_slot.set(w.shutdown_handle()).unwrap();
        let stats = w.run_drained();
        let (outcome, errors, _) = recv(&seen);
        assert!(
            matches!(&outcome, JobOutcome::StoreError(m) if m.contains("results refused")),
            "{outcome:?}"
        );
        assert_eq!(errors, 1, "not retried");
        assert_eq!((stats.claimed, stats.completed, stats.errors), (1, 0, 1));
        assert_eq!(db.row("j").unwrap().result, None);
    }
}

mod failures {
    use super::*;

    worker_case!(
        fn a_failing_handler_is_retried_with_backoff_then_succeeds(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[job("flaky").max_attempts(5)])
            .unwrap();
        let clock = ManualClock::new(0.0);
        let seen = Arc::new(Mutex::new(vec![]));
        let log = seen.clone();
        let w = worker(t, &clock, "w")
            .backoff(Backoff {
                base: 10.0,
                factor: 2.0,
                max: 100.0,
                jitter: 0.0,
            })
            .build(move |ctx| {
                log.lock()
                    .unwrap()
                    .push((ctx.attempt(), ctx.lease().last_error.clone()));
                match ctx.attempt() {
                    n @ (1 | 2) => Err(format!("boom {n}").into()),
                    _ => Ok("third time lucky".to_string()),
                }
            })
            .unwrap();
        let (handle, run) = spawn(w);

        wait_until("the first failure", || handle.stats().retried == 1);
        assert_eq!(failure(db, "flaky"), (Some("boom 1".into()), None, 10.0));
        let row = db.row("flaky").unwrap();
        assert_eq!(
            (row.owner, row.until, row.fence, row.done),
            (None, 0.0, 1, 0)
        );
        let listed = t.open()
            .list(Now::new(0.0).unwrap(), Some(Status::Retrying), None, 10)
            .unwrap();
        assert_eq!(listed.len(), 1);

        clock.set(9.5);
        settle();
        assert_eq!(
            handle.stats().claimed,
            1,
            "not claimed before its retry time"
        );

        clock.set(10.0);
        wait_until("the second failure", || handle.stats().retried == 2);
        assert_eq!(
            failure(db, "flaky"),
            (Some("boom 2".into()), None, 30.0),
            "the second delay doubles"
        );

        clock.set(30.0);
        wait_until("the success", || handle.stats().completed == 1);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.claimed, stats.retried, stats.dead, stats.completed),
            (3, 2, 0, 1)
        );
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (1, None),
                (2, Some("boom 1".to_string())),
                (3, Some("boom 2".to_string()))
            ]
        );
        assert_eq!(
            db.row("flaky").unwrap(),
            done_row("flaky", "w-0", 3, 60.0, "third time lucky")
        );
        }
    );

    worker_case!(
        fn a_job_that_keeps_failing_is_dead_after_its_last_attempt(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[job("doomed").max_attempts(3)])
            .unwrap();
        let clock = ManualClock::new(0.0);
        let outcomes = Arc::new(Mutex::new(vec![]));
        let log = outcomes.clone();
        let calls = AtomicUsize::new(0);
        let stats = worker(t, &clock, "w")
            .drain(true)
            .backoff(Backoff {
                base: 0.0,
                factor: 2.0,
                max: 0.0,
                jitter: 0.0,
            })
            .on_outcome(move |lease, outcome| {
                log.lock().unwrap().push((lease.fence, outcome.clone()))
            })
            .build(move |ctx| {
                // Bounded: were the job handed out beyond its three attempts, the fourth
                // completes it, so the run ends (and the assertions below fail) instead of
                // retrying forever.
                if calls.fetch_add(1, Ordering::SeqCst) >= 3 {
                    return Ok(format!("attempt {} should never have run", ctx.attempt()));
                }
                Err(format!("attempt {} failed", ctx.attempt()).into())
            })
            .unwrap()
            .run_drained();
        assert_eq!(
            (stats.claimed, stats.retried, stats.dead, stats.completed),
            (3, 2, 1, 0)
        );
        assert_eq!(stats.failed(), 3);
        let retry = |n: i64| JobOutcome::Retrying {
            at: 0.0,
            error: format!("attempt {n} failed"),
        };
        assert_eq!(
            *outcomes.lock().unwrap(),
            [
                (1, retry(1)),
                (2, retry(2)),
                (
                    3,
                    JobOutcome::Dead {
                        error: "attempt 3 failed".into()
                    }
                )
            ]
        );
        let row = db.row("doomed").unwrap();
        assert_eq!((row.fence, row.done, row.result), (3, 1, None));
        let (error, outcome, _) = failure(db, "doomed");
        assert_eq!(
            (error.as_deref(), outcome.as_deref()),
            (Some("attempt 3 failed"), Some("dead"))
        );
        assert_eq!(t.open().stats(Now::new(0.0).unwrap()).unwrap().dead, 1);
        }
    );

    worker_case!(
        fn a_panicking_handler_becomes_a_failure_and_the_thread_goes_on(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[job("fragile").max_attempts(2), job("next").priority(-1)])
            .unwrap();
        let clock = ManualClock::new(0.0);
        let errors = Arc::new(Mutex::new(vec![]));
        let log = errors.clone();
        let stats = worker(t, &clock, "w")
            .drain(true)
            .backoff(Backoff {
                base: 0.0,
                factor: 1.0,
                max: 0.0,
                jitter: 0.0,
            })
            .build(move |ctx| {
                log.lock().unwrap().push(ctx.lease().last_error.clone());
                if ctx.job_id() == "fragile" && ctx.attempt() == 1 {
                    panic!("kaboom");
                }
                Ok(format!("{} ok", ctx.job_id()))
            })
            .unwrap()
            .run_drained();
        assert_eq!(
            (stats.claimed, stats.retried, stats.completed, stats.dead),
            (3, 1, 2, 0)
        );
        assert_eq!(
            *errors.lock().unwrap(),
            [None, Some("handler panicked: kaboom".to_string()), None]
        );
        assert_eq!(
            db.row("fragile").unwrap(),
            done_row("fragile", "w-0", 2, 30.0, "fragile ok")
        );
        assert_eq!(db.row("next").unwrap().result.as_deref(), Some("next ok"));
        }
    );

    worker_case!(
        fn any_error_is_stored_with_its_message(t) {
        #[derive(Debug)]
        struct Quota(u32);
        impl std::fmt::Display for Quota {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "quota exceeded by {}", self.0)
            }
        }
        impl std::error::Error for Quota {}
        let db = t.db();
        t.open().enqueue_many(&[job("j").max_attempts(1)]).unwrap();
        let stats = worker(t, &ManualClock::new(0.0), "w")
            .drain(true)
            .build(|_ctx| Err(Quota(7).into()))
            .unwrap()
            .run_drained();
        assert_eq!(stats.dead, 1);
        assert_eq!(failure(db, "j").0.as_deref(), Some("quota exceeded by 7"));
        }
    );
}

mod scheduling {
    use super::*;

    worker_case!(
        fn the_worker_takes_jobs_by_priority_then_not_before_and_waits_for_not_before(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[
                job("low"),
                job("high-later").priority(5).not_before(5.0).unwrap(),
                job("future").priority(9).not_before(50.0).unwrap(),
                job("high").priority(5),
            ])
            .unwrap();
        let clock = ManualClock::new(10.0);
        let order = Arc::new(Mutex::new(vec![]));
        let run_once = |clock: &ManualClock| {
            let log = order.clone();
            worker(t, clock, "w")
                .drain(true)
                .build(move |ctx| {
                    log.lock().unwrap().push(ctx.job_id().to_string());
                    Ok(ctx.job_id().to_uppercase())
                })
                .unwrap()
                .run_drained()
        };

        assert_eq!(run_once(&clock).completed, 3);
        assert_eq!(*order.lock().unwrap(), ["high", "high-later", "low"]);
        assert_eq!(db.row("future").unwrap(), Row::fresh("future"));

        clock.set(50.0);
        assert_eq!(run_once(&clock).completed, 1);
        assert_eq!(
            *order.lock().unwrap(),
            ["high", "high-later", "low", "future"]
        );
        assert_eq!(
            db.row("future").unwrap(),
            done_row("future", "w-0", 1, 80.0, "FUTURE")
        );
        }
    );

    worker_case!(
        fn many_threads_finish_every_job_exactly_once_each_under_its_own_owner(t) {
        let db = t.db();
        let ids: Vec<String> = (0..40).map(|i| format!("job-{i:02}")).collect();
        t.open()
            .enqueue_many(&ids.iter().map(|id| job(id)).collect::<Vec<_>>())
            .unwrap();
        let seen = Arc::new(Mutex::new(vec![]));
        let log = seen.clone();
        let stats = worker(t, &ManualClock::new(0.0), "pool")
            .concurrency(4)
            .drain(true)
            .build(move |ctx| {
                log.lock()
                    .unwrap()
                    .push((ctx.job_id().to_string(), ctx.fence()));
                Ok(ctx.owner().to_string())
            })
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed), (40, 40));
        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        let expected: Vec<(String, i64)> = ids.iter().map(|id| (id.clone(), 1)).collect();
        assert_eq!(seen, expected);
        for row in db.rows() {
            assert_eq!((row.done, row.fence), (1, 1), "{row:?}");
            let owner = row.owner.unwrap();
            assert!(owner.starts_with("pool-"), "{owner}");
            assert_eq!(row.result.as_deref(), Some(owner.as_str()));
        }
        }
    );
}

mod shutdown {
    use super::*;

    worker_case!(
        fn waits_for_in_flight_jobs_then_releases_the_rest_keeping_the_fence(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[
                job("quick").priority(2),
                job("stuck").priority(1),
                job("never"),
            ])
            .unwrap();
        let clock = ManualClock::new(0.0);
        let (started_tx, started) = channel();
        let (told_tx, told) = channel();
        let (returned_tx, returned) = channel();
        let w = worker(t, &clock, "w")
            .concurrency(2)
            .ttl(30.0)
            .shutdown_deadline(Duration::from_secs(1))
            .build(move |ctx| {
                started_tx.send((ctx.job_id().to_string(), ctx.is_shutting_down()))?;
                if ctx.job_id() == "quick" {
                    // In flight when shutdown begins, finished well inside the deadline.
                    while !ctx.is_shutting_down() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    return Ok("quick done".to_string());
                }
                let cancelled = ctx.token().wait_timeout(PATIENCE);
                told_tx.send((cancelled, ctx.is_lost(), ctx.is_shutting_down()))?;
                // Winding down takes a moment: run waits for it (a grace period after the
                // deadline); the job was released meanwhile, so this result is not written.
                std::thread::sleep(Duration::from_millis(50));
                returned_tx.send(())?;
                Ok::<_, BoxError>("too late".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        let mut first = vec![recv(&started), recv(&started)];
        first.sort();
        assert_eq!(
            first,
            [("quick".to_string(), false), ("stuck".to_string(), false)],
            "both started before any shutdown"
        );

        // quick finishes inside the deadline; stuck does not
        let stats = stop(&handle, run);
        assert_eq!(
            recv(&told),
            (true, false, true),
            "cancelled at the deadline, not lost"
        );
        assert_eq!(
            returned.try_recv(),
            Ok(()),
            "run returned before the cancelled handler did, inside its grace"
        );
        assert_eq!(
            (
                stats.claimed,
                stats.completed,
                stats.released,
                stats.stale_refused,
                stats.lost
            ),
            (2, 1, 1, 0, 0)
        );
        assert_eq!(
            db.row("quick").unwrap(),
            done_row("quick", "w-0", 1, 30.0, "quick done").with_any_owner(db)
        );
        assert_eq!(
            db.row("stuck").unwrap(),
            Row {
                fence: 1,
                ..Row::fresh("stuck")
            },
            "released: no owner, until 0, fence kept"
        );
        assert_eq!(
            db.row("never").unwrap(),
            Row::fresh("never"),
            "no claim after shutdown"
        );

        // Claimable at once, on the same clock reading, with the next fence.
        let next = t.open()
            .claim_next(
                Owner::new("C").unwrap(),
                Now::new(0.0).unwrap(),
                Ttl::new(30.0).unwrap(),
            )
            .unwrap()
            .unwrap();
        assert_eq!((next.job_id.as_str(), next.fence), ("stuck", 2));
        }
    );

    worker_case!(
        fn a_shutdown_before_any_claim_claims_nothing(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let w = worker(t, &ManualClock::new(0.0), "w")
            .build(|_ctx| Ok("x".into()))
            .unwrap();
        let handle = w.shutdown_handle();
        handle.shutdown();
        let run = std::thread::spawn(move || w.run());
        assert!(ends_within(&run, PATIENCE), "run ignored the shutdown");
        let stats = run.join().unwrap().unwrap();
        assert_eq!(stats, WorkerStats::default());
        assert_eq!(db.row("j").unwrap(), Row::fresh("j"));
        }
    );

    worker_case!(
        fn shutdown_now_during_the_deadline_releases_the_job_at_once_keeping_the_fence(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("stuck").priority(1), job("never")]).unwrap();
        let clock = ManualClock::new(0.0);
        let (started_tx, started) = channel();
        let (told_tx, told) = channel();
        let w = worker(t, &clock, "w")
            .ttl(30.0)
            .shutdown_deadline(Duration::from_secs(60))
            .build(move |ctx| {
                started_tx.send(())?;
                while !ctx.is_shutting_down() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                started_tx.send(())?;
                let cancelled = ctx.token().wait_timeout(PATIENCE * 3);
                told_tx.send((cancelled, ctx.is_lost()))?;
                Ok::<_, BoxError>("too late".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        recv(&started);
        handle.shutdown();
        recv(&started);
        settle();
        assert!(
            !run.is_finished() && told.try_recv().is_err(),
            "within its 60 s deadline the job is left to run"
        );
        assert!(!handle.is_shutdown_now());

        handle.shutdown_now();
        assert!(handle.is_shutdown_now());
        assert!(
            ends_within(&run, PATIENCE),
            "run still waits out the deadline after shutdown_now: {:?}",
            handle.stats()
        );
        let stats = run.join().unwrap().unwrap();
        assert_eq!(recv(&told), (true, false), "cancelled, not lost");
        assert_eq!(
            (stats.claimed, stats.completed, stats.released, stats.stale_refused, stats.lost),
            (1, 0, 1, 0, 0)
        );
        assert_eq!(
            db.row("stuck").unwrap(),
            Row {
                fence: 1,
                ..Row::fresh("stuck")
            },
            "released: no owner, until 0, fence kept"
        );
        assert_eq!(db.row("never").unwrap(), Row::fresh("never"), "no claim after shutdown");
        let next = t.open()
            .claim_next(
                Owner::new("C").unwrap(),
                Now::new(0.0).unwrap(),
                Ttl::new(30.0).unwrap(),
            )
            .unwrap()
            .unwrap();
        assert_eq!((next.job_id.as_str(), next.fence), ("stuck", 2));
        }
    );

    worker_case!(
        fn shutdown_now_alone_stops_claiming_and_releases_what_runs(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("running").priority(1), job("never")]).unwrap();
        let (started_tx, started) = channel();
        let (returned_tx, returned) = channel();
        let worker_handle = Arc::new(OnceLock::<leasefence::ShutdownHandle>::new());
        let seen_by_handler = worker_handle.clone();
        let w = worker(t, &ManualClock::new(0.0), "w")
            .shutdown_deadline(Duration::from_secs(60))
            .build(move |ctx| {
                started_tx.send(())?;
                ctx.token().wait_timeout(PATIENCE * 3);
                // Winding down takes a moment once the job is released, well inside
                // shutdown_now's grace (100 ms), which starts then.
                wait_until("the release", || {
                    seen_by_handler.get().is_some_and(|h| h.stats().released == 1)
                });
                std::thread::sleep(Duration::from_millis(20));
                returned_tx.send(())?;
                Ok::<_, BoxError>("too late".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        worker_handle.set(handle.clone()).unwrap();
        recv(&started);
        handle.shutdown_now();
        assert!(handle.is_shutdown(), "shutdown_now is a shutdown too");
        assert!(
            ends_within(&run, PATIENCE),
            "run did not end after shutdown_now: {:?}",
            handle.stats()
        );
        assert_eq!(
            returned.try_recv(),
            Ok(()),
            "run returned before the cancelled handler did, inside its grace"
        );
        let stats = run.join().unwrap().unwrap();
        assert_eq!((stats.claimed, stats.released, stats.completed), (1, 1, 0));
        assert_eq!(
            db.row("running").unwrap(),
            Row {
                fence: 1,
                ..Row::fresh("running")
            }
        );
        assert_eq!(db.row("never").unwrap(), Row::fresh("never"));
        }
    );

    worker_case!(
        fn after_shutdown_now_a_handler_ignoring_its_cancellation_holds_run_only_briefly(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("deaf")]).unwrap();
        let (started_tx, started) = channel();
        let (open_tx, gate) = Gate::new();
        let (returned_tx, returned) = channel();
        let w = worker(t, &ManualClock::new(0.0), "w")
            .shutdown_deadline(Duration::from_secs(60))
            .build(move |_ctx| {
                started_tx.send(())?;
                gate.wait(); // deaf to its token
                returned_tx.send(())?;
                Ok::<_, BoxError>("too late".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        recv(&started);
        handle.shutdown_now();
        let ended = ends_within(&run, PATIENCE);
        open_tx.send(()).unwrap();
        assert!(
            ended,
            "run waited out a 60 s grace for a handler deaf to its cancellation"
        );
        let stats = run.join().unwrap().unwrap();
        assert_eq!((stats.claimed, stats.released, stats.completed), (1, 1, 0));
        recv(&returned);
        settle();
        assert_eq!(
            db.row("deaf").unwrap(),
            Row {
                fence: 1,
                ..Row::fresh("deaf")
            },
            "released; the late result is not written"
        );
        }
    );

    /// `shutdown` and `shutdown_now` are idempotent: each request is logged once, however
    /// often it is made.
    #[test]
    fn a_shutdown_request_is_logged_once() {
        let db = Db::new();
        let w = sqlite_worker(&db, &ManualClock::new(0.0), "w")
            .build(|_ctx| Ok("x".into()))
            .unwrap();
        let handle = w.shutdown_handle();
        let events = Arc::new(Events::default());
        let logged = |request: &dyn Fn()| {
            tracing::subscriber::with_default(events.clone(), request);
            events.messages()
        };
        let graceful = "INFO shutdown requested";
        let now = "INFO immediate shutdown requested: in-flight jobs are released now";
        assert_eq!(logged(&|| handle.shutdown()), [graceful]);
        assert_eq!(logged(&|| handle.shutdown()), [graceful]);
        assert!(handle.is_shutdown() && !handle.is_shutdown_now());
        assert_eq!(logged(&|| handle.shutdown_now()), [graceful, now]);
        assert_eq!(logged(&|| handle.shutdown_now()), [graceful, now]);
        assert!(handle.is_shutdown_now());
    }

    /// A tracing subscriber that keeps every event as its level and message (`INFO …`).
    #[derive(Default)]
    struct Events(Mutex<Vec<String>>);

    /// An event's message, as it is recorded.
    struct Message(String);

    impl Events {
        fn messages(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl tracing::field::Visit for Message {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}");
            }
        }
    }

    impl tracing::Subscriber for Events {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut message = Message(String::new());
            event.record(&mut message);
            let level = event.metadata().level();
            self.0
                .lock()
                .unwrap()
                .push(format!("{level} {}", message.0));
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }
}

/// Mostly backend-agnostic settings and names, checked once on SQLite.
mod setup {
    use super::*;

    #[test]
    fn bad_settings_are_rejected_by_name() {
        let db = Db::new();
        let clock = ManualClock::new(0.0);
        let ok = |_: &leasefence::JobContext<'_>| Ok(String::new());
        assert_invalid(
            sqlite_worker(&db, &clock, "w").concurrency(0).build(ok),
            "concurrency",
        );
        for ttl in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_invalid(sqlite_worker(&db, &clock, "w").ttl(ttl).build(ok), "ttl");
        }
        for fraction in [0.0, 1.0, 1.5, f64::NAN] {
            assert_invalid(
                sqlite_worker(&db, &clock, "w")
                    .heartbeat_fraction(fraction)
                    .build(ok),
                "heartbeat_fraction",
            );
        }
        assert_invalid(
            sqlite_worker(&db, &clock, "w")
                .poll_interval(Duration::ZERO)
                .build(ok),
            "poll_interval",
        );
        assert_invalid(sqlite_worker(&db, &clock, "w").batch(0).build(ok), "batch");
        for limit in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_invalid(
                sqlite_worker(&db, &clock, "w").timeout(limit).build(ok),
                "timeout",
            );
        }
        assert_invalid(sqlite_worker(&db, &clock, "").build(ok), "owner");
    }

    #[test]
    fn a_store_that_cannot_be_opened_fails_the_run_before_any_claim() {
        let db = Db::empty();
        let path = db.path.clone();
        // drain: were the store opened after all, the run would end instead of running on
        let w = Worker::builder(move || SqliteOptions::new().init(false).open(&path))
            .drain(true)
            .build(|_ctx| Ok(String::new()))
            .unwrap();
        let err = w.run().unwrap_err();
        assert!(matches!(err, Error::CannotOpen { .. }), "{err:?}");
        assert!(!db.path.exists());
    }

    #[test]
    fn the_default_owner_names_carry_the_process_id() {
        let db = Db::new();
        open(&db).enqueue_many(&[job("j")]).unwrap();
        Worker::sqlite(&db.path)
            .clock(ManualClock::new(0.0))
            .drain(true)
            .build(|ctx| Ok(ctx.owner().to_string()))
            .unwrap()
            .run_drained();
        let owner = db.row("j").unwrap().owner.unwrap();
        assert!(
            owner.ends_with(&format!("-{}-0", std::process::id())),
            "{owner}"
        );
        // {hostname}-{pid}-{thread}: the host name as the environment or the kernel tells it
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "worker".to_owned());
        assert_eq!(owner, format!("{host}-{}-0", std::process::id()));
    }

    #[test]
    fn the_system_clock_reads_seconds_since_the_unix_epoch() {
        use leasefence::{Clock, SystemClock};
        let epoch = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        };
        let before = epoch(std::time::SystemTime::now());
        let read = SystemClock.now();
        let after = epoch(std::time::SystemTime::now());
        assert!(
            before <= read && read <= after,
            "{before} <= {read} <= {after}"
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(SystemClock.now() >= read + 0.015, "it moves with real time");
    }

    #[test]
    fn debug_output_shows_what_matters() {
        let db = Db::new();
        let clock = ManualClock::new(0.0);
        let builder = sqlite_worker(&db, &clock, "dbg").concurrency(3).ttl(12.0);
        let text = format!("{builder:?}");
        for part in ["concurrency: 3", "ttl: 12.0", "owner_prefix: Some(\"dbg\")"] {
            assert!(text.contains(part), "{part} in {text}");
        }
        let w = builder
            .drain(true)
            .build(|ctx| Ok(format!("{ctx:?}")))
            .unwrap();
        let text = format!("{w:?}");
        for part in ["threads: 3", "owner_prefix: \"dbg\"", "claimed: 0"] {
            assert!(text.contains(part), "{part} in {text}");
        }
        let handle = w.shutdown_handle();
        assert!(
            format!("{handle:?}").contains("shutdown: false"),
            "{handle:?}"
        );

        open(&db).enqueue_many(&[job("j")]).unwrap();
        w.run_drained();
        let text = format!("{handle:?}");
        for part in ["shutdown: true", "completed: 1"] {
            assert!(text.contains(part), "{part} in {text}");
        }
        // the handler's context, as the handler printed it into the result
        let context = db.row("j").unwrap().result.unwrap();
        for part in ["JobContext", "job_id: \"j\"", "fence: 1", "lost: false"] {
            assert!(context.contains(part), "{part} in {context}");
        }

        let token = leasefence::CancelToken::new();
        assert_eq!(format!("{token:?}"), "CancelToken { cancelled: false }");
        token.cancel();
        assert_eq!(format!("{token:?}"), "CancelToken { cancelled: true }");
    }
}

trait AnyOwner {
    fn with_any_owner(self, db: &dyn Probe) -> Self;
}

impl AnyOwner for Row {
    /// The same row with the owner actually stored (which of two threads took a job is not
    /// deterministic).
    fn with_any_owner(mut self, db: &dyn Probe) -> Self {
        let stored = db.row(&self.id).unwrap().owner;
        assert!(
            stored.as_deref().is_some_and(|o| o.starts_with("w-")),
            "{stored:?}"
        );
        self.owner = stored;
        self
    }
}

/// Quick handlers are claimed and completed in batches; waiting jobs keep their leases; a
/// stopping worker gives back what it has not started.
mod batches {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("j{i:02}")).collect()
    }

    fn enqueue<B: Bench>(t: &B, ids: &[String]) {
        let jobs: Vec<NewJob> = ids.iter().map(|id| job(id)).collect();
        t.open().enqueue_many(&jobs).unwrap();
    }

    worker_case!(
        /// The next claim is sized by how long the handlers ran, not by how long the store took
        /// to commit their results: a store slow to commit (30 ms a completion) must not keep
        /// quick handlers at one job, and one commit, per claim.
        fn a_slow_commit_does_not_keep_quick_handlers_at_one_job_per_claim(t) {
        let db = t.db();
        let all = ids(20);
        enqueue(t, &all);
        let clock = ManualClock::new(100.0);
        let ctl = Arc::new(super::heartbeat::Ctl::default());
        ctl.slow_commit(Duration::from_millis(30));
        let stats = super::heartbeat::stalling(t, &clock, &ctl, 1)
            .drain(true)
            .build(|ctx| Ok(format!("ok {}", ctx.job_id())))
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed), (20, 20));
        // The first claim takes one job; its handler ran for microseconds, so the next asks
        // for the whole default batch of 128, which holds the other 19. Handler time is wall
        // time: on a loaded machine a preempted handler may count up to a millisecond or so
        // (17 was seen), while the 30 ms commit counted would make it one.
        let asked = ctl.asked();
        assert_eq!(asked[0], 1, "{asked:?}");
        assert!(asked[1] >= 10, "the second claim was sized by the commit: {asked:?}");
        // Their results are written together: one transaction for the first job, and for
        // the 19 one more (more only if a handler was held up for the 10 ms window).
        let commits = ctl.commits();
        assert_eq!(commits.iter().sum::<usize>(), 20, "{commits:?}");
        assert!(commits.len() <= 5, "a transaction per result or so: {commits:?}");
        for id in &all {
            let row = db.row(id).unwrap();
            assert_eq!((row.done, row.fence), (1, 1), "{row:?}");
            assert_eq!(row.result, Some(format!("ok {id}")));
        }
        }
    );

    worker_case!(
        /// The next claim is sized by the *mean* handler time of the last batch: 128 handlers
        /// of 5 µs each fit the 10 ms window many times over, so the claim after a full batch asks
        /// for the whole batch again (not for what the batch's total time would allow).
        fn the_claim_after_a_full_batch_of_quick_handlers_asks_for_a_full_batch_again(t) {
        // Handler time is wall time: on a loaded machine a preempted handler can make a
        // batch's mean exceed the 78 µs that 128 jobs in 10 ms allow (handlers of 20 µs did,
        // five runs in a row, while the mutation runner loaded both cores). So handlers of
        // 5 µs, up to five runs, and one must ask for 128 after a full batch. Sized by the
        // batch's *total* (0.64 ms at least), no run could: 10 ms / 0.64 ms is 15.
        let mut runs = Vec::new();
        for run in 0..5 {
            let all: Vec<String> = (0..300).map(|i| format!("r{run}-{i:03}")).collect();
            enqueue(t, &all);
            let clock = ManualClock::new(100.0);
            let ctl = Arc::new(super::heartbeat::Ctl::default());
            let stats = super::heartbeat::stalling(t, &clock, &ctl, 1)
                .drain(true)
                .build(|ctx| {
                    // The handler's own work: 5 µs of it.
                    let began = Instant::now();
                    while began.elapsed() < Duration::from_micros(5) {
                        std::hint::spin_loop();
                    }
                    Ok(format!("ok {}", ctx.job_id()))
                })
                .unwrap()
                .run_drained();
            assert_eq!((stats.claimed, stats.completed), (300, 300));
            // One job, then 128, 128 and the last 43, each claim asking for the default batch.
            let asked = ctl.asked();
            assert_eq!(asked[0], 1, "{asked:?}");
            // A full batch of 128 (the second claim), then a claim of 128 again.
            if asked[1..3] == [128, 128] {
                return;
            }
            runs.push(asked);
        }
        panic!("no run asked for a full batch after a full batch: {runs:?}");
        }
    );

    worker_case!(
        /// A handler that works longer than the batch window (20 ms here, the window is 10 ms)
        /// keeps every claim at one job: a claimed job never waits behind another's work.
        fn slow_handlers_are_claimed_one_job_at_a_time(t) {
        let all = ids(4);
        enqueue(t, &all);
        let clock = ManualClock::new(100.0);
        let ctl = Arc::new(super::heartbeat::Ctl::default());
        let stats = super::heartbeat::stalling(t, &clock, &ctl, 1)
            .drain(true)
            .build(|ctx| {
                // The handler's own work: 20 ms of it.
                std::thread::sleep(Duration::from_millis(20));
                Ok(format!("ok {}", ctx.job_id()))
            })
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed), (4, 4));
        // Four claims of one job each, then those that find the queue empty (until the
        // worker sees it drained): every one asks for a single job.
        let asked = ctl.asked();
        assert!(asked.len() > 4 && asked.iter().all(|&n| n == 1), "{asked:?}");
        }
    );

    worker_case!(
        /// A batch also fits in a quarter of the heartbeat interval: with heartbeats every 8 ms,
        /// handlers of 3 ms are claimed one at a time, though three would fit the 10 ms window
        /// (and ten times the interval would fit it too).
        fn a_batch_fits_in_a_quarter_of_the_heartbeat_interval(t) {
        enqueue(t, &ids(6));
        let clock = ManualClock::new(100.0);
        let ctl = Arc::new(super::heartbeat::Ctl::default());
        // The clock does not move, so no lease runs out however short the ttl.
        let stats = super::heartbeat::stalling(t, &clock, &ctl, 1)
            .ttl(0.024)
            .drain(true)
            .build(|ctx| {
                let began = Instant::now();
                while began.elapsed() < Duration::from_millis(3) {
                    std::hint::spin_loop();
                }
                Ok(format!("ok {}", ctx.job_id()))
            })
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed), (6, 6));
        let asked = ctl.asked();
        assert!(asked.len() > 6 && asked.iter().all(|&n| n == 1), "{asked:?}");
        }
    );

    /// The unfinished leases of the handler's own thread, read through its own store: the
    /// running job, the ones queued behind it and the results waiting to be written.
    fn held_by<S: Store>(ctx: &leasefence::JobContext<'_, S>) -> Vec<String> {
        let now = Now::new(ctx.now()).unwrap();
        let mut held: Vec<String> = ctx
            .store()
            .list(now, Some(Status::Leased), None, 10_000)
            .unwrap()
            .into_iter()
            .filter(|info| info.state.owner.as_deref() == Some(ctx.owner()))
            .map(|info| info.state.id)
            .collect();
        held.sort();
        held
    }

    worker_case!(
        fn quick_handlers_are_claimed_in_batches_no_larger_than_the_limit(t) {
        let db = t.db();
        let all = ids(40);
        enqueue(t, &all);
        let clock = ManualClock::new(100.0);
        let biggest = Arc::new(AtomicUsize::new(0));
        let seen = biggest.clone();
        let stats = worker(t, &clock, "b")
            .batch(4)
            .drain(true)
            .build(move |ctx| {
                // This thread's unfinished leases: the running job, the ones queued behind it
                // and the results waiting to be written with the batch.
                let held = held_by(ctx).len();
                seen.fetch_max(held, Ordering::SeqCst);
                Ok(format!("ok {}", ctx.job_id()))
            })
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed), (40, 40));
        let held = biggest.load(Ordering::SeqCst);
        assert!((2..=4).contains(&held), "largest batch held: {held}");
        for id in &all {
            let row = db.row(id).unwrap();
            assert_eq!((row.done, row.fence), (1, 1), "{row:?}");
            assert_eq!(row.result, Some(format!("ok {id}")));
        }
        }
    );

    /// The jobs after the handler's own that its thread holds unfinished: those queued behind
    /// it in its batch.
    fn queued_behind<S: Store>(ctx: &leasefence::JobContext<'_, S>) -> Vec<String> {
        held_by(ctx)
            .into_iter()
            .filter(|id| id.as_str() > ctx.job_id())
            .collect()
    }

    worker_case!(
        fn jobs_waiting_in_a_batch_keep_their_leases_while_an_earlier_handler_runs_long(t) {
        let db = t.db();
        let all = ids(20);
        enqueue(t, &all);
        let clock = ManualClock::new(100.0);
        let (open_gate, gate) = Gate::new();
        let (tx, started) = channel();
        let tx = Mutex::new(Some(tx));
        let first = AtomicBool::new(true);
        let (handle, run) = spawn(
            worker(t, &clock, "b")
                .ttl(3.0)
                .drain(true)
                .build(move |ctx| {
                    // The first claim is one job; its handler returns at once, so the next
                    // claim is sized by microseconds of handler time: a batch, however slow
                    // the store is to answer.
                    if first.swap(false, Ordering::SeqCst) {
                        return Ok("ok".to_string());
                    }
                    // The first job with others queued behind it is held for a long time.
                    let behind = queued_behind(ctx);
                    if !behind.is_empty()
                        && let Some(tx) = tx.lock().unwrap().take()
                    {
                        tx.send(behind).unwrap();
                        gate.wait();
                    }
                    Ok("ok".to_string())
                })
                .unwrap(),
        );
        let waiting = recv(&started);
        // Ten seconds of clock pass in steps: more than three lease lengths. Each step waits
        // until every lease the worker holds — the running job, a result waiting to be
        // written, the jobs queued behind — was renewed at this step's time.
        for _ in 0..10 {
            let now = clock.advance(1.0);
            wait_until("the heartbeat renews every held job at this step", || {
                let held: Vec<Row> = db
                    .rows()
                    .into_iter()
                    .filter(|r| r.owner.as_deref() == Some("b-0") && r.done == 0)
                    .collect();
                waiting.iter().all(|id| held.iter().any(|r| &r.id == id))
                    && held.iter().all(|r| r.until >= now + 3.0)
            });
        }
        open_gate.send(()).unwrap();
        assert!(ends_within(&run, PATIENCE), "{:?}", handle.stats());
        let stats = run.join().unwrap().unwrap();
        assert_eq!(
            (stats.completed, stats.stale_refused, stats.lost),
            (20, 0, 0)
        );
        for id in &all {
            let row = db.row(id).unwrap();
            assert_eq!(
                (row.done, row.fence, row.owner.as_deref()),
                (1, 1, Some("b-0"))
            );
        }
        }
    );

    worker_case!(
        fn a_stopping_worker_releases_the_jobs_of_its_batch_it_has_not_started(t) {
        let db = t.db();
        let all = ids(20);
        enqueue(t, &all);
        let clock = ManualClock::new(100.0);
        let handle: Arc<OnceLock<ShutdownHandle>> = Arc::new(OnceLock::new());
        let inside = handle.clone();
        let stopped_at: Arc<OnceLock<(String, Vec<String>)>> = Arc::new(OnceLock::new());
        let record = stopped_at.clone();
        let first = AtomicBool::new(true);
        let worker = worker(t, &clock, "b")
            .build(move |ctx| {
                // The first claim is one job; its handler returns at once, so the next claim
                // is sized by microseconds of handler time: a batch, however slow the store.
                if first.swap(false, Ordering::SeqCst) {
                    return Ok("ok".to_string());
                }
                // Stop at the first job with others queued behind it in its batch.
                let behind = queued_behind(ctx);
                if !behind.is_empty() && record.set((ctx.job_id().to_owned(), behind)).is_ok() {
                    inside.get().unwrap().shutdown();
                }
                Ok("ok".to_string())
            })
            .unwrap();
        handle.set(worker.shutdown_handle()).ok().unwrap();
        let (_, run) = spawn(worker);
        assert!(ends_within(&run, PATIENCE));
        let stats = run.join().unwrap().unwrap();
        let (last, behind) = stopped_at
            .get()
            .expect("some batch held more than one job")
            .clone();
        let ran = all.iter().filter(|id| **id <= last).count() as u64;
        assert_eq!(
            (stats.claimed, stats.completed, stats.released),
            (ran + behind.len() as u64, ran, behind.len() as u64)
        );
        for id in all.iter().filter(|id| **id <= last) {
            assert_eq!(db.row(id).unwrap(), done_row(id, "b-0", 1, 130.0, "ok"));
        }
        // Given back at once, fence kept: claimable now, under fence 2.
        for id in &behind {
            assert_eq!(
                db.row(id).unwrap(),
                Row {
                    fence: 1,
                    ..Row::fresh(id)
                }
            );
        }
        let next = t.open()
            .claim_next(
                Owner::new("other").unwrap(),
                Now::new(100.0).unwrap(),
                Ttl::new(5.0).unwrap(),
            )
            .unwrap()
            .unwrap();
        assert_eq!((next.job_id.as_str(), next.fence), (behind[0].as_str(), 2));
        }
    );
}

mod give_back;
mod outcomes;
mod routing;

worker_case!(
    /// `WorkerBuilder::scheduler`: of two workers asking for the scheduler role one holds it
    /// and enqueues every slot once; when it stops it gives the role back and the other takes
    /// over, so no slot is missed or enqueued twice.
    fn the_scheduler_role_enqueues_every_slot_once_and_passes_on_at_shutdown(t) {
        let store = t.open();
        let t0 = 1_796_083_200.0; // 2026-12-01T00:00:00Z
        let every_second = leasefence::Schedule::new("beat", "* * * * * *").unwrap();
        assert!(store.add_schedule(&every_second, Now::new(t0).unwrap()).unwrap());
        let clock = ManualClock::new(t0);
        let echo = |ctx: &leasefence::JobContext<'_, B::S>| Ok(ctx.job_id().to_owned());
        let (a, a_run) = spawn(worker(t, &clock, "a").scheduler(true).ttl(30.0).build(echo).unwrap());
        let (b, b_run) = spawn(worker(t, &clock, "b").scheduler(true).ttl(30.0).build(echo).unwrap());
        let done = |slot: i64| {
            let id = leasefence::run_id("beat", slot).unwrap();
            t.db().row(&id).is_some_and(|r| r.done == 1)
        };
        let holder = || t.db().row(leasefence::SCHEDULER_JOB).and_then(|r| r.owner);
        let t0s = t0 as i64;
        for k in 1..=5 {
            clock.set(t0 + k as f64);
            wait_until("the slot's run completed", || done(t0s + k));
        }
        wait_until("a scheduler holds the role", || holder().is_some());
        let first = holder().unwrap();
        // Stop whichever holds the role: it gives the role back on the way out.
        let (stopping, other) =
            if first.starts_with("a-") { ((a, a_run), (b, b_run)) } else { ((b, b_run), (a, a_run)) };
        stop(&stopping.0, stopping.1);
        for k in 6..=10 {
            clock.set(t0 + k as f64);
            wait_until("the slot's run completed", || done(t0s + k));
        }
        let second = holder().unwrap();
        assert_ne!(first, second);
        let attempts = t.db().attempts(leasefence::SCHEDULER_JOB);
        assert_eq!(attempts[0].outcome.as_deref(), Some("released"));
        assert_eq!(attempts.last().unwrap().owner, second);
        // One run per slot, each completed once.
        let runs: Vec<String> = t.db().rows().into_iter().map(|r| r.id).filter(|id| id.starts_with("beat@")).collect();
        let expected: Vec<String> = (1..=10).map(|k| leasefence::run_id("beat", t0s + k).unwrap()).collect();
        assert_eq!(runs, expected);
        stop(&other.0, other.1);
        assert_eq!(holder(), None, "the last scheduler gave the role back too");
    }
);

worker_case!(
    /// The scheduler role catching up after a gap runs each schedule once, for its latest slot,
    /// and says how many slots it skipped: one INFO line, only when there was a gap.
    fn a_scheduler_catching_up_runs_the_latest_slot_once_and_logs_the_slots_it_skipped(t) {
        let store = t.open();
        let t0 = 1_796_083_200.0; // 2026-12-01T00:00:00Z
        let every_second = leasefence::Schedule::new("tick", "* * * * * *").unwrap();
        assert!(store.add_schedule(&every_second, Now::new(t0).unwrap()).unwrap());
        let prefix = logs::marker("catchup");
        let logs = logs::capture(&format!("{prefix}-scheduler"));
        let skipped = "missed slots not run";
        let clock = ManualClock::new(t0);
        let echo = |ctx: &leasefence::JobContext<'_, B::S>| Ok(ctx.job_id().to_owned());
        let (w, run) = spawn(worker(t, &clock, &prefix).scheduler(true).ttl(30.0).build(echo).unwrap());
        let done = |slot: f64| {
            let id = leasefence::run_id("tick", slot as i64).unwrap();
            t.db().row(&id).is_some_and(|r| r.done == 1)
        };
        clock.set(t0 + 1.0);
        wait_until("the first slot's run completed", || done(t0 + 1.0));
        // Four slots later: the three between are skipped, the latest runs.
        clock.set(t0 + 5.0);
        wait_until("the catch-up logged", || !logs.with(skipped).is_empty());
        wait_until("the latest slot's run completed", || done(t0 + 5.0));
        stop(&w, run);
        let runs: Vec<String> = t.db().rows().into_iter().map(|r| r.id).filter(|id| id.starts_with("tick@")).collect();
        let expected: Vec<String> = [1, 5].iter().map(|k| leasefence::run_id("tick", t0 as i64 + k).unwrap()).collect();
        assert_eq!(runs, expected);
        let lines = logs.with(skipped);
        assert_eq!(lines.len(), 1, "one line, for the one gap: {lines:?}");
        assert!(lines[0].contains("INFO") && lines[0].contains("skipped=3"), "{lines:?}");
    }
);

worker_case!(
    /// The longest durations work, not a panic: a lease of `Ttl::MAX` (10^12 s) and a shutdown
    /// deadline of `Duration::MAX` (too long to add to the clock: "no limit"). The worker does
    /// its jobs and stops when drained.
    fn a_huge_ttl_and_an_unbounded_shutdown_deadline_work(t) {
        let all: Vec<NewJob> = (0..5).map(|i| job(&format!("h{i}"))).collect();
        t.open().enqueue_many(&all).unwrap();
        let clock = ManualClock::new(100.0);
        let stats = worker(t, &clock, "huge")
            .ttl(leasefence::Ttl::MAX)
            .shutdown_deadline(Duration::MAX)
            .drain(true)
            .build(|ctx| Ok(format!("ok {}", ctx.job_id())))
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed), (5, 5));
        for i in 0..5 {
            let id = format!("h{i}");
            let row = t.db().row(&id).unwrap();
            assert_eq!((row.done, row.fence), (1, 1), "{row:?}");
            assert_eq!(row.result, Some(format!("ok {id}")));
        }
    }
);
