//! Step 5 — only the current owner and fence renew, and only a live lease.

use crate::common::*;

contract!(
    fn extends_a_live_lease_to_now_plus_ttl(api, db) {
        api.enqueue("job").unwrap();
        let f = api.claim("job", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.renew("job", "w", f, 5.0, 10.0).unwrap());
        let row = db.row("job").unwrap();
        assert_eq!((row.owner.as_deref(), row.until, row.fence, row.done), (Some("w"), 15.0, f, 0));
        // renewed leases keep others out past the original end
        assert_eq!(api.claim("job", "other", 12.0, 10.0).unwrap(), None);
    }
);

contract!(
    fn sets_until_to_now_plus_ttl_even_when_shorter(api, db) {
        db.leased("job", "w", 1, 100.0);
        assert!(api.renew("job", "w", 1, 10.0, 5.0).unwrap());
        assert_eq!(db.row("job").unwrap().until, 15.0);
    }
);

contract!(
    fn a_renewal_inside_the_lease_reaching_past_it_succeeds(api, db) {
        // until=10, now=5, ttl=10: the new end (15) lies beyond the stored one. Comparing the
        // stored until with now + ttl instead of with now would refuse this.
        db.leased("job", "w", 1, 10.0);
        assert!(api.renew("job", "w", 1, 5.0, 10.0).unwrap());
        assert_eq!(db.row("job").unwrap().until, 15.0);
        // just before expiry, with a short ttl
        assert!(api.renew("job", "w", 1, 14.999, 0.5).unwrap());
        assert_eq!(db.row("job").unwrap().until, 14.999 + 0.5);
    }
);

contract!(
    fn now_equal_to_until_is_expired_and_refused(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        assert!(!api.renew("job", "w", 1, 10.0, 10.0).unwrap());
        assert_eq!(db.row("job").unwrap(), row);
    }
);

contract!(
    fn never_revives_an_expired_lease_even_if_nobody_took_it(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        for now in [10.0, 10.001, 11.0, 1e9] {
            assert!(!api.renew("job", "w", 1, now, 100.0).unwrap(), "now={now}");
            assert_eq!(db.row("job").unwrap(), row);
        }
        // and because it stayed expired, another worker can claim it
        assert_eq!(api.claim("job", "v", 11.0, 5.0).unwrap(), Some(2));
    }
);

contract!(
    fn refuses_another_owner(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        assert!(!api.renew("job", "intruder", 1, 5.0, 10.0).unwrap());
        assert!(!api.renew("job", "W", 1, 5.0, 10.0).unwrap());
        assert_eq!(db.row("job").unwrap(), row);
    }
);

contract!(
    fn refuses_a_stale_or_future_fence(api, db) {
        let row = db.leased("job", "w", 5, 10.0);
        for fence in [0, 4, 6, -5, i64::MAX, i64::MIN] {
            assert!(!api.renew("job", "w", fence, 5.0, 10.0).unwrap(), "fence={fence}");
            assert_eq!(db.row("job").unwrap(), row);
        }
    }
);

contract!(
    fn refuses_a_done_job(api, db) {
        let row = Row {
            owner: Some("w".into()),
            until: 100.0,
            fence: 1,
            result: Some("r".into()),
            done: 1,
            ..Row::fresh("job")
        };
        db.put(&row);
        assert!(!api.renew("job", "w", 1, 5.0, 10.0).unwrap());
        assert_eq!(db.row("job").unwrap(), row);
    }
);

contract!(
    fn refuses_an_unknown_or_released_job(api, db) {
        assert!(!api.renew("ghost", "w", 1, 0.0, 10.0).unwrap());
        assert_eq!(db.rows(), vec![]);
        api.enqueue("job").unwrap();
        let f = api.claim("job", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.release("job", "w", f).unwrap());
        let released = db.row("job").unwrap();
        assert!(!api.renew("job", "w", f, 1.0, 10.0).unwrap());
        assert_eq!(db.row("job").unwrap(), released);
    }
);

contract!(
    fn bad_arguments_are_errors_and_change_nothing(api, db) {
        let row = db.leased("job", "w", 1, 10.0);
        for ttl in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            assert_invalid(api.renew("job", "w", 1, 5.0, ttl), "ttl");
        }
        assert_invalid(api.renew("job", "w", 1, f64::NAN, 1.0), "now");
        assert_invalid(api.renew("job", "w", 1, f64::NEG_INFINITY, 1.0), "now");
        assert_invalid(api.renew("job", "", 1, 5.0, 1.0), "owner");
        assert_invalid(api.renew("", "w", 1, 5.0, 1.0), "job_id");
        assert_eq!(db.rows(), vec![row]);
    }
);
