//! A job's status (`sql/status.sql`), as `list` and `stats` report it: the most final fact
//! decides, and the boundaries follow the contract (`now == until` has expired).

use crate::common::*;
use leasefence::{Failed, JobId, Lease, Stats, Status, Store};

/// One job in every status at t=10.
pub fn zoo(api: &dyn Api, s: &dyn Store) {
    s.enqueue_many(&[
        job("ready"),
        job("scheduled").not_before(20.0).unwrap(),
        job("leased"),
        job("expired"),
        job("retrying"),
        job("done"),
        job("dead").max_attempts(1),
        job("cancelled"),
        job("exhausted").max_attempts(1),
    ])
    .unwrap();
    api.claim("leased", "w", 9.0, 5.0).unwrap().unwrap();
    api.claim("expired", "w", 0.0, 5.0).unwrap().unwrap();
    api.claim("exhausted", "w", 0.0, 5.0).unwrap().unwrap();
    let f = api.claim("done", "w", 0.0, 5.0).unwrap().unwrap();
    assert!(api.complete("done", "w", f, 1.0, "r").unwrap());
    for id in ["retrying", "dead"] {
        let fence = api.claim(id, "w", 0.0, 5.0).unwrap().unwrap();
        let lease = Lease {
            queue: leasefence::DEFAULT_QUEUE.to_owned(),
            kind: None,
            job_id: id.into(),
            owner: "w".into(),
            fence,
            until: 5.0,
            payload: None,
            priority: 0,
            max_attempts: 0,
            last_error: None,
            attempt: 1,
        };
        s.fail(&lease, now(1.0), "e", Some(now(30.0)))
            .unwrap()
            .unwrap();
    }
    assert!(
        s.cancel(JobId::new("cancelled").unwrap(), now(1.0))
            .unwrap()
    );
}

fn statuses(s: &dyn Store, at: f64) -> Vec<(String, Status)> {
    s.list(now(at), None, None, 100)
        .unwrap()
        .into_iter()
        .map(|j| (j.state.id, j.status))
        .collect()
}

fn named(pairs: &[(&str, Status)]) -> Vec<(String, Status)> {
    pairs.iter().map(|(id, st)| (id.to_string(), *st)).collect()
}

contract!(
    fn the_most_final_fact_decides_a_status(api, db, s) {
        s.enqueue_many(&[
            job("done"),
            job("cancelled"),
            job("last-attempt").max_attempts(1),
            job("failed-then-expired"),
        ])
        .unwrap();
        // Finished while their leases would still run until 100: done and cancelled, not
        // leased.
        let f = api.claim("done", "w", 0.0, 100.0).unwrap().unwrap();
        assert!(api.complete("done", "w", f, 1.0, "r").unwrap());
        api.claim("cancelled", "w", 0.0, 100.0).unwrap().unwrap();
        assert!(
            s.cancel(JobId::new("cancelled").unwrap(), now(1.0))
                .unwrap()
        );
        // Its last attempt, still running: leased, not dead (yet).
        api.claim("last-attempt", "w", 0.0, 100.0).unwrap().unwrap();
        // Failed once, claimed again, and that lease ran out: expired (claimable at once),
        // not retrying.
        let fence = api
            .claim("failed-then-expired", "w", 0.0, 5.0)
            .unwrap()
            .unwrap();
        let first = Lease {
            queue: leasefence::DEFAULT_QUEUE.to_owned(),
            kind: None,
            job_id: "failed-then-expired".into(),
            owner: "w".into(),
            fence,
            until: 5.0,
            payload: None,
            priority: 0,
            max_attempts: 0,
            last_error: None,
            attempt: 1,
        };
        assert_eq!(
            s.fail(&first, now(1.0), "e", Some(now(2.0))).unwrap(),
            Some(Failed::Retrying { at: 2.0 })
        );
        api.claim("failed-then-expired", "w", 2.0, 3.0)
            .unwrap()
            .unwrap();

        assert_eq!(
            statuses(s, 10.0),
            named(&[
                ("done", Status::Done),
                ("cancelled", Status::Cancelled),
                ("last-attempt", Status::Leased),
                ("failed-then-expired", Status::Expired),
            ])
        );
        assert_eq!(
            s.stats(now(10.0)).unwrap(),
            Stats {
                done: 1,
                cancelled: 1,
                leased: 1,
                expired: 1,
                ..Stats::default()
            }
        );
        // Once the last attempt's lease has run out, it is dead.
        assert_eq!(s.stats(now(100.0)).unwrap().dead, 1);
    }
);

contract!(
    fn at_now_equal_to_until_a_lease_has_expired_and_at_not_before_a_job_is_ready(api, db, s) {
        s.enqueue_many(&[job("due").not_before(10.0).unwrap(), job("ending")])
            .unwrap();
        api.claim("ending", "w", 5.0, 5.0).unwrap().unwrap();
        assert_eq!(
            statuses(s, 9.5),
            named(&[("due", Status::Scheduled), ("ending", Status::Leased)])
        );
        assert_eq!(
            statuses(s, 10.0),
            named(&[("due", Status::Ready), ("ending", Status::Expired)])
        );
        assert_eq!(
            s.stats(now(10.0)).unwrap(),
            Stats {
                ready: 1,
                expired: 1,
                ..Stats::default()
            }
        );
        // and claim_next agrees: both are claimable at 10
        assert_eq!(
            s.claim_batch(owner("v"), now(10.0), ttl(1.0), bs(10))
                .unwrap()
                .len(),
            2
        );
    }
);

#[test]
fn status_names_round_trip() {
    for status in Status::ALL {
        assert_eq!(Status::parse(status.as_str()).unwrap(), status);
        assert_eq!(status.to_string(), status.as_str());
    }
    assert_invalid(Status::parse("finished"), "status");
}
