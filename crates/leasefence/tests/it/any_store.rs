//! `AnyStore` and `Target`: a database string picks the backend at run time, and every call
//! reaches that backend with its own semantics (the overridden provided methods included).
//! What is stored is read back through an independent connection.

use crate::common::*;
use leasefence::{
    AnyOptions, AnyStore, JobId, NewJob, Now, Owner, SqliteOptions, Store, Target, Ttl,
};

fn now(t: f64) -> Now {
    Now::new(t).unwrap()
}
fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}

#[test]
fn a_path_opens_the_sqlite_file_and_every_call_reaches_it() {
    let db = Db::empty();
    let store = AnyStore::open(db.path.to_str().unwrap()).unwrap();
    assert_eq!(store.backend(), "sqlite");
    assert_eq!(store.as_sqlite().unwrap().path(), db.path);
    assert!(store.as_postgres().is_none());

    let (job, a) = (JobId::new("j").unwrap(), Owner::new("A").unwrap());
    assert!(store.enqueue(job).unwrap());
    assert!(!store.enqueue(job).unwrap());
    let fence = store
        .claim_fence(job, a, now(0.0), ttl(10.0))
        .unwrap()
        .unwrap();
    assert_eq!(db.row("j").unwrap().fence, 1);
    assert!(store.renew(job, a, fence, now(5.0), ttl(10.0)).unwrap());
    assert_eq!(db.row("j").unwrap().until, 15.0);
    // The stale fence is refused through AnyStore as through SqliteStore.
    assert!(
        !store
            .complete(job, a, fence - 1, now(6.0), "stale")
            .unwrap()
    );
    assert!(store.complete(job, a, fence, now(6.0), "ok").unwrap());
    let row = db.row("j").unwrap();
    assert_eq!((row.result.as_deref(), row.done), (Some("ok"), 1));
    assert_eq!(store.state(job).unwrap().unwrap(), row.as_state());

    // The queue and the lease conveniences.
    store
        .enqueue_many(&[NewJob::new("q").unwrap().priority(3)])
        .unwrap();
    let mut lease = store.claim_next(a, now(20.0), ttl(10.0)).unwrap().unwrap();
    assert_eq!((lease.job_id.as_str(), lease.until), ("q", 30.0));
    assert!(store.renew_lease(&mut lease, now(25.0), ttl(10.0)).unwrap());
    assert_eq!(lease.until, 35.0);
    assert_eq!(db.row("q").unwrap().until, 35.0);
    assert!(store.release_lease(&lease).unwrap());
    assert_eq!(db.row("q").unwrap().owner, None);
    assert_eq!(store.stats(now(40.0)).unwrap().total(), 2);

    // `sqlite://PATH` is the same file.
    let again = AnyStore::open(&format!("sqlite://{}", db.path.display())).unwrap();
    assert_eq!(again.state(job).unwrap().unwrap(), row.as_state());
}

#[test]
fn sqlite_options_apply_to_a_path() {
    let db = Db::empty();
    // Without init, a missing file is an error and nothing is created.
    let err = AnyOptions::new()
        .sqlite(SqliteOptions::new().init(false))
        .open(db.path.to_str().unwrap())
        .unwrap_err();
    assert!(matches!(err, leasefence::Error::CannotOpen { .. }), "{err}");
    assert!(!db.path.exists());
}

#[test]
fn bad_database_strings_are_invalid_arguments_naming_db() {
    assert_invalid(AnyStore::open(""), "db");
    assert_invalid(AnyStore::open("   "), "db");
    assert_invalid(AnyStore::open("sqlite://"), "db");
    // A URL that does not parse names `db`, not PgOptions' `url`; nothing is connected to.
    assert_invalid(AnyStore::open("postgres://u@h:notaport/d"), "db");
    // A libpq key=value string selects PostgreSQL too; `sqlite://` keeps such a name a file.
    assert_eq!(
        Target::parse("host=127.0.0.1 user=postgres").unwrap(),
        Target::Postgres("host=127.0.0.1 user=postgres".into())
    );
    assert_eq!(
        Target::parse("sqlite://host=1.db").unwrap(),
        Target::Sqlite("host=1.db".into())
    );
}

#[test]
fn a_target_tells_which_backend_it_names() {
    for (db, postgres) in [
        ("jobs.db", false),
        ("sqlite:///var/lib/jobs.db", false),
        ("sqlite://host=1.db", false),
        ("postgres://app@db.internal/jobs", true),
        ("postgresql://app@db.internal/jobs", true),
        ("host=db.internal user=app", true),
    ] {
        let target = Target::parse(db).unwrap();
        assert_eq!(target.is_postgres(), postgres, "{db}");
        assert_eq!(target.sqlite_path().is_some(), !postgres, "{db}");
    }
}

#[test]
fn a_quoted_password_of_any_length_is_masked_and_the_rest_shown() {
    // Quoted values of odd and even length, with an escaped quote inside: the value ends at
    // its own closing quote, whatever comes before it.
    for (password, shown) in [
        ("'abc'", "host=h password=*** dbname=d"),
        ("'ab'", "host=h password=*** dbname=d"),
        ("'a\\'b c'", "host=h password=*** dbname=d"),
        ("''", "host=h password=*** dbname=d"),
    ] {
        let target = Target::parse(&format!("host=h password={password} dbname=d")).unwrap();
        assert_eq!(target.to_string(), shown, "{password}");
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_postgres_url_opens_pgstore_and_its_overrides_are_kept() {
    let Some(pg) = PgDb::new() else { return };
    let url = as_url(&pg.url);
    assert!(Target::parse(&url).unwrap().is_postgres());
    // The database clock: PgStore ignores the `now` given and reads the server's.
    let store = AnyOptions::new()
        .postgres(pg.options().database_clock(true))
        .open(&url)
        .unwrap();
    assert_eq!(store.backend(), "postgres");
    assert_eq!(store.as_postgres().unwrap().schema(), pg.schema);

    let (job, a) = (JobId::new("j").unwrap(), Owner::new("A").unwrap());
    assert!(store.enqueue(job).unwrap());
    assert_eq!(pg.row("j"), Some(Row::fresh("j")));
    let server = store.as_postgres().unwrap().now().unwrap().seconds();
    let mut lease = store.claim_next(a, now(0.0), ttl(30.0)).unwrap().unwrap();
    assert!(
        lease.until >= server + 30.0,
        "{} < {server} + 30",
        lease.until
    );
    // PgStore overrides renew_lease to compute `until` from the clock it judged by; the
    // trait's default would set 0 + 100. AnyStore must keep the override.
    assert!(store.renew_lease(&mut lease, now(0.0), ttl(100.0)).unwrap());
    assert!(lease.until >= server + 100.0, "{}", lease.until);
    assert_eq!(pg.row("j").unwrap().until, lease.until);
    // A stale fence is refused; the current one completes.
    assert!(
        !store
            .complete(job, a, lease.fence - 1, now(0.0), "stale")
            .unwrap()
    );
    assert!(store.complete_lease(&lease, now(0.0), "ok").unwrap());
    let row = pg.row("j").unwrap();
    assert_eq!(
        (row.result.as_deref(), row.done, row.fence),
        (Some("ok"), 1, 1)
    );
    assert_eq!(store.state(job).unwrap().unwrap(), row.as_state());
}

/// An `AnyStore` hands out its backend's watch: an idle worker on it waits to be woken, as on
/// the backend's own store, instead of polling.
#[test]
fn an_any_store_on_sqlite_has_the_files_watch() {
    let db = Db::new();
    let (any, other) = (db.any_store(), open(&db));
    crate::watch::wakes_on_enqueue_retry_and_resume_and_stays_quiet_otherwise(&any, &other);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn an_any_store_on_postgresql_has_the_schemas_watch() {
    let Some(db) = PgDb::new() else { return };
    let (any, other) = (db.any_store(db.options()), db.store());
    crate::watch::wakes_on_enqueue_retry_and_resume_and_stays_quiet_otherwise(&any, &other);
}

/// With the database clock, an `AnyStore` reads the server's clock as its `PgStore` does.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn an_any_store_on_postgresql_reads_the_database_clock() {
    let Some(db) = PgDb::new() else { return };
    let any = db.any_store(db.options().database_clock(true));
    let before = db.server_now();
    let read = any
        .database_now()
        .unwrap()
        .expect("the database clock is on");
    assert!(read.seconds() >= before && read.seconds() <= db.server_now());
}
