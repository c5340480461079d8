//! Migrations run again on a file that lost its `user_version` change nothing.

use crate::common::*;
use leasefence::Store;

/// A file whose user_version was lost (`sqlite3 .dump` leaves it out, so a restored copy
/// starts at 0) runs its migrations again: they must not fill anything again — 0003 set every
/// job's attempts to its fence, and a job whose leases were given back came out dead.
#[test]
fn a_file_whose_user_version_was_lost_is_migrated_again_without_touching_its_jobs() {
    let db = Db::new();
    let s = open(&db);
    s.enqueue_many(&[job("j").max_attempts(3)]).unwrap();
    for k in 0..3 {
        let lease = s
            .claim_next(owner("w"), now(f64::from(k)), ttl(10.0))
            .unwrap()
            .unwrap();
        assert!(s.release_lease(&lease).unwrap(), "given back: refunded");
    }
    drop(s);
    let (rows, before) = (db.rows(), db.queue_row("j"));
    assert_eq!((before.attempts, rows[0].fence), (0, 3));
    sqlite3(&db.path, "PRAGMA user_version = 0;");
    let s = open(&db);
    assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "7");
    assert_eq!(db.rows(), rows, "the six columns are untouched");
    assert_eq!(
        db.queue_row("j"),
        before,
        "nor is anything the migrations filled"
    );
    let lease = s
        .claim_next(owner("w"), now(5.0), ttl(10.0))
        .unwrap()
        .expect("three attempts left, not buried");
    assert_eq!((lease.fence, lease.attempt), (4, 1));
}
