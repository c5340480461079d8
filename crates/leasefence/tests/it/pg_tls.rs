//! PostgreSQL over TLS: `sslmode=require` connects encrypted (the server's own view,
//! `pg_stat_ssl`, read through an independent connection, says so) or not at all; without it
//! (`disable`, or `prefer`, the default) the connection stays plaintext, as it always was; and
//! `verify-full`, which would need a certificate check the store does not make, is refused by
//! name.

use leasefence::postgres::{Client, NoTls};
use leasefence::{Error, JobId, NewJob, Now, Store};

use crate::common::*;

/// `url` with `key=value` added, in its own syntax (URL query or libpq words).
fn with(url: &str, key: &str, value: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let joiner = if url.contains('?') { '&' } else { '?' };
        format!("{url}{joiner}{key}={value}")
    } else {
        format!("{url} {key}={value}")
    }
}

/// Whether the backends of `application` use TLS, as the server reports them (none: `None`).
fn encrypted(raw: &mut Client, application: &str) -> Option<bool> {
    let row = raw
        .query_one(
            "SELECT bool_and(s.ssl), count(*) FROM pg_stat_ssl s \
             JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
            &[&application],
        )
        .unwrap();
    let (all, n): (Option<bool>, i64) = (row.get(0), row.get(1));
    (n > 0).then(|| all.unwrap_or(false))
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn sslmode_require_encrypts_and_the_default_stays_plaintext() {
    let Some(db) = PgDb::new() else { return };
    let mut raw = Client::connect(&db.url, NoTls).unwrap();
    let ssl_on = raw.query_one("SHOW ssl", &[]).unwrap().get::<_, String>(0) == "on";
    let app = format!("lf_tls_{}", db.schema);
    let require = with(
        &with(&db.url, "sslmode", "require"),
        "application_name",
        &app,
    );
    let opened = db.options().pool_size(1).open(&require);
    if !ssl_on {
        // A server without TLS: `require` means no connection, said as such.
        let err = opened.expect_err("require refused by a server without TLS");
        assert!(matches!(err, Error::CannotConnect { .. }), "{err:?}");
        eprintln!("the server has ssl off: only the refusal was checked");
        return;
    }
    let store = opened.unwrap();
    assert!(
        store
            .enqueue_many(&[NewJob::new("over-tls").unwrap()])
            .unwrap()[0]
    );
    assert_eq!(encrypted(&mut raw, &app), Some(true));
    let lease = store
        .claim(
            JobId::new("over-tls").unwrap(),
            leasefence::Owner::new("A").unwrap(),
            Now::new(0.0).unwrap(),
            leasefence::Ttl::new(10.0).unwrap(),
        )
        .unwrap()
        .expect("claimed over TLS");
    assert_eq!(lease.fence, 1);
    assert_eq!(db.row("over-tls").unwrap().fence, 1);
    drop(store);

    for mode in ["disable", "prefer"] {
        let app = format!("lf_plain_{mode}_{}", db.schema);
        let target = with(&with(&db.url, "sslmode", mode), "application_name", &app);
        let store = db.options().pool_size(1).open(&target).unwrap();
        store.stats(Now::new(0.0).unwrap()).unwrap();
        assert_eq!(encrypted(&mut raw, &app), Some(false), "sslmode={mode}");
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn verify_full_is_refused_by_name_before_connecting() {
    let Some(db) = PgDb::new() else { return };
    for mode in ["verify-full", "verify-ca"] {
        let err = db
            .options()
            .open(&with(&db.url, "sslmode", mode))
            .expect_err("refused");
        assert_eq!(err.argument(), Some("url"), "{err}");
        assert!(
            err.to_string().contains("sslmode=require encrypts"),
            "{err}"
        );
    }
}
