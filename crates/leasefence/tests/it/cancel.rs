//! `cancel`: stops an unfinished job, after which its holder is refused.

use crate::common::*;
use leasefence::JobId;

contract!(
    fn stops_an_unfinished_job_and_refuses_its_holder_afterwards(api, db, s) {
        s.enqueue_many(&[job("j"), job("queued")]).unwrap();
        let lease = s
            .claim_next(owner("w"), now(0.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert!(s.cancel(JobId::new("j").unwrap(), now(1.0)).unwrap());
        assert!(s.cancel(JobId::new("queued").unwrap(), now(1.0)).unwrap());
        let row = db.row("j").unwrap();
        assert_eq!((row.done, row.fence, row.result), (1, 1, None));
        assert_eq!(db.queue_row("j").outcome.as_deref(), Some("cancelled"));
        let cancelled = db.rows();
        let mut l = lease.clone();
        assert!(!s.renew_lease(&mut l, now(2.0), ttl(10.0)).unwrap());
        assert!(!s.complete_lease(&lease, now(2.0), "late").unwrap());
        assert_eq!(s.fail(&lease, now(2.0), "late", None).unwrap(), None);
        assert!(!s.release_lease(&lease).unwrap());
        assert_eq!(
            s.claim_next(owner("v"), now(20.0), ttl(10.0)).unwrap(),
            None
        );
        assert_eq!(db.rows(), cancelled);
        assert_eq!(s.stats(now(20.0)).unwrap().cancelled, 2);
    }
);

contract!(
    fn leaves_a_finished_job_and_its_result_alone(api, db, s) {
        s.enqueue_many(&[job("j")]).unwrap();
        let lease = s
            .claim_next(owner("w"), now(0.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert!(s.complete_lease(&lease, now(1.0), "ok").unwrap());
        let done = db.rows();
        assert!(!s.cancel(JobId::new("j").unwrap(), now(2.0)).unwrap());
        assert!(!s.cancel(JobId::new("ghost").unwrap(), now(2.0)).unwrap());
        assert_eq!(db.rows(), done);
        assert_eq!(db.queue_row("j").outcome.as_deref(), Some("completed"));
    }
);
