//! The async worker (feature `async`) on SQLite and PostgreSQL: results stored through the
//! fence, a lease taken over or cancelled under a running handler fires `lost` and stores
//! nothing, the time limit, a panic, and the shutdown deadline's release — each read back
//! through an independent connection.

use std::time::Duration;

use leasefence::{
    AsyncJob, AsyncOptions, AsyncStore, AsyncWorker, JobId, JobOutcome, Loss, NewJob, Now, Owner,
    Store, Target, Ttl, WorkerStats,
};
use tokio::sync::{mpsc, oneshot};

use crate::common::{Db, PgDb, Probe};

/// Runs `case` on a fresh SQLite file and on a fresh PostgreSQL schema (ignored, with the
/// reason, when `LEASEFENCE_TEST_PG` is unset).
macro_rules! async_cases {
    ($($(#[$doc:meta])* async fn $name:ident($store:ident, $probe:ident, $sync:ident) $body:block)*) => {$(
        $(#[$doc])*
        mod $name {
            use super::*;
            async fn case($store: AsyncStore, $probe: &dyn Probe, $sync: &dyn Store) $body
            #[test]
            fn sqlite() {
                let db = Db::new();
                let sync = leasefence::SqliteStore::open(&db.path).unwrap();
                runtime(true).block_on(async {
                    let store = AsyncStore::open(db.path.to_str().unwrap(), AsyncOptions::new())
                        .await
                        .unwrap();
                    case(store, &db, &sync).await
                });
            }
            #[test]
            #[cfg_attr(not(leasefence_pg), ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case")]
            fn pg() {
                let Some(db) = PgDb::new() else { return };
                let sync = db.store();
                runtime(true).block_on(async {
                    let options = AsyncOptions::new()
                        .postgres(db.options().database_clock(true));
                    let store = AsyncStore::open_target(Target::parse(&db.url).unwrap(), options)
                        .await
                        .unwrap();
                    case(store, &db, &sync).await
                });
            }
        }
    )*};
}
pub(crate) use async_cases;

/// A runtime for a case: two worker threads, or (`multi` false) the current thread only.
pub(crate) fn runtime(multi: bool) -> tokio::runtime::Runtime {
    let mut builder = if multi {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2);
        b
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build().unwrap()
}

fn enqueue(sync: &dyn Store, id: &str, max_attempts: u32) {
    let job = NewJob::new(id)
        .unwrap()
        .payload(id.as_bytes().to_vec())
        .max_attempts(max_attempts);
    assert!(blocking(|| sync.enqueue_job(job)).unwrap());
}

/// `fut`, or a failure after 20 s: a broken worker fails the test instead of hanging it.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A blocking call (the arranging store, the independent connection) from the test's async
/// code: the PostgreSQL client must not run on a runtime thread.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Sends the instant it is dropped: tells the test the handler's future was dropped.
pub(crate) struct DropSignal(pub(crate) mpsc::UnboundedSender<std::time::Instant>);
impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(std::time::Instant::now());
    }
}

/// A worker whose outcomes arrive on the returned channel.
fn worker<F, Fut>(
    store: &AsyncStore,
    configure: impl FnOnce(leasefence::AsyncWorkerBuilder) -> leasefence::AsyncWorkerBuilder,
    handler: F,
) -> (AsyncWorker, mpsc::UnboundedReceiver<(String, JobOutcome)>)
where
    F: Fn(AsyncJob) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = leasefence::AsyncResult> + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let builder = AsyncWorker::builder(store.clone())
        .owner("async-w")
        .poll_interval(Duration::from_millis(20))
        .on_outcome(move |lease, outcome| {
            let _ = tx.send((lease.job_id.clone(), outcome.clone()));
        });
    (configure(builder).build(handler).unwrap(), rx)
}

/// Runs `worker` until `stop` fires; its counts.
fn spawn(worker: &AsyncWorker) -> (oneshot::Sender<()>, tokio::task::JoinHandle<WorkerStats>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let w = worker.clone();
    let run = tokio::spawn(async move {
        w.run(async {
            let _ = stopped.await;
        })
        .await
        .unwrap()
    });
    (stop, run)
}

/// A handler that says it started, then waits until its lease ends and returns a result that
/// must never be stored (the worker drops it first: a lost lease cancels the handler).
fn waits_for_loss(
    started: mpsc::UnboundedSender<String>,
) -> impl Fn(
    AsyncJob,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = leasefence::AsyncResult> + Send>>
+ Send
+ Sync
+ 'static {
    move |job: AsyncJob| {
        let started = started.clone();
        Box::pin(async move {
            let _ = started.send(job.job_id().to_owned());
            let loss = job.lost().await;
            assert!(matches!(
                loss,
                Loss::TakenOver | Loss::Operator | Loss::Shutdown
            ));
            Ok("stale".to_owned())
        })
    }
}

async_cases! {
    async fn drains_and_stores_every_result(store, probe, sync) {
        for i in 0..12 {
            enqueue(sync, &format!("job-{i:02}"), 0);
        }
        let (w, _) = worker(&store, |b| b.concurrency(3).drain(true), |job: AsyncJob| async move {
            tokio::task::yield_now().await;
            Ok(String::from_utf8_lossy(job.payload()).to_uppercase())
        });
        let stats = within("the drained run", w.run(std::future::pending())).await.unwrap();
        assert_eq!((stats.claimed, stats.completed, stats.lost), (12, 12, 0));
        for i in 0..12 {
            let row = blocking(|| probe.row(&format!("job-{i:02}"))).unwrap();
            assert_eq!((row.result.as_deref(), row.done, row.fence), (Some(format!("JOB-{i:02}").as_str()), 1, 1));
            assert_eq!(row.owner.as_deref(), Some("async-w"));
        }
    }

    async fn a_lease_taken_over_under_the_handler_stores_nothing(store, probe, sync) {
        enqueue(sync, "t", 0);
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (w, mut outcomes) = worker(&store, |b| b.ttl(3.0).heartbeat_fraction(0.05),
            waits_for_loss(started_tx));
        let (stop, run) = spawn(&w);
        assert_eq!(within("the handler to start", started.recv()).await.unwrap(), "t");
        // The worker "stalls": its lease runs out, and B takes the job over.
        blocking(|| probe.exec("UPDATE jobs SET until = 0 WHERE id = 't'"));
        let b = blocking(|| {
            sync.claim(JobId::new("t").unwrap(), Owner::new("B").unwrap(), Now::system(), Ttl::new(60.0).unwrap())
        })
        .unwrap()
        .expect("expired: B claims");
        assert_eq!(b.fence, 2);
        let (id, outcome) = within("the outcome", outcomes.recv()).await.unwrap();
        assert_eq!((id.as_str(), outcome), ("t", JobOutcome::Refused));
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert_eq!((stats.lost, stats.completed, stats.stale_refused), (1, 0, 0));
        let row = blocking(|| probe.row("t")).unwrap();
        assert_eq!((row.owner.as_deref(), row.fence, row.result, row.done), (Some("B"), 2, None, 0));
    }

    async fn a_job_cancelled_under_the_handler_stores_nothing(store, probe, sync) {
        enqueue(sync, "c", 0);
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (w, mut outcomes) = worker(&store, |b| b.ttl(3.0).heartbeat_fraction(0.05),
            waits_for_loss(started_tx));
        let (stop, run) = spawn(&w);
        assert_eq!(within("the handler to start", started.recv()).await.unwrap(), "c");
        assert!(blocking(|| sync.cancel(JobId::new("c").unwrap(), Now::system())).unwrap());
        assert_eq!(within("the outcome", outcomes.recv()).await.unwrap(), ("c".to_owned(), JobOutcome::Cancelled));
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert_eq!((stats.cancelled, stats.lost, stats.completed), (1, 0, 0));
        let row = blocking(|| probe.row("c")).unwrap();
        assert_eq!((row.result, row.done, row.fence), (None, 1, 1));
    }

    async fn the_time_limit_and_a_panic_are_failed_attempts(store, probe, sync) {
        enqueue(sync, "slow", 1);
        enqueue(sync, "boom", 2);
        // The limit (0.4 s) falls between boom's panic and its retry's due time (at least 0.8 s
        // after the failure), so the drained run sees both outcomes. `resume_unwind` panics
        // without the panic hook: with RUST_BACKTRACE set, the hook's symbolised backtrace can
        // take longer than the limit in a debug test binary.
        let (w, _) = worker(&store, |b| b.timeout(0.4).drain(true).concurrency(2), |job: AsyncJob| async move {
            if job.job_id() == "slow" {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            std::panic::resume_unwind(Box::new("handler bug"))
        });
        let stats = within("the drained run", w.run(std::future::pending())).await.unwrap();
        assert_eq!((stats.timed_out, stats.dead, stats.retried), (1, 1, 1), "{stats:?}");
        let slow = blocking(|| probe.queue_row("slow"));
        assert!(slow.error.as_deref().unwrap().starts_with("timed out after 0.4 s"), "{slow:?}");
        assert_eq!(slow.outcome.as_deref(), Some("dead"));
        let boom = blocking(|| probe.queue_row("boom"));
        assert!(boom.error.as_deref().unwrap().contains("panicked"), "{boom:?}");
        assert_eq!(blocking(|| probe.row("boom")).unwrap().done, 0, "retrying, not dead");
    }

    async fn shutdown_past_the_deadline_releases_the_lease(store, probe, sync) {
        enqueue(sync, "r", 0);
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (w, _) = worker(&store, |b| b.shutdown_deadline(Duration::ZERO),
            waits_for_loss(started_tx));
        let (stop, run) = spawn(&w);
        assert_eq!(within("the handler to start", started.recv()).await.unwrap(), "r");
        stop.send(()).unwrap();
        let stats = within("the worker to stop", run).await.unwrap();
        assert_eq!((stats.released, stats.completed), (1, 0));
        let row = blocking(|| probe.row("r")).unwrap();
        assert_eq!((row.owner, row.fence, row.until, row.done, row.result), (None, 1, 0.0, 0, None));
        // Claimable again at once, above the released fence.
        let next = blocking(|| sync.claim_next(Owner::new("n").unwrap(), Now::system(), Ttl::new(5.0).unwrap()))
            .unwrap()
            .unwrap();
        assert_eq!(next.fence, 2);
    }
}

/// Bad settings are refused naming the argument, with a message that says what is wrong.
#[test]
fn bad_settings_name_their_argument() {
    let db = Db::new();
    let rt = runtime(false);
    rt.block_on(async {
        let store = AsyncStore::open(db.path.to_str().unwrap(), AsyncOptions::new())
            .await
            .unwrap();
        let ok = |_job: AsyncJob| async { Ok(String::new()) };
        let b = || AsyncWorker::builder(store.clone());
        let arg = |r: leasefence::Result<AsyncWorker>| r.unwrap_err().argument();
        assert_eq!(arg(b().concurrency(0).build(ok)), Some("concurrency"));
        assert_eq!(arg(b().ttl(0.0).build(ok)), Some("ttl"));
        assert_eq!(
            arg(b().heartbeat_fraction(1.0).build(ok)),
            Some("heartbeat_fraction")
        );
        assert_eq!(arg(b().timeout(-1.0).build(ok)), Some("timeout"));
        assert_eq!(
            arg(b().poll_interval(Duration::ZERO).build(ok)),
            Some("poll_interval")
        );
        assert_eq!(arg(b().owner("").build(ok)), Some("owner"));
        assert_eq!(arg(b().timeout(1e300).build(ok)), Some("timeout"));
        assert_eq!(arg(b().ttl(1e300).build(ok)), Some("ttl"));
        assert_eq!(arg(b().queue("Not A Queue").build(ok)), Some("queue"));
        // And the message says what is wrong.
        let refused = |r: leasefence::Result<AsyncWorker>| {
            let e = r.unwrap_err();
            (e.argument().map(str::to_owned), e.to_string())
        };
        for t in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            let (arg, msg) = refused(b().timeout(t).build(ok));
            assert_eq!(arg.as_deref(), Some("timeout"), "{t}");
            assert!(msg.contains("must be seconds > 0"), "{t}: {msg}");
        }
        let (arg, msg) = refused(b().timeout(1e300).build(ok));
        assert_eq!(arg.as_deref(), Some("timeout"));
        assert!(msg.contains("too long"), "{msg}");
        for f in [0.0, 1.0, -0.5] {
            let (arg, msg) = refused(b().heartbeat_fraction(f).build(ok));
            assert_eq!(arg.as_deref(), Some("heartbeat_fraction"), "{f}");
            assert!(msg.contains("strictly between 0 and 1"), "{f}: {msg}");
        }
        assert!(b().timeout(0.5).heartbeat_fraction(0.5).build(ok).is_ok());
        // The builder shows its main settings in `Debug`.
        let shown = format!("{:?}", b().concurrency(3).ttl(12.0).queue("mail"));
        for part in ["AsyncWorkerBuilder", "concurrency: 3", "ttl: 12.0", "mail"] {
            assert!(shown.contains(part), "{part} in {shown}");
        }
    });
}

#[test]
fn a_panicking_outcome_hook_does_not_stop_the_worker() {
    let db = Db::new();
    let rt = runtime(true);
    rt.block_on(async {
        let store = AsyncStore::open(db.path.to_str().unwrap(), AsyncOptions::new())
            .await
            .unwrap();
        let sync = leasefence::SqliteStore::open(&db.path).unwrap();
        enqueue(&sync, "a", 0);
        enqueue(&sync, "b", 0);
        let w = AsyncWorker::builder(store)
            .drain(true)
            .poll_interval(Duration::from_millis(20))
            .on_outcome(|_, _| panic!("a broken hook"))
            .build(|job: AsyncJob| async move { Ok(job.job_id().to_uppercase()) })
            .unwrap();
        let stats = within("the drained run", w.run(std::future::pending()))
            .await
            .unwrap();
        assert_eq!(stats.completed, 2);
        assert_eq!(
            blocking(|| db.row("b")).unwrap().result.as_deref(),
            Some("B")
        );
    });
}

/// Takes a connection of `store`'s pool (its only one, in the cases that use it) by a call
/// that holds it until told on the returned sender; returns once the call has it.
async fn take_the_one_connection(
    store: &AsyncStore,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<leasefence::Result<()>>,
) {
    let (held_tx, held) = oneshot::channel::<()>();
    let (free_tx, free) = std::sync::mpsc::channel::<()>();
    let store = store.clone();
    let holder = tokio::spawn(async move {
        store
            .call(move |_| {
                let _ = held_tx.send(());
                let _ = free.recv();
                Ok(())
            })
            .await
    });
    within("the connection to be taken", held).await.unwrap();
    (free_tx, holder)
}

#[test]
fn a_call_that_waits_past_the_acquire_timeout_is_unavailable_and_runs_nothing() {
    let db = Db::new();
    let rt = runtime(true);
    rt.block_on(async {
        let options = AsyncOptions::new()
            .connections(1)
            .acquire_timeout(Duration::from_millis(50));
        let store = AsyncStore::open(db.path.to_str().unwrap(), options)
            .await
            .unwrap();
        let (release_tx, holder) = take_the_one_connection(&store).await;
        let err = store
            .call(|s| s.enqueue(JobId::new("never")?))
            .await
            .unwrap_err();
        assert!(
            matches!(err, leasefence::Error::Unavailable { .. }) && err.is_retryable(),
            "{err}"
        );
        release_tx.send(()).unwrap();
        within("the holder", holder).await.unwrap().unwrap();
        assert!(
            blocking(|| db.row("never")).is_none(),
            "the waiting call ran nothing"
        );
        // Free again: the next call runs.
        assert!(store.call(|s| s.enqueue(JobId::new("now")?)).await.unwrap());
    });
}

// After the macro and helpers above, which it uses.
mod details;
mod faults;
mod lost_answer;
