//! `enqueue_many`: many jobs with their settings (payload, priority, `not_before`,
//! `max_attempts`) in one transaction; known ids are left alone.

use crate::common::*;
use leasefence::{Error, NewJob, Store};

contract!(
    fn inserts_every_new_job_with_its_settings_and_leaves_known_ids_alone(api, db, s) {
        let running = db.leased("known", "w", 3, 100.0);
        let inserted = s
            .enqueue_many(&[
                job("a").payload(b"\x00\xffbytes".to_vec()).priority(7),
                job("known").priority(99),
                job("b").not_before(50.5).unwrap().max_attempts(3),
            ])
            .unwrap();
        assert_eq!(inserted, [true, false, true]);
        assert_eq!(db.row("known").unwrap(), running);
        assert_eq!(db.row("a").unwrap(), Row::fresh("a"));
        let a = db.queue_row("a");
        assert_eq!(a.payload.as_deref(), Some(&b"\x00\xffbytes"[..]));
        assert_eq!((a.priority, a.not_before, a.max_attempts), (7, 0.0, 0));
        let b = db.queue_row("b");
        assert_eq!(
            (b.payload, b.priority, b.not_before, b.max_attempts),
            (None, 0, 50.5, 3)
        );
        assert_eq!(db.queue_row("known").priority, 0);
    }
);

contract!(
    fn a_duplicate_inside_one_batch_is_inserted_once(api, db, s) {
        let inserted = s
            .enqueue_many(&[job("x").priority(1), job("x").priority(2)])
            .unwrap();
        assert_eq!(inserted, [true, false]);
        assert_eq!(db.queue_row("x").priority, 1);
    }
);

#[test]
fn bad_settings_are_rejected_before_anything_is_written() {
    assert_invalid(NewJob::new(""), "job_id");
    for t in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_invalid(job("x").not_before(t), "not_before");
    }
}

#[test]
fn a_failure_midway_inserts_none_of_the_batch() {
    let db = Db::new();
    let s = open(&db);
    // A user's trigger refuses one id: the batch fails on its second job, after the first
    // was inserted inside the transaction.
    db.raw()
        .execute_batch(
            "CREATE TRIGGER refuse_bad BEFORE INSERT ON jobs WHEN NEW.id = 'bad' \
             BEGIN SELECT RAISE(ABORT, 'bad refused'); END;",
        )
        .unwrap();
    let err = s
        .enqueue_many(&[job("a"), job("bad"), job("c")])
        .unwrap_err();
    assert!(matches!(err, Error::Backend(_)), "{err:?}");
    assert!(err.to_string().contains("bad refused"), "{err}");
    assert_eq!(db.rows(), vec![]);
    // No transaction is left open: the same store enqueues normally afterwards.
    assert_eq!(s.enqueue_many(&[job("a"), job("c")]).unwrap(), [true, true]);
    assert_eq!(db.rows(), vec![Row::fresh("a"), Row::fresh("c")]);
}

#[test]
fn is_all_or_nothing_when_the_database_is_busy() {
    let db = Db::new();
    let s = leasefence::SqliteOptions::new()
        .busy_timeout(std::time::Duration::from_millis(50))
        .open(&db.path)
        .unwrap();
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = s.enqueue_many(&[job("a"), job("b")]).unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(db.rows(), vec![]);
}

/// The race a per-id lock closes, made deterministic: a purge of `j` has deleted it (fence 7)
/// and raised its fence floor, holding the id's advisory lock, but not committed. An
/// `enqueue_many` of `j` started now must wait for that lock — not read the floor from a
/// snapshot that predates the purge's commit — and then insert `j` from the floor, so no fence
/// is issued twice. Without the lock it would wait only on the deleted row (`transactionid`)
/// and insert at 0.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_waits_for_a_purge_of_the_same_id_and_continues_from_its_fence_floor() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    s.enqueue_many(&[job("j")]).unwrap();
    db.put(&Row {
        result: Some("r".into()),
        done: 1,
        fence: 7,
        ..Row::fresh("j")
    });
    // The purge's own steps, by hand, with the key PgStore::lock_ids takes for the id.
    let (holder, commit) = db.hold_with_pid(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('leasefence.ids.{}'), hashtext('j') & 255); \
         DELETE FROM jobs WHERE id = 'j'; \
         INSERT INTO fence_floor (id, fence) VALUES ('j', 7);",
        db.schema
    ));
    let inserted = std::thread::scope(|scope| {
        let enqueue = scope.spawn(|| s.enqueue_many(&[job("j")]).unwrap());
        db.await_blocked_by(holder);
        let waiting = db.query_strings(&format!(
            "SELECT wait_event FROM pg_stat_activity WHERE {holder} = ANY(pg_blocking_pids(pid))"
        ));
        assert_eq!(
            waiting,
            ["advisory"],
            "enqueue_many must wait for the purge's id lock, not only for the deleted row"
        );
        commit();
        enqueue.join().unwrap()
    });
    assert_eq!(inserted, [true]);
    assert_eq!(
        db.row("j").unwrap(),
        Row {
            fence: 7,
            ..Row::fresh("j")
        }
    );
    assert_eq!(claim_by_name(&s, "j", "w", 0.0, 1.0).unwrap(), Some(8));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_failure_midway_inserts_none_of_the_batch() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    // A user's trigger refuses one id: the batch fails on its second job, after the first was
    // inserted inside the transaction.
    db.exec(
        "CREATE FUNCTION refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.id = 'bad' THEN RAISE EXCEPTION 'bad refused'; END IF; RETURN NEW; END $$; \
         CREATE TRIGGER refuse_bad BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_bad();",
    );
    let err = s
        .enqueue_many(&[job("a"), job("bad"), job("c")])
        .unwrap_err();
    assert!(matches!(err, Error::Backend(_)), "{err:?}");
    assert!(!err.is_retryable(), "{err:?}");
    // The trigger's refusal caused it, and the server's message is in the error's Display.
    assert!(err.to_string().contains("bad refused"), "{err}");
    assert_eq!(db.rows(), vec![]);
    // No transaction is left open: the same store enqueues normally afterwards.
    assert_eq!(s.enqueue_many(&[job("a"), job("c")]).unwrap(), [true, true]);
    assert_eq!(db.rows(), vec![Row::fresh("a"), Row::fresh("c")]);
}
