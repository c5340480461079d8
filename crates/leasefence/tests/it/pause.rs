//! `pause` and `resume`: a paused queue hands out nothing through `claim_next` and
//! `claim_batch`, while the leases already held in it stay valid.

use crate::common::*;
use leasefence::{JobId, Queue, Queues};

fn q(name: &str) -> Queue {
    Queue::new(name).unwrap()
}

contract!(
    fn a_paused_queue_hands_out_nothing_and_its_held_leases_stay_valid(api, db, s) {
        s.enqueue_many(&[
            job("a1").queue("a").unwrap().priority(10),
            job("a2").queue("a").unwrap().priority(10),
            job("b1").queue("b").unwrap(),
        ])
        .unwrap();
        let held = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(held.job_id, "a1");
        assert!(s.pause(&q("a")).unwrap());
        assert_eq!(db.paused("a"), Some(true));
        // Pausing again changes nothing.
        assert!(!s.pause(&q("a")).unwrap());
        // a2 outranks b1, but its queue is paused.
        let next = s.claim_next(owner("w"), now(1.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(next.job_id, "b1");
        let before = db.rows();
        assert_eq!(s.claim_next(owner("w"), now(1.0), ttl(10.0)).unwrap(), None);
        let only_a = Queues::only(["a"]).unwrap();
        assert_eq!(
            s.claim_batch_in(&only_a, owner("w"), now(1.0), ttl(10.0), bs(5)).unwrap(),
            []
        );
        assert_eq!(s.claim_next_in(&only_a, owner("w"), now(1.0), ttl(10.0)).unwrap(), None);
        // Nor does a batch from every queue.
        assert_eq!(s.claim_batch(owner("w"), now(1.0), ttl(10.0), bs(5)).unwrap(), []);
        assert_eq!(db.rows(), before);
        // The lease held in the paused queue is renewed and completed as before.
        let mut lease = held.clone();
        assert!(s.renew_lease(&mut lease, now(2.0), ttl(10.0)).unwrap());
        assert!(s.complete_lease(&lease, now(3.0), "done while paused").unwrap());
        assert_eq!(db.row("a1").unwrap().result.as_deref(), Some("done while paused"));
        // Resumed: a2 is handed out again.
        assert!(s.resume(&q("a")).unwrap());
        assert!(!s.resume(&q("a")).unwrap());
        assert_eq!(db.paused("a"), Some(false));
        let a2 = s.claim_next_in(&only_a, owner("w"), now(4.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((a2.job_id.as_str(), a2.queue.as_str(), a2.fence), ("a2", "a", 1));
    }
);

contract!(
    fn a_queue_can_be_paused_before_it_has_jobs(api, db, s) {
        assert!(!s.resume(&q("later")).unwrap());
        assert_eq!(db.paused("later"), None);
        assert!(s.pause(&q("later")).unwrap());
        s.enqueue_many(&[job("l1").queue("later").unwrap()]).unwrap();
        assert_eq!(s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap(), None);
        assert_eq!(db.row("l1").unwrap().fence, 0);
    }
);

contract!(
    fn a_claim_by_id_is_not_stopped_by_a_pause(api, db, s) {
        s.enqueue_many(&[job("p").queue("paused").unwrap()]).unwrap();
        assert!(s.pause(&q("paused")).unwrap());
        assert_eq!(api.claim("p", "w", 0.0, 10.0).unwrap(), Some(1));
        assert_eq!(db.row("p").unwrap().owner.as_deref(), Some("w"));
    }
);

contract!(
    fn pausing_one_queue_leaves_the_others_and_cancel_alone(api, db, s) {
        s.enqueue_many(&[job("x").queue("x").unwrap(), job("y").queue("y").unwrap()])
            .unwrap();
        assert!(s.pause(&q("x")).unwrap());
        assert_eq!(db.paused("y"), None);
        // An operator can still cancel a job of a paused queue.
        assert!(s.cancel(JobId::new("x").unwrap(), now(0.0)).unwrap());
        let lease = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(lease.job_id, "y");
    }
);
