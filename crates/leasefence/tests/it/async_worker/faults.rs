//! The async worker under store faults, as the blocking worker meets them: a shutdown while a
//! claim waits on a locked store, connections lost while claiming and while writing an
//! outcome (PostgreSQL), a busy spell shorter than the ttl; two runs of one worker; a panic's
//! record. Each case reads the outcome back through an independent connection.

use std::time::{Duration, Instant};

use leasefence::{
    AsyncJob, AsyncOptions, AsyncStore, AsyncWorker, JobOutcome, NewJob, SqliteOptions,
    SqliteStore, Store, WorkerStats,
};
use tokio::sync::{mpsc, oneshot};

use crate::common::{Db, PgDb, Probe};
use crate::reconnect::{Held, named_url};

use super::{DropSignal, blocking};

fn rt() -> tokio::runtime::Runtime {
    super::runtime(true)
}

/// The shutdown deadline runs while a claim waits on a locked store: the running handler is
/// told 200 ms after the shutdown, not once the store answers (here up to 20 s). What that
/// claim takes once the lock goes — a job whose queue the lock's own transaction resumed —
/// was never started and is given back, fence kept.
#[test]
fn the_shutdown_deadline_is_kept_while_a_claim_waits_on_a_locked_store() {
    let db = Db::new();
    let sync = SqliteStore::open(&db.path).unwrap();
    sync.enqueue_job(NewJob::new("long").unwrap()).unwrap();
    // In a paused queue until the lock's transaction resumes it: the claim in flight at the
    // shutdown takes it.
    let later = leasefence::Queue::new("later").unwrap();
    sync.enqueue_job(NewJob::new("due").unwrap().queue("later").unwrap())
        .unwrap();
    assert!(sync.pause(&later).unwrap());
    rt().block_on(async {
        let options =
            AsyncOptions::new().sqlite(SqliteOptions::new().busy_timeout(Duration::from_secs(20)));
        let store = AsyncStore::open(db.path.to_str().unwrap(), options)
            .await
            .unwrap();
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (dropped_tx, mut dropped) = mpsc::unbounded_channel();
        let w = AsyncWorker::builder(store)
            .owner("async-sd")
            .concurrency(2) // a free slot: the claim loop keeps polling
            .ttl(60.0)
            .poll_interval(Duration::from_millis(20))
            .shutdown_deadline(Duration::from_millis(200))
            .build(move |_job: AsyncJob| {
                let (s, d) = (started_tx.clone(), dropped_tx.clone());
                async move {
                    let _guard = DropSignal(d);
                    let _ = s.send(());
                    std::future::pending::<()>().await;
                    Ok(String::new())
                }
            })
            .unwrap();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let run = tokio::spawn(async move {
            w.run(async {
                let _ = stop_rx.await;
            })
            .await
        });
        tokio::time::timeout(Duration::from_secs(10), started.recv())
            .await
            .unwrap();
        // Another connection holds the write lock: the next claim waits for it (up to 20 s).
        let lock = db.raw();
        lock.execute_batch("BEGIN IMMEDIATE; UPDATE queues SET paused = 0 WHERE name = 'later'")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop_tx.send(()).unwrap();
        let asked = Instant::now();
        let told = tokio::time::timeout(Duration::from_secs(5), dropped.recv()).await;
        let waited = asked.elapsed();
        // The claim still waits; once the lock goes it takes `due`, which goes back.
        lock.execute_batch("COMMIT").unwrap();
        let stats = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            told.is_ok(),
            "the handler was still running {waited:?} after a shutdown with a 200 ms deadline"
        );
        assert_eq!((stats.claimed, stats.released), (2, 2), "{stats:?}");
    });
    for id in ["long", "due"] {
        let row = db.row(id).unwrap();
        assert_eq!((row.owner, row.fence, row.done), (None, 1, 0), "{id}");
    }
}

/// A claim whose session is terminated (ConnectionLost, PostgreSQL) does not end the run:
/// the worker claims again on a new connection and goes on, as the blocking worker does
/// (`reconnect::claims_whose_connection_is_lost_…`).
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_claim_whose_connection_is_lost_is_made_again_on_a_new_one() {
    let Some(db) = PgDb::new() else { return };
    let app = format!("{}_arun", db.schema);
    let url = named_url(&db.url, &app);
    rt().block_on(async {
        let options = AsyncOptions::new().postgres(db.options().database_clock(true));
        let store = AsyncStore::open(&url, options).await.unwrap();
        let w = AsyncWorker::builder(store)
            .owner("async-pg")
            .poll_interval(Duration::from_millis(20))
            .build(|job: AsyncJob| async move { Ok(format!("{} done", job.job_id())) })
            .unwrap();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let w2 = w.clone();
        let mut run = tokio::spawn(async move {
            w2.run(async {
                let _ = stop_rx.await;
            })
            .await
        });
        let (u, s, a) = (db.url.clone(), db.schema.clone(), app.clone());
        let ended = tokio::task::spawn_blocking(move || Held::lock(&u, &s).cut(&a, 1))
            .await
            .unwrap();
        assert!(ended >= 1);
        blocking(|| db.store().enqueue_job(NewJob::new("after").unwrap())).unwrap();
        // The worker should go on and complete the job.
        let early = tokio::time::timeout(Duration::from_secs(5), &mut run).await;
        if let Ok(ended_run) = early {
            panic!(
                "the run ended after a lost connection: {:?}",
                ended_run.unwrap()
            );
        }
        let row = blocking(|| db.row("after")).unwrap();
        assert_eq!(row.result.as_deref(), Some("after done"), "{row:?}");
        stop_tx.send(()).unwrap();
        run.await.unwrap().unwrap();
    });
}

/// A completion whose session is terminated while it waits on a lock (ConnectionLost,
/// PostgreSQL) is tried again on a new connection and stored — not lost as a store error with
/// the lease left held until it expires — as the blocking worker's `write_retry` does.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_whose_connection_is_lost_is_stored_on_a_new_one() {
    let Some(db) = PgDb::new() else { return };
    let app = format!("{}_awr", db.schema);
    let url = named_url(&db.url, &app);
    blocking_enqueue(&db.store(), "w");
    rt().block_on(async {
        let options = AsyncOptions::new().postgres(db.options().database_clock(true));
        let store = AsyncStore::open(&url, options).await.unwrap();
        let mut w = Gated::start(store, "async-pg").await;
        // concurrency 1, slot full: the only store call now is the completion.
        let held = blocking(|| Held::lock(&db.url, &db.schema));
        w.go.send(true).unwrap(); // the handler returns: its completion waits on the lock
        let a = app.clone();
        let cutter = tokio::task::spawn_blocking(move || held.cut(&a, 1));
        assert_eq!(cutter.await.unwrap(), 1);
        let outcome = tokio::time::timeout(Duration::from_secs(60), w.outcomes.recv())
            .await
            .unwrap()
            .unwrap();
        let _ = w.stop().await;
        let row = blocking(|| db.row("w")).unwrap();
        assert_eq!(
            (outcome, row.result.as_deref(), row.done),
            (JobOutcome::Completed, Some("w done"), 1),
            "{row:?}"
        );
    });
}

/// A running worker (concurrency 1; ttl 60 s, so no heartbeat during a case) whose handler
/// has started on its one job and waits for `go` to return `"{id} done"`; its outcomes arrive
/// on `outcomes`.
struct Gated {
    go: tokio::sync::watch::Sender<bool>,
    outcomes: mpsc::UnboundedReceiver<JobOutcome>,
    stop: oneshot::Sender<()>,
    run: tokio::task::JoinHandle<leasefence::Result<WorkerStats>>,
}

impl Gated {
    async fn start(store: AsyncStore, owner: &str) -> Gated {
        let (go_tx, go) = tokio::sync::watch::channel(false);
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (out_tx, outcomes) = mpsc::unbounded_channel();
        let w = AsyncWorker::builder(store)
            .owner(owner)
            .ttl(60.0)
            .poll_interval(Duration::from_millis(20))
            .on_outcome(move |_, o| {
                let _ = out_tx.send(o.clone());
            })
            .build(move |job: AsyncJob| {
                let (mut go, started) = (go.clone(), started_tx.clone());
                async move {
                    let _ = started.send(());
                    let _ = go.wait_for(|g| *g).await;
                    Ok(format!("{} done", job.job_id()))
                }
            })
            .unwrap();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let run = tokio::spawn(async move {
            w.run(async {
                let _ = stop_rx.await;
            })
            .await
        });
        tokio::time::timeout(Duration::from_secs(20), started.recv())
            .await
            .unwrap();
        Gated {
            go: go_tx,
            outcomes,
            stop,
            run,
        }
    }

    /// Stops the run and waits (20 s at most) for its stats.
    async fn stop(self) -> Option<WorkerStats> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(20), self.run)
            .await
            .ok()
            .and_then(|r| r.ok())
            .and_then(|r| r.ok())
    }
}

fn blocking_enqueue(store: &dyn Store, id: &str) {
    assert!(store.enqueue_job(NewJob::new(id).unwrap()).unwrap());
}

/// A renewal that meets a busy store is tried again at once, not a whole heartbeat (a third
/// of the ttl) later: a lock held for less than the ttl (1 s of a 1.5 s lease, the store free
/// again 0.3 s before the lease's end) costs neither the lease nor the result, as with the
/// blocking worker, which retries at once after a try that waited out the busy timeout (and
/// 0.1 s after one that failed faster: a tenth of the lease left; guide, step 2).
#[test]
fn a_busy_spell_shorter_than_the_ttl_does_not_lose_the_lease() {
    let db = Db::new();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_job(NewJob::new("b").unwrap())
        .unwrap();
    let stats: WorkerStats = rt().block_on(async {
        let options = AsyncOptions::new()
            .sqlite(SqliteOptions::new().busy_timeout(Duration::from_millis(50)));
        let store = AsyncStore::open(db.path.to_str().unwrap(), options)
            .await
            .unwrap();
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let w = AsyncWorker::builder(store)
            .owner("async-busy")
            .ttl(1.5) // default heartbeat_fraction: renewals every 0.5 s
            .poll_interval(Duration::from_millis(20))
            .drain(true)
            .build(move |_job: AsyncJob| {
                let started = started_tx.clone();
                async move {
                    let _ = started.send(());
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                    Ok("kept".to_owned())
                }
            })
            .unwrap();
        let w2 = w.clone();
        let run = tokio::spawn(async move { w2.run(std::future::pending()).await });
        tokio::time::timeout(Duration::from_secs(10), started.recv())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let lock = db.raw();
        lock.execute_batch("BEGIN IMMEDIATE").unwrap();
        tokio::time::sleep(Duration::from_millis(1000)).await; // until ~1.2 s of 1.5 s
        lock.execute_batch("ROLLBACK").unwrap();
        tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    });
    let row = db.row("b").unwrap();
    assert_eq!(
        (row.result.as_deref(), row.fence, stats.claimed, stats.lost),
        (Some("kept"), 1, 1, 0),
        "{stats:?} {row:?}"
    );
}

/// The blocking worker under the same busy spell keeps its lease too.
#[test]
fn the_blocking_worker_too_keeps_its_lease_through_a_busy_spell() {
    let db = Db::new();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_job(NewJob::new("b").unwrap())
        .unwrap();
    let (started_tx, started) = std::sync::mpsc::channel();
    let w = leasefence::Worker::sqlite_with(
        &db.path,
        SqliteOptions::new().busy_timeout(Duration::from_millis(50)),
    )
    .ttl(1.5)
    .poll_interval(Duration::from_millis(20))
    .drain(true)
    .build(move |_ctx| {
        let _ = started_tx.send(());
        std::thread::sleep(Duration::from_millis(2500));
        Ok("kept".to_owned())
    })
    .unwrap();
    let run = std::thread::spawn(move || w.run());
    started.recv().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let lock = db.raw();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    lock.execute_batch("ROLLBACK").unwrap();
    let stats = run.join().unwrap().unwrap();
    let row = db.row("b").unwrap();
    assert_eq!(
        (row.result.as_deref(), row.fence, stats.claimed, stats.lost),
        (Some("kept"), 1, 1, 0),
        "{stats:?} {row:?}"
    );
}

/// `AsyncWorker` is `Clone` and `run(&self)`: each run holds its own leases, so shutting one
/// run down (deadline 0) neither drops the other run's handler nor releases its lease.
#[test]
fn stopping_one_run_leaves_another_runs_jobs_alone() {
    let db = Db::new();
    let sync = SqliteStore::open(&db.path).unwrap();
    rt().block_on(async {
        let store = AsyncStore::open(db.path.to_str().unwrap(), AsyncOptions::new())
            .await
            .unwrap();
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (dropped_tx, mut dropped) = mpsc::unbounded_channel();
        let w = AsyncWorker::builder(store)
            .owner("async-two")
            .ttl(60.0)
            .poll_interval(Duration::from_millis(20))
            .shutdown_deadline(Duration::ZERO)
            .build(move |job: AsyncJob| {
                let (s, d) = (started_tx.clone(), dropped_tx.clone());
                async move {
                    let _guard = DropSignal(d);
                    let _ = s.send(job.job_id().to_owned());
                    std::future::pending::<()>().await;
                    Ok(String::new())
                }
            })
            .unwrap();
        // Run A claims job "a"; then run B starts and claims "b".
        blocking(|| blocking_enqueue(&sync, "a"));
        let (stop_a, stopped_a) = oneshot::channel::<()>();
        let wa = w.clone();
        let run_a = tokio::spawn(async move {
            wa.run(async {
                let _ = stopped_a.await;
            })
            .await
        });
        assert_eq!(started.recv().await.unwrap(), "a");
        blocking(|| blocking_enqueue(&sync, "b"));
        let wb = w.clone();
        let (stop_b, stopped_b) = oneshot::channel::<()>();
        let run_b = tokio::spawn(async move {
            wb.run(async {
                let _ = stopped_b.await;
            })
            .await
        });
        assert_eq!(started.recv().await.unwrap(), "b");
        // Stop A only.
        stop_a.send(()).unwrap();
        run_a.await.unwrap().unwrap();
        let _first = dropped.recv().await; // A's own handler
        let second = tokio::time::timeout(Duration::from_millis(500), dropped.recv()).await;
        let b_row = blocking(|| db.row("b")).unwrap();
        stop_b.send(()).unwrap();
        let _ = run_b.await;
        assert!(
            second.is_err() && b_row.owner.as_deref() == Some("async-two"),
            "B's handler dropped by A's shutdown: {}; B's job as stored: {b_row:?}",
            second.is_ok()
        );
    });
}

/// The blocking worker under the same locked store tells its handler at the deadline too.
#[test]
fn the_blocking_worker_too_keeps_the_deadline_while_a_claim_waits() {
    let db = Db::new();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_job(NewJob::new("long").unwrap())
        .unwrap();
    let (started_tx, started) = std::sync::mpsc::channel();
    let (told_tx, told) = std::sync::mpsc::channel();
    let w = leasefence::Worker::sqlite_with(
        &db.path,
        SqliteOptions::new().busy_timeout(Duration::from_secs(20)),
    )
    .concurrency(2)
    .ttl(60.0)
    .poll_interval(Duration::from_millis(20))
    .shutdown_deadline(Duration::from_millis(200))
    .build(move |ctx| {
        let _ = started_tx.send(());
        ctx.token().wait();
        let _ = told_tx.send(Instant::now());
        Ok(String::new())
    })
    .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    started.recv().unwrap();
    let lock = db.raw();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    handle.shutdown();
    let asked = Instant::now();
    let got = told.recv_timeout(Duration::from_secs(5));
    let waited = asked.elapsed();
    lock.execute_batch("ROLLBACK").unwrap();
    let _ = run.join();
    assert!(got.is_ok(), "still running {waited:?} after shutdown");
}

/// A panicking async handler's failure is stored as the blocking worker stores it
/// (`handler panicked: handler bug`), not as tokio's join error with its per-process task id.
#[test]
fn a_panic_is_recorded_as_the_blocking_worker_records_it() {
    let db = Db::new();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_job(NewJob::new("boom").unwrap().max_attempts(1))
        .unwrap();
    rt().block_on(async {
        let store = AsyncStore::open(db.path.to_str().unwrap(), AsyncOptions::new())
            .await
            .unwrap();
        let w = AsyncWorker::builder(store)
            .drain(true)
            .poll_interval(Duration::from_millis(20))
            .build(
                |_job: AsyncJob| async move { std::panic::resume_unwind(Box::new("handler bug")) },
            )
            .unwrap();
        let stats = w.run(std::future::pending()).await.unwrap();
        assert_eq!(stats.dead, 1);
    });
    let sync = SqliteStore::open(&db.path).unwrap();
    let info = sync
        .inspect(
            leasefence::JobId::new("boom").unwrap(),
            leasefence::Now::system(),
        )
        .unwrap()
        .unwrap();
    assert_eq!(info.error.as_deref(), Some("handler panicked: handler bug"));
}

/// An outcome write that finds no connection of the store's pool free within its
/// `acquire_timeout` (`Unavailable`: nothing of it ran) is tried again until one comes free —
/// for up to a ttl, as a failed connection is — not given up after the few quick retries of a
/// busy store with the result thrown away (the job would run again under the next fence).
/// Here the pool's one connection is taken by another call for as long as the worker keeps
/// saying so in its log, then freed: the completion is stored, once, read back.
async fn a_completion_waits_out_a_busy_pool(
    store: AsyncStore,
    probe: &dyn Probe,
    sync: &dyn Store,
) {
    let id = crate::logs::marker("pool-busy");
    let logs = crate::logs::capture(&id);
    blocking(|| blocking_enqueue(sync, &id));
    let mut w = Gated::start(store.clone(), "async-pool").await;
    // concurrency 1, slot full: the only store call from now on is the completion. The
    // pool's one connection is taken until freed.
    let (free, holder) = super::take_the_one_connection(&store).await;
    w.go.send(true).unwrap();
    // Past the quick retries (5, ~0.5 s): three waits logged, and no outcome meanwhile.
    let since = Instant::now();
    while logs.with("could not reach the database").len() < 3 {
        if let Ok(outcome) = w.outcomes.try_recv() {
            panic!("an outcome while no connection was free: {outcome:?}");
        }
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "the completion stopped being tried"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    free.send(()).unwrap();
    holder.await.unwrap().unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(20), w.outcomes.recv())
        .await
        .unwrap()
        .unwrap();
    let stats = w.stop().await.expect("the run ends without an error");
    let row = blocking(|| probe.row(&id)).unwrap();
    assert_eq!(
        (outcome, row.result, row.done, row.fence),
        (JobOutcome::Completed, Some(format!("{id} done")), 1, 1),
    );
    assert_eq!((stats.claimed, stats.completed), (1, 1), "{stats:?}");
}

fn one_connection() -> AsyncOptions {
    AsyncOptions::new()
        .connections(1)
        .acquire_timeout(Duration::from_millis(20))
}

#[test]
fn a_completion_waits_out_a_busy_pool_sqlite() {
    let db = Db::new();
    let sync = SqliteStore::open(&db.path).unwrap();
    rt().block_on(async {
        let store = AsyncStore::open(db.path.to_str().unwrap(), one_connection())
            .await
            .unwrap();
        a_completion_waits_out_a_busy_pool(store, &db, &sync).await;
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_waits_out_a_busy_pool_pg() {
    let Some(db) = PgDb::new() else { return };
    let sync = db.store();
    rt().block_on(async {
        let options = one_connection().postgres(db.options().database_clock(true));
        let store = AsyncStore::open(&db.url, options).await.unwrap();
        a_completion_waits_out_a_busy_pool(store, &db, &sync).await;
    });
}

/// A result PostgreSQL cannot hold (a NUL byte) is recorded as a failed attempt saying why —
/// here the last one, so the job is dead — not left leased to expire and run again for ever.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_result_the_store_cannot_hold_fails_the_attempt() {
    let Some(db) = PgDb::new() else { return };
    let sync = db.store();
    assert!(
        sync.enqueue_job(NewJob::new("nul").unwrap().max_attempts(1))
            .unwrap()
    );
    rt().block_on(async {
        let options = AsyncOptions::new().postgres(db.options().database_clock(true));
        let store = AsyncStore::open(&db.url, options).await.unwrap();
        let (out_tx, mut outcomes) = mpsc::unbounded_channel();
        let w = AsyncWorker::builder(store)
            .drain(true)
            .poll_interval(Duration::from_millis(20))
            .on_outcome(move |_, o| {
                let _ = out_tx.send(o.clone());
            })
            .build(|_job: AsyncJob| async { Ok("half\0half".to_owned()) })
            .unwrap();
        let stats = tokio::time::timeout(Duration::from_secs(20), w.run(std::future::pending()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (stats.claimed, stats.completed, stats.dead, stats.errors),
            (1, 0, 1, 0),
            "{stats:?}"
        );
        let told = outcomes.recv().await.unwrap();
        let JobOutcome::Dead { error } = &told else {
            panic!("{told:?}")
        };
        assert!(
            error.starts_with("the result could not be stored: ") && error.contains("NUL"),
            "{error}"
        );
        let row = blocking(|| db.row("nul")).unwrap();
        assert_eq!((row.done, row.fence, row.result), (1, 1, None));
    });
}

/// Polls the async worker's counters until `done` holds, up to 10 s.
async fn until_stats(w: &AsyncWorker, what: &str, done: impl Fn(&WorkerStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(&w.stats()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            w.stats()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The time from the first to the fourth failing renewal of the async worker's one running
/// job (three gaps: one late observation of a count shifts only the span's ends), each
/// failing busy after `busy` (another connection holds the write lock); then the lock
/// goes and the next try renews before the lease ends, and the result is stored under the
/// first fence. The lease: ttl 6 s, renewed every 2 s, so a failed renewal is tried again
/// 400 ms after it began (a tenth of the 4 s left when it fell due).
fn span_of_failing_renewals(busy: Duration) -> Duration {
    let db = Db::new();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_job(NewJob::new("paced").unwrap())
        .unwrap();
    let (stats, span) = rt().block_on(async {
        let options = AsyncOptions::new().sqlite(SqliteOptions::new().busy_timeout(busy));
        let store = AsyncStore::open(db.path.to_str().unwrap(), options)
            .await
            .unwrap();
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let finish = std::sync::Arc::new(tokio::sync::Notify::new());
        let finish_in = finish.clone();
        let w = AsyncWorker::builder(store)
            .owner("async-paced")
            .ttl(6.0)
            .poll_interval(Duration::from_millis(20))
            .drain(true)
            .build(move |_job: AsyncJob| {
                let (started, finish) = (started_tx.clone(), finish_in.clone());
                async move {
                    let _ = started.send(());
                    finish.notified().await;
                    Ok("kept".to_owned())
                }
            })
            .unwrap();
        let w2 = w.clone();
        let run = tokio::spawn(async move { w2.run(std::future::pending()).await });
        tokio::time::timeout(Duration::from_secs(10), started.recv())
            .await
            .unwrap();
        let lock = db.raw();
        lock.execute_batch("BEGIN IMMEDIATE").unwrap();
        // The renewal falls due 2 s after the claim; every try fails busy. A try's failure is
        // counted when it ends: the gaps between the counts are the gaps between the starts.
        let mut tries = Vec::new();
        for n in 1..=4 {
            until_stats(&w, "a failed renewal", |s| s.errors >= n).await;
            tries.push(Instant::now());
        }
        assert_eq!(w.stats().renewed, 0, "{:?}", w.stats());
        lock.execute_batch("ROLLBACK").unwrap();
        until_stats(&w, "a renewal once the lock is gone", |s| s.renewed >= 1).await;
        finish.notify_one();
        let stats = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        (stats, tries[3] - tries[0])
    });
    let row = db.row("paced").unwrap();
    assert_eq!(
        (
            row.result.as_deref(),
            row.fence,
            stats.lost,
            stats.completed
        ),
        (Some("kept"), 1, 0, 1),
        "{stats:?} {row:?}"
    );
    span
}

/// A renewal that fails at once — a busy timeout of 0, as a server refusing connections
/// fails it — is tried again after the pause (400 ms), not every 10 ms: three gaps of about
/// 400 ms, not 30 ms in all.
#[test]
fn a_renewal_that_fails_at_once_is_tried_again_after_a_pause_not_at_once() {
    let span = span_of_failing_renewals(Duration::ZERO);
    assert!(
        span >= Duration::from_millis(900) && span < Duration::from_millis(4_000),
        "four failed renewals within {span:?}, not about 1.2 s"
    );
}

/// A renewal that failed slowly — busy after a 600 ms timeout, longer than the 400 ms pause —
/// is tried again at once: the pause counts from when the try began, not from its failure
/// (which would make the gaps 1 s): three gaps of about 600 ms, 1.8 s in all, not 3 s.
#[test]
fn a_renewal_that_failed_slowly_is_tried_again_at_once() {
    let span = span_of_failing_renewals(Duration::from_millis(600));
    assert!(
        span >= Duration::from_millis(1_650) && span < Duration::from_millis(2_550),
        "four failed renewals within {span:?}, not about 1.8 s (three busy timeouts)"
    );
}
