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
