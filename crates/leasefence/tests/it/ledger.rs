//! The attempt ledger: a row per claim (per fence) with how it ended, and the refused writes
//! counted per fence, written in the same transaction as the job's change, read back here
//! through an independent connection and through `Store::history`.

use crate::common::*;
use leasefence::{AttemptOutcome, Failed, History, JobId, Store, WriteOp};

fn id(name: &str) -> JobId<'_> {
    JobId::new(name).unwrap()
}

/// `Store::history` of `name`, checked against the ledger as the independent connection reads
/// it (the same attempts, outcomes, errors and refusal counts).
fn history(db: &dyn Probe, s: &dyn Store, name: &str) -> History {
    let history = s
        .history(id(name))
        .unwrap()
        .expect("a known job has a history");
    let stored: Vec<_> = db
        .attempts(name)
        .into_iter()
        .map(|a| (a.fence, a.owner, a.outcome, a.error))
        .collect();
    let read: Vec<_> = history
        .attempts
        .iter()
        .map(|a| {
            (
                a.fence,
                a.owner.clone(),
                a.outcome.map(|o| o.as_str().to_owned()),
                a.error.clone(),
            )
        })
        .collect();
    assert_eq!(read, stored);
    let refusals: Vec<_> = history
        .refusals
        .iter()
        .map(|r| (r.fence, r.op.as_str().to_owned(), r.count as i64))
        .collect();
    assert_eq!(refusals, db.refusals(name));
    history
}

contract!(
    fn records_each_claim_with_its_owner_fence_and_times(api, db, s) {
        s.enqueue_many(&[job("j")]).unwrap();
        let lease = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        let open = db.attempts("j");
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].brief(), (1, "w", None));
        assert!(open[0].claimed && !open[0].ended);
        assert!(s.complete_lease(&lease, now(1.0), "ok").unwrap());
        let done = db.attempts("j");
        assert_eq!(done[0].brief(), (1, "w", Some("completed")));
        assert!(done[0].claimed && done[0].ended);
        let h = history(db, s, "j");
        let a = &h.attempts[0];
        // The store's clock: Unix seconds, not the caller's `now`.
        assert!(a.claimed_at.unwrap() > 1.0e9 && a.ended_at.unwrap() >= a.claimed_at.unwrap());
        assert_eq!((h.count(AttemptOutcome::Completed), h.open(), h.refused()), (1, 0, 0));
    }
);

contract!(
    fn a_lease_taken_over_after_expiry_is_lost_and_its_late_writes_are_counted(api, db, s) {
        s.enqueue_many(&[job("j")]).unwrap();
        let stale = s.claim_next(owner("a"), now(0.0), ttl(10.0)).unwrap().unwrap();
        let fresh = s.claim_next(owner("b"), now(20.0), ttl(10.0)).unwrap().unwrap();
        let briefs: Vec<_> = db.attempts("j").iter().map(|a| a.brief()).collect::<Vec<_>>()
            .into_iter().map(|(f, o, x)| (f, o.to_owned(), x.map(str::to_owned))).collect();
        assert_eq!(briefs, [(1, "a".into(), Some("lost".into())), (2, "b".into(), None)]);
        // Every fenced write of the stale holder is refused, and counted under its fence.
        let mut renewing = stale.clone();
        assert!(!s.renew_lease(&mut renewing, now(21.0), ttl(10.0)).unwrap());
        assert!(!s.complete_lease(&stale, now(21.0), "late").unwrap());
        assert!(!s.complete_lease(&stale, now(22.0), "later").unwrap());
        assert_eq!(s.fail(&stale, now(22.0), "late", None).unwrap(), None);
        assert!(!s.release_lease(&stale).unwrap());
        assert_eq!(
            db.refusals("j"),
            [
                (1, "complete".into(), 2),
                (1, "fail".into(), 1),
                (1, "release".into(), 1),
                (1, "renew".into(), 1)
            ]
        );
        // The refusals changed nothing else: the fresh lease stores its result.
        assert!(s.complete_lease(&fresh, now(23.0), "fresh").unwrap());
        assert_eq!(db.row("j").unwrap().result.as_deref(), Some("fresh"));
        let h = history(db, s, "j");
        assert_eq!(
            h.attempts.iter().map(|a| (a.fence, a.outcome)).collect::<Vec<_>>(),
            [(1, Some(AttemptOutcome::Lost)), (2, Some(AttemptOutcome::Completed))]
        );
        assert_eq!((h.refused(), h.refused_under(1), h.refused_under(2)), (5, 5, 0));
        assert_eq!(h.refusals[0].op, WriteOp::Complete);
        // A refused write of the current holder after its job finished counts under its fence.
        assert!(!s.complete_lease(&fresh, now(24.0), "again").unwrap());
        assert_eq!(history(db, s, "j").refused_under(2), 1);
    }
);

contract!(
    fn failures_time_outs_and_releases_each_end_their_attempt(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(5)]).unwrap();
        let claim = |t: f64| api_claim(s, "j", t);
        let first = claim(0.0);
        assert!(matches!(
            s.fail(&first, now(1.0), "boom", Some(now(1.0))).unwrap(),
            Some(Failed::Retrying { .. })
        ));
        let second = claim(2.0);
        let timed_out = "timed out after 3 s (the worker's time limit)";
        assert!(s.fail(&second, now(3.0), timed_out, Some(now(3.0))).unwrap().is_some());
        let third = claim(4.0);
        assert!(s.release_lease(&third).unwrap());
        let fourth = claim(5.0);
        assert!(s.complete_lease(&fourth, now(6.0), "ok").unwrap());
        let rows = db.attempts("j");
        let got: Vec<_> = rows
            .iter()
            .map(|a| (a.fence, a.outcome.as_deref(), a.error.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (1, Some("failed"), Some("boom")),
                (2, Some("timed out"), Some(timed_out)),
                (3, Some("released"), None),
                (4, Some("completed"), None),
            ]
        );
        assert!(rows.iter().all(|a| a.ended));
        let h = history(db, s, "j");
        assert_eq!(h.count(AttemptOutcome::TimedOut), 1);
        assert_eq!(h.count(AttemptOutcome::Released), 1);
        assert_eq!(h.count(AttemptOutcome::Lost), 0, "no attempt of the four was lost");
        assert_eq!(h.count(AttemptOutcome::Cancelled), 0);
    }
);

contract!(
    fn a_last_failure_ends_as_failed_and_the_job_is_dead(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(1)]).unwrap();
        let lease = api_claim(s, "j", 0.0);
        assert_eq!(s.fail(&lease, now(1.0), "broken", None).unwrap(), Some(Failed::Dead));
        let rows = db.attempts("j");
        assert_eq!(rows[0].brief(), (1, "w", Some("failed")));
        assert_eq!(rows[0].error.as_deref(), Some("broken"));
    }
);

contract!(
    fn cancel_ends_the_held_attempt_as_cancelled(api, db, s) {
        s.enqueue_many(&[job("j"), job("idle")]).unwrap();
        let lease = api_claim(s, "j", 0.0);
        assert!(s.cancel(id("j"), now(1.0)).unwrap());
        assert!(s.cancel(id("idle"), now(1.0)).unwrap());
        assert_eq!(db.attempts("j")[0].brief(), (1, "w", Some("cancelled")));
        // A job cancelled before any claim has no attempt.
        assert_eq!(db.attempts("idle"), []);
        assert!(!s.complete_lease(&lease, now(2.0), "late").unwrap());
        assert_eq!(db.refusals("j"), [(1, "complete".into(), 1)]);
        history(db, s, "j");
    }
);

contract!(
    fn an_expired_last_attempt_ends_as_lost_when_it_is_buried(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(1), job("other")]).unwrap();
        let _lost = api_claim(s, "j", 0.0);
        assert_eq!(db.attempts("j")[0].outcome, None);
        // The next claim (of another job) finds j's last lease expired and buries it.
        let other = s.claim_next(owner("v"), now(20.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(other.job_id, "other");
        assert_eq!(db.queue_row("j").outcome.as_deref(), Some("dead"));
        assert_eq!(db.attempts("j")[0].brief(), (1, "w", Some("lost")));
        history(db, s, "j");
    }
);

contract!(
    fn retry_keeps_the_ledger_and_ends_an_expired_last_attempt_as_lost(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(1), job("k").max_attempts(1)]).unwrap();
        let _expired = api_claim(s, "j", 0.0);
        // j's only lease expired unwritten and nothing buried it yet: retry finds it open.
        assert_eq!(s.retry(&[id("j")], now(20.0)).unwrap(), [true]);
        assert_eq!(db.attempts("j")[0].brief(), (1, "w", Some("lost")));
        let again = api_claim(s, "j", 21.0);
        assert_eq!(again.fence, 2);
        assert!(s.complete_lease(&again, now(22.0), "ok").unwrap());
        let fences: Vec<_> = db.attempts("j").iter().map(|a| a.brief().2.map(str::to_owned))
            .collect();
        assert_eq!(fences, [Some("lost".to_owned()), Some("completed".to_owned())]);
        // retry_dead does the same for every dead job.
        let _expired = api_claim(s, "k", 30.0);
        assert_eq!(s.retry_dead(now(50.0)).unwrap(), 1);
        assert_eq!(db.attempts("k")[0].brief(), (1, "w", Some("lost")));
        history(db, s, "j");
        history(db, s, "k");
    }
);

contract!(
    fn a_release_of_a_last_attempt_is_a_release_not_a_loss(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(1)]).unwrap();
        let lease = api_claim(s, "j", 0.0);
        assert!(s.release_lease(&lease).unwrap());
        assert_eq!(db.attempts("j")[0].brief(), (1, "w", Some("released")));
        // The refunded attempt runs again under the next fence.
        let again = api_claim(s, "j", 1.0);
        assert_eq!(again.fence, 2);
        assert_eq!(db.attempts("j")[1].brief(), (2, "w", None));
    }
);

contract!(
    fn delete_and_purge_remove_the_ledger_with_the_job(api, db, s) {
        s.enqueue_many(&[job("d"), job("p")]).unwrap();
        let d = api_claim(s, "d", 0.0);
        let p = api_claim(s, "p", 0.0);
        assert!(!s.complete_lease(&d, now(50.0), "late").unwrap());
        assert!(s.complete_lease(&p, now(1.0), "ok").unwrap());
        assert!(!s.complete_lease(&p, now(2.0), "twice").unwrap());
        assert_eq!((db.attempts("d").len(), db.refusals("d").len()), (1, 1));
        assert_eq!(s.delete(&[id("d")]).unwrap(), [true]);
        assert_eq!(s.purge(now(100.0)).unwrap(), 1);
        for gone in ["d", "p"] {
            assert_eq!(db.attempts(gone), []);
            assert_eq!(db.refusals(gone), []);
            assert_eq!(s.history(id(gone)).unwrap(), None);
        }
        // Enqueued again, the id's ledger starts over above its fence floor.
        s.enqueue_many(&[job("d")]).unwrap();
        let again = api_claim(s, "d", 200.0);
        assert_eq!(again.fence, 2);
        assert_eq!(db.attempts("d").iter().map(|a| a.fence).collect::<Vec<_>>(), [2]);
    }
);

contract!(
    fn batch_refusals_are_counted_per_job_and_fence(api, db, s) {
        s.enqueue_many(&[job("a"), job("b")]).unwrap();
        let leases = s.claim_batch(owner("w"), now(0.0), ttl(10.0), bs(2)).unwrap();
        assert_eq!(leases.len(), 2);
        let (a, b) = (&leases[0], &leases[1]);
        // a's lease is renewed in time; b's expires and is taken over.
        let mut renewing = a.clone();
        assert!(s.renew_lease(&mut renewing, now(9.0), ttl(10.0)).unwrap());
        let taken = api_claim(s, &b.job_id, 11.0);
        assert_eq!(
            s.renew_batch(&[&renewing, b], now(12.0), ttl(10.0)).unwrap(),
            [true, false]
        );
        assert_eq!(
            s.complete_batch(&[(&renewing, "a"), (b, "stale")], now(13.0)).unwrap(),
            [true, false]
        );
        assert_eq!(
            db.refusals(&b.job_id),
            [(1, "complete".into(), 1), (1, "renew".into(), 1)]
        );
        assert_eq!(db.refusals(&a.job_id), []);
        assert_eq!(db.attempts(&a.job_id)[0].outcome.as_deref(), Some("completed"));
        assert!(s.complete_lease(&taken, now(14.0), "b").unwrap());
        history(db, s, &b.job_id);
    }
);

contract!(
    fn an_unknown_job_has_no_history_and_its_refusals_are_not_kept(api, db, s) {
        assert_eq!(s.history(id("ghost")).unwrap(), None);
        let ghost = lease_of("ghost", "w", 1, 10.0);
        assert!(!s.complete_lease(&ghost, now(0.0), "x").unwrap());
        assert_eq!(db.refusals("ghost"), []);
        assert_eq!(s.history(id("ghost")).unwrap(), None);
        // A job never claimed has an empty history.
        s.enqueue_many(&[job("fresh")]).unwrap();
        assert_eq!(history(db, s, "fresh"), History::default());
    }
);

contract!(
    fn a_fence_never_issued_is_counted_too(api, db, s) {
        s.enqueue_many(&[job("j")]).unwrap();
        let held = api_claim(s, "j", 0.0);
        let forged = lease_of("j", "w", 99, 10.0);
        assert!(!s.complete_lease(&forged, now(1.0), "forged").unwrap());
        assert_eq!(db.refusals("j"), [(99, "complete".into(), 1)]);
        let h = history(db, s, "j");
        assert_eq!((h.refused_under(99), h.refused_under(held.fence)), (1, 0));
        assert_eq!(h.attempts.len(), 1);
    }
);

contract!(
    fn a_batch_stored_whole_records_no_refusal(api, db, s) {
        s.enqueue_many(&[job("a"), job("b")]).unwrap();
        let a = api_claim(s, "a", 0.0);
        let b = api_claim(s, "b", 0.0);
        assert_eq!(
            s.complete_batch(&[(&a, "x"), (&b, "y")], now(1.0)).unwrap(),
            [true, true]
        );
        assert_eq!(db.refusals("a"), Vec::<(i64, String, i64)>::new());
        assert_eq!(db.refusals("b"), Vec::<(i64, String, i64)>::new());
        let h = history(db, s, "a");
        assert_eq!((h.attempts.len(), h.refusals.len()), (1, 0));
    }
);

/// Claims `name` by id for `w` at `t` (ttl 10) and returns the lease.
fn api_claim(s: &dyn Store, name: &str, t: f64) -> leasefence::Lease {
    s.claim(id(name), owner("w"), now(t), ttl(10.0))
        .unwrap()
        .unwrap_or_else(|| panic!("{name} is claimable at {t}"))
}

contract!(
    fn a_batch_that_repeats_a_lease_counts_each_refused_repeat(api, db, s) {
        s.enqueue_many(&[job("j"), job("k")]).unwrap();
        let j = api_claim(s, "j", 0.0);
        let k = api_claim(s, "k", 0.0);
        // Judged one after another: the first stores, the repeat finds the job done.
        assert_eq!(
            s.complete_batch(&[(&j, "a"), (&j, "b")], now(1.0)).unwrap(),
            [true, false]
        );
        assert_eq!(db.refusals("j"), [(1, "complete".into(), 1)]);
        // A stale lease passed three times is refused three times.
        let stale = lease_of("k", "w", 0, 10.0);
        assert_eq!(
            s.renew_batch(&[&stale, &k, &stale, &stale], now(1.0), ttl(10.0)).unwrap(),
            [false, true, false, false]
        );
        assert_eq!(db.refusals("k"), [(0, "renew".into(), 3)]);
        history(db, s, "j");
        history(db, s, "k");
    }
);

/// The names the ledger stores, the CLI shows and `parse` reads back are what `Display` prints.
#[test]
fn outcomes_and_writes_display_as_their_stored_names() {
    let outcomes: Vec<String> = AttemptOutcome::ALL.iter().map(|o| o.to_string()).collect();
    assert_eq!(
        outcomes,
        [
            "completed",
            "failed",
            "timed out",
            "released",
            "lost",
            "cancelled"
        ]
    );
    for outcome in AttemptOutcome::ALL {
        assert_eq!(
            AttemptOutcome::parse(&outcome.to_string()).unwrap(),
            outcome
        );
    }
    let writes: Vec<String> = WriteOp::ALL.iter().map(|w| format!("{w}")).collect();
    assert_eq!(writes, ["renew", "complete", "fail", "release", "schedule"]);
    for write in WriteOp::ALL {
        assert_eq!(WriteOp::parse(&write.to_string()).unwrap(), write);
    }
}
