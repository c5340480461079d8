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
