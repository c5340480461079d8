//! `PgOptions::database_clock(true)`: every operation that judges time decides by the
//! database's clock, never by the `now` the caller passes. Each case runs through a `PgStore`
//! and through an `AnyStore` opened from a URL, once with the caller's clock 1,000 s behind the
//! database's and once 1,000 s ahead; the rows are arranged 100 s either side of the database's
//! clock, so judging by the caller's clock in either direction gives a different answer.
//!
//! Judged by the database's clock: `claim`, `renew` (and `renew_lease`), `complete`,
//! `complete_batch`, `claim_next`, `claim_batch`, `fail`, `cancel`, `list`, `stats`, `queues`,
//! `overview`, `find_jobs` and `PgStore::complete_with`. Not judged by any clock: `release`,
//! `admit`. Given absolute times that the caller must take from the database's clock itself
//! (`PgStore::now`): `not_before`, `retry_at` and `purge`'s cutoff.

use crate::common::*;
use leasefence::{Failed, JobId, PgStore, Stats, Status, Store};

/// How far the callers' clocks are off, each way.
const SKEWS: [f64; 2] = [-1000.0, 1000.0];
/// How far the arranged leases and schedules are from the database's clock, each way.
const MARGIN: f64 = 100.0;

fn id(s: &str) -> JobId<'_> {
    JobId::new(s).unwrap()
}

/// The database's clock around a call: `t0` before arranging it, `caller` the skewed `now`
/// the caller passes.
struct At {
    t0: f64,
    skew: f64,
    caller: leasefence::Now,
}

impl At {
    fn new(db: &PgDb, skew: f64) -> At {
        let t0 = db.server_now();
        At {
            t0,
            skew,
            caller: now(t0 + skew),
        }
    }

    /// Asserts that `value` is `offset` after some reading of the database's clock taken
    /// between `t0` and now.
    #[track_caller]
    fn assert_server_time(&self, db: &PgDb, value: f64, offset: f64, what: &str) {
        let t1 = db.server_now();
        assert!(
            value >= self.t0 + offset && value <= t1 + offset,
            "caller {:+} s: {what} = {value}, not in [{} + {offset}, {t1} + {offset}] (the \
             database's clock)",
            self.skew,
            self.t0
        );
    }
}

/// Runs `case` on a fresh schema per store (`PgStore`, then `AnyStore`), each opened with
/// the database clock, once per skew (the jobs emptied in between).
fn each_skewed_caller(case: impl Fn(&PgDb, &dyn Store, &At)) {
    for through_any_store in [false, true] {
        let Some(db) = PgDb::new() else { return };
        let options = db.options().database_clock(true);
        let (pg, any);
        let store: &dyn Store = if through_any_store {
            any = db.any_store(options);
            &any
        } else {
            pg = options.open(&db.url).expect("open PgStore");
            &pg
        };
        for skew in SKEWS {
            db.exec("DELETE FROM jobs");
            case(&db, store, &At::new(&db, skew));
        }
    }
}

/// Enqueues `live` (leased by `w` under fence 3 until 100 s from now) and `expired` (the same,
/// until 100 s ago); returns their rows.
fn live_and_expired(db: &PgDb, s: &dyn Store, at: &At) -> (Row, Row) {
    s.enqueue_many(&[job("live"), job("expired")]).unwrap();
    (
        db.leased("live", "w", 3, at.t0 + MARGIN),
        db.leased("expired", "w", 3, at.t0 - MARGIN),
    )
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_takes_only_a_lease_expired_by_the_database_clock_and_sets_until_from_it() {
    each_skewed_caller(|db, s, at| {
        let (live, _) = live_and_expired(db, s, at);
        let caller = at.caller.seconds();
        assert_eq!(
            claim_by_name(s, "live", "v", caller, 10.0).unwrap(),
            None,
            "caller {:+} s: a live lease was taken",
            at.skew
        );
        assert_eq!(db.row("live").unwrap(), live);
        assert_eq!(
            claim_by_name(s, "expired", "v", caller, 10.0).unwrap(),
            Some(4),
            "caller {:+} s: an expired lease was refused",
            at.skew
        );
        let row = db.row("expired").unwrap();
        assert_eq!((row.owner.as_deref(), row.fence), (Some("v"), 4));
        at.assert_server_time(db, row.until, 10.0, "until");
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn renew_extends_only_a_lease_live_by_the_database_clock_and_from_it() {
    each_skewed_caller(|db, s, at| {
        let (_, expired) = live_and_expired(db, s, at);
        assert!(
            s.renew(id("live"), owner("w"), 3, at.caller, ttl(500.0))
                .unwrap(),
            "caller {:+} s: a live lease was not renewed",
            at.skew
        );
        at.assert_server_time(db, db.row("live").unwrap().until, 500.0, "renewed until");
        assert!(
            !s.renew(id("expired"), owner("w"), 3, at.caller, ttl(500.0))
                .unwrap(),
            "caller {:+} s: an expired lease was revived",
            at.skew
        );
        assert_eq!(db.row("expired").unwrap(), expired);
        // renew_lease also reports the new end from the database's clock.
        let mut lease = lease_of("live", "w", 3, 0.0);
        assert!(s.renew_lease(&mut lease, at.caller, ttl(700.0)).unwrap());
        at.assert_server_time(db, lease.until, 700.0, "lease.until");
        assert_eq!(db.row("live").unwrap().until, lease.until);
        let mut stale = lease_of("expired", "w", 3, at.t0 - MARGIN);
        assert!(!s.renew_lease(&mut stale, at.caller, ttl(700.0)).unwrap());
        assert_eq!(stale.until, at.t0 - MARGIN);
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn complete_stores_only_under_a_lease_live_by_the_database_clock() {
    each_skewed_caller(|db, s, at| {
        let (_, expired) = live_and_expired(db, s, at);
        assert!(
            s.complete(id("live"), owner("w"), 3, at.caller, "ok")
                .unwrap(),
            "caller {:+} s: a live lease could not complete",
            at.skew
        );
        let row = db.row("live").unwrap();
        assert_eq!((row.result.as_deref(), row.done), (Some("ok"), 1));
        at.assert_server_time(
            db,
            db.queue_row("live").finished_at.unwrap(),
            0.0,
            "finished_at",
        );
        assert!(
            !s.complete(id("expired"), owner("w"), 3, at.caller, "late")
                .unwrap(),
            "caller {:+} s: an expired lease completed",
            at.skew
        );
        assert_eq!(db.row("expired").unwrap(), expired);
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn complete_batch_stores_only_under_leases_live_by_the_database_clock() {
    each_skewed_caller(|db, s, at| {
        let (_, expired) = live_and_expired(db, s, at);
        let (live_lease, expired_lease) = (
            lease_of("live", "w", 3, at.t0 + MARGIN),
            lease_of("expired", "w", 3, at.t0 - MARGIN),
        );
        assert_eq!(
            s.complete_batch(&[(&live_lease, "a"), (&expired_lease, "b")], at.caller)
                .unwrap(),
            [true, false],
            "caller {:+} s",
            at.skew
        );
        assert_eq!(db.row("live").unwrap().result.as_deref(), Some("a"));
        at.assert_server_time(
            db,
            db.queue_row("live").finished_at.unwrap(),
            0.0,
            "finished_at",
        );
        assert_eq!(db.row("expired").unwrap(), expired);
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn complete_with_runs_the_write_only_under_a_lease_live_by_the_database_clock() {
    let Some(db) = PgDb::new() else { return };
    let s: PgStore = db.options().database_clock(true).open(&db.url).unwrap();
    for skew in SKEWS {
        db.exec("DELETE FROM jobs");
        let at = At::new(&db, skew);
        let (_, expired) = live_and_expired(&db, &s, &at);
        let wrote = s
            .complete_with(&lease_of("live", "w", 3, 0.0), at.caller, "ok", |_| {
                Ok::<_, leasefence::Error>("written")
            })
            .unwrap();
        assert_eq!(wrote, Some("written"), "caller {skew:+} s");
        at.assert_server_time(
            &db,
            db.queue_row("live").finished_at.unwrap(),
            0.0,
            "finished_at",
        );
        let wrote = s
            .complete_with(&lease_of("expired", "w", 3, 0.0), at.caller, "late", |_| {
                Ok::<_, leasefence::Error>("written")
            })
            .unwrap();
        assert_eq!(wrote, None, "caller {skew:+} s: an expired lease completed");
        assert_eq!(db.row("expired").unwrap(), expired);
    }
}

/// Four jobs around the database's clock: `expired` (priority 1, its lease ended 100 s ago),
/// `due` (priority 0, due since 100 s ago), and two of priority 5 that must not be handed out:
/// `live` (leased for another 100 s) and `scheduled` (due in 100 s).
fn around_the_clock(db: &PgDb, s: &dyn Store, at: &At) {
    s.enqueue_many(&[
        job("expired").priority(1),
        job("due").not_before(at.t0 - MARGIN).unwrap(),
        job("live").priority(5),
        job("scheduled")
            .priority(5)
            .not_before(at.t0 + MARGIN)
            .unwrap(),
    ])
    .unwrap();
    db.leased("expired", "old", 3, at.t0 - MARGIN);
    db.leased("live", "old", 3, at.t0 + MARGIN);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_next_hands_out_what_is_claimable_by_the_database_clock() {
    each_skewed_caller(|db, s, at| {
        around_the_clock(db, s, at);
        let mut got = vec![];
        while let Some(lease) = s.claim_next(owner("v"), at.caller, ttl(10.0)).unwrap() {
            at.assert_server_time(db, lease.until, 10.0, "lease.until");
            assert_eq!(db.row(&lease.job_id).unwrap().until, lease.until);
            got.push(lease.job_id);
            assert!(got.len() <= 4, "handed out again: {got:?}");
        }
        assert_eq!(got, ["expired", "due"], "caller {:+} s", at.skew);
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_batch_hands_out_what_is_claimable_by_the_database_clock() {
    each_skewed_caller(|db, s, at| {
        around_the_clock(db, s, at);
        let batch = s
            .claim_batch(owner("v"), at.caller, ttl(10.0), bs(10))
            .unwrap();
        assert_eq!(ids(&batch), ["expired", "due"], "caller {:+} s", at.skew);
        for lease in &batch {
            at.assert_server_time(db, lease.until, 10.0, "lease.until");
            assert_eq!(db.row(&lease.job_id).unwrap().until, lease.until);
        }
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn fail_is_accepted_only_under_a_lease_live_by_the_database_clock() {
    each_skewed_caller(|db, s, at| {
        let (_, expired) = live_and_expired(db, s, at);
        s.enqueue_many(&[job("backoff")]).unwrap();
        db.leased("backoff", "w", 1, at.t0 + MARGIN);
        let retry_at = now(at.t0 + 50.0);
        assert_eq!(
            s.fail(
                &lease_of("live", "w", 3, 0.0),
                at.caller,
                "e",
                Some(retry_at)
            )
            .unwrap(),
            Some(Failed::Retrying { at: at.t0 + 50.0 }),
            "caller {:+} s: a live lease could not fail",
            at.skew
        );
        let row = db.row("live").unwrap();
        assert_eq!((row.owner, row.fence, row.done), (None, 3, 0));
        assert_eq!(db.queue_row("live").not_before, at.t0 + 50.0);
        assert_eq!(
            s.fail(
                &lease_of("expired", "w", 3, 0.0),
                at.caller,
                "e",
                Some(retry_at)
            )
            .unwrap(),
            None,
            "caller {:+} s: fail accepted on an expired lease",
            at.skew
        );
        assert_eq!(db.row("expired").unwrap(), expired);
        // Without retry_at the backoff (1 s and jitter for a first attempt) starts from the
        // database's clock.
        let Some(Failed::Retrying { at: when }) = s
            .fail(&lease_of("backoff", "w", 1, 0.0), at.caller, "e", None)
            .unwrap()
        else {
            panic!("caller {:+} s: the backoff lease could not fail", at.skew)
        };
        let t1 = db.server_now();
        assert!(
            when >= at.t0 && when <= t1 + 10.0,
            "caller {:+} s: retry at {when}, not from the database's clock {}..{t1}",
            at.skew,
            at.t0
        );
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn cancel_records_the_database_clock_as_the_finish_time() {
    each_skewed_caller(|db, s, at| {
        let (live, _) = live_and_expired(db, s, at);
        assert!(s.cancel(id("live"), at.caller).unwrap());
        at.assert_server_time(
            db,
            db.queue_row("live").finished_at.unwrap(),
            0.0,
            "finished_at",
        );
        assert_eq!(db.row("live").unwrap().fence, live.fence);
        // the holder is refused afterwards
        assert!(
            !s.complete(id("live"), owner("w"), 3, at.caller, "r")
                .unwrap()
        );
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn list_and_stats_judge_each_status_by_the_database_clock() {
    each_skewed_caller(|db, s, at| {
        around_the_clock(db, s, at);
        let statuses: Vec<(String, Status)> = s
            .list(at.caller, None, None, 100)
            .unwrap()
            .into_iter()
            .map(|j| (j.state.id, j.status))
            .collect();
        let expected = [
            ("expired", Status::Expired),
            ("due", Status::Ready),
            ("live", Status::Leased),
            ("scheduled", Status::Scheduled),
        ]
        .map(|(id, st)| (id.to_string(), st));
        assert_eq!(statuses, expected, "caller {:+} s", at.skew);
        assert_eq!(
            s.list(at.caller, Some(Status::Leased), None, 100)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            s.stats(at.caller).unwrap(),
            Stats {
                ready: 1,
                scheduled: 1,
                leased: 1,
                expired: 1,
                ..Stats::default()
            },
            "caller {:+} s",
            at.skew
        );
    });
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn overview_queues_and_find_jobs_judge_each_status_by_the_database_clock() {
    for through_any_store in [false, true] {
        let Some(db) = PgDb::new() else { return };
        let options = db.options().database_clock(true);
        let (pg, any);
        let store: &dyn Viewed = if through_any_store {
            any = db.any_store(options);
            &any
        } else {
            pg = options.open(&db.url).expect("open PgStore");
            &pg
        };
        for skew in SKEWS {
            db.exec("DELETE FROM jobs");
            let at = At::new(&db, skew);
            around_the_clock(&db, store, &at);
            let want = Stats {
                ready: 1,
                scheduled: 1,
                leased: 1,
                expired: 1,
                ..Stats::default()
            };
            let o = store.overview(at.caller).unwrap();
            at.assert_server_time(&db, o.now, 0.0, "overview.now");
            assert_eq!(o.totals, want, "caller {skew:+} s");
            assert_eq!(
                store.queues(at.caller).unwrap()[0].stats,
                want,
                "caller {skew:+} s"
            );
            assert_eq!(o.oldest_ready.map(|(id, _)| id).as_deref(), Some("due"));
            let found = |status: Status| -> Vec<String> {
                let query = leasefence::JobQuery {
                    status: Some(status),
                    ..leasefence::JobQuery::default()
                };
                let page = store.find_jobs(at.caller, &query).unwrap();
                page.jobs.into_iter().map(|j| j.state.id).collect()
            };
            assert_eq!(found(Status::Leased), ["live"], "caller {skew:+} s");
            assert_eq!(found(Status::Expired), ["expired"], "caller {skew:+} s");
            assert_eq!(found(Status::Ready), ["due"], "caller {skew:+} s");
        }
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn database_now_is_the_servers_clock_only_with_the_database_clock() {
    let Some(db) = PgDb::new() else { return };
    let with = db.options().database_clock(true);
    let stores: [Box<dyn Store>; 4] = [
        Box::new(with.clone().open(&db.url).unwrap()),
        Box::new(db.any_store(with)),
        Box::new(db.store()),
        Box::new(db.any_store(db.options())),
    ];
    for (k, store) in stores.iter().enumerate() {
        let t0 = db.server_now();
        let read = store.database_now().unwrap();
        if k < 2 {
            let read = read.expect("the database clock is on").seconds();
            assert!(read >= t0 && read <= db.server_now(), "store {k}: {read}");
        } else {
            assert_eq!(read, None, "store {k}: the caller's clock is used");
        }
    }
    let file = Db::new();
    assert_eq!(file.any_store().database_now().unwrap(), None);
}
