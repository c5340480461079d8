//! Step 8 — concurrent claims: exactly one winner, results in input order.

use crate::common::*;

const OWNERS: [&str; 8] = ["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"];

#[test]
fn exactly_one_of_eight_threads_wins_each_generation_in_input_order() {
    let db = Db::new();
    let mut winners = std::collections::BTreeSet::new();
    for job in 0..25 {
        let id = format!("job-{job}");
        leasefence::enqueue(&db.path, &id).unwrap();
        // three generations per job: fresh, then after each expiry
        for generation in 1..=3_i64 {
            let now = (generation * 10) as f64;
            let results = leasefence::claim_many(&db.path, &id, &OWNERS, now, 10.0).unwrap();
            assert_eq!(results.len(), OWNERS.len(), "one result per owner");
            let won: Vec<usize> = (0..OWNERS.len())
                .filter(|&i| results[i].is_some())
                .collect();
            assert_eq!(won.len(), 1, "exactly one winner: {results:?}");
            let w = won[0];
            assert_eq!(results[w], Some(generation));
            winners.insert(w);
            // input order: the stored owner is the owner at the winning index
            let row = db.row(&id).unwrap();
            assert_eq!(row.owner.as_deref(), Some(OWNERS[w]));
            assert_eq!(
                (row.fence, row.until, row.done),
                (generation, now + 10.0, 0)
            );
        }
    }
    eprintln!("winning input positions seen: {winners:?}");
}

#[test]
fn a_leased_done_or_unknown_job_gives_nobody_a_fence() {
    let db = Db::new();
    let leased = db.leased("leased", "holder", 4, 100.0);
    let done = Row {
        owner: Some("holder".into()),
        until: 1.0,
        fence: 4,
        result: Some("r".into()),
        done: 1,
        ..Row::fresh("done")
    };
    db.put(&done);
    for id in ["leased", "done", "ghost"] {
        let results = leasefence::claim_many(&db.path, id, &OWNERS, 50.0, 10.0).unwrap();
        assert_eq!(results, vec![None; OWNERS.len()], "{id}");
    }
    assert_eq!(db.rows(), vec![done, leased]);
}

#[test]
fn a_lease_ending_exactly_now_is_won_by_exactly_one() {
    let db = Db::new();
    db.leased("job", "holder", 4, 100.0);
    let results = leasefence::claim_many(&db.path, "job", &OWNERS, 100.0, 10.0).unwrap();
    assert_eq!(results.iter().filter(|r| r.is_some()).count(), 1);
    assert!(results.contains(&Some(5)));
    assert_eq!(db.row("job").unwrap().fence, 5);
}

#[test]
fn one_bad_owner_is_an_error_before_any_thread_claims() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    let before = db.rows();
    assert_invalid(
        leasefence::claim_many(&db.path, "job", &["a", "b", "", "d"], 0.0, 1.0),
        "owner",
    );
    assert_invalid(
        leasefence::claim_many(&db.path, "job", &["a", "b"], 0.0, 0.0),
        "ttl",
    );
    assert_invalid(
        leasefence::claim_many(&db.path, "job", &["a"], f64::NAN, 1.0),
        "now",
    );
    assert_invalid(
        leasefence::claim_many(&db.path, "", &["a"], 0.0, 1.0),
        "job_id",
    );
    assert_invalid(
        leasefence::claim_many(&db.path, "", &[], 0.0, 1.0),
        "job_id",
    );
    assert_eq!(db.rows(), before);
}

#[test]
fn no_owners_claim_nothing() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    assert_eq!(
        leasefence::claim_many(&db.path, "job", &[], 0.0, 1.0).unwrap(),
        vec![]
    );
    assert_eq!(db.rows(), vec![Row::fresh("job")]);
}

#[test]
fn a_single_owner_claims_like_claim() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    assert_eq!(
        leasefence::claim_many(&db.path, "job", &["solo"], 0.0, 5.0).unwrap(),
        vec![Some(1)]
    );
    assert_eq!(db.row("job").unwrap().owner.as_deref(), Some("solo"));
}

#[test]
fn kept_stores_on_many_threads_also_have_exactly_one_winner() {
    use leasefence::{JobId, Now, Owner, SqliteStore, Ttl};
    use std::sync::Barrier;
    let db = Db::new();
    for job in 0..20 {
        leasefence::enqueue(&db.path, &format!("job-{job}")).unwrap();
    }
    // Opened up front: a store failing to open must fail the test, not leave the other
    // threads waiting at the barrier forever.
    let stores: Vec<SqliteStore> = OWNERS
        .iter()
        .map(|_| SqliteStore::open(&db.path).unwrap())
        .collect();
    let barrier = Barrier::new(OWNERS.len());
    let per_owner: Vec<Vec<Option<i64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = OWNERS
            .iter()
            .zip(stores)
            .map(|(owner, store)| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    (0..20)
                        .map(|job| {
                            let id = format!("job-{job}");
                            store
                                .claim_fence(
                                    JobId::new(&id).unwrap(),
                                    Owner::new(owner).unwrap(),
                                    Now::new(0.0).unwrap(),
                                    Ttl::new(60.0).unwrap(),
                                )
                                .unwrap()
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for job in 0..20 {
        let won: Vec<usize> = per_owner
            .iter()
            .enumerate()
            .filter(|(_, results)| results[job].is_some())
            .map(|(o, _)| o)
            .collect();
        assert_eq!(won.len(), 1, "job {job}");
        let row = db.row(&format!("job-{job}")).unwrap();
        assert_eq!(row.owner.as_deref(), Some(OWNERS[won[0]]));
        assert_eq!(row.fence, 1);
    }
}

#[test]
fn every_owner_is_tried_not_only_the_first() {
    // The first owner's claim is made to lose (a trigger silently skips its update), so a
    // winner exists only if the other owners' claims are really made.
    let db = Db::new();
    db.raw()
        .execute_batch(
            "CREATE TRIGGER first_loses BEFORE UPDATE ON jobs WHEN NEW.owner = 'w0' \
             BEGIN SELECT RAISE(IGNORE); END;",
        )
        .unwrap();
    for job in 0..5 {
        let id = format!("job-{job}");
        leasefence::enqueue(&db.path, &id).unwrap();
        let results = leasefence::claim_many(&db.path, &id, &OWNERS, 0.0, 10.0).unwrap();
        assert_eq!(results[0], None, "{results:?}");
        let won: Vec<usize> = (0..OWNERS.len())
            .filter(|&i| results[i].is_some())
            .collect();
        assert_eq!(won.len(), 1, "exactly one winner: {results:?}");
        assert_eq!(results[won[0]], Some(1));
        let row = db.row(&id).unwrap();
        assert_eq!(row.owner.as_deref(), Some(OWNERS[won[0]]));
        assert_eq!((row.fence, row.until, row.done), (1, 10.0, 0));
    }
}

contract!(
    fn a_claim_waiting_for_the_lock_judges_the_row_as_the_holder_left_it(api, db) {
        // Step 8's lesson, made deterministic: another connection holds the write lock and has
        // already leased the job. A claim that read the row before taking the lock would see
        // it free and overwrite the holder's lease; one transaction around read and write sees
        // the committed lease and refuses.
        api.enqueue("job").unwrap();
        let commit = db.hold_until_waited("UPDATE jobs SET owner = 'holder', until = 100, fence = 7 WHERE id = 'job';");
        // commits once the claim below waits for the lock (observed on PostgreSQL)
        let commit = std::thread::spawn(commit);
        assert_eq!(api.claim("job", "w", 0.0, 10.0).unwrap(), None);
        commit.join().unwrap();
        assert_eq!(
            db.rows(),
            vec![Row { owner: Some("holder".into()), until: 100.0, fence: 7, ..Row::fresh("job") }]
        );
    }
);
