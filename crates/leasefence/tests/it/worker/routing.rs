//! Queues, kinds and wake-up in the worker: each named queue has threads of its own, a paused
//! queue is not served, a job runs only the handler registered for its kind, and an idle worker
//! is woken by the store's watch instead of waiting out its poll interval.

use super::*;
use leasefence::Queue;

/// What the recording handlers saw: `(job, queue, kind)` per job run.
type Log = Arc<Mutex<Vec<(String, String, Option<String>)>>>;

/// A handler that records `(job, queue, kind)` of every job it runs and stores `{tag} {id}`.
fn recording<S: Store>(
    tag: &'static str,
    log: &Log,
) -> impl Fn(&leasefence::JobContext<'_, S>) -> Result<String, leasefence::HandlerError>
+ Send
+ Sync
+ 'static {
    let log = log.clone();
    move |ctx| {
        log.lock().unwrap().push((
            ctx.job_id().to_owned(),
            ctx.queue().to_owned(),
            ctx.kind().map(str::to_owned),
        ));
        Ok(format!("{tag} {}", ctx.job_id()))
    }
}

worker_case!(
    fn each_named_queue_has_its_own_threads_and_other_queues_are_left_waiting(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[
                job("e1").queue("emails").unwrap(),
                job("v1").queue("video").unwrap().priority(9),
                job("e2").queue("emails").unwrap(),
                job("d1"),
            ])
            .unwrap();
        let log = Log::default();
        let stats = worker(t, &ManualClock::new(0.0), "mail")
            .queue("emails", 2)
            .drain(true)
            .build(recording("sent", &log))
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed), (2, 2));
        let mut ran = log.lock().unwrap().clone();
        ran.sort();
        assert_eq!(
            ran,
            [
                ("e1".to_owned(), "emails".to_owned(), None),
                ("e2".to_owned(), "emails".to_owned(), None)
            ]
        );
        assert_eq!(db.row("e1").unwrap().result.as_deref(), Some("sent e1"));
        assert_eq!(db.row("v1").unwrap(), Row::fresh("v1"));
        assert_eq!(db.row("d1").unwrap(), Row::fresh("d1"));
        // Two threads, one per queue, for the rest.
        let stats = worker(t, &ManualClock::new(0.0), "rest")
            .queue("video", 1)
            .queue("default", 1)
            .drain(true)
            .build(recording("did", &log))
            .unwrap()
            .run_drained();
        assert_eq!(stats.completed, 2);
        assert_eq!(db.row("v1").unwrap().result.as_deref(), Some("did v1"));
        assert_eq!(db.row("d1").unwrap().result.as_deref(), Some("did d1"));
    }
);

worker_case!(
    fn a_paused_queue_is_not_served_until_it_is_resumed(t) {
        let db = t.db();
        let store = t.open();
        store.enqueue_many(&[job("p1").queue("p").unwrap()]).unwrap();
        assert!(store.pause(&Queue::new("p").unwrap()).unwrap());
        let log = Log::default();
        let run = |prefix: &str| {
            worker(t, &ManualClock::new(0.0), prefix)
                .queue("p", 1)
                .drain(true)
                .build(recording("ran", &log))
                .unwrap()
                .run_drained()
        };
        assert_eq!(run("paused").claimed, 0);
        assert_eq!(db.row("p1").unwrap(), Row::fresh("p1"));
        assert!(store.resume(&Queue::new("p").unwrap()).unwrap());
        assert_eq!(run("resumed").completed, 1);
        assert_eq!(db.row("p1").unwrap().result.as_deref(), Some("ran p1"));
    }
);

worker_case!(
    fn jobs_run_the_handler_of_their_kind_and_an_unknown_kind_fails_without_running(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[
                job("a").kind("email").unwrap(),
                job("b").kind("resize").unwrap(),
                job("c").kind("fax").unwrap().max_attempts(1),
                job("d").max_attempts(1),
            ])
            .unwrap();
        let log = Log::default();
        let stats = worker(t, &ManualClock::new(0.0), "k")
            .kind("email", recording("mailed", &log))
            .kind("resize", recording("resized", &log))
            .drain(true)
            .build_kinds()
            .unwrap()
            .run_drained();
        assert_eq!((stats.claimed, stats.completed, stats.dead), (4, 2, 2));
        let mut ran: Vec<String> = log.lock().unwrap().iter().map(|r| r.0.clone()).collect();
        ran.sort();
        assert_eq!(ran, ["a", "b"]);
        assert_eq!(db.row("a").unwrap().result.as_deref(), Some("mailed a"));
        assert_eq!(db.row("b").unwrap().result.as_deref(), Some("resized b"));
        let (error, outcome, _) = failure(db, "c");
        assert_eq!(outcome.as_deref(), Some("dead"));
        let error = error.unwrap();
        assert!(
            error.contains(r#"no handler for kind "fax""#) && error.contains("email, resize"),
            "{error}"
        );
        assert_eq!(db.row("c").unwrap().result, None);
        let (error, outcome, _) = failure(db, "d");
        assert_eq!(outcome.as_deref(), Some("dead"));
        assert!(error.unwrap().contains("has no kind"));
    }
);

worker_case!(
    fn with_kinds_a_job_without_one_runs_the_handler_given_to_build(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[job("plain"), job("mail").kind("email").unwrap()])
            .unwrap();
        let log = Log::default();
        let stats = worker(t, &ManualClock::new(0.0), "k")
            .kind("email", recording("mailed", &log))
            .drain(true)
            .build(recording("default", &log))
            .unwrap()
            .run_drained();
        assert_eq!(stats.completed, 2);
        assert_eq!(db.row("plain").unwrap().result.as_deref(), Some("default plain"));
        assert_eq!(db.row("mail").unwrap().result.as_deref(), Some("mailed mail"));
    }
);

worker_case!(
    fn without_kinds_the_handler_runs_every_job_and_sees_its_kind(t) {
        let db = t.db();
        t.open()
            .enqueue_many(&[job("x").kind("anything").unwrap().queue("q").unwrap()])
            .unwrap();
        let log = Log::default();
        let stats = worker(t, &ManualClock::new(0.0), "all")
            .drain(true)
            .build(recording("ran", &log))
            .unwrap()
            .run_drained();
        assert_eq!(stats.completed, 1);
        assert_eq!(
            *log.lock().unwrap(),
            [("x".to_owned(), "q".to_owned(), Some("anything".to_owned()))]
        );
        assert_eq!(db.row("x").unwrap().result.as_deref(), Some("ran x"));
    }
);

#[test]
fn bad_queue_and_kind_settings_are_refused_by_name() {
    let db = Db::new();
    let clock = ManualClock::new(0.0);
    let ok = |_: &leasefence::JobContext<'_, SqliteStore>| Ok("ok".to_owned());
    let build = |b: WorkerBuilder<SqliteStore>| b.build(ok).map(drop);
    assert_invalid(build(sqlite_worker(&db, &clock, "w").queue("", 1)), "queue");
    assert_invalid(
        build(sqlite_worker(&db, &clock, "w").queue("a b", 1)),
        "queue",
    );
    assert_invalid(
        build(sqlite_worker(&db, &clock, "w").queue("a", 0)),
        "queue",
    );
    assert_invalid(
        build(sqlite_worker(&db, &clock, "w").queue("a", 1).queue("a", 2)),
        "queue",
    );
    assert_invalid(build(sqlite_worker(&db, &clock, "w").kind("", ok)), "kind");
    assert_invalid(
        build(sqlite_worker(&db, &clock, "w").kind("k", ok).kind("k", ok)),
        "kind",
    );
    assert_invalid(
        sqlite_worker(&db, &clock, "w").build_kinds().map(drop),
        "kind",
    );
    assert!(build(sqlite_worker(&db, &clock, "w").queue("a", 1).kind("k", ok)).is_ok());
}

worker_case!(
    fn an_idle_worker_takes_a_new_job_without_waiting_out_its_poll_interval(t) {
        let db = t.db();
        let store = t.open();
        store.enqueue_many(&[job("first")]).unwrap();
        let log = Log::default();
        // A poll interval far longer than the case's patience: only the watch can wake it.
        let w = worker(t, &ManualClock::new(0.0), "idle")
            .poll_interval(Duration::from_secs(3600))
            .build(recording("ran", &log))
            .unwrap();
        let (handle, run) = spawn(w);
        // Each job is enqueued once the one before is stored: by then the thread has gone back
        // to an empty queue and waits (its next claim follows its commit within microseconds).
        let mut previous = "first".to_owned();
        for n in 1..=3 {
            wait_until(&format!("{previous} was run"), || {
                db.row(&previous).is_some_and(|r| r.done == 1)
            });
            previous = format!("late-{n}");
            store.enqueue_many(&[job(&previous)]).unwrap();
        }
        wait_until("the last job was run", || {
            db.row(&previous).is_some_and(|r| r.done == 1)
        });
        assert_eq!(db.row("late-3").unwrap().result.as_deref(), Some("ran late-3"));
        let stats = stop(&handle, run);
        assert_eq!((stats.claimed, stats.completed), (4, 4));
    }
);

worker_case!(
    /// On an empty queue, with nothing enqueued to wake it, an idle thread waits out its poll
    /// interval between claims: it does not spin on the store.
    fn an_idle_worker_waits_its_poll_interval_between_claims_on_an_empty_queue(t) {
        let ctl = Arc::new(super::heartbeat::Ctl::default());
        let poll = Duration::from_millis(250);
        let w = super::heartbeat::stalling(t, &ManualClock::new(0.0), &ctl, 1)
            .scheduler(false)
            .poll_interval(poll)
            .build(|ctx| Ok(format!("ok {}", ctx.job_id())))
            .unwrap();
        let (handle, run) = spawn(w);
        wait_until("the first claim", || !ctl.asked().is_empty());
        let first = Instant::now();
        wait_until("five claims", || ctl.asked().len() >= 5);
        // Four waits of a poll interval lie between the first claim and the fifth; half of
        // that is left for this thread's own lateness in seeing the first.
        let took = first.elapsed();
        assert!(took >= 2 * poll, "five claims within {took:?}: {:?}", ctl.asked());
        let stats = stop(&handle, run);
        assert_eq!((stats.claimed, stats.completed), (0, 0));
    }
);
