//! With `--json`, a command that fails still prints one object on stdout — `op`, `ok: false`,
//! `error` (the kind), `argument`, `retryable`, `exit`, `message`, `hint` — besides the reason
//! on stderr; the exit status is unchanged (2, or 3 when retryable), and nothing is written.
//! Without `--json` stdout stays empty; `--help` is never an error.

use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

mod support;
use support::Run;

struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    /// A folder with `jobs.db` initialised and holding the job `j`.
    fn new() -> Self {
        let s = Sandbox {
            dir: tempfile::tempdir().unwrap(),
        };
        s.lf(&["init"]).ok();
        s.lf(&["enqueue", "j"]).ok();
        s
    }

    fn lf(&self, args: &[&str]) -> Run {
        let mut all = vec!["--db", "jobs.db"];
        all.extend_from_slice(args);
        Run::of(self.dir.path(), &all, None, &[])
    }

    /// The job `j` as stored, read through a connection of the test's own.
    fn row(&self) -> (Option<String>, i64, i64) {
        let db = Connection::open(self.dir.path().join("jobs.db")).unwrap();
        db.query_row(
            "SELECT owner, fence, done FROM jobs WHERE id = 'j'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    }
}

/// The error object of `run`: the only stdout line, with `ok: false` and the exit status it
/// names equal to the process's.
#[track_caller]
fn failure(run: &Run, op: Option<&str>, kind: &str) -> Value {
    let record = run.json();
    assert_eq!(record["ok"], false, "{record}");
    assert_eq!(
        record["op"],
        op.map_or(Value::Null, Value::from),
        "{record}"
    );
    assert_eq!(record["error"], kind, "{record}");
    assert_eq!(record["exit"], run.code, "{record}");
    assert!(
        record["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{record}"
    );
    record
}

#[test]
fn a_bad_argument_names_it_in_the_object_and_changes_nothing() {
    let s = Sandbox::new();
    let run = s.lf(&["--json", "claim", "j", "--owner", "", "--ttl", "5"]);
    run.error("owner");
    let record = failure(&run, Some("claim"), "invalid_argument");
    assert_eq!(record["argument"], "owner");
    assert_eq!(record["retryable"], false);
    assert!(
        record["message"].as_str().unwrap().contains("`owner`"),
        "{record}"
    );
    assert_eq!(s.row(), (None, 0, 0));

    // A nested command is named as its own lines name it.
    let run = s.lf(&["--json", "schedule", "add", "s1", "--cron", "bogus"]);
    run.error("cron");
    let record = failure(&run, Some("schedule add"), "invalid_argument");
    assert_eq!(record["argument"], "cron");
    let run = s.lf(&["--json", "queue", "pause", ""]);
    failure(&run, Some("queue pause"), "usage");

    // A flag the command line itself checks is named as typed.
    let run = s.lf(&["--json", "work", "--exec", " ", "--drain"]);
    run.error("--exec");
    let record = failure(&run, Some("work"), "invalid_argument");
    assert_eq!(record["argument"], "--exec");
    assert_eq!(s.row(), (None, 0, 0));
}

#[test]
fn a_usage_error_is_an_object_naming_the_flag() {
    let s = Sandbox::new();
    let run = s.lf(&["claim", "j", "--owner", "a", "--ttl", "soon", "--json"]);
    run.bad("--ttl");
    let record = failure(&run, Some("claim"), "usage");
    assert_eq!(record["argument"], "--ttl");
    assert!(
        record["message"].as_str().unwrap().contains("soon"),
        "{record}"
    );

    // Missing arguments: every one listed in the message, the first named.
    let run = s.lf(&["--json", "renew", "j"]);
    let record = failure(&run, Some("renew"), "usage");
    assert_eq!(record["argument"], "--owner", "{record}");
    let message = record["message"].as_str().unwrap();
    for flag in ["--owner", "--fence", "--ttl"] {
        assert!(message.contains(flag), "{message}");
    }
    assert!(!message.contains("Usage:"), "{message}");

    // An option's value is no subcommand: `--db queue` names a database, the op is `claim`.
    let run = Run::of(
        s.dir.path(),
        &["--db", "queue", "--json", "claim"],
        None,
        &[],
    );
    failure(&run, Some("claim"), "usage");
    // A missing subcommand is said so, not answered with the help text.
    let run = s.lf(&["--json", "queue"]);
    let record = failure(&run, Some("queue"), "usage");
    assert!(
        record["message"]
            .as_str()
            .unwrap()
            .contains("needs a subcommand"),
        "{record}"
    );

    // An unknown subcommand has no op.
    let run = s.lf(&["--json", "inspect", "j"]);
    let record = failure(&run, None, "usage");
    assert_eq!(record["argument"], Value::Null);
    assert_eq!(s.row(), (None, 0, 0));
}

#[test]
fn an_unopenable_database_is_an_object_with_its_hint() {
    let s = Sandbox::new();
    let args = ["--db", "missing/jobs.db", "--json", "state", "j"];
    let run = Run::of(s.dir.path(), &args, None, &[]);
    run.error("missing/jobs.db");
    let record = failure(&run, Some("state"), "cannot_open");
    assert_eq!(record["argument"], Value::Null);
    assert_eq!(record["hint"], "the folder missing does not exist");
    assert_eq!(record["retryable"], false);
}

#[test]
fn a_busy_database_is_a_retryable_object_with_exit_3() {
    let s = Sandbox::new();
    let holder = Connection::open(s.dir.path().join("jobs.db")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The library waits its 5 s busy timeout, then gives up without writing.
    let run = s.lf(&["--json", "claim", "j", "--owner", "a", "--ttl", "10"]);
    run.busy("retry");
    let record = failure(&run, Some("claim"), "busy");
    assert_eq!(record["retryable"], true);
    assert_eq!(record["exit"], 3);
    assert!(
        record["hint"].as_str().unwrap().contains("retry"),
        "{record}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(s.row(), (None, 0, 0));
}

#[test]
fn without_json_stdout_stays_empty_and_help_is_no_error() {
    let s = Sandbox::new();
    let run = s.lf(&["claim", "j", "--owner", "", "--ttl", "5"]);
    run.error("owner");
    assert_eq!(run.stdout, "");
    let run = s.lf(&["claim", "j", "--ttl", "x"]);
    run.bad("--ttl");
    assert_eq!(run.stdout, "");
    // `--json` after `--` is a value, not the flag: clap refuses it as an argument, in text.
    let run = s.lf(&["claim", "--owner", "a", "--ttl", "5", "--", "j", "--json"]);
    run.bad("--json");
    assert_eq!(run.stdout, "");

    let run = s.lf(&["--json", "claim", "--help"]);
    run.ok();
    assert!(run.stdout.contains("Usage:"), "{run:#?}");
    assert!(serde_json::from_str::<Value>(run.stdout.trim()).is_err());
}
