//! `history ID` and the ledger line of `state`: every claim of a job with its fence, owner,
//! outcome and the writes refused under it, after a stalled worker came back — with exit
//! statuses, output and the ledger read back through an independent rusqlite connection.

mod support;
use support::Sandbox;

/// `(fence, owner, outcome)` of each attempt, read through the sandbox's own connection.
fn attempts(s: &Sandbox, id: &str) -> Vec<(i64, String, Option<String>)> {
    let conn = s.conn();
    let mut stmt = conn
        .prepare("SELECT fence, owner, outcome FROM attempts WHERE job_id = ?1 ORDER BY fence")
        .unwrap();
    stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// A job claimed by `a`, which stalls past its lease; `b` takes it over; `a` comes back and
/// tries to renew and to complete (both refused); `b` completes.
fn stalled(s: &Sandbox) {
    s.lf(&["enqueue", "report"]).ok();
    s.lf(&[
        "claim", "report", "--owner", "a", "--ttl", "10", "--now", "0",
    ])
    .ok();
    s.lf(&[
        "claim", "report", "--owner", "b", "--ttl", "10", "--now", "20",
    ])
    .ok();
    s.lf(&[
        "renew", "report", "--owner", "a", "--fence", "1", "--ttl", "10", "--now", "21",
    ])
    .refused();
    for t in ["21", "22"] {
        s.lf(&[
            "complete", "report", "--owner", "a", "--fence", "1", "--result", "late", "--now", t,
        ])
        .refused();
    }
    s.lf(&[
        "complete", "report", "--owner", "b", "--fence", "2", "--result", "ok", "--now", "23",
    ])
    .ok();
}

#[test]
fn history_shows_who_held_each_fence_and_which_late_writes_were_refused() {
    let s = Sandbox::new();
    stalled(&s);
    let run = s.lf(&["history", "report"]);
    run.ok()
        .says("report: 2 attempts (1 completed, 1 lost), 3 writes refused");
    assert_eq!(
        run.table_row("1")[..2],
        ["1", "a"],
        "fence 1 belongs to a: {run:#?}"
    );
    let first = run.stdout.lines().find(|l| l.starts_with("1 ")).unwrap();
    assert!(
        first.contains("lost") && first.contains("complete 2, renew 1"),
        "{first}"
    );
    let second = run.stdout.lines().find(|l| l.starts_with("2 ")).unwrap();
    assert!(
        second.contains(" b ") && second.contains("completed"),
        "{second}"
    );
    assert_eq!(
        attempts(&s, "report"),
        [
            (1, "a".into(), Some("lost".into())),
            (2, "b".into(), Some("completed".into()))
        ]
    );

    let v = s.lf(&["--json", "history", "report"]).ok().json();
    assert_eq!(
        (&v["op"], &v["job_id"], &v["ok"]),
        (&"history".into(), &"report".into(), &true.into())
    );
    assert_eq!(v["attempts"][0]["outcome"], "lost");
    assert_eq!(v["attempts"][0]["refused"], 3);
    assert_eq!(v["attempts"][1]["owner"], "b");
    assert!(v["attempts"][1]["claimed_at"].as_f64().unwrap() > 1.0e9);
    assert_eq!(v["refusals"][0]["op"], "complete");
    assert_eq!(v["refusals"][0]["count"], 2);
    assert_eq!(v["ledger"]["lost"], 1);
    assert_eq!(v["ledger"]["refused"], 3);
}

#[test]
fn state_shows_the_ledger_counts() {
    let s = Sandbox::new();
    stalled(&s);
    s.lf(&["state", "report"])
        .ok()
        .says("ledger       2 attempts (1 completed, 1 lost), 3 writes refused");
    let v = s.lf(&["--json", "state", "report"]).ok().json();
    assert_eq!(
        (
            &v["ledger"]["attempts"],
            &v["ledger"]["completed"],
            &v["ledger"]["refused"]
        ),
        (&2.into(), &1.into(), &3.into())
    );
    s.lf(&["enqueue", "fresh"]).ok();
    s.lf(&["state", "fresh"])
        .ok()
        .says("ledger       no attempts, no write refused");
}

#[test]
fn a_failure_shows_its_error_and_delete_takes_the_ledger_along() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "j", "--max-attempts", "3"]).ok();
    s.lf(&["claim", "j", "--owner", "w", "--ttl", "10", "--now", "0"])
        .ok();
    s.lf(&[
        "fail",
        "j",
        "--owner",
        "w",
        "--fence",
        "1",
        "--error",
        "disk full",
        "--now",
        "1",
    ])
    .ok();
    let run = s.lf(&["history", "j"]);
    run.ok().says("j: 1 attempt (1 failed), no write refused");
    let row = run.stdout.lines().find(|l| l.starts_with("1 ")).unwrap();
    assert!(
        row.contains("failed") && row.ends_with("disk full"),
        "{row}"
    );
    s.lf(&["delete", "j"]).ok();
    assert_eq!(attempts(&s, "j"), []);
    s.lf(&["history", "j"]).refused().warns("j is unknown");
}

#[test]
fn history_of_an_unknown_or_bad_id_is_refused_and_changes_nothing() {
    let s = Sandbox::new();
    let run = s.lf(&["--json", "history", "nope"]);
    run.refused();
    assert_eq!(run.json()["op"], "history");
    assert_eq!(run.json()["ok"], false);
    s.lf(&["history", ""]).bad("job_id");
}
