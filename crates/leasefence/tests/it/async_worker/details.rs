//! The async worker's details, each observable: what an [`AsyncJob`] says (fence, attempt,
//! loss, the fence gate), the handler's future dropped when its lease ends, its settings'
//! checks and their messages, the heartbeat's cadence, and an outcome's write tried again
//! while the store is busy — then reported as a store error.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::*;
use crate::reconnect::{named_url, sessions};
use leasefence::{Resource, SqliteOptions};

/// Sends on drop: tells the test that the handler's future was dropped.
struct Dropped(Option<oneshot::Sender<()>>);

impl Drop for Dropped {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

async_cases! {
    async fn a_job_says_its_fence_and_attempt_and_gates_side_effects_on_the_fence(store, probe, sync) {
        enqueue(sync, "again", 0);
        // A first attempt whose lease has long expired: the worker's claim is attempt 2, fence 2.
        let first = blocking(|| {
            sync.claim(JobId::new("again").unwrap(), Owner::new("gone").unwrap(), now_minus(100.0), Ttl::new(1.0).unwrap())
        })
        .unwrap()
        .expect("first claim");
        assert_eq!(first.fence, 1);
        // Another writer's fence 9 on "mailer": this lease's fence 2 is below it.
        assert!(blocking(|| sync.admit(Resource::new("mailer").unwrap(), 9)).unwrap());
        let (w, _) = worker(&store, |b| b.drain(true), |job: AsyncJob| async move {
            let ledger = job.admit("ledger").await?;
            let mailer = job.admit("mailer").await?;
            Ok(format!("fence {} attempt {} ledger {ledger} mailer {mailer}", job.fence(), job.attempt()))
        });
        let stats = within("the drained run", w.run(std::future::pending())).await.unwrap();
        assert_eq!(stats.completed, 1, "{stats:?}");
        let row = blocking(|| probe.row("again")).unwrap();
        assert_eq!(row.result.as_deref(), Some("fence 2 attempt 2 ledger true mailer false"));
        assert_eq!(row.fence, 2);
        // The gate recorded fence 2 for "ledger": fence 1 is refused there now, 2 is not.
        assert!(!blocking(|| sync.admit(Resource::new("ledger").unwrap(), 1)).unwrap());
        assert!(blocking(|| sync.admit(Resource::new("ledger").unwrap(), 2)).unwrap());
    }

    async fn a_lease_ended_under_the_handler_is_seen_by_its_tasks_and_drops_its_future(store, probe, sync) {
        enqueue(sync, "watched", 0);
        let (seen_tx, seen) = oneshot::channel();
        let (dropped_tx, dropped) = oneshot::channel();
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let seen_tx = Arc::new(Mutex::new(Some(seen_tx)));
        let dropped_tx = Arc::new(Mutex::new(Some(dropped_tx)));
        let (w, mut outcomes) = worker(&store, |b| b.ttl(30.0), move |job: AsyncJob| {
            let (seen_tx, dropped_tx, started) = (seen_tx.clone(), dropped_tx.clone(), started_tx.clone());
            async move {
                let _guard = Dropped(dropped_tx.lock().unwrap().take());
                // A task of the handler's own outlives its future: it watches the lease.
                let j = job.clone();
                let seen_tx = seen_tx.lock().unwrap().take();
                tokio::spawn(async move {
                    let before = (j.loss(), j.is_lost());
                    let loss = j.lost().await;
                    if let Some(tx) = seen_tx {
                        let _ = tx.send((before, loss, j.loss(), j.is_lost()));
                    }
                });
                let _ = started.send(());
                std::future::pending::<()>().await;
                Ok("never".to_owned())
            }
        });
        let (stop, run) = spawn(&w);
        within("the handler to start", started.recv()).await.unwrap();
        assert!(blocking(|| sync.cancel(JobId::new("watched").unwrap(), Now::system())).unwrap());
        let (_, outcome) = within("the outcome", outcomes.recv()).await.unwrap();
        assert_eq!(outcome, JobOutcome::Cancelled);
        let (before, loss, after, lost) = within("the handler's task", seen).await.unwrap();
        assert_eq!(before, (None, false), "the lease was the worker's");
        assert_eq!((loss, after, lost), (Loss::Operator, Some(Loss::Operator), true));
        within("the handler's future to be dropped", dropped).await.unwrap();
        stop.send(()).unwrap();
        within("the worker to stop", run).await.unwrap();
        assert_eq!(blocking(|| probe.row("watched")).unwrap().result, None);
    }

    async fn the_heartbeat_renews_every_fraction_of_the_ttl_so_a_long_handler_keeps_its_lease(store, probe, sync) {
        enqueue(sync, "long", 0);
        // ttl 4 s, renewed every third of it: the handler waits (bounded) until its lease was
        // renewed, and its result is stored. Renewing any later than the ttl would lose it.
        let (w, mut outcomes) = worker(&store, |b| b.ttl(4.0), |job: AsyncJob| async move {
            let first = job.lease().until;
            let deadline = Instant::now() + Duration::from_secs(6);
            loop {
                let id = job.job_id().to_owned();
                let until = job.store().call(move |s| s.state(JobId::new(&id)?)).await?.map(|s| s.until);
                if until.is_some_and(|u| u >= first + 1.0) {
                    return Ok(format!("renewed to {}", until.unwrap() - first));
                }
                if Instant::now() > deadline {
                    return Err("never renewed".into());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let (stop, run) = spawn(&w);
        let (_, outcome) = within("the outcome", outcomes.recv()).await.unwrap();
        assert_eq!(outcome, JobOutcome::Completed);
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert!(stats.renewed >= 1, "{stats:?}");
        let row = blocking(|| probe.row("long")).unwrap();
        assert_eq!((row.done, row.fence), (1, 1));
        assert!(row.result.unwrap().starts_with("renewed to "));
    }
}

async_cases! {
    async fn a_write_refused_after_the_handler_returned_is_told_apart_by_one_read(store, probe, sync) {
        for id in ["op", "stolen", "stolen-fail"] {
            enqueue(sync, id, 0);
        }
        // The handlers return only once every lease has ended behind the worker's back (its
        // heartbeat, every 10 s, has not seen it): their writes are refused by the store.
        let (go_tx, go) = tokio::sync::watch::channel(false);
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (w, mut outcomes) = worker(&store, |b| b.concurrency(3).ttl(30.0), move |job: AsyncJob| {
            let (mut go, started) = (go.clone(), started_tx.clone());
            async move {
                let _ = started.send(job.job_id().to_owned());
                go.wait_for(|go| *go).await.map_err(|e| e.to_string())?;
                if job.job_id() == "stolen-fail" {
                    return Err("boom".into());
                }
                Ok("stale".to_owned())
            }
        });
        let (stop, run) = spawn(&w);
        for _ in 0..3 {
            within("the handlers to start", started.recv()).await.unwrap();
        }
        assert!(blocking(|| sync.cancel(JobId::new("op").unwrap(), Now::system())).unwrap());
        for id in ["stolen", "stolen-fail"] {
            blocking(|| probe.exec(&format!("UPDATE jobs SET until = 0 WHERE id = '{id}'")));
            let b = blocking(|| {
                sync.claim(JobId::new(id).unwrap(), Owner::new("B").unwrap(), Now::system(), Ttl::new(60.0).unwrap())
            })
            .unwrap()
            .expect("expired: B claims");
            assert_eq!(b.fence, 2);
        }
        go_tx.send(true).unwrap();
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(within("the outcomes", outcomes.recv()).await.unwrap());
        }
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            seen,
            [
                ("op".to_owned(), JobOutcome::Cancelled),
                ("stolen".to_owned(), JobOutcome::Refused),
                ("stolen-fail".to_owned(), JobOutcome::Refused),
            ]
        );
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert_eq!(
            (stats.cancelled, stats.stale_refused, stats.lost, stats.completed, stats.retried),
            (1, 2, 0, 0, 0),
            "{stats:?}"
        );
        let op = blocking(|| probe.row("op")).unwrap();
        assert_eq!((op.done, op.result), (1, None));
        for id in ["stolen", "stolen-fail"] {
            let row = blocking(|| probe.row(id)).unwrap();
            assert_eq!((row.owner.as_deref(), row.fence, row.done, row.result), (Some("B"), 2, 0, None));
        }
    }
}

async_cases! {
    async fn a_freed_slot_is_filled_at_once_not_at_the_next_poll(store, probe, sync) {
        for id in ["a", "b", "c"] {
            enqueue(sync, id, 0);
        }
        // Two slots, three jobs, a poll interval far beyond the test's patience: the third job
        // is claimed as soon as a slot frees, so the drained run ends in moments.
        let (w, _) = worker(&store, |b| b.concurrency(2).drain(true).poll_interval(Duration::from_secs(600)),
            |job: AsyncJob| async move { Ok(job.job_id().to_uppercase()) });
        let stats = within("the drained run", w.run(std::future::pending())).await.unwrap();
        assert_eq!((stats.claimed, stats.completed), (3, 3), "{stats:?}");
        for id in ["a", "b", "c"] {
            assert_eq!(blocking(|| probe.row(id)).unwrap().result, Some(id.to_uppercase()));
        }
    }

    async fn at_shutdown_a_running_handler_gets_the_deadline_to_finish(store, probe, sync) {
        enqueue(sync, "finishing", 0);
        let (started_tx, mut started) = mpsc::unbounded_channel();
        // The handler's work takes 300 ms after the shutdown is asked for; the deadline is 20 s.
        let (w, _) = worker(&store, |b| b.shutdown_deadline(Duration::from_secs(20)), move |job: AsyncJob| {
            let started = started_tx.clone();
            async move {
                let _ = started.send(());
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(format!("{} done", job.job_id()))
            }
        });
        let (stop, run) = spawn(&w);
        within("the handler to start", started.recv()).await.unwrap();
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert_eq!((stats.completed, stats.released), (1, 0), "{stats:?}");
        let row = blocking(|| probe.row("finishing")).unwrap();
        assert_eq!((row.done, row.result.as_deref()), (1, Some("finishing done")));
    }
}

/// Now, `seconds` ago.
fn now_minus(seconds: f64) -> Now {
    Now::new(Now::system().seconds() - seconds).unwrap()
}

/// A completion that meets a busy store is tried again five times, 25, 50, 75, 100 and 125 ms
/// apart, each counted as an error; then the outcome is a store error (one more), and nothing
/// is stored.
#[test]
fn a_busy_store_is_tried_again_five_times_backing_off_then_reported() {
    busy_write(Ok("late".to_owned()));
}

/// The same for a failure's write.
#[test]
fn a_failure_that_meets_a_busy_store_is_tried_again_five_times_then_reported() {
    busy_write(Err("boom".to_owned()));
}

/// A handler returns `answer` while another connection holds the write lock: the outcome's
/// write is tried six times in all, backing off, and reported as a store error.
fn busy_write(answer: Result<String, String>) {
    let db = Db::new();
    let rt = runtime(true);
    rt.block_on(async {
        let options = AsyncOptions::new()
            .sqlite(SqliteOptions::new().busy_timeout(Duration::from_millis(10)));
        let store = AsyncStore::open(db.path.to_str().unwrap(), options)
            .await
            .unwrap();
        let sync = leasefence::SqliteStore::open(&db.path).unwrap();
        enqueue(&sync, "busy", 0);
        let (go_tx, go) = oneshot::channel::<()>();
        let go = Arc::new(Mutex::new(Some(go)));
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let returned: Arc<Mutex<Option<Instant>>> = Arc::default();
        let at_report: Arc<OnceLock<(Instant, WorkerStats, JobOutcome)>> = Arc::default();
        let me: Arc<OnceLock<AsyncWorker>> = Arc::default();
        let (r, report, me2) = (returned.clone(), at_report.clone(), me.clone());
        let w = AsyncWorker::builder(store.clone())
            .poll_interval(Duration::from_millis(20))
            .on_outcome(move |_, outcome| {
                let stats = me2.get().unwrap().stats();
                let _ = report.set((Instant::now(), stats, outcome.clone()));
            })
            .build(move |_job: AsyncJob| {
                let (go, started, r) = (go.lock().unwrap().take(), started_tx.clone(), r.clone());
                let answer = answer.clone();
                async move {
                    let _ = started.send(());
                    let _ = go.expect("one job").await;
                    *r.lock().unwrap() = Some(Instant::now());
                    answer.map_err(Into::into)
                }
            })
            .unwrap();
        me.set(w.clone()).unwrap();
        let (stop, run) = spawn(&w);
        within("the handler to start", started.recv()).await.unwrap();
        // Another connection holds the write lock while the handler returns.
        let holder = rusqlite::Connection::open(&db.path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        go_tx.send(()).unwrap();
        within("the report", async {
            while at_report.get().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        holder.execute_batch("ROLLBACK").unwrap();
        let (reported, stats, outcome) = at_report.get().unwrap().clone();
        assert!(
            matches!(&outcome, JobOutcome::StoreError(e) if e.contains("busy") || e.contains("locked")),
            "{outcome:?}"
        );
        assert_eq!(
            (stats.errors, stats.completed, stats.retried),
            (6, 0, 0),
            "{stats:?}"
        );
        let waited = reported - returned.lock().unwrap().unwrap();
        assert!(
            waited >= Duration::from_millis(25 + 50 + 75 + 100 + 125),
            "backed off {waited:?}"
        );
        stop.send(()).unwrap();
        within("the worker to stop", run).await.unwrap();
        assert_eq!(db.row("busy").unwrap().result, None);
    });
}

/// The store says which backend it runs on and shows its database as given (an SQLite path).
#[test]
fn the_store_says_its_backend_and_shows_its_database() {
    let db = Db::new();
    let rt = runtime(false);
    rt.block_on(async {
        let path = db.path.to_str().unwrap();
        let store = AsyncStore::open(path, AsyncOptions::new().connections(2))
            .await
            .unwrap();
        assert_eq!((store.backend(), store.shown()), ("sqlite", path));
        let shown = format!("{store:?}");
        for part in ["AsyncStore", path, "\"sqlite\"", "connections: 2"] {
            assert!(shown.contains(part), "{part} in {shown}");
        }
    });
}

/// On PostgreSQL: the backend, the URL shown without its password, and a connection that a
/// call found healthy kept for the next call — one database session, not one per call.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgres_a_healthy_connection_is_kept_and_the_password_never_shown() {
    let Some(db) = PgDb::new() else { return };
    let app = format!("{}_async", db.schema);
    let url = if db.url.contains("://") {
        named_url(&db.url, &app)
    } else {
        format!("{} password=hunter2", named_url(&db.url, &app))
    };
    let mut admin = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let mut sessions = || sessions(&mut admin, &app);
    let rt = runtime(true);
    let store = rt.block_on(async {
        let options = AsyncOptions::new().postgres(db.options());
        AsyncStore::open(&url, options).await.unwrap()
    });
    assert_eq!(store.backend(), "postgres");
    assert!(!store.shown().contains("hunter2"), "{}", store.shown());
    assert!(!format!("{store:?}").contains("hunter2"));
    let call = || {
        rt.block_on(async {
            let state = store.call(|s| s.state(JobId::new("none")?)).await.unwrap();
            assert!(state.is_none());
        })
    };
    call();
    // A connection the opening used and closed (the migrations') can stay listed a moment
    // after its backend was told to end: wait, bounded, for the listing to settle on one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut first = sessions();
    while first.len() > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        first = sessions();
    }
    assert_eq!(first.len(), 1, "the first call's session: {first:?}");
    for _ in 0..3 {
        call();
    }
    assert_eq!(sessions(), first, "the same session served every call");
}

/// A worker on a fresh SQLite file whose calls give up on a lock after 10 ms; the file's
/// store for arranging, and the runtime.
fn impatient() -> (
    Db,
    leasefence::SqliteStore,
    tokio::runtime::Runtime,
    AsyncStore,
) {
    let db = Db::new();
    let rt = runtime(true);
    let sync = leasefence::SqliteStore::open(&db.path).unwrap();
    let options =
        AsyncOptions::new().sqlite(SqliteOptions::new().busy_timeout(Duration::from_millis(10)));
    let store = rt
        .block_on(AsyncStore::open(db.path.to_str().unwrap(), options))
        .unwrap();
    (db, sync, rt, store)
}

/// Claims that meet a busy store are counted and tried again at the next poll: the worker
/// goes on — a drained run too (a busy store is not an empty queue) — and finishes the job
/// once the lock is gone.
#[test]
fn claims_that_meet_a_busy_store_are_tried_again() {
    let (db, sync, rt, store) = impatient();
    enqueue(&sync, "waits", 0);
    let holder = rusqlite::Connection::open(&db.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    rt.block_on(async {
        let (w, _) = worker(
            &store,
            |b| b.drain(true),
            |job: AsyncJob| async move { Ok(job.job_id().to_uppercase()) },
        );
        let run = {
            let w = w.clone();
            tokio::spawn(async move { w.run(std::future::pending()).await })
        };
        within("two claims to meet the lock", async {
            while w.stats().errors < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert_eq!(w.stats().claimed, 0);
        holder.execute_batch("ROLLBACK").unwrap();
        let stats = within("the drained run", run).await.unwrap().unwrap();
        assert_eq!((stats.claimed, stats.completed), (1, 1), "{stats:?}");
    });
    assert_eq!(db.row("waits").unwrap().result.as_deref(), Some("WAITS"));
}

/// A claim error that trying again cannot cure (here, the table gone) ends the run with that
/// error.
#[test]
fn a_claim_error_that_retrying_cannot_cure_ends_the_run() {
    let (db, _sync, rt, store) = impatient();
    db.exec("DROP TABLE jobs");
    rt.block_on(async {
        let (w, _) = worker(&store, |b| b, |_job: AsyncJob| async { Ok(String::new()) });
        let err = within("the run to end", w.run(std::future::pending()))
            .await
            .unwrap_err();
        assert!(!err.is_retryable(), "{err}");
        assert!(err.to_string().contains("jobs"), "{err}");
        assert_eq!(w.stats().errors, 1);
    });
}

/// A claim that met a busy store is tried again after the poll interval, not at once: the
/// worker does not spin against a locked database.
#[test]
fn a_claim_that_met_a_busy_store_waits_the_poll_interval_before_the_next() {
    let (db, sync, rt, store) = impatient();
    let holder = rusqlite::Connection::open(&db.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let poll = Duration::from_millis(1000);
    rt.block_on(async {
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (w, _) = worker(
            &store,
            |b| b.poll_interval(poll),
            move |job: AsyncJob| {
                let _ = started_tx.send(Instant::now());
                async move { Ok(job.job_id().to_owned()) }
            },
        );
        let (stop, run) = spawn(&w);
        within("a claim to meet the lock", async {
            while w.stats().errors < 1 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        let failed = Instant::now();
        holder.execute_batch("ROLLBACK").unwrap();
        enqueue(&sync, "next", 0);
        let claimed = within("the next claim", started.recv()).await.unwrap();
        let waited = claimed - failed;
        // The failed claim ended a little before it was seen: allow for that (half the poll
        // interval, for a loaded machine), not for a spin (a few milliseconds).
        assert!(waited >= poll / 2, "claimed again after {waited:?}");
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert_eq!((stats.errors, stats.claimed), (1, 1), "{stats:?}");
    });
}

/// A heartbeat that meets a busy store is counted as an error and renews at the next tick:
/// the lease (3 s, renewed every 0.15 s) outlives the lock, and the result is stored.
#[test]
fn a_heartbeat_that_meets_a_busy_store_renews_at_the_next_tick() {
    let (db, sync, rt, store) = impatient();
    enqueue(&sync, "beats", 0);
    let holder = rusqlite::Connection::open(&db.path).unwrap();
    rt.block_on(async {
        let (go_tx, go) = tokio::sync::watch::channel(false);
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (w, mut outcomes) = worker(
            &store,
            |b| b.ttl(3.0).heartbeat_fraction(0.05),
            move |job: AsyncJob| {
                let (mut go, started) = (go.clone(), started_tx.clone());
                async move {
                    let _ = started.send(());
                    go.wait_for(|go| *go).await.map_err(|e| e.to_string())?;
                    Ok(job.job_id().to_uppercase())
                }
            },
        );
        let (stop, run) = spawn(&w);
        within("the handler to start", started.recv())
            .await
            .unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        within("a heartbeat to meet the lock", async {
            while w.stats().errors < 1 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        holder.execute_batch("ROLLBACK").unwrap();
        let renewed = w.stats().renewed;
        within("a renewal after the lock", async {
            while w.stats().renewed == renewed {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        go_tx.send(true).unwrap();
        let (_, outcome) = within("the outcome", outcomes.recv()).await.unwrap();
        assert_eq!(outcome, JobOutcome::Completed);
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert!(stats.errors >= 1 && stats.lost == 0, "{stats:?}");
    });
    assert_eq!(db.row("beats").unwrap().result.as_deref(), Some("BEATS"));
}
