//! `purge`: deletes jobs finished before a cutoff and keeps a fence floor, so a purged id
//! enqueued again never reuses a fence.

use crate::common::*;
use leasefence::{Enqueued, Failed, JobId, NewJob, Store};

contract!(
    fn deletes_only_jobs_finished_before_the_cutoff(api, db, s) {
        s.enqueue_many(&[
            job("early"),
            job("at-cutoff"),
            job("late"),
            job("running"),
            job("queued"),
        ])
        .unwrap();
        for (id, t) in [("early", 1.0), ("at-cutoff", 5.0), ("late", 9.0)] {
            let f = api.claim(id, "w", t - 0.5, 10.0)
                .unwrap()
                .unwrap();
            assert!(api.complete(id, "w", f, t, "r").unwrap());
        }
        api.claim("running", "w", 0.0, 100.0)
            .unwrap()
            .unwrap();
        assert_eq!(s.purge(now(5.0)).unwrap(), 1);
        let left: Vec<String> = db.rows().into_iter().map(|r| r.id).collect();
        assert_eq!(left, ["at-cutoff", "late", "queued", "running"]);
        assert_eq!(s.purge(now(5.0)).unwrap(), 0);
        assert_eq!(s.purge(now(1000.0)).unwrap(), 2);
        let left: Vec<String> = db.rows().into_iter().map(|r| r.id).collect();
        assert_eq!(left, ["queued", "running"]);
    }
);

contract!(
    fn a_purged_id_enqueued_again_never_reuses_a_fence(api, db, s) {
        api.enqueue("j").unwrap();
        for t in 0..3 {
            let f = api.claim("j", "w", t as f64, 10.0)
                .unwrap()
                .unwrap();
            assert!(api.release("j", "w", f).unwrap());
        }
        let f = api.claim("j", "w", 5.0, 10.0).unwrap().unwrap();
        assert_eq!(f, 4);
        assert!(api.complete("j", "w", f, 6.0, "first life").unwrap());
        assert_eq!(s.purge(now(7.0)).unwrap(), 1);
        assert_eq!(api.state("j").unwrap(), None);

        // second life: starts from the floor, through the seed API and through enqueue_many
        assert!(api.enqueue("j").unwrap());
        assert_eq!(api.state("j").unwrap().unwrap().fence, 4);
        assert_eq!(api.claim("j", "v", 8.0, 10.0).unwrap(), Some(5));
        assert!(s.cancel(JobId::new("j").unwrap(), now(9.0)).unwrap());
        assert_eq!(s.purge(now(10.0)).unwrap(), 1);
        assert_eq!(s.enqueue_many(&[job("j")]).unwrap(), [true]);
        let third = s
            .claim_next(owner("u"), now(11.0), ttl(1.0))
            .unwrap()
            .unwrap();
        assert_eq!(third.fence, 6);
        // the first life's fences stay stale
        assert!(!api.complete("j", "w", 4, 11.5, "zombie").unwrap());
        assert!(api.complete("j", "u", 6, 11.5, "third life").unwrap());
    }
);

contract!(
    fn the_fence_floor_never_goes_down(api, db, s) {
        api.enqueue("j").unwrap();
        for t in 0..2 {
            let f = api.claim("j", "w", t as f64, 10.0).unwrap().unwrap();
            assert!(api.release("j", "w", f).unwrap());
        }
        let f = api.claim("j", "w", 2.0, 10.0).unwrap().unwrap();
        assert!(api.complete("j", "w", f, 3.0, "first life").unwrap());
        assert_eq!(s.purge(now(4.0)).unwrap(), 1);
        assert_eq!(db.fence_floor("j"), Some(3));

        // A row for the same id written behind the library's back (by hand in a SQL
        // shell, say) and finished under a lower fence: purging it keeps the higher floor.
        db.put(&Row {
            owner: Some("shell".into()),
            until: 5.0,
            fence: 1,
            result: Some("by hand".into()),
            done: 1,
            ..Row::fresh("j")
        });
        db.exec("UPDATE jobs SET finished_at = 5.0 WHERE id = 'j'");
        assert_eq!(s.purge(now(6.0)).unwrap(), 1);
        assert_eq!(db.fence_floor("j"), Some(3));
        assert_eq!(db.rows(), vec![]);

        // Enqueued again, the id continues above every fence the library handed out for it.
        assert_eq!(s.enqueue_many(&[job("j")]).unwrap(), [true]);
        assert_eq!(
            db.row("j").unwrap(),
            Row {
                fence: 3,
                ..Row::fresh("j")
            }
        );
        let lease = s
            .claim_next(owner("v"), now(7.0), ttl(1.0))
            .unwrap()
            .unwrap();
        assert_eq!(lease.fence, 4);
    }
);

contract!(
    fn dead_jobs_are_purged_too(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(1)]).unwrap();
        let l = s
            .claim_next(owner("w"), now(0.0), ttl(5.0))
            .unwrap()
            .unwrap();
        assert_eq!(s.fail(&l, now(1.0), "e", None).unwrap(), Some(Failed::Dead));
        assert_eq!(s.purge(now(2.0)).unwrap(), 1);
        assert_eq!(db.rows(), vec![]);
    }
);

/// A job of `digest:ada`'s key, held for an hour from its enqueue.
fn windowed(id: &str) -> NewJob {
    job(id)
        .unique_key("digest:ada")
        .unwrap()
        .unique_for(3600.0)
        .unwrap()
}

contract!(
    /// `unique_for` holds the key while a job with it was enqueued less than the window ago,
    /// finished or not: a routine purge keeps such a finished job (and so the key held) until
    /// its window has passed, then purges it and the key is free.
    fn a_finished_job_is_kept_while_its_unique_window_holds_its_key(api, db, s) {
        s.enqueue_many(&[job("plain")]).unwrap();
        assert_eq!(s.enqueue_jobs(&[windowed("d1")]).unwrap(), [Enqueued::Inserted]);
        for _ in 0..2 {
            let l = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
            assert!(s.complete_lease(&l, now(1.0), "sent").unwrap());
        }
        assert_eq!(s.purge(now(2.0)).unwrap(), 1, "only the job without a window");
        assert!(db.row("plain").is_none());
        assert_eq!(db.row("d1").map(|r| r.done), Some(1), "kept: its window holds");
        assert_eq!(
            s.enqueue_jobs(&[windowed("d2")]).unwrap(),
            [Enqueued::Duplicate { of: "d1".into() }],
            "the key is still held after the purge"
        );
        // Two hours later (its enqueue moved back): the window has passed.
        db.exec("UPDATE jobs SET enqueued_at = enqueued_at - 7200 WHERE id = 'd1'");
        assert_eq!(s.purge(now(2.0)).unwrap(), 1);
        assert!(db.row("d1").is_none());
        assert_eq!(s.enqueue_jobs(&[windowed("d3")]).unwrap(), [Enqueued::Inserted]);
    }
);

/// The other side of the race `enqueue_many::on_postgresql_waits_for_a_purge_…` closes: while
/// an enqueue of `j` holds the id's advisory lock (in an open transaction), a purge of the
/// finished `j` must wait for it before deleting, and then purge it and keep its fence floor.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_waits_for_an_enqueue_of_the_same_id_before_deleting() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    s.enqueue_many(&[job("j")]).unwrap();
    let fence = claim_by_name(&s, "j", "w", 0.0, 10.0).unwrap().unwrap();
    assert!(
        s.complete(JobId::new("j").unwrap(), owner("w"), fence, now(1.0), "r")
            .unwrap()
    );
    // An enqueue's own first step, by hand, with the key PgStore::lock_ids takes for the id.
    let (holder, commit) = db.hold_with_pid(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('leasefence.ids.{}'), hashtext('j') & 255);",
        db.schema
    ));
    let purged = std::thread::scope(|scope| {
        let purge = scope.spawn(|| s.purge(now(2.0)).unwrap());
        db.await_blocked_by(holder);
        let waiting = db.query_strings(&format!(
            "SELECT wait_event FROM pg_stat_activity WHERE {holder} = ANY(pg_blocking_pids(pid))"
        ));
        assert_eq!(
            waiting,
            ["advisory"],
            "the purge must wait for the id's lock"
        );
        assert_eq!(
            db.row("j").unwrap().fence,
            fence,
            "deleted before the lock was free"
        );
        commit();
        purge.join().unwrap()
    });
    assert_eq!(purged, 1);
    assert_eq!(db.row("j"), None);
    assert_eq!(db.fence_floor("j"), Some(fence));
}
