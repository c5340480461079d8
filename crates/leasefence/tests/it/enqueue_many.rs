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
