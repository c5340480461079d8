//! A stored schedule that no longer parses (a hand edit, a cron or time-zone database upgrade)
//! makes `schedules()` — and so every tick, `schedule list`, `GET /v1/schedules` and the
//! dashboard — fail until it is removed by name: the error must say which schedule it is,
//! since none of those can list it any more.

use crate::common::*;
use leasefence::{Schedule, ScheduleName, Store};

#[test]
fn a_stored_schedule_that_no_longer_parses_is_named_in_the_error() {
    let db = Db::new();
    let s = leasefence::SqliteStore::open(&db.path).unwrap();
    let t0 = leasefence::Now::new(1_796_083_200.0).unwrap();
    s.add_schedule(&Schedule::new("fine", "@daily").unwrap(), t0)
        .unwrap();
    let berlin = Schedule::new("nightly-report", "0 3 * * *")
        .unwrap()
        .time_zone("Europe/Berlin")
        .unwrap();
    s.add_schedule(&berlin, t0).unwrap();
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .execute(
            "UPDATE schedules SET tz = 'Mars/Olympus' WHERE name = 'nightly-report'",
            [],
        )
        .unwrap();
    let e = s.schedules().unwrap_err();
    assert_eq!(e.argument(), Some("tz"), "{e}");
    let text = e.to_string();
    assert!(text.contains("Mars/Olympus"), "{text}");
    assert!(text.contains("nightly-report"), "{text}");
    // Removing it by that name is the way out.
    assert!(
        s.remove_schedule(ScheduleName::new("nightly-report").unwrap())
            .unwrap()
    );
    assert_eq!(s.schedules().unwrap().len(), 1);
}
