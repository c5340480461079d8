//! Runs the built `leasefence` binary in a temporary directory: exit statuses 0/1/2, the JSON
//! output, and the stored state after each command, read back through an independent rusqlite
//! connection.

use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::{Value, json};
use tempfile::TempDir;

mod support;
use support::Run;

/// A temporary working directory with a database path in it.
struct Sandbox {
    dir: TempDir,
}

/// One stored row of `jobs`, as a stock SQLite connection sees it.
#[derive(Debug, PartialEq)]
struct Row {
    owner: Option<String>,
    until: f64,
    fence: i64,
    result: Option<String>,
    done: i64,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn db(&self) -> PathBuf {
        self.path("jobs.db")
    }

    /// `leasefence --db <sandbox db> ARGS`.
    fn lf(&self, args: &[&str]) -> Run {
        let db = self.db();
        let mut all = vec!["--db", db.to_str().unwrap()];
        all.extend_from_slice(args);
        self.raw(&all, None, &[])
    }

    /// An initialised database with `ids` enqueued.
    fn with_jobs(ids: &[&str]) -> Self {
        let sandbox = Sandbox::new();
        sandbox.lf(&["init"]).ok();
        for id in ids {
            sandbox.lf(&["enqueue", id]).ok();
        }
        sandbox
    }

    /// Runs the binary in the sandbox directory with exactly `args`, `stdin` and `env`.
    fn raw(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
        Run::of(self.dir.path(), args, stdin, env)
    }

    /// The stored row, read through a fresh read-only rusqlite connection.
    fn row(&self, id: &str) -> Option<Row> {
        let conn =
            Connection::open_with_flags(self.db(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        conn.query_row(
            "SELECT owner, until, fence, result, done FROM jobs WHERE id = ?1",
            [id],
            |r| {
                Ok(Row {
                    owner: r.get(0)?,
                    until: r.get(1)?,
                    fence: r.get(2)?,
                    result: r.get(3)?,
                    done: r.get(4)?,
                })
            },
        )
        .optional()
        .unwrap()
    }
}

fn row(
    owner: Option<&str>,
    until: f64,
    fence: i64,
    result: Option<&str>,
    done: i64,
) -> Option<Row> {
    Some(Row {
        owner: owner.map(str::to_owned),
        until,
        fence,
        result: result.map(str::to_owned),
        done,
    })
}

#[test]
fn init_creates_the_table_and_never_resets_a_row() {
    let s = Sandbox::new();
    s.lf(&["init"]).ok().says("initialised");
    let conn = Connection::open(s.db()).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_info('jobs')")
        .unwrap();
    let columns: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // The contract's six columns, in order; the queue's columns may follow them.
    assert_eq!(
        columns[..6],
        ["id", "owner", "until", "fence", "result", "done"]
    );

    s.lf(&["enqueue", "j"]).ok();
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "30", "--now", "0"])
        .ok();
    let v = s.lf(&["--json", "init"]).ok().json();
    assert_eq!(v["op"], "init");
    assert_eq!(v["ok"], true);
    assert_eq!(s.row("j"), row(Some("a"), 30.0, 1, None, 0));
}

#[test]
fn enqueue_inserts_once_and_refuses_a_known_id() {
    let s = Sandbox::with_jobs(&[]);
    s.lf(&["enqueue", "j"]).ok().says("enqueued j");
    assert_eq!(s.row("j"), row(None, 0.0, 0, None, 0));

    s.lf(&["claim", "j", "--owner", "a", "--ttl", "30", "--now", "0"])
        .ok();
    let run = s.lf(&["--json", "enqueue", "j"]);
    run.refused();
    assert!(run.stderr.contains("already known"), "{run:#?}");
    let v = run.json();
    assert_eq!(
        (&v["op"], &v["job_id"], &v["ok"]),
        (&"enqueue".into(), &"j".into(), &false.into())
    );
    assert_eq!(
        s.row("j"),
        row(Some("a"), 30.0, 1, None, 0),
        "a known id is left untouched"
    );

    let v = s.lf(&["--json", "enqueue", "k"]).ok().json();
    assert_eq!(
        (&v["op"], &v["job_id"], &v["ok"]),
        (&"enqueue".into(), &"k".into(), &true.into())
    );
    s.lf(&["enqueue", ""]).error("job_id");
}

#[test]
fn state_prints_the_stored_row_and_refuses_an_unknown_id() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "100"])
        .ok();
    s.lf(&[
        "complete", "j", "--owner", "a", "--fence", "1", "--result", "r 1", "--now", "105",
    ])
    .ok();
    let run = s.lf(&["state", "j", "--now", "105", "--epoch"]);
    run.ok();
    let fields: Vec<&str> = run.stdout.lines().map(str::trim_end).collect();
    // Every field; `enqueued` is this host's clock at `enqueue` (informational).
    assert_eq!(fields.len(), 19, "{run:#?}");
    assert!(fields[12].starts_with("  enqueued     1"), "{run:#?}");
    let expected = [
        "j",
        "  status       done",
        "  queue        default",
        "  kind         -",
        "  unique key   -",
        "  owner        a",
        "  fence        1",
        "  lease until  110",
        "  attempts     1 (no limit)",
        "  ledger       1 attempt (1 completed), no write refused",
        "  priority     0",
        "  not before   -",
        "  finished     105",
        "  outcome      completed",
        "  done         true",
        "  payload      -",
        "  error        -",
        "  result       r 1",
    ];
    let without_enqueued: Vec<&str> = fields
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 12)
        .map(|(_, f)| *f)
        .collect();
    assert_eq!(without_enqueued, expected, "{run:#?}");
    // Human times by default, relative to the reading used.
    s.lf(&["state", "j", "--now", "105"])
        .ok()
        .says("lease until  1970-01-01 00:01:50Z (in 5 s)")
        .says("finished     1970-01-01 00:01:45Z (now)");

    // `--json` is global: before or after the subcommand.
    let v = s.lf(&["state", "j", "--json"]).ok().json();
    assert_eq!(v["op"], "state");
    assert_eq!(v["ok"], true);
    assert_eq!(v["job_id"], "j");
    assert_eq!(v.get("id"), None, "one key for the id: job_id");
    assert_eq!(v["owner"], "a");
    assert_eq!(v["until"], 110.0);
    assert_eq!(v["fence"], 1);
    assert_eq!(v["result"], "r 1");
    assert_eq!(v["done"], true);
    assert_eq!(s.row("j"), row(Some("a"), 110.0, 1, Some("r 1"), 1));

    s.lf(&["enqueue", "fresh"]).ok();
    let v = s.lf(&["--json", "state", "fresh"]).ok().json();
    assert_eq!(
        (&v["owner"], &v["result"], &v["done"]),
        (&Value::Null, &Value::Null, &false.into())
    );

    let run = s.lf(&["--json", "state", "nope"]);
    run.refused();
    assert!(run.stderr.contains("nope is unknown"), "{run:#?}");
    assert_eq!(run.json()["ok"], false);
    assert_eq!(s.row("nope"), None);
}

#[test]
fn claim_prints_the_new_fence_and_refuses_a_leased_job() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "30", "--now", "100"])
        .ok()
        .says("claimed j as a: fence 1, lease until 130");
    assert_eq!(s.row("j"), row(Some("a"), 130.0, 1, None, 0));

    let run = s.lf(&[
        "--json", "claim", "j", "--owner", "b", "--ttl", "30", "--now", "129.9",
    ]);
    run.refused();
    assert!(run.stderr.contains("still leased"), "{run:#?}");
    let v = run.json();
    assert_eq!((&v["ok"], &v["fence"]), (&false.into(), &Value::Null));
    assert_eq!(
        s.row("j"),
        row(Some("a"), 130.0, 1, None, 0),
        "a refused claim changes nothing"
    );

    // now == until is expired: claimable.
    let v = s
        .lf(&[
            "--json", "claim", "j", "--owner", "b", "--ttl", "0.5", "--now", "130",
        ])
        .ok()
        .json();
    assert_eq!(v["op"], "claim");
    assert_eq!(v["job_id"], "j");
    assert_eq!(v["owner"], "b");
    assert_eq!(v["ok"], true);
    assert_eq!(v["fence"], 2);
    assert_eq!(v["until"], 130.5);
    assert_eq!(s.row("j"), row(Some("b"), 130.5, 2, None, 0));

    s.lf(&[
        "claim", "unknown", "--owner", "a", "--ttl", "1", "--now", "0",
    ])
    .refused();
    assert_eq!(s.row("unknown"), None);
}

#[test]
fn claim_without_now_uses_the_system_clock() {
    let s = Sandbox::with_jobs(&["j"]);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let v = s
        .lf(&["--json", "claim", "j", "--owner", "a", "--ttl", "60"])
        .ok()
        .json();
    let now = v["now"].as_f64().unwrap();
    assert!(now >= before && now < before + 60.0, "{v}");
    // serde_json's default float parsing may be one ulp off, hence the tolerance.
    let until = s.row("j").unwrap().until;
    assert!((until - (now + 60.0)).abs() < 1e-6, "{until} vs {v}");
}

#[test]
fn bad_arguments_exit_2_naming_the_argument_and_change_nothing() {
    let s = Sandbox::with_jobs(&["j"]);
    let claim = |extra: &[&str]| {
        let mut args = vec!["claim", "j"];
        args.extend_from_slice(extra);
        s.lf(&args)
    };
    claim(&["--owner", "a", "--ttl", "0", "--now", "0"]).error("ttl");
    claim(&["--owner", "a", "--ttl", "nan", "--now", "0"]).error("ttl");
    claim(&["--owner", "a", "--ttl", "-1", "--now", "0"]).error("ttl");
    claim(&["--owner", "a", "--ttl", "inf", "--now", "0"]).error("ttl");
    // Past 10^12 s is a mistake, not a lease that never ends; the number is shown short.
    claim(&["--owner", "a", "--ttl", "1e300", "--now", "0"])
        .error("invalid argument `ttl`: must be a finite number of seconds greater than 0 and at most 1e12, got 1e300");
    claim(&["--owner", "", "--ttl", "1", "--now", "0"]).error("owner");
    claim(&["--owner", "a", "--ttl", "1", "--now", "nan"]).error("now");
    s.lf(&["claim", "", "--owner", "a", "--ttl", "1", "--now", "0"])
        .error("job_id");
    assert_eq!(s.row("j"), row(None, 0.0, 0, None, 0));

    // clap's usage errors: missing or unparsable flags.
    claim(&["--ttl", "1"]).status(2);
    claim(&["--owner", "a", "--ttl", "soon"]).status(2);
    s.lf(&["renew", "j", "--owner", "a", "--fence", "x", "--ttl", "1"])
        .status(2);
    s.lf(&["frobnicate"]).status(2);
    assert_eq!(s.row("j"), row(None, 0.0, 0, None, 0));
}

#[test]
fn renew_extends_a_live_lease_and_refuses_a_stale_fence() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "0"])
        .ok();
    let v = s
        .lf(&[
            "--json", "renew", "j", "--owner", "a", "--fence", "1", "--ttl", "10", "--now", "5",
        ])
        .ok()
        .json();
    assert_eq!(
        (&v["op"], &v["ok"], &v["until"]),
        (&"renew".into(), &true.into(), &15.0.into())
    );
    assert_eq!(s.row("j"), row(Some("a"), 15.0, 1, None, 0));
    s.lf(&[
        "renew", "j", "--owner", "a", "--fence", "1", "--ttl", "0", "--now", "6",
    ])
    .error("ttl");
    s.lf(&[
        "renew", "j", "--owner", "", "--fence", "1", "--ttl", "1", "--now", "6",
    ])
    .error("owner");
    assert_eq!(s.row("j"), row(Some("a"), 15.0, 1, None, 0));

    // A's lease expires, B takes over: A's stale fence is refused.
    s.lf(&["claim", "j", "--owner", "b", "--ttl", "10", "--now", "15"])
        .ok()
        .says("fence 2");
    let run = s.lf(&[
        "--json", "renew", "j", "--owner", "a", "--fence", "1", "--ttl", "10", "--now", "16",
    ]);
    run.refused();
    assert_eq!(run.json()["ok"], false);
    assert_eq!(s.row("j"), row(Some("b"), 25.0, 2, None, 0));
    // Right owner, wrong fence; and the holder's own lease once it expired.
    s.lf(&[
        "renew", "j", "--owner", "b", "--fence", "1", "--ttl", "10", "--now", "16",
    ])
    .refused();
    s.lf(&[
        "renew", "j", "--owner", "b", "--fence", "2", "--ttl", "10", "--now", "25",
    ])
    .refused();
    assert_eq!(s.row("j"), row(Some("b"), 25.0, 2, None, 0));
}

#[test]
fn complete_stores_the_result_from_a_flag_a_file_or_stdin() {
    let s = Sandbox::with_jobs(&["flag", "file", "stdin"]);
    for id in ["flag", "file", "stdin"] {
        s.lf(&["claim", id, "--owner", "a", "--ttl", "10", "--now", "0"])
            .ok();
    }
    let v = s
        .lf(&[
            "--json", "complete", "flag", "--owner", "a", "--fence", "1", "--result", "-42",
            "--now", "1",
        ])
        .ok()
        .json();
    assert_eq!(
        (&v["op"], &v["job_id"], &v["ok"]),
        (&"complete".into(), &"flag".into(), &true.into())
    );
    assert_eq!(s.row("flag"), row(Some("a"), 10.0, 1, Some("-42"), 1));

    let file = s.path("result.txt");
    std::fs::write(&file, "line one\nline two\n").unwrap();
    s.lf(&[
        "complete",
        "file",
        "--owner",
        "a",
        "--fence",
        "1",
        "--result-file",
        file.to_str().unwrap(),
        "--now",
        "1",
    ])
    .ok()
    .says("completed file as a (fence 1)");
    assert_eq!(
        s.row("file"),
        row(Some("a"), 10.0, 1, Some("line one\nline two\n"), 1)
    );

    let db = s.db();
    let args = [
        "--db",
        db.to_str().unwrap(),
        "complete",
        "stdin",
        "--owner",
        "a",
        "--fence",
        "1",
        "--result-file",
        "-",
        "--now",
        "1",
    ];
    assert_eq!(s.raw(&args, Some("from stdin"), &[]).code, 0);
    assert_eq!(
        s.row("stdin"),
        row(Some("a"), 10.0, 1, Some("from stdin"), 1)
    );
}

#[test]
fn complete_needs_exactly_one_result_source() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "0"])
        .ok();
    let file = s.path("r.txt");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    s.lf(&[
        "complete",
        "j",
        "--owner",
        "a",
        "--fence",
        "1",
        "--result",
        "x",
        "--result-file",
        file,
        "--now",
        "1",
    ])
    .status(2);
    s.lf(&[
        "complete", "j", "--owner", "a", "--fence", "1", "--now", "1",
    ])
    .status(2);
    s.lf(&[
        "complete",
        "j",
        "--owner",
        "a",
        "--fence",
        "1",
        "--result-file",
        "missing.txt",
        "--now",
        "1",
    ])
    .error("missing.txt");
    s.lf(&[
        "complete", "j", "--owner", "a", "--fence", "1", "--result", "x", "--now", "inf",
    ])
    .error("now");
    assert_eq!(s.row("j"), row(Some("a"), 10.0, 1, None, 0));
}

#[test]
fn complete_refuses_a_stale_fence_and_keeps_the_result() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["claim", "j", "--owner", "A", "--ttl", "10", "--now", "0"])
        .ok()
        .says("fence 1");
    s.lf(&["claim", "j", "--owner", "B", "--ttl", "10", "--now", "10"])
        .ok()
        .says("fence 2");
    s.lf(&[
        "complete", "j", "--owner", "B", "--fence", "2", "--result", "B's", "--now", "12",
    ])
    .ok();
    let run = s.lf(&[
        "--json", "complete", "j", "--owner", "A", "--fence", "1", "--result", "A's", "--now", "13",
    ]);
    run.refused();
    assert!(run.stderr.contains("unchanged"), "{run:#?}");
    assert_eq!(run.json()["ok"], false);
    // Not even the current holder can complete twice.
    s.lf(&[
        "complete", "j", "--owner", "B", "--fence", "2", "--result", "again", "--now", "13",
    ])
    .refused();
    assert_eq!(s.row("j"), row(Some("B"), 20.0, 2, Some("B's"), 1));
}

#[test]
fn release_clears_the_lease_and_keeps_the_fence() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "0"])
        .ok();
    s.lf(&["release", "j", "--owner", "a", "--fence", "2"])
        .refused();
    s.lf(&["release", "j", "--owner", "b", "--fence", "1"])
        .refused();
    s.lf(&["release", "j", "--owner", "", "--fence", "1"])
        .error("owner");
    assert_eq!(s.row("j"), row(Some("a"), 10.0, 1, None, 0));

    let v = s
        .lf(&["--json", "release", "j", "--owner", "a", "--fence", "1"])
        .ok()
        .json();
    assert_eq!(
        (&v["op"], &v["fence"], &v["ok"]),
        (&"release".into(), &1.into(), &true.into())
    );
    assert_eq!(
        s.row("j"),
        row(None, 0.0, 1, None, 0),
        "owner and until cleared, fence kept"
    );
    s.lf(&["release", "j", "--owner", "a", "--fence", "1"])
        .refused();
    s.lf(&["claim", "j", "--owner", "b", "--ttl", "10", "--now", "1"])
        .ok()
        .says("fence 2");
}

#[test]
fn a_file_that_is_not_sqlite_is_an_error_and_stays_untouched() {
    let s = Sandbox::new();
    let junk = "this is a text file, not an SQLite database\n".repeat(64);
    std::fs::write(s.db(), &junk).unwrap();
    s.lf(&["init"]).error("not an SQLite database");
    s.lf(&["enqueue", "j"]).error("not an SQLite database");
    s.lf(&["state", "j"]).error("not an SQLite database");
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "1"])
        .error("not an SQLite database");
    assert_eq!(std::fs::read_to_string(s.db()).unwrap(), junk);
    assert!(!s.path("jobs.db-wal").exists());
}

#[test]
fn a_database_never_initialised_is_an_error() {
    let s = Sandbox::new();
    s.lf(&["state", "j"]).error("init");
    s.lf(&["enqueue", "j"]).error("init");
    assert!(!s.db().exists(), "only init creates the file");

    // An SQLite file without the jobs table.
    Connection::open(s.db())
        .unwrap()
        .execute_batch("CREATE TABLE other (x)")
        .unwrap();
    s.lf(&["state", "j"]).error("init");
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "1"])
        .error("init");
    s.lf(&["init"]).ok();
    s.lf(&["state", "j"]).refused();
}

#[test]
fn the_database_defaults_to_the_working_directory_or_leasefence_db() {
    let s = Sandbox::new();
    s.raw(&["init"], None, &[]).ok();
    assert!(s.path("leasefence.db").exists());
    s.raw(&["enqueue", "j"], None, &[]).ok();

    s.raw(&["init"], None, &[("LEASEFENCE_DB", "from-env.db")])
        .ok();
    s.raw(&["enqueue", "j"], None, &[("LEASEFENCE_DB", "from-env.db")])
        .ok();
    assert!(s.path("from-env.db").exists());
    // The flag wins over the environment.
    s.raw(
        &["--db", "leasefence.db", "enqueue", "j"],
        None,
        &[("LEASEFENCE_DB", "from-env.db")],
    )
    .refused();
}

#[test]
fn a_busy_database_is_an_error_that_says_retry() {
    let s = Sandbox::with_jobs(&["j"]);
    let holder = Connection::open(s.db()).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The library waits its 5 s busy timeout, then gives up without writing.
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "0"])
        .busy("retry");
    // Exit 3 is contention alone: bad input is still 2, a refusal 1.
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "-1", "--now", "0"])
        .error("ttl");
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(s.row("j"), row(None, 0.0, 0, None, 0));
}

#[test]
fn demo_tells_the_story_and_every_invariant_holds() {
    let s = Sandbox::new();
    let run = s.raw(&["demo", "--jobs", "200", "--workers", "4"], None, &[]);
    run.ok().says("A wakes: renew, fence 1").says("verdict: OK");
    assert!(!run.stdout.contains("BROKEN"), "{run:#?}");
    let line = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} line; {run:#?}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        line("results overwritten").starts_with("results overwritten 0 "),
        "{run:#?}"
    );
    assert!(
        line("stale writes accepted").starts_with("stale writes accepted 0 "),
        "{run:#?}"
    );
    assert!(
        line("jobs done exactly once").starts_with("jobs done exactly once 200 / 200"),
        "{run:#?}"
    );
    assert!(line("throughput").contains(" jobs/s"), "{run:#?}");

    // The temporary database is gone, and nothing was written to the working directory.
    let db = run.stdout.lines().next().unwrap();
    let db = db
        .strip_prefix("database: ")
        .unwrap()
        .split(" (")
        .next()
        .unwrap();
    assert!(!Path::new(db).exists(), "{db} should be removed");
    assert_eq!(std::fs::read_dir(s.dir.path()).unwrap().count(), 0);
}

#[test]
fn demo_on_a_given_database_leaves_other_jobs_alone() {
    let s = Sandbox::with_jobs(&["job-00000", "seed-job"]);
    s.lf(&[
        "claim",
        "job-00000",
        "--owner",
        "mine",
        "--ttl",
        "1000",
        "--now",
        "0",
    ])
    .ok();
    let run = s.lf(&[
        "--json",
        "demo",
        "--jobs",
        "20",
        "--workers",
        "2",
        "--ttl",
        "0.2",
        "--stall-rate",
        "0.2",
    ]);
    run.ok();
    let records: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(records.iter().all(|r| r["op"] == "demo"), "{run:#?}");
    let prefix = records[0]["job_prefix"].as_str().unwrap().to_owned();
    assert!(prefix.starts_with("demo-"), "{prefix}");
    assert!(
        records
            .iter()
            .filter(|r| r["phase"] == "story")
            .all(|r| r["ok"] != false)
    );
    let stress = records.iter().find(|r| r["phase"] == "stress").unwrap();
    assert_eq!(stress["ok"], true, "{stress}");
    assert_eq!(stress["done_exactly_once"], 20);
    assert_eq!(stress["results_overwritten"], 0);
    assert_eq!(stress["stale_writes_accepted"], 0);
    assert_eq!(stress["claims_granted_lease_live"], 0);
    assert_eq!(stress["completes_refused_live"], 0);
    assert_eq!(
        stress["stale_writes_refused"].as_u64().unwrap(),
        2 * stress["stalls"].as_u64().unwrap()
    );
    assert_eq!(records.last().unwrap()["phase"], "verdict");
    assert_eq!(records.last().unwrap()["ok"], true);
    assert_eq!(records.last().unwrap()["broken"], serde_json::json!([]));

    assert_eq!(s.row("job-00000"), row(Some("mine"), 1000.0, 1, None, 0));
    assert_eq!(s.row("seed-job"), row(None, 0.0, 0, None, 0));
    let conn = Connection::open(s.db()).unwrap();
    let (ours, done): (i64, i64) = conn
        .query_row(
            "SELECT count(*), sum(done) FROM jobs WHERE substr(id, 1, length(?1)) = ?1",
            [&prefix],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (ours, done),
        (21, 21),
        "20 stress jobs and the story's job, all done"
    );
}

#[test]
fn demo_rejects_bad_arguments() {
    let s = Sandbox::new();
    s.raw(&["demo", "--ttl", "0"], None, &[]).error("ttl");
    // Longer than any lease (1e20 s once panicked converting it to a Duration).
    s.raw(&["demo", "--ttl", "1e20"], None, &[])
        .error("--ttl: invalid argument `ttl`: must be a finite number of seconds greater than 0 and at most 1e12, got 1e20");
    s.raw(&["demo", "--ttl", "1e9"], None, &[])
        .error("invalid argument `--ttl`: must be at most 3600 seconds");
    s.raw(&["demo", "--ttl", "3600.5"], None, &[]).error("ttl");
    s.raw(&["demo", "--stall-rate", "2"], None, &[])
        .error("stall-rate");
    s.raw(&["demo", "--workers", "0"], None, &[]).status(2);
    // With --json, each names its flag as an invalid argument, as the library's do.
    for (args, flag) in [
        (&["--json", "demo", "--ttl", "5000"][..], "--ttl"),
        (&["--json", "demo", "--stall-rate", "2"], "--stall-rate"),
    ] {
        let v = s.raw(args, None, &[]).json();
        assert_eq!(
            (&v["error"], &v["argument"]),
            (&json!("invalid_argument"), &json!(flag)),
            "{v}"
        );
    }
}

#[test]
fn a_payload_file_that_cannot_be_read_is_an_invalid_argument_naming_it() {
    let s = Sandbox::new();
    s.lf(&["init"]).ok();
    let v = s
        .lf(&[
            "--json",
            "enqueue",
            "z",
            "--payload-file",
            "/nonexistent/payload",
        ])
        .json();
    assert_eq!(
        (&v["error"], &v["argument"], v["exit"].as_i64()),
        (
            &json!("invalid_argument"),
            &json!("--payload-file"),
            Some(2)
        ),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/payload"),
        "{v}"
    );
    s.lf(&["state", "z"]).refused();
}

/// The CLI's bad-input table: missing values, unparsable numbers and unknown flags are usage
/// errors (exit 2) naming what is wrong, and change nothing; a non-UTF-8 database path works
/// like any other.
#[test]
fn missing_or_malformed_flags_exit_2_and_change_nothing() {
    let s = Sandbox::with_jobs(&["j"]);
    let cases: &[(&[&str], &str)] = &[
        (&["claim"], "<ID>"),
        (&["claim", "j"], "--owner"),
        (&["claim", "j", "--owner"], "--owner"),
        (&["claim", "j", "--owner", "a", "--ttl"], "--ttl"),
        (&["claim", "j", "--owner", "a", "--ttl", "1e"], "--ttl"),
        (
            &["renew", "j", "--owner", "a", "--fence", "1.5", "--ttl", "1"],
            "--fence",
        ),
        (
            &[
                "renew", "j", "--owner", "a", "--fence", "1", "--ttl", "1", "--now", "x",
            ],
            "--now",
        ),
        (
            &["complete", "j", "--owner", "a", "--fence", "1", "--bogus"],
            "--bogus",
        ),
        (&["release", "j", "--owner", "a"], "--fence"),
        (&["enqueue"], "ID"),
    ];
    for (args, needle) in cases {
        let run = s.lf(args);
        run.status(2);
        assert!(
            run.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "{args:?} should name {needle}: {run:#?}"
        );
    }
    assert_eq!(s.row("j"), row(None, 0.0, 0, None, 0));
}

#[cfg(unix)]
#[test]
fn a_non_utf8_database_path_works_like_any_other() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"jobs-\xff.db"));
    let lf = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_leasefence"))
            .arg("--db")
            .arg(&path)
            .args(args)
            .env_remove("LEASEFENCE_DB")
            .output()
            .unwrap()
    };
    assert!(lf(&["init"]).status.success());
    assert!(lf(&["enqueue", "j"]).status.success());
    let out = lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "0"]);
    assert!(out.status.success(), "{out:?}");
    let conn = Connection::open(&path).unwrap();
    let (owner, fence): (String, i64) = conn
        .query_row("SELECT owner, fence FROM jobs WHERE id = 'j'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((owner.as_str(), fence), ("a", 1));
}
