//! What every claimed job's end looks like from outside, and an attempt given up staying given
//! up: `on_outcome` hears of every claimed job once (also those of a batch that never ran),
//! `complete_with` writes nothing once the attempt is settled or past its time limit and counts
//! an operator's end as cancelled, the shutdown deadline never refunds a timed-out attempt, and
//! `concurrency` is not checked when named queues replace it. Found by an outside review.

use super::*;

/// Every outcome handed to `on_outcome`, as `(job, outcome)`.
type Outcomes = Arc<Mutex<Vec<(String, JobOutcome)>>>;

fn recorder() -> (
    Outcomes,
    impl Fn(&Lease, &JobOutcome) + Send + Sync + 'static,
) {
    let log: Outcomes = Arc::default();
    let into = log.clone();
    (log, move |lease: &Lease, outcome: &JobOutcome| {
        into.lock()
            .unwrap()
            .push((lease.job_id.to_string(), outcome.clone()))
    })
}

/// `timeout` says the attempt "is recorded as a failure … whatever the handler returns", and
/// `admit`, `check_lease` and `release` all refuse once the attempt is timed out — but
/// `complete_with` still commits the result and the caller's writes.
#[test]
fn complete_with_after_the_time_limit_writes_nothing() {
    let db = Db::new();
    open(&db).enqueue_job(job("slow").max_attempts(3)).unwrap();
    let clock = ManualClock::new(0.0);
    let (started_tx, started) = channel();
    let started_tx = Mutex::new(started_tx);
    let w = sqlite_worker(&db, &clock, "w")
        .ttl(30.0)
        .timeout(5.0)
        .build(move |ctx| {
            started_tx.lock().unwrap().send(())?;
            ctx.token().wait_timeout(PATIENCE);
            assert!(ctx.is_timed_out());
            let stored = ctx.complete_with("late", |conn| {
                conn.execute_batch("CREATE TABLE side (x INT); INSERT INTO side VALUES (1);")?;
                Ok::<_, BoxError>(())
            })?;
            Ok(format!("complete_with gave {stored:?}"))
        })
        .unwrap();
    let (handle, run) = spawn(w);
    recv(&started);
    clock.set(5.0); // the limit
    wait_until("the attempt to end", || {
        let s = handle.stats();
        s.completed + s.retried + s.dead + s.stale_refused > 0
    });
    let stats = stop(&handle, run);
    let row = db.row("slow").unwrap();
    assert_eq!(
        (
            stats.timed_out,
            stats.retried,
            stats.completed,
            row.done,
            row.result
        ),
        (1, 1, 0, 0, None),
        "a timed-out attempt was completed: {stats:?}"
    );
}

/// A second `complete_with` after a first that stored the result: the job *is* completed,
/// yet the worker counts a stale refusal and reports `Refused` to `on_outcome`.
#[test]
fn a_second_complete_with_after_success_is_neither_written_nor_counted() {
    let db = Db::new();
    open(&db).enqueue_job(job("j")).unwrap();
    let clock = ManualClock::new(0.0);
    let (log, hook) = recorder();
    let stats = sqlite_worker(&db, &clock, "w")
        .drain(true)
        .on_outcome(hook)
        .build(|ctx| {
            let first = ctx.complete_with("first", |_| Ok::<_, BoxError>(1))?;
            let second = ctx.complete_with("second", |_| Ok::<_, BoxError>(2))?;
            assert_eq!((first, second), (Some(1), None));
            Ok("not written".to_string())
        })
        .unwrap()
        .run_drained();
    assert_eq!(db.row("j").unwrap().result.as_deref(), Some("first"));
    let outcomes = log.lock().unwrap().clone();
    assert_eq!(
        (stats.completed, stats.stale_refused, outcomes.clone()),
        (1, 0, vec![("j".to_string(), JobOutcome::Completed)]),
        "the completed job is also counted as a stale refusal: {stats:?} {outcomes:?}"
    );
}

/// An operator cancels the job while its handler runs; the handler then calls
/// `complete_with`. `WorkerStats::stale_refused` says an operator's end is *not* counted
/// there (it is `cancelled`), and the plain `Ok` path reports `Cancelled` — `complete_with`
/// counts it as a stale write and reports `Refused`.
#[test]
fn complete_with_refused_after_an_operator_cancel_is_counted_cancelled() {
    let db = Db::new();
    open(&db).enqueue_job(job("j")).unwrap();
    let clock = ManualClock::new(0.0);
    let (log, hook) = recorder();
    let stats = sqlite_worker(&db, &clock, "w")
        .drain(true)
        .on_outcome(hook)
        .build(|ctx| {
            let now = Now::new(ctx.now())?;
            assert!(ctx.store().cancel(JobId::new(ctx.job_id())?, now)?);
            let stored = ctx.complete_with("result", |_| Ok::<_, BoxError>(()))?;
            assert!(stored.is_none());
            Ok("not written".to_string())
        })
        .unwrap()
        .run_drained();
    assert_eq!(
        (stats.cancelled, stats.stale_refused),
        (1, 0),
        "an operator's cancel counted as a stale write: {stats:?}"
    );
    assert_eq!(
        *log.lock().unwrap(),
        vec![("j".to_string(), JobOutcome::Cancelled)]
    );
}

/// The same cancel with the result returned instead: counted and reported cancelled too.
#[test]
fn a_plain_result_after_an_operator_cancel_is_counted_cancelled() {
    let db = Db::new();
    open(&db).enqueue_job(job("j")).unwrap();
    let clock = ManualClock::new(0.0);
    let (log, hook) = recorder();
    let stats = sqlite_worker(&db, &clock, "w")
        .drain(true)
        .on_outcome(hook)
        .build(|ctx| {
            let now = Now::new(ctx.now())?;
            assert!(ctx.store().cancel(JobId::new(ctx.job_id())?, now)?);
            Ok("not written".to_string())
        })
        .unwrap()
        .run_drained();
    assert_eq!((stats.cancelled, stats.stale_refused), (1, 0), "{stats:?}");
    assert_eq!(
        *log.lock().unwrap(),
        vec![("j".to_string(), JobOutcome::Cancelled)]
    );
}

/// `on_outcome` is "called … after every claimed job with how it ended": the jobs of a batch
/// released unstarted at shutdown are claimed, counted `released`, yet never reported.
#[test]
fn on_outcome_is_called_for_every_claimed_job_including_the_unstarted_of_a_batch() {
    let db = Db::new();
    let ids: Vec<String> = (0..40).map(|i| format!("j{i:02}")).collect();
    let jobs: Vec<NewJob> = ids.iter().map(|id| job(id)).collect();
    open(&db).enqueue_many(&jobs).unwrap();
    let clock = ManualClock::new(100.0);
    let (log, hook) = recorder();
    let handle: Arc<OnceLock<ShutdownHandle>> = Arc::new(OnceLock::new());
    let inside = handle.clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let ran_in = ran.clone();
    let w = sqlite_worker(&db, &clock, "b")
        .on_outcome(hook)
        .build(move |_ctx| {
            // The third job run: by now the claims are batches of quick handlers.
            if ran_in.fetch_add(1, Ordering::SeqCst) == 2 {
                inside.get().unwrap().shutdown();
            }
            Ok("ok".to_string())
        })
        .unwrap();
    handle.set(w.shutdown_handle()).ok().unwrap();
    let (_, run) = spawn(w);
    assert!(ends_within(&run, PATIENCE));
    let stats = run.join().unwrap().unwrap();
    assert!(stats.released > 0, "no batch was cut short: {stats:?}");
    let reported = log.lock().unwrap().len() as u64;
    assert_eq!(
        reported, stats.claimed,
        "claimed {} jobs, on_outcome told of {reported}: {stats:?}",
        stats.claimed
    );
}

/// A handler past its time limit that has not returned yet when the shutdown deadline comes:
/// its lease is not released — that would refund the attempt, while a timed-out attempt "is
/// recorded as a failure" (`JobContext::release` refuses it for the same reason). The worker
/// stops without it; when the handler returns, the failure is recorded and the job, on its
/// last attempt, is dead.
#[test]
fn a_timed_out_attempt_is_not_refunded_by_the_shutdown_deadline() {
    let db = Db::new();
    open(&db).enqueue_job(job("slow").max_attempts(1)).unwrap();
    let clock = ManualClock::new(0.0);
    let (started_tx, started) = channel();
    let started_tx = Mutex::new(started_tx);
    let (open_gate, gate) = Gate::new();
    let w = sqlite_worker(&db, &clock, "w")
        .ttl(30.0)
        .timeout(5.0)
        .shutdown_deadline(Duration::from_millis(200))
        .build(move |ctx| {
            started_tx.lock().unwrap().send(())?;
            ctx.token().wait_timeout(PATIENCE);
            gate.wait(); // winding down (a subprocess being killed, say)
            Err("stopped".into())
        })
        .unwrap();
    let (handle, run) = spawn(w);
    recv(&started);
    clock.set(5.0);
    wait_until("the time limit", || handle.stats().timed_out == 1);
    handle.shutdown();
    // The worker stops past its deadline with the handler still winding down.
    assert!(ends_within(&run, PATIENCE));
    let stats = run.join().unwrap().unwrap();
    let row = db.row("slow").unwrap();
    assert_eq!(
        (
            stats.timed_out,
            stats.released,
            row.owner.as_deref(),
            row.fence
        ),
        (1, 0, Some("w-0"), 1),
        "the timed-out attempt was given back: {stats:?}, {row:?}"
    );
    open_gate.send(()).unwrap();
    wait_until("the failure to be recorded", || {
        db.row("slow").unwrap().done == 1
    });
    let info = open(&db)
        .inspect(JobId::new("slow").unwrap(), Now::new(5.0).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(info.status, Status::Dead);
    assert!(
        info.error
            .as_deref()
            .unwrap_or_default()
            .contains("timed out"),
        "{info:?}"
    );
}

/// `concurrency` is documented as "not used" once named queues are given, yet its 0 makes
/// `build` fail.
#[test]
fn concurrency_is_ignored_with_named_queues() {
    let db = Db::new();
    let built = Worker::sqlite(&db.path)
        .queue("emails", 2)
        .concurrency(0)
        .build(|_| Ok("ok".to_string()));
    assert!(built.is_ok(), "{:?}", built.err());
}

/// A job waiting in its batch that an operator cancels: the heartbeat's refused renewal counts
/// it `cancelled`, and the thread then skips it — without telling `on_outcome`.
#[test]
fn on_outcome_is_called_for_a_queued_job_an_operator_cancelled() {
    let db = Db::new();
    let ids: Vec<String> = (0..10).map(|i| format!("j{i:02}")).collect();
    let jobs: Vec<NewJob> = ids.iter().map(|id| job(id)).collect();
    open(&db).enqueue_many(&jobs).unwrap();
    let clock = ManualClock::new(100.0);
    let handler_clock = clock.clone();
    let (log, hook) = recorder();
    let handle: Arc<OnceLock<ShutdownHandle>> = Arc::new(OnceLock::new());
    let inside = handle.clone();
    let first = AtomicBool::new(true);
    let done = AtomicBool::new(false);
    let victim: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let victim_in = victim.clone();
    let w = sqlite_worker(&db, &clock, "b")
        .ttl(30.0)
        .drain(true)
        .on_outcome(hook)
        .build(move |ctx| {
            if first.swap(false, Ordering::SeqCst) {
                return Ok("ok".to_string()); // a quick first job: the next claim is a batch
            }
            if !done.swap(true, Ordering::SeqCst) {
                // This thread's leases other than its own: the jobs queued behind it.
                let now = Now::new(ctx.now())?;
                let behind: Vec<String> = ctx
                    .store()
                    .list(now, Some(Status::Leased), None, 100)?
                    .into_iter()
                    .filter(|i| i.state.owner.as_deref() == Some(ctx.owner()))
                    .map(|i| i.state.id)
                    .filter(|id| id.as_str() > ctx.job_id())
                    .collect();
                let target = behind
                    .first()
                    .expect("a batch of more than one job")
                    .clone();
                assert!(ctx.store().cancel(JobId::new(&target)?, now)?);
                victim_in.set(target).unwrap();
                handler_clock.advance(11.0); // a renewal falls due: refused, cancelled
                let h = inside.get().unwrap();
                let start = Instant::now();
                while h.stats().cancelled == 0 && start.elapsed() < PATIENCE {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Ok("ok".to_string())
        })
        .unwrap();
    handle.set(w.shutdown_handle()).ok().unwrap();
    let stats = run_to_end(w).unwrap();
    let victim = victim.get().unwrap().clone();
    let outcomes = log.lock().unwrap().clone();
    assert_eq!(stats.cancelled, 1, "{stats:?}");
    assert!(
        outcomes
            .iter()
            .any(|(id, o)| *id == victim && *o == JobOutcome::Cancelled),
        "on_outcome never told of {victim}: {stats:?}, {} outcomes for {} claims",
        outcomes.len(),
        stats.claimed
    );
}
