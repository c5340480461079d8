//! Boundaries both backends must judge alike, found by an outside review: a ttl too small to
//! move a lease's end past now (and a now too large for any ttl to), a queue named twice in one claim, a lease whose owner holds a
//! NUL byte, a list cursor no job can have, and the unique key of a job whose last lease
//! expired. Each case runs on every backend and reads the stored state back.

use crate::common::*;
use leasefence::{Enqueued, JobId, Queue, Queues, Status};

contract!(
    viewed fn a_ttl_that_does_not_move_the_end_past_now_is_refused(api, db, s) {
        // 1e-9 at 1.7e9 rounds back to now: such a lease would never be live, yet would spend
        // the job's only attempt and a fence.
        s.enqueue_many(&[job("a").max_attempts(1), job("b")]).unwrap();
        let t = 1_700_000_000.0;
        let err = s.claim(JobId::new("a").unwrap(), owner("w"), now(t), ttl(1e-9)).unwrap_err();
        assert_eq!(err.argument(), Some("ttl"), "{err}");
        assert!(err.to_string().contains("rounds to now"), "{err}");
        let err = s.claim_next(owner("w"), now(t), ttl(1e-9)).unwrap_err();
        assert_eq!(err.argument(), Some("ttl"), "{err}");
        for id in ["a", "b"] {
            let row = db.row(id).unwrap();
            assert_eq!((row.fence, row.owner), (0, None), "{id}: nothing spent");
        }
        // A renewal so small is refused the same way, and leaves the lease as it was.
        let mut lease = s.claim_next(owner("w"), now(t), ttl(30.0)).unwrap().unwrap();
        let err = s.renew_lease(&mut lease, now(t + 1.0), ttl(1e-9)).unwrap_err();
        assert_eq!(err.argument(), Some("ttl"), "{err}");
        assert_eq!(db.row(&lease.job_id).unwrap().until, t + 30.0);
    }
);

contract!(
    viewed fn a_clock_reading_too_large_to_count_seconds_is_named_not_the_ttl(api, db, s) {
        // At 2^63 s a float's step is 2048 s: a 10 s lease would end at now. The reading is
        // what is wrong, and the error names it; nothing is spent.
        s.enqueue_many(&[job("a")]).unwrap();
        let huge = 9.223_372_036_854_776e18;
        let err = s.claim(JobId::new("a").unwrap(), owner("w"), now(huge), ttl(10.0)).unwrap_err();
        assert_eq!(err.argument(), Some("now"), "{err}");
        let err = s.claim_next(owner("w"), now(huge), ttl(10.0)).unwrap_err();
        assert_eq!(err.argument(), Some("now"), "{err}");
        let row = db.row("a").unwrap();
        assert_eq!((row.fence, row.owner), (0, None), "nothing spent");
    }
);

contract!(
    viewed fn a_batch_from_a_queue_named_twice_takes_every_ready_job(api, db, s) {
        // `Queues::Only` is public: a list may repeat a name, and it must mean the queue once.
        s.enqueue_many(&[job("a").queue("q").unwrap(), job("b").queue("q").unwrap()]).unwrap();
        let q = Queue::new("q").unwrap();
        let twice = Queues::Only(vec![q.clone(), q]);
        let got = s.claim_batch_in(&twice, owner("w"), now(0.0), ttl(10.0), bs(2)).unwrap();
        assert_eq!(ids(&got), ["a", "b"]);
        assert_eq!(db.row("b").unwrap().fence, 1, "b was claimed");
    }
);

contract!(
    viewed fn a_lease_whose_owner_holds_a_nul_byte_changes_nothing(api, db, s) {
        // No stored lease can have such an owner: a refusal or an invalid `owner`, never a
        // server error, and the real lease untouched.
        s.enqueue_many(&[job("a")]).unwrap();
        let real = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        let mut other = real.clone();
        other.owner = "w\0x".into();
        match s.fail(&other, now(1.0), "e", None) {
            Ok(None) => {}
            Err(e) if e.argument() == Some("owner") => {}
            r => panic!("neither a refusal nor an invalid `owner`: {r:?}"),
        }
        match s.complete_lease(&other, now(1.0), "r") {
            Ok(false) => {}
            Err(e) if e.argument() == Some("owner") => {}
            r => panic!("neither a refusal nor an invalid `owner`: {r:?}"),
        }
        let row = db.row("a").unwrap();
        assert_eq!((row.owner.as_deref(), row.fence, row.done), (Some("w"), 1, 0));
    }
);

contract!(
    viewed fn a_list_cursor_no_job_can_have_is_an_invalid_after(api, db, s) {
        // The cursor is the call's `after`, whichever check refuses it.
        s.enqueue_many(&[job("a")]).unwrap();
        let err = s.list(now(0.0), None, Some(JobId::new("a\0b").unwrap()), 10).unwrap_err();
        assert_eq!(err.argument(), Some("after"), "{err}");
        let long = "x".repeat(5000);
        let err = s.list(now(0.0), None, Some(JobId::new(&long).unwrap()), 10).unwrap_err();
        assert_eq!(err.argument(), Some("after"), "{err}");
    }
);

contract!(
    viewed fn a_job_whose_last_lease_expired_holds_its_key_until_a_claim_buries_it(api, db, s) {
        // As NewJob::unique_key says: reported dead at once, finished as dead by the next
        // claim (the enqueue takes no clock to judge the lease by), and then the key is free.
        let keyed = |id: &str| job(id).unique_key("k").unwrap();
        s.enqueue_jobs(&[keyed("a").max_attempts(1)]).unwrap();
        s.claim(JobId::new("a").unwrap(), owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        let a = JobId::new("a").unwrap();
        assert_eq!(s.inspect(a, now(20.0)).unwrap().unwrap().status, Status::Dead);
        assert_eq!(
            s.enqueue_jobs(&[keyed("b")]).unwrap(),
            [Enqueued::Duplicate { of: "a".into() }]
        );
        assert!(s.claim_next(owner("w"), now(20.0), ttl(10.0)).unwrap().is_none());
        assert_eq!(db.row("a").unwrap().done, 1, "buried by the claim");
        assert_eq!(s.enqueue_jobs(&[keyed("b")]).unwrap(), [Enqueued::Inserted]);
    }
);
