//! `fail`: a fenced failure records the error and schedules the retry (or, after the last
//! attempt, kills the job for good); refused for a stale owner or fence, changing nothing.

use crate::common::*;
use std::collections::BTreeSet;

use leasefence::{Backoff, Failed, Lease, Stats, Store};

fn claimed(s: &dyn Store, id: &str, max_attempts: u32, at: f64) -> Lease {
    s.enqueue_many(&[job(id).max_attempts(max_attempts)])
        .unwrap();
    s.claim_next(owner("w"), now(at), ttl(10.0))
        .unwrap()
        .unwrap()
}

contract!(
    fn records_the_error_and_schedules_the_retry_keeping_the_fence(api, db, s) {
        let lease = claimed(s, "j", 0, 0.0);
        assert_eq!(
            s.fail(&lease, now(2.0), "boom", Some(now(30.0))).unwrap(),
            Some(Failed::Retrying { at: 30.0 })
        );
        assert_eq!(
            db.row("j").unwrap(),
            Row {
                fence: 1,
                ..Row::fresh("j")
            }
        );
        let q = db.queue_row("j");
        assert_eq!(
            (q.error.as_deref(), q.not_before, q.outcome),
            (Some("boom"), 30.0, None)
        );
        assert_eq!(s.stats(now(2.0)).unwrap().retrying, 1);
        // not before the retry time; then as the next attempt, with the last error
        assert_eq!(
            s.claim_next(owner("v"), now(29.9), ttl(10.0)).unwrap(),
            None
        );
        let retry = s
            .claim_next(owner("v"), now(30.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert_eq!(
            (retry.fence, retry.last_error.as_deref()),
            (2, Some("boom"))
        );
        // the failed attempt's fence is stale now
        assert!(!s.complete_lease(&lease, now(31.0), "late").unwrap());
        assert_eq!(s.fail(&lease, now(31.0), "late", None).unwrap(), None);
    }
);

contract!(
    fn after_the_last_attempt_the_job_is_dead_for_good(api, db, s) {
        let first = claimed(s, "j", 2, 0.0);
        assert!(matches!(
            s.fail(&first, now(1.0), "e1", Some(now(1.0))).unwrap(),
            Some(Failed::Retrying { .. })
        ));
        let second = s
            .claim_next(owner("w"), now(1.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert_eq!(
            s.fail(&second, now(2.0), "e2", Some(now(2.0))).unwrap(),
            Some(Failed::Dead)
        );
        let row = db.row("j").unwrap();
        assert_eq!((row.done, row.fence, row.result), (1, 2, None));
        let q = db.queue_row("j");
        assert_eq!(
            (q.outcome.as_deref(), q.finished_at, q.error.as_deref()),
            (Some("dead"), Some(2.0), Some("e2"))
        );
        assert_eq!(
            s.claim_next(owner("w"), now(100.0), ttl(10.0)).unwrap(),
            None
        );
        assert_eq!(
            api.claim("j", "w", 100.0, 1.0).unwrap(),
            None
        );
        assert_eq!(
            s.stats(now(100.0)).unwrap(),
            Stats {
                dead: 1,
                ..Stats::default()
            }
        );
    }
);

contract!(
    fn is_fenced_like_complete(api, db, s) {
        let lease = claimed(s, "j", 0, 0.0);
        let before = db.rows();
        let stale = |l: &Lease| s.fail(l, now(5.0), "x", Some(now(6.0))).unwrap();
        assert_eq!(
            stale(&Lease {
                fence: 2,
                ..lease.clone()
            }),
            None
        );
        assert_eq!(
            stale(&Lease {
                fence: 0,
                ..lease.clone()
            }),
            None
        );
        assert_eq!(
            stale(&Lease {
                owner: "other".into(),
                ..lease.clone()
            }),
            None
        );
        assert_eq!(
            stale(&Lease {
                queue: leasefence::DEFAULT_QUEUE.to_owned(),
                kind: None,
                job_id: "ghost".into(),
                ..lease.clone()
            }),
            None
        );
        // expired: now == until
        assert_eq!(
            s.fail(&lease, now(10.0), "x", Some(now(11.0))).unwrap(),
            None
        );
        assert_eq!(db.rows(), before);
        assert_eq!(db.queue_row("j").error, None);
        // done
        assert!(s.complete_lease(&lease, now(5.0), "ok").unwrap());
        let done = db.rows();
        assert_eq!(s.fail(&lease, now(6.0), "x", None).unwrap(), None);
        assert_eq!(db.rows(), done);
    }
);

contract!(
    fn the_default_retry_time_backs_off_exponentially_with_jitter(api, db, s) {
        let mut lease = claimed(s, "j", 0, 0.0);
        let mut t = 0.0;
        for attempt in 1..=5 {
            assert_eq!(lease.fence, attempt);
            let Some(Failed::Retrying { at }) = s.fail(&lease, now(t), "e", None).unwrap() else {
                panic!("not retried")
            };
            let base = Backoff::default().base * 2f64.powi(attempt as i32 - 1);
            assert!(
                at >= t + 0.8 * base && at <= t + 1.2 * base,
                "attempt {attempt}: {at}"
            );
            assert_eq!(db.queue_row("j").not_before, at);
            t = at;
            lease = s
                .claim_next(owner("w"), now(t), ttl(10.0))
                .unwrap()
                .unwrap();
        }
        let d: BTreeSet<u64> = (0..50)
            .map(|i| Backoff::default().delay(&format!("job{i}"), 3).to_bits())
            .collect();
        assert!(d.len() > 40, "jitter spreads jobs apart");
    }
);

/// The jitter factor is derived from the job id and fence: reproducible for one lease,
/// spread across jobs, and within `[1 - jitter, 1 + jitter]` of the capped delay.
#[test]
fn the_jitter_is_reproducible_per_lease_and_within_its_bounds() {
    use std::hash::{Hash, Hasher};
    // where in [0, 1) the hash of (job id, fence) falls
    fn unit(job_id: &str, fence: i64) -> f64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (job_id, fence).hash(&mut hasher);
        (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
    }
    let b = Backoff {
        base: 10.0,
        factor: 2.0,
        max: 1000.0,
        jitter: 0.5,
    };
    let (mut low, mut high) = (0, 0);
    for i in 0..200 {
        let id = format!("job{i}");
        for fence in 1..=3 {
            let capped = 10.0 * 2f64.powi(fence as i32 - 1);
            let d = b.delay(&id, fence);
            assert!(
                d >= 0.5 * capped && d < 1.5 * capped,
                "{id}@{fence}: {d} for {capped}"
            );
            let expected = capped * (1.0 + 0.5 * (2.0 * unit(&id, fence) - 1.0));
            assert!(
                (d - expected).abs() < 1e-9,
                "{id}@{fence}: {d} != {expected}"
            );
            assert_eq!(b.delay(&id, fence), d, "reproducible");
            if d < capped {
                low += 1;
            } else {
                high += 1;
            }
        }
    }
    assert!(
        low > 200 && high > 200,
        "spread both ways: {low} below, {high} above"
    );
    // and retry_at is the failure time plus that delay
    let lease = Lease {
        queue: leasefence::DEFAULT_QUEUE.to_owned(),
        kind: None,
        job_id: "job7".into(),
        owner: "w".into(),
        fence: 2,
        until: 0.0,
        payload: None,
        priority: 0,
        max_attempts: 0,
        last_error: None,
        attempt: 2,
    };
    assert_eq!(
        b.retry_at(&lease, now(100.0)).seconds(),
        100.0 + b.delay("job7", 2)
    );
}

contract!(
    /// A single-attempt job interrupted (released) and then failed is dead *and finished*:
    /// done, outcome dead, the error kept, counted as dead, and purge removes it.
    fn an_interrupted_single_attempt_job_runs_again_and_its_failure_finishes_it(api, db, s) {
        let first = claimed(s, "j", 1, 0.0);
        assert!(s.release_lease(&first).unwrap());
        let second = s.claim_next(owner("w"), now(1.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((second.fence, second.attempt), (2, 1));
        assert!(second.is_last_attempt());
        assert_eq!(s.fail(&second, now(2.0), "broken", None).unwrap(), Some(Failed::Dead));
        let row = db.row("j").unwrap();
        assert_eq!((row.done, row.fence), (1, 2));
        let q = db.queue_row("j");
        assert_eq!(
            (q.outcome.as_deref(), q.error.as_deref(), q.finished_at, q.attempts),
            (Some("dead"), Some("broken"), Some(2.0), 1)
        );
        assert_eq!(s.stats(now(3.0)).unwrap(), Stats { dead: 1, ..Stats::default() });
        assert_eq!(s.purge(now(3.0)).unwrap(), 1);
        assert_eq!(db.rows(), vec![]);
    }
);

contract!(
    /// A job whose last attempt's lease ran out (its worker crashed) is finished as dead by
    /// the next claim: done, finished at its lease end, so purge removes it.
    fn an_expired_last_attempt_is_buried_by_the_next_claim(api, db, s) {
        let lease = claimed(s, "j", 1, 0.0);
        assert_eq!(lease.until, 10.0);
        // Still live at 9: not buried.
        assert_eq!(s.claim_next(owner("v"), now(9.0), ttl(10.0)).unwrap(), None);
        assert_eq!(db.row("j").unwrap().done, 0);
        assert_eq!(s.claim_next(owner("v"), now(10.0), ttl(10.0)).unwrap(), None);
        let row = db.row("j").unwrap();
        assert_eq!((row.done, row.fence, row.owner.as_deref()), (1, 1, Some("w")));
        let q = db.queue_row("j");
        assert_eq!(
            (q.outcome.as_deref(), q.finished_at, q.error.as_deref()),
            (Some("dead"), Some(10.0), Some("the lease of the last attempt expired"))
        );
        // The late holder stores nothing.
        assert!(!s.complete_lease(&lease, now(11.0), "late").unwrap());
        assert_eq!(s.purge(now(10.5)).unwrap(), 1);
    }
);
