//! What only the PostgreSQL backend has to prove: races between connections (threads standing
//! in for hosts), concurrent schema initialisation, the migration record, the durability
//! setting, the index `claim_next` walks, connection failures, and `complete_with` on a
//! `postgres::Transaction`. The contract itself runs on PostgreSQL as the `pg` and `any_pg`
//! configurations of every `contract!` case, the database clock in `database_clock`, and each
//! operation's PostgreSQL-only cases in its own module (`init_db::on_postgresql_…`). Each test
//! is reported as ignored (with the reason) without `LEASEFENCE_TEST_PG`, and runs in CI.

use std::collections::BTreeSet;
use std::sync::Barrier;
use std::time::Duration;

use crate::common::*;
use leasefence::{Error, JobId, NewJob, Now, Owner, PgOptions, PgStore, Store, Ttl};

fn now(t: f64) -> Now {
    Now::new(t).unwrap()
}
fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn of_many_racing_claims_from_separate_stores_exactly_one_wins() {
    let Some(db) = PgDb::new() else { return };
    const OWNERS: usize = 8;
    let stores: Vec<PgStore> = (0..OWNERS).map(|_| db.store()).collect();
    for round in 0..20 {
        let id = format!("job-{round}");
        stores[0].enqueue(JobId::new(&id).unwrap()).unwrap();
        // every second round the job is already leased and expires exactly at `now`
        if round % 2 == 1 {
            db.leased(&id, "old", 3, 50.0);
        }
        let barrier = Barrier::new(OWNERS);
        let results: Vec<Option<i64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let (id, barrier) = (&id, &barrier);
                    scope.spawn(move || {
                        let me = format!("w{i}");
                        barrier.wait();
                        s.claim_fence(
                            JobId::new(id).unwrap(),
                            Owner::new(&me).unwrap(),
                            now(50.0),
                            ttl(10.0),
                        )
                        .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<usize> = (0..OWNERS).filter(|i| results[*i].is_some()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let expected = if round % 2 == 1 { 4 } else { 1 };
        assert_eq!(results[winners[0]], Some(expected));
        let row = db.row(&id).unwrap();
        assert_eq!(row.owner, Some(format!("w{}", winners[0])));
        assert_eq!((row.fence, row.until), (expected, 60.0));
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn concurrent_claim_batches_never_hand_out_the_same_job() {
    let Some(db) = PgDb::new() else { return };
    let jobs: Vec<NewJob> = (0..300)
        .map(|i| NewJob::new(format!("j{i:03}")).unwrap().priority(i % 4))
        .collect();
    db.store().enqueue_many(&jobs).unwrap();
    let per_worker: Vec<Vec<(String, i64)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let db = &db;
                scope.spawn(move || {
                    let s = db.store();
                    let me = format!("w{w}");
                    let mut got = vec![];
                    loop {
                        let batch = s
                            .claim_batch(Owner::new(&me).unwrap(), now(0.0), ttl(60.0), bs(1 + w))
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
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn concurrent_first_starts_create_the_schema_once_and_record_each_migration() {
    let Some(db) = PgDb::new() else { return };
    // a second, brand-new schema, initialised by eight stores at once
    let schema = format!("{}_x", db.schema);
    // dropped even when an assertion below fails
    struct DropSchema<'a>(&'a PgDb, String);
    impl Drop for DropSchema<'_> {
        fn drop(&mut self) {
            self.0
                .exec(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.1));
        }
    }
    let _cleanup = DropSchema(&db, schema.clone());
    let barrier = Barrier::new(8);
    let opened: Vec<Result<PgStore, Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (db, schema, barrier) = (&db, &schema, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    PgOptions::new().schema(schema).pool_size(1).open(&db.url)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for store in &opened {
        assert!(store.is_ok(), "{store:?}");
    }
    let store = opened.into_iter().next().unwrap().unwrap();
    assert_eq!(store.schema(), schema);
    store.enqueue(JobId::new("a").unwrap()).unwrap();
    let versions = db.query_i64(&format!(
        "SELECT version::bigint FROM {schema}.schema_migrations ORDER BY version"
    ));
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7, 8]);
    // a restart changes nothing, above all no fence
    store
        .claim_fence(
            JobId::new("a").unwrap(),
            Owner::new("w").unwrap(),
            now(0.0),
            ttl(5.0),
        )
        .unwrap();
    let again = PgOptions::new().schema(&schema).open(&db.url).unwrap();
    assert_eq!(
        again
            .state(JobId::new("a").unwrap())
            .unwrap()
            .unwrap()
            .fence,
        1
    );
}

#[test]
fn bad_schema_names_and_urls_are_refused_before_connecting() {
    assert_invalid(
        PgOptions::new().schema("Bad-Name").open("host=127.0.0.1"),
        "schema",
    );
    assert_invalid(
        PgOptions::new().schema("1abc").open("host=127.0.0.1"),
        "schema",
    );
    assert_invalid(PgOptions::new().open("postgres://[::1"), "url");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn without_a_schema_option_the_tables_live_in_leasefence() {
    let Some(db) = PgDb::new() else { return };
    // the default schema; shared with other runs, so only look, never drop
    let store = PgStore::open(&db.url).unwrap();
    assert_eq!(store.schema(), "leasefence");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn truncating_the_jobs_leaves_every_count_at_zero() {
    // TRUNCATE fires no row trigger: the counts are emptied by a trigger of their own.
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    store
        .enqueue_many(&[job("a"), job("b").queue("mail").unwrap(), job("c")])
        .unwrap();
    let lease = store
        .claim_next(Owner::new("w").unwrap(), now(0.0), ttl(30.0))
        .unwrap()
        .unwrap();
    assert!(store.complete_lease(&lease, now(1.0), "r").unwrap());
    assert_eq!(store.stats(now(2.0)).unwrap().total(), 3);
    db.exec("TRUNCATE jobs");
    assert_eq!(store.stats(now(2.0)).unwrap(), leasefence::Stats::default());
    assert_eq!(store.queues(now(2.0)).unwrap(), []);
    // and they count again from zero
    store.enqueue_many(&[job("a")]).unwrap();
    let stats = store.stats(now(2.0)).unwrap();
    assert_eq!((stats.ready, stats.total()), (1, 1));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn commits_are_durable_synchronous_commit_is_on() {
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let got = store
        .complete_with(&claim_one(&store), now(1.0), "r", |tx| {
            let row = tx
                .query_one("SELECT current_setting('synchronous_commit')", &[])
                .map_err(|e| Failure(e.to_string()))?;
            Ok::<String, Failure>(row.get(0))
        })
        .unwrap();
    assert_eq!(got.as_deref(), Some("on"));
}

/// The error type of the callers' writes in `complete_with`.
#[derive(Debug, PartialEq)]
struct Failure(String);

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure(e.to_string())
    }
}

fn claim_one(store: &PgStore) -> leasefence::Lease {
    store.enqueue_many(&[NewJob::new("j").unwrap()]).unwrap();
    store
        .claim_next(Owner::new("w").unwrap(), now(0.0), ttl(30.0))
        .unwrap()
        .unwrap()
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_next_walks_the_ready_index_in_order_without_sorting() {
    let Some(db) = PgDb::new() else { return };
    let bind = |sql: &str| {
        sql.lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join(" ")
            .replace("$5::text[]", "ARRAY['emails', 'default']::text[]")
            .replace("$1", "'w'")
            .replace("$2", "1")
            .replace("$3", "0")
            .replace("$4", "1")
    };
    for sql in [
        include_str!("../../src/postgres/sql/claim_next.sql"),
        include_str!("../../src/postgres/sql/claim_batch.sql"),
    ] {
        let plan = db.explain(&bind(sql));
        assert!(plan.contains("jobs_ready"), "{plan}");
        assert!(!plan.contains("Sort"), "{plan}");
    }
    // Named queues: each queue's own walk of jobs_queue_ready.
    let plan = db.explain(&bind(include_str!(
        "../../src/postgres/sql/claim_batch_in.sql"
    )));
    assert!(plan.contains("jobs_queue_ready"), "{plan}");
    assert!(!plan.contains("jobs_ready "), "{plan}");
}

/// The attempt ledger's trigger finds a job's attempts by the primary key even under a
/// generic plan made while `attempts` held a handful of rows — the plan PL/pgSQL keeps for a
/// session after five calls, which walked the whole ledger for every claim and completion.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn the_ledger_trigger_never_walks_the_whole_ledger_under_a_generic_plan() {
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let ids: Vec<NewJob> = (0..4)
        .map(|i| NewJob::new(format!("j{i}")).unwrap())
        .collect();
    store.enqueue_many(&ids).unwrap();
    for _ in 0..3 {
        let lease = store
            .claim_next(Owner::new("w").unwrap(), now(0.0), ttl(30.0))
            .unwrap()
            .unwrap();
        assert!(
            store
                .complete(
                    JobId::new(&lease.job_id).unwrap(),
                    Owner::new("w").unwrap(),
                    lease.fence,
                    now(1.0),
                    "ok"
                )
                .unwrap()
        );
    }
    // What autovacuum's first pass leaves: statistics of a ledger of three rows.
    db.exec("ANALYZE attempts");
    // A claim and a completion under the session's generic plans, in one transaction whose
    // table counters pg_stat_xact_user_tables reads back.
    db.exec(
        "BEGIN;
         SET LOCAL plan_cache_mode = force_generic_plan;
         UPDATE jobs SET owner = 'v', fence = fence + 1, until = 100 WHERE id = 'j3';
         UPDATE jobs SET done = 1, outcome = 'completed' WHERE id = 'j3';",
    );
    let scans = db.query_i64(
        "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'attempts'::regclass
         UNION ALL
         SELECT idx_scan FROM pg_stat_xact_user_tables WHERE relid = 'attempts'::regclass",
    );
    db.exec("COMMIT");
    // no walk of the ledger; the completion found its attempt through the index
    assert_eq!(scans, [0, 1]);
    assert_eq!(
        db.query_strings("SELECT outcome FROM attempts WHERE job_id = 'j3'"),
        ["completed"]
    );
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn complete_with_commits_the_callers_writes_only_with_a_current_lease() {
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let lease = claim_one(&store);
    db.exec("CREATE TABLE sent (id TEXT PRIMARY KEY, fence BIGINT)");
    let write = |tx: &mut leasefence::postgres::Transaction<'_>| {
        tx.execute(
            "INSERT INTO sent VALUES ($1, $2)",
            &[&lease.job_id, &lease.fence],
        )
        .map(drop)
        .map_err(|e| Failure(e.to_string()))
    };
    // a failing write rolls the completion back too
    let failed = store.complete_with(&lease, now(1.0), "r", |tx| {
        write(tx)?;
        Err::<(), Failure>(Failure("boom".into()))
    });
    assert_eq!(failed, Err(Failure("boom".into())));
    assert_eq!(db.row("j").unwrap().done, 0);
    assert_eq!(db.query_i64("SELECT count(*) FROM sent"), [0]);
    // then it commits both
    assert_eq!(
        store.complete_with(&lease, now(2.0), "r", write),
        Ok(Some(()))
    );
    assert_eq!(db.row("j").unwrap().result.as_deref(), Some("r"));
    assert_eq!(db.query_i64("SELECT fence FROM sent"), [1]);
    // a stale lease runs nothing
    let ran = store.complete_with(&lease, now(3.0), "again", |_| {
        panic!("must not run for a stale lease");
        #[allow(unreachable_code)]
        Ok::<(), Failure>(())
    });
    assert_eq!(ran, Ok(None));
    // The refusal is counted in the attempt ledger, though the caller's writes were not made.
    assert_eq!(db.refusals("j"), [(1, "complete".into(), 1)]);
    assert_eq!(
        db.attempts("j")
            .iter()
            .map(|a| a.brief().2)
            .collect::<Vec<_>>(),
        [Some("completed")]
    );
}

#[test]
fn an_unreachable_server_is_a_clear_connection_error() {
    // a port nobody listens on
    let err = PgOptions::new()
        .connect_timeout(Duration::from_secs(2))
        .open("host=127.0.0.1 port=1 user=postgres dbname=test password=secret")
        .unwrap_err();
    match &err {
        Error::CannotConnect { target, .. } => {
            assert!(
                target.contains("127.0.0.1") && target.contains("port=1"),
                "{target}"
            );
        }
        other => panic!("expected CannotConnect, got {other:?}"),
    }
    assert!(!err.to_string().contains("secret"), "{err}");
    assert!(
        err.to_string().contains("cannot connect to PostgreSQL"),
        "{err}"
    );
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_row_lock_held_past_the_lock_timeout_is_busy_and_changes_nothing() {
    let Some(db) = PgDb::new() else { return };
    let store = db
        .options()
        .lock_timeout(Duration::from_millis(100))
        .open(&db.url)
        .unwrap();
    db.leased("job", "holder", 2, 100.0);
    let commit = db.hold("UPDATE jobs SET until = 200 WHERE id = 'job'");
    let err = store
        .renew(
            JobId::new("job").unwrap(),
            Owner::new("holder").unwrap(),
            2,
            now(0.0),
            ttl(10.0),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Busy), "{err:?}");
    assert!(err.is_retryable());
    commit();
    assert_eq!(db.row("job").unwrap().until, 200.0);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_purge_racing_an_enqueue_of_the_same_id_never_lets_a_fence_be_issued_again() {
    // Under READ COMMITTED an enqueue whose snapshot predates the purge's commit could insert
    // the id afresh with fence 0; the per-id lock makes it see the fence floor.
    let Some(db) = PgDb::new() else { return };
    let (a, b) = (db.store(), db.store());
    let j = JobId::new("j").unwrap();
    let w = Owner::new("w").unwrap();
    let mut highest = 0;
    for round in 0..150 {
        let t = f64::from(round) * 10.0;
        a.enqueue(j).unwrap();
        let f = a.claim_fence(j, w, now(t), ttl(5.0)).unwrap().unwrap();
        assert!(f > highest, "round {round}: fence {f} after {highest}");
        highest = f;
        assert!(a.complete(j, w, f, now(t + 1.0), "r").unwrap());
        let barrier = Barrier::new(2);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                barrier.wait();
                a.purge(now(t + 2.0)).unwrap()
            });
            scope.spawn(|| {
                barrier.wait();
                b.enqueue(j).unwrap()
            });
        });
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_connection_killed_mid_statement_is_a_clear_error_changes_nothing_and_the_next_call_works() {
    let Some(db) = PgDb::new() else { return };
    let store = db
        .options()
        .pool_size(1)
        .lock_timeout(Duration::from_secs(30))
        .open(&db.url)
        .unwrap();
    db.leased("job", "w", 1, 100.0);
    let (holder, commit) = db.hold_with_pid("UPDATE jobs SET result = 'held' WHERE id = 'job'");
    let renew = || {
        store.renew(
            JobId::new("job").unwrap(),
            Owner::new("w").unwrap(),
            1,
            now(0.0),
            ttl(10.0),
        )
    };
    std::thread::scope(|scope| {
        let waiting = scope.spawn(renew);
        // the renew waits for the holder's row lock: kill its backend there
        let mut waiter = vec![];
        for _ in 0..200 {
            waiter = db.query_i64(&format!(
                "SELECT pid::bigint FROM pg_stat_activity \
                 WHERE {holder} = ANY(pg_blocking_pids(pid))"
            ));
            if !waiter.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert_eq!(waiter.len(), 1, "the renew never waited for the lock");
        let killed = db.query_i64(&format!(
            "SELECT {}::bigint WHERE pg_terminate_backend({})",
            waiter[0], waiter[0]
        ));
        assert_eq!(killed, [waiter[0]], "pg_terminate_backend refused");
        let err = waiting.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::ConnectionLost { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("lost the connection to PostgreSQL"),
            "{err}"
        );
        assert!(!err.is_retryable());
    });
    commit();
    // no partial state: the killed renew did not extend the lease
    let row = db.row("job").unwrap();
    assert_eq!((row.until, row.result.as_deref()), (100.0, Some("held")));
    // the pool replaced the dead connection: the next call succeeds
    assert!(renew().unwrap());
    assert_eq!(db.row("job").unwrap().until, 10.0);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn with_the_database_clock_workers_whose_clocks_disagree_never_both_hold_a_live_lease() {
    let Some(db) = PgDb::new() else { return };
    let behind = db.options().database_clock(true).open(&db.url).unwrap();
    let ahead = db.options().database_clock(true).open(&db.url).unwrap();
    assert!(behind.uses_database_clock() && !db.store().uses_database_clock());
    let debug = format!("{behind:?}");
    assert!(
        debug.starts_with("PgStore")
            && debug.contains(&db.schema)
            && debug.contains("database_clock: true"),
        "{debug}"
    );
    let (j, a, b) = (
        JobId::new("job").unwrap(),
        Owner::new("A").unwrap(),
        Owner::new("B").unwrap(),
    );
    behind.enqueue(j).unwrap();
    let real = behind.now().unwrap().seconds();
    // A's local clock runs 1000 s behind, B's 1000 s ahead: far more than the 30 s ttl.
    let fence = behind
        .claim_fence(j, a, now(real - 1000.0), ttl(30.0))
        .unwrap()
        .unwrap();
    let until = db.row("job").unwrap().until;
    assert!(
        until >= real + 30.0 && until < real + 40.0,
        "{until} vs {real}"
    );
    assert_eq!(
        ahead
            .claim_fence(j, b, now(real + 1000.0), ttl(30.0))
            .unwrap(),
        None
    );
    assert!(
        behind
            .renew(j, a, fence, now(real - 1000.0), ttl(30.0))
            .unwrap()
    );
    assert!(
        behind
            .complete(j, a, fence, now(real - 1000.0), "A's")
            .unwrap()
    );
    assert_eq!(db.row("job").unwrap().result.as_deref(), Some("A's"));

    // The contrast: on the callers' clocks, B's fast clock takes A's live lease.
    let caller = db.store();
    caller.enqueue(JobId::new("other").unwrap()).unwrap();
    let o = JobId::new("other").unwrap();
    caller
        .claim_fence(o, a, now(real - 1000.0), ttl(30.0))
        .unwrap()
        .unwrap();
    assert_eq!(
        caller
            .claim_fence(o, b, now(real + 1000.0), ttl(30.0))
            .unwrap(),
        Some(2)
    );

    // Leases handed out and renewed on the database clock carry the stored `until`.
    behind
        .enqueue_many(&[NewJob::new("queued").unwrap()])
        .unwrap();
    let mut lease = behind.claim_next(a, now(0.0), ttl(60.0)).unwrap().unwrap();
    assert_eq!(db.row("queued").unwrap().until, lease.until);
    assert!(lease.until >= real + 60.0, "{lease:?}");
    let first = lease.until;
    assert!(
        behind
            .renew_lease(&mut lease, now(0.0), ttl(120.0))
            .unwrap()
    );
    assert_eq!(db.row("queued").unwrap().until, lease.until);
    assert!(lease.until > first);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn the_worker_runtime_drains_a_postgresql_queue() {
    let Some(db) = PgDb::new() else { return };
    let jobs: Vec<NewJob> = (0..40)
        .map(|i| NewJob::new(format!("job-{i:02}")).unwrap())
        .collect();
    db.store().enqueue_many(&jobs).unwrap();
    let options = db.options().pool_size(1);
    let url = db.url.clone();
    let stats = leasefence::Worker::builder(move || options.open(&url))
        .concurrency(4)
        .ttl(30.0)
        .poll_interval(Duration::from_millis(20))
        .drain(true)
        .build(|ctx| Ok(format!("{} by {}", ctx.job_id(), ctx.owner())))
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(
        (stats.claimed, stats.completed, stats.failed()),
        (40, 40, 0)
    );
    let rows = db.rows();
    assert_eq!(rows.len(), 40);
    for row in rows {
        assert_eq!((row.done, row.fence), (1, 1), "{row:?}");
        let owner = row.owner.unwrap();
        assert_eq!(row.result, Some(format!("{} by {owner}", row.id)));
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_next_skips_a_job_another_transaction_has_locked() {
    // SKIP LOCKED: a worker never queues behind a row another transaction holds (another
    // worker's claim in flight, an operator's UPDATE); it takes the next ready job at once.
    let Some(db) = PgDb::new() else { return };
    let store = db
        .options()
        .lock_timeout(Duration::from_millis(300))
        .open(&db.url)
        .unwrap();
    store
        .enqueue_many(&[
            NewJob::new("best").unwrap().priority(9),
            NewJob::new("next").unwrap(),
        ])
        .unwrap();
    let commit = db.hold("UPDATE jobs SET priority = priority WHERE id = 'best'");
    let started = std::time::Instant::now();
    let lease = store
        .claim_next(Owner::new("w").unwrap(), now(0.0), ttl(10.0))
        .unwrap()
        .unwrap();
    assert_eq!((lease.job_id.as_str(), lease.fence), ("next", 1));
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "it waited for the lock"
    );
    commit();
    // the locked job was left alone, and is handed out once it is free
    assert_eq!(db.row("best").unwrap(), Row::fresh("best"));
    let lease = store
        .claim_next(Owner::new("w").unwrap(), now(0.0), ttl(10.0))
        .unwrap()
        .unwrap();
    assert_eq!(lease.job_id, "best");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_batch_skips_jobs_another_transaction_has_locked() {
    // The same SKIP LOCKED in claim_batch.sql: a batch takes what is free at once and leaves
    // a row another transaction holds for later.
    let Some(db) = PgDb::new() else { return };
    let store = db
        .options()
        .lock_timeout(Duration::from_millis(300))
        .open(&db.url)
        .unwrap();
    store
        .enqueue_many(&[
            NewJob::new("best").unwrap().priority(9),
            NewJob::new("next").unwrap(),
            NewJob::new("last").unwrap(),
        ])
        .unwrap();
    let commit = db.hold("UPDATE jobs SET priority = priority WHERE id = 'best'");
    let batch = store
        .claim_batch(Owner::new("w").unwrap(), now(0.0), ttl(10.0), bs(3))
        .unwrap();
    let got: Vec<&str> = batch.iter().map(|l| l.job_id.as_str()).collect();
    assert_eq!(got, ["next", "last"]);
    commit();
    assert_eq!(db.row("best").unwrap(), Row::fresh("best"));
    let rest = store
        .claim_batch(Owner::new("w").unwrap(), now(0.0), ttl(10.0), bs(3))
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!((rest[0].job_id.as_str(), rest[0].fence), ("best", 1));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_nul_byte_in_any_text_argument_is_an_invalid_argument_and_changes_nothing() {
    // PostgreSQL text cannot hold NUL (SQLite's can): refused up front as an invalid argument
    // naming the argument, never sent to the server as a backend encoding error.
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let (j, w) = (JobId::new("j").unwrap(), Owner::new("w").unwrap());
    store.enqueue(j).unwrap();
    let fence = store
        .claim_fence(j, w, now(0.0), ttl(10.0))
        .unwrap()
        .unwrap();
    let before = db.rows();
    let nul = Owner::new("w\0x").unwrap();
    assert_invalid(store.claim_fence(j, nul, now(20.0), ttl(10.0)), "owner");
    assert_invalid(store.renew(j, nul, fence, now(1.0), ttl(10.0)), "owner");
    assert_invalid(store.release(j, nul, fence), "owner");
    assert_invalid(store.complete(j, w, fence, now(1.0), "r\0"), "result");
    let lease = leasefence::Lease {
        queue: leasefence::DEFAULT_QUEUE.to_owned(),
        kind: None,
        job_id: "j".into(),
        owner: "w".into(),
        fence,
        until: 10.0,
        payload: None,
        priority: 0,
        max_attempts: 0,
        last_error: None,
        attempt: 1,
    };
    assert_invalid(store.fail(&lease, now(1.0), "e\0", None), "error");
    assert_invalid(
        store.complete_with(&lease, now(1.0), "r\0", |_| Ok::<(), Error>(())),
        "result",
    );
    assert_invalid(store.admit(res("res\0"), 1), "resource");
    assert_invalid(store.enqueue_many(&[NewJob::new("k\0").unwrap()]), "job_id");
    assert_eq!(db.rows(), before);
    assert_eq!(db.query_i64("SELECT count(*) FROM fence_gate"), [0]);
    // the holder's own calls still work afterwards
    assert!(store.complete(j, w, fence, now(1.0), "r").unwrap());
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn each_sqlstate_is_sorted_into_its_error_kind() {
    // A killed backend reaches the driver either as SQLSTATE 57P01 or as a closed socket,
    // depending on timing; a trigger raising each SQLSTATE checks every mapping every time.
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    db.leased("job", "w", 1, 100.0);
    db.exec(
        "CREATE TABLE raise_code (code TEXT); \
         CREATE FUNCTION raise_code() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN RAISE EXCEPTION 'raised on purpose' USING ERRCODE = (SELECT code FROM raise_code); \
         END $$; \
         CREATE TRIGGER raise_code BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION raise_code();",
    );
    let before = db.rows();
    for (code, kind) in [
        ("40001", "busy"),
        ("40P01", "busy"),
        ("55P03", "busy"),
        ("57014", "busy"),
        ("53100", "full"),
        ("25006", "read-only"),
        ("08006", "lost"),
        ("08003", "lost"),
        ("57P01", "lost"),
        ("57P02", "lost"),
        ("57P03", "lost"),
        ("22012", "backend"),
    ] {
        db.exec(&format!(
            "DELETE FROM raise_code; INSERT INTO raise_code VALUES ('{code}')"
        ));
        let err = store
            .renew(
                JobId::new("job").unwrap(),
                Owner::new("w").unwrap(),
                1,
                now(0.0),
                ttl(10.0),
            )
            .unwrap_err();
        let got = match &err {
            Error::Busy => "busy",
            Error::ConnectionLost { target, .. } => {
                assert!(target.contains("dbname="), "{code}: {target}");
                "lost"
            }
            Error::StorageFull { database } => {
                assert!(database.contains("dbname="), "{code}: {database}");
                "full"
            }
            Error::ReadOnly { database, .. } => {
                assert!(database.contains("dbname="), "{code}: {database}");
                "read-only"
            }
            Error::Backend(_) => "backend",
            other => panic!("{code}: unexpected {other:?}"),
        };
        assert_eq!(got, kind, "{code}: {err:?}");
        assert_eq!(err.is_retryable(), kind == "busy", "{code}");
    }
    assert_eq!(db.rows(), before);
}

/// An error the driver raises itself, with no SQLSTATE and on an open connection — here a
/// parameter the changed column's type no longer accepts, after a hand-made `ALTER TABLE` — is
/// a backend error, not a lost connection: retrying on a new connection would not help.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_driver_error_on_an_open_connection_is_a_backend_error_not_a_lost_connection() {
    let Some(db) = PgDb::new() else { return };
    db.exec("ALTER TABLE jobs ALTER COLUMN priority TYPE integer");
    let store = db.store();
    let err = store
        .enqueue_jobs(&[leasefence::NewJob::new("a").unwrap().priority(3)])
        .unwrap_err();
    match &err {
        Error::Backend(e) => assert!(e.to_string().contains("type"), "{e}"),
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert!(db.rows().is_empty());
    // the connection is still good: a call that binds no priority works
    assert_eq!(store.state(JobId::new("a").unwrap()).unwrap(), None);
}

/// One lock per id made a batch of tens of thousands of jobs fail with "out of shared memory"
/// (PostgreSQL's lock table holds ~64 locks per connection, with some room to spare); the id
/// locks are per bucket now.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_batch_of_thirty_thousand_jobs_is_enqueued_in_one_call_and_purged_in_one_call() {
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let jobs: Vec<NewJob> = (0..30_000)
        .map(|i| NewJob::new(format!("bulk-{i:05}")).unwrap())
        .collect();
    let inserted = store.enqueue_many(&jobs).unwrap();
    assert!(inserted.iter().all(|&b| b) && inserted.len() == 30_000);
    assert_eq!(db.query_i64("SELECT count(*) FROM jobs"), [30_000]);
    db.exec("UPDATE jobs SET done = 1, outcome = 'completed', finished_at = 1, fence = 1");
    assert_eq!(store.purge(now(2.0)).unwrap(), 30_000);
    assert_eq!(db.query_i64("SELECT count(*) FROM fence_floor"), [30_000]);
    assert_eq!(db.rows(), vec![]);
}

/// How many rows PostgreSQL's planner believes `jobs` holds (-1: never counted), read on the
/// independent connection.
fn planner_rows(db: &PgDb) -> Vec<i64> {
    db.query_i64("SELECT reltuples::int8 FROM pg_class WHERE oid = 'jobs'::regclass")
}

/// A large enqueue into a table the planner has not counted yet refreshes its statistics, so
/// the claim's choice of the best ready job walks `jobs_ready` to the first row instead of
/// sorting every ready job (milliseconds per claim on a backlog of thousands, until autovacuum
/// gets there). A small enqueue costs no such round trip.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_large_enqueue_leaves_the_planner_counting_the_jobs_so_claims_walk_the_ready_index() {
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    let batch = |from: usize, n: usize| -> Vec<NewJob> {
        (from..from + n)
            .map(|i| NewJob::new(format!("many-{i:05}")).unwrap())
            .collect()
    };
    store.enqueue_many(&batch(0, 10)).unwrap();
    assert_eq!(
        planner_rows(&db),
        [-1],
        "ten jobs: the planner is not asked"
    );
    // From 1,000 jobs in one call on, a count behind the call's own rows is refreshed.
    store.enqueue_many(&batch(10, 1_000)).unwrap();
    assert_eq!(planner_rows(&db), [1_010]);
    store.enqueue_many(&batch(1_010, 500)).unwrap();
    assert_eq!(
        planner_rows(&db),
        [1_010],
        "500 jobs: the planner is not asked"
    );
    store.enqueue_many(&batch(1_510, 5_000)).unwrap();
    assert_eq!(planner_rows(&db), [6_510]);
    // claim_next.sql's choice of the best ready job, as the planner now plans it.
    let plan = db
        .query_strings(
            "EXPLAIN SELECT id FROM jobs \
              WHERE done = 0 AND until <= 1e12 AND not_before <= 1e12 \
                AND (max_attempts = 0 OR attempts < max_attempts) \
                AND queue NOT IN (SELECT name FROM queues WHERE paused) \
              ORDER BY priority DESC, not_before, seq LIMIT 1 FOR UPDATE SKIP LOCKED",
        )
        .join("\n");
    assert!(
        plan.contains("Index Scan using jobs_ready") && !plan.contains("Sort"),
        "{plan}"
    );
    let first = store
        .claim_next(Owner::new("w").unwrap(), now(1.0), ttl(10.0))
        .unwrap()
        .unwrap();
    assert_eq!((first.job_id.as_str(), first.fence), ("many-00000", 1));
}

/// The hot-path statements are prepared once per pooled connection and reused: the session's
/// prepared statements (read inside `complete_with`, on the store's own connection) do not grow
/// with the number of calls.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn statements_are_prepared_once_per_connection_and_reused() {
    let Some(db) = PgDb::new() else { return };
    let store = db.options().pool_size(1).open(&db.url).unwrap();
    let prepared = |store: &PgStore, id: &str| -> i64 {
        let mut lease = store
            .claim_next(Owner::new("w").unwrap(), now(0.0), ttl(10.0))
            .unwrap()
            .unwrap_or_else(|| panic!("{id} claimable"));
        assert!(store.renew_lease(&mut lease, now(1.0), ttl(10.0)).unwrap());
        store.state(JobId::new(id).unwrap()).unwrap().unwrap();
        store
            .complete_with(&lease, now(2.0), "r", |tx| {
                tx.query_one("SELECT count(*) FROM pg_prepared_statements", &[])
                    .map(|r| r.get::<_, i64>(0))
                    .map_err(|e| Failure(e.to_string()))
            })
            .unwrap()
            .unwrap()
    };
    let jobs: Vec<NewJob> = (0..20)
        .map(|i| NewJob::new(format!("j{i:02}")).unwrap())
        .collect();
    store.enqueue_many(&jobs).unwrap();
    let first = prepared(&store, "j00");
    assert!(first >= 4, "claim_next, renew, state and complete: {first}");
    for i in 1..20 {
        assert_eq!(
            prepared(&store, &format!("j{i:02}")),
            first,
            "call round {i}"
        );
    }
    assert_eq!(
        db.query_i64("SELECT count(*) FROM jobs WHERE done = 1"),
        [20]
    );
}
