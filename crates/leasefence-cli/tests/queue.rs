//! The queue subcommands of the `leasefence` binary — `enqueue` with queue flags and
//! `--ids-from`, `list`, `stats`, `purge`, `cancel` — run in a temporary directory: exit
//! statuses 0/1/2, readable and JSON output, and the stored rows read back through an
//! independent rusqlite connection.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use leasefence::{Lease, Now, SqliteStore, Store as _};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::Value;
use tempfile::TempDir;

mod support;
use support::Run;

/// A temporary working directory with a database in it.
struct Sandbox {
    dir: TempDir,
}

/// One stored row with the queue's columns, as a stock SQLite connection sees it.
#[derive(Debug, Clone, PartialEq)]
struct QRow {
    owner: Option<String>,
    until: f64,
    fence: i64,
    result: Option<String>,
    done: i64,
    payload: Option<Vec<u8>>,
    priority: i64,
    not_before: f64,
    max_attempts: i64,
    error: Option<String>,
    outcome: Option<String>,
    finished_at: Option<f64>,
}

impl QRow {
    /// The row `enqueue ID` writes: every column at its default.
    fn fresh() -> Self {
        QRow {
            owner: None,
            until: 0.0,
            fence: 0,
            result: None,
            done: 0,
            payload: None,
            priority: 0,
            not_before: 0.0,
            max_attempts: 0,
            error: None,
            outcome: None,
            finished_at: None,
        }
    }
}

impl Sandbox {
    /// An initialised database with `ids` enqueued with no queue flags.
    fn with_jobs(ids: &[&str]) -> Self {
        let s = Sandbox {
            dir: tempfile::tempdir().unwrap(),
        };
        s.lf(&["init"]).ok();
        for id in ids {
            s.lf(&["enqueue", id]).ok();
        }
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn db(&self) -> PathBuf {
        self.path("jobs.db")
    }

    /// `leasefence --db <sandbox db> ARGS`.
    fn lf(&self, args: &[&str]) -> Run {
        self.lf_stdin(args, None)
    }

    /// `leasefence --db <sandbox db> ARGS` with `stdin` piped in (or none).
    fn lf_stdin(&self, args: &[&str], stdin: Option<&[u8]>) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasefence"));
        cmd.arg("--db")
            .arg(self.db())
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("LEASEFENCE_DB")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        if let Some(bytes) = stdin {
            // A command that fails before reading stdin closes it: not the test's concern.
            match child.stdin.take().unwrap().write_all(bytes) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                other => other.unwrap(),
            }
        }
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().expect("exited normally"),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    fn conn(&self) -> Connection {
        Connection::open_with_flags(self.db(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
    }

    /// The stored row of `id`, read through a fresh read-only connection.
    fn row(&self, id: &str) -> Option<QRow> {
        self.conn()
            .query_row(
                "SELECT owner, until, fence, result, done, payload, priority, not_before,
                        max_attempts, error, outcome, finished_at
                   FROM jobs WHERE id = ?1",
                [id],
                |r| {
                    Ok(QRow {
                        owner: r.get(0)?,
                        until: r.get(1)?,
                        fence: r.get(2)?,
                        result: r.get(3)?,
                        done: r.get(4)?,
                        payload: r.get(5)?,
                        priority: r.get(6)?,
                        not_before: r.get(7)?,
                        max_attempts: r.get(8)?,
                        error: r.get(9)?,
                        outcome: r.get(10)?,
                        finished_at: r.get(11)?,
                    })
                },
            )
            .optional()
            .unwrap()
    }

    /// The ids in the table, in insertion order.
    fn ids(&self) -> Vec<String> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT id FROM jobs ORDER BY rowid").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Records a failed attempt of the lease `owner` holds on `id` under `fence`, through the
    /// library (the CLI has no `fail`; `work` does it).
    fn fail(&self, id: &str, owner: &str, fence: i64, now: f64, error: &str, retry_at: f64) {
        let store = SqliteStore::open(self.db()).unwrap();
        let lease = Lease {
            queue: leasefence::DEFAULT_QUEUE.to_owned(),
            kind: None,
            job_id: id.into(),
            owner: owner.into(),
            fence,
            until: 0.0,
            payload: None,
            priority: 0,
            max_attempts: 0,
            last_error: None,
            attempt: 1,
        };
        let failed = store
            .fail(
                &lease,
                Now::new(now).unwrap(),
                error,
                Some(Now::new(retry_at).unwrap()),
            )
            .unwrap();
        assert!(failed.is_some(), "fail {id} should take effect");
    }

    /// One job in every status at t=100:
    /// ready `r`, scheduled `s`, leased `l`, expired `e`, retrying `f`, dead `d`, done `c`,
    /// cancelled `x` — in that insertion order.
    fn every_status() -> Self {
        let s = Sandbox::with_jobs(&["r"]);
        s.lf(&["enqueue", "s", "--not-before", "200"]).ok();
        s.lf(&["enqueue", "l", "--priority", "7", "--payload", "hello"])
            .ok();
        s.lf(&["claim", "l", "--owner", "w1", "--ttl", "50", "--now", "90"])
            .ok();
        s.lf(&["enqueue", "e"]).ok();
        s.lf(&["claim", "e", "--owner", "w2", "--ttl", "5", "--now", "90"])
            .ok();
        s.lf(&["enqueue", "f", "--max-attempts", "3"]).ok();
        s.lf(&["claim", "f", "--owner", "w3", "--ttl", "50", "--now", "90"])
            .ok();
        s.fail("f", "w3", 1, 91.0, "boom\nat line 2", 150.0);
        s.lf(&["enqueue", "d", "--max-attempts", "1"]).ok();
        s.lf(&["claim", "d", "--owner", "w4", "--ttl", "50", "--now", "90"])
            .ok();
        s.fail("d", "w4", 1, 93.0, "fatal", 150.0);
        s.lf(&["enqueue", "c"]).ok();
        s.lf(&["claim", "c", "--owner", "w5", "--ttl", "50", "--now", "90"])
            .ok();
        s.lf(&[
            "complete", "c", "--owner", "w5", "--fence", "1", "--result", "42", "--now", "91",
        ])
        .ok();
        s.lf(&["cancel", "x", "--now", "92"]).refused();
        s.lf(&["enqueue", "x"]).ok();
        s.lf(&["cancel", "x", "--now", "92"]).ok();
        s
    }
}

// ---- enqueue ----------------------------------------------------------------------------

#[test]
fn enqueue_without_queue_flags_is_unchanged() {
    let s = Sandbox::with_jobs(&[]);
    let run = s.lf(&["enqueue", "j"]);
    run.ok();
    assert_eq!(run.stdout, "enqueued j\n");
    assert_eq!(s.row("j"), Some(QRow::fresh()));

    let run = s.lf(&["--json", "enqueue", "k"]);
    run.ok();
    assert_eq!(
        run.stdout,
        "{\"job_id\":\"k\",\"ok\":true,\"op\":\"enqueue\"}\n"
    );

    let run = s.lf(&["enqueue", "j"]);
    run.refused().warns("already known");
    assert_eq!(run.stdout, "");

    // Queue flags with their default values store exactly the same row.
    s.lf(&[
        "enqueue",
        "same",
        "--priority",
        "0",
        "--not-before",
        "0",
        "--max-attempts",
        "0",
    ])
    .ok();
    assert_eq!(s.row("same"), s.row("j"));
}

#[test]
fn enqueue_stores_payload_priority_not_before_and_attempts() {
    let s = Sandbox::with_jobs(&[]);
    let v = s
        .lf(&[
            "--json",
            "enqueue",
            "j",
            "--payload",
            "-x {\"w\":640}",
            "--priority",
            "-3",
            "--not-before",
            "1500.5",
            "--max-attempts",
            "4",
        ])
        .ok()
        .json();
    assert_eq!(v["op"], "enqueue");
    assert_eq!(v["job_id"], "j");
    assert_eq!(v["ok"], true);
    assert_eq!(v["priority"], -3);
    assert_eq!(v["not_before"], 1500.5);
    assert_eq!(v["max_attempts"], 4);
    assert_eq!(v["payload_bytes"], 12);
    assert_eq!(
        s.row("j"),
        Some(QRow {
            payload: Some(b"-x {\"w\":640}".to_vec()),
            priority: -3,
            not_before: 1500.5,
            max_attempts: 4,
            ..QRow::fresh()
        })
    );

    // A payload file is stored byte for byte, UTF-8 or not.
    let bytes = [0u8, 159, 146, 150, b'\n', 255];
    std::fs::write(s.path("payload.bin"), bytes).unwrap();
    s.lf(&[
        "enqueue",
        "bin",
        "--payload-file",
        s.path("payload.bin").to_str().unwrap(),
    ])
    .ok()
    .says("enqueued bin (payload 6 bytes)");
    assert_eq!(s.row("bin").unwrap().payload, Some(bytes.to_vec()));

    s.lf_stdin(
        &["enqueue", "piped", "--payload-file", "-", "--priority", "9"],
        Some(b"from stdin\n"),
    )
    .ok()
    .says("enqueued piped (priority 9, payload 11 bytes)");
    let row = s.row("piped").unwrap();
    assert_eq!(
        (row.payload, row.priority),
        (Some(b"from stdin\n".to_vec()), 9)
    );

    // An empty payload is a payload, not none.
    s.lf(&["enqueue", "empty", "--payload", ""]).ok();
    assert_eq!(s.row("empty").unwrap().payload, Some(Vec::new()));
}

#[test]
fn enqueue_with_queue_flags_leaves_a_known_id_untouched() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "30", "--now", "0"])
        .ok();
    let before = s.row("j");
    let run = s.lf(&[
        "--json",
        "enqueue",
        "j",
        "--payload",
        "new",
        "--priority",
        "5",
        "--max-attempts",
        "1",
    ]);
    run.refused().warns("already known");
    let v = run.json();
    assert_eq!((&v["ok"], &v["job_id"]), (&false.into(), &"j".into()));
    assert_eq!(s.row("j"), before, "a known id is left untouched");
}

#[test]
fn enqueue_ids_from_a_file_or_stdin_in_one_transaction() {
    let s = Sandbox::with_jobs(&["known"]);
    std::fs::write(s.path("ids.txt"), "a\n\nb\r\n  \nc d\nknown\na\n").unwrap();
    let run = s.lf(&[
        "--json",
        "enqueue",
        "--ids-from",
        s.path("ids.txt").to_str().unwrap(),
        "--priority",
        "2",
        "--payload",
        "p",
    ]);
    // Two ids were known (one before, one repeated in the file): refused, the rest inserted.
    run.refused().warns("2 already known").warns("\"known\"");
    let v = run.json();
    assert_eq!(v["op"], "enqueue");
    assert_eq!(v["ok"], false);
    assert_eq!(v["inserted"], 3);
    assert_eq!(v["known"], serde_json::json!(["known", "a"]));
    assert_eq!(v["priority"], 2);
    assert_eq!(s.ids(), ["known", "a", "b", "c d"]);
    for id in ["a", "b", "c d"] {
        let row = s.row(id).unwrap();
        assert_eq!(
            (row.priority, row.payload),
            (2, Some(b"p".to_vec())),
            "{id}"
        );
    }
    assert_eq!(s.row("known"), Some(QRow::fresh()));

    s.lf_stdin(&["enqueue", "--ids-from", "-"], Some(b"x\ny\nz"))
        .ok()
        .says("enqueued 3 of 3 jobs from stdin");
    assert_eq!(s.ids(), ["known", "a", "b", "c d", "x", "y", "z"]);
    assert_eq!(s.row("z"), Some(QRow::fresh()));

    // Nothing to enqueue is not an error.
    s.lf_stdin(&["enqueue", "--ids-from", "-"], Some(b"\n\n"))
        .ok()
        .says("enqueued 0 of 0 jobs");
}

#[test]
fn enqueue_bad_input_exits_2_naming_the_argument_and_stores_nothing() {
    let s = Sandbox::with_jobs(&[]);
    std::fs::write(s.path("p.txt"), "x").unwrap();
    std::fs::write(s.path("ids.txt"), "a\nb\n").unwrap();
    std::fs::write(s.path("latin1.txt"), b"a\n\xe9t\xe9\n").unwrap();
    let p = s.path("p.txt");
    let p = p.to_str().unwrap();
    let ids = s.path("ids.txt");
    let ids = ids.to_str().unwrap();
    let latin1 = s.path("latin1.txt");
    let latin1 = latin1.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["enqueue", "j", "--priority", "x"], "--priority"),
        (&["enqueue", "j", "--priority", "1.5"], "--priority"),
        (&["enqueue", "j", "--not-before", "nan"], "not_before"),
        (&["enqueue", "j", "--not-before", "inf"], "not_before"),
        (&["enqueue", "j", "--not-before", "soon"], "--not-before"),
        (&["enqueue", "j", "--max-attempts", "-1"], "--max-attempts"),
        (&["enqueue", "j", "--max-attempts", "x"], "--max-attempts"),
        (
            &["enqueue", "j", "--payload", "x", "--payload-file", p],
            "--payload",
        ),
        (
            &["enqueue", "j", "--payload-file", "missing.bin"],
            "missing.bin",
        ),
        (&["enqueue", "", "--priority", "1"], "job_id"),
        (&["enqueue", "j", "--ids-from", ids], "--ids-from"),
        (&["enqueue", "--ids-from", "missing.txt"], "missing.txt"),
        (&["enqueue", "--ids-from", latin1], "--ids-from"),
        (
            &["enqueue", "--ids-from", ids, "--not-before", "nan"],
            "not_before",
        ),
        (
            &["enqueue", "--ids-from", "-", "--payload-file", "-"],
            "--payload-file",
        ),
        (&["enqueue"], "ID"),
    ];
    for (args, needle) in cases {
        let run = s.lf_stdin(args, Some(b"a\n"));
        assert_eq!(run.code, 2, "{args:?}: {run:#?}");
        run.bad(needle);
        assert_eq!(run.stdout, "", "{args:?}");
        assert!(s.ids().is_empty(), "{args:?} stored {:?}", s.ids());
    }
}

// ---- list -------------------------------------------------------------------------------

#[test]
fn list_shows_every_status_as_a_table() {
    let s = Sandbox::every_status();
    let run = s.lf(&["list", "--now", "100", "--epoch"]);
    run.ok();
    let header: Vec<&str> = run
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "ID",
            "STATUS",
            "QUEUE",
            "OWNER",
            "FENCE",
            "UNTIL",
            "PRIORITY",
            "NOT_BEFORE",
            "ATTEMPTS",
            "ERROR/RESULT"
        ]
    );
    assert_eq!(run.stdout.lines().count(), 9, "{run:#?}");
    // id status queue owner fence until priority not_before attempts [detail]
    assert_eq!(
        run.table_row("r"),
        ["r", "ready", "default", "-", "0", "-", "0", "-", "0"]
    );
    assert_eq!(
        run.table_row("s"),
        ["s", "scheduled", "default", "-", "0", "-", "0", "200", "0"]
    );
    assert_eq!(
        run.table_row("l"),
        ["l", "leased", "default", "w1", "1", "140", "7", "-", "1"]
    );
    assert_eq!(
        run.table_row("e"),
        ["e", "expired", "default", "w2", "1", "95", "0", "-", "1"]
    );
    assert_eq!(
        run.table_row("f"),
        [
            "f",
            "retrying",
            "default",
            "-",
            "1",
            "-",
            "0",
            "150",
            "1/3",
            "error:",
            "boom\\nat",
            "line",
            "2"
        ]
    );
    assert_eq!(
        run.table_row("d"),
        [
            "d", "dead", "default", "-", "1", "-", "0", "150", "1/1", "error:", "fatal"
        ]
    );
    assert_eq!(
        run.table_row("c"),
        [
            "c", "done", "default", "w5", "1", "140", "0", "-", "1", "result:", "42"
        ]
    );
    assert_eq!(
        run.table_row("x"),
        ["x", "cancelled", "default", "-", "0", "-", "0", "-", "0"]
    );
    // Oldest first.
    let order: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(order, ["r", "s", "l", "e", "f", "d", "c", "x"]);

    // The same jobs later: the lease of `l` ran out (now == until is expired), `s` is due.
    let run = s.lf(&["list", "--now", "200", "--epoch"]);
    assert_eq!(run.table_row("l")[1], "expired");
    assert_eq!(run.table_row("s")[1], "ready");
    assert_eq!(run.table_row("f")[1], "retrying");
}

#[test]
fn list_as_json_lines_with_every_field() {
    let s = Sandbox::every_status();
    let records = s.lf(&["--json", "list", "--now", "100"]).ok().jsons();
    assert_eq!(records.len(), 8);
    assert!(
        records
            .iter()
            .all(|r| r["op"] == "list" && r["ok"] == true && r["now"] == 100.0)
    );
    let by_id = |id: &str| records.iter().find(|r| r["job_id"] == id).unwrap().clone();

    let l = by_id("l");
    assert_eq!(l["status"], "leased");
    assert_eq!(l["owner"], "w1");
    assert_eq!(l["fence"], 1);
    assert_eq!(l["until"], 140.0);
    assert_eq!(l["done"], false);
    assert_eq!(l["priority"], 7);
    assert_eq!(l["not_before"], 0.0);
    assert_eq!(l["max_attempts"], 0);
    assert_eq!(l["payload"], "hello");
    assert_eq!(l["payload_bytes"], 5);
    assert_eq!(l["error"], Value::Null);
    assert_eq!(l["result"], Value::Null);
    assert_eq!(l["finished_at"], Value::Null);

    let f = by_id("f");
    assert_eq!(
        (
            &f["status"],
            &f["error"],
            &f["not_before"],
            &f["max_attempts"]
        ),
        (
            &"retrying".into(),
            &"boom\nat line 2".into(),
            &150.0.into(),
            &3.into()
        )
    );
    let d = by_id("d");
    assert_eq!(
        (&d["status"], &d["done"], &d["finished_at"]),
        (&"dead".into(), &true.into(), &93.0.into())
    );
    let c = by_id("c");
    assert_eq!(
        (&c["status"], &c["result"], &c["finished_at"]),
        (&"done".into(), &"42".into(), &91.0.into())
    );
    let x = by_id("x");
    assert_eq!(
        (&x["status"], &x["done"], &x["finished_at"]),
        (&"cancelled".into(), &true.into(), &92.0.into())
    );
    let r = by_id("r");
    assert_eq!(
        (&r["status"], &r["payload"], &r["payload_bytes"]),
        (&"ready".into(), &Value::Null, &Value::Null)
    );

    // A payload that is not UTF-8 comes out as hex.
    std::fs::write(s.path("bin"), [0xff, 0x00, 0x41]).unwrap();
    s.lf(&[
        "enqueue",
        "bin",
        "--payload-file",
        s.path("bin").to_str().unwrap(),
    ])
    .ok();
    let v = s
        .lf(&["--json", "list", "--status", "ready", "--now", "100"])
        .ok()
        .jsons();
    let bin = v.iter().find(|r| r["job_id"] == "bin").unwrap();
    assert_eq!(
        (&bin["payload"], &bin["payload_hex"], &bin["payload_bytes"]),
        (&Value::Null, &"ff0041".into(), &3.into())
    );
}

#[test]
fn list_filters_by_status_and_limits() {
    let s = Sandbox::every_status();
    for (status, id) in [
        ("ready", "r"),
        ("scheduled", "s"),
        ("leased", "l"),
        ("expired", "e"),
        ("retrying", "f"),
        ("dead", "d"),
        ("done", "c"),
        ("cancelled", "x"),
    ] {
        let records = s
            .lf(&["--json", "list", "--status", status, "--now", "100"])
            .ok()
            .jsons();
        let ids: Vec<&str> = records
            .iter()
            .map(|r| r["job_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [id], "--status {status}");
        assert_eq!(records[0]["status"], status);
    }

    let run = s.lf(&["list", "--limit", "3", "--now", "100"]);
    run.ok().says(&format!(
        "… more jobs: the next page is `leasefence --db {} list --limit 3 --now 100 --after l`",
        s.db().display()
    ));
    assert_eq!(run.stdout.lines().count(), 1 + 3 + 1, "{run:#?}");
    assert_eq!(run.table_row("l")[1], "leased");
    let run = s.lf(&["list", "--limit", "8", "--now", "100"]);
    assert!(!run.stdout.contains("more jobs"), "{run:#?}");
    assert_eq!(
        s.lf(&["--json", "list", "--limit", "2", "--now", "100"])
            .ok()
            .jsons()
            .len(),
        2
    );

    // No match: a readable note, no JSON lines.
    let empty = Sandbox::with_jobs(&[]);
    let run = empty.lf(&["list"]);
    run.ok();
    assert_eq!(run.stdout, "no jobs\n");
    s.lf(&["list", "--status", "leased", "--now", "1000"])
        .ok()
        .says("no leased jobs");
    assert_eq!(empty.lf(&["--json", "list"]).ok().stdout, "");
}

/// The next page's hint keeps the page's filter, size, clock and time format: without them
/// it listed every status, 100 at a time (it was `leasefence list --after ID` whatever was
/// asked).
#[test]
fn the_next_page_hint_keeps_the_filter_and_the_page_size() {
    let s = Sandbox::every_status();
    for id in ["r2", "r3", "r4"] {
        s.lf(&["enqueue", id]).ok();
    }
    // r is the first ready job; then seven of other statuses, then r2..r4.
    let run = s.lf(&[
        "list", "--status", "ready", "--limit", "1", "--now", "100", "--epoch",
    ]);
    let hint = run.ok().stdout.lines().last().unwrap().to_owned();
    let command = &hint[hint.find('`').unwrap() + 1..hint.rfind('`').unwrap()];
    let prefix = format!("leasefence --db {} ", s.db().display());
    let args: Vec<&str> = command.strip_prefix(&prefix).unwrap().split(' ').collect();
    let next = s.lf(&args);
    let rows: Vec<&str> = next
        .ok()
        .stdout
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('…'))
        .collect();
    assert!(!rows.is_empty(), "{hint}: {next:#?}");
    assert!(
        rows.iter()
            .all(|r| r.split_whitespace().nth(1) == Some("ready")),
        "the next page of ready jobs holds ready jobs only ({hint}): {next:#?}"
    );
    assert_eq!(rows.len(), 1, "{hint}: {next:#?}");
    assert!(command.contains("--epoch"), "{hint}");
}

/// The next page's hint pastes into a shell as it is, whatever the last id holds (spaces,
/// quotes, `$`, a leading `-`), and an unknown cursor is named plainly.
#[test]
fn the_next_page_hint_is_a_working_shell_command() {
    for (first, quoted) in [
        ("a b'c $HOME", "--after 'a b'\\''c $HOME'"),
        ("-dash", "--after=-dash"),
        ("plain/id:1", "--after plain/id:1"),
        ("=cmd", "--after '=cmd'"),
        ("esc\u{1b}[31mred'q", "--after $'esc\\x1b[31mred\\'q'"),
    ] {
        let s = Sandbox::with_jobs(&[]);
        s.lf(&["enqueue", "--", first]).ok();
        s.lf(&["enqueue", "z"]).ok();
        let run = s.lf(&["list", "--limit", "1"]);
        run.ok().says(&format!(
            "the next page is `leasefence --db {} list --limit 1 {quoted}`",
            s.db().display()
        ));
        let hint = run.stdout.lines().last().unwrap();
        let command = &hint[hint.find('`').unwrap() + 1..hint.rfind('`').unwrap()];
        let tail = command.strip_prefix("leasefence ").unwrap();
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("\"$LF\" {tail}"))
            .env("LF", env!("CARGO_BIN_EXE_leasefence"))
            .current_dir(s.dir.path())
            .output()
            .unwrap();
        let next = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{first:?}: {next} {out:?}");
        assert!(
            next.lines().any(|l| l.starts_with("z ")),
            "{first:?}: {next}"
        );
        assert!(!next.contains(first), "{first:?}: {next}");
    }
    let s = Sandbox::with_jobs(&["a"]);
    let run = s.lf(&["list", "--after", "nope"]);
    run.bad("`after`").bad("no job has the id \"nope\"");
    assert!(!run.stderr.contains("JobId"), "{run:#?}");
    // An id that cannot be one is named by the flag too, not as some `job_id`.
    s.lf(&["list", "--after", ""])
        .bad("`after`: must not be empty");
}

// ---- stats ------------------------------------------------------------------------------

#[test]
fn stats_counts_jobs_by_status() {
    let s = Sandbox::every_status();
    s.lf(&["enqueue", "r2"]).ok();
    let run = s.lf(&["stats", "--now", "100"]);
    run.ok();
    let lines: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [
            ["ready", "2"],
            ["scheduled", "1"],
            ["leased", "1"],
            ["expired", "1"],
            ["retrying", "1"],
            ["done", "1"],
            ["dead", "1"],
            ["cancelled", "1"],
            ["total", "9"],
        ]
    );

    let v = s.lf(&["--json", "stats", "--now", "200"]).ok().json();
    assert_eq!(
        (&v["op"], &v["ok"], &v["now"]),
        (&"stats".into(), &true.into(), &200.0.into())
    );
    // At t=200 `s` is due and the lease of `l` has run out.
    for (status, count) in [
        ("ready", 3),
        ("scheduled", 0),
        ("leased", 0),
        ("expired", 2),
        ("retrying", 1),
        ("done", 1),
        ("dead", 1),
        ("cancelled", 1),
        ("total", 9),
    ] {
        assert_eq!(v[status], count, "{status}: {v}");
    }

    let v = Sandbox::with_jobs(&[]).lf(&["--json", "stats"]).ok().json();
    assert_eq!(v["total"], 0);
    assert_eq!(v["ready"], 0);
}

#[test]
fn list_and_stats_reject_bad_input() {
    let s = Sandbox::with_jobs(&["j"]);
    s.lf(&["list", "--status", "bogus"])
        .bad("--status")
        .bad("ready");
    s.lf(&["list", "--limit", "0"]).bad("--limit");
    s.lf(&["list", "--limit", "x"]).bad("--limit");
    s.lf(&["list", "--now", "nan"]).bad("now");
    s.lf(&["stats", "--now", "inf"]).bad("now");
    s.lf(&["stats", "--now", "x"]).bad("--now");
    assert_eq!(s.row("j"), Some(QRow::fresh()));
}

// ---- purge ------------------------------------------------------------------------------

#[test]
fn purge_deletes_old_finished_jobs_and_keeps_the_fence_floor() {
    let s = Sandbox::every_status();
    // Finished: c (done at 91), x (cancelled at 92), d (dead at 93). The cutoff is strict.
    let v = s
        .lf(&["--json", "purge", "--finished-before", "92"])
        .ok()
        .json();
    assert_eq!(
        (&v["op"], &v["ok"], &v["purged"], &v["finished_before"]),
        (&"purge".into(), &true.into(), &1.into(), &92.0.into())
    );
    assert_eq!(s.row("c"), None);
    assert!(s.row("x").is_some() && s.row("d").is_some());

    // Relative to --now: finished more than 6 s before t=99, i.e. before 93.
    s.lf(&["purge", "--older-than", "6", "--now", "99"])
        .ok()
        .says("purged 1 finished job (finished before 93)")
        .says("reserved");
    assert_eq!(s.row("x"), None);
    assert!(s.row("d").is_some());

    s.lf(&["purge", "--older-than", "0", "--now", "1000"])
        .ok()
        .says("purged 1 finished job (finished before 1000)");
    s.lf(&["purge", "--finished-before", "1e9"])
        .ok()
        .says("purged 0 finished jobs");
    // Unfinished jobs are never purged, whatever the cutoff.
    assert_eq!(s.ids(), ["r", "s", "l", "e", "f"]);

    // The fence floor: a purged id enqueued again continues its fence sequence.
    s.lf(&["enqueue", "c"]).ok();
    assert_eq!(s.row("c").unwrap().fence, 1);
    s.lf(&[
        "claim", "c", "--owner", "w9", "--ttl", "10", "--now", "1000",
    ])
    .ok()
    .says("fence 2");

    // Without --now, --older-than counts back from the system clock.
    s.lf(&[
        "complete", "c", "--owner", "w9", "--fence", "2", "--result", "r", "--now", "1001",
    ])
    .ok();
    let v = s.lf(&["--json", "purge", "--older-than", "60"]).ok().json();
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let before = v["finished_before"].as_f64().unwrap();
    assert!((before - (clock - 60.0)).abs() < 30.0, "{v}");
    assert_eq!(v["purged"], 1);
}

#[test]
fn purge_help_mentions_the_fence_floor() {
    let s = Sandbox::with_jobs(&[]);
    let run = s.lf(&["purge", "--help"]);
    run.ok().says("--finished-before").says("--older-than");
    assert!(run.stdout.contains("fence floor"), "{run:#?}");
    s.lf(&["--help"]).ok().says("purge").says("fence floor");
}

#[test]
fn purge_rejects_bad_input_and_deletes_nothing() {
    let s = Sandbox::every_status();
    let cases: &[(&[&str], &str)] = &[
        (&["purge"], "--finished-before"),
        (
            &["purge", "--finished-before", "1e9", "--older-than", "0"],
            "--older-than",
        ),
        (&["purge", "--finished-before", "nan"], "--finished-before"),
        (&["purge", "--finished-before", "inf"], "--finished-before"),
        (&["purge", "--finished-before", "x"], "--finished-before"),
        (&["purge", "--older-than", "-1"], "--older-than"),
        (&["purge", "--older-than", "nan"], "--older-than"),
        (&["purge", "--older-than", "1", "--now", "nan"], "now"),
        (
            &["purge", "--finished-before", "1e9", "--now", "5"],
            "--now",
        ),
    ];
    for (args, needle) in cases {
        let run = s.lf(args);
        assert_eq!(run.code, 2, "{args:?}: {run:#?}");
        run.bad(needle);
        assert_eq!(s.ids().len(), 8, "{args:?}");
    }
}

// ---- cancel -----------------------------------------------------------------------------

#[test]
fn cancel_stops_an_unfinished_job_and_fences_out_its_holder() {
    let s = Sandbox::with_jobs(&["j", "ready"]);
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "30", "--now", "0"])
        .ok();
    let v = s.lf(&["--json", "cancel", "j", "--now", "5"]).ok().json();
    assert_eq!(
        (&v["op"], &v["job_id"], &v["ok"], &v["now"]),
        (&"cancel".into(), &"j".into(), &true.into(), &5.0.into())
    );
    let row = s.row("j").unwrap();
    assert_eq!(
        (row.done, row.outcome.as_deref(), row.finished_at, row.fence),
        (1, Some("cancelled"), Some(5.0), 1),
        "done, cancelled at 5, fence kept"
    );
    // The holder's lease is still unexpired, yet it can store nothing more.
    s.lf(&[
        "complete", "j", "--owner", "a", "--fence", "1", "--result", "late", "--now", "6",
    ])
    .refused();
    s.lf(&[
        "renew", "j", "--owner", "a", "--fence", "1", "--ttl", "30", "--now", "6",
    ])
    .refused();
    s.lf(&["claim", "j", "--owner", "b", "--ttl", "30", "--now", "100"])
        .refused();
    assert_eq!(s.row("j").unwrap().result, None);

    s.lf(&["cancel", "ready", "--now", "7"])
        .ok()
        .says("cancelled ready");
    assert_eq!(
        s.row("ready").unwrap().outcome.as_deref(),
        Some("cancelled")
    );
}

#[test]
fn cancel_refuses_an_unknown_or_finished_job() {
    let s = Sandbox::with_jobs(&["done", "twice"]);
    s.lf(&["claim", "done", "--owner", "a", "--ttl", "30", "--now", "0"])
        .ok();
    s.lf(&[
        "complete", "done", "--owner", "a", "--fence", "1", "--result", "r", "--now", "1",
    ])
    .ok();
    let before = s.row("done");
    let run = s.lf(&["--json", "cancel", "done", "--now", "2"]);
    run.refused().warns("already finished");
    assert_eq!(run.json()["ok"], false);
    assert_eq!(s.row("done"), before, "a finished job keeps its result");

    s.lf(&["cancel", "twice", "--now", "2"]).ok();
    let before = s.row("twice");
    s.lf(&["cancel", "twice", "--now", "3"])
        .refused()
        .warns("already finished");
    assert_eq!(s.row("twice"), before, "the first cancel's time stays");

    s.lf(&["cancel", "nope"]).refused().warns("nope is unknown");
    assert_eq!(s.row("nope"), None);

    s.lf(&["cancel", "", "--now", "1"]).bad("job_id");
    s.lf(&["cancel", "nope", "--now", "nan"]).bad("now");
    s.lf(&["cancel"]).bad("ID");
}

#[test]
fn cancel_without_now_uses_the_system_clock() {
    let s = Sandbox::with_jobs(&["j"]);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let v = s.lf(&["--json", "cancel", "j"]).ok().json();
    let now = v["now"].as_f64().unwrap();
    assert!(now >= before && now < before + 60.0, "{v}");
    let finished = s.row("j").unwrap().finished_at.unwrap();
    assert!((finished - now).abs() < 1e-6, "{finished} vs {v}");
}

// ---- the database -----------------------------------------------------------------------

#[test]
fn queue_commands_need_an_initialised_database_and_create_nothing() {
    let s = Sandbox {
        dir: tempfile::tempdir().unwrap(),
    };
    for args in [
        &["enqueue", "j", "--priority", "1"][..],
        &["enqueue", "--ids-from", "-"],
        &["list"],
        &["stats"],
        &["purge", "--finished-before", "1"],
        &["cancel", "j"],
    ] {
        s.lf_stdin(args, Some(b"j\n")).bad("init");
        assert!(!s.db().exists(), "{args:?} created the file");
    }

    let junk = "not a database\n".repeat(100);
    std::fs::write(s.db(), &junk).unwrap();
    for args in [
        &["enqueue", "j", "--payload", "x"][..],
        &["list"],
        &["stats"],
        &["purge", "--older-than", "0"],
        &["cancel", "j"],
    ] {
        s.lf(args).bad("not an SQLite database");
    }
    assert_eq!(std::fs::read_to_string(s.db()).unwrap(), junk);
}

#[test]
fn a_busy_database_is_an_error_that_says_retry() {
    let s = Sandbox::with_jobs(&["j"]);
    let holder = Connection::open(s.db()).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    s.lf(&["cancel", "j", "--now", "1"]).busy("retry");
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(s.row("j"), Some(QRow::fresh()));
}

/// `claim --next` takes the best ready job (priority first) for a shell poller and prints its
/// lease; with nothing ready it is refused (exit 1) and changes nothing. An id and `--next`
/// together, or neither, are bad usage (exit 2).
#[test]
fn claim_next_takes_the_best_ready_job_and_prints_its_lease() {
    let s = Sandbox::with_jobs(&["low"]);
    s.lf(&["enqueue", "high", "--priority", "5", "--payload", "hello"])
        .ok();
    let v = s
        .lf(&[
            "--json", "claim", "--next", "--owner", "poller", "--ttl", "30", "--now", "10",
        ])
        .ok()
        .json();
    assert_eq!(
        (
            &v["op"],
            &v["job_id"],
            &v["fence"],
            &v["until"],
            &v["attempt"],
            &v["ok"]
        ),
        (
            &"claim".into(),
            &"high".into(),
            &1.into(),
            &40.0.into(),
            &1.into(),
            &true.into()
        )
    );
    let row = s.row("high").unwrap();
    assert_eq!(
        (row.owner.as_deref(), row.until, row.fence),
        (Some("poller"), 40.0, 1)
    );
    s.lf(&[
        "claim", "--next", "--owner", "poller", "--ttl", "30", "--now", "10",
    ])
    .ok()
    .says("claimed low as poller: fence 1, lease until 40");
    let before = (s.row("high"), s.row("low"));
    s.lf(&[
        "claim", "--next", "--owner", "poller", "--ttl", "30", "--now", "11",
    ])
    .refused();
    assert_eq!((s.row("high"), s.row("low")), before);
    s.lf(&["claim", "low", "--next", "--owner", "p", "--ttl", "30"])
        .status(2);
    s.lf(&["claim", "--owner", "p", "--ttl", "30"]).status(2);
}

/// `retry` makes a dead job ready again with a fresh budget (the fence continues), refuses a
/// completed or unknown one (exit 1, unchanged); `retry --dead` takes every dead job.
#[test]
fn retry_makes_dead_and_cancelled_jobs_ready_again_and_refuses_the_rest() {
    let s = Sandbox::with_jobs(&["done", "cancelled"]);
    s.lf(&["enqueue", "flaky", "--max-attempts", "1"]).ok();
    s.lf(&[
        "claim", "flaky", "--owner", "w", "--ttl", "30", "--now", "0",
    ])
    .ok();
    s.lf(&[
        "fail", "flaky", "--owner", "w", "--fence", "1", "--error", "boom", "--now", "1",
    ])
    .ok();
    assert_eq!(s.row("flaky").unwrap().outcome.as_deref(), Some("dead"));
    s.lf(&["claim", "done", "--owner", "w", "--ttl", "30", "--now", "0"])
        .ok();
    s.lf(&[
        "complete", "done", "--owner", "w", "--fence", "1", "--result", "r", "--now", "1",
    ])
    .ok();
    s.lf(&["cancel", "cancelled", "--now", "1"]).ok();

    let v = s
        .lf(&["--json", "retry", "flaky", "--now", "2"])
        .ok()
        .json();
    assert_eq!(
        (&v["op"], &v["job_id"], &v["ok"]),
        (&"retry".into(), &"flaky".into(), &true.into())
    );
    let row = s.row("flaky").unwrap();
    assert_eq!(
        (row.done, row.fence, row.outcome, row.error),
        (0, 1, None, None)
    );
    s.lf(&[
        "claim", "--next", "--owner", "v", "--ttl", "30", "--now", "3",
    ])
    .ok()
    .says("claimed flaky as v: fence 2, lease until 33, attempt 1");

    let before = s.row("done");
    let run = s.lf(&["retry", "done", "ghost", "cancelled", "--now", "4"]);
    run.refused();
    assert!(
        run.stderr.contains("done is done, not dead or cancelled"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("ghost is unknown"), "{}", run.stderr);
    assert!(run.stdout.contains("retried cancelled"), "{}", run.stdout);
    assert_eq!(s.row("done"), before);
    assert_eq!(s.row("cancelled").unwrap().done, 0);

    s.lf(&["retry", "--dead", "--now", "5"])
        .ok()
        .says("retried 0 dead jobs");
    s.lf(&["retry", "--now", "5"]).status(2);
}

/// `delete` removes jobs by id, finished or not, keeping the fence floor; an unknown id is
/// refused (exit 1).
#[test]
fn delete_removes_jobs_by_id_and_keeps_their_fences_reserved() {
    let s = Sandbox::with_jobs(&["a", "b", "keep"]);
    s.lf(&["claim", "a", "--owner", "w", "--ttl", "30", "--now", "0"])
        .ok();
    s.lf(&["--json", "delete", "a", "b"]).ok();
    assert_eq!(s.ids(), ["keep"]);
    s.lf(&[
        "complete", "a", "--owner", "w", "--fence", "1", "--result", "late", "--now", "1",
    ])
    .refused();
    s.lf(&["enqueue", "a"]).ok();
    s.lf(&["claim", "a", "--owner", "v", "--ttl", "30", "--now", "2"])
        .ok()
        .says("fence 2");
    let run = s.lf(&["delete", "ghost", "keep"]);
    run.refused();
    assert!(run.stderr.contains("ghost is unknown"), "{}", run.stderr);
    assert_eq!(s.ids(), ["a"]);
    s.lf(&["delete"]).status(2);
}

/// A dead or cancelled job whose unique key another unfinished job of its queue holds is not
/// retried (it would hold the key twice); `retry` says so, not that the job is "cancelled, not
/// dead or cancelled", and `retry --dead` says which dead jobs it left.
#[test]
fn retry_says_when_a_held_unique_key_keeps_a_job_as_it_is() {
    let s = Sandbox::with_jobs(&[]);
    s.lf(&["enqueue", "a", "--unique-key", "K"]).ok();
    s.lf(&["cancel", "a", "--now", "1"]).ok();
    s.lf(&["enqueue", "b", "--unique-key", "K"]).ok();
    let run = s.lf(&["retry", "a", "--now", "2"]);
    run.refused();
    assert!(
        run.stderr.contains(
            "a is cancelled, but another unfinished job of the queue default holds its unique \
             key \"K\""
        ),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("not dead or cancelled"),
        "{}",
        run.stderr
    );
    assert_eq!(s.row("a").unwrap().outcome.as_deref(), Some("cancelled"));

    s.lf(&["enqueue", "c", "--unique-key", "K2", "--max-attempts", "1"])
        .ok();
    s.lf(&["claim", "c", "--owner", "w", "--ttl", "30", "--now", "0"])
        .ok();
    s.lf(&[
        "fail", "c", "--owner", "w", "--fence", "1", "--error", "boom", "--now", "1",
    ])
    .ok();
    s.lf(&["enqueue", "d", "--unique-key", "K2"]).ok();
    s.lf(&["retry", "--dead", "--now", "3"])
        .ok()
        .says("retried 0 dead jobs")
        .says("1 dead job left as it is: another unfinished job of its queue holds its unique key");
    let v = s
        .lf(&["--json", "retry", "--dead", "--now", "3"])
        .ok()
        .json();
    assert_eq!((&v["retried"], &v["left"]), (&0.into(), &1.into()));
    assert_eq!(s.row("c").unwrap().outcome.as_deref(), Some("dead"));
}
