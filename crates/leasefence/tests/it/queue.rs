//! The queue on top of the eight operations: payloads, next-job claims, fenced failure and
//! retry, cancel, purge with a fence floor, list/stats, the fence gate and `complete_with`.
//! Every write path is checked to refuse a stale owner or fence and to change nothing then.

use std::collections::BTreeSet;

use crate::common::*;
use leasefence::{
    Backoff, BatchSize, Error, Failed, JobId, Lease, NewJob, Now, Owner, Resource, SqliteStore,
    Stats, Status, Store, Ttl,
};

fn now(t: f64) -> Now {
    Now::new(t).unwrap()
}
fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}
fn owner(o: &str) -> Owner<'_> {
    Owner::new(o).unwrap()
}
fn job(id: &str) -> NewJob {
    NewJob::new(id).unwrap()
}
fn open(db: &Db) -> SqliteStore {
    SqliteStore::open(&db.path).unwrap()
}
fn ids(leases: &[Lease]) -> Vec<&str> {
    leases.iter().map(|l| l.job_id.as_str()).collect()
}

/// Defines a queue case once and runs it on both backends: `sqlite` (the seed's free functions
/// as `api`, a kept `SqliteStore` as `s`) and `pg` (a `PgStore` on a fresh schema as both;
/// skipped with a printed reason without `LEASEFENCE_TEST_PG`, a failure in CI).
macro_rules! queue_case {
    (fn $name:ident($api:ident, $db:ident, $s:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[allow(unused_variables)]
            fn case($api: &dyn Api, $db: &dyn Probe, $s: &dyn Store) $body

            #[test]
            fn sqlite() {
                let db = Db::new();
                let s = open(&db);
                case(&Seed(db.path.clone()), &db, &s);
            }

            #[test]
            #[cfg_attr(not(leasefence_pg), ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case")]
            fn pg() {
                let Some(db) = PgDb::new() else { return };
                let s = db.store();
                case(&Kept(db.store()), &db, &s);
            }
        }
    };
}

mod enqueue_many {
    use super::*;

    queue_case!(
        fn inserts_every_new_job_with_its_settings_and_leaves_known_ids_alone(api, db, s) {
            let running = db.leased("known", "w", 3, 100.0);
            let inserted = s
                .enqueue_many(&[
                    job("a").payload(b"\x00\xffbytes".to_vec()).priority(7),
                    job("known").priority(99),
                    job("b").not_before(50.5).unwrap().max_attempts(3),
                ])
                .unwrap();
            assert_eq!(inserted, [true, false, true]);
            assert_eq!(db.row("known").unwrap(), running);
            assert_eq!(db.row("a").unwrap(), Row::fresh("a"));
            let a = db.queue_row("a");
            assert_eq!(a.payload.as_deref(), Some(&b"\x00\xffbytes"[..]));
            assert_eq!((a.priority, a.not_before, a.max_attempts), (7, 0.0, 0));
            let b = db.queue_row("b");
            assert_eq!(
                (b.payload, b.priority, b.not_before, b.max_attempts),
                (None, 0, 50.5, 3)
            );
            assert_eq!(db.queue_row("known").priority, 0);
        }
    );

    queue_case!(
        fn a_duplicate_inside_one_batch_is_inserted_once(api, db, s) {
            let inserted = s
                .enqueue_many(&[job("x").priority(1), job("x").priority(2)])
                .unwrap();
            assert_eq!(inserted, [true, false]);
            assert_eq!(db.queue_row("x").priority, 1);
        }
    );

    #[test]
    fn bad_settings_are_rejected_before_anything_is_written() {
        assert_invalid(NewJob::new(""), "job_id");
        for t in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_invalid(job("x").not_before(t), "not_before");
        }
    }

    #[test]
    fn a_failure_midway_inserts_none_of_the_batch() {
        let db = Db::new();
        let s = open(&db);
        // A user's trigger refuses one id: the batch fails on its second job, after the first
        // was inserted inside the transaction.
        db.raw()
            .execute_batch(
                "CREATE TRIGGER refuse_bad BEFORE INSERT ON jobs WHEN NEW.id = 'bad' \
                 BEGIN SELECT RAISE(ABORT, 'bad refused'); END;",
            )
            .unwrap();
        let err = s
            .enqueue_many(&[job("a"), job("bad"), job("c")])
            .unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        assert!(err.to_string().contains("bad refused"), "{err}");
        assert_eq!(db.rows(), vec![]);
        // No transaction is left open: the same store enqueues normally afterwards.
        assert_eq!(s.enqueue_many(&[job("a"), job("c")]).unwrap(), [true, true]);
        assert_eq!(db.rows(), vec![Row::fresh("a"), Row::fresh("c")]);
    }

    #[test]
    fn is_all_or_nothing_when_the_database_is_busy() {
        let db = Db::new();
        let s = leasefence::SqliteOptions::new()
            .busy_timeout(std::time::Duration::from_millis(50))
            .open(&db.path)
            .unwrap();
        let blocker = db.raw();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let err = s.enqueue_many(&[job("a"), job("b")]).unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        blocker.execute_batch("ROLLBACK").unwrap();
        assert_eq!(db.rows(), vec![]);
    }
}

mod claim_next {
    use super::*;

    queue_case!(
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

    queue_case!(
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
                    job_id: "j".into(),
                    owner: "w".into(),
                    fence: 1,
                    until: 15.0,
                    payload: Some(b"p".to_vec()),
                    priority: 2,
                    max_attempts: 4,
                    last_error: None,
                }
            );
            let row = db.row("j").unwrap();
            assert_eq!(
                (row.owner.as_deref(), row.until, row.fence),
                (Some("w"), 15.0, 1)
            );
        }
    );

    queue_case!(
        fn skips_leased_done_not_yet_due_and_exhausted_jobs(api, db, s) {
            s.enqueue_many(&[
                job("due-later").not_before(10.001).unwrap(),
                job("exhausted").max_attempts(2),
            ])
            .unwrap();
            db.exec("UPDATE jobs SET fence = 2 WHERE id = 'exhausted'");
            db.leased("leased", "x", 1, 10.5);
            db.put(&Row {
                done: 1,
                result: Some("r".into()),
                ..Row::fresh("done")
            });
            let before = db.rows();
            assert_eq!(s.claim_next(owner("w"), now(10.0), ttl(5.0)).unwrap(), None);
            assert_eq!(db.rows(), before);
        }
    );

    queue_case!(
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

    queue_case!(
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

    queue_case!(
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

    queue_case!(
        fn claim_batch_takes_the_best_n_in_one_go(api, db, s) {
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
            assert_invalid(BatchSize::new(0), "n");
        }
    );

    queue_case!(
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
        // claim_batch's statement and claim_next's scalar-subquery one, as the store runs them.
        let batch = bind(include_str!("../../src/sqlite/sql/claim_batch.sql"));
        let one = bind(include_str!("../../src/sqlite/sql/claim_next.sql"));
        for statement in [batch, one] {
            let plan = sqlite3(&db.path, &format!("EXPLAIN QUERY PLAN {statement}"));
            assert!(plan.contains("USING INDEX jobs_ready"), "{plan}");
            assert!(!plan.contains("USE TEMP B-TREE FOR ORDER BY"), "{plan}");
        }
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
}

mod fail {
    use super::*;

    fn claimed(s: &dyn Store, id: &str, max_attempts: u32, at: f64) -> Lease {
        s.enqueue_many(&[job(id).max_attempts(max_attempts)])
            .unwrap();
        s.claim_next(owner("w"), now(at), ttl(10.0))
            .unwrap()
            .unwrap()
    }

    queue_case!(
        fn records_the_error_and_schedules_the_retry_keeping_the_fence(api, db, s) {
            let lease = claimed(s, "j", 0, 0.0);
            assert_eq!(
                s.fail(&lease, now(2.0), "boom", Some(now(30.0))).unwrap(),
                Some(Failed::Retrying { at: 30.0 })
            );
            assert_eq!(
                db.row("j").unwrap(),
                Row {
                    fence: 1,
                    ..Row::fresh("j")
                }
            );
            let q = db.queue_row("j");
            assert_eq!(
                (q.error.as_deref(), q.not_before, q.outcome),
                (Some("boom"), 30.0, None)
            );
            assert_eq!(s.stats(now(2.0)).unwrap().retrying, 1);
            // not before the retry time; then as the next attempt, with the last error
            assert_eq!(
                s.claim_next(owner("v"), now(29.9), ttl(10.0)).unwrap(),
                None
            );
            let retry = s
                .claim_next(owner("v"), now(30.0), ttl(10.0))
                .unwrap()
                .unwrap();
            assert_eq!(
                (retry.fence, retry.last_error.as_deref()),
                (2, Some("boom"))
            );
            // the failed attempt's fence is stale now
            assert!(!s.complete_lease(&lease, now(31.0), "late").unwrap());
            assert_eq!(s.fail(&lease, now(31.0), "late", None).unwrap(), None);
        }
    );

    queue_case!(
        fn after_the_last_attempt_the_job_is_dead_for_good(api, db, s) {
            let first = claimed(s, "j", 2, 0.0);
            assert!(matches!(
                s.fail(&first, now(1.0), "e1", Some(now(1.0))).unwrap(),
                Some(Failed::Retrying { .. })
            ));
            let second = s
                .claim_next(owner("w"), now(1.0), ttl(10.0))
                .unwrap()
                .unwrap();
            assert_eq!(
                s.fail(&second, now(2.0), "e2", Some(now(2.0))).unwrap(),
                Some(Failed::Dead)
            );
            let row = db.row("j").unwrap();
            assert_eq!((row.done, row.fence, row.result), (1, 2, None));
            let q = db.queue_row("j");
            assert_eq!(
                (q.outcome.as_deref(), q.finished_at, q.error.as_deref()),
                (Some("dead"), Some(2.0), Some("e2"))
            );
            assert_eq!(
                s.claim_next(owner("w"), now(100.0), ttl(10.0)).unwrap(),
                None
            );
            assert_eq!(
                api.claim("j", "w", 100.0, 1.0).unwrap(),
                None
            );
            assert_eq!(
                s.stats(now(100.0)).unwrap(),
                Stats {
                    dead: 1,
                    ..Stats::default()
                }
            );
        }
    );

    queue_case!(
        fn is_fenced_like_complete(api, db, s) {
            let lease = claimed(s, "j", 0, 0.0);
            let before = db.rows();
            let stale = |l: &Lease| s.fail(l, now(5.0), "x", Some(now(6.0))).unwrap();
            assert_eq!(
                stale(&Lease {
                    fence: 2,
                    ..lease.clone()
                }),
                None
            );
            assert_eq!(
                stale(&Lease {
                    fence: 0,
                    ..lease.clone()
                }),
                None
            );
            assert_eq!(
                stale(&Lease {
                    owner: "other".into(),
                    ..lease.clone()
                }),
                None
            );
            assert_eq!(
                stale(&Lease {
                    job_id: "ghost".into(),
                    ..lease.clone()
                }),
                None
            );
            // expired: now == until
            assert_eq!(
                s.fail(&lease, now(10.0), "x", Some(now(11.0))).unwrap(),
                None
            );
            assert_eq!(db.rows(), before);
            assert_eq!(db.queue_row("j").error, None);
            // done
            assert!(s.complete_lease(&lease, now(5.0), "ok").unwrap());
            let done = db.rows();
            assert_eq!(s.fail(&lease, now(6.0), "x", None).unwrap(), None);
            assert_eq!(db.rows(), done);
        }
    );

    queue_case!(
        fn the_default_retry_time_backs_off_exponentially_with_jitter(api, db, s) {
            let mut lease = claimed(s, "j", 0, 0.0);
            let mut t = 0.0;
            for attempt in 1..=5 {
                assert_eq!(lease.fence, attempt);
                let Some(Failed::Retrying { at }) = s.fail(&lease, now(t), "e", None).unwrap() else {
                    panic!("not retried")
                };
                let base = Backoff::default().base * 2f64.powi(attempt as i32 - 1);
                assert!(
                    at >= t + 0.8 * base && at <= t + 1.2 * base,
                    "attempt {attempt}: {at}"
                );
                assert_eq!(db.queue_row("j").not_before, at);
                t = at;
                lease = s
                    .claim_next(owner("w"), now(t), ttl(10.0))
                    .unwrap()
                    .unwrap();
            }
            let d: BTreeSet<u64> = (0..50)
                .map(|i| Backoff::default().delay(&format!("job{i}"), 3).to_bits())
                .collect();
            assert!(d.len() > 40, "jitter spreads jobs apart");
        }
    );

    /// The jitter factor is derived from the job id and fence: reproducible for one lease,
    /// spread across jobs, and within `[1 - jitter, 1 + jitter]` of the capped delay.
    #[test]
    fn the_jitter_is_reproducible_per_lease_and_within_its_bounds() {
        use std::hash::{Hash, Hasher};
        // where in [0, 1) the hash of (job id, fence) falls
        fn unit(job_id: &str, fence: i64) -> f64 {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (job_id, fence).hash(&mut hasher);
            (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
        }
        let b = Backoff {
            base: 10.0,
            factor: 2.0,
            max: 1000.0,
            jitter: 0.5,
        };
        let (mut low, mut high) = (0, 0);
        for i in 0..200 {
            let id = format!("job{i}");
            for fence in 1..=3 {
                let capped = 10.0 * 2f64.powi(fence as i32 - 1);
                let d = b.delay(&id, fence);
                assert!(
                    d >= 0.5 * capped && d < 1.5 * capped,
                    "{id}@{fence}: {d} for {capped}"
                );
                let expected = capped * (1.0 + 0.5 * (2.0 * unit(&id, fence) - 1.0));
                assert!(
                    (d - expected).abs() < 1e-9,
                    "{id}@{fence}: {d} != {expected}"
                );
                assert_eq!(b.delay(&id, fence), d, "reproducible");
                if d < capped {
                    low += 1;
                } else {
                    high += 1;
                }
            }
        }
        assert!(
            low > 200 && high > 200,
            "spread both ways: {low} below, {high} above"
        );
        // and retry_at is the failure time plus that delay
        let lease = Lease {
            job_id: "job7".into(),
            owner: "w".into(),
            fence: 2,
            until: 0.0,
            payload: None,
            priority: 0,
            max_attempts: 0,
            last_error: None,
        };
        assert_eq!(
            b.retry_at(&lease, now(100.0)).seconds(),
            100.0 + b.delay("job7", 2)
        );
    }
}

mod cancel {
    use super::*;

    queue_case!(
        fn stops_an_unfinished_job_and_refuses_its_holder_afterwards(api, db, s) {
            s.enqueue_many(&[job("j"), job("queued")]).unwrap();
            let lease = s
                .claim_next(owner("w"), now(0.0), ttl(10.0))
                .unwrap()
                .unwrap();
            assert!(s.cancel(JobId::new("j").unwrap(), now(1.0)).unwrap());
            assert!(s.cancel(JobId::new("queued").unwrap(), now(1.0)).unwrap());
            let row = db.row("j").unwrap();
            assert_eq!((row.done, row.fence, row.result), (1, 1, None));
            assert_eq!(db.queue_row("j").outcome.as_deref(), Some("cancelled"));
            let cancelled = db.rows();
            let mut l = lease.clone();
            assert!(!s.renew_lease(&mut l, now(2.0), ttl(10.0)).unwrap());
            assert!(!s.complete_lease(&lease, now(2.0), "late").unwrap());
            assert_eq!(s.fail(&lease, now(2.0), "late", None).unwrap(), None);
            assert!(!s.release_lease(&lease).unwrap());
            assert_eq!(
                s.claim_next(owner("v"), now(20.0), ttl(10.0)).unwrap(),
                None
            );
            assert_eq!(db.rows(), cancelled);
            assert_eq!(s.stats(now(20.0)).unwrap().cancelled, 2);
        }
    );

    queue_case!(
        fn leaves_a_finished_job_and_its_result_alone(api, db, s) {
            s.enqueue_many(&[job("j")]).unwrap();
            let lease = s
                .claim_next(owner("w"), now(0.0), ttl(10.0))
                .unwrap()
                .unwrap();
            assert!(s.complete_lease(&lease, now(1.0), "ok").unwrap());
            let done = db.rows();
            assert!(!s.cancel(JobId::new("j").unwrap(), now(2.0)).unwrap());
            assert!(!s.cancel(JobId::new("ghost").unwrap(), now(2.0)).unwrap());
            assert_eq!(db.rows(), done);
            assert_eq!(db.queue_row("j").outcome.as_deref(), Some("completed"));
        }
    );
}

mod purge {
    use super::*;

    queue_case!(
        fn deletes_only_jobs_finished_before_the_cutoff(api, db, s) {
            s.enqueue_many(&[
                job("early"),
                job("at-cutoff"),
                job("late"),
                job("running"),
                job("queued"),
            ])
            .unwrap();
            for (id, t) in [("early", 1.0), ("at-cutoff", 5.0), ("late", 9.0)] {
                let f = api.claim(id, "w", t - 0.5, 10.0)
                    .unwrap()
                    .unwrap();
                assert!(api.complete(id, "w", f, t, "r").unwrap());
            }
            api.claim("running", "w", 0.0, 100.0)
                .unwrap()
                .unwrap();
            assert_eq!(s.purge(now(5.0)).unwrap(), 1);
            let left: Vec<String> = db.rows().into_iter().map(|r| r.id).collect();
            assert_eq!(left, ["at-cutoff", "late", "queued", "running"]);
            assert_eq!(s.purge(now(5.0)).unwrap(), 0);
            assert_eq!(s.purge(now(1000.0)).unwrap(), 2);
            let left: Vec<String> = db.rows().into_iter().map(|r| r.id).collect();
            assert_eq!(left, ["queued", "running"]);
        }
    );

    queue_case!(
        fn a_purged_id_enqueued_again_never_reuses_a_fence(api, db, s) {
            api.enqueue("j").unwrap();
            for t in 0..3 {
                let f = api.claim("j", "w", t as f64, 10.0)
                    .unwrap()
                    .unwrap();
                assert!(api.release("j", "w", f).unwrap());
            }
            let f = api.claim("j", "w", 5.0, 10.0).unwrap().unwrap();
            assert_eq!(f, 4);
            assert!(api.complete("j", "w", f, 6.0, "first life").unwrap());
            assert_eq!(s.purge(now(7.0)).unwrap(), 1);
            assert_eq!(api.state("j").unwrap(), None);

            // second life: starts from the floor, through the seed API and through enqueue_many
            assert!(api.enqueue("j").unwrap());
            assert_eq!(api.state("j").unwrap().unwrap().fence, 4);
            assert_eq!(api.claim("j", "v", 8.0, 10.0).unwrap(), Some(5));
            assert!(s.cancel(JobId::new("j").unwrap(), now(9.0)).unwrap());
            assert_eq!(s.purge(now(10.0)).unwrap(), 1);
            assert_eq!(s.enqueue_many(&[job("j")]).unwrap(), [true]);
            let third = s
                .claim_next(owner("u"), now(11.0), ttl(1.0))
                .unwrap()
                .unwrap();
            assert_eq!(third.fence, 6);
            // the first life's fences stay stale
            assert!(!api.complete("j", "w", 4, 11.5, "zombie").unwrap());
            assert!(api.complete("j", "u", 6, 11.5, "third life").unwrap());
        }
    );

    queue_case!(
        fn the_fence_floor_never_goes_down(api, db, s) {
            api.enqueue("j").unwrap();
            for t in 0..2 {
                let f = api.claim("j", "w", t as f64, 10.0).unwrap().unwrap();
                assert!(api.release("j", "w", f).unwrap());
            }
            let f = api.claim("j", "w", 2.0, 10.0).unwrap().unwrap();
            assert!(api.complete("j", "w", f, 3.0, "first life").unwrap());
            assert_eq!(s.purge(now(4.0)).unwrap(), 1);
            assert_eq!(db.fence_floor("j"), Some(3));

            // A row for the same id written behind the library's back (by hand in a SQL
            // shell, say) and finished under a lower fence: purging it keeps the higher floor.
            db.put(&Row {
                owner: Some("shell".into()),
                until: 5.0,
                fence: 1,
                result: Some("by hand".into()),
                done: 1,
                ..Row::fresh("j")
            });
            db.exec("UPDATE jobs SET finished_at = 5.0 WHERE id = 'j'");
            assert_eq!(s.purge(now(6.0)).unwrap(), 1);
            assert_eq!(db.fence_floor("j"), Some(3));
            assert_eq!(db.rows(), vec![]);

            // Enqueued again, the id continues above every fence the library handed out for it.
            assert_eq!(s.enqueue_many(&[job("j")]).unwrap(), [true]);
            assert_eq!(
                db.row("j").unwrap(),
                Row {
                    fence: 3,
                    ..Row::fresh("j")
                }
            );
            let lease = s
                .claim_next(owner("v"), now(7.0), ttl(1.0))
                .unwrap()
                .unwrap();
            assert_eq!(lease.fence, 4);
        }
    );

    queue_case!(
        fn dead_jobs_are_purged_too(api, db, s) {
            s.enqueue_many(&[job("j").max_attempts(1)]).unwrap();
            let l = s
                .claim_next(owner("w"), now(0.0), ttl(5.0))
                .unwrap()
                .unwrap();
            assert_eq!(s.fail(&l, now(1.0), "e", None).unwrap(), Some(Failed::Dead));
            assert_eq!(s.purge(now(2.0)).unwrap(), 1);
            assert_eq!(db.rows(), vec![]);
        }
    );
}

mod list_and_stats {
    use super::*;

    /// One job in every status at t=10.
    fn zoo(api: &dyn Api, s: &dyn Store) {
        s.enqueue_many(&[
            job("ready"),
            job("scheduled").not_before(20.0).unwrap(),
            job("leased"),
            job("expired"),
            job("retrying"),
            job("done"),
            job("dead").max_attempts(1),
            job("cancelled"),
            job("exhausted").max_attempts(1),
        ])
        .unwrap();
        api.claim("leased", "w", 9.0, 5.0).unwrap().unwrap();
        api.claim("expired", "w", 0.0, 5.0).unwrap().unwrap();
        api.claim("exhausted", "w", 0.0, 5.0).unwrap().unwrap();
        let f = api.claim("done", "w", 0.0, 5.0).unwrap().unwrap();
        assert!(api.complete("done", "w", f, 1.0, "r").unwrap());
        for id in ["retrying", "dead"] {
            let fence = api.claim(id, "w", 0.0, 5.0).unwrap().unwrap();
            let lease = Lease {
                job_id: id.into(),
                owner: "w".into(),
                fence,
                until: 5.0,
                payload: None,
                priority: 0,
                max_attempts: 0,
                last_error: None,
            };
            s.fail(&lease, now(1.0), "e", Some(now(30.0)))
                .unwrap()
                .unwrap();
        }
        assert!(
            s.cancel(JobId::new("cancelled").unwrap(), now(1.0))
                .unwrap()
        );
    }

    queue_case!(
        fn stats_counts_every_status(api, db, s) {
            zoo(api, s);
            let stats = s.stats(now(10.0)).unwrap();
            assert_eq!(
                stats,
                Stats {
                    ready: 1,
                    scheduled: 1,
                    leased: 1,
                    expired: 1,
                    retrying: 1,
                    done: 1,
                    dead: 2,
                    cancelled: 1,
                }
            );
            assert_eq!(stats.total(), 9);
            // the clock moves on: the lease ran out, the schedule and the retry came due
            let later = s.stats(now(30.0)).unwrap();
            assert_eq!(
                (later.leased, later.expired, later.scheduled, later.ready),
                (0, 2, 0, 2)
            );
        }
    );

    queue_case!(
        fn list_shows_each_job_with_its_status_and_filters_and_limits(api, db, s) {
            zoo(api, s);
            let all = s.list(now(10.0), None, 100).unwrap();
            let seen: Vec<(&str, Status)> = all
                .iter()
                .map(|j| (j.state.id.as_str(), j.status))
                .collect();
            assert_eq!(
                seen,
                [
                    ("ready", Status::Ready),
                    ("scheduled", Status::Scheduled),
                    ("leased", Status::Leased),
                    ("expired", Status::Expired),
                    ("retrying", Status::Retrying),
                    ("done", Status::Done),
                    ("dead", Status::Dead),
                    ("cancelled", Status::Cancelled),
                    ("exhausted", Status::Dead),
                ]
            );
            // each listed row is the stored one
            for j in &all {
                assert_eq!(j.state, db.row(&j.state.id).unwrap().as_state());
            }
            // list agrees with stats, status by status
            let stats = s.stats(now(10.0)).unwrap();
            for status in Status::ALL {
                let listed = s.list(now(10.0), Some(status), 100).unwrap();
                assert_eq!(listed.len() as u64, stats.get(status), "{status}");
                assert!(listed.iter().all(|j| j.status == status));
            }
            let done = &s.list(now(10.0), Some(Status::Done), 100).unwrap()[0];
            assert_eq!(done.state.result.as_deref(), Some("r"));
            assert_eq!(done.finished_at, Some(1.0));
            let retrying = &s.list(now(10.0), Some(Status::Retrying), 1).unwrap()[0];
            assert_eq!(
                (retrying.error.as_deref(), retrying.not_before),
                (Some("e"), 30.0)
            );
            assert_eq!(s.list(now(10.0), None, 3).unwrap().len(), 3);
            assert!(s.list(now(10.0), None, 0).unwrap().is_empty());
        }
    );

    fn statuses(s: &dyn Store, at: f64) -> Vec<(String, Status)> {
        s.list(now(at), None, 100)
            .unwrap()
            .into_iter()
            .map(|j| (j.state.id, j.status))
            .collect()
    }

    fn named(pairs: &[(&str, Status)]) -> Vec<(String, Status)> {
        pairs.iter().map(|(id, st)| (id.to_string(), *st)).collect()
    }

    queue_case!(
        fn the_most_final_fact_decides_a_status(api, db, s) {
            s.enqueue_many(&[
                job("done"),
                job("cancelled"),
                job("last-attempt").max_attempts(1),
                job("failed-then-expired"),
            ])
            .unwrap();
            // Finished while their leases would still run until 100: done and cancelled, not
            // leased.
            let f = api.claim("done", "w", 0.0, 100.0).unwrap().unwrap();
            assert!(api.complete("done", "w", f, 1.0, "r").unwrap());
            api.claim("cancelled", "w", 0.0, 100.0).unwrap().unwrap();
            assert!(
                s.cancel(JobId::new("cancelled").unwrap(), now(1.0))
                    .unwrap()
            );
            // Its last attempt, still running: leased, not dead (yet).
            api.claim("last-attempt", "w", 0.0, 100.0).unwrap().unwrap();
            // Failed once, claimed again, and that lease ran out: expired (claimable at once),
            // not retrying.
            let fence = api
                .claim("failed-then-expired", "w", 0.0, 5.0)
                .unwrap()
                .unwrap();
            let first = Lease {
                job_id: "failed-then-expired".into(),
                owner: "w".into(),
                fence,
                until: 5.0,
                payload: None,
                priority: 0,
                max_attempts: 0,
                last_error: None,
            };
            assert_eq!(
                s.fail(&first, now(1.0), "e", Some(now(2.0))).unwrap(),
                Some(Failed::Retrying { at: 2.0 })
            );
            api.claim("failed-then-expired", "w", 2.0, 3.0)
                .unwrap()
                .unwrap();

            assert_eq!(
                statuses(s, 10.0),
                named(&[
                    ("done", Status::Done),
                    ("cancelled", Status::Cancelled),
                    ("last-attempt", Status::Leased),
                    ("failed-then-expired", Status::Expired),
                ])
            );
            assert_eq!(
                s.stats(now(10.0)).unwrap(),
                Stats {
                    done: 1,
                    cancelled: 1,
                    leased: 1,
                    expired: 1,
                    ..Stats::default()
                }
            );
            // Once the last attempt's lease has run out, it is dead.
            assert_eq!(s.stats(now(100.0)).unwrap().dead, 1);
        }
    );

    queue_case!(
        fn at_now_equal_to_until_a_lease_has_expired_and_at_not_before_a_job_is_ready(api, db, s) {
            s.enqueue_many(&[job("due").not_before(10.0).unwrap(), job("ending")])
                .unwrap();
            api.claim("ending", "w", 5.0, 5.0).unwrap().unwrap();
            assert_eq!(
                statuses(s, 9.5),
                named(&[("due", Status::Scheduled), ("ending", Status::Leased)])
            );
            assert_eq!(
                statuses(s, 10.0),
                named(&[("due", Status::Ready), ("ending", Status::Expired)])
            );
            assert_eq!(
                s.stats(now(10.0)).unwrap(),
                Stats {
                    ready: 1,
                    expired: 1,
                    ..Stats::default()
                }
            );
            // and claim_next agrees: both are claimable at 10
            assert_eq!(
                s.claim_batch(owner("v"), now(10.0), ttl(1.0), bs(10))
                    .unwrap()
                    .len(),
                2
            );
        }
    );

    #[test]
    fn status_names_round_trip() {
        for status in Status::ALL {
            assert_eq!(Status::parse(status.as_str()).unwrap(), status);
            assert_eq!(status.to_string(), status.as_str());
        }
        assert_invalid(Status::parse("finished"), "status");
    }
}

mod admit {
    use super::*;

    queue_case!(
        fn admits_a_fence_only_if_it_is_at_least_the_highest_admitted(api, db, s) {
            assert!(s.admit(res("s3://bucket/report"), 3).unwrap());
            assert!(
                s.admit(res("s3://bucket/report"), 3).unwrap(),
                "the same generation may write again"
            );
            assert!(s.admit(res("s3://bucket/report"), 5).unwrap());
            assert!(
                !s.admit(res("s3://bucket/report"), 4).unwrap(),
                "an older generation is fenced out"
            );
            assert!(!s.admit(res("s3://bucket/report"), 3).unwrap());
            assert_eq!(db.fence_gate("s3://bucket/report"), Some(5));
            // per resource
            assert!(s.admit(res("other"), 1).unwrap());
            assert_eq!(db.fence_gate("other"), Some(1));
            assert_invalid(Resource::new(""), "resource");
            assert_eq!(db.fence_gate(""), None);
        }
    );

    #[test]
    fn racing_generations_never_let_an_older_one_in_after_a_newer_one() {
        let db = Db::new();
        let admitted: Vec<Vec<i64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let path = &db.path;
                    scope.spawn(move || {
                        let s = SqliteStore::open(path).unwrap();
                        (0..50)
                            .map(|i| i * 4 + t)
                            .filter(|&f| s.admit(res("r"), f).unwrap())
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // within each thread, admitted fences only grow, and the gate ends at the highest
        for seq in &admitted {
            assert!(seq.windows(2).all(|w| w[0] < w[1]));
        }
        assert_eq!(db.fence_gate("r"), Some(199));
        assert!(admitted.iter().flatten().any(|&f| f == 199));
        // and once the race is over, every older generation is refused and changes nothing
        let s = open(&db);
        for older in [198, 100, 0] {
            assert!(
                !s.admit(res("r"), older).unwrap(),
                "fence {older} after 199"
            );
        }
        assert_eq!(db.fence_gate("r"), Some(199));
    }
}

mod complete_with {
    use super::*;

    /// A caller's own error type: the store's errors convert into it.
    #[derive(Debug, PartialEq)]
    enum AppError {
        Store(String),
        Sql(String),
        Downstream(&'static str),
    }

    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            AppError::Store(e.to_string())
        }
    }

    fn sql(e: leasefence::rusqlite::Error) -> AppError {
        AppError::Sql(e.to_string())
    }

    fn setup() -> (Db, SqliteStore, Lease) {
        let db = Db::new();
        let s = open(&db);
        s.enqueue_many(&[job("j")]).unwrap();
        db.raw()
            .execute_batch("CREATE TABLE ledger (job TEXT, fence INTEGER)")
            .unwrap();
        let lease = s
            .claim_next(owner("w"), now(0.0), ttl(10.0))
            .unwrap()
            .unwrap();
        (db, s, lease)
    }

    fn ledger(db: &Db) -> Vec<(String, i64)> {
        let conn = db.raw();
        let mut stmt = conn.prepare("SELECT job, fence FROM ledger").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn commits_the_callers_writes_with_the_completion() {
        let (db, s, lease) = setup();
        let out = s
            .complete_with(&lease, now(5.0), "ok", |conn| {
                conn.execute(
                    "INSERT INTO ledger VALUES (?1, ?2)",
                    (&lease.job_id, lease.fence),
                )
                .map_err(sql)?;
                Ok::<_, AppError>(42)
            })
            .unwrap();
        assert_eq!(out, Some(42));
        assert_eq!(ledger(&db), [("j".to_string(), 1)]);
        assert_eq!(db.row("j").unwrap().result.as_deref(), Some("ok"));
    }

    #[test]
    fn a_stale_lease_runs_nothing_and_writes_nothing() {
        let (db, s, lease) = setup();
        let before = db.rows();
        let mut ran = false;
        for stale in [
            Lease {
                fence: 2,
                ..lease.clone()
            },
            Lease {
                owner: "x".into(),
                ..lease.clone()
            },
        ] {
            let out = s
                .complete_with(&stale, now(5.0), "stale", |_| {
                    ran = true;
                    Ok::<_, Error>(())
                })
                .unwrap();
            assert_eq!(out, None);
        }
        // expired
        let out = s
            .complete_with(&lease, now(10.0), "late", |_| {
                ran = true;
                Ok::<_, Error>(())
            })
            .unwrap();
        assert_eq!(out, None);
        assert!(!ran);
        assert_eq!(db.rows(), before);
        assert!(ledger(&db).is_empty());
        // and the store is usable afterwards: the real holder completes
        assert!(s.complete_lease(&lease, now(6.0), "ok").unwrap());
    }

    #[test]
    fn a_failing_write_rolls_back_the_completion_too() {
        let (db, s, lease) = setup();
        let before = db.rows();
        let out: Result<Option<()>, AppError> = s.complete_with(&lease, now(5.0), "ok", |conn| {
            conn.execute("INSERT INTO ledger VALUES ('j', 1)", [])
                .map_err(sql)?;
            Err(AppError::Downstream("refused"))
        });
        assert_eq!(out, Err(AppError::Downstream("refused")));
        assert_eq!(db.rows(), before);
        assert!(ledger(&db).is_empty());
        // still the holder: it can try again
        assert!(s.complete_lease(&lease, now(6.0), "second try").unwrap());
    }
}

mod migration {
    use super::*;

    #[test]
    fn a_six_column_database_is_upgraded_without_touching_a_row() {
        let db = Db::empty();
        sqlite3(
            &db.path,
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, \
             fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0); \
             INSERT INTO jobs VALUES ('a', 'w', 50.0, 7, NULL, 0), ('b', 'v', 3.0, 2, 'r', 1);",
        );
        let before = db.rows();
        // any operation upgrades it, even one that only reads; the six columns stay as they were
        assert_eq!(leasefence::state(&db.path, "a").unwrap().unwrap().fence, 7);
        assert_eq!(db.rows(), before);
        assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "2");
        assert_eq!(db.queue_row("a").priority, 0);
        // a job finished before the upgrade gets its lease end as finish time, an upper bound
        assert_eq!(db.queue_row("b").finished_at, Some(3.0));
        assert_eq!(db.queue_row("a").finished_at, None);
        let s = open(&db);
        assert_eq!(s.purge(now(3.0)).unwrap(), 0);
        assert_eq!(s.purge(now(3.5)).unwrap(), 1);
        assert_eq!(
            s.claim_next(owner("x"), now(50.0), ttl(1.0))
                .unwrap()
                .unwrap()
                .fence,
            8
        );
    }

    #[test]
    fn an_up_to_date_file_is_opened_and_read_while_another_connection_holds_the_write_lock() {
        let db = Db::new();
        leasefence::enqueue(&db.path, "j").unwrap();
        let blocker = db.raw();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        // Nothing to migrate, so opening takes no write lock: a reader (`leasefence list`
        // beside running workers) is never blocked by a writer.
        let s = leasefence::SqliteOptions::new()
            .busy_timeout(std::time::Duration::from_millis(100))
            .open(&db.path)
            .unwrap();
        assert_eq!(
            s.state(JobId::new("j").unwrap()).unwrap(),
            Some(Row::fresh("j").as_state())
        );
        assert_eq!(s.stats(now(0.0)).unwrap().ready, 1);
        assert_eq!(
            leasefence::state(&db.path, "j").unwrap(),
            Some(Row::fresh("j").as_state())
        );
        blocker.execute_batch("ROLLBACK").unwrap();
        assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "2");
    }

    #[test]
    fn a_users_own_column_of_the_same_name_is_kept() {
        let db = Db::empty();
        sqlite3(
            &db.path,
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, \
             fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0, \
             priority INTEGER NOT NULL DEFAULT 0); INSERT INTO jobs (id, priority) VALUES ('p', 9);",
        );
        leasefence::init_db(&db.path).unwrap();
        assert_eq!(db.queue_row("p").priority, 9);
        let s = open(&db);
        s.enqueue_many(&[job("q").priority(3)]).unwrap();
        let first = s
            .claim_next(owner("w"), now(0.0), ttl(1.0))
            .unwrap()
            .unwrap();
        assert_eq!(first.job_id, "p");
    }
}

mod complete_batch {
    use super::*;

    queue_case!(
        fn stores_each_current_lease_and_refuses_each_stale_one_alone(api, db, s) {
            s.enqueue_many(&[job("a"), job("b"), job("c"), job("d"), job("e")])
                .unwrap();
            let leases = s.claim_batch(owner("w"), now(10.0), ttl(30.0), bs(5)).unwrap();
            assert_eq!(ids(&leases), ["a", "b", "c", "d", "e"]);
            // b: a made-up later fence; c: another owner; d: finished already; e: expires at 40.
            let mut wrong_fence = leases[1].clone();
            wrong_fence.fence += 1;
            let mut wrong_owner = leases[2].clone();
            wrong_owner.owner = "intruder".into();
            assert!(s.complete_lease(&leases[3], now(11.0), "first").unwrap());
            let before_d = db.row("d").unwrap();
            let stored = s
                .complete_batch(
                    &[
                        (&leases[0], "result a"),
                        (&wrong_fence, "stale b"),
                        (&wrong_owner, "stale c"),
                        (&leases[3], "second d"),
                        (&leases[0], "again a"),
                    ],
                    now(20.0),
                )
                .unwrap();
            assert_eq!(stored, [true, false, false, false, false]);
            let a = db.row("a").unwrap();
            assert_eq!((a.result.as_deref(), a.done, a.fence), (Some("result a"), 1, 1));
            assert_eq!(db.queue_row("a").finished_at, Some(20.0));
            for id in ["b", "c"] {
                let row = db.row(id).unwrap();
                assert_eq!((row.result, row.done, row.owner.as_deref()), (None, 0, Some("w")));
            }
            assert_eq!(db.row("d").unwrap(), before_d);
            // At the lease end the lease has expired: refused, nothing stored.
            let before_e = db.row("e").unwrap();
            assert_eq!(s.complete_batch(&[(&leases[4], "late")], now(40.0)).unwrap(), [false]);
            assert_eq!(db.row("e").unwrap(), before_e);
            assert_eq!(s.complete_batch(&[], now(41.0)).unwrap(), Vec::<bool>::new());
        }
    );

    queue_case!(
        fn a_re_claimed_job_refuses_the_older_holder_in_a_batch(api, db, s) {
            s.enqueue_many(&[job("a"), job("b")]).unwrap();
            let old = s.claim_batch(owner("w1"), now(0.0), ttl(5.0), bs(2)).unwrap();
            // The old leases expire; w2 takes a again under fence 2.
            let new = s.claim_next(owner("w2"), now(6.0), ttl(5.0)).unwrap().unwrap();
            assert_eq!((new.job_id.as_str(), new.fence), ("a", 2));
            let stored = s
                .complete_batch(&[(&old[0], "stale a"), (&new, "fresh a")], now(7.0))
                .unwrap();
            assert_eq!(stored, [false, true]);
            let a = db.row("a").unwrap();
            assert_eq!((a.result.as_deref(), a.owner.as_deref(), a.fence), (Some("fresh a"), Some("w2"), 2));
            // b's lease expired at 5 and nobody took it: its completion is refused too.
            assert_eq!(s.complete_batch(&[(&old[1], "late b")], now(7.0)).unwrap(), [false]);
            assert_eq!(db.row("b").unwrap().done, 0);
        }
    );
}

/// An error inside the batch's transaction stores none of its results: the transaction is one.
#[test]
fn complete_batch_an_error_stores_none_of_the_results() {
    let db = Db::new();
    let s = open(&db);
    s.enqueue_many(&[job("a"), job("boom"), job("c")]).unwrap();
    let leases = s
        .claim_batch(owner("w"), now(0.0), ttl(30.0), bs(3))
        .unwrap();
    db.raw()
        .execute_batch(
            "CREATE TRIGGER boom BEFORE UPDATE OF done ON jobs WHEN NEW.id = 'boom' \
             BEGIN SELECT RAISE(ABORT, 'boom refused'); END;",
        )
        .unwrap();
    let before = db.rows();
    let results: Vec<(&Lease, &str)> = leases.iter().map(|l| (l, "r")).collect();
    let err = s.complete_batch(&results, now(1.0)).unwrap_err();
    assert!(matches!(err, Error::Backend(_)), "{err:?}");
    assert_eq!(db.rows(), before);
    // The transaction was rolled back, not left open: the store works on.
    assert_eq!(s.complete_batch(&results[..1], now(2.0)).unwrap(), [true]);
    assert_eq!(db.row("a").unwrap().result.as_deref(), Some("r"));
}

/// PostgreSQL refuses a NUL in any result before it writes anything.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn complete_batch_pg_a_bad_result_stores_none() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    s.enqueue_many(&[job("a"), job("b")]).unwrap();
    let leases = s
        .claim_batch(owner("w"), now(0.0), ttl(30.0), bs(2))
        .unwrap();
    let before = db.rows();
    let err = s
        .complete_batch(&[(&leases[0], "fine"), (&leases[1], "nul\0")], now(1.0))
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { argument, .. } if *argument == "result"),
        "{err:?}"
    );
    assert_eq!(db.rows(), before);
}
