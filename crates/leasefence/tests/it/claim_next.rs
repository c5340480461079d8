//! `claim_next`: the best claimable job by priority, then `not_before`, then age, leased and
//! fenced in one statement; leases it hands out are renewed, completed and released as any.

use crate::common::*;
use std::collections::BTreeSet;

use leasefence::Lease;

contract!(
    fn hands_out_by_priority_then_not_before_then_age(api, db, s) {
        s.enqueue_many(&[
            job("old-low"),
            job("late-high").priority(5).not_before(3.0).unwrap(),
            job("early-high").priority(5).not_before(1.0).unwrap(),
            job("young-low"),
            job("old-high").priority(5).not_before(1.0).unwrap(),
            job("negative").priority(-1),
        ])
        .unwrap();
        let mut order = vec![];
        while let Some(lease) = s.claim_next(owner("w"), now(10.0), ttl(5.0)).unwrap() {
            order.push(lease.job_id);
            assert!(
                order.len() <= 6,
                "a leased job was handed out again: {order:?}"
            );
        }
        assert_eq!(
            order,
            [
                "early-high",
                "old-high",
                "late-high",
                "old-low",
                "young-low",
                "negative"
            ]
        );
    }
);

contract!(
    fn returns_the_lease_and_stores_it(api, db, s) {
        s.enqueue_many(&[job("j").payload(b"p".to_vec()).priority(2).max_attempts(4)])
            .unwrap();
        let lease = s
            .claim_next(owner("w"), now(10.0), ttl(5.0))
            .unwrap()
            .unwrap();
        assert_eq!(
            lease,
            Lease {
                queue: leasefence::DEFAULT_QUEUE.to_owned(),
                kind: None,
                job_id: "j".into(),
                owner: "w".into(),
                fence: 1,
                until: 15.0,
                payload: Some(b"p".to_vec()),
                priority: 2,
                max_attempts: 4,
                last_error: None,
                attempt: 1,
            }
        );
        let row = db.row("j").unwrap();
        assert_eq!(
            (row.owner.as_deref(), row.until, row.fence),
            (Some("w"), 15.0, 1)
        );
    }
);

contract!(
    fn skips_leased_done_not_yet_due_and_exhausted_jobs(api, db, s) {
        s.enqueue_many(&[
            job("due-later").not_before(10.001).unwrap(),
            job("exhausted").max_attempts(2),
        ])
        .unwrap();
        // Both attempts spent, the last lease (fence 2) expired at 9.0: nobody may claim it.
        db.exec("UPDATE jobs SET fence = 2, attempts = 2, owner = 'x', until = 9.0 WHERE id = 'exhausted'");
        db.leased("leased", "x", 1, 10.5);
        db.put(&Row {
            done: 1,
            result: Some("r".into()),
            ..Row::fresh("done")
        });
        let before = db.rows();
        assert_eq!(s.claim_next(owner("w"), now(10.0), ttl(5.0)).unwrap(), None);
        // The spent job is finished as dead at its lease end; nothing else changed.
        let buried = Row { done: 1, ..before.iter().find(|r| r.id == "exhausted").unwrap().clone() };
        let expected: Vec<Row> = before
            .iter()
            .map(|r| if r.id == "exhausted" { buried.clone() } else { r.clone() })
            .collect();
        assert_eq!(db.rows(), expected);
        let q = db.queue_row("exhausted");
        assert_eq!(
            (q.outcome.as_deref(), q.finished_at, q.error.as_deref()),
            (Some("dead"), Some(9.0), Some("the lease of the last attempt expired"))
        );
    }
);

contract!(
    fn boundaries_not_before_equal_now_is_due_and_until_equal_now_is_expired(api, db, s) {
        s.enqueue_many(&[job("due").not_before(10.0).unwrap()])
            .unwrap();
        db.leased("expiring", "x", 4, 10.0);
        let got: BTreeSet<String> = s
            .claim_batch(owner("w"), now(10.0), ttl(5.0), bs(10))
            .unwrap()
            .into_iter()
            .map(|l| format!("{}@{}", l.job_id, l.fence))
            .collect();
        assert_eq!(
            got,
            BTreeSet::from(["due@1".to_string(), "expiring@5".to_string()])
        );
    }
);

contract!(
    fn the_last_allowed_attempt_is_handed_out_and_no_more(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(2)]).unwrap();
        let first = s
            .claim_next(owner("w"), now(0.0), ttl(1.0))
            .unwrap()
            .unwrap();
        assert!(!first.is_last_attempt());
        // the lease expires without a word from the worker: that attempt is used up
        let second = s
            .claim_next(owner("w"), now(1.0), ttl(1.0))
            .unwrap()
            .unwrap();
        assert_eq!(second.fence, 2);
        assert!(second.is_last_attempt());
        assert_eq!(s.claim_next(owner("w"), now(2.0), ttl(1.0)).unwrap(), None);
        assert_eq!(s.stats(now(2.0)).unwrap().dead, 1);
    }
);

contract!(
    fn a_lease_is_renewed_completed_and_released_through_its_own_methods(api, db, s) {
        s.enqueue_many(&[job("a"), job("b")]).unwrap();
        let mut a = s
            .claim_next(owner("w"), now(0.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert!(
            !a.is_last_attempt(),
            "without a budget no attempt is the last"
        );
        assert!(s.renew_lease(&mut a, now(5.0), ttl(10.0)).unwrap());
        assert_eq!(a.until, 15.0);
        assert_eq!(db.row("a").unwrap().until, 15.0);
        // a refused renew changes neither the lease nor the row
        let mut stale = Lease {
            fence: 0,
            ..a.clone()
        };
        assert!(!s.renew_lease(&mut stale, now(6.0), ttl(100.0)).unwrap());
        assert_eq!(stale.until, 15.0);
        assert_eq!(db.row("a").unwrap().until, 15.0);
        // live at 12 only thanks to the renewal
        assert!(s.complete_lease(&a, now(12.0), "a done").unwrap());
        assert_eq!(
            db.row("a").unwrap(),
            Row {
                owner: Some("w".into()),
                until: 15.0,
                fence: 1,
                result: Some("a done".into()),
                done: 1,
                ..Row::fresh("a")
            }
        );
        let b = s
            .claim_next(owner("w"), now(12.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert!(s.release_lease(&b).unwrap());
        assert_eq!(
            db.row("b").unwrap(),
            Row {
                fence: 1,
                ..Row::fresh("b")
            }
        );
    }
);

contract!(
    fn an_expired_lease_is_taken_over_under_the_new_owners_name(api, db, s) {
        s.enqueue_many(&[job("j")]).unwrap();
        let a = s
            .claim_next(owner("a"), now(0.0), ttl(10.0))
            .unwrap()
            .unwrap();
        // a's lease runs out unused; b takes the job over through claim_next
        let b = s
            .claim_next(owner("b"), now(10.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert_eq!((b.owner.as_str(), b.fence, b.until), ("b", 2, 20.0));
        let row = db.row("j").unwrap();
        assert_eq!(
            (row.owner.as_deref(), row.until, row.fence),
            (Some("b"), 20.0, 2)
        );
        // the row is b's: a is fenced out, b completes
        assert!(!s.complete_lease(&a, now(11.0), "a's").unwrap());
        assert!(s.complete_lease(&b, now(11.0), "b's").unwrap());
        assert_eq!(db.row("j").unwrap().result.as_deref(), Some("b's"));
    }
);

#[test]
fn walks_the_ready_index_instead_of_scanning_the_table() {
    let db = Db::new();
    let bind = |sql: &str| {
        sql.lines()
            .filter(|l| !l.starts_with("--"))
            .collect::<Vec<_>>()
            .join(" ")
            .replace("?1", "'w'")
            .replace("?2", "1")
            .replace("?3", "0")
            .replace("?4", "1")
    };
    let plan = |statement: String| sqlite3(&db.path, &format!("EXPLAIN QUERY PLAN {statement}"));
    // Every queue: claim_batch's statement and claim_next's scalar-subquery one, as the store
    // runs them, walk jobs_ready in order.
    for sql in [
        include_str!("../../src/sqlite/sql/claim_batch.sql"),
        include_str!("../../src/sqlite/sql/claim_next.sql"),
    ] {
        let plan = plan(bind(sql));
        assert!(plan.contains("USING INDEX jobs_ready"), "{plan}");
        assert!(!plan.contains("USE TEMP B-TREE FOR ORDER BY"), "{plan}");
    }
    // Named queues: one walk of each queue's part of jobs_queue_ready, in order (no sort of
    // its jobs); only the queues' few candidates are sorted.
    let named = include_str!("../../src/sqlite/sql/claim_next_in.sql")
        .replace("?4", r#"'["emails","default"]'"#);
    let plan = plan(bind(&named));
    assert!(
        plan.contains("SEARCH c USING INDEX jobs_queue_ready (queue=?)"),
        "{plan}"
    );
    assert!(!plan.contains("SCAN c"), "{plan}");
    assert_eq!(
        plan.matches("USE TEMP B-TREE FOR ORDER BY").count(),
        1,
        "{plan}"
    );
}

contract!(
    fn takes_only_from_the_named_queues_and_says_which(api, db, s) {
        s.enqueue_many(&[
            job("urgent").queue("x").unwrap().priority(100),
            job("mail").queue("y").unwrap().kind("email").unwrap(),
            job("plain"),
        ])
        .unwrap();
        let y = leasefence::Queues::only(["y", "nowhere"]).unwrap();
        let lease = s.claim_next_in(&y, owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!(
            (lease.job_id.as_str(), lease.queue.as_str(), lease.kind.as_deref()),
            ("mail", "y", Some("email"))
        );
        // Nothing else in y: the better jobs of x and default are not taken.
        assert_eq!(s.claim_next_in(&y, owner("w"), now(0.0), ttl(10.0)).unwrap(), None);
        assert_eq!(db.row("urgent").unwrap().fence, 0);
        let default = leasefence::Queues::only(["default"]).unwrap();
        let plain = s.claim_next_in(&default, owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((plain.job_id.as_str(), plain.queue.as_str(), plain.kind), ("plain", "default", None));
        // Every queue: what is left, the best first.
        let any = s.claim_next(owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        assert_eq!((any.job_id.as_str(), any.queue.as_str()), ("urgent", "x"));
    }
);
