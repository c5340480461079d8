//! `claim_batch`: the best `n` claimable jobs in one go, in `claim_next`'s order, never one job
//! to two workers.

use crate::common::*;
use leasefence::{NewJob, SqliteStore, Store};
use std::collections::BTreeSet;

contract!(
    fn skips_leased_done_not_yet_due_and_exhausted_jobs(api, db, s) {
        // The batch statement's own ready predicate (claim_batch.sql): only `ready` is taken.
        s.enqueue_many(&[
            job("due-later").not_before(10.001).unwrap(),
            job("exhausted").max_attempts(2),
            job("ready"),
        ])
        .unwrap();
        // Both attempts spent, the last lease expired: buried (dead), never handed out.
        db.exec("UPDATE jobs SET fence = 2, attempts = 2, owner = 'x', until = 9.0 WHERE id = 'exhausted'");
        db.leased("leased", "x", 1, 10.5);
        db.put(&Row {
            done: 1,
            result: Some("r".into()),
            ..Row::fresh("done")
        });
        let before: Vec<Row> = db.rows().into_iter().filter(|r| r.id != "ready").collect();
        let batch = s.claim_batch(owner("w"), now(10.0), ttl(5.0), bs(10)).unwrap();
        assert_eq!(ids(&batch), ["ready"]);
        let after: Vec<Row> = db.rows().into_iter().filter(|r| r.id != "ready").collect();
        let expected: Vec<Row> = before
            .into_iter()
            .map(|r| if r.id == "exhausted" { Row { done: 1, ..r } } else { r })
            .collect();
        assert_eq!(after, expected);
        assert_eq!(db.queue_row("exhausted").outcome.as_deref(), Some("dead"));
        // One attempt left (a lease given back refunded its attempt): still handed out, as
        // attempt 2 under a fence above every earlier one.
        s.enqueue_many(&[job("one-left").max_attempts(2)]).unwrap();
        db.exec("UPDATE jobs SET fence = 5, attempts = 1 WHERE id = 'one-left'");
        let batch = s.claim_batch(owner("w"), now(10.0), ttl(5.0), bs(10)).unwrap();
        assert_eq!(ids(&batch), ["one-left"]);
        assert_eq!((batch[0].fence, batch[0].attempt), (6, 2));
    }
);

contract!(
    fn takes_the_best_n_in_one_go(api, db, s) {
        let jobs: Vec<NewJob> = (0..10)
            .map(|i| job(&format!("j{i}")).priority(i % 3))
            .collect();
        s.enqueue_many(&jobs).unwrap();
        let batch = s.claim_batch(owner("w"), now(0.0), ttl(9.0), bs(4)).unwrap();
        assert_eq!(ids(&batch), ["j2", "j5", "j8", "j1"]);
        for lease in &batch {
            assert_eq!((lease.fence, lease.until), (1, 9.0));
            assert_eq!(db.row(&lease.job_id).unwrap().owner.as_deref(), Some("w"));
        }
        let rest = s.claim_batch(owner("v"), now(0.0), ttl(9.0), bs(100)).unwrap();
        assert_eq!(rest.len(), 6);
        assert!(
            s.claim_batch(owner("v"), now(0.0), ttl(9.0), bs(100))
                .unwrap()
                .is_empty()
        );
        assert_invalid(leasefence::BatchSize::new(0), "n");
    }
);

#[test]
fn concurrent_workers_never_get_the_same_job() {
    let db = Db::new();
    let jobs: Vec<NewJob> = (0..300).map(|i| job(&format!("j{i:03}"))).collect();
    open(&db).enqueue_many(&jobs).unwrap();
    let per_worker: Vec<Vec<(String, i64)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let path = &db.path;
                scope.spawn(move || {
                    let s = SqliteStore::open(path).unwrap();
                    let me = format!("w{w}");
                    let mut got = vec![];
                    loop {
                        let batch = s
                            .claim_batch(owner(&me), now(0.0), ttl(60.0), bs(1 + w))
                            .unwrap();
                        if batch.is_empty() {
                            break got;
                        }
                        got.extend(batch.into_iter().map(|l| (l.job_id, l.fence)));
                        assert!(got.len() <= 300, "a leased job was handed out again");
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: Vec<&(String, i64)> = per_worker.iter().flatten().collect();
    assert_eq!(all.len(), 300, "every job claimed exactly once");
    let distinct: BTreeSet<&String> = all.iter().map(|(id, _)| id).collect();
    assert_eq!(distinct.len(), 300);
    assert!(all.iter().all(|(_, fence)| *fence == 1));
}

/// claim_next and claim_batch(1) take the same job as claim_batch(n) would take first.
#[test]
fn claim_next_and_a_batch_of_one_agree_with_the_batch_order() {
    let db = Db::new();
    let s = open(&db);
    let jobs = [
        job("low").priority(1),
        job("late").priority(5).not_before(3.0).unwrap(),
        job("high-old").priority(5),
        job("high-new").priority(5),
    ];
    s.enqueue_many(&jobs).unwrap();
    let order = ids(&s
        .claim_batch(owner("peek"), now(4.0), ttl(1.0), bs(4))
        .unwrap())
    .into_iter()
    .map(str::to_owned)
    .collect::<Vec<_>>();
    assert_eq!(order, ["high-old", "high-new", "late", "low"]);
    // The peek's leases end at 5: from then on, one at a time in the same order.
    let mut one_by_one = Vec::new();
    for k in 0..4 {
        let lease = if k % 2 == 0 {
            s.claim_next(owner("w"), now(5.0), ttl(10.0)).unwrap()
        } else {
            s.claim_batch(owner("w"), now(5.0), ttl(10.0), bs(1))
                .unwrap()
                .pop()
        };
        let lease = lease.unwrap();
        assert_eq!(
            (lease.fence, lease.until, lease.owner.as_str()),
            (2, 15.0, "w")
        );
        assert_eq!(db.row(&lease.job_id).unwrap().fence, 2);
        one_by_one.push(lease.job_id);
    }
    assert_eq!(one_by_one, order);
    assert!(
        s.claim_next(owner("w"), now(5.0), ttl(10.0))
            .unwrap()
            .is_none()
    );
}

contract!(
    fn takes_only_from_the_named_queues(api, db, s) {
        s.enqueue_many(&[
            job("x1").queue("x").unwrap().priority(5),
            job("y1").queue("y").unwrap(),
            job("z1").queue("z").unwrap().priority(9),
            job("y2").queue("y").unwrap().priority(1),
        ])
        .unwrap();
        let xy = leasefence::Queues::only(["x", "y"]).unwrap();
        let leases = s.claim_batch_in(&xy, owner("w"), now(0.0), ttl(10.0), bs(10)).unwrap();
        assert_eq!(ids(&leases), ["x1", "y2", "y1"]);
        assert_eq!(
            leases.iter().map(|l| l.queue.as_str()).collect::<Vec<_>>(),
            ["x", "y", "y"]
        );
        assert_eq!(db.row("z1").unwrap().fence, 0);
        assert_eq!(s.claim_batch(owner("w"), now(0.0), ttl(10.0), bs(10)).unwrap().len(), 1);
    }
);
