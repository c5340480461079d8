//! Once the worker gives an attempt up — the handler ran past its time limit — the handler's
//! own guards say so at once: `check_lease` is `false` and `admit` admits nothing, although the
//! store still shows the lease until the handler returns (the failure is written then). Before
//! the limit both say yes. Read back through an independent connection: the gate holds the
//! fence admitted before the limit and nothing after; the attempt is recorded as timed out.

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use leasefence::{Error, ManualClock, NewJob, PgStore, SqliteStore, Status, Store, Worker};

/// How long (real time) the case waits for the worker's threads to notice something.
const PATIENCE: Duration = Duration::from_secs(10);

/// What the handler saw: (timed out, check_lease, admit) at one moment.
type Seen = (bool, bool, bool);

fn case<S: Store + Send + 'static>(open: Opener<S>, probe: &dyn Probe) {
    let store = open().unwrap();
    store
        .enqueue_many(&[NewJob::new("mail").unwrap().max_attempts(3)])
        .unwrap();
    let clock = ManualClock::new(0.0);
    let (seen_tx, seen) = channel::<Seen>();
    let seen_tx = Mutex::new(seen_tx);
    let (go_tx, go) = channel::<()>();
    let go = Mutex::new(go);
    let opener = open.clone();
    let worker = Worker::builder(move || opener())
        .clock(clock.clone())
        .owner_prefix("A")
        .poll_interval(Duration::from_millis(2))
        .ttl(30.0)
        .timeout(5.0)
        .drain(true)
        .build(move |ctx| {
            let tx = seen_tx.lock().unwrap().clone();
            let look = || -> Result<Seen, Error> {
                Ok((ctx.is_timed_out(), ctx.check_lease()?, ctx.admit("mailer")?))
            };
            tx.send(look()?)?;
            // The limit passes while the handler waits for the case (its token is cancelled).
            go.lock().unwrap().recv_timeout(PATIENCE)?;
            let cancelled = ctx.token().wait_timeout(PATIENCE);
            assert!(cancelled, "the token was cancelled at the limit");
            tx.send(look()?)?;
            go.lock().unwrap().recv_timeout(PATIENCE)?;
            Ok("sent anyway".to_string())
        })
        .unwrap();
    let handle = worker.shutdown_handle();
    let run = std::thread::spawn(move || worker.run());
    let recv = || seen.recv_timeout(PATIENCE).expect("the handler reported");

    assert_eq!(
        recv(),
        (false, true, true),
        "before the limit: current, admitted"
    );
    assert_eq!(probe.fence_gate("mailer"), Some(1));
    clock.set(5.0);
    go_tx.send(()).unwrap();
    assert_eq!(
        recv(),
        (true, false, false),
        "past the limit: given up, nothing admitted"
    );
    // The store still shows the lease while the handler runs: the refusals came from the
    // worker's own decision, not from the store.
    let row = probe.row("mail").unwrap();
    assert_eq!((row.fence, row.until), (1, 30.0), "{row:?}");
    assert!(row.owner.is_some_and(|o| o.starts_with("A-")));
    go_tx.send(()).unwrap();
    let stats = run.join().unwrap().unwrap();
    drop(handle);
    assert_eq!(
        (stats.timed_out, stats.retried, stats.completed),
        (1, 1, 0),
        "{stats:?}"
    );
    // The gate kept the fence admitted before the limit and took nothing after it.
    assert_eq!(probe.fence_gate("mailer"), Some(1));
    let row = probe.row("mail").unwrap();
    assert_eq!(
        (row.fence, row.owner, row.result, row.done),
        (1, None, None, 0)
    );
    let info = store
        .inspect(
            leasefence::JobId::new("mail").unwrap(),
            leasefence::Now::new(5.0).unwrap(),
        )
        .unwrap()
        .unwrap();
    assert_eq!(info.status, Status::Retrying, "{info:?}");
    assert_eq!(
        info.error.as_deref(),
        Some("timed out after 5 s (the worker's time limit)")
    );
}

#[test]
fn sqlite_a_timed_out_attempt_is_no_longer_current_to_its_handler() {
    on_sqlite(case);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn pg_a_timed_out_attempt_is_no_longer_current_to_its_handler() {
    on_pg(case);
}

/// Opens one store of a backend, as a worker's opener does.
type Opener<S> = Arc<dyn Fn() -> Result<S, Error> + Send + Sync>;

/// Runs `case` on a fresh SQLite file.
fn on_sqlite(case: fn(Opener<SqliteStore>, &dyn Probe)) {
    let db = Db::new();
    let path = db.path.clone();
    case(Arc::new(move || SqliteStore::open(&path)), &db);
}

/// Runs `case` on a fresh PostgreSQL schema, each store one connection (as a worker's are).
fn on_pg(case: fn(Opener<PgStore>, &dyn Probe)) {
    let Some(db) = PgDb::new() else { return };
    let (url, options) = (db.url.clone(), db.options().pool_size(1));
    case(Arc::new(move || options.open(&url)), &db);
}

/// A handler whose lease was taken over before its worker noticed (no heartbeat has run: the
/// clock has not moved) still asks the fence gate, and the gate refuses it: a newer fence was
/// admitted for the resource. Its late completion is refused by the store.
fn stale_holder_case<S: Store + Send + 'static>(open: Opener<S>, probe: &dyn Probe) {
    let store = open().unwrap();
    store.enqueue_many(&[NewJob::new("mail").unwrap()]).unwrap();
    let clock = ManualClock::new(0.0);
    let (seen_tx, seen) = channel::<(bool, bool)>();
    let seen_tx = Mutex::new(seen_tx);
    let (go_tx, go) = channel::<()>();
    let go = Mutex::new(go);
    let opener = open.clone();
    let worker = Worker::builder(move || opener())
        .clock(clock.clone())
        .owner_prefix("A")
        .poll_interval(Duration::from_millis(2))
        .ttl(10.0)
        .drain(true)
        .build(move |ctx| {
            go.lock().unwrap().recv_timeout(PATIENCE)?;
            let tx = seen_tx.lock().unwrap().clone();
            tx.send((ctx.is_lost(), ctx.admit("mailer")?))?;
            Ok("A's late result".to_string())
        })
        .unwrap();
    let run = std::thread::spawn(move || worker.run());
    wait_for(|| probe.row("mail").is_some_and(|r| r.fence == 1));
    // B takes the expired lease (by the store's judgment at 20) and admits its fence.
    let b = store
        .claim(
            leasefence::JobId::new("mail").unwrap(),
            leasefence::Owner::new("B").unwrap(),
            leasefence::Now::new(20.0).unwrap(),
            leasefence::Ttl::new(10.0).unwrap(),
        )
        .unwrap()
        .expect("B claims the expired job");
    assert_eq!(b.fence, 2);
    assert!(
        store
            .admit(leasefence::Resource::new("mailer").unwrap(), 2)
            .unwrap()
    );
    go_tx.send(()).unwrap();
    let (lost, admitted) = seen.recv_timeout(PATIENCE).expect("A reported");
    assert_eq!(
        (lost, admitted),
        (false, false),
        "not yet noticed, and still refused by the gate"
    );
    let stats = run.join().unwrap().unwrap();
    assert_eq!((stats.stale_refused, stats.completed), (1, 0), "{stats:?}");
    assert_eq!(probe.fence_gate("mailer"), Some(2));
    let row = probe.row("mail").unwrap();
    assert_eq!(
        (row.fence, row.owner.as_deref(), row.result),
        (2, Some("B"), None)
    );
}

/// Waits (real time, bounded) until `cond` holds.
fn wait_for(mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "gave up waiting");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn sqlite_a_stale_holder_that_has_not_noticed_is_refused_by_the_gate() {
    on_sqlite(stale_holder_case);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn pg_a_stale_holder_that_has_not_noticed_is_refused_by_the_gate() {
    on_pg(stale_holder_case);
}
