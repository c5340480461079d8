//! `AsyncJob::release`: an async handler gives its attempt back — fenced, the fence kept, the
//! attempt refunded, the job claimable again at once — as the blocking worker's
//! `JobContext::release` does. Refused once the lease is not the attempt's (an operator's
//! cancel), an error when the store cannot be reached (the attempt then goes on), and a handler
//! that winds down after its release is dropped at the shutdown deadline. Each case reads the
//! job and its attempt ledger back through an independent connection.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasefence::{
    AsyncJob, AsyncOptions, AsyncStore, AsyncWorker, JobId, JobOutcome, Loss, NewJob,
    SqliteOptions, SqliteStore, Store, Target,
};
use tokio::sync::{mpsc, oneshot};

use crate::async_worker::{DropSignal, async_cases, blocking, runtime};
use crate::common::{Db, PgDb, Probe};

fn rt() -> tokio::runtime::Runtime {
    runtime(true)
}

type Outcomes = Arc<Mutex<Vec<(i64, JobOutcome)>>>;

async_cases! {
    /// Given back at fence 1: claimed again at once at fence 2, still its first attempt; what
    /// the releasing handler returned is not written; a second release, and the fence gate,
    /// answer false; the ledger reads `released`, then `completed`.
    async fn a_released_attempt_runs_again_at_once_and_refunded(store, probe, sync) {
        assert!(blocking(|| sync.enqueue_job(NewJob::new("r").unwrap().max_attempts(1))).unwrap());
        let outcomes: Outcomes = Arc::default();
        let seen = Arc::clone(&outcomes);
        let (tx, mut answers) = mpsc::unbounded_channel();
        let worker = AsyncWorker::builder(store)
            .owner("async-rel")
            .drain(true)
            .poll_interval(Duration::from_millis(10))
            .on_outcome(move |lease, outcome| {
                seen.lock().unwrap().push((lease.fence, outcome.clone()));
            })
            .build(move |job: AsyncJob| {
                let tx = tx.clone();
                async move {
                    if job.fence() == 1 {
                        let first = job.release().await.map_err(|e| e.to_string())?;
                        let again = job.release().await.map_err(|e| e.to_string())?;
                        let gate = job.admit("mailer").await.map_err(|e| e.to_string())?;
                        let _ = tx.send((first, again, gate, job.loss(), job.lost().await));
                        return Ok("not written".to_owned());
                    }
                    Ok(format!("done at {} attempt {}", job.fence(), job.attempt()))
                }
            })
            .unwrap();
        let stats = tokio::time::timeout(Duration::from_secs(30), worker.run(std::future::pending()))
            .await
            .expect("the drained run ends")
            .unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), answers.recv())
            .await
            .expect("the releasing handler ran on to its return");
        assert_eq!(
            answer.unwrap(),
            (true, false, false, Some(Loss::Released), Loss::Released)
        );
        assert_eq!((stats.released, stats.completed, stats.cancelled, stats.stale_refused), (1, 1, 0, 0));
        assert_eq!(
            *outcomes.lock().unwrap(),
            vec![(1, JobOutcome::Released), (2, JobOutcome::Completed)]
        );
        let row = blocking(|| probe.row("r")).unwrap();
        assert_eq!(
            (row.fence, row.done, row.result.as_deref()),
            (2, 1, Some("done at 2 attempt 1")),
            "claimed again within its budget of one attempt: the release refunded it"
        );
        let ledger = blocking(|| probe.attempts("r"));
        let ledger: Vec<_> = ledger.iter().map(|a| a.brief()).collect();
        assert_eq!(
            ledger,
            vec![(1, "async-rel", Some("released")), (2, "async-rel", Some("completed"))]
        );
        assert_eq!(blocking(|| probe.fence_gate("mailer")), None, "the gate admitted nothing after the release");
    }

    /// An operator cancelled the job under the running handler (no heartbeat came between):
    /// the release is refused, nothing changes, the worker counts the job cancelled and drops
    /// the handler.
    async fn a_release_after_an_operator_cancel_is_refused(store, probe, sync) {
        assert!(blocking(|| sync.enqueue_job(NewJob::new("c").unwrap())).unwrap());
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (go_tx, go) = oneshot::channel::<()>();
        let go = Arc::new(Mutex::new(Some(go)));
        let (answer_tx, mut answers) = mpsc::unbounded_channel();
        let (dropped_tx, mut dropped) = mpsc::unbounded_channel();
        let outcomes: Outcomes = Arc::default();
        let seen = Arc::clone(&outcomes);
        let worker = AsyncWorker::builder(store)
            .owner("async-rel")
            .ttl(60.0)
            .heartbeat_fraction(0.9)
            .drain(true)
            .on_outcome(move |lease, outcome| {
                seen.lock().unwrap().push((lease.fence, outcome.clone()));
            })
            .build(move |job: AsyncJob| {
                let (started, answer, dropped) =
                    (started_tx.clone(), answer_tx.clone(), dropped_tx.clone());
                let go = go.lock().unwrap().take();
                async move {
                    let _guard = DropSignal(dropped);
                    let _ = started.send(());
                    let _ = go.expect("one claim").await;
                    // From a task of the handler's own, which outlives the handler's future.
                    let asking = job.clone();
                    tokio::spawn(async move {
                        let _ = answer.send(asking.release().await.map_err(|e| e.to_string()));
                    });
                    std::future::pending::<()>().await;
                    Ok("never".to_owned())
                }
            })
            .unwrap();
        let run = tokio::spawn(async move { worker.run(std::future::pending()).await });
        started.recv().await.unwrap();
        assert!(blocking(|| sync.cancel(JobId::new("c").unwrap(), leasefence::Now::system())).unwrap());
        go_tx.send(()).unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), answers.recv())
            .await
            .expect("the release is answered");
        assert_eq!(answer.unwrap(), Ok(false));
        tokio::time::timeout(Duration::from_secs(10), dropped.recv())
            .await
            .expect("the handler is dropped")
            .unwrap();
        let stats = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("the drained run ends")
            .unwrap()
            .unwrap();
        assert_eq!((stats.released, stats.cancelled, stats.completed), (0, 1, 0));
        assert_eq!(*outcomes.lock().unwrap(), vec![(1, JobOutcome::Cancelled)]);
        let row = blocking(|| probe.row("c")).unwrap();
        assert_eq!((row.fence, row.done, row.result), (1, 1, None));
        let ledger = blocking(|| probe.attempts("c"));
        let ledger: Vec<_> = ledger.iter().map(|a| a.brief()).collect();
        assert_eq!(ledger, vec![(1, "async-rel", Some("cancelled"))]);
    }

    /// A handler that winds down after its release is neither renewed nor timed: the shutdown
    /// deadline drops it, and the lease — given back already — is not released again.
    async fn a_handler_winding_down_after_its_release_is_dropped_at_the_deadline(store, probe, sync) {
        assert!(blocking(|| sync.enqueue_job(NewJob::new("w").unwrap())).unwrap());
        let (released_tx, mut released) = mpsc::unbounded_channel();
        let (dropped_tx, mut dropped) = mpsc::unbounded_channel();
        let worker = AsyncWorker::builder(store)
            .owner("async-rel")
            .ttl(1.0)
            .heartbeat_fraction(0.3)
            .timeout(0.3)
            .shutdown_deadline(Duration::from_millis(200))
            .build(move |job: AsyncJob| {
                let (released, dropped) = (released_tx.clone(), dropped_tx.clone());
                async move {
                    let _guard = DropSignal(dropped);
                    let _ = released.send(job.release().await.map_err(|e| e.to_string()));
                    // Past the time limit and the lease's end: neither concerns it now.
                    std::future::pending::<()>().await;
                    Ok("never".to_owned())
                }
            })
            .unwrap();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let run = tokio::spawn(async move {
            worker
                .run(async {
                    let _ = stop_rx.await;
                })
                .await
        });
        let answer = tokio::time::timeout(Duration::from_secs(10), released.recv())
            .await
            .expect("the release is answered");
        assert_eq!(answer.unwrap(), Ok(true));
        // Longer than the time limit and the ttl: the released handler is still running.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert!(dropped.try_recv().is_err(), "not dropped before the shutdown");
        let stop = Instant::now();
        stop_tx.send(()).unwrap();
        let at = tokio::time::timeout(Duration::from_secs(10), dropped.recv())
            .await
            .expect("dropped at the deadline")
            .unwrap();
        let stats = run.await.unwrap().unwrap();
        assert!(at.duration_since(stop) >= Duration::from_millis(150), "{:?}", at - stop);
        assert_eq!(
            (stats.released, stats.timed_out, stats.lost, stats.renewed, stats.errors),
            (1, 0, 0, 0, 0)
        );
        // Claimable again: it was given back once, refunded, and never claimed since (the
        // handler held the worker's only slot).
        let row = blocking(|| probe.row("w")).unwrap();
        assert_eq!((row.fence, row.done, row.owner), (1, 0, None));
        let ledger = blocking(|| probe.attempts("w"));
        let ledger: Vec<_> = ledger.iter().map(|a| a.brief()).collect();
        assert_eq!(ledger, vec![(1, "async-rel", Some("released"))]);
    }
}

/// A release that cannot reach the store (the file locked past every retry) is an error, and
/// the attempt goes on as before: renewed by the heartbeat again (the handler returns after
/// the lease's first end), and what it returns is stored under its fence.
#[test]
fn a_release_that_meets_a_locked_store_fails_and_the_attempt_goes_on() {
    let db = Db::new();
    let sync = SqliteStore::open(&db.path).unwrap();
    sync.enqueue_job(NewJob::new("l").unwrap()).unwrap();
    rt().block_on(async {
        let options = AsyncOptions::new()
            .sqlite(SqliteOptions::new().busy_timeout(Duration::from_millis(20)));
        let store = AsyncStore::open(db.path.to_str().unwrap(), options)
            .await
            .unwrap();
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (go_tx, go) = oneshot::channel::<()>();
        let go = Arc::new(Mutex::new(Some(go)));
        let (answer_tx, mut answers) = mpsc::unbounded_channel();
        let worker = AsyncWorker::builder(store)
            .owner("async-rel")
            .ttl(2.0)
            .heartbeat_fraction(0.2)
            .drain(true)
            .build(move |job: AsyncJob| {
                let (started, answer) = (started_tx.clone(), answer_tx.clone());
                let go = go.lock().unwrap().take();
                async move {
                    let _ = started.send(());
                    let _ = go.expect("one claim").await;
                    let released = job.release().await;
                    let kept = (
                        released.as_ref().map_err(|e| e.is_retryable()).err(),
                        job.is_lost(),
                    );
                    let _ = answer.send(kept);
                    // Past the end of the lease as claimed: only renewals keep it.
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    Ok("stored after all".to_owned())
                }
            })
            .unwrap();
        let run = tokio::spawn(async move { worker.run(std::future::pending()).await });
        started.recv().await.unwrap();
        let release_lock = db.hold("SELECT 1");
        go_tx.send(()).unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(20), answers.recv())
            .await
            .expect("the release gives up")
            .unwrap();
        release_lock();
        assert_eq!(
            answer,
            (Some(true), false),
            "a retryable error; the lease still held"
        );
        let stats = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("the drained run ends")
            .unwrap()
            .unwrap();
        assert_eq!((stats.released, stats.completed, stats.lost), (0, 1, 0));
        assert!(stats.errors >= 1 && stats.renewed >= 1, "{stats:?}");
    });
    let row = db.row("l").unwrap();
    assert_eq!(
        (row.fence, row.done, row.result.as_deref()),
        (1, 1, Some("stored after all"))
    );
    let ledger = Probe::attempts(&db, "l");
    let ledger: Vec<_> = ledger.iter().map(|a| a.brief()).collect();
    assert_eq!(ledger, vec![(1, "async-rel", Some("completed"))]);
}
