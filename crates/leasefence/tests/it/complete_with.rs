//! `complete_with`: the caller's own writes commit in the completion's transaction, only under
//! a current lease.

use crate::common::*;
use leasefence::{Error, Lease, SqliteStore, Store};

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
    // Each refusal is counted in the attempt ledger under the fence that tried, though the
    // caller's writes were not made.
    assert_eq!(
        Probe::refusals(&db, "j"),
        [(1, "complete".into(), 2), (2, "complete".into(), 1)]
    );
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
