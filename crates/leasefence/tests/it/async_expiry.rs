//! The async worker gives a lease up by its own clock when it ends with no renewal granted —
//! here every renewal meets a locked SQLite file and waits out its busy timeout — instead of
//! leaving the handler running until the store answers again. Read back through an independent
//! connection: nothing stored, the fence unchanged.

use std::time::{Duration, Instant};

use leasefence::{
    AsyncJob, AsyncOptions, AsyncStore, AsyncWorker, JobOutcome, Loss, NewJob, SqliteOptions,
    SqliteStore, Store,
};
use tokio::sync::{mpsc, oneshot};

use crate::common::Db;

/// A file holding one ready job `id`, and a runtime of two threads.
fn one_job(id: &str) -> (Db, tokio::runtime::Runtime) {
    let db = Db::new();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_job(NewJob::new(id).unwrap())
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    (db, runtime)
}

#[test]
fn an_async_lease_that_ends_while_every_renewal_waits_is_given_up_at_its_end() {
    let (db, runtime) = one_job("e");
    runtime.block_on(async {
        let options =
            AsyncOptions::new().sqlite(SqliteOptions::new().busy_timeout(Duration::from_secs(30)));
        let store = AsyncStore::open(db.path.to_str().unwrap(), options)
            .await
            .unwrap();
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (outcome_tx, mut outcomes) = mpsc::unbounded_channel();
        let worker = AsyncWorker::builder(store)
            .owner("async-cut")
            .ttl(1.0)
            .heartbeat_fraction(0.3)
            .poll_interval(Duration::from_millis(20))
            .on_outcome(move |lease, outcome| {
                let _ = outcome_tx.send((lease.job_id.clone(), outcome.clone()));
            })
            .build(move |job: AsyncJob| {
                let started = started_tx.clone();
                async move {
                    let _ = started.send(job.fence());
                    let loss = job.lost().await;
                    assert_eq!(loss, Loss::TakenOver);
                    Ok("never stored".to_owned())
                }
            })
            .unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let w = worker.clone();
        let run = tokio::spawn(async move {
            w.run(async {
                let _ = stopped.await;
            })
            .await
            .unwrap()
        });
        let fence = tokio::time::timeout(Duration::from_secs(20), started.recv())
            .await
            .expect("the handler starts");
        assert_eq!(fence, Some(1));
        // Every write from now on waits for the lock (30 s): the renewals never answer.
        let lock = db.raw();
        lock.execute_batch("BEGIN IMMEDIATE").unwrap();
        let locked = Instant::now();
        let (id, outcome) = tokio::time::timeout(Duration::from_secs(20), outcomes.recv())
            .await
            .expect("the handler is told")
            .unwrap();
        let took = locked.elapsed();
        assert_eq!((id.as_str(), outcome), ("e", JobOutcome::Refused));
        assert!(
            took < Duration::from_secs(5),
            "told at the lease's end (1 s), not when the store answered: {took:?}"
        );
        lock.execute_batch("ROLLBACK").unwrap();
        stop.send(()).unwrap();
        let stats = tokio::time::timeout(Duration::from_secs(40), run)
            .await
            .expect("the worker stops")
            .unwrap();
        assert_eq!((stats.lost, stats.completed), (1, 0), "{stats:?}");
    });
    let row = db.row("e").unwrap();
    assert_eq!(
        (row.fence, row.done, row.result.as_deref()),
        (1, 0, None),
        "{row:?}"
    );
}

/// Renewals granted keep the lease: a handler that runs three times its ttl is not told
/// anything and its result is stored under its fence.
#[test]
fn an_async_handler_that_outruns_its_first_lease_is_kept_by_its_renewals() {
    let (db, runtime) = one_job("long");
    let stats = runtime.block_on(async {
        let store = AsyncStore::open(db.path.to_str().unwrap(), AsyncOptions::new())
            .await
            .unwrap();
        let worker = AsyncWorker::builder(store)
            .owner("async-long")
            .ttl(1.0)
            .heartbeat_fraction(0.2)
            .poll_interval(Duration::from_millis(20))
            .drain(true)
            .build(|job: AsyncJob| async move {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(3)) => Ok("kept".to_owned()),
                    loss = job.lost() => panic!("told {loss:?} while its renewals were granted"),
                }
            })
            .unwrap();
        tokio::time::timeout(Duration::from_secs(30), worker.run(std::future::pending()))
            .await
            .expect("the drained run ends")
            .unwrap()
    });
    assert_eq!((stats.completed, stats.lost), (1, 0), "{stats:?}");
    assert!(stats.renewed >= 5, "{stats:?}");
    let row = db.row("long").unwrap();
    assert_eq!(
        (row.fence, row.done, row.result.as_deref()),
        (1, 1, Some("kept")),
        "{row:?}"
    );
}
