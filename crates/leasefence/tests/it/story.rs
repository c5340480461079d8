//! The seed story: A claims and stalls, B claims and completes, A's late writes are refused.

use crate::common::*;

contract!(
    fn a_stalled_worker_can_no_longer_store_anything(api, db) {
        assert!(api.enqueue("job").unwrap());

        // t=0: A claims for 10 s, then stalls.
        let a = api.claim("job", "A", 0.0, 10.0).unwrap().unwrap();
        assert_eq!(a, 1);
        // t=5: while A's lease is live, B is turned away.
        assert_eq!(api.claim("job", "B", 5.0, 10.0).unwrap(), None);
        // t=10: A's lease has expired (now == until); B claims.
        let b = api.claim("job", "B", 10.0, 10.0).unwrap().unwrap();
        assert_eq!(b, 2);
        // t=12: B renews and completes.
        assert!(api.renew("job", "B", b, 12.0, 10.0).unwrap());
        assert!(api.complete("job", "B", b, 13.0, "B's result").unwrap());
        let after_b = db.row("job").unwrap();
        assert_eq!(
            after_b,
            Row {
                owner: Some("B".into()),
                until: 22.0,
                fence: 2,
                result: Some("B's result".into()),
                done: 1,
                ..Row::fresh("job")
            }
        );

        // t=14: A wakes up. Every write it attempts with fence 1 is refused...
        assert!(!api.renew("job", "A", a, 14.0, 10.0).unwrap());
        assert!(!api.complete("job", "A", a, 14.0, "A's stale result").unwrap());
        assert!(!api.release("job", "A", a).unwrap());
        // ...so is a claim of the finished job, and A pretending to hold B's fence.
        assert_eq!(api.claim("job", "A", 30.0, 10.0).unwrap(), None);
        assert!(!api.complete("job", "A", b, 14.0, "A's stale result").unwrap());

        // B's result survives, byte for byte, in the file.
        assert_eq!(db.row("job").unwrap(), after_b);
        assert_eq!(api.state("job").unwrap(), Some(after_b.as_state()));
    }
);

contract!(
    fn a_stalled_worker_is_refused_even_before_anyone_else_claims(api, db) {
        api.enqueue("job").unwrap();
        let a = api.claim("job", "A", 0.0, 10.0).unwrap().unwrap();
        // A wakes at t=11: nobody took the job, but A's lease is over.
        assert!(!api.renew("job", "A", a, 11.0, 10.0).unwrap());
        assert!(!api.complete("job", "A", a, 11.0, "late").unwrap());
        let row = db.row("job").unwrap();
        assert_eq!((row.done, row.result.as_deref(), row.until), (0, None, 10.0));
        // A may give the expired lease back; the next claim is a new generation.
        assert!(api.release("job", "A", a).unwrap());
        assert_eq!(api.claim("job", "A", 11.0, 10.0).unwrap(), Some(a + 1));
    }
);
