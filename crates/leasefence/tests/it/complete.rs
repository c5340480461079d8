//! Step 6 — only the current lease completes; a stale completion leaves the result alone.

use crate::common::*;

contract!(
    fn stores_the_result_and_marks_done_under_the_current_lease(api, db) {
        api.enqueue("job").unwrap();
        let f = api.claim("job", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.complete("job", "w", f, 9.5, "42").unwrap());
        assert_eq!(
            db.row("job").unwrap(),
            Row {
                owner: Some("w".into()),
                until: 10.0,
                fence: f,
                result: Some("42".into()),
                done: 1,
                ..Row::fresh("job")
            }
        );
        let s = api.state("job").unwrap().unwrap();
        assert!(s.done);
        assert_eq!(s.result.as_deref(), Some("42"));
    }
);

contract!(
    fn stores_empty_and_large_results_verbatim(api, db) {
        db.leased("empty", "w", 1, 10.0);
        assert!(api.complete("empty", "w", 1, 0.0, "").unwrap());
        assert_eq!(db.row("empty").unwrap().result.as_deref(), Some(""));
        let big = "é".repeat(300_000);
        db.leased("big", "w", 1, 10.0);
        assert!(api.complete("big", "w", 1, 0.0, &big).unwrap());
        assert_eq!(db.row("big").unwrap().result.as_deref(), Some(big.as_str()));
    }
);

contract!(
    fn now_equal_to_until_is_expired_and_refused(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        assert!(!api.complete("job", "w", 1, 10.0, "late").unwrap());
        assert_eq!(db.row("job").unwrap(), row);
        // a hair earlier is still inside the lease
        assert!(api.complete("job", "w", 1, 9.999_999, "in time").unwrap());
    }
);

contract!(
    fn a_finished_job_is_never_completed_again(api, db) {
        api.enqueue("job").unwrap();
        let f = api.claim("job", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.complete("job", "w", f, 1.0, "first").unwrap());
        let done = db.row("job").unwrap();
        // same owner, same fence, lease still live: refused all the same
        assert!(!api.complete("job", "w", f, 2.0, "second").unwrap());
        assert_eq!(db.row("job").unwrap(), done);
        assert_eq!(done.result.as_deref(), Some("first"));
    }
);

contract!(
    fn refuses_an_expired_lease(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        for now in [10.5, 1000.0] {
            assert!(!api.complete("job", "w", 1, now, "late").unwrap());
            assert_eq!(db.row("job").unwrap(), row);
        }
    }
);

contract!(
    fn refuses_another_owner_or_fence_and_keeps_the_earlier_result(api, db) {
        // B finished under fence 2; A (fence 1) and a forger (fence 2, other name) come late.
        let done = Row {
            owner: Some("B".into()),
            until: 100.0,
            fence: 2,
            result: Some("B's".into()),
            done: 1,
            ..Row::fresh("job")
        };
        db.put(&done);
        assert!(!api.complete("job", "A", 1, 50.0, "A's").unwrap());
        assert!(!api.complete("job", "forger", 2, 50.0, "forged").unwrap());
        assert_eq!(db.row("job").unwrap(), done);

        // On a live, unfinished lease: wrong owner, wrong fence, both refused.
        let live = db.leased("live", "B", 2, 100.0);
        assert!(!api.complete("live", "A", 2, 50.0, "x").unwrap());
        assert!(!api.complete("live", "B", 1, 50.0, "x").unwrap());
        assert!(!api.complete("live", "B", 3, 50.0, "x").unwrap());
        assert_eq!(db.row("live").unwrap(), live);
    }
);

contract!(
    fn refuses_an_unknown_or_released_job(api, db) {
        assert!(!api.complete("ghost", "w", 1, 0.0, "x").unwrap());
        assert_eq!(db.rows(), vec![]);
        api.enqueue("job").unwrap();
        let f = api.claim("job", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.release("job", "w", f).unwrap());
        assert!(!api.complete("job", "w", f, 1.0, "x").unwrap());
        assert_eq!(db.row("job").unwrap().result, None);
        assert_eq!(db.row("job").unwrap().done, 0);
    }
);

contract!(
    fn bad_arguments_are_errors_and_change_nothing(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        assert_invalid(api.complete("job", "w", 1, f64::NAN, "r"), "now");
        assert_invalid(api.complete("job", "w", 1, f64::INFINITY, "r"), "now");
        assert_invalid(api.complete("job", "", 1, 5.0, "r"), "owner");
        assert_invalid(api.complete("", "w", 1, 5.0, "r"), "job_id");
        assert_eq!(db.rows(), vec![row]);
    }
);
