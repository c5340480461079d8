//! Periodic jobs: schedules added, listed and removed as operator verbs, and the scheduler's
//! fenced enqueue of due runs (`enqueue_slots`): one run per slot with a deterministic id,
//! missed slots run once on catch-up, and every enqueue of a scheduler whose lease is not
//! current refused and counted — read back through an independent connection.

use crate::common::*;
use leasefence::{
    Enqueued, JobId, Lease, NewJob, SCHEDULER_JOB, SCHEDULER_QUEUE, Schedule, ScheduleName,
    Scheduler, SlotRun, Step, Store, due_runs, tick,
};

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200;

fn at(offset: i64) -> leasefence::Now {
    now((T0 + offset) as f64)
}

fn every_5_min() -> Schedule {
    Schedule::new("sync", "*/5 * * * *")
        .unwrap()
        .queue("sync")
        .unwrap()
        .kind("sync")
        .unwrap()
        .payload(b"all".to_vec())
        .priority(3)
        .max_attempts(2)
}

/// The scheduler job, enqueued as `Scheduler` does, and a lease on it for `who`.
fn role(s: &dyn Store, who: &str, offset: i64, ttl_s: f64) -> Option<Lease> {
    s.enqueue_jobs(&[NewJob::new(SCHEDULER_JOB)
        .unwrap()
        .queue(SCHEDULER_QUEUE)
        .unwrap()
        .not_before(253_402_300_799.0)
        .unwrap()])
        .unwrap();
    s.claim(
        JobId::new(SCHEDULER_JOB).unwrap(),
        owner(who),
        at(offset),
        ttl(ttl_s),
    )
    .unwrap()
}

/// The ids of the stored runs of schedule `name`, in id order.
fn runs(db: &dyn Probe, name: &str) -> Vec<String> {
    let prefix = format!("{name}@");
    db.rows()
        .into_iter()
        .map(|r| r.id)
        .filter(|id| id.starts_with(&prefix))
        .collect()
}

contract!(
    fn add_lists_and_remove_are_operator_verbs_read_back_as_stored(api, db, s) {
        assert!(s.add_schedule(&every_5_min(), at(0)).unwrap());
        assert_eq!(
            db.schedule("sync"),
            Some(("*/5 * * * *".into(), "UTC".into(), "sync".into(), T0))
        );
        // A known name is left exactly as it was.
        let other = Schedule::new("sync", "@daily").unwrap();
        assert!(!s.add_schedule(&other, at(60)).unwrap());
        assert_eq!(db.schedule("sync").unwrap().0, "*/5 * * * *");
        let berlin = Schedule::new("nightly", "0 3 * * *").unwrap().time_zone("Europe/Berlin");
        assert!(s.add_schedule(&berlin.unwrap(), at(10)).unwrap());

        let listed = s.schedules().unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].schedule.name(), "nightly"); // by name
        assert_eq!(listed[0].schedule.tz(), "Europe/Berlin");
        assert_eq!(listed[0].next_slot().unwrap(), Some(T0 + 2 * 3600)); // 03:00 Berlin
        assert_eq!(listed[1].schedule, every_5_min());
        assert_eq!((listed[1].created_at, listed[1].last_slot), (T0 as f64, T0));
        assert_eq!(listed[1].next_slot().unwrap(), Some(T0 + 300));

        let name = ScheduleName::new("sync").unwrap();
        assert!(s.remove_schedule(name).unwrap());
        assert!(!s.remove_schedule(name).unwrap());
        assert_eq!(db.schedule("sync"), None);
        assert_eq!(s.schedules().unwrap().len(), 1);
        // Adding a schedule enqueues nothing.
        assert!(db.rows().is_empty());
    }
);

contract!(
    fn a_new_schedule_starts_at_the_whole_second_it_was_added(api, db, s) {
        let secondly = Schedule::new("tick", "* * * * * *").unwrap();
        assert!(s.add_schedule(&secondly, now(T0 as f64 + 0.75)).unwrap());
        assert_eq!(db.schedule("tick").unwrap().3, T0);
        let lease = role(s, "a", 0, 30.0).unwrap();
        // The slot of its own second is not after it: the first run is the next second's.
        assert_eq!(tick(s, &lease, now(T0 as f64 + 0.9)).unwrap().unwrap().enqueued.len(), 0);
        let t = tick(s, &lease, at(1)).unwrap().unwrap();
        assert_eq!(t.enqueued, ["tick@2026-12-01T00:00:01Z"]);
    }
);

contract!(
    fn each_due_slot_is_enqueued_once_as_name_at_slot_with_the_schedules_job(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let lease = role(s, "a", 0, 3600.0).unwrap();
        let early = tick(s, &lease, at(299)).unwrap().unwrap();
        assert_eq!((early.enqueued.len(), early.next_slot), (0, Some(T0 + 300)));
        assert!(runs(db, "sync").is_empty());
        assert_eq!(db.schedule("sync").unwrap().3, T0);

        let due = tick(s, &lease, at(300)).unwrap().unwrap();
        assert_eq!(due.enqueued, ["sync@2026-12-01T00:05:00Z"]);
        assert_eq!((due.skipped, due.next_slot), (0, Some(T0 + 600)));
        assert_eq!(db.schedule("sync").unwrap().3, T0 + 300);
        let q = db.queue_row("sync@2026-12-01T00:05:00Z");
        assert_eq!(q.queue, "sync");
        assert_eq!(q.kind.as_deref(), Some("sync"));
        assert_eq!(q.payload.as_deref(), Some(&b"all"[..]));
        assert_eq!((q.priority, q.max_attempts), (3, 2));
        assert_eq!(q.not_before, (T0 + 300) as f64);
        let row = db.row("sync@2026-12-01T00:05:00Z").unwrap();
        assert_eq!((row.fence, row.done, row.owner), (0, 0, None));

        // The same slot again, by the same or a later tick: nothing.
        let again = tick(s, &lease, at(301)).unwrap().unwrap();
        assert!(again.enqueued.is_empty() && again.passed.is_empty());
        assert_eq!(runs(db, "sync"), ["sync@2026-12-01T00:05:00Z"]);
        let next = tick(s, &lease, at(600)).unwrap().unwrap();
        assert_eq!(next.enqueued, ["sync@2026-12-01T00:10:00Z"]);
        assert_eq!(runs(db, "sync").len(), 2);
    }
);

contract!(
    fn missed_slots_run_once_on_catch_up_as_the_latest(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let lease = role(s, "a", 0, 7200.0).unwrap();
        // Down from 00:00 to 00:31: the slots 00:05 … 00:30 passed; one run, of 00:30.
        let t = tick(s, &lease, at(31 * 60)).unwrap().unwrap();
        assert_eq!(t.enqueued, ["sync@2026-12-01T00:30:00Z"]);
        assert_eq!(t.skipped, 5);
        assert_eq!(runs(db, "sync"), ["sync@2026-12-01T00:30:00Z"]);
        assert_eq!(db.schedule("sync").unwrap().3, T0 + 1800);
        // The skipped slots never run later either.
        assert!(tick(s, &lease, at(32 * 60)).unwrap().unwrap().enqueued.is_empty());
        assert_eq!(runs(db, "sync").len(), 1);
    }
);

contract!(
    fn a_stalled_schedulers_late_enqueue_is_refused_by_the_fence_and_counted(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let stale = role(s, "a", 0, 10.0).unwrap();
        let fresh = role(s, "b", 20, 600.0).unwrap();
        assert_eq!((stale.fence, fresh.fence), (1, 2));
        // a wakes up with a slot due that b has not enqueued yet: refused, nothing written.
        assert_eq!(tick(s, &stale, at(300)).unwrap(), None);
        assert!(runs(db, "sync").is_empty());
        assert_eq!(db.schedule("sync").unwrap().3, T0);
        assert_eq!(db.refusals(SCHEDULER_JOB), [(1, "schedule".to_owned(), 1)]);
        // b enqueues it.
        let t = tick(s, &fresh, at(300)).unwrap().unwrap();
        assert_eq!(t.enqueued, ["sync@2026-12-01T00:05:00Z"]);
        assert_eq!(db.refusals(SCHEDULER_JOB), [(1, "schedule".to_owned(), 1)]);
        let h = s.history(JobId::new(SCHEDULER_JOB).unwrap()).unwrap().unwrap();
        assert_eq!(h.refused_under(1), 1);
    }
);

contract!(
    fn the_same_owners_older_fence_is_refused(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let first = role(s, "a", 0, 10.0).unwrap();
        let second = role(s, "a", 20, 600.0).unwrap();
        assert_eq!((first.owner.as_str(), second.fence), ("a", 2));
        assert_eq!(tick(s, &first, at(300)).unwrap(), None);
        assert!(runs(db, "sync").is_empty());
        assert_eq!(db.refusals(SCHEDULER_JOB), [(1, "schedule".to_owned(), 1)]);
    }
);

contract!(
    fn an_expired_scheduler_lease_enqueues_nothing_even_when_nobody_took_it(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let lease = role(s, "a", 0, 300.0).unwrap();
        // until == now: expired.
        assert_eq!(tick(s, &lease, at(300)).unwrap(), None);
        assert!(runs(db, "sync").is_empty());
        assert_eq!(db.schedule("sync").unwrap().3, T0);
        assert_eq!(db.refusals(SCHEDULER_JOB), [(1, "schedule".to_owned(), 1)]);
    }
);

contract!(
    fn another_owner_under_the_current_fence_is_refused(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let lease = role(s, "a", 0, 3600.0).unwrap();
        let forged = Lease { owner: "b".into(), ..lease.clone() };
        assert_eq!(tick(s, &forged, at(300)).unwrap(), None);
        assert!(runs(db, "sync").is_empty());
        // The holder is unaffected.
        assert_eq!(tick(s, &lease, at(300)).unwrap().unwrap().enqueued.len(), 1);
    }
);

contract!(
    fn a_cancelled_scheduler_job_enqueues_nothing(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let lease = role(s, "a", 0, 3600.0).unwrap();
        assert!(s.cancel(JobId::new(SCHEDULER_JOB).unwrap(), at(1)).unwrap());
        assert_eq!(tick(s, &lease, at(300)).unwrap(), None);
        assert!(runs(db, "sync").is_empty());
    }
);

contract!(
    fn a_run_is_skipped_when_its_schedule_moved_on_since_it_was_read(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let lease = role(s, "a", 0, 3600.0).unwrap();
        let due = due_runs(&s.schedules().unwrap(), at(300)).unwrap();
        assert_eq!(due.runs.len(), 1);
        // Removed and added again in between: its last slot is a new one.
        s.remove_schedule(ScheduleName::new("sync").unwrap()).unwrap();
        s.add_schedule(&every_5_min(), at(1)).unwrap();
        let stale_read = SlotRun { after: T0 - 300, ..due.runs[0].clone() };
        assert_eq!(s.enqueue_slots(&lease, at(300), &[stale_read]).unwrap(), Some(vec![None]));
        assert!(runs(db, "sync").is_empty());
        assert_eq!(db.schedule("sync").unwrap().3, T0 + 1);
        // A slot not after the last one is never enqueued, even from the right last slot.
        let backwards = SlotRun { after: T0 + 1, slot: T0, ..due.runs[0].clone() };
        assert_eq!(s.enqueue_slots(&lease, at(300), &[backwards]).unwrap(), Some(vec![None]));
        assert!(runs(db, "sync").is_empty());
        assert_eq!(db.schedule("sync").unwrap().3, T0 + 1);
        // The current read goes through.
        let current = SlotRun { after: T0 + 1, ..due.runs[0].clone() };
        assert_eq!(
            s.enqueue_slots(&lease, at(300), &[current]).unwrap(),
            Some(vec![Some(Enqueued::Inserted)])
        );
        assert_eq!(runs(db, "sync"), ["sync@2026-12-01T00:05:00Z"]);
    }
);

contract!(
    fn a_run_whose_id_is_known_is_passed_and_the_known_job_left_untouched(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        s.enqueue_jobs(&[job("sync@2026-12-01T00:05:00Z").payload(b"mine".to_vec())]).unwrap();
        let before = db.row("sync@2026-12-01T00:05:00Z").unwrap();
        let lease = role(s, "a", 0, 3600.0).unwrap();
        let t = tick(s, &lease, at(300)).unwrap().unwrap();
        assert_eq!((t.enqueued.len(), t.passed.as_slice()), (0, &["sync@2026-12-01T00:05:00Z".to_owned()][..]));
        assert_eq!(db.row("sync@2026-12-01T00:05:00Z").unwrap(), before);
        assert_eq!(db.queue_row("sync@2026-12-01T00:05:00Z").payload.as_deref(), Some(&b"mine"[..]));
        assert_eq!(db.schedule("sync").unwrap().3, T0 + 300);
    }
);

contract!(
    fn schedulers_share_one_role_under_its_own_fence_and_ledger(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let mut a = Scheduler::new(s, "a", ttl(30.0)).unwrap();
        let mut b = Scheduler::new(s, "b", ttl(30.0)).unwrap();
        let Step::Ticked(t) = a.step(at(300)).unwrap() else { panic!("a takes the role") };
        assert_eq!(t.enqueued, ["sync@2026-12-01T00:05:00Z"]);
        assert_eq!(b.step(at(300)).unwrap(), Step::Standby);
        assert_eq!(b.step(at(310)).unwrap(), Step::Standby); // a's lease lives until 330
        // The scheduler job is never handed out by claim_next, whatever its queue.
        let only_role = leasefence::Queues::only([SCHEDULER_QUEUE]).unwrap();
        assert!(s.claim_next_in(&only_role, owner("w"), at(10_000_000), ttl(10.0)).unwrap().is_none());
        let role_row = db.row(SCHEDULER_JOB).unwrap();
        assert_eq!((role_row.owner.as_deref(), role_row.fence), (Some("a"), 1));
        assert_eq!(db.queue_row(SCHEDULER_JOB).queue, SCHEDULER_QUEUE);
        // a gives the role back; b takes it at once under the next fence, and ticks.
        assert!(a.resign().unwrap());
        let Step::Ticked(t) = b.step(at(600)).unwrap() else { panic!("b takes the role") };
        assert_eq!(t.enqueued, ["sync@2026-12-01T00:10:00Z"]);
        assert_eq!(b.lease().unwrap().fence, 2);
        let briefs: Vec<_> = db
            .attempts(SCHEDULER_JOB)
            .iter()
            .map(|x| (x.fence, x.owner.clone(), x.outcome.clone()))
            .collect();
        assert_eq!(
            briefs,
            [(1, "a".to_owned(), Some("released".to_owned())), (2, "b".to_owned(), None)]
        );
        assert_eq!(runs(db, "sync").len(), 2);
    }
);

contract!(
    fn a_scheduler_that_lost_its_lease_stands_by_and_another_takes_over(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        let mut a = Scheduler::new(s, "a", ttl(30.0)).unwrap();
        let mut b = Scheduler::new(s, "b", ttl(600.0)).unwrap();
        assert!(matches!(a.step(at(1)).unwrap(), Step::Ticked(_)));
        // a stalls past its lease (until 31); b takes over at 40 and enqueues 00:05 at 300.
        assert!(matches!(b.step(at(40)).unwrap(), Step::Ticked(_)));
        assert!(matches!(b.step(at(300)).unwrap(), Step::Ticked(_)));
        // a wakes at 300: its renew is refused and b holds the role, so it stands by.
        assert_eq!(a.step(at(301)).unwrap(), Step::Standby);
        assert!(a.lease().is_none());
        assert_eq!(runs(db, "sync"), ["sync@2026-12-01T00:05:00Z"]);
        assert_eq!(db.refusals(SCHEDULER_JOB), [(1, "renew".to_owned(), 1)]);
    }
);

#[test]
fn bad_schedules_are_refused_naming_the_argument() {
    assert_invalid(Schedule::new("", "* * * * *"), "name");
    assert_invalid(Schedule::new("a@b", "* * * * *"), "name");
    assert_invalid(Schedule::new(&"n".repeat(129), "* * * * *"), "name");
    assert_invalid(Schedule::new("n", "61 * * * *"), "cron");
    assert_invalid(Schedule::new("n", ""), "cron");
    assert_invalid(Schedule::new("n", "* * *"), "cron");
    assert_invalid(
        Schedule::new("n", "@daily")
            .unwrap()
            .time_zone("Mars/Olympus"),
        "tz",
    );
    assert_invalid(Schedule::new("n", "@daily").unwrap().queue("a b"), "queue");
    assert_invalid(Schedule::new("n", "@daily").unwrap().kind(""), "kind");
    assert_invalid(ScheduleName::new("x y"), "name");
    assert_eq!(Schedule::new("n", " @daily ").unwrap().cron(), "@daily");
}

contract!(
    /// The role's lease is renewed once a third of it has passed, not on every step: a step
    /// before then costs a read, not a commit.
    fn the_scheduler_renews_its_role_once_a_third_of_the_lease_has_passed(api, db, s) {
        let mut a = Scheduler::new(s, "a", ttl(30.0)).unwrap();
        assert!(matches!(a.step(at(0)).unwrap(), Step::Ticked(_)));
        let until = |db: &dyn Probe| db.row(SCHEDULER_JOB).unwrap().until;
        assert_eq!(until(db), (T0 + 30) as f64);
        assert!(matches!(a.step(now((T0 as f64) + 9.99)).unwrap(), Step::Ticked(_)));
        assert_eq!(until(db), (T0 + 30) as f64, "not renewed before a third");
        assert!(matches!(a.step(at(10)).unwrap(), Step::Ticked(_)));
        assert_eq!(until(db), (T0 + 40) as f64, "renewed at a third");
        assert_eq!(a.lease().unwrap().until, (T0 + 40) as f64);
    }
);

/// Two schedules are equal only when every setting is: each one changed alone makes them
/// differ.
#[test]
fn schedules_are_equal_only_when_every_setting_is() {
    let base = || Schedule::new("sync", "*/5 * * * *").unwrap();
    assert_eq!(base(), base());
    assert_eq!(every_5_min(), every_5_min());
    let changed = [
        Schedule::new("other", "*/5 * * * *").unwrap(),
        Schedule::new("sync", "*/10 * * * *").unwrap(),
        base().time_zone("Europe/Berlin").unwrap(),
        base().queue("q").unwrap(),
        base().kind("k").unwrap(),
        base().payload(b"p".to_vec()),
        base().priority(1),
        base().max_attempts(9),
    ];
    for (k, one) in changed.iter().enumerate() {
        assert_ne!(one, &base(), "setting {k}");
    }
}

/// A long outage is counted, not walked to its end: a tick counts at most 100,000 skipped
/// slots, and every one below that. (SQLite once: `due_runs` is the same above every store.)
#[test]
fn skipped_slots_are_counted_up_to_a_hundred_thousand() {
    let db = Db::new();
    let s = leasefence::SqliteStore::open(&db.path).unwrap();
    let every_second = Schedule::new("beat", "* * * * * *").unwrap();
    s.add_schedule(&every_second, at(0)).unwrap();
    // 100,000 seconds down: the 99,999 slots before the latest are counted.
    let due = due_runs(&s.schedules().unwrap(), at(100_000)).unwrap();
    assert_eq!((due.runs.len(), due.skipped), (1, 99_999));
    // Three days down: 259,199 passed, 100,000 counted; the latest runs all the same.
    let due = due_runs(&s.schedules().unwrap(), at(3 * 86_400)).unwrap();
    assert_eq!((due.runs.len(), due.skipped), (1, 100_000));
    assert_eq!(due.runs[0].slot, T0 + 3 * 86_400);
}

#[test]
fn slots_follow_the_time_zone_across_daylight_saving() {
    // 02:30 every day in Berlin: 01:30 UTC in winter, 00:30 UTC in summer. On 2027-03-28 the
    // clock jumps from 02:00 to 03:00, so that day has no 02:30: its slot is the first moment
    // after the gap, 03:00 summer time (01:00 UTC).
    let s = Schedule::new("dst", "30 2 * * *")
        .unwrap()
        .time_zone("Europe/Berlin")
        .unwrap();
    let before = 1_806_105_600; // 2027-03-27T00:00:00Z
    let mut slots = Vec::new();
    let mut after = before;
    for _ in 0..3 {
        after = s.next_after(after).unwrap().unwrap();
        slots.push(leasefence::run_id("dst", after).unwrap());
    }
    assert_eq!(
        slots,
        [
            "dst@2027-03-27T01:30:00Z",
            "dst@2027-03-28T01:00:00Z",
            "dst@2027-03-29T00:30:00Z"
        ]
    );
    // latest_at is the same sequence read backwards.
    assert_eq!(s.latest_at(after).unwrap(), Some(after));
    assert_eq!(
        s.latest_at(after - 1).unwrap(),
        s.next_after(before + 86_400).unwrap()
    );
}

contract!(
    fn a_lease_on_another_job_is_not_the_scheduler_role(api, db, s) {
        s.add_schedule(&every_5_min(), at(0)).unwrap();
        s.enqueue_jobs(&[job("other")]).unwrap();
        let other = s.claim(JobId::new("other").unwrap(), owner("a"), at(0), ttl(3600.0)).unwrap();
        let other = other.unwrap();
        // Nothing due: nothing written, nothing checked.
        assert_eq!(tick(s, &other, at(10)).unwrap().unwrap().enqueued.len(), 0);
        assert_invalid(tick(s, &other, at(300)), "scheduler");
        assert!(runs(db, "sync").is_empty());
        assert_eq!(db.schedule("sync").unwrap().3, T0);
        assert!(db.refusals("other").is_empty());
    }
);
