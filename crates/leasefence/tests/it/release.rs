//! Step 7 — only the current worker releases, and the fence is kept.

use crate::common::*;

contract!(
    fn clears_owner_and_until_and_keeps_the_fence(api, db) {
        api.enqueue("job").unwrap();
        let f = api.claim("job", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.release("job", "w", f).unwrap());
        assert_eq!(db.row("job").unwrap(), Row { fence: f, ..Row::fresh("job") });
        // immediately claimable again, under a new fence: token numbers are never reused
        assert_eq!(api.claim("job", "v", 1.0, 10.0).unwrap(), Some(f + 1));
        assert_eq!(db.row("job").unwrap().fence, f + 1);
    }
);

contract!(
    fn keeps_a_high_fence(api, db) {
        db.leased("job", "w", 9, 10.0);
        assert!(api.release("job", "w", 9).unwrap());
        assert_eq!(db.row("job").unwrap(), Row { fence: 9, ..Row::fresh("job") });
        assert_eq!(api.claim("job", "w", 0.0, 1.0).unwrap(), Some(10));
    }
);

contract!(
    fn the_released_fence_is_stale_afterwards(api, db) {
        db.leased("job", "w", 3, 10.0);
        assert!(api.release("job", "w", 3).unwrap());
        let released = db.row("job").unwrap();
        assert!(!api.release("job", "w", 3).unwrap());
        assert!(!api.renew("job", "w", 3, 1.0, 5.0).unwrap());
        assert!(!api.complete("job", "w", 3, 1.0, "x").unwrap());
        assert_eq!(db.row("job").unwrap(), released);
    }
);

contract!(
    fn an_expired_but_untaken_lease_may_still_be_released_by_its_holder(api, db) {
        db.leased("job", "w", 2, 10.0);
        assert!(api.release("job", "w", 2).unwrap());
        assert_eq!(db.row("job").unwrap(), Row { fence: 2, ..Row::fresh("job") });
    }
);

contract!(
    fn refuses_another_owner_or_fence(api, db) {
        let row = db.leased("job", "w", 2, 10.0);
        assert!(!api.release("job", "x", 2).unwrap());
        for fence in [0, 1, 3, i64::MIN] {
            assert!(!api.release("job", "w", fence).unwrap(), "fence={fence}");
        }
        assert_eq!(db.row("job").unwrap(), row);
    }
);

contract!(
    fn refuses_a_done_job(api, db) {
        let done = Row {
            owner: Some("w".into()),
            until: 10.0,
            fence: 2,
            result: Some("r".into()),
            done: 1,
            ..Row::fresh("job")
        };
        db.put(&done);
        assert!(!api.release("job", "w", 2).unwrap());
        assert_eq!(db.row("job").unwrap(), done);
    }
);

contract!(
    fn refuses_an_unknown_or_never_claimed_job(api, db) {
        assert!(!api.release("ghost", "w", 0).unwrap());
        assert_eq!(db.rows(), vec![]);
        api.enqueue("job").unwrap();
        // owner is NULL: no owner name matches it
        assert!(!api.release("job", "w", 0).unwrap());
        assert_eq!(db.rows(), vec![Row::fresh("job")]);
    }
);

contract!(
    fn bad_arguments_are_errors_and_change_nothing(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        assert_invalid(api.release("job", "", 1), "owner");
        assert_invalid(api.release("", "w", 1), "job_id");
        assert_eq!(db.rows(), vec![row]);
    }
);

contract!(
    /// A lease given back is not a spent attempt: a single-attempt job released once (a
    /// graceful shutdown) is claimed again as attempt 1, under a higher fence.
    fn refunds_the_attempt_keeping_the_fence_raised(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(1)]).unwrap();
        let first = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((first.fence, first.attempt), (1, 1));
        assert_eq!(db.queue_row("j").attempts, 1);
        assert!(s.release_lease(&first).unwrap());
        let row = db.row("j").unwrap();
        assert_eq!((row.owner, row.until, row.fence, row.done), (None, 0.0, 1, 0));
        assert_eq!(db.queue_row("j").attempts, 0, "the attempt is refunded");
        assert_eq!(s.stats(now(1.0)).unwrap().ready, 1, "ready, not dead");
        let second = s.claim_next(owner("v"), now(1.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((second.fence, second.attempt), (2, 1), "the fence is never reused");
        // A refused release refunds nothing.
        assert!(!s.release_lease(&first).unwrap());
        assert_eq!(db.queue_row("j").attempts, 1);
        // The seed's release (by id, owner and fence) refunds too.
        assert!(api.release("j", "v", 2).unwrap());
        assert_eq!(db.queue_row("j").attempts, 0);
    }
);
