//! `overview` (and the counts `queues` and `stats` share with it): every figure checked
//! against what the jobs themselves say — `list`'s status of every job, read by its own
//! statement — after every kind of write, and the leases, refusals and throughput against
//! the writes that made them.

use std::collections::BTreeMap;

use crate::common::*;
use crate::status::zoo;
use leasefence::{JobId, Now, Observe, Queue, Queues, Stats, Status, Store};

/// The counts by queue and status that `list` gives, job by job, at `at`.
fn listed(s: &dyn Viewed, at: f64) -> BTreeMap<String, Stats> {
    let mut counts: BTreeMap<String, Stats> = BTreeMap::new();
    for job in s.list(now(at), None, None, 100_000).unwrap() {
        let stats = counts.entry(job.queue.clone()).or_default();
        *stats = bump(*stats, job.status);
    }
    counts
}

fn bump(mut s: Stats, status: Status) -> Stats {
    match status {
        Status::Ready => s.ready += 1,
        Status::Scheduled => s.scheduled += 1,
        Status::Leased => s.leased += 1,
        Status::Expired => s.expired += 1,
        Status::Retrying => s.retrying += 1,
        Status::Done => s.done += 1,
        Status::Dead => s.dead += 1,
        Status::Cancelled => s.cancelled += 1,
        other => panic!("a status this test does not know: {other:?}"),
    }
    s
}

fn add(a: Stats, b: Stats) -> Stats {
    Stats {
        ready: a.ready + b.ready,
        scheduled: a.scheduled + b.scheduled,
        leased: a.leased + b.leased,
        expired: a.expired + b.expired,
        retrying: a.retrying + b.retrying,
        done: a.done + b.done,
        dead: a.dead + b.dead,
        cancelled: a.cancelled + b.cancelled,
    }
}

/// The overview's counts agree with `list`'s, queue by queue and in total, at `at`.
fn agrees_with_list(s: &dyn Viewed, at: f64) {
    let o = s.overview(now(at)).unwrap();
    let want = listed(s, at);
    let got: BTreeMap<String, Stats> = o
        .queues
        .iter()
        .filter(|q| q.stats.total() > 0)
        .map(|q| (q.name.clone(), q.stats))
        .collect();
    assert_eq!(got, want, "at {at}");
    let total = want.values().fold(Stats::default(), |a, b| add(a, *b));
    assert_eq!(o.totals, total, "at {at}");
    assert_eq!(s.stats(now(at)).unwrap(), total, "stats at {at}");
}

contract!(viewed
    fn counts_every_status_of_every_queue_as_list_does(api, db, s) {
        zoo(api, s);
        s.enqueue_many(&[
            job("m1").queue("mail").unwrap(),
            job("m2").queue("mail").unwrap().not_before(50.0).unwrap(),
        ])
        .unwrap();
        // A row no write path of this version leaves (made by hand, or by an older one): no
        // owner but a lease end. Leased while it runs, then ready: never expired without an
        // owner.
        db.put(&Row { until: 7.0, ..Row::fresh("handmade") });
        for at in [-5.0, 0.0, 4.9, 5.0, 7.0, 10.0, 14.0, 20.0, 30.0, 60.0] {
            agrees_with_list(s, at);
        }
        let o = s.overview(now(10.0)).unwrap();
        assert_eq!((o.dead(), o.expired_unclaimed()), (2, 1));
        assert_eq!(o.queues.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(), ["default", "mail"]);
    }
);

contract!(viewed
    fn counts_follow_every_write_path(api, db, s) {
        let at = 100.0;
        s.enqueue_many(&[
            job("a"),
            job("b").max_attempts(1),
            job("c").queue("q2").unwrap(),
            job("d"),
            job("e").max_attempts(1),
        ])
        .unwrap();
        agrees_with_list(s, at);
        let w = owner("w");
        let a = s.claim_next(w, now(at), ttl(10.0)).unwrap().unwrap();
        agrees_with_list(s, at);
        assert!(s.complete_lease(&a, now(at + 1.0), "ok").unwrap());
        agrees_with_list(s, at + 1.0);
        // b fails its only attempt: dead.
        let b = s.claim(JobId::new("b").unwrap(), w, now(at), ttl(10.0)).unwrap().unwrap();
        s.fail(&b, now(at + 1.0), "boom", None).unwrap().unwrap();
        agrees_with_list(s, at + 1.0);
        // e's only lease runs out: dead while unfinished, then buried by the next claim.
        s.claim(JobId::new("e").unwrap(), w, now(at), ttl(1.0)).unwrap().unwrap();
        agrees_with_list(s, at + 5.0);
        s.claim_next(w, now(at + 5.0), ttl(10.0)).unwrap();
        agrees_with_list(s, at + 6.0);
        assert!(s.cancel(JobId::new("d").unwrap(), now(at + 6.0)).unwrap());
        agrees_with_list(s, at + 6.0);
        // retry revives the dead and the cancelled; delete and purge remove jobs.
        s.retry(&[JobId::new("d").unwrap()], now(at + 7.0)).unwrap();
        agrees_with_list(s, at + 7.0);
        assert_eq!(s.retry_dead(now(at + 7.0)).unwrap(), 2);
        agrees_with_list(s, at + 7.0);
        s.delete(&[JobId::new("c").unwrap()]).unwrap();
        agrees_with_list(s, at + 7.0);
        assert_eq!(s.purge(now(at + 1000.0)).unwrap(), 1);
        agrees_with_list(s, at + 7.0);
        // the same id enqueued again after its purge counts once more
        s.enqueue_job(job("a")).unwrap();
        agrees_with_list(s, at + 8.0);
        assert_eq!(s.stats(now(at + 8.0)).unwrap().total(), db.rows().len() as u64);
    }
);

contract!(viewed
    fn a_job_moved_to_another_queue_is_counted_there(api, db, s) {
        // No write path moves a job; an operator's own SQL may, and the counts follow it.
        s.enqueue_many(&[job("a").queue("mail").unwrap(), job("b").queue("mail").unwrap()]).unwrap();
        db.exec("UPDATE jobs SET queue = 'reports' WHERE id = 'a'");
        agrees_with_list(s, 1.0);
        let names: Vec<String> = s.overview(now(1.0)).unwrap().queues.into_iter().map(|q| q.name).collect();
        assert_eq!(names, ["mail", "reports"]);
        db.exec("UPDATE jobs SET queue = 'reports' WHERE id = 'b'");
        agrees_with_list(s, 1.0);
        let names: Vec<String> = s.overview(now(1.0)).unwrap().queues.into_iter().map(|q| q.name).collect();
        assert_eq!(names, ["reports"], "mail has no job left");
    }
);

contract!(viewed
    fn a_queue_without_jobs_is_shown_while_paused_only(api, db, s) {
        let mail = Queue::new("mail").unwrap();
        assert!(s.pause(&mail).unwrap());
        let o = s.overview(now(0.0)).unwrap();
        assert_eq!(o.queues.len(), 1);
        assert!(o.queues[0].paused && o.queues[0].stats.total() == 0);
        s.enqueue_job(job("x").queue("other").unwrap()).unwrap();
        s.delete(&[JobId::new("x").unwrap()]).unwrap();
        let names: Vec<String> = s.overview(now(0.0)).unwrap().queues.into_iter().map(|q| q.name).collect();
        assert_eq!(names, ["mail"], "a queue whose jobs were all deleted is gone");
    }
);

contract!(viewed
    fn the_leases_that_end_within_a_minute_are_counted(api, db, s) {
        s.enqueue_many(&[job("soon"), job("later"), job("gone"), job("free"), job("finished")]).unwrap();
        let w = owner("w");
        let at = 1000.0;
        s.claim(JobId::new("soon").unwrap(), w, now(at), ttl(30.0)).unwrap().unwrap();
        s.claim(JobId::new("later").unwrap(), w, now(at), ttl(61.0)).unwrap().unwrap();
        s.claim(JobId::new("gone").unwrap(), w, now(at - 100.0), ttl(10.0)).unwrap().unwrap();
        // completed under a lease that would have run to +20 s: it keeps its `until`, but
        // nothing of it ends any more
        let f = s.claim(JobId::new("finished").unwrap(), w, now(at), ttl(20.0)).unwrap().unwrap();
        assert!(s.complete_lease(&f, now(at), "ok").unwrap());
        let o = s.overview(now(at)).unwrap();
        assert_eq!(o.expiring_soon, 1, "soon ends at +30 s; later at +61 s; gone has expired; finished is done");
        assert_eq!(o.totals.leased, 2);
        assert_eq!(o.expired_unclaimed(), 1);
        // at the boundary: a lease ending exactly 60 s from now is within the minute
        assert_eq!(s.overview(now(at + 1.0)).unwrap().expiring_soon, 2);
        assert_eq!(s.overview(now(at + 30.0)).unwrap().expiring_soon, 1, "soon has expired at its end");
    }
);

contract!(viewed
    fn the_oldest_ready_job_is_the_first_enqueued_that_is_ready(api, db, s) {
        let t0 = Now::system().seconds();
        s.enqueue_many(&[
            job("expired"),
            job("retrying"),
            job("held"),
            job("later").not_before(t0 + 3600.0).unwrap(),
            job("first-ready"),
            job("next-ready"),
        ])
        .unwrap();
        // Enqueued one second apart, in this order (one call gives them all one time).
        for (i, id) in ["expired", "retrying", "held", "later", "first-ready", "next-ready"].iter().enumerate() {
            db.exec(&format!("UPDATE jobs SET enqueued_at = {} WHERE id = '{id}'", t0 - 10.0 + i as f64));
        }
        // expired: its lease ran out (it names an owner); retrying: failed, its retry time
        // come (an error, no owner) — both claimable, neither ready
        s.claim(JobId::new("expired").unwrap(), owner("w"), now(t0 - 100.0), ttl(10.0)).unwrap().unwrap();
        let r = s.claim(JobId::new("retrying").unwrap(), owner("w"), Now::system(), ttl(60.0)).unwrap().unwrap();
        s.fail(&r, Now::system(), "boom", Some(now(t0 - 1.0))).unwrap().unwrap();
        s.claim(JobId::new("held").unwrap(), owner("w"), Now::system(), ttl(60.0)).unwrap().unwrap();
        let o = s.overview(Now::system()).unwrap();
        assert_eq!((o.totals.expired, o.totals.retrying, o.totals.ready), (1, 1, 2));
        let (id, at) = o.oldest_ready.clone().expect("a ready job");
        assert_eq!(id, "first-ready");
        assert_eq!(at, t0 - 10.0 + 4.0, "its enqueue time");
        let age = o.oldest_ready_age().unwrap();
        assert_eq!(age, o.now - at, "waited from its enqueue time to the overview's clock");
        assert!((6.0..66.0).contains(&age), "{age}");
        // a clock behind the enqueue time (another host's): waited nothing, never negative
        assert_eq!(s.overview(now(t0 - 100.0)).unwrap().oldest_ready_age(), Some(0.0));
        // nothing ready: none; the expired job claimed again is no longer expired
        s.claim_batch(owner("w"), Now::system(), ttl(60.0), leasefence::BatchSize::new(9).unwrap()).unwrap();
        let none = s.overview(Now::system()).unwrap();
        assert_eq!((none.oldest_ready.clone(), none.oldest_ready_age()), (None, None));
        assert_eq!((none.expired_unclaimed(), none.totals.expired), (0, 0));
    }
);

contract!(viewed
    fn a_ready_job_without_an_enqueue_time_counts_as_the_oldest(api, db, s) {
        // A row from before enqueue times were kept (or a hand-made table's) has none: it is
        // older than any job enqueued since, on every backend.
        s.enqueue_many(&[job("new")]).unwrap();
        db.put(&Row::fresh("ancient"));
        let o = s.overview(Now::system()).unwrap();
        assert_eq!(o.oldest_ready, Some(("ancient".to_string(), 0.0)));
    }
);

contract!(viewed
    fn refused_stale_writes_are_counted_in_total_and_in_the_last_hour(api, db, s) {
        s.enqueue_many(&[job("j")]).unwrap();
        let a = s.claim_next(owner("a"), now(0.0), ttl(1.0)).unwrap().unwrap();
        let b = s.claim_next(owner("b"), now(5.0), ttl(100.0)).unwrap().unwrap();
        assert!(!s.complete_lease(&a, now(6.0), "late").unwrap());
        assert!(!s.complete_lease(&a, now(6.0), "later").unwrap());
        let mut stale = a.clone();
        assert!(!s.renew_lease(&mut stale, now(6.0), ttl(5.0)).unwrap());
        assert!(s.complete_lease(&b, now(7.0), "fresh").unwrap());
        // the refusals are dated by the ledger's clock (the writing host's, or the database's)
        let o = s.overview(Now::system()).unwrap();
        assert_eq!((o.refused_total, o.refused_last_hour), (3, 3));
        assert_eq!(db.refusals("j").iter().map(|r| r.2).sum::<i64>(), 3);
        let later = s.overview(now(Now::system().seconds() + 2.0 * 3600.0)).unwrap();
        assert_eq!((later.refused_total, later.refused_last_hour), (3, 0));
    }
);

contract!(viewed
    fn throughput_counts_the_attempts_that_ended_each_minute(api, db, s) {
        s.enqueue_many(&[job("a"), job("b"), job("c"), job("d")]).unwrap();
        let (w, t) = (owner("w"), Now::system());
        for id in ["a", "b"] {
            let l = s.claim(JobId::new(id).unwrap(), w, t, ttl(60.0)).unwrap().unwrap();
            assert!(s.complete_lease(&l, t, "ok").unwrap());
        }
        let c = s.claim(JobId::new("c").unwrap(), w, t, ttl(60.0)).unwrap().unwrap();
        s.fail(&c, t, "boom", None).unwrap().unwrap();
        let d = s.claim(JobId::new("d").unwrap(), w, t, ttl(60.0)).unwrap().unwrap();
        assert!(s.release_lease(&d).unwrap());
        let o = s.overview(Now::system()).unwrap();
        assert_eq!(o.throughput.len(), leasefence::THROUGHPUT_MINUTES);
        let sum = |f: fn(&leasefence::Minute) -> u64| o.throughput.iter().map(f).sum::<u64>();
        assert_eq!((sum(|m| m.completed), sum(|m| m.failed), sum(|m| m.other)), (2, 1, 1));
        let starts: Vec<i64> = o.throughput.iter().map(|m| m.start).collect();
        assert!(starts.windows(2).all(|w| w[1] - w[0] == 60), "{starts:?}");
        assert_eq!(*starts.last().unwrap(), (o.now / 60.0).floor() as i64 * 60);
        // a quarter of an hour on, those minutes have left the window
        let later = s.overview(now(o.now + 15.0 * 60.0)).unwrap();
        assert_eq!(later.throughput.iter().map(|m| m.completed + m.failed + m.other).sum::<u64>(), 0);
        // The window's first instant is in it, the one before is not: a's attempt ended at
        // 600 (dated by hand), b's at 599.5; at 1470 the fifteen minutes start at 600.
        db.exec("UPDATE attempts SET ended_at = 600 WHERE job_id = 'a'");
        db.exec("UPDATE attempts SET ended_at = 599.5 WHERE job_id = 'b'");
        let then = s.overview(now(1470.0)).unwrap();
        assert_eq!(then.throughput[0].start, 600);
        assert_eq!(then.throughput[0].completed, 1);
        assert_eq!(then.throughput.iter().map(|m| m.completed + m.failed + m.other).sum::<u64>(), 1);
    }
);

contract!(viewed
    fn retry_dead_in_revives_only_the_queues_named(api, db, s) {
        s.enqueue_many(&[
            job("m").queue("mail").unwrap().max_attempts(1),
            job("r").queue("reports").unwrap().max_attempts(1),
            job("x").max_attempts(1),
        ])
        .unwrap();
        for id in ["m", "r", "x"] {
            let l = s.claim(JobId::new(id).unwrap(), owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
            s.fail(&l, now(1.0), "boom", None).unwrap().unwrap();
        }
        let only = |names: &[&str]| Queues::only(names.iter().copied()).unwrap();
        assert_eq!(s.retry_dead_in(&only(&["mail", "nowhere"]), now(2.0)).unwrap(), 1);
        let dead = |id: &str| db.queue_row(id).outcome.as_deref() == Some("dead");
        assert!(!dead("m") && dead("r") && dead("x"));
        assert_eq!(db.row("m").unwrap().done, 0);
        assert_eq!(s.retry_dead_in(&only(&["mail"]), now(3.0)).unwrap(), 0, "nothing dead left there");
        assert_eq!(s.retry_dead(now(3.0)).unwrap(), 2);
        assert!(!dead("r") && !dead("x"));
        // the fence goes on above every one handed out
        let again = s.claim(JobId::new("r").unwrap(), owner("v"), now(4.0), ttl(5.0)).unwrap().unwrap();
        assert_eq!(again.fence, 2);
    }
);

contract!(sqlite_only
    fn a_file_from_before_the_counts_gets_them_from_its_jobs(_api, db) {
        // A version-6 file (every migration before the counts) with jobs of every class.
        let s = open(db);
        s.enqueue_many(&[job("a"), job("b").queue("q").unwrap(), job("c")]).unwrap();
        let l = s.claim(JobId::new("c").unwrap(), owner("w"), now(0.0), ttl(5.0)).unwrap().unwrap();
        assert!(s.complete_lease(&l, now(1.0), "r").unwrap());
        drop(s);
        db.raw()
            .execute_batch(
                "DROP TABLE job_counts; DROP INDEX jobs_held; DROP INDEX jobs_retrying; \
                 DROP INDEX jobs_delayed; DROP INDEX jobs_open; DROP INDEX attempts_ended; \
                 DROP TABLE audit; PRAGMA user_version = 6;",
            )
            .unwrap();
        let before = db.rows();
        let s = open(db);
        assert_eq!(db.rows(), before, "no row changed");
        assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "7");
        let o = s.overview(now(2.0)).unwrap();
        assert_eq!((o.totals.ready, o.totals.done, o.totals.total()), (2, 1, 3));
        assert_eq!(o.queues.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(), ["default", "q"]);
        // and they are kept from then on
        s.enqueue_job(job("d")).unwrap();
        assert_eq!(s.stats(now(2.0)).unwrap().ready, 3);
    }
);

contract!(sqlite_only
    fn the_counts_migration_run_again_counts_nothing_twice(_api, db) {
        // The counts are filled from the jobs once, when empty: a file whose version was set
        // back by hand (so 0007 runs again over its counts) keeps counting each job once.
        let s = open(db);
        s.enqueue_many(&[job("a"), job("b").queue("q").unwrap()]).unwrap();
        let l = s.claim(JobId::new("a").unwrap(), owner("w"), now(0.0), ttl(5.0)).unwrap().unwrap();
        assert!(s.complete_lease(&l, now(1.0), "r").unwrap());
        drop(s);
        db.raw().execute_batch("PRAGMA user_version = 6;").unwrap();
        let s = open(db);
        assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "7");
        let o = s.overview(now(2.0)).unwrap();
        assert_eq!((o.totals.ready, o.totals.done, o.totals.total()), (1, 1, 2));
    }
);

/// The counts read only indexes of the jobs they count, never every job: each branch of
/// queues.sql as SQLite plans it (jobs_held and jobs_delayed alone, without a row).
#[test]
fn the_counts_read_partial_indexes_and_never_scan_the_table() {
    let db = Db::new();
    let sql: String = include_str!("../../src/sqlite/sql/queues.sql")
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("?1", "1000.0");
    let plan = sqlite3(&db.path, &format!("EXPLAIN QUERY PLAN {sql}"));
    for needed in [
        "SEARCH jobs USING COVERING INDEX jobs_held (until>?)",
        "SEARCH jobs USING COVERING INDEX jobs_held (until<?)",
        "SEARCH jobs USING INDEX jobs_last_attempt (until<?)",
        "SCAN jobs USING INDEX jobs_retrying",
        "SEARCH jobs USING COVERING INDEX jobs_delayed (not_before>?)",
    ] {
        assert!(plan.contains(needed), "{needed}:\n{plan}");
    }
    for line in plan.lines().filter(|l| l.contains(" jobs")) {
        assert!(
            line.contains("INDEX"),
            "a walk of every job: {line}\n{plan}"
        );
    }
}
