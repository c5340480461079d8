//! The operator verbs change exactly what they name: a verb scoped to some queues leaves the
//! jobs (and the attempt ledger) of every other queue as they were, on every backend.

use crate::common::*;
use leasefence::{JobId, Queues};

fn id(name: &str) -> JobId<'_> {
    JobId::new(name).unwrap()
}

contract!(
    /// `retry_dead_in` of one queue must not end the open attempt of a job of another queue:
    /// that job is not retried, its holder may still give its lease back, and the ledger must
    /// then say `released`, not `lost`.
    fn retrying_the_dead_of_one_queue_leaves_the_ledger_of_other_queues_alone(api, db, s) {
        s.enqueue_many(&[
            job("a").queue("qa").unwrap().max_attempts(1),
            job("b").queue("qb").unwrap().max_attempts(1),
        ])
        .unwrap();
        let _a = s.claim(id("a"), owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        let b = s.claim(id("b"), owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        // Both last attempts expired unwritten at 10; nothing buried them yet.
        let only_qa = Queues::only(["qa"]).unwrap();
        assert_eq!(s.retry_dead_in(&only_qa, now(20.0)).unwrap(), 1);
        assert_eq!(db.attempts("a")[0].brief(), (1, "w", Some("lost")));
        let before = db.row("b").unwrap();
        assert_eq!(
            db.attempts("b")[0].brief(),
            (1, "w", None),
            "b is in qb, which the retry did not name: its attempt stays open"
        );
        // b's holder gives the lease back (release does not look at the clock).
        assert!(s.release_lease(&b).unwrap());
        assert_eq!(before.owner.as_deref(), Some("w"));
        assert_eq!(db.attempts("b")[0].brief(), (1, "w", Some("released")));
    }
);
