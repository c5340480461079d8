//! PostgreSQL over TLS: `sslmode=require` connects encrypted (the server's own view,
//! `pg_stat_ssl`, read through an independent connection, says so) or not at all; without it
//! (`disable`, or `prefer`, the default) the connection stays plaintext, as it always was; and
//! `verify-full`, which would need a certificate check the store does not make, is refused by
//! name.

use leasefence::postgres::{Client, NoTls};
use leasefence::{Error, JobId, NewJob, Now, Store};

use crate::common::*;

/// Whether this build has TLS (the feature `postgres-tls`, on whenever the workspace is built
/// together). A build without it — `cargo test -p leasefence` alone — must refuse
/// `sslmode=require` by name rather than connect in plaintext; that is checked here.
fn has_tls(db: &PgDb) -> bool {
    match db
        .options()
        .pool_size(1)
        .open(&with(&db.url, "sslmode", "require"))
    {
        Err(e) if e.argument() == Some("url") => {
            assert!(e.to_string().contains("postgres-tls"), "{e}");
            eprintln!(
                "this build has no postgres-tls: only its refusal of sslmode=require was checked"
            );
            false
        }
        _ => true,
    }
}

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
    if !has_tls(&db) {
        return;
    }
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
    let spaced = format!("{} sslmode = verify-full", db.url);
    let spaced = if db.url.contains("://") {
        with(&db.url, "sslmode", "verify-full")
    } else {
        spaced
    };
    for target in [
        with(&db.url, "sslmode", "verify-full"),
        with(&db.url, "sslmode", "verify-ca"),
        spaced,
    ] {
        let err = db.options().open(&target).expect_err("refused");
        assert_eq!(err.argument(), Some("url"), "{err}");
        assert!(
            err.to_string().contains("sslmode=require encrypts"),
            "{err}"
        );
    }
}

/// The test database as a libpq string of `words` in place of its host, with `sslmode=require`
/// and `application_name=app`; `None` when its host is not an IP address on TCP.
fn require_via(db: &PgDb, host: &str, app: &str) -> String {
    let config: leasefence::postgres::Config = db.url.parse().unwrap();
    let user = config.get_user().unwrap_or("postgres");
    let dbname = config.get_dbname().unwrap_or(user);
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let password = config
        .get_password()
        .map(|p| {
            format!(
                " password='{}'",
                String::from_utf8_lossy(p).replace('\'', "\\'")
            )
        })
        .unwrap_or_default();
    format!(
        "{host} port={port} user={user} dbname={dbname}{password} sslmode=require \
         application_name={app}"
    )
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn require_works_with_hostaddr_alone_and_skips_tls_on_a_unix_socket() {
    let Some(db) = PgDb::new() else { return };
    if !has_tls(&db) {
        return;
    }
    let mut raw = Client::connect(&db.url, NoTls).unwrap();
    let ssl_on = raw.query_one("SHOW ssl", &[]).unwrap().get::<_, String>(0) == "on";
    let config: leasefence::postgres::Config = db.url.parse().unwrap();
    let ip = config.get_hosts().iter().find_map(|h| match h {
        leasefence::postgres::config::Host::Tcp(name) => name.parse::<std::net::IpAddr>().ok(),
        #[cfg(unix)]
        leasefence::postgres::config::Host::Unix(_) => None,
    });
    match (ip, ssl_on) {
        (Some(ip), true) => {
            // `hostaddr=` alone gives the handshake no name: the address stands in for one.
            let app = format!("lf_tls_addr_{}", db.schema);
            let store = db
                .options()
                .pool_size(1)
                .open(&require_via(&db, &format!("hostaddr={ip}"), &app))
                .unwrap();
            store.stats(Now::new(0.0).unwrap()).unwrap();
            assert_eq!(encrypted(&mut raw, &app), Some(true));
            // With a host name as well, the name is the handshake's; nothing is added.
            let app = format!("lf_tls_both_{}", db.schema);
            let both = format!("host=localhost hostaddr={ip}");
            let store = db
                .options()
                .pool_size(1)
                .open(&require_via(&db, &both, &app))
                .unwrap();
            store.stats(Now::new(0.0).unwrap()).unwrap();
            assert_eq!(encrypted(&mut raw, &app), Some(true));
        }
        _ => eprintln!("the test database is not on an IP address with ssl on: hostaddr skipped"),
    }
    // A Unix socket has no TLS: sslmode=require connects there all the same, as libpq does.
    let socket = raw
        .query_one("SHOW unix_socket_directories", &[])
        .unwrap()
        .get::<_, String>(0);
    let dir = socket
        .split(',')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if dir.starts_with('/') && std::path::Path::new(&dir).is_dir() {
        let app = format!("lf_tls_sock_{}", db.schema);
        match db
            .options()
            .pool_size(1)
            .open(&require_via(&db, &format!("host={dir}"), &app))
        {
            Ok(store) => {
                store.stats(Now::new(0.0).unwrap()).unwrap();
                assert_eq!(encrypted(&mut raw, &app), Some(false));
            }
            // A socket the server's pg_hba.conf does not trust is not what this case is about.
            Err(Error::CannotConnect { source, .. })
                if source.to_string().contains("password")
                    || source.to_string().contains("authentication") =>
            {
                eprintln!("the Unix socket asks for credentials this test lacks: skipped")
            }
            Err(e) => panic!("sslmode=require over a Unix socket: {e}"),
        }
    } else {
        eprintln!("no Unix socket directory on this machine: skipped");
    }
}
