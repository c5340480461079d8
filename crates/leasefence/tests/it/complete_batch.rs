//! `complete_batch`: many fenced completions at once; each stale lease is refused alone.

use crate::common::*;
use leasefence::{Error, Lease, Store};

contract!(
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

contract!(
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

contract!(
    fn ids_owners_and_results_of_any_text_are_judged_and_stored_exactly(api, db, s) {
        // Quotes, backslashes, control characters and non-ASCII: what SQLite's one statement
        // receives as JSON must come out as it went in, both for the check and the result.
        let odd = [r#"q"uote"#, r"back\slash", "tab\there\n", "ünï ✓ 🎉"];
        s.enqueue_many(&odd.map(job)).unwrap();
        let mut leases = Vec::new();
        for (k, name) in odd.iter().enumerate() {
            let holder = format!("{name} owner {k}");
            let job_id = leasefence::JobId::new(name).unwrap();
            leases.push(s.claim(job_id, owner(&holder), now(0.0), ttl(30.0)).unwrap().unwrap());
        }
        let results = ["a \"quoted\" result", "c:\\path\\", "line\nbreak\u{1}", "日本語 ✓"];
        // The last lease under an owner that differs only in its escapes: refused.
        let mut lookalike = leases[3].clone();
        lookalike.owner = lookalike.owner.replace('✓', "\\u2713");
        let items: Vec<(&Lease, &str)> =
            leases.iter().zip(results).take(3).chain([(&lookalike, results[3])]).collect();
        assert_eq!(s.complete_batch(&items, now(1.0)).unwrap(), [true, true, true, false]);
        for (name, result) in odd.iter().zip(results).take(3) {
            let row = db.row(name).unwrap();
            assert_eq!((row.result.as_deref(), row.done), (Some(result), 1), "{name}");
        }
        assert_eq!(db.row(odd[3]).unwrap().done, 0);
        assert_eq!(s.complete_batch(&[(&leases[3], results[3])], now(2.0)).unwrap(), [true]);
        assert_eq!(db.row(odd[3]).unwrap().result.as_deref(), Some(results[3]));
    }
);

contract!(
    fn a_large_batch_stores_every_current_lease_and_refuses_every_stale_one(api, db, s) {
        let jobs: Vec<_> = (0..300).map(|i| job(&format!("j{i:03}"))).collect();
        s.enqueue_many(&jobs).unwrap();
        let leases = s.claim_batch(owner("w"), now(0.0), ttl(30.0), bs(300)).unwrap();
        assert_eq!(leases.len(), 300);
        // Every third one carries a fence its job never had: refused, counted, nothing stored.
        let sent: Vec<Lease> = leases
            .iter()
            .enumerate()
            .map(|(k, l)| {
                let mut l = l.clone();
                if k % 3 == 0 {
                    l.fence += 7;
                }
                l
            })
            .collect();
        let items: Vec<(&Lease, &str)> = sent.iter().map(|l| (l, l.job_id.as_str())).collect();
        let stored = s.complete_batch(&items, now(1.0)).unwrap();
        assert_eq!(stored, (0..300).map(|k| k % 3 != 0).collect::<Vec<_>>());
        for (k, lease) in leases.iter().enumerate() {
            let row = db.row(lease.job_id.as_str()).unwrap();
            match k % 3 {
                0 => assert_eq!((row.done, row.result), (0, None), "{k}"),
                _ => assert_eq!((row.done, row.result.as_deref()), (1, Some(lease.job_id.as_str())), "{k}"),
            }
        }
        assert_eq!(db.refusals("j000"), [(8, "complete".into(), 1)]);
        assert_eq!(db.refusals("j001"), []);
    }
);

/// SQLite stores a result with a NUL character whole (PostgreSQL refuses it, below), in a
/// batch as alone.
#[test]
fn on_sqlite_a_result_with_a_nul_is_stored_whole() {
    let db = Db::new();
    let s = open(&db);
    s.enqueue_many(&[job("a"), job("b"), job("c")]).unwrap();
    let leases = s
        .claim_batch(owner("w"), now(0.0), ttl(30.0), bs(3))
        .unwrap();
    let mut stale = leases[2].clone();
    stale.fence += 1;
    let stored = s
        .complete_batch(
            &[
                (&leases[0], "before\0after"),
                (&leases[1], "plain"),
                (&stale, "x\0y"),
            ],
            now(1.0),
        )
        .unwrap();
    assert_eq!(stored, [true, true, false]);
    assert_eq!(
        db.row("a").unwrap().result.as_deref(),
        Some("before\0after")
    );
    assert_eq!(db.row("b").unwrap().result.as_deref(), Some("plain"));
    assert_eq!(db.row("c").unwrap().done, 0);
    assert_eq!(db.refusals("c"), [(2, "complete".into(), 1)]);
}

/// An error inside the batch's transaction stores none of its results: the transaction is one.
#[test]
fn an_error_stores_none_of_the_results() {
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

/// Counting a refusal is part of the batch's one transaction: when it fails, the completions
/// the batch's statement had stored are undone with it.
#[test]
fn an_error_counting_a_refusal_stores_none_of_the_results() {
    let db = Db::new();
    let s = open(&db);
    s.enqueue_many(&[job("a"), job("b")]).unwrap();
    let leases = s
        .claim_batch(owner("w"), now(0.0), ttl(30.0), bs(2))
        .unwrap();
    db.raw()
        .execute_batch(
            "CREATE TRIGGER no_count BEFORE INSERT ON refusals \
             BEGIN SELECT RAISE(ABORT, 'refusal not counted'); END;",
        )
        .unwrap();
    let before = db.rows();
    let mut stale = leases[1].clone();
    stale.fence += 1;
    let err = s
        .complete_batch(&[(&leases[0], "r"), (&stale, "late")], now(1.0))
        .unwrap_err();
    assert!(err.to_string().contains("refusal not counted"), "{err}");
    assert_eq!(db.rows(), before);
    db.raw().execute_batch("DROP TRIGGER no_count").unwrap();
    // Nothing was left open: the store works on.
    assert_eq!(
        s.complete_batch(&[(&leases[0], "r")], now(2.0)).unwrap(),
        [true]
    );
    assert_eq!(db.row("a").unwrap().result.as_deref(), Some("r"));
}

/// PostgreSQL refuses a NUL in any result before it writes anything.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_bad_result_stores_none() {
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

/// An error inside the batch's one statement stores none of its results (as on SQLite).
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_an_error_stores_none_of_the_results() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    s.enqueue_many(&[job("a"), job("boom"), job("c")]).unwrap();
    let leases = s
        .claim_batch(owner("w"), now(0.0), ttl(30.0), bs(3))
        .unwrap();
    db.exec(
        "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.id = 'boom' AND NEW.done = 1 THEN RAISE EXCEPTION 'boom refused'; END IF; \
         RETURN NEW; END $$; \
         CREATE TRIGGER refuse_boom BEFORE UPDATE ON jobs FOR EACH ROW \
         EXECUTE FUNCTION refuse_boom();",
    );
    let before = db.rows();
    let results: Vec<(&Lease, &str)> = leases.iter().map(|l| (l, "r")).collect();
    let err = s.complete_batch(&results, now(1.0)).unwrap_err();
    assert!(matches!(err, Error::Backend(_)), "{err:?}");
    assert!(err.to_string().contains("boom refused"), "{err}");
    assert_eq!(db.rows(), before);
    // Nothing was left open: the store works on.
    assert_eq!(s.complete_batch(&results[..1], now(2.0)).unwrap(), [true]);
    assert_eq!(db.row("a").unwrap().result.as_deref(), Some("r"));
}

/// SQLite's one statement for the batch finds each job by its id (the primary key's index),
/// once per completion: it never walks the table.
#[test]
fn on_sqlite_the_batch_statement_looks_each_job_up_by_id() {
    let db = Db::new();
    drop(open(&db));
    let statement: String = include_str!("../../src/sqlite/sql/complete_batch.sql")
        .lines()
        .filter(|l| !l.starts_with("--"))
        .collect::<Vec<_>>()
        .join(" ")
        .replace("?1", r#"'[["a","w",1,"r"]]'"#)
        .replace("?2", "1.0");
    let plan = sqlite3(&db.path, &format!("EXPLAIN QUERY PLAN {statement}"));
    assert!(
        plan.contains("SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)"),
        "{plan}"
    );
    assert!(!plan.contains("SCAN jobs"), "{plan}");
}
