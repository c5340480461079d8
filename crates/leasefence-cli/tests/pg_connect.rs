//! Connecting to PostgreSQL with `--db`: a libpq `key=value` string is PostgreSQL as a URL is,
//! and a failed connection names the server's own reason (unknown database, connection
//! refused) at once, without printing the password.
//!
//! The server comes from `LEASEFENCE_TEST_PG` (`host=127.0.0.1 user=postgres dbname=test`); the
//! cases that need it are ignored without it. The refused case needs no server.

use std::time::{Duration, Instant};

use leasefence::postgres::{Client, NoTls};

mod support;
use support::Run;

/// `LEASEFENCE_TEST_PG` as given (a `key=value` string, the form these cases are about).
fn pg_conn() -> String {
    std::env::var("LEASEFENCE_TEST_PG").expect("LEASEFENCE_TEST_PG is set with cfg leasefence_pg")
}

/// `conn` with its `dbname` replaced (or added).
fn with_dbname(conn: &str, dbname: &str) -> String {
    let mut words: Vec<String> = conn
        .split_whitespace()
        .filter(|w| !w.starts_with("dbname="))
        .map(str::to_owned)
        .collect();
    words.push(format!("dbname={dbname}"));
    words.join(" ")
}

/// The binary run in a fresh directory with `args`, nothing inherited from the environment.
fn lf(args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    Run::of(dir.path(), args, None, &[])
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn an_unknown_database_is_named_by_the_server_and_the_password_is_not_shown() {
    let db = format!(
        "{} password=secret",
        with_dbname(&pg_conn(), "nope_does_not_exist")
    );
    for verb in [&["init"][..], &["stats"], &["state", "j"]] {
        let mut args = vec!["--db", db.as_str()];
        args.extend_from_slice(verb);
        let started = Instant::now();
        let run = lf(&args);
        run.error("does not exist").error("nope_does_not_exist");
        assert!(
            run.stderr.contains("hint: the server at"),
            "a hint that the server answered; {run:#?}"
        );
        assert!(!run.stderr.contains("secret"), "{run:#?}");
        assert!(started.elapsed() < Duration::from_secs(4), "{run:#?}");
    }
}

#[test]
fn a_refused_connection_says_so_within_seconds() {
    // Nothing listens on port 1 of the loopback: the kernel refuses at once.
    let started = Instant::now();
    let run = lf(&[
        "--db",
        "host=127.0.0.1 port=1 user=postgres password=secret dbname=test",
        "stats",
    ]);
    let took = started.elapsed();
    // No server listening yet passes by itself: exit 3, run it again (as for a `serve` that
    // cannot be reached), with the hint to check the address.
    run.busy("Connection refused").busy("port=1");
    assert!(
        run.stderr.contains("hint: no PostgreSQL server answered"),
        "{run:#?}"
    );
    assert!(!run.stderr.contains("secret"), "{run:#?}");
    assert!(
        took < Duration::from_secs(3),
        "refused within seconds, not at the pool's timeout: {took:?}"
    );
    // The same as a URL.
    lf(&[
        "--db",
        "postgres://postgres:secret@127.0.0.1:1/test",
        "init",
    ])
    .busy("Connection refused");
    // With --json: the error object says it is worth retrying.
    let run = lf(&[
        "--db",
        "postgres://postgres:secret@127.0.0.1:1/test",
        "--json",
        "stats",
    ]);
    run.busy("Connection refused");
    let failure = run.json();
    assert_eq!(
        (&failure["error"], &failure["retryable"], &failure["exit"]),
        (
            &serde_json::json!("cannot_connect"),
            &serde_json::json!(true),
            &serde_json::json!(3)
        ),
        "{failure}"
    );
    assert!(!run.stdout.contains("secret"), "{run:#?}");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_key_value_string_works_for_init_and_stats() {
    let conn = pg_conn();
    let schema = format!("lf_kv_{}", std::process::id());
    let args = |verb: &[&'static str]| {
        let mut all = vec![
            "--db".to_owned(),
            conn.clone(),
            "--pg-schema".to_owned(),
            schema.clone(),
        ];
        all.extend(verb.iter().map(|v| (*v).to_owned()));
        all
    };
    let run = |verb: &[&'static str]| {
        let all = args(verb);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        lf(&all)
    };
    run(&["init"])
        .ok()
        .says(&format!("initialised {conn}, schema {schema}"));
    run(&["enqueue", "kv-1"]).ok();
    run(&["stats"])
        .ok()
        .says("ready      1")
        .says("total      1");

    // Read back independently: the row is in that schema.
    let mut client = Client::connect(&conn, NoTls).unwrap();
    let ids: Vec<String> = client
        .query(&format!("SELECT id FROM \"{schema}\".jobs"), &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    client
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .unwrap();
    assert_eq!(ids, ["kv-1"]);
}

/// `--help` shows where `--db` may come from, never the value `LEASEFENCE_DB` holds: it may
/// carry a password.
#[test]
fn help_never_shows_the_database_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    for db in [
        "postgres://app:hunter2secret@db.internal.example/jobs",
        "host=db.internal.example user=app password=hunter2secret dbname=jobs",
    ] {
        for args in [&["--help"][..], &["claim", "--help"], &["serve", "--help"]] {
            let run = Run::of(dir.path(), args, None, &[("LEASEFENCE_DB", db)]);
            run.status(0);
            assert!(run.stdout.contains("LEASEFENCE_DB"), "{run:#?}");
            assert!(!run.stdout.contains("hunter2secret"), "{run:#?}");
            assert!(!run.stdout.contains("db.internal.example"), "{run:#?}");
        }
    }
}

#[test]
fn a_refused_connection_on_init_is_not_blamed_on_the_credentials() {
    // `init` puts the redacted --db (`… password=*** …`) into its error context; the hint must
    // still be the one `stats` gives for the same refused connection.
    let run = lf(&[
        "--db",
        "host=127.0.0.1 port=1 user=postgres password=secret dbname=test",
        "init",
    ]);
    run.busy("Connection refused");
    assert!(
        run.stderr.contains("hint: no PostgreSQL server answered"),
        "nothing answered, so the credentials were never checked; {run:#?}"
    );
    assert!(!run.stderr.contains("refused the credentials"), "{run:#?}");
}
