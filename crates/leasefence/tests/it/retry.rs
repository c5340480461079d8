//! `retry` / `retry_dead`: the operator makes dead or cancelled jobs ready again with a fresh
//! attempts budget; the fence continues upward, so an old lease stays worthless.

use crate::common::*;
use leasefence::{Failed, JobId, Stats, Status, Store};

fn job_ids<'a>(names: &[&'a str]) -> Vec<JobId<'a>> {
    names.iter().map(|n| JobId::new(n).unwrap()).collect()
}

/// A job with one attempt, claimed and failed: dead.
fn dead(s: &dyn Store, id: &str) {
    s.enqueue_many(&[job(id).max_attempts(1)]).unwrap();
    let lease = s
        .claim_batch(owner("w"), now(0.0), ttl(10.0), bs(100))
        .unwrap()
        .into_iter()
        .find(|l| l.job_id == id)
        .unwrap();
    assert_eq!(
        s.fail(&lease, now(1.0), "broken", None).unwrap(),
        Some(Failed::Dead)
    );
}

contract!(
    fn makes_a_dead_job_ready_again_with_a_fresh_budget_and_the_fence_continuing(api, db, s) {
        dead(s, "j");
        assert_eq!(s.retry(&job_ids(&["j"]), now(5.0)).unwrap(), [true]);
        let row = db.row("j").unwrap();
        assert_eq!((row.owner, row.until, row.fence, row.done, row.result), (None, 0.0, 1, 0, None));
        let q = db.queue_row("j");
        assert_eq!(
            (q.attempts, q.error, q.outcome, q.finished_at),
            (0, None, None, None),
            "a fresh budget; the error cleared"
        );
        assert!(q.not_before <= 5.0, "due at once: {}", q.not_before);
        assert_eq!(s.stats(now(5.0)).unwrap(), Stats { ready: 1, ..Stats::default() });
        let again = s.claim_next(owner("v"), now(6.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((again.fence, again.attempt), (2, 1));
        // Retrying a job that is no longer dead does nothing.
        assert_eq!(s.retry(&job_ids(&["j"]), now(7.0)).unwrap(), [false]);
    }
);

contract!(
    fn a_cancelled_job_is_retried_and_its_old_holder_stores_nothing(api, db, s) {
        s.enqueue_many(&[job("j")]).unwrap();
        let held = s.claim_next(owner("a"), now(0.0), ttl(100.0)).unwrap().unwrap();
        assert!(s.cancel(JobId::new("j").unwrap(), now(1.0)).unwrap());
        assert_eq!(s.retry(&job_ids(&["j"]), now(2.0)).unwrap(), [true]);
        // The old lease was live until 100, yet it can store nothing after the retry.
        assert!(!s.complete_lease(&held, now(3.0), "stale").unwrap());
        assert!(!api.renew("j", "a", held.fence, 3.0, 10.0).unwrap());
        let next = s.claim_next(owner("b"), now(3.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(next.fence, held.fence + 1);
        assert!(s.complete_lease(&next, now(4.0), "fresh").unwrap());
        assert_eq!(db.row("j").unwrap().result.as_deref(), Some("fresh"));
    }
);

contract!(
    fn completed_waiting_running_and_unknown_jobs_are_left_alone(api, db, s) {
        s.enqueue_many(&[job("done"), job("waiting"), job("running")]).unwrap();
        let f = api.claim("done", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.complete("done", "w", f, 1.0, "r").unwrap());
        api.claim("running", "w", 0.0, 10.0).unwrap().unwrap();
        let before = db.rows();
        assert_eq!(
            s.retry(&job_ids(&["done", "waiting", "running", "ghost"]), now(2.0)).unwrap(),
            [false, false, false, false]
        );
        assert_eq!(db.rows(), before);
        assert_eq!(db.queue_row("done").outcome.as_deref(), Some("completed"));
    }
);

contract!(
    /// A job whose budget is spent and whose last lease ran out (its worker crashed) counts as
    /// dead before any claim buried it: retried too. An id given twice is retried once.
    fn a_spent_job_not_yet_buried_is_retried_and_a_repeated_id_once(api, db, s) {
        s.enqueue_many(&[job("crashed").max_attempts(1)]).unwrap();
        s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(db.row("crashed").unwrap().done, 0);
        assert_eq!(s.retry(&job_ids(&["crashed"]), now(5.0)).unwrap(), [false], "still leased");
        assert_eq!(s.retry(&job_ids(&["crashed", "crashed"]), now(10.0)).unwrap(), [true, true]);
        assert_eq!(db.queue_row("crashed").attempts, 0);
        let lease = s.claim_next(owner("v"), now(11.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((lease.fence, lease.attempt), (2, 1));
    }
);

contract!(
    fn retry_dead_retries_every_dead_job_but_not_the_cancelled(api, db, s) {
        dead(s, "a");
        dead(s, "b");
        s.enqueue_many(&[job("cancelled"), job("fine")]).unwrap();
        assert!(s.cancel(JobId::new("cancelled").unwrap(), now(1.0)).unwrap());
        assert_eq!(s.stats(now(2.0)).unwrap().dead, 2);
        assert_eq!(s.retry_dead(now(2.0)).unwrap(), 2);
        let statuses: Vec<(String, Status)> = s
            .list(now(2.0), None, None, 10)
            .unwrap()
            .into_iter()
            .map(|j| (j.state.id, j.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("a".to_owned(), Status::Ready),
                ("b".to_owned(), Status::Ready),
                ("cancelled".to_owned(), Status::Cancelled),
                ("fine".to_owned(), Status::Ready),
            ]
        );
        assert_eq!(s.retry_dead(now(3.0)).unwrap(), 0);
    }
);
