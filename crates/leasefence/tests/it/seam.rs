//! The seam's own promises, on every backend: `claim` hands out the whole lease (so no caller
//! reads the row back), the checks that moved above the seam (`BatchSize`, `Resource`) refuse
//! bad input by name before any store is touched, and nothing that holds a connection string
//! prints its password.

use leasefence::{
    AnyOptions, AnyStore, BatchSize, Error, JobId, NewJob, Now, Owner, PgOptions, Resource, Store,
    Target, Ttl,
};

use crate::common::{Db, PgDb, Probe, assert_invalid};

fn now(t: f64) -> Now {
    Now::new(t).unwrap()
}

fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}

/// `claim` returns the new fence and the stored lease end together with the job's payload,
/// priority, attempts budget and last error, exactly as `claim_next` would.
fn claim_returns_the_lease(store: &dyn Store, db: &dyn Probe) {
    store
        .enqueue_job(
            NewJob::new("resize-1")
                .unwrap()
                .payload(b"640x480".to_vec())
                .priority(7)
                .max_attempts(3),
        )
        .unwrap();
    let (job, w) = (JobId::new("resize-1").unwrap(), Owner::new("w1").unwrap());
    let lease = store
        .claim(job, w, now(100.0), ttl(30.0))
        .unwrap()
        .expect("claimable");
    let row = db.row("resize-1").unwrap();
    assert_eq!(
        (lease.job_id.as_str(), lease.owner.as_str(), lease.fence),
        ("resize-1", "w1", 1)
    );
    assert_eq!((lease.fence, lease.until), (row.fence, row.until));
    assert_eq!(lease.until, 130.0);
    assert_eq!(lease.payload.as_deref(), Some(&b"640x480"[..]));
    assert_eq!((lease.priority, lease.max_attempts), (7, 3));
    assert_eq!(lease.last_error, None);

    // A failed attempt's error comes with the next lease.
    assert!(
        store
            .fail(&lease, now(101.0), "timeout", Some(now(101.0)))
            .unwrap()
            .is_some()
    );
    let again = store.claim(job, w, now(102.0), ttl(30.0)).unwrap().unwrap();
    assert_eq!((again.fence, again.until), (2, 132.0));
    assert_eq!(again.last_error.as_deref(), Some("timeout"));
    // Refused claims return no lease and change nothing.
    let before = db.rows();
    assert_eq!(store.claim(job, w, now(103.0), ttl(30.0)).unwrap(), None);
    let unknown = JobId::new("nope").unwrap();
    assert_eq!(
        store.claim(unknown, w, now(103.0), ttl(30.0)).unwrap(),
        None
    );
    assert_eq!(db.rows(), before);
}

#[test]
fn claim_returns_the_lease_sqlite() {
    let db = Db::new();
    claim_returns_the_lease(&leasefence::SqliteStore::open(&db.path).unwrap(), &db);
}

#[test]
fn claim_returns_the_lease_any_sqlite() {
    let db = Db::new();
    let store = AnyStore::open(db.path.to_str().unwrap()).unwrap();
    claim_returns_the_lease(&store, &db);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_returns_the_lease_pg() {
    let Some(db) = PgDb::new() else { return };
    claim_returns_the_lease(&db.store(), &db);
}

#[test]
fn a_batch_size_of_zero_and_an_empty_resource_are_refused_by_name() {
    assert_invalid(BatchSize::new(0), "n");
    assert_eq!(BatchSize::new(3).unwrap().get(), 3);
    assert_eq!(BatchSize::ONE, BatchSize::new(1).unwrap());
    assert_invalid(Resource::new(""), "resource");
    assert_eq!(Resource::new("s3://b/k").unwrap().as_str(), "s3://b/k");
}

#[test]
fn now_system_reads_this_hosts_clock() {
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let reading = Now::system().seconds();
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        before <= reading && reading <= after,
        "{before} {reading} {after}"
    );
}

const SECRET: &str = "s3cret-Pa55";

/// Neither `Debug` nor `Display` of a target, of the options, of an opened store or of an
/// error prints the password of the connection string.
#[test]
fn no_password_in_debug_display_or_errors() {
    for url in [
        format!("postgres://app:{SECRET}@127.0.0.1:1/jobs"),
        // An unencoded `@` in the password: the driver takes its tail for the host.
        format!("postgres://app:pa@{SECRET}@127.0.0.1:1/jobs"),
        format!("postgresql://127.0.0.1:1/jobs?user=app&password={SECRET}"),
        // libpq key=value strings: plain, spaced around `=`, and quoted with a space inside.
        format!("host=127.0.0.1 port=1 user=app password={SECRET} dbname=jobs"),
        format!("host=127.0.0.1 port=1 user=app password = {SECRET} dbname=jobs"),
        format!("host=127.0.0.1 port=1 password='{SECRET} x\\' y' dbname=jobs"),
        // unquoted with a backslash-escaped space: one value, as libpq reads it
        format!("host=127.0.0.1 port=1 password=a\\ {SECRET} dbname=jobs"),
    ] {
        let target = Target::parse(&url).unwrap();
        let shown = format!("{target} {target:?} {target:#?}");
        assert!(!shown.contains(SECRET), "{shown}");
        // Port 1: nothing listens, so the connection fails.
        let options = AnyOptions::new().postgres(
            PgOptions::new()
                .schema("lf_never")
                .connect_timeout(std::time::Duration::from_millis(500)),
        );
        assert!(!format!("{options:?}").contains(SECRET));
        let err = options.open(&url).unwrap_err();
        assert!(matches!(err, Error::CannotConnect { .. }), "{err:?}");
        let shown = format!("{err} {err:?} {err:#?}");
        assert!(!shown.contains(SECRET), "{shown}");
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            assert!(!format!("{cause} {cause:?}").contains(SECRET));
            source = cause.source();
        }
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn an_open_store_does_not_show_its_password() {
    let Some(db) = PgDb::new() else { return };
    // The test server trusts local connections, so any password opens it; the store must
    // still never repeat it.
    let url = url_with_password(&db.url);
    assert!(url.contains(SECRET));
    let store = AnyOptions::new()
        .postgres(PgOptions::new().schema(&db.schema))
        .open(&url)
        .unwrap();
    let shown = format!("{store:?} {store:#?}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(shown.contains("Postgres"), "{shown}");
}

/// `LEASEFENCE_TEST_PG` (a URL or libpq `key=value` pairs) as a `postgres://` URL whose user
/// carries [`SECRET`] as password.
fn url_with_password(conn: &str) -> String {
    if let Some((scheme, rest)) = conn.split_once("://") {
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        return format!("{scheme}://postgres:{SECRET}@{rest}");
    }
    let pairs: std::collections::HashMap<&str, &str> = conn
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .collect();
    format!(
        "postgres://{}:{SECRET}@{}/{}",
        pairs.get("user").copied().unwrap_or("postgres"),
        pairs.get("host").copied().unwrap_or("127.0.0.1"),
        pairs.get("dbname").copied().unwrap_or("postgres"),
    )
}

/// `Worker::sqlite_with` opens every thread's store with the given options (here: NORMAL
/// commits), as a worker that needs other options than the defaults must.
#[test]
fn worker_sqlite_with_opens_every_store_with_the_options() {
    use leasefence::{SqliteOptions, Synchronous, Worker};
    let db = Db::new();
    let store = leasefence::SqliteStore::open(&db.path).unwrap();
    for id in ["a", "b", "c"] {
        store.enqueue_job(NewJob::new(id).unwrap()).unwrap();
    }
    let options = SqliteOptions::new().synchronous(Synchronous::Normal);
    let stats = Worker::sqlite_with(&db.path, options)
        .concurrency(2)
        .drain(true)
        .build(|ctx| {
            let level = ctx.store().synchronous().map_err(|e| e.to_string())?;
            Ok(format!("{level:?}"))
        })
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(stats.completed, 3);
    for id in ["a", "b", "c"] {
        assert_eq!(db.row(id).unwrap().result.as_deref(), Some("Normal"));
    }
    // The listing shows the id without reaching into the row.
    let listed = store.list(now(0.0), None, None, 10).unwrap();
    assert_eq!(
        listed.iter().map(|j| j.id()).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
}
