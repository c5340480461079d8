//! Step 4 — `claim` takes only expired leases, atomically, and increments the fence.

use crate::common::*;

contract!(
    fn a_fresh_job_gets_fence_1_and_the_lease_is_stored(api, db) {
        api.enqueue("job").unwrap();
        assert_eq!(api.claim("job", "w", 100.0, 30.0).unwrap(), Some(1));
        assert_eq!(
            db.row("job").unwrap(),
            Row {
                owner: Some("w".into()),
                until: 130.0,
                fence: 1,
                ..Row::fresh("job")
            }
        );
    }
);

contract!(
    fn the_fence_is_one_more_than_the_stored_fence(api, db) {
        db.put(&Row { fence: 41, ..Row::fresh("job") });
        assert_eq!(api.claim("job", "w", 0.0, 1.0).unwrap(), Some(42));
        assert_eq!(db.row("job").unwrap().fence, 42);
        // Every further generation adds exactly one, and the stored fence is the returned one.
        for (i, now) in [1.0, 2.0, 3.5].into_iter().enumerate() {
            let f = api.claim("job", "w", now, 1.0).unwrap();
            assert_eq!(f, Some(43 + i as i64));
            assert_eq!(db.row("job").unwrap().fence, 43 + i as i64);
        }
    }
);

contract!(
    fn an_unknown_job_is_none_and_creates_no_row(api, db) {
        assert_eq!(api.claim("ghost", "w", 0.0, 10.0).unwrap(), None);
        assert_eq!(db.rows(), vec![]);
    }
);

contract!(
    fn a_done_job_is_none_and_unchanged(api, db) {
        // done with an expired lease, and done with a live one
        for (id, until) in [("old", 5.0), ("live", 500.0)] {
            let row = Row {
                owner: Some("w".into()),
                until,
                fence: 3,
                result: Some("kept".into()),
                done: 1,
                ..Row::fresh(id)
            };
            db.put(&row);
            assert_eq!(api.claim(id, "thief", 100.0, 10.0).unwrap(), None);
            assert_eq!(db.row(id).unwrap(), row);
        }
    }
);

contract!(
    fn a_live_lease_is_none_and_unchanged(api, db) {
        let row = db.leased("job", "holder", 5, 100.0);
        for now in [0.0, 50.0, 99.0, 99.999] {
            assert_eq!(api.claim("job", "other", now, 10.0).unwrap(), None, "now={now}");
            // not even the holder can claim a second generation while its lease is live
            assert_eq!(api.claim("job", "holder", now, 10.0).unwrap(), None, "now={now}");
            assert_eq!(db.row("job").unwrap(), row);
        }
    }
);

contract!(
    fn now_equal_to_until_is_expired_and_claimable(api, db) {
        db.leased("job", "holder", 5, 100.0);
        assert_eq!(api.claim("job", "next", 100.0, 10.0).unwrap(), Some(6));
        assert_eq!(
            db.row("job").unwrap(),
            Row {
                owner: Some("next".into()),
                until: 110.0,
                fence: 6,
                ..Row::fresh("job")
            }
        );
    }
);

contract!(
    fn a_later_claim_after_expiry_takes_over(api, db) {
        api.enqueue("job").unwrap();
        let a = api.claim("job", "A", 0.0, 10.0).unwrap().unwrap();
        let b = api.claim("job", "B", 10.5, 10.0).unwrap().unwrap();
        assert_eq!((a, b), (1, 2));
        let row = db.row("job").unwrap();
        assert_eq!((row.owner.as_deref(), row.until, row.fence), (Some("B"), 20.5, 2));
    }
);

contract!(
    fn bad_arguments_are_errors_naming_the_argument_and_change_nothing(api, db) {
        let row = db.leased("job", "w", 2, 10.0);
        db.put(&Row::fresh("free"));
        let before = db.rows();
        for id in ["job", "free"] {
            for ttl in [0.0, -0.0, -1.0, -1e-9, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                assert_invalid(api.claim(id, "w", 20.0, ttl), "ttl");
            }
            for now in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                assert_invalid(api.claim(id, "w", now, 10.0), "now");
            }
            assert_invalid(api.claim(id, "", 20.0, 10.0), "owner");
            // a ttl past Ttl::MAX (which would also overflow now + ttl)
            assert_invalid(api.claim(id, "w", f64::MAX, f64::MAX), "ttl");
            assert_invalid(api.claim(id, "w", 20.0, 1.000_000_1e12), "ttl");
        }
        assert_invalid(api.claim("", "w", 20.0, 10.0), "job_id");
        assert_eq!(db.rows(), before);
        let _ = row;
    }
);

contract!(
    fn a_fresh_job_counts_as_leased_until_0_for_negative_clocks(api, db) {
        // A fresh row has until = 0, so with a clock before 0 it is not yet claimable.
        api.enqueue("job").unwrap();
        assert_eq!(api.claim("job", "w", -1.0, 10.0).unwrap(), None);
        assert_eq!(db.row("job").unwrap(), Row::fresh("job"));
        assert_eq!(api.claim("job", "w", 0.0, 10.0).unwrap(), Some(1));
    }
);

contract!(
    fn tiny_and_huge_but_valid_arguments_work(api, db) {
        api.enqueue("job").unwrap();
        assert_eq!(api.claim("job", "w", 5.0, 1e-9).unwrap(), Some(1));
        assert_eq!(db.row("job").unwrap().until, 5.0 + 1e-9);
        assert_eq!(api.claim("job", "w", 5.0, 1.0).unwrap(), None);
        // The longest lease (Ttl::MAX, 10^12 s).
        assert_eq!(api.claim("job", "w", 5.0 + 1e-9, 1e12).unwrap(), Some(2));
        assert_eq!(db.row("job").unwrap().until, 5.0 + 1e-9 + 1e12);
    }
);

contract!(
    sqlite_only fn an_error_inside_the_transaction_rolls_back_and_changes_nothing(api, db) {
        // A trigger makes the claim's UPDATE fail inside its BEGIN IMMEDIATE transaction.
        db.put(&Row { fence: 3, ..Row::fresh("job") });
        db.raw()
            .execute_batch(
                "CREATE TRIGGER boom BEFORE UPDATE ON jobs WHEN NEW.owner = 'boom' \
                 BEGIN SELECT RAISE(ABORT, 'boom refused'); END;",
            )
            .unwrap();
        let before = db.rows();
        let err = api.claim("job", "boom", 0.0, 10.0).unwrap_err();
        assert!(matches!(err, leasefence::Error::Backend(_)), "{err:?}");
        assert!(!err.is_retryable());
        assert_eq!(err.argument(), None);
        assert!(err.to_string().contains("boom refused"), "{err}");
        assert_eq!(db.rows(), before);
        // The transaction is gone: the same store (for `kept`, the same connection) claims
        // normally afterwards, and another connection can write at once.
        assert_eq!(api.claim("job", "w", 0.0, 10.0).unwrap(), Some(4));
        let claimed = Row { owner: Some("w".into()), until: 10.0, fence: 4, ..Row::fresh("job") };
        db.put(&Row::fresh("other"));
        assert_eq!(db.rows(), vec![claimed, Row::fresh("other")]);
    }
);

#[test]
fn a_backend_error_shows_the_driver_message_once() {
    use std::error::Error as _;
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    db.raw()
        .execute_batch(
            "CREATE TRIGGER boom BEFORE UPDATE ON jobs \
             BEGIN SELECT RAISE(ABORT, 'boom refused'); END;",
        )
        .unwrap();
    let err = leasefence::claim(&db.path, "job", "w", 0.0, 10.0).unwrap_err();
    let leasefence::Error::Backend(backend) = &err else {
        panic!("expected a backend error, got {err:?}")
    };
    // Display: the driver's message, once; Debug: the driver's own description.
    assert_eq!(backend.to_string(), "database error: boom refused");
    assert_eq!(err.to_string(), backend.to_string());
    assert!(
        format!("{backend:?}").contains("boom refused"),
        "{backend:?}"
    );
    // No further source: the driver's own cause would only repeat the message.
    assert!(err.source().is_none(), "{:?}", err.source());
    assert_eq!(db.row("job"), Some(Row::fresh("job")));
}

#[test]
fn validated_arguments_keep_their_values() {
    use leasefence::{JobId, Now, Owner, Ttl};
    assert_eq!(JobId::new("job-7").unwrap().as_str(), "job-7");
    assert_eq!(Owner::new("worker-2").unwrap().as_str(), "worker-2");
    assert_eq!(Now::new(-3.25).unwrap().seconds(), -3.25);
    assert_eq!(Ttl::new(2.5).unwrap().seconds(), 2.5);
    assert_eq!(
        Ttl::new(2.5)
            .unwrap()
            .until(Now::new(-3.25).unwrap())
            .unwrap(),
        -0.75
    );
    // The longest lease is 10^12 s; a longer one is bad input, not a lease that never ends.
    assert_eq!(Ttl::new(Ttl::MAX).unwrap().seconds(), 1e12);
    assert_invalid(Ttl::new(1e12 + 1.0), "ttl");
    assert_invalid(Ttl::new(1e308), "ttl");
    let err = Ttl::new(1e300).unwrap_err().to_string();
    assert!(
        err.contains("at most 1e12") && err.contains("got 1e300"),
        "{err}"
    );
    // Its end at the largest clock reading rounds back to now: the clock is what is wrong.
    assert_invalid(
        Ttl::new(Ttl::MAX).unwrap().until(Now::new(1e308).unwrap()),
        "now",
    );
    // A tiny ttl is named in a short message, not with hundreds of digits.
    let err = Ttl::new(1e-300)
        .unwrap()
        .until(Now::new(1.7e9).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("(1700000000 + 1e-300)") && err.len() < 200,
        "{err}"
    );
}
