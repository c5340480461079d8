//! `cancel` of a job whose lease had expired unwritten: the attempt no longer held the job, so
//! the ledger ends it as `lost` (as a takeover, a bury or a retry would), not `cancelled`; a
//! lease still live at the cancel ends as `cancelled`. Read back through an independent
//! connection and through `Store::history`.

use crate::common::*;
use leasefence::{AttemptOutcome, JobId, NewJob, Status};

fn id(name: &str) -> JobId<'_> {
    JobId::new(name).unwrap()
}

contract!(viewed
    fn a_cancel_after_the_lease_expired_ends_the_attempt_as_lost(api, db, s) {
        for name in ["expired", "live", "edge"] {
            assert!(s.enqueue_job(NewJob::new(name).unwrap()).unwrap());
            let lease = s.claim(id(name), owner("w"), now(0.0), ttl(10.0)).unwrap();
            assert_eq!(lease.map(|l| l.fence), Some(1));
        }
        // Expired at 10 (a lease is live while until > now): 10 is already past it.
        assert!(s.cancel(id("expired"), now(25.0)).unwrap());
        assert!(s.cancel(id("edge"), now(10.0)).unwrap());
        assert!(s.cancel(id("live"), now(9.5)).unwrap());
        let ended = |name: &str| {
            let rows = db.attempts(name);
            assert!(rows.iter().all(|a| a.ended), "{rows:?}");
            rows.iter().map(|a| (a.fence, a.outcome.clone())).collect::<Vec<_>>()
        };
        assert_eq!(ended("expired"), [(1, Some("lost".to_owned()))]);
        assert_eq!(ended("edge"), [(1, Some("lost".to_owned()))]);
        assert_eq!(ended("live"), [(1, Some("cancelled".to_owned()))]);
        // The job is cancelled all the same, its fence kept.
        for name in ["expired", "edge", "live"] {
            let row = db.row(name).unwrap();
            assert_eq!((row.done, row.fence), (1, 1), "{name}");
            let info = s.inspect(id(name), now(30.0)).unwrap().unwrap();
            assert_eq!(info.status, Status::Cancelled, "{name}");
        }
        let history = s.history(id("expired")).unwrap().unwrap();
        let outcomes: Vec<_> = history.attempts.iter().map(|a| a.outcome).collect();
        assert_eq!(outcomes, [Some(AttemptOutcome::Lost)]);
        // A second cancel changes nothing, the ledger included.
        assert!(!s.cancel(id("live"), now(40.0)).unwrap());
        assert_eq!(ended("live"), [(1, Some("cancelled".to_owned()))]);
    }
);

contract!(viewed
    fn a_cancel_after_a_takeover_ends_only_the_live_attempt(api, db, s) {
        assert!(s.enqueue_job(NewJob::new("j").unwrap()).unwrap());
        assert!(s.claim(id("j"), owner("a"), now(0.0), ttl(10.0)).unwrap().is_some());
        // Taken over after the first lease expired: that attempt is lost at the claim.
        assert!(s.claim(id("j"), owner("b"), now(20.0), ttl(10.0)).unwrap().is_some());
        assert!(s.cancel(id("j"), now(25.0)).unwrap());
        let rows: Vec<_> = db.attempts("j");
        let rows: Vec<_> = rows.iter().map(|a| a.brief()).collect();
        assert_eq!(rows, [(1, "a", Some("lost")), (2, "b", Some("cancelled"))]);
    }
);
