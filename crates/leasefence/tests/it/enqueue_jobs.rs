//! `enqueue_jobs`: what enqueueing each job did — inserted, a known id, or a duplicate of the
//! job that holds its unique key in its queue — decided by a unique index inside the insert.

use std::sync::{Arc, Barrier};

use crate::common::*;
use leasefence::{Enqueued, JobId, NewJob, Store};

fn keyed(id: &str, queue: &str, key: &str) -> NewJob {
    job(id).queue(queue).unwrap().unique_key(key).unwrap()
}

fn duplicate(of: &str) -> Enqueued {
    Enqueued::Duplicate { of: of.into() }
}

contract!(
    fn a_unique_key_admits_one_unfinished_job_per_queue(api, db, s) {
        assert_eq!(
            s.enqueue_jobs(&[keyed("u1", "mail", "welcome:ada")]).unwrap(),
            [Enqueued::Inserted]
        );
        let before = db.rows();
        assert_eq!(
            s.enqueue_jobs(&[keyed("u2", "mail", "welcome:ada")]).unwrap(),
            [duplicate("u1")]
        );
        // Nothing was inserted, and u1 is untouched.
        assert_eq!(db.rows(), before);
        assert_eq!(db.row("u2"), None);
        // The same key in another queue, a job without a key, and u1 again.
        assert_eq!(
            s.enqueue_jobs(&[
                keyed("u3", "sms", "welcome:ada"),
                job("u4").queue("mail").unwrap(),
                keyed("u1", "mail", "other"),
            ])
            .unwrap(),
            [Enqueued::Inserted, Enqueued::Inserted, Enqueued::Known]
        );
        let u1 = db.queue_row("u1");
        assert_eq!((u1.queue.as_str(), u1.unique_key.as_deref()), ("mail", Some("welcome:ada")));
        let u3 = db.queue_row("u3");
        assert_eq!((u3.queue.as_str(), u3.unique_key.as_deref()), ("sms", Some("welcome:ada")));
        assert_eq!(db.queue_row("u4").unique_key, None);
        // enqueue_many tells the same as booleans.
        assert_eq!(
            s.enqueue_many(&[keyed("u5", "mail", "welcome:ada"), job("u6")]).unwrap(),
            [false, true]
        );
    }
);

contract!(
    fn a_later_job_of_a_batch_can_match_an_earlier_one(api, db, s) {
        assert_eq!(
            s.enqueue_jobs(&[keyed("a", "q", "k"), keyed("b", "q", "k"), keyed("c", "q", "j")])
                .unwrap(),
            [Enqueued::Inserted, duplicate("a"), Enqueued::Inserted]
        );
        assert_eq!(db.row("b"), None);
    }
);

contract!(
    fn the_key_is_free_again_once_its_job_has_finished(api, db, s) {
        s.enqueue_jobs(&[keyed("first", "q", "k")]).unwrap();
        let lease = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        // Leased, expired or retrying: still unfinished, still the key's holder.
        assert_eq!(s.enqueue_jobs(&[keyed("x", "q", "k")]).unwrap(), [duplicate("first")]);
        assert_eq!(
            s.fail(&lease, now(1.0), "boom", Some(now(2.0))).unwrap(),
            Some(leasefence::Failed::Retrying { at: 2.0 })
        );
        assert_eq!(s.enqueue_jobs(&[keyed("x", "q", "k")]).unwrap(), [duplicate("first")]);
        let lease = s.claim_next(owner("w"), now(3.0), ttl(10.0)).unwrap().unwrap();
        assert!(s.complete_lease(&lease, now(4.0), "ok").unwrap());
        // Completed: the key is free.
        assert_eq!(s.enqueue_jobs(&[keyed("second", "q", "k")]).unwrap(), [Enqueued::Inserted]);
        // The duplicate names the unfinished holder, not the finished job with the same key.
        assert_eq!(s.enqueue_jobs(&[keyed("x", "q", "k")]).unwrap(), [duplicate("second")]);
        // Cancelled: free again.
        assert!(s.cancel(JobId::new("second").unwrap(), now(5.0)).unwrap());
        assert_eq!(s.enqueue_jobs(&[keyed("third", "q", "k")]).unwrap(), [Enqueued::Inserted]);
        assert_eq!(db.row("x"), None);
    }
);

contract!(
    fn a_window_holds_the_key_after_the_job_finished_until_it_has_passed(api, db, s) {
        let windowed = |id: &str| keyed(id, "reports", "daily").unique_for(3600.0).unwrap();
        assert_eq!(s.enqueue_jobs(&[windowed("r1")]).unwrap(), [Enqueued::Inserted]);
        let lease = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert!(s.complete_lease(&lease, now(1.0), "sent").unwrap());
        // Finished, but enqueued within the hour: still refused.
        assert_eq!(s.enqueue_jobs(&[windowed("r2")]).unwrap(), [duplicate("r1")]);
        assert_eq!(db.row("r2"), None);
        // Without a window the finished job does not hold the key.
        assert_eq!(
            s.enqueue_jobs(&[keyed("plain", "reports", "daily")]).unwrap(),
            [Enqueued::Inserted]
        );
        assert!(s.cancel(JobId::new("plain").unwrap(), now(2.0)).unwrap());
        // Move r1's enqueue time two hours back, as if the hour had passed.
        db.exec("UPDATE jobs SET enqueued_at = enqueued_at - 7200");
        assert_eq!(s.enqueue_jobs(&[windowed("r2")]).unwrap(), [Enqueued::Inserted]);
        assert_eq!(db.queue_row("r2").unique_key.as_deref(), Some("daily"));
    }
);

contract!(
    fn retry_leaves_a_job_alone_whose_key_another_unfinished_job_holds(api, db, s) {
        s.enqueue_jobs(&[keyed("old", "q", "k").max_attempts(1)]).unwrap();
        let lease = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(
            s.fail(&lease, now(1.0), "boom", None).unwrap(),
            Some(leasefence::Failed::Dead)
        );
        assert_eq!(s.enqueue_jobs(&[keyed("new", "q", "k")]).unwrap(), [Enqueued::Inserted]);
        let before = db.rows();
        assert_eq!(s.retry(&[JobId::new("old").unwrap()], now(2.0)).unwrap(), [false]);
        assert_eq!(s.retry_dead(now(2.0)).unwrap(), 0);
        assert_eq!(db.rows(), before);
        assert_eq!(db.queue_row("old").outcome.as_deref(), Some("dead"));
        // Once the new one has finished, the old one can be retried.
        let lease = s.claim_next(owner("w"), now(3.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(lease.job_id, "new");
        assert!(s.complete_lease(&lease, now(4.0), "ok").unwrap());
        assert_eq!(s.retry(&[JobId::new("old").unwrap()], now(5.0)).unwrap(), [true]);
        assert_eq!(db.queue_row("old").outcome, None);
    }
);

/// Many connections enqueue jobs with one key at once, released together by a barrier:
/// exactly one inserts, every other one is told which job holds the key.
fn concurrent_enqueuers_of_one_key_insert_exactly_once(open: impl Fn() -> Box<dyn Store + Send>) {
    const THREADS: usize = 8;
    let barrier = Arc::new(Barrier::new(THREADS));
    let outcomes: Vec<Enqueued> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let store = open();
                let barrier = barrier.clone();
                scope.spawn(move || {
                    barrier.wait();
                    let job = keyed(&format!("job-{i}"), "q", "the-key");
                    store.enqueue_jobs(&[job]).unwrap().remove(0)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<usize> = (0..THREADS)
        .filter(|i| outcomes[*i] == Enqueued::Inserted)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let winner = format!("job-{}", winners[0]);
    for (i, outcome) in outcomes.iter().enumerate() {
        if i != winners[0] {
            assert_eq!(outcome, &duplicate(&winner), "{outcomes:?}");
        }
    }
}

#[test]
fn on_sqlite_concurrent_enqueuers_of_one_key_insert_exactly_once() {
    let db = Db::new();
    let path = db.path.clone();
    concurrent_enqueuers_of_one_key_insert_exactly_once(|| {
        Box::new(leasefence::SqliteStore::open(&path).unwrap())
    });
    let stored = sqlite3(
        &db.path,
        "SELECT count(*) FROM jobs WHERE unique_key = 'the-key';",
    );
    assert_eq!(stored.trim(), "1");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_concurrent_enqueuers_of_one_key_insert_exactly_once() {
    let Some(db) = PgDb::new() else { return };
    for _ in 0..5 {
        db.exec("DELETE FROM jobs");
        concurrent_enqueuers_of_one_key_insert_exactly_once(|| Box::new(db.store()));
        assert_eq!(db.rows().len(), 1);
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_concurrent_enqueuers_within_a_window_insert_exactly_once() {
    let Some(db) = PgDb::new() else { return };
    // Every job is finished at once, so only the window (checked under the key's lock, not by
    // the unique index) can refuse the others.
    db.exec("DELETE FROM jobs");
    const THREADS: usize = 8;
    let barrier = Arc::new(Barrier::new(THREADS));
    let inserted: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let store = db.store();
                let barrier = barrier.clone();
                scope.spawn(move || {
                    barrier.wait();
                    let job = keyed(&format!("w-{i}"), "q", "k")
                        .unique_for(3600.0)
                        .unwrap();
                    let inserted = store.enqueue_jobs(&[job]).unwrap()[0].is_inserted();
                    if inserted {
                        // Finished at once: the unique index no longer holds the key.
                        let id = format!("w-{i}");
                        assert!(store.cancel(JobId::new(&id).unwrap(), now(0.0)).unwrap());
                    }
                    usize::from(inserted)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(inserted, 1);
    assert_eq!(db.rows().len(), 1);
}

#[test]
fn bad_queue_kind_and_unique_settings_are_refused_by_name() {
    assert_invalid(job("a").queue(""), "queue");
    assert_invalid(job("a").queue("with space"), "queue");
    assert_invalid(job("a").queue("a=b"), "queue");
    assert_invalid(job("a").queue("x".repeat(129)), "queue");
    assert!(job("a").queue("x".repeat(128)).is_ok());
    assert_invalid(job("a").kind(""), "kind");
    assert_invalid(job("a").kind("tab\there"), "kind");
    assert_invalid(job("a").unique_key(""), "unique_key");
    assert_invalid(job("a").unique_key("k".repeat(513)), "unique_key");
    assert_invalid(job("a").kind("k".repeat(513)), "kind");
    // Exactly `MAX_KEY_LEN` bytes is the longest a kind or unique key may be.
    assert!(job("a").kind("k".repeat(leasefence::MAX_KEY_LEN)).is_ok());
    assert!(
        job("a")
            .unique_key("k".repeat(leasefence::MAX_KEY_LEN))
            .is_ok()
    );
    assert_invalid(job("a").unique_for(60.0), "unique_for");
    let keyed = job("a").unique_key("k").unwrap();
    assert_invalid(keyed.clone().unique_for(0.0), "unique_for");
    assert_invalid(keyed.clone().unique_for(f64::NAN), "unique_for");
    assert_invalid(keyed.unique_for(-1.0), "unique_for");
    assert_invalid(leasefence::Queues::only(Vec::<String>::new()), "queues");
    assert_invalid(leasefence::Queues::only(["ok", ""]), "queue");
}

#[test]
fn on_sqlite_enqueue_in_commits_and_rolls_back_with_the_callers_transaction() {
    use leasefence::rusqlite::{Connection, TransactionBehavior};
    let db = Db::new();
    let store = open(&db);
    store.enqueue_jobs(&[keyed("held", "mail", "k")]).unwrap();
    let mut conn = Connection::open(&db.path).unwrap();
    conn.execute_batch("CREATE TABLE orders (id TEXT PRIMARY KEY)")
        .unwrap();

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("INSERT INTO orders VALUES ('o-1')", []).unwrap();
    assert_eq!(
        leasefence::SqliteStore::enqueue_in(
            &tx,
            &[
                job("r-1").queue("mail").unwrap(),
                keyed("dup", "mail", "k"),
                job("held")
            ]
        )
        .unwrap(),
        [Enqueued::Inserted, duplicate("held"), Enqueued::Known]
    );
    drop(tx); // rolled back
    assert_eq!(db.row("r-1"), None);
    assert_eq!(
        sqlite3(&db.path, "SELECT count(*) FROM orders;").trim(),
        "0"
    );

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("INSERT INTO orders VALUES ('o-1')", []).unwrap();
    leasefence::SqliteStore::enqueue_in(&tx, &[job("r-1").queue("mail").unwrap()]).unwrap();
    tx.commit().unwrap();
    assert_eq!(db.queue_row("r-1").queue, "mail");
    assert_eq!(
        sqlite3(&db.path, "SELECT count(*) FROM orders;").trim(),
        "1"
    );
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_enqueue_in_commits_and_rolls_back_with_the_callers_transaction() {
    use leasefence::postgres::{Config, NoTls};
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    store.enqueue_jobs(&[keyed("held", "mail", "k")]).unwrap();
    let mut client = db.url.parse::<Config>().unwrap().connect(NoTls).unwrap();
    let orders = format!("{}.orders", db.schema);
    client
        .batch_execute(&format!("CREATE TABLE {orders} (id TEXT PRIMARY KEY)"))
        .unwrap();
    let path = |tx: &mut leasefence::postgres::Transaction<'_>| -> String {
        tx.query_one("SHOW search_path", &[]).unwrap().get(0)
    };

    let mut tx = client.transaction().unwrap();
    let before = path(&mut tx);
    tx.execute(&format!("INSERT INTO {orders} VALUES ('o-1')"), &[])
        .unwrap();
    assert_eq!(
        store
            .enqueue_in(
                &mut tx,
                &[
                    job("r-1").queue("mail").unwrap(),
                    keyed("dup", "mail", "k"),
                    job("held")
                ]
            )
            .unwrap(),
        [Enqueued::Inserted, duplicate("held"), Enqueued::Known]
    );
    assert_eq!(
        path(&mut tx),
        before,
        "the caller's search_path is set back"
    );
    // Not visible to anyone else before the commit.
    assert_eq!(db.row("r-1"), None);
    tx.rollback().unwrap();
    assert_eq!(db.row("r-1"), None);

    let mut tx = client.transaction().unwrap();
    tx.execute(&format!("INSERT INTO {orders} VALUES ('o-1')"), &[])
        .unwrap();
    store
        .enqueue_in(&mut tx, &[job("r-1").queue("mail").unwrap()])
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(db.queue_row("r-1").queue, "mail");
    assert_eq!(db.query_i64(&format!("SELECT count(*) FROM {orders}")), [1]);
}

/// On PostgreSQL an enqueue whose unique key is held (nothing inserted) asks which job holds
/// it in a second statement. If the holder was deleted in between (an operator's delete), the
/// insert is tried again — the key is free now — and, should the holder keep vanishing, gives
/// up after a bounded number of tries with `Busy` and nothing written. Triggers of the test's
/// own put a holder in before each insert statement and delete it after, `left` times.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_key_holder_deleted_between_insert_and_lookup_is_retried_a_bounded_number_of_times()
 {
    let Some(db) = PgDb::new() else { return };
    db.exec(
        "CREATE TABLE vanish (left_ INT); INSERT INTO vanish VALUES (0); \
         CREATE SEQUENCE vanished; \
         CREATE FUNCTION hold_key() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF pg_trigger_depth() = 1 AND (SELECT left_ FROM vanish) > 0 THEN \
             INSERT INTO jobs (id, queue, unique_key) VALUES ('holder', 'q', 'k'); \
           END IF; RETURN NULL; END $$; \
         CREATE FUNCTION vanish_key() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF pg_trigger_depth() = 1 AND (SELECT left_ FROM vanish) > 0 THEN \
             DELETE FROM jobs WHERE id = 'holder'; \
             UPDATE vanish SET left_ = left_ - 1; \
             PERFORM nextval('vanished'); \
           END IF; RETURN NULL; END $$; \
         CREATE TRIGGER hold_key BEFORE INSERT ON jobs \
           FOR EACH STATEMENT EXECUTE FUNCTION hold_key(); \
         CREATE TRIGGER vanish_key AFTER INSERT ON jobs \
           FOR EACH STATEMENT EXECUTE FUNCTION vanish_key();",
    );
    let store = db.store();
    let vanished =
        || db.query_i64("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM vanished");
    // Once: the second try inserts.
    db.exec("UPDATE vanish SET left_ = 1");
    assert_eq!(
        store.enqueue_jobs(&[keyed("b", "q", "k")]).unwrap(),
        [Enqueued::Inserted]
    );
    assert_eq!(vanished(), [1]);
    assert_eq!(
        db.rows().iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
    // Always: the first try and three more, then Busy, and the transaction rolled back.
    db.exec("DELETE FROM jobs; UPDATE vanish SET left_ = 100");
    let err = store.enqueue_jobs(&[keyed("c", "q", "k")]).unwrap_err();
    assert!(matches!(err, leasefence::Error::Busy), "{err:?}");
    assert_eq!(vanished(), [1 + 4]);
    assert!(db.rows().is_empty());
    assert_eq!(db.query_i64("SELECT left_::bigint FROM vanish"), [100]);
}
