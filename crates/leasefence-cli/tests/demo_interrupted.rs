//! `demo` stopped by a signal while it runs: its temporary database goes as on a normal end —
//! the SQLite file's folder, or (on PostgreSQL) its schema — and it exits 130.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

/// Runs `demo` with `args` until it prints its `database:` line, sends `sig`, and returns the
/// exit status and that line.
/// Runs in `dir`, which is also its `TMPDIR`.
fn interrupt(dir: &std::path::Path, args: &[&str], sig: &str) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_leasefence"))
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .env_remove("LEASEFENCE_DB")
        .env_remove("LEASEFENCE_PG_SCHEMA")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let database = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|line| line.starts_with("database:"))
        .expect("the demo names its database first");
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    // Drain the rest, so that a full pipe cannot hold the demo up.
    lines.for_each(drop);
    (child.wait().unwrap().code(), database)
}

#[test]
fn an_interrupted_demo_removes_its_temporary_file() {
    for sig in ["INT", "TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let args = ["demo", "--jobs", "5000", "--ttl", "2"];
        let (code, database) = interrupt(dir.path(), &args, sig);
        assert_eq!(code, Some(130), "SIG{sig}: {database}");
        // "database: /tmp/…/leasefence-demo-XXXX/demo.db (a fresh temporary file, …)"
        let path = database
            .trim_start_matches("database: ")
            .split(" (")
            .next()
            .unwrap();
        let folder = std::path::Path::new(path).parent().unwrap();
        assert!(
            folder
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("leasefence-demo-"),
            "{database}"
        );
        assert!(folder.starts_with(dir.path()), "{database}");
        assert!(
            !folder.exists(),
            "SIG{sig}: {} is left behind",
            folder.display()
        );
        // Nothing else was left in the temporary folder either.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn an_interrupted_demo_on_postgres_drops_its_schema() {
    let conn = match std::env::var("LEASEFENCE_TEST_PG") {
        Ok(conn) if !conn.trim().is_empty() => conn,
        _ => panic!("LEASEFENCE_TEST_PG is unset"),
    };
    let dir = tempfile::tempdir().unwrap();
    let args = ["--db", &conn, "demo", "--jobs", "5000", "--ttl", "2"];
    let (code, database) = interrupt(dir.path(), &args, "INT");
    assert_eq!(code, Some(130), "{database}");
    // "database: host=… dbname=test, schema leasefence_demo_… (a fresh schema, …)"
    let schema = database
        .split("schema ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("the demo names its schema");
    assert!(schema.starts_with("leasefence_demo_"), "{database}");
    let mut client =
        leasefence::postgres::Client::connect(&conn, leasefence::postgres::NoTls).unwrap();
    let left = client
        .query("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .unwrap();
    assert!(left.is_empty(), "the schema {schema} is left behind");
}
