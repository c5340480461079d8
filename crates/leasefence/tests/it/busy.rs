//! Lock contention past the busy timeout is a distinct, retryable error — never a wrong answer.

use std::time::{Duration, Instant};

use crate::common::*;
use leasefence::{Error, JobId, Now, Owner, SqliteOptions, Store, Ttl};

#[test]
fn a_held_write_lock_past_the_timeout_is_busy_and_changes_nothing() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    let before = db.rows();
    let store = SqliteOptions::new()
        .busy_timeout(Duration::from_millis(100))
        .open(&db.path)
        .unwrap();

    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (job, owner) = (JobId::new("job").unwrap(), Owner::new("w").unwrap());
    let (now, ttl) = (Now::new(0.0).unwrap(), Ttl::new(10.0).unwrap());

    let started = Instant::now();
    let err = store.claim_fence(job, owner, now, ttl).unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_millis(90),
        "waited for the lock"
    );
    assert!(matches!(err, Error::Busy), "{err:?}");
    assert!(err.is_retryable());
    assert!(err.to_string().contains("retry"), "{err}");
    for err in [
        store.enqueue(JobId::new("other").unwrap()).unwrap_err(),
        store.renew(job, owner, 1, now, ttl).unwrap_err(),
        store.complete(job, owner, 1, now, "r").unwrap_err(),
        store.release(job, owner, 1).unwrap_err(),
    ] {
        assert!(err.is_retryable(), "{err:?}");
    }
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(db.rows(), before);

    // Retrying once the lock is gone succeeds, on the same store.
    assert_eq!(store.claim_fence(job, owner, now, ttl).unwrap(), Some(1));
    assert_eq!(db.row("job").unwrap().fence, 1);
}

#[test]
fn a_lock_released_within_the_timeout_is_waited_for() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    // SQLite's busy wait cannot be observed from outside: the holder gives the claim 150 ms to
    // start waiting, and the timestamps prove it did (it started while the lock was held and
    // returned only after the commit began).
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let committing = std::time::Instant::now();
        blocker.execute_batch("COMMIT").unwrap();
        committing
    });
    let started = std::time::Instant::now();
    // the free functions use the default 5 s timeout
    assert_eq!(
        leasefence::claim(&db.path, "job", "w", 0.0, 10.0).unwrap(),
        Some(1)
    );
    let returned = std::time::Instant::now();
    let committing = release.join().unwrap();
    assert!(
        started < committing && committing < returned,
        "the claim did not wait for the lock (started {:?} before the commit, returned {:?} \
         after it)",
        committing.saturating_duration_since(started),
        returned.saturating_duration_since(committing)
    );
    assert_eq!(db.row("job").unwrap().owner.as_deref(), Some("w"));
}

#[test]
fn the_busy_timeout_option_bounds_the_wait() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    let store = SqliteOptions::new()
        .busy_timeout(Duration::from_millis(100))
        .open(&db.path)
        .unwrap();
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let err = store
        .release(JobId::new("job").unwrap(), Owner::new("w").unwrap(), 0)
        .unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, Error::Busy), "{err:?}");
    // 100 ms asked for; the default would be 5 s.
    assert!(
        waited >= Duration::from_millis(90) && waited < Duration::from_millis(2500),
        "waited {waited:?}"
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(db.rows(), vec![Row::fresh("job")]);
}

#[test]
fn an_unavailable_server_is_retryable_like_a_busy_database_and_nothing_else_is() {
    // What an HTTP store raises for a 503 or a server it cannot reach: the worker retries it.
    let gone = Error::Unavailable {
        target: "http://127.0.0.1:7878".into(),
        reason: "connection refused".into(),
    };
    assert!(gone.is_retryable());
    assert_eq!(gone.argument(), None);
    assert_eq!(
        gone.to_string(),
        "http://127.0.0.1:7878 is unavailable: connection refused (retry the call)"
    );
    assert!(Error::Busy.is_retryable());
    for other in [
        Error::StorageFull {
            database: "jobs.db".into(),
        },
        Error::Unsupported {
            database: "jobs.db".into(),
            detail: "x".into(),
        },
        Error::InvalidArgument {
            argument: "ttl",
            reason: "x".into(),
        },
    ] {
        assert!(!other.is_retryable(), "{other}");
    }
}

/// Two stores of one process on one file: while one is inside its write transaction (here the
/// caller's own writes of `complete_with`), the other's write waits for it — `Busy` past its
/// busy timeout, changing nothing — and goes through once the first has committed.
#[test]
fn a_store_of_this_process_inside_its_write_waits_out_the_others() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "held").unwrap();
    let holder = SqliteOptions::new().open(&db.path).unwrap();
    let lease = holder
        .claim(
            JobId::new("held").unwrap(),
            Owner::new("w").unwrap(),
            now(0.0),
            Ttl::new(60.0).unwrap(),
        )
        .unwrap()
        .unwrap();
    let impatient = SqliteOptions::new()
        .busy_timeout(Duration::from_millis(100))
        .open(&db.path)
        .unwrap();
    let patient_path = db.path.clone();
    let (inside_tx, inside) = std::sync::mpsc::channel::<()>();
    let (go_tx, go) = std::sync::mpsc::channel::<()>();
    let completer = std::thread::spawn(move || {
        // Answers the moment it hands the transaction back to be committed.
        holder.complete_with(&lease, now(1.0), "ok", |_| {
            inside_tx.send(()).unwrap();
            go.recv().unwrap();
            Ok::<_, Error>(Instant::now())
        })
    });
    inside.recv().unwrap();
    let before = db.rows();

    let started = Instant::now();
    let err = impatient.enqueue(JobId::new("late").unwrap()).unwrap_err();
    assert!(matches!(err, Error::Busy), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(90), "it waited");
    assert_eq!(db.rows(), before, "the refused write changed nothing");

    // A patient store's write, begun while the transaction is open, returns after its commit.
    let waiter = std::thread::spawn(move || {
        let patient = SqliteOptions::new()
            .busy_timeout(Duration::from_secs(30))
            .open(&patient_path)
            .unwrap();
        let began = Instant::now();
        patient.enqueue(JobId::new("queued").unwrap()).unwrap();
        (began, Instant::now())
    });
    // The holder gives the waiter 150 ms to start waiting (the timestamps prove it did).
    std::thread::sleep(Duration::from_millis(150));
    go_tx.send(()).unwrap();
    let committing = completer
        .join()
        .unwrap()
        .unwrap()
        .expect("the lease was current");
    let (began, done) = waiter.join().unwrap();
    assert!(
        began < committing,
        "the waiter began while the transaction was open"
    );
    assert!(
        done >= committing,
        "and finished only after it was committed"
    );
    assert_eq!(db.row("held").unwrap().result.as_deref(), Some("ok"));
    assert!(db.row("queued").is_some());
    assert!(db.row("late").is_none());
}
