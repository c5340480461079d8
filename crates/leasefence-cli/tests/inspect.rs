//! Inspecting jobs with the `leasefence` binary: `state ID` shows every field, `list` never
//! cuts text silently, times are human (UTC dates, relative to the reading used) or epoch
//! seconds with `--epoch` and `--json`, and an empty `list --json` prints no lines.

use rusqlite::{Connection, OpenFlags};
use tempfile::TempDir;

mod support;
use support::Run;

/// A temporary working directory with an initialised `jobs.db`.
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let s = Sandbox {
            dir: tempfile::tempdir().unwrap(),
        };
        s.lf(&["init"]).ok();
        s
    }

    fn lf(&self, args: &[&str]) -> Run {
        let mut all = vec!["--db", "jobs.db"];
        all.extend_from_slice(args);
        Run::of(self.dir.path(), &all, None, &[])
    }

    /// A text column of `id`, read by a connection of its own.
    fn column(&self, id: &str, column: &str) -> Option<String> {
        let db = Connection::open_with_flags(
            self.dir.path().join("jobs.db"),
            OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        db.query_row(
            &format!("SELECT {column} FROM jobs WHERE id = ?1"),
            [id],
            |r| r.get(0),
        )
        .unwrap()
    }
}

/// An error longer than a table cell, with quotes, a backslash and a newline in it.
const LONG_ERROR: &str =
    "parse \"report.csv\" failed at C:\\data\nline 2: expected a number, got \"n/a\" in column 7";

/// `job` enqueued with queue settings, claimed at 100 and failed at 110 with [`LONG_ERROR`],
/// retrying at 160.
fn failed_job(s: &Sandbox, job: &str) {
    s.lf(&[
        "enqueue",
        job,
        "--payload",
        "{\"w\":640}",
        "--priority",
        "5",
        "--max-attempts",
        "3",
    ])
    .ok();
    s.lf(&["claim", job, "--owner", "w1", "--ttl", "30", "--now", "100"])
        .ok();
    s.lf(&[
        "fail",
        job,
        "--owner",
        "w1",
        "--fence",
        "1",
        "--error",
        LONG_ERROR,
        "--retry-at",
        "160",
        "--now",
        "110",
    ])
    .ok();
}

#[test]
fn state_shows_every_field_with_human_times() {
    let s = Sandbox::new();
    failed_job(&s, "j");
    let run = s.lf(&["state", "j", "--now", "130"]);
    run.ok()
        .says("j\n")
        .says("  status       retrying\n")
        .says("  owner        -\n")
        .says("  fence        1\n")
        .says("  lease until  -\n")
        .says("  attempts     1 of 3\n")
        .says("  priority     5\n")
        .says("  not before   1970-01-01 00:02:40Z (in 30 s)\n")
        .says("  finished     -\n")
        .says("  outcome      -\n")
        .says("  done         false\n")
        .says("  payload      9 bytes: {\"w\":640}\n")
        .says("  result       -\n");
    // The error whole, exactly as stored (read back independently), not quoted or escaped.
    let stored = s.column("j", "error").unwrap();
    assert_eq!(stored, LONG_ERROR);
    run.says(&format!("  error        {stored}\n"));

    // Minutes ago, and epoch seconds with --epoch.
    s.lf(&["state", "j", "--now", "400"])
        .ok()
        .says("  not before   1970-01-01 00:02:40Z (4 min ago)\n");
    s.lf(&["state", "j", "--now", "400", "--epoch"])
        .ok()
        .says("  not before   160\n");
}

#[test]
fn state_json_has_every_field_in_epoch_seconds() {
    let s = Sandbox::new();
    failed_job(&s, "j");
    let v = s.lf(&["--json", "state", "j", "--now", "130"]).ok().json();
    assert_eq!(v["op"], "state");
    assert_eq!(v["ok"], true);
    assert_eq!(v["job_id"], "j");
    assert_eq!(v["now"], 130.0);
    assert_eq!(v["status"], "retrying");
    assert_eq!(v["not_before"], 160.0);
    assert_eq!(v["until"], 0.0);
    assert_eq!(v["attempts"], 1);
    assert_eq!(v["max_attempts"], 3);
    assert_eq!(v["priority"], 5);
    assert_eq!(v["error"], LONG_ERROR);
    assert_eq!(v["payload"], "{\"w\":640}");
    assert_eq!(v["payload_bytes"], 9);
    assert!(v["enqueued_at"].as_f64().unwrap() > 1e9, "{v}");
    assert_eq!(v["finished_at"], serde_json::Value::Null);
}

#[test]
fn state_of_an_unknown_id_is_refused() {
    let s = Sandbox::new();
    let run = s.lf(&["state", "nope"]);
    run.refused().warns("nope is unknown");
    assert_eq!(run.stdout, "");
    let v = s.lf(&["--json", "state", "nope"]).refused().json();
    assert_eq!(
        (&v["op"], &v["ok"], &v["job_id"]),
        (&"state".into(), &false.into(), &"nope".into())
    );
}

#[test]
fn list_says_when_it_shortens_text_and_shows_it_unescaped() {
    let s = Sandbox::new();
    failed_job(&s, "long");
    s.lf(&["enqueue", "short"]).ok();
    s.lf(&[
        "claim", "short", "--owner", "w2", "--ttl", "30", "--now", "100",
    ])
    .ok();
    s.lf(&[
        "complete",
        "short",
        "--owner",
        "w2",
        "--fence",
        "1",
        "--result",
        "{\"n\":1}",
        "--now",
        "101",
    ])
    .ok();
    let run = s.lf(&["list", "--now", "130"]);
    run.ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{run:#?}");
    // Quotes and backslashes as written; the newline as `\n`; cut with `…`.
    assert!(
        lines[1].ends_with("error: parse \"report.csv\" failed at C:\\data\\nl…"),
        "{run:#?}"
    );
    assert!(lines[1].ends_with('…'), "{run:#?}");
    assert!(lines[2].ends_with("result: {\"n\":1}"), "{run:#?}");
    assert_eq!(
        lines[3],
        "(… marks text cut short to fit the table; `leasefence state ID` shows a job whole)"
    );
    // Human times in the table.
    assert!(
        lines[1].contains("1970-01-01 00:02:40Z (in 30 s)"),
        "{run:#?}"
    );

    // Nothing cut: no note.
    let run = s.lf(&["list", "--status", "done", "--now", "130"]);
    assert!(!run.ok().stdout.contains("cut short"), "{run:#?}");
}

#[test]
fn list_times_are_epoch_seconds_with_epoch() {
    let s = Sandbox::new();
    failed_job(&s, "j");
    let run = s.lf(&["list", "--now", "130", "--epoch"]);
    let row = run.ok().table_row("j");
    assert_eq!(
        row[..9],
        ["j", "retrying", "default", "-", "1", "-", "5", "160", "1/3"]
    );
}

#[test]
fn an_empty_list_prints_no_json_lines() {
    let s = Sandbox::new();
    let run = s.lf(&["--json", "list"]);
    run.ok();
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr, "");
    s.lf(&["list", "--help"]).ok().says("no lines = no jobs");
}

/// Text anyone with the worker token can store (an id, a result, an error) reaches the
/// operator's terminal with its control characters escaped — no retitled window, no cleared
/// screen — while newlines and tabs of a multi-line result stay; the stored bytes are untouched
/// and `--json` has them exactly.
#[test]
fn stored_control_characters_never_reach_the_terminal() {
    let s = Sandbox::new();
    let id = "esc\u{1b}[31mRED";
    let result = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\nline 2\tcolumn";
    let run = s.lf(&["enqueue", id]);
    run.ok();
    assert!(!run.stdout.contains('\u{1b}'), "{run:#?}");
    assert!(run.stdout.contains("esc\\u{1b}[31mRED"), "{run:#?}");
    s.lf(&["claim", id, "--owner", "a", "--ttl", "10", "--now", "0"])
        .ok();
    s.lf(&[
        "complete", id, "--owner", "a", "--fence", "1", "--now", "1", "--result", result,
    ])
    .ok();
    let run = s.lf(&["state", id, "--now", "2"]);
    run.ok();
    for raw in ['\u{1b}', '\u{7}'] {
        assert!(!run.stdout.contains(raw), "{raw:?} printed raw: {run:#?}");
    }
    assert!(
        run.stdout
            .contains("ok\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\nline 2\tcolumn"),
        "{run:#?}"
    );
    assert_eq!(s.column(id, "result").as_deref(), Some(result));
    let json = s.lf(&["--json", "state", id, "--now", "2"]);
    let record: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(record["result"], result);
    // a refusal's reason names the id escaped too
    let run = s.lf(&[
        "complete", id, "--owner", "b", "--fence", "9", "--now", "3", "--result", "x",
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(!run.stderr.contains('\u{1b}'), "{run:#?}");
}
