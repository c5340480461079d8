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

fn case<S: Store + Send + 'static>(
    open: Arc<dyn Fn() -> Result<S, Error> + Send + Sync>,
    probe: &dyn Probe,
) {
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
    let db = Db::new();
    let path = db.path.clone();
    case::<SqliteStore>(Arc::new(move || SqliteStore::open(&path)), &db);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn pg_a_timed_out_attempt_is_no_longer_current_to_its_handler() {
    let Some(db) = PgDb::new() else { return };
    let (url, options) = (db.url.clone(), db.options().pool_size(1));
    case::<PgStore>(Arc::new(move || options.open(&url)), &db);
}
