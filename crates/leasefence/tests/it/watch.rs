//! `watch`: what an idle worker waits on instead of polling — woken by an enqueue, a retry or
//! a resume (and on SQLite by any other connection's commit), never by nothing.

use std::time::Duration;

use crate::common::*;
use leasefence::{JobId, Queue, Store};

/// Long enough that a wake-up which should come does; the cases never wait it out when it does.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a watch is given to stay quiet when nothing happened.
const QUIET: Duration = Duration::from_millis(50);

pub(crate) fn wakes_on_enqueue_retry_and_resume_and_stays_quiet_otherwise(
    s: &dyn Store,
    other: &dyn Store,
) {
    let mut watch = s.watch().unwrap().expect("the backend has a watch");
    assert!(!watch.wait(QUIET).unwrap(), "woken with nothing enqueued");
    // An enqueue by another store (another connection).
    other.enqueue_many(&[job("a").max_attempts(1)]).unwrap();
    assert!(watch.wait(PATIENCE).unwrap());
    // A known id inserts nothing.
    let lease = other
        .claim_next(owner("w"), now(0.0), ttl(10.0))
        .unwrap()
        .unwrap();
    other.fail(&lease, now(1.0), "boom", None).unwrap().unwrap();
    while watch.wait(QUIET).unwrap() {} // the claim and the failure (SQLite sees every commit)
    // A retry makes the dead job ready.
    assert_eq!(
        other.retry(&[JobId::new("a").unwrap()], now(2.0)).unwrap(),
        [true]
    );
    assert!(watch.wait(PATIENCE).unwrap());
    // A resume makes a paused queue's jobs ready.
    let q = Queue::new("q").unwrap();
    assert!(other.pause(&q).unwrap());
    while watch.wait(QUIET).unwrap() {}
    assert!(other.resume(&q).unwrap());
    assert!(watch.wait(PATIENCE).unwrap());
}

/// A timeout too long to add to the clock (`Duration::MAX`) is no deadline: the wait is woken
/// by an enqueue as any other. Waited on a thread of its own, so a wake-up that never comes
/// fails the case after `PATIENCE` instead of hanging it.
pub(crate) fn an_unbounded_wait_is_woken_by_an_enqueue(s: &dyn Store, other: &dyn Store) {
    let mut watch = s.watch().unwrap().expect("the backend has a watch");
    while watch.wait(QUIET).unwrap() {} // what opening the stores committed
    let (woken_tx, woken) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = woken_tx.send(watch.wait(Duration::MAX).map_err(|e| e.to_string()));
    });
    other.enqueue_many(&[job("unbounded")]).unwrap();
    match woken.recv_timeout(PATIENCE) {
        Ok(answer) => assert_eq!(answer, Ok(true)),
        Err(_) => panic!("an enqueue did not wake a wait of Duration::MAX"),
    }
}

#[test]
fn on_sqlite_an_unbounded_wait_is_woken_by_an_enqueue() {
    let db = Db::new();
    let (s, other) = (open(&db), open(&db));
    an_unbounded_wait_is_woken_by_an_enqueue(&s, &other);
}

#[test]
fn on_sqlite_a_watch_wakes_on_enqueue_retry_and_resume_and_stays_quiet_otherwise() {
    let db = Db::new();
    let (s, other) = (open(&db), open(&db));
    wakes_on_enqueue_retry_and_resume_and_stays_quiet_otherwise(&s, &other);
}

#[test]
fn on_sqlite_a_watch_wakes_on_a_commit_by_another_process() {
    let db = Db::new();
    let s = open(&db);
    let mut watch = s.watch().unwrap().unwrap();
    assert!(!watch.wait(QUIET).unwrap());
    // The stock sqlite3 shell: another process, another connection, no notifier of ours.
    sqlite3(&db.path, "INSERT INTO jobs (id) VALUES ('from-the-shell');");
    assert!(watch.wait(PATIENCE).unwrap());
    assert!(!watch.wait(QUIET).unwrap());
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_watch_wakes_on_enqueue_retry_and_resume_and_stays_quiet_otherwise() {
    let Some(db) = PgDb::new() else { return };
    let (s, other) = (db.store(), db.store());
    wakes_on_enqueue_retry_and_resume_and_stays_quiet_otherwise(&s, &other);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_an_unbounded_wait_is_woken_by_an_enqueue() {
    let Some(db) = PgDb::new() else { return };
    let (s, other) = (db.store(), db.store());
    an_unbounded_wait_is_woken_by_an_enqueue(&s, &other);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_watch_ignores_other_schemas_and_enqueues_that_insert_nothing() {
    let (Some(mine), Some(theirs)) = (PgDb::new(), PgDb::new()) else {
        return;
    };
    let s = mine.store();
    s.enqueue_many(&[job("known")]).unwrap();
    let mut watch = s.watch().unwrap().unwrap();
    theirs.store().enqueue_many(&[job("elsewhere")]).unwrap();
    assert!(
        !watch.wait(QUIET).unwrap(),
        "woken by another schema's enqueue"
    );
    s.enqueue_many(&[job("known")]).unwrap();
    assert!(
        !watch.wait(QUIET).unwrap(),
        "woken by an enqueue that inserted nothing"
    );
    s.enqueue_many(&[job("new")]).unwrap();
    assert!(watch.wait(PATIENCE).unwrap());
}

/// `retry_dead` notifies the watches when it made a dead job ready, and only then.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_watch_wakes_on_retry_dead_only_when_it_retried_a_job() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    let mut watch = s.watch().unwrap().unwrap();
    // Nothing dead: nothing retried, nobody woken.
    assert_eq!(s.retry_dead(now(0.0)).unwrap(), 0);
    assert!(
        !watch.wait(QUIET).unwrap(),
        "woken by a retry that made nothing ready"
    );
    s.enqueue_many(&[job("a").max_attempts(1)]).unwrap();
    let lease = s
        .claim_next(owner("w"), now(0.0), ttl(10.0))
        .unwrap()
        .unwrap();
    s.fail(&lease, now(1.0), "boom", None).unwrap().unwrap();
    while watch.wait(QUIET).unwrap() {} // the enqueue
    assert_eq!(s.retry_dead(now(2.0)).unwrap(), 1);
    assert!(watch.wait(PATIENCE).unwrap());
}
