//! `renew_batch`: many leases renewed at one `now` in one transaction, each judged exactly as
//! `renew` judges it. Every case asserts the per-item answers and the stored rows, read back
//! through the independent probes of `common`.

use crate::common::*;
use leasefence::{Error, Lease, NewJob, Now, Owner, SqliteStore, Store, Ttl};

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

/// Defines a case once and runs it on both backends: `sqlite` (a kept `SqliteStore`) and `pg`
/// (a `PgStore` on a fresh schema; ignored with the reason without `LEASEFENCE_TEST_PG`).
macro_rules! renew_batch_case {
    (fn $name:ident($db:ident, $s:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn case($db: &dyn Probe, $s: &dyn Store) $body

            #[test]
            fn sqlite() {
                let db = Db::new();
                let s = SqliteStore::open(&db.path).unwrap();
                case(&db, &s);
            }

            #[test]
            #[cfg_attr(not(leasefence_pg), ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case")]
            fn pg() {
                let Some(db) = PgDb::new() else { return };
                let s = db.store();
                case(&db, &s);
            }
        }
    };
}

renew_batch_case!(
    fn renews_each_live_lease_and_refuses_each_stale_one_alone(db, s) {
        s.enqueue_many(&[job("a"), job("b"), job("c"), job("d")]).unwrap();
        let leases = s.claim_batch(owner("w"), now(10.0), ttl(30.0), bs(4)).unwrap();
        let [a, b, c, d] = [0, 1, 2, 3].map(|k| leases[k].clone());
        assert_eq!([&a, &b, &c, &d].map(|l| l.job_id.as_str()), ["a", "b", "c", "d"]);
        // b: a made-up later fence; c: another owner; d: finished already; ghost: unknown.
        let mut stale_fence = b.clone();
        stale_fence.fence += 1;
        let mut other_owner = c.clone();
        other_owner.owner = "intruder".into();
        assert!(s.complete_lease(&d, now(11.0), "done").unwrap());
        let mut ghost = a.clone();
        ghost.job_id = "ghost".into();
        let before = db.rows();
        let renewed = s
            .renew_batch(&[&a, &stale_fence, &other_owner, &d, &ghost, &a], now(20.0), ttl(30.0))
            .unwrap();
        // a twice: judged one after the other, the second renews it to the same `until` again.
        assert_eq!(renewed, [true, false, false, false, false, true]);
        let row_a = db.row("a").unwrap();
        assert_eq!(
            (row_a.owner.as_deref(), row_a.fence, row_a.until, row_a.done),
            (Some("w"), 1, 50.0, 0)
        );
        // Every refused item left its row exactly as it was; no row appeared.
        for (k, id) in ["b", "c", "d"].iter().enumerate() {
            assert_eq!(db.row(id).as_ref(), before.iter().find(|r| r.id == *id), "item {k}");
        }
        assert_eq!(db.row("b").unwrap().until, 40.0);
        assert_eq!(db.row("ghost"), None);
        assert_eq!(db.rows().len(), before.len());
        // The ones still held renew on; nothing asked, nothing done.
        assert_eq!(s.renew_batch(&[&b, &c], now(21.0), ttl(30.0)).unwrap(), [true, true]);
        assert_eq!((db.row("b").unwrap().until, db.row("c").unwrap().until), (51.0, 51.0));
        assert_eq!(s.renew_batch(&[], now(22.0), ttl(30.0)).unwrap(), Vec::<bool>::new());
    }
);

renew_batch_case!(
    fn never_revives_an_expired_lease(db, s) {
        // a expires exactly now (now == until is expired), b a moment later; nobody took a.
        let a = db.leased("a", "w", 3, 100.0);
        db.leased("b", "w", 3, 100.5);
        let lease = |id: &str, until: f64| Lease {
            queue: leasefence::DEFAULT_QUEUE.to_owned(),
            kind: None,
            job_id: id.into(),
            owner: "w".into(),
            fence: 3,
            until,
            payload: None,
            priority: 0,
            max_attempts: 0,
            last_error: None,
            attempt: 3,
        };
        let (la, lb) = (lease("a", 100.0), lease("b", 100.5));
        let renewed = s.renew_batch(&[&la, &lb], now(100.0), ttl(30.0)).unwrap();
        assert_eq!(renewed, [false, true]);
        assert_eq!(db.row("a").unwrap(), a);
        assert_eq!(db.row("b").unwrap().until, 130.0);
        // Later still, a stays expired: never revived, even though its owner and fence match.
        assert_eq!(s.renew_batch(&[&la], now(101.0), ttl(30.0)).unwrap(), [false]);
        assert_eq!(db.row("a").unwrap(), a);
        // And the comparison is with now, not with now + ttl: a lease live for another
        // second is renewed with a ttl of ten.
        assert_eq!(s.renew_batch(&[&lb], now(129.0), ttl(10.0)).unwrap(), [true]);
        assert_eq!(db.row("b").unwrap().until, 139.0);
    }
);

renew_batch_case!(
    fn a_re_claimed_job_refuses_the_older_holder_in_a_batch(db, s) {
        s.enqueue_many(&[job("a")]).unwrap();
        let old = s.claim_next(owner("w1"), now(0.0), ttl(5.0)).unwrap().unwrap();
        let new = s.claim_next(owner("w2"), now(6.0), ttl(5.0)).unwrap().unwrap();
        assert_eq!((old.fence, new.fence), (1, 2));
        let renewed = s.renew_batch(&[&old, &new], now(7.0), ttl(5.0)).unwrap();
        assert_eq!(renewed, [false, true]);
        let row = db.row("a").unwrap();
        assert_eq!((row.owner.as_deref(), row.fence, row.until), (Some("w2"), 2, 12.0));
    }
);

renew_batch_case!(
    fn a_lease_end_that_rounds_back_to_now_is_an_error_and_renews_none(db, s) {
        s.enqueue_many(&[job("a"), job("b")]).unwrap();
        let leases = s.claim_batch(owner("w"), now(0.0), ttl(30.0), bs(2)).unwrap();
        let before = db.rows();
        // A lease end that rounds back to now (the clock reading too large to add a ttl to):
        // the clock named, and nothing renewed.
        let err = s
            .renew_batch(&[&leases[0], &leases[1]], now(1e308), ttl(1e12))
            .unwrap_err();
        assert_invalid::<()>(Err(err), "now");
        assert_eq!(db.rows(), before);
        // The store works on.
        assert_eq!(s.renew_batch(&[&leases[0]], now(1.0), ttl(30.0)).unwrap(), [true]);
    }
);

/// An error inside the batch's transaction renews none of its leases: the transaction is one.
#[test]
fn sqlite_an_error_renews_none_of_the_leases() {
    let db = Db::new();
    let s = SqliteStore::open(&db.path).unwrap();
    s.enqueue_many(&[job("a"), job("boom"), job("c")]).unwrap();
    let leases = s
        .claim_batch(owner("w"), now(0.0), ttl(30.0), bs(3))
        .unwrap();
    db.raw()
        .execute_batch(
            "CREATE TRIGGER boom BEFORE UPDATE OF until ON jobs WHEN NEW.id = 'boom' \
             BEGIN SELECT RAISE(ABORT, 'boom refused'); END;",
        )
        .unwrap();
    let before = db.rows();
    let all: Vec<&Lease> = leases.iter().collect();
    let err = s.renew_batch(&all, now(1.0), ttl(30.0)).unwrap_err();
    assert!(matches!(err, Error::Backend(_)), "{err:?}");
    assert_eq!(db.rows(), before);
    // The transaction was rolled back, not left open: the store works on.
    assert_eq!(
        s.renew_batch(&all[..1], now(2.0), ttl(30.0)).unwrap(),
        [true]
    );
    assert_eq!(db.row("a").unwrap().until, 32.0);
}

/// PostgreSQL refuses an item it cannot send (a NUL in the owner) before it renews anything.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn pg_a_bad_item_renews_none_of_the_leases() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    s.enqueue_many(&[job("a"), job("b")]).unwrap();
    let leases = s
        .claim_batch(owner("w"), now(0.0), ttl(30.0), bs(2))
        .unwrap();
    let mut bad = leases[1].clone();
    bad.owner = "nul\0".into();
    let before = db.rows();
    let err = s
        .renew_batch(&[&leases[0], &bad], now(1.0), ttl(30.0))
        .unwrap_err();
    assert_invalid::<()>(Err(err), "owner");
    assert_eq!(db.rows(), before);
}
