//! `JobContext::release`: a handler gives its attempt back instead of failing it — the lease
//! released, fenced, with its fence kept and the attempt refunded — and only while the attempt
//! is still its own: not past its time limit, not after a takeover, and a release the store
//! could not make changes nothing.

use super::*;

/// What a handler sends the case: `None` once it runs, then what `release` answered.
type Said = Option<bool>;

/// The outcomes the worker reported, by fence, in order.
type Outcomes = Arc<Mutex<Vec<(i64, JobOutcome)>>>;

/// An `on_outcome` hook that records into the returned log.
fn outcome_log() -> (
    Outcomes,
    impl Fn(&leasefence::Lease, &JobOutcome) + Send + Sync + 'static,
) {
    let outcomes = Outcomes::default();
    let log = outcomes.clone();
    let hook = move |lease: &leasefence::Lease, outcome: &JobOutcome| {
        log.lock().unwrap().push((lease.fence, outcome.clone()));
    };
    (outcomes, hook)
}

worker_case!(
    /// The job is claimable again at once under the next fence, its one attempt not spent; the
    /// worker reports it released, and neither what the handler returns afterwards nor a second
    /// `release` writes anything.
    fn a_handler_gives_its_attempt_back_unspent_and_the_job_runs_again_at_once(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j").max_attempts(1)]).unwrap();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        let (outcomes, hook) = outcome_log();
        let stats = worker(t, &ManualClock::new(0.0), "A")
            .concurrency(1)
            .drain(true)
            .on_outcome(hook)
            .build(move |ctx| {
                if ctx.fence() == 1 {
                    let first = ctx.release()?;
                    let again = ctx.release()?;
                    seen.lock().unwrap().push((ctx.fence(), ctx.attempt(), first, again));
                    return Err("not recorded: the attempt was given back".into());
                }
                seen.lock().unwrap().push((ctx.fence(), ctx.attempt(), false, false));
                Ok("done".to_string())
            })
            .unwrap()
            .run_drained();
        assert_eq!(
            *calls.lock().unwrap(),
            [(1, 1, true, false), (2, 1, false, false)],
            "given back once; run again at once as its first attempt"
        );
        assert_eq!(
            *outcomes.lock().unwrap(),
            [(1, JobOutcome::Released), (2, JobOutcome::Completed)]
        );
        assert_eq!(
            (stats.claimed, stats.released, stats.completed),
            (2, 1, 1),
            "{stats:?}"
        );
        assert_eq!(
            (stats.retried, stats.dead, stats.stale_refused, stats.errors),
            (0, 0, 0, 0),
            "{stats:?}"
        );
        assert_eq!(db.row("j").unwrap(), done_row("j", "A-0", 2, 30.0, "done"));
        assert_eq!(db.queue_row("j").attempts, 1, "the given-back attempt is refunded");
        let attempts = db.attempts("j");
        let briefs: Vec<_> = attempts.iter().map(AttemptRow::brief).collect();
        assert_eq!(
            briefs,
            [(1, "A-0", Some("released")), (2, "A-0", Some("completed"))]
        );
        assert_eq!(db.refusals("j"), []);
    }
);

worker_case!(
    /// Past its time limit the attempt is a failure: `release` gives nothing back, and the
    /// failure is the one recorded when the handler returns.
    fn past_its_time_limit_a_handler_cannot_give_its_attempt_back(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("slow").max_attempts(2)]).unwrap();
        let clock = ManualClock::new(0.0);
        let (tx, said) = channel::<Said>();
        let tx = Mutex::new(tx);
        let (open_gate, gate) = Gate::new();
        let w = worker(t, &clock, "A")
            .concurrency(1)
            .ttl(12.0)
            .timeout(5.0)
            .backoff(Backoff { base: 100.0, factor: 2.0, max: 100.0, jitter: 0.0 })
            .build(move |ctx| {
                let tx = tx.lock().unwrap().clone();
                tx.send(None)?;
                assert!(ctx.token().wait_timeout(PATIENCE), "cancelled at the limit");
                tx.send(Some(ctx.release()?))?;
                gate.wait();
                Ok("finished anyway".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        assert_eq!(recv(&said), None);
        clock.set(4.5);
        wait_until("the renewal before the limit", || handle.stats().renewed == 1);
        clock.set(5.0);
        assert_eq!(recv(&said), Some(false), "timed out: nothing given back");
        let row = db.row("slow").unwrap();
        assert_eq!(
            (row.owner.as_deref(), row.fence, row.until),
            (Some("A-0"), 1, 16.5),
            "still held as renewed at 4.5"
        );
        open_gate.send(()).unwrap();
        wait_until("the timeout failure", || handle.stats().retried == 1);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.timed_out, stats.retried, stats.released, stats.completed, stats.stale_refused),
            (1, 1, 0, 0, 0),
            "{stats:?}"
        );
        let row = db.row("slow").unwrap();
        assert_eq!((row.result, row.done, row.owner, row.fence), (None, 0, None, 1));
        let (error, _, retry_at) = failure(db, "slow");
        assert_eq!(error.as_deref(), Some("timed out after 5 s (the worker's time limit)"));
        assert_eq!(retry_at, 105.0, "retried per the backoff, from the failure at 5");
        assert_eq!(db.queue_row("slow").attempts, 1, "the timed-out attempt is spent");
    }
);

worker_case!(
    /// A lease taken over meanwhile is not given back: the release is refused (counted as a
    /// refused write) and the handler's token cancelled, the new holder's lease is untouched,
    /// and nothing the stale handler returns afterwards is written.
    fn a_lease_taken_over_is_not_given_back_and_the_new_holder_keeps_it(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let (tx, said) = channel::<Option<(bool, bool)>>();
        let tx = Mutex::new(tx);
        let (open_gate, gate) = Gate::new();
        let w = worker(t, &ManualClock::new(0.0), "A")
            .concurrency(1)
            .build(move |ctx| {
                let tx = tx.lock().unwrap().clone();
                tx.send(None)?;
                gate.wait();
                let released = ctx.release()?;
                tx.send(Some((released, ctx.is_cancelled())))?;
                Ok("late".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        assert_eq!(recv(&said), None);
        let taken = db.leased("j", "B", 2, 100.0);
        open_gate.send(()).unwrap();
        assert_eq!(
            recv(&said),
            Some((false, true)),
            "not this attempt's lease any more: refused, and told so"
        );
        wait_until("the refusal", || handle.stats().stale_refused == 1);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.stale_refused, stats.released, stats.completed, stats.retried),
            (1, 0, 0, 0),
            "{stats:?}"
        );
        assert_eq!(db.row("j").unwrap(), taken);
        assert_eq!(
            db.refusals("j"),
            [(1, "release".to_string(), 1)],
            "the refused release, and no later write of the stale attempt"
        );
    }
);

worker_case!(
    /// A release refused because an operator ended the job (here cancelled, unnoticed by any
    /// renewal) is counted as any refused write of the worker's is: cancelled, not a stale
    /// write; the job stays cancelled.
    fn a_release_refused_after_an_unnoticed_cancel_counts_as_cancelled(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let (tx, said) = channel::<Said>();
        let tx = Mutex::new(tx);
        let (open_gate, gate) = Gate::new();
        let (seen_tx, seen) = channel();
        let w = worker(t, &ManualClock::new(0.0), "A")
            .concurrency(1)
            .on_outcome(move |_, outcome| {
                let _ = seen_tx.send(outcome.clone());
            })
            .build(move |ctx| {
                let tx = tx.lock().unwrap().clone();
                tx.send(None)?;
                gate.wait();
                tx.send(Some(ctx.release()?))?;
                Ok("late".to_string())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        assert_eq!(recv(&said), None);
        assert!(t.open().cancel(JobId::new("j").unwrap(), Now::new(1.0).unwrap()).unwrap());
        open_gate.send(()).unwrap(); // the clock stays at 0: no renewal noticed the cancel
        assert_eq!(recv(&said), Some(false));
        assert_eq!(recv(&seen), JobOutcome::Cancelled);
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.cancelled, stats.stale_refused, stats.released, stats.completed),
            (1, 0, 0, 0),
            "{stats:?}"
        );
        let q = db.queue_row("j");
        assert_eq!((q.outcome.as_deref(), q.error), (Some("cancelled"), None));
        assert_eq!(db.row("j").unwrap().result, None);
    }
);

worker_case!(
    /// Once given back, the attempt is over for its handler: the fence gate admits nothing
    /// and `check_lease` answers `false`, neither asking the store; at the shutdown deadline
    /// its token is cancelled, so that what it still winds down stops then.
    fn a_given_back_attempt_admits_nothing_and_is_told_when_the_deadline_comes(t) {
        let db = t.db();
        t.open().enqueue_many(&[job("j")]).unwrap();
        let (tx, said) = channel::<(bool, bool, bool)>();
        let tx = Mutex::new(tx);
        let (told_tx, told) = channel::<bool>();
        let told_tx = Mutex::new(told_tx);
        let w = worker(t, &ManualClock::new(0.0), "A")
            .concurrency(1)
            .build(move |ctx| {
                let released = ctx.release()?;
                let (admitted, current) = (ctx.admit("outside")?, ctx.check_lease()?);
                tx.lock().unwrap().send((released, admitted, current))?;
                // Winding down until told: the shutdown deadline, not the patience, ends it.
                let cancelled = ctx.token().wait_timeout(PATIENCE);
                told_tx.lock().unwrap().send(cancelled)?;
                Ok(String::new())
            })
            .unwrap();
        let (handle, run) = spawn(w);
        assert_eq!(recv(&said), (true, false, false), "released; nothing admitted; not current");
        assert_eq!(gate(db, "outside"), None, "the gate was never asked");
        assert!(told.try_recv().is_err(), "not told before the stop");
        handle.shutdown_now();
        assert!(recv(&told), "the token is cancelled at the deadline");
        let stats = stop(&handle, run);
        assert_eq!(
            (stats.released, stats.stale_refused, stats.lost, stats.completed),
            (1, 0, 0, 0),
            "{stats:?}"
        );
        let row = db.row("j").unwrap();
        assert_eq!((row.owner, row.fence, row.done), (None, 1, 0));
        assert_eq!(db.refusals("j"), [], "the deadline did not try to release it again");
    }
);

/// `complete_with` after a release writes nothing and leaves the attempt given back: its
/// closure does not run, no refusal is recorded, the attempt is reported released (and the
/// job runs again). SQLite only: `JobContext::complete_with` is.
#[test]
fn complete_with_after_a_release_writes_nothing() {
    let db = Db::new();
    open(&db).enqueue_many(&[job("j")]).unwrap();
    let (tx, said) = channel::<(bool, bool, bool)>();
    let tx = Mutex::new(tx);
    let (outcomes, hook) = outcome_log();
    let stats = sqlite_worker(&db, &ManualClock::new(0.0), "w")
        .concurrency(1)
        .drain(true)
        .on_outcome(hook)
        .build(move |ctx| {
            if ctx.fence() > 1 {
                return Ok("second".to_string());
            }
            let released = ctx.release()?;
            let ran = AtomicBool::new(false);
            let stored = ctx.complete_with("late", |conn| {
                ran.store(true, Ordering::SeqCst);
                conn.execute_batch("CREATE TABLE side (x)")?;
                Ok::<_, BoxError>(())
            })?;
            tx.lock()
                .unwrap()
                .send((released, stored.is_some(), ran.load(Ordering::SeqCst)))?;
            Ok(String::new())
        })
        .unwrap()
        .run_drained();
    assert_eq!(
        recv(&said),
        (true, false, false),
        "released; nothing stored or run"
    );
    assert_eq!(
        *outcomes.lock().unwrap(),
        [(1, JobOutcome::Released), (2, JobOutcome::Completed)]
    );
    assert_eq!(
        (stats.released, stats.completed, stats.stale_refused),
        (1, 1, 0),
        "{stats:?}"
    );
    assert_eq!(db.refusals("j"), []);
    assert_eq!(
        db.row("j").unwrap(),
        done_row("j", "w-0", 2, 30.0, "second")
    );
    let side: i64 = db
        .raw()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'side'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(side, 0, "the closure's write never ran");
}

/// A release the store cannot make (busy past its timeout) is an error that changes nothing:
/// the attempt carries on, the heartbeat still renews its lease, and its result is stored as
/// usual. SQLite only: a held write lock makes the store fail on cue.
#[test]
fn a_release_that_fails_leaves_the_attempt_running_and_its_lease_renewed() {
    let db = Db::new();
    open(&db).enqueue_many(&[job("j")]).unwrap();
    let clock = ManualClock::new(0.0);
    let (tx, said) = channel::<Option<String>>();
    let tx = Mutex::new(tx);
    let (open_gate, gate) = Gate::new();
    let w = super::store_errors::impatient(&db, &clock)
        .concurrency(1)
        .build(move |ctx| {
            let tx = tx.lock().unwrap().clone();
            tx.send(None)?;
            gate.wait();
            let error = ctx.release().expect_err("the write lock is held");
            assert!(matches!(error, Error::Busy), "{error:?}");
            tx.send(Some(error.to_string()))?;
            gate.wait();
            Ok("done".to_string())
        })
        .unwrap();
    let (handle, run) = spawn(w);
    assert_eq!(recv(&said), None);
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    open_gate.send(()).unwrap();
    assert!(recv(&said).is_some(), "the release failed");
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        db.row("j").unwrap().owner.as_deref(),
        Some("w-0"),
        "still held"
    );
    clock.set(11.0); // the renewal due at ttl / 3 = 10
    wait_until("the renewal after the failed release", || {
        handle.stats().renewed == 1
    });
    assert_eq!(db.row("j").unwrap().until, 41.0);
    open_gate.send(()).unwrap();
    wait_until("the completion", || handle.stats().completed == 1);
    let stats = stop(&handle, run);
    assert_eq!(
        (stats.completed, stats.released, stats.stale_refused),
        (1, 0, 0),
        "{stats:?}"
    );
    assert_eq!(db.row("j").unwrap(), done_row("j", "w-0", 1, 41.0, "done"));
    assert_eq!(db.queue_row("j").attempts, 1);
    assert_eq!(db.refusals("j"), []);
}
