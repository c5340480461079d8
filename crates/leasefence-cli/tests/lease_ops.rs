//! `claim-batch`, `fail` and `admit` of the `leasefence` binary, run in a temporary directory:
//! exit statuses 0/1/2, readable and JSON output, and the stored state read back through
//! `state --json` and an independent rusqlite connection.

use std::path::PathBuf;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::{Value, json};
use tempfile::TempDir;

mod support;
use support::Run;

/// A temporary working directory with a database in it.
struct Sandbox {
    dir: TempDir,
}

/// A job's row as a stock SQLite connection sees it: the contract's columns and the queue's.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    owner: Option<String>,
    until: f64,
    fence: i64,
    done: i64,
    not_before: f64,
    error: Option<String>,
    outcome: Option<String>,
}

impl Sandbox {
    /// An initialised database.
    fn new() -> Self {
        let s = Sandbox {
            dir: tempfile::tempdir().unwrap(),
        };
        s.lf(&["init"]).ok();
        s
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("jobs.db")
    }

    /// `leasefence --db <sandbox db> ARGS`.
    fn lf(&self, args: &[&str]) -> Run {
        let db = self.db();
        let mut all = vec!["--db", db.to_str().unwrap()];
        all.extend_from_slice(args);
        Run::of(self.dir.path(), &all, None, &[])
    }

    fn conn(&self) -> Connection {
        Connection::open_with_flags(self.db(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
    }

    /// The stored row of `id`, read through a fresh read-only connection.
    fn row(&self, id: &str) -> Option<Row> {
        self.conn()
            .query_row(
                "SELECT owner, until, fence, done, not_before, error, outcome FROM jobs \
                 WHERE id = ?1",
                [id],
                |r| {
                    Ok(Row {
                        owner: r.get(0)?,
                        until: r.get(1)?,
                        fence: r.get(2)?,
                        done: r.get(3)?,
                        not_before: r.get(4)?,
                        error: r.get(5)?,
                        outcome: r.get(6)?,
                    })
                },
            )
            .optional()
            .unwrap()
    }

    /// The highest fence admitted for `resource`, read through a fresh connection.
    fn gate(&self, resource: &str) -> Option<i64> {
        self.conn()
            .query_row(
                "SELECT fence FROM fence_gate WHERE resource = ?1",
                [resource],
                |r| r.get(0),
            )
            .optional()
            .unwrap()
    }

    /// `state ID --json`, as another process reads it.
    fn state(&self, id: &str) -> Value {
        self.lf(&["--json", "state", id]).ok().json()
    }
}

/// A row under a lease, with no failure recorded.
fn leased(owner: &str, until: f64, fence: i64, not_before: f64) -> Row {
    Row {
        owner: Some(owner.to_owned()),
        until,
        fence,
        done: 0,
        not_before,
        error: None,
        outcome: None,
    }
}

#[test]
fn claim_batch_takes_the_best_ready_jobs_and_prints_each_lease() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "a", "--payload", "hello", "--priority", "5"])
        .ok();
    s.lf(&["enqueue", "b"]).ok();
    s.lf(&["enqueue", "c", "--not-before", "1000"]).ok();

    // The best job first: a has the highest priority.
    let v = s
        .lf(&[
            "--json",
            "claim-batch",
            "--owner",
            "w",
            "--ttl",
            "30",
            "--n",
            "1",
            "--now",
            "100",
        ])
        .ok()
        .json();
    assert_eq!(
        v,
        json!({
            "op": "claim-batch", "ok": true, "job_id": "a", "owner": "w", "now": 100.0,
            "fence": 1, "until": 130.0, "priority": 5, "attempt": 1, "max_attempts": 0, "last_error": null,
            "queue": "default", "kind": null,
            "payload": "hello", "payload_bytes": 5,
        })
    );
    assert_eq!(s.row("a"), Some(leased("w", 130.0, 1, 0.0)));

    // Only b is ready now: a is leased, c is not due.
    let run = s.lf(&[
        "claim-batch",
        "--owner",
        "w",
        "--ttl",
        "30",
        "--n",
        "5",
        "--now",
        "100",
    ]);
    run.ok();
    assert_eq!(
        run.stdout,
        "claimed b as w: fence 1, lease until 130, attempt 1, no payload\n"
    );
    assert_eq!(s.row("b"), Some(leased("w", 130.0, 1, 0.0)));
    assert_eq!(s.row("c").unwrap().fence, 0, "c is not due before 1000");

    // Nothing ready: refused, nothing changes.
    let batch = |now: &str| {
        s.lf(&[
            "--json",
            "claim-batch",
            "--owner",
            "x",
            "--ttl",
            "10",
            "--n",
            "5",
            "--now",
            now,
        ])
    };
    let run = batch("129");
    run.refused().warns("no job is ready");
    let v = run.json();
    assert_eq!(
        (&v["ok"], &v["op"], &v["n"]),
        (&json!(false), &json!("claim-batch"), &json!(5))
    );
    assert_eq!(s.row("a"), Some(leased("w", 130.0, 1, 0.0)));

    // At t=1000 every lease has expired and c is due: all three, best first, each with a
    // fence one higher than its last.
    let leases = batch("1000").ok().jsons();
    let got: Vec<(&str, i64, f64)> = leases
        .iter()
        .map(|l| {
            (
                l["job_id"].as_str().unwrap(),
                l["fence"].as_i64().unwrap(),
                l["until"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("a", 2, 1010.0), ("b", 2, 1010.0), ("c", 1, 1010.0)]);
    assert!(leases.iter().all(|l| l["ok"] == true && l["owner"] == "x"));
    assert_eq!(s.row("c"), Some(leased("x", 1010.0, 1, 1000.0)));
    let state = s.state("a");
    assert_eq!(
        (&state["owner"], &state["fence"], &state["until"]),
        (&json!("x"), &json!(2), &json!(1010.0))
    );
}

#[test]
fn claim_batch_rejects_bad_input_and_claims_nothing() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "j"]).ok();
    let batch = |owner: &str, ttl: &str, n: &str, now: &str| {
        s.lf(&[
            "claim-batch",
            "--owner",
            owner,
            "--ttl",
            ttl,
            "--n",
            n,
            "--now",
            now,
        ])
    };
    batch("w", "10", "0", "0").bad("--n");
    batch("w", "10", "-1", "0").bad("--n");
    batch("w", "0", "1", "0").error("ttl");
    batch("w", "inf", "1", "0").error("ttl");
    batch("", "10", "1", "0").error("owner");
    batch("w", "10", "1", "nan").error("now");
    s.lf(&["claim-batch", "--owner", "w", "--ttl", "10"])
        .bad("--n");
    assert_eq!(s.row("j").unwrap().fence, 0);
}

#[test]
fn fail_schedules_a_retry_then_buries_the_job_and_refuses_a_stale_fence() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "j", "--max-attempts", "2"]).ok();
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "0"])
        .ok()
        .says("fence 1");

    let fail = |owner: &str, fence: &str, error: &str, now: &str, extra: &[&str]| {
        let mut args = vec![
            "fail", "j", "--owner", owner, "--fence", fence, "--error", error, "--now", now,
        ];
        args.extend_from_slice(extra);
        s.lf(&args)
    };
    fail("a", "1", "boom", "1", &["--retry-at", "50"])
        .ok()
        .says("failed j as a (fence 1): retrying, claimable again at 50");
    let retrying = Row {
        owner: None,
        until: 0.0,
        fence: 1,
        done: 0,
        not_before: 50.0,
        error: Some("boom".to_owned()),
        outcome: None,
    };
    assert_eq!(s.row("j"), Some(retrying.clone()));
    let state = s.state("j");
    assert_eq!(
        (&state["owner"], &state["fence"], &state["done"]),
        (&json!(null), &json!(1), &json!(false))
    );

    // The lease was given up: the same fence cannot fail (or do anything) again.
    fail("a", "1", "again", "2", &[])
        .refused()
        .warns("a holds no live lease on j under fence 1");
    assert_eq!(s.row("j"), Some(retrying));

    // Not handed out before the retry time; then b gets fence 2.
    s.lf(&[
        "claim-batch",
        "--owner",
        "b",
        "--ttl",
        "10",
        "--n",
        "1",
        "--now",
        "49",
    ])
    .refused();
    s.lf(&[
        "claim-batch",
        "--owner",
        "b",
        "--ttl",
        "10",
        "--n",
        "1",
        "--now",
        "50",
    ])
    .ok()
    .says("claimed j as b: fence 2, lease until 60");

    // A wakes up and reports its old failure: refused, b's lease stands.
    let run = s.lf(&[
        "--json", "fail", "j", "--owner", "a", "--fence", "1", "--error", "stale", "--now", "51",
    ]);
    run.refused();
    let v = run.json();
    assert_eq!(
        (&v["ok"], &v["op"], &v["job_id"], &v["fence"]),
        (&json!(false), &json!("fail"), &json!("j"), &json!(1))
    );
    let b_lease = Row {
        error: Some("boom".to_owned()),
        ..leased("b", 60.0, 2, 50.0)
    };
    assert_eq!(s.row("j"), Some(b_lease));

    // b's failure is the job's last attempt: dead.
    let v = s
        .lf(&[
            "--json",
            "fail",
            "j",
            "--owner",
            "b",
            "--fence",
            "2",
            "--error",
            "boom 2",
            "--now",
            "52",
            "--retry-at",
            "80",
        ])
        .ok()
        .json();
    assert_eq!(
        v,
        json!({
            "op": "fail", "ok": true, "job_id": "j", "owner": "b", "fence": 2, "now": 52.0,
            "outcome": "dead", "retry_at": null,
        })
    );
    let row = s.row("j").unwrap();
    assert_eq!(
        (
            row.done,
            row.outcome.as_deref(),
            row.error.as_deref(),
            row.fence
        ),
        (1, Some("dead"), Some("boom 2"), 2)
    );
    s.lf(&["claim", "j", "--owner", "c", "--ttl", "10", "--now", "100"])
        .refused();
}

#[test]
fn fail_refuses_an_expired_lease_and_backs_off_by_default() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "k"]).ok();
    s.lf(&["claim", "k", "--owner", "a", "--ttl", "10", "--now", "0"])
        .ok();
    // now == until: expired, so refused, and nothing changes.
    s.lf(&[
        "fail", "k", "--owner", "a", "--fence", "1", "--error", "late", "--now", "10",
    ])
    .refused();
    assert_eq!(s.row("k"), Some(leased("a", 10.0, 1, 0.0)));

    // Without --retry-at: the library's default backoff (1 s after the first attempt, doubling,
    // ±20 % jitter).
    s.lf(&["claim", "k", "--owner", "b", "--ttl", "10", "--now", "100"])
        .ok()
        .says("fence 2");
    let v = s
        .lf(&[
            "--json", "fail", "k", "--owner", "b", "--fence", "2", "--error", "e", "--now", "101",
        ])
        .ok()
        .json();
    assert_eq!(v["outcome"], "retrying");
    let at = v["retry_at"].as_f64().unwrap();
    // The second attempt failed: 2 s ± 20 %.
    assert!((102.6..=103.4).contains(&at), "{v}");
    assert_eq!(s.row("k").unwrap().not_before, at);
}

#[test]
fn fail_rejects_bad_input_and_changes_nothing() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "j"]).ok();
    s.lf(&["claim", "j", "--owner", "a", "--ttl", "10", "--now", "0"])
        .ok();
    let fail = |extra: &[&str]| {
        let mut args = vec!["fail", "j", "--fence", "1"];
        args.extend_from_slice(extra);
        s.lf(&args)
    };
    fail(&[
        "--owner",
        "a",
        "--error",
        "e",
        "--now",
        "1",
        "--retry-at",
        "inf",
    ])
    .error("--retry-at");
    fail(&[
        "--owner",
        "a",
        "--error",
        "e",
        "--now",
        "1",
        "--retry-at",
        "x",
    ])
    .bad("--retry-at");
    fail(&["--owner", "", "--error", "e", "--now", "1"]).error("owner");
    fail(&["--owner", "a", "--error", "e", "--now", "nan"]).error("now");
    fail(&["--owner", "a", "--now", "1"]).bad("--error");
    s.lf(&["fail", "", "--owner", "a", "--fence", "1", "--error", "e"])
        .error("job_id");
    assert_eq!(s.row("j"), Some(leased("a", 10.0, 1, 0.0)));
}

#[test]
fn admit_records_the_highest_fence_and_refuses_a_lower_one() {
    let s = Sandbox::new();
    s.lf(&["admit", "bucket/report.csv", "--fence", "3"])
        .ok()
        .says("admitted fence 3 for bucket/report.csv");
    assert_eq!(s.gate("bucket/report.csv"), Some(3));
    // The same generation may write again.
    s.lf(&["admit", "bucket/report.csv", "--fence", "3"]).ok();

    // An older generation is refused and the gate keeps 3.
    let run = s.lf(&["--json", "admit", "bucket/report.csv", "--fence", "2"]);
    run.refused().warns("fence 2 is lower");
    let v = run.json();
    assert_eq!(
        (&v["ok"], &v["op"], &v["resource"], &v["fence"]),
        (
            &json!(false),
            &json!("admit"),
            &json!("bucket/report.csv"),
            &json!(2)
        )
    );
    assert_eq!(s.gate("bucket/report.csv"), Some(3));

    // A newer one is admitted and raises the gate; other resources are separate.
    let v = s
        .lf(&["--json", "admit", "bucket/report.csv", "--fence", "5"])
        .ok()
        .json();
    assert_eq!(
        v,
        json!({ "op": "admit", "ok": true, "resource": "bucket/report.csv", "fence": 5 })
    );
    assert_eq!(s.gate("bucket/report.csv"), Some(5));
    s.lf(&["admit", "other", "--fence", "1"]).ok();
    assert_eq!(s.gate("other"), Some(1));
    s.lf(&["admit", "bucket/report.csv", "--fence", "4"])
        .refused();
    assert_eq!(s.gate("bucket/report.csv"), Some(5));
}

#[test]
fn admit_rejects_bad_input_and_records_nothing() {
    let s = Sandbox::new();
    s.lf(&["admit", "", "--fence", "1"]).error("resource");
    s.lf(&["admit", "r", "--fence", "x"]).bad("--fence");
    s.lf(&["admit", "r"]).bad("--fence");
    // A fence no claim hands out (below 1) would become the gate's floor: refused by name.
    s.lf(&["admit", "r", "--fence", "0"]).error("fence");
    s.lf(&["admit", "r", "--fence", "-3"]).error("fence");
    assert_eq!(s.gate(""), None);
    assert_eq!(s.gate("r"), None);
}

#[test]
fn the_new_verbs_need_an_initialised_database() {
    let dir = tempfile::tempdir().unwrap();
    let lf = |args: &[&str]| {
        let mut all = vec!["--db", "missing.db"];
        all.extend_from_slice(args);
        Run::of(dir.path(), &all, None, &[])
    };
    lf(&["claim-batch", "--owner", "w", "--ttl", "1", "--n", "1"]).error("init");
    lf(&["fail", "j", "--owner", "w", "--fence", "1", "--error", "e"]).error("init");
    lf(&["admit", "r", "--fence", "1"]).error("init");
    assert!(
        !dir.path().join("missing.db").exists(),
        "only init creates the file"
    );
}

#[test]
fn help_describes_the_new_verbs() {
    let dir = tempfile::tempdir().unwrap();
    let help = |verb: &str| Run::of(dir.path(), &[verb, "--help"], None, &[]);
    help("claim-batch")
        .ok()
        .says("up to N ready jobs")
        .says("--n <N>");
    help("fail")
        .ok()
        .says("--retry-at <T>")
        .says("dead")
        .says("--error <TEXT>");
    help("admit")
        .ok()
        .says("<RESOURCE>")
        .says("--fence <FENCE>");
    Run::of(dir.path(), &["--help"], None, &[])
        .ok()
        .says("claim-batch")
        .says("fail")
        .says("admit");
}
