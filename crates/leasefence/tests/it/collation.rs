//! Text is ordered by its bytes on every backend: SQLite compares text by its bytes (BINARY),
//! and a PostgreSQL database is usually created with a linguistic collation (`en_US.UTF-8`,
//! or an ICU locale), under which `a` sorts before `B` and `-` may be ignored. The lists a
//! store returns in name order — `schedules`, `queues` and the fence gate's `fences`, whose
//! pages follow on by name — and the order in which a tick enqueues its runs (so which of two
//! equal runs is claimed first) must not depend on it.

use crate::common::*;
use leasefence::{Now, Queue, Resource, Schedule, Scheduler, Step, Store};

const T0: f64 = 1_796_083_200.0; // 2026-12-01T00:00:00Z

/// The same schedules and queues on any backend; the names in byte order: `B`, `a`, `a-b`,
/// `ab` (a linguistic collation says `a`, `a-b`, `ab`, `B`, or `a`, `ab`, `a-b`, `B`).
fn arrange(s: &dyn Store) {
    for name in ["ab", "B", "a-b", "a"] {
        let hourly = Schedule::new(name, "0 * * * *")
            .unwrap()
            .queue(name)
            .unwrap();
        assert!(s.add_schedule(&hourly, Now::new(T0).unwrap()).unwrap());
    }
}

fn byte_order(s: &dyn Store) {
    arrange(s);
    let names: Vec<String> = s
        .schedules()
        .unwrap()
        .into_iter()
        .map(|i| i.schedule.name().to_owned())
        .collect();
    assert_eq!(
        names,
        ["B", "a", "a-b", "ab"],
        "schedules by name, byte order"
    );
    let mut scheduler = Scheduler::new(s, "s", ttl(30.0)).unwrap();
    let Step::Ticked(tick) = scheduler.step(now(T0 + 3_600.0)).unwrap() else {
        panic!("the only scheduler takes the role")
    };
    assert_eq!(
        tick.enqueued,
        [
            "B@2026-12-01T01:00:00Z",
            "a@2026-12-01T01:00:00Z",
            "a-b@2026-12-01T01:00:00Z",
            "ab@2026-12-01T01:00:00Z"
        ],
        "the runs of one slot are enqueued in the schedules' order"
    );
    // Equal priority and not-before: the oldest run is claimed first, as on every backend.
    let first = s
        .claim_next(owner("w"), now(T0 + 3_601.0), ttl(10.0))
        .unwrap()
        .unwrap();
    assert_eq!(first.job_id, "B@2026-12-01T01:00:00Z");
    s.pause(&Queue::new("zz").unwrap()).unwrap();
    let queues: Vec<String> = s
        .queues(now(T0 + 3_601.0))
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(
        queues,
        ["B", "a", "a-b", "ab", "leasefence", "zz"],
        "queues by name, byte order"
    );
}

contract!(
    fn schedules_runs_and_queues_come_in_the_byte_order_of_their_names(api, db, s) {
        byte_order(s);
    }
);

/// The fence gate's resources, listed and paged through by name: byte order, and a page after
/// `a` goes on with `a-b` (a linguistic collation would start it at `ab` or `B`).
fn fence_order(s: &dyn Viewed) {
    for (fence, name) in ["ab", "B", "a-b", "a"].into_iter().enumerate() {
        assert!(
            s.admit(Resource::new(name).unwrap(), fence as i64 + 1)
                .unwrap()
        );
    }
    let listed = |after: Option<&str>, limit| -> Vec<(String, i64)> {
        s.fences(after.map(|a| Resource::new(a).unwrap()), limit)
            .unwrap()
            .into_iter()
            .map(|r| (r.resource, r.fence))
            .collect()
    };
    let all = [("B", 2), ("a", 4), ("a-b", 3), ("ab", 1)].map(|(r, f)| (r.to_owned(), f));
    assert_eq!(listed(None, 10), all, "fences by resource, byte order");
    assert_eq!(listed(None, 2), all[..2], "the first page");
    assert_eq!(listed(Some("a"), 2), all[2..], "the page after `a`");
    assert_eq!(listed(Some("ab"), 2), [], "nothing after the last");
}

contract!(viewed
    fn the_fence_gate_lists_its_resources_in_byte_order(api, db, s) {
        fence_order(s);
    }
);

/// The same on a PostgreSQL database whose text sorts linguistically (here the columns' own
/// collation, an ICU one, stands for a database created with such a default).
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_linguistic_collation_changes_no_order() {
    let Some(db) = PgDb::new() else { return };
    if db.query_i64("SELECT count(*) FROM pg_collation WHERE collname = 'und-x-icu'") == [0] {
        eprintln!("skipped: this PostgreSQL server has no ICU collations");
        return;
    }
    db.exec(
        r#"ALTER TABLE schedules ALTER COLUMN name TYPE text COLLATE "und-x-icu";
           ALTER TABLE queues ALTER COLUMN name TYPE text COLLATE "und-x-icu";
           ALTER TABLE job_counts ALTER COLUMN queue TYPE text COLLATE "und-x-icu";
           ALTER TABLE fence_gate ALTER COLUMN resource TYPE text COLLATE "und-x-icu";"#,
    );
    byte_order(&db.store());
    fence_order(&db.store());
}
