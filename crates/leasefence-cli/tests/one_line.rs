//! Stored short fields (id, owner, unique key) that hold a newline — anyone with
//! the worker token can store one over HTTP — stay on their line in `state` and `history`,
//! written `\n`, so a line-based reader (or the table) is never split; `--json` keeps them as
//! stored.

use tempfile::TempDir;

mod support;
use support::Run;

/// `leasefence --db jobs.db ARGS…` in `dir`.
fn lf_in(dir: &TempDir, args: &[&str]) -> Run {
    let mut all = vec!["--db", "jobs.db"];
    all.extend_from_slice(args);
    Run::of(dir.path(), &all, None, &[])
}

#[test]
fn state_and_history_keep_each_short_field_on_its_line() {
    let dir = TempDir::new().unwrap();
    let lf = |args: &[&str]| lf_in(&dir, args);
    lf(&["init"]).ok();
    lf(&["enqueue", "m\nx"]).ok();
    lf(&[
        "claim", "m\nx", "--owner", "X\nY", "--ttl", "10", "--now", "0",
    ])
    .ok();

    let state = lf(&["state", "m\nx", "--now", "1"]);
    state.ok();
    let lines: Vec<&str> = state.stdout.lines().collect();
    assert_eq!(lines[0], "m\\nx", "{state:#?}");
    let field = |name: &str| {
        lines
            .iter()
            .find_map(|l| l.trim_start().strip_prefix(name).map(str::trim))
            .unwrap_or_else(|| panic!("no {name} line: {state:#?}"))
    };
    assert_eq!(field("owner"), "X\\nY");
    assert!(
        !lines.iter().any(|l| *l == "Y" || l.starts_with("x")),
        "{state:#?}"
    );

    let history = lf(&["history", "m\nx"]);
    history.ok();
    let lines: Vec<&str> = history.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "a header, the table's head and one attempt: {history:#?}"
    );
    assert!(lines[0].starts_with("m\\nx: 1 attempt"), "{history:#?}");
    assert!(lines[2].contains("X\\nY"), "{history:#?}");

    // JSON keeps the stored text exactly.
    let json = lf(&["--json", "state", "m\nx", "--now", "1"]).json();
    assert_eq!(
        (json["job_id"].as_str(), json["owner"].as_str()),
        (Some("m\nx"), Some("X\nY"))
    );
}

/// `claim-batch` and `claim --next` print one line per lease (the README's promise, what a
/// shell poller reads with `while read`), also for an id holding a newline, written `\n`; the
/// JSON keeps the id as stored.
#[test]
fn claim_batch_and_claim_next_print_one_line_per_lease() {
    let dir = TempDir::new().unwrap();
    let lf = |args: &[&str]| lf_in(&dir, args);
    lf(&["init"]).ok();
    lf(&["enqueue", "a\nclaimed fake as w: fence 99"]).ok();
    lf(&["enqueue", "b\nc"]).ok();
    lf(&["enqueue", "d\ne"]).ok();

    let next = lf(&[
        "claim", "--next", "--owner", "w", "--ttl", "30", "--now", "0",
    ]);
    next.ok();
    assert_eq!(next.stdout.lines().count(), 1, "{next:#?}");
    assert!(
        next.stdout
            .starts_with("claimed a\\nclaimed fake as w: fence 99 as w: fence 1"),
        "{next:#?}"
    );

    let batch = lf(&[
        "claim-batch",
        "--owner",
        "w",
        "--ttl",
        "30",
        "--n",
        "5",
        "--now",
        "0",
    ]);
    batch.ok();
    let lines: Vec<&str> = batch.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "one line per lease: {batch:#?}");
    assert!(lines[0].starts_with("claimed b\\nc as w"), "{batch:#?}");

    lf(&["enqueue", "f\ng"]).ok();
    let json = lf(&[
        "--json",
        "claim-batch",
        "--owner",
        "w",
        "--ttl",
        "30",
        "--n",
        "5",
        "--now",
        "0",
    ])
    .json();
    assert_eq!(json["job_id"].as_str(), Some("f\ng"));
}

/// Every verb's one-line answer — what it did, or `refused: …` — stays one line for an id
/// holding a newline (`enqueue`, `claim ID`, `renew`, `complete`, `cancel`, `delete`, and a
/// refusal), so a script reading the answer line by line is not handed a forged second one.
#[test]
fn a_verb_answers_on_one_line_for_an_id_with_a_newline() {
    let dir = TempDir::new().unwrap();
    let lf = |args: &[&str]| lf_in(&dir, args);
    let id = "m\nrefused: forged";
    let one_line = |run: &Run, stream: &str, starts: &str| {
        let text = if stream == "stdout" {
            &run.stdout
        } else {
            &run.stderr
        };
        assert_eq!(text.lines().count(), 1, "one line on {stream}: {run:#?}");
        assert!(text.starts_with(starts), "{run:#?}");
        assert!(text.contains("\\nrefused: forged"), "{run:#?}");
    };
    lf(&["init"]).ok();
    one_line(&lf(&["enqueue", id]), "stdout", "enqueued m\\n");
    let again = lf(&["enqueue", id]);
    assert_eq!(again.code, 1, "{again:#?}");
    one_line(&again, "stderr", "refused: m\\n");
    let claim = lf(&["claim", id, "--owner", "w", "--ttl", "30", "--now", "0"]);
    one_line(&claim, "stdout", "claimed m\\n");
    one_line(
        &lf(&[
            "renew", id, "--owner", "w", "--fence", "1", "--ttl", "30", "--now", "1",
        ]),
        "stdout",
        "renewed m\\n",
    );
    let stale = lf(&[
        "complete", id, "--owner", "w", "--fence", "2", "--now", "2", "--result", "r",
    ]);
    assert_eq!(stale.code, 1, "{stale:#?}");
    one_line(&stale, "stderr", "refused: ");
    one_line(
        &lf(&[
            "complete", id, "--owner", "w", "--fence", "1", "--now", "2", "--result", "r",
        ]),
        "stdout",
        "completed m\\n",
    );
    lf(&["enqueue", "n\nrefused: forged"]).ok();
    one_line(
        &lf(&["cancel", "n\nrefused: forged"]),
        "stdout",
        "cancelled n\\n",
    );
    let deleted = lf(&["delete", id]);
    one_line(&deleted, "stdout", "deleted m\\n");
}
