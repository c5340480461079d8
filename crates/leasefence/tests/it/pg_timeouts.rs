//! `PgOptions`' timeouts against a real server and kernel: the longest each takes works, a
//! longer one is refused by name before any connection. (The driver settings they make are
//! checked without a server in the library's own `postgres::tests`.)

use crate::common::*;
use leasefence::{JobId, Owner, Store};

/// The longest timeouts taken (2^31 - 1 ms each) reach a real server and kernel and work; one
/// more millisecond of lock timeout is refused by name.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn the_longest_timeouts_work_and_longer_ones_are_refused_by_name() {
    let Some(db) = PgDb::new() else { return };
    let limit = std::time::Duration::from_millis(i32::MAX as u64);
    assert_invalid(
        db.options()
            .lock_timeout(limit + std::time::Duration::from_millis(1))
            .open(&db.url),
        "lock_timeout",
    );
    let store = db
        .options()
        .connect_timeout(limit)
        .lock_timeout(limit)
        .network_timeout(limit)
        .open(&db.url)
        .unwrap();
    assert!(store.enqueue(JobId::new("j").unwrap()).unwrap());
    let lease = store
        .claim(
            JobId::new("j").unwrap(),
            Owner::new("w").unwrap(),
            now(0.0),
            ttl(5.0),
        )
        .unwrap()
        .unwrap();
    assert!(store.complete_lease(&lease, now(1.0), "done").unwrap());
    let row = db.row("j").unwrap();
    assert_eq!((row.done, row.fence), (1, 1));
    assert_eq!(row.result.as_deref(), Some("done"));
}
