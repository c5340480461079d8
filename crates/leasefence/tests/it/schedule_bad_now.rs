//! A scheduler step at a clock reading the calendar cannot hold (a clock in milliseconds, a
//! year past 9999) is bad input: refused naming `now` before the role is taken or renewed, so
//! nothing changes — it used to create the role job, take its lease (a fence handed out, an
//! attempt in the ledger) and only then refuse, in the tick.

use crate::common::*;
use leasefence::{JobId, Now, Schedule, Scheduler, SqliteStore, Step, Store, Ttl};

const T0: f64 = 1_796_083_200.0; // 2026-12-01T00:00:00Z

fn role_row(db: &Db) -> Option<(i64, i64)> {
    db.raw()
        .query_row(
            "SELECT fence, (SELECT count(*) FROM attempts WHERE job_id = 'leasefence.scheduler') \
             FROM jobs WHERE id = 'leasefence.scheduler'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok()
}

#[test]
fn a_step_at_a_reading_the_calendar_cannot_hold_changes_nothing() {
    let db = Db::new();
    let store = SqliteStore::open(&db.path).unwrap();
    store
        .add_schedule(
            &Schedule::new("sync", "@hourly").unwrap(),
            Now::new(T0).unwrap(),
        )
        .unwrap();
    let ttl = Ttl::new(30.0).unwrap();
    let milliseconds = Now::new(T0 * 1000.0).unwrap();

    let mut fresh = Scheduler::new(&store, "a", ttl).unwrap();
    assert_invalid(fresh.step(milliseconds), "now");
    assert_eq!(role_row(&db), None, "the role job was not created");
    assert!(fresh.lease().is_none());

    // With the role taken (fence 1), a bad reading neither renews nor takes it again.
    let mut holder = Scheduler::new(&store, "b", ttl).unwrap();
    assert!(matches!(
        holder.step(Now::new(T0 + 1.0).unwrap()).unwrap(),
        Step::Ticked(_)
    ));
    assert_eq!(role_row(&db), Some((1, 1)));
    let before = db.rows();
    assert_invalid(holder.step(milliseconds), "now");
    assert_invalid(
        Scheduler::new(&store, "c", ttl)
            .unwrap()
            .step(Now::new(-1e12).unwrap()),
        "now",
    );
    assert_eq!(db.rows(), before);
    assert_eq!(role_row(&db), Some((1, 1)));
    assert_eq!(holder.lease().map(|l| l.fence), Some(1));
    let role = store
        .state(JobId::new("leasefence.scheduler").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((role.owner.as_deref(), role.fence), (Some("b"), 1));
}
