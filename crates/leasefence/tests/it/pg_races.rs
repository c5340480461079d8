//! PostgreSQL races with what the store does not control: the database's default isolation,
//! the caller's own transaction (`enqueue_in`), and operator verbs racing an enqueue.

use leasefence::{Error, JobId, NewJob, Owner, Store};

use crate::common::*;

/// `url` with a server option for every session it opens (`-c name=value`), in whichever form
/// `url` is written: a `postgres://` URL or `key=value` pairs.
fn with_session_option(url: &str, option: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let encoded = option
            .replace('%', "%25")
            .replace(' ', "%20")
            .replace('=', "%3D")
            .replace('\\', "%5C");
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options={encoded}")
    } else {
        let quoted = option.replace('\\', "\\\\").replace('\'', "\\'");
        format!("{url} options='{quoted}'")
    }
}

/// A database (or role) whose default isolation is REPEATABLE READ must not weaken the store:
/// its enqueue took its snapshot before waiting for an id's lock held by a purge, missed the
/// purged id's fence floor, and inserted the id at fence 0 — the next claim handed out fence 1
/// again. The store's sessions now run READ COMMITTED whatever the default.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_repeatable_read_default_does_not_let_a_purged_ids_fence_be_handed_out_again() {
    use leasefence::postgres::{Config, NoTls};
    let Some(db) = PgDb::new() else { return };
    let url = with_session_option(
        &db.url,
        r"-c default_transaction_isolation=repeatable\ read",
    );
    let mut probe = url.parse::<Config>().unwrap().connect(NoTls).unwrap();
    let default: String = probe
        .query_one("SHOW default_transaction_isolation", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        default, "repeatable read",
        "the premise: sessions default to it"
    );
    let store = db.options().open(&url).unwrap();
    let (j, w) = (JobId::new("j").unwrap(), Owner::new("w").unwrap());
    store.enqueue(j).unwrap();
    let first = store
        .claim_fence(j, w, now(0.0), ttl(5.0))
        .unwrap()
        .unwrap();
    let f = store
        .claim_fence(j, w, now(10.0), ttl(5.0))
        .unwrap()
        .unwrap();
    assert_eq!((first, f), (1, 2));
    assert!(store.complete(j, w, f, now(11.0), "r").unwrap());
    // An operator's purge, held open after its delete: the id's lock (lock_ids.sql's bucket),
    // the row gone, its fence kept as the floor.
    let (holder, commit) = db.hold_with_pid(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('leasefence.ids.{}'), hashtext('j') & 255); \
         WITH purged AS (DELETE FROM jobs WHERE id = 'j' RETURNING id, fence) \
         INSERT INTO fence_floor (id, fence) SELECT id, fence FROM purged",
        db.schema
    ));
    std::thread::scope(|scope| {
        let enqueue = scope.spawn(|| store.enqueue(j));
        db.await_blocked_by(holder); // its transaction begun, waiting for the id's lock
        commit();
        assert!(enqueue.join().unwrap().unwrap(), "enqueued afresh");
    });
    assert_eq!(
        store.claim_fence(j, w, now(20.0), ttl(5.0)).unwrap(),
        Some(3),
        "the fence goes on from the purged id's floor"
    );
    assert_eq!(db.query_i64("SELECT fence FROM jobs WHERE id = 'j'"), [3]);
}

/// `enqueue_in` runs in the caller's transaction, whose isolation the store cannot set: one
/// that is not READ COMMITTED is refused by name, with nothing written and the caller's
/// `search_path` set back.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn enqueue_in_refuses_a_transaction_that_is_not_read_committed() {
    use leasefence::postgres::{Config, IsolationLevel, NoTls};
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let mut client = db.url.parse::<Config>().unwrap().connect(NoTls).unwrap();
    for level in [IsolationLevel::RepeatableRead, IsolationLevel::Serializable] {
        let mut tx = client
            .build_transaction()
            .isolation_level(level)
            .start()
            .unwrap();
        let before: String = tx.query_one("SHOW search_path", &[]).unwrap().get(0);
        assert_invalid(
            store.enqueue_in(&mut tx, &[NewJob::new("r-1").unwrap()]),
            "tx",
        );
        let after: String = tx.query_one("SHOW search_path", &[]).unwrap().get(0);
        assert_eq!(
            after, before,
            "{level:?}: the caller's search_path is set back"
        );
        tx.commit().unwrap();
        assert_eq!(db.row("r-1"), None, "{level:?}: nothing written");
    }
    // READ COMMITTED is taken, and READ UNCOMMITTED, which PostgreSQL runs as READ COMMITTED.
    for (level, id) in [
        (IsolationLevel::ReadCommitted, "r-1"),
        (IsolationLevel::ReadUncommitted, "r-2"),
    ] {
        let mut tx = client
            .build_transaction()
            .isolation_level(level)
            .start()
            .unwrap();
        store
            .enqueue_in(&mut tx, &[NewJob::new(id).unwrap()])
            .unwrap();
        tx.commit().unwrap();
        assert!(db.row(id).is_some(), "{level:?} is taken");
    }
}

/// A retry racing an enqueue that takes the retried job's unique key: the key is not yet
/// visible to retry.sql's check, and the index refuses the row when the enqueue commits. That
/// is contention — `Busy`, retryable, nothing changed — not a backend failure; tried again,
/// the job is left as it is (`false`), as on SQLite. Likewise `retry_dead`.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_retry_racing_an_enqueue_of_the_same_unique_key_is_busy_then_skipped() {
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let w = Owner::new("w").unwrap();
    for (round, id) in ["d1", "d2"].into_iter().enumerate() {
        let t = 100.0 * round as f64;
        let dead = NewJob::new(id)
            .unwrap()
            .unique_key("k")
            .unwrap()
            .max_attempts(1);
        store.enqueue_many(&[dead]).unwrap();
        let lease = store.claim_next(w, now(t), ttl(5.0)).unwrap().unwrap();
        assert_eq!(
            store.fail(&lease, now(t + 1.0), "boom", None).unwrap(),
            Some(leasefence::Failed::Dead)
        );
        let taker = format!("{id}-taker");
        let (holder, commit) = db.hold_with_pid(&format!(
            "INSERT INTO jobs (id, queue, unique_key) VALUES ('{taker}', 'default', 'k')"
        ));
        let dead_before = db.query_strings(&format!(
            "SELECT concat_ws(',', done, outcome, fence, attempts) FROM jobs WHERE id = '{id}'"
        ));
        let answer = std::thread::scope(|scope| {
            let retry = scope.spawn(|| {
                if round == 0 {
                    store
                        .retry(&[JobId::new(id).unwrap()], now(t + 2.0))
                        .map(|r| r.len() as u64)
                } else {
                    store.retry_dead(now(t + 2.0))
                }
            });
            db.await_blocked_by(holder); // waiting on the key's index entry
            commit();
            retry.join().unwrap()
        });
        assert!(
            matches!(answer, Err(Error::Busy)),
            "round {round}: {answer:?}"
        );
        let dead_after = db.query_strings(&format!(
            "SELECT concat_ws(',', done, outcome, fence, attempts) FROM jobs WHERE id = '{id}'"
        ));
        assert_eq!(dead_after, dead_before, "round {round}: nothing changed");
        if round == 0 {
            assert_eq!(
                store
                    .retry(&[JobId::new(id).unwrap()], now(t + 3.0))
                    .unwrap(),
                [false]
            );
        } else {
            assert_eq!(store.retry_dead(now(t + 3.0)).unwrap(), 0);
        }
        // the taker holds the key and runs; then the key is free for the next round
        let taken = store
            .claim_next(w, now(t + 4.0), ttl(5.0))
            .unwrap()
            .unwrap();
        assert_eq!(taken.job_id, taker);
        assert!(store.complete_lease(&taken, now(t + 5.0), "ok").unwrap());
    }
}
