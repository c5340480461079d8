//! One key set across every `--json` output (`op`, `ok`, `job_id` where a job is concerned,
//! times as epoch seconds), and the flags' errors: negative counts and durations name their
//! flag (exit 2), an empty `work --exec` is refused, and `--help` describes the global options
//! once.

use serde_json::Value;
use tempfile::TempDir;

mod support;
use support::Run;

struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn lf(&self, args: &[&str]) -> Run {
        let mut all = vec!["--db", "jobs.db"];
        all.extend_from_slice(args);
        Run::of(self.dir.path(), &all, None, &[])
    }

    /// Every JSON line of `args` run with `--json`, exit status `code`.
    #[track_caller]
    fn json(&self, code: i32, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let run = self.lf(&all);
        run.status(code);
        let lines = run.jsons();
        assert!(!lines.is_empty(), "{args:?}: {run:#?}");
        lines
    }
}

/// `op` is `op`, `ok` is a boolean equal to `ok`, and `job_id` is `job` (or absent when `None`
/// is given for a record that concerns no job).
#[track_caller]
fn keys(record: &Value, op: &str, ok: bool, job: Option<&str>) {
    assert_eq!(record["op"], op, "{record}");
    assert_eq!(record["ok"], ok, "{record}");
    assert_eq!(record.get("id"), None, "the id is `job_id`: {record}");
    match job {
        Some(job) => assert_eq!(record["job_id"], job, "{record}"),
        None => assert!(record.get("job_id").is_none_or(Value::is_null), "{record}"),
    }
    for time in [
        "now",
        "until",
        "not_before",
        "retry_at",
        "finished_at",
        "enqueued_at",
    ] {
        if let Some(t) = record.get(time) {
            assert!(
                t.is_null() || t.is_number(),
                "{time} in epoch seconds: {record}"
            );
        }
    }
}

#[test]
fn every_verb_prints_op_ok_and_job_id() {
    let s = Sandbox::new();
    let one = |code, args: &[&str]| {
        let mut lines = s.json(code, args);
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        lines.remove(0)
    };
    keys(&one(0, &["init"]), "init", true, None);
    keys(&one(0, &["enqueue", "a"]), "enqueue", true, Some("a"));
    keys(&one(1, &["enqueue", "a"]), "enqueue", false, Some("a"));
    keys(
        &one(0, &["enqueue", "b", "--priority", "1"]),
        "enqueue",
        true,
        Some("b"),
    );
    keys(&one(0, &["state", "a"]), "state", true, Some("a"));
    keys(&one(1, &["state", "zz"]), "state", false, Some("zz"));
    let claim = one(
        0,
        &["claim", "a", "--owner", "w", "--ttl", "30", "--now", "100"],
    );
    keys(&claim, "claim", true, Some("a"));
    assert_eq!(claim["fence"], 1);
    keys(
        &one(
            1,
            &["claim", "a", "--owner", "w", "--ttl", "30", "--now", "100"],
        ),
        "claim",
        false,
        Some("a"),
    );
    keys(
        &one(
            0,
            &[
                "renew", "a", "--owner", "w", "--fence", "1", "--ttl", "30", "--now", "101",
            ],
        ),
        "renew",
        true,
        Some("a"),
    );
    keys(
        &one(
            0,
            &[
                "fail", "a", "--owner", "w", "--fence", "1", "--error", "x", "--now", "102",
            ],
        ),
        "fail",
        true,
        Some("a"),
    );
    keys(
        &one(
            0,
            &[
                "claim", "--next", "--owner", "w", "--ttl", "30", "--now", "1e9",
            ],
        ),
        "claim",
        true,
        Some("b"),
    );
    keys(
        &one(0, &["release", "b", "--owner", "w", "--fence", "1"]),
        "release",
        true,
        Some("b"),
    );
    let batch = one(
        0,
        &[
            "claim-batch",
            "--owner",
            "w",
            "--ttl",
            "30",
            "--n",
            "1",
            "--now",
            "1e9",
        ],
    );
    keys(&batch, "claim-batch", true, Some("b"));
    keys(
        &one(
            0,
            &[
                "complete", "b", "--owner", "w", "--fence", "2", "--result", "r", "--now", "1e9",
            ],
        ),
        "complete",
        true,
        Some("b"),
    );
    keys(
        &one(
            1,
            &[
                "complete", "b", "--owner", "w", "--fence", "2", "--result", "r", "--now", "1e9",
            ],
        ),
        "complete",
        false,
        Some("b"),
    );
    keys(&one(0, &["cancel", "a"]), "cancel", true, Some("a"));
    keys(&one(1, &["cancel", "a"]), "cancel", false, Some("a"));
    // The operator verbs: one line per id, or one for `--dead`.
    s.lf(&["enqueue", "r"]).ok();
    s.lf(&["cancel", "r"]).ok();
    keys(&one(0, &["retry", "r"]), "retry", true, Some("r"));
    keys(&one(1, &["retry", "r"]), "retry", false, Some("r"));
    keys(&one(0, &["retry", "--dead"]), "retry", true, None);
    keys(&one(0, &["delete", "r"]), "delete", true, Some("r"));
    keys(&one(1, &["delete", "r"]), "delete", false, Some("r"));
    // Nothing is ready now.
    keys(
        &one(
            1,
            &[
                "claim-batch",
                "--owner",
                "w",
                "--ttl",
                "30",
                "--n",
                "1",
                "--now",
                "1e9",
            ],
        ),
        "claim-batch",
        false,
        None,
    );
    keys(
        &one(
            1,
            &[
                "claim", "--next", "--owner", "w", "--ttl", "30", "--now", "1e9",
            ],
        ),
        "claim",
        false,
        None,
    );
    keys(
        &one(0, &["admit", "bucket", "--fence", "3"]),
        "admit",
        true,
        None,
    );
    keys(
        &one(1, &["admit", "bucket", "--fence", "2"]),
        "admit",
        false,
        None,
    );
    let listed = s.json(0, &["list", "--now", "1e9"]);
    assert_eq!(listed.len(), 2);
    for line in listed {
        let id = line["job_id"].as_str().unwrap().to_owned();
        keys(&line, "list", true, Some(&id));
    }
    keys(&one(0, &["stats"]), "stats", true, None);
    keys(
        &one(0, &["purge", "--older-than", "0"]),
        "purge",
        true,
        None,
    );

    s.lf(&["enqueue", "w1"]).ok();
    let lines = s.json(0, &["work", "--exec", "cat", "--drain", "--poll", "0.01"]);
    let (events, last) = lines.split_at(lines.len() - 1);
    assert_eq!(events.len(), 1, "{lines:?}");
    keys(&events[0], "work", true, Some("w1"));
    assert_eq!(events[0]["event"], "completed");
    keys(&last[0], "work", true, None);
    assert_eq!(last[0]["event"], "stopped");
}

#[test]
fn work_events_of_a_failing_command_are_not_ok() {
    let s = Sandbox::new();
    s.lf(&["init"]).ok();
    s.lf(&["enqueue", "f", "--max-attempts", "1"]).ok();
    let lines = s.json(
        0,
        &["work", "--exec", "exit 3", "--drain", "--poll", "0.01"],
    );
    keys(&lines[0], "work", false, Some("f"));
    assert_eq!(lines[0]["event"], "dead");
}

#[test]
fn an_empty_exec_is_refused_naming_the_flag() {
    let s = Sandbox::new();
    s.lf(&["init"]).ok();
    for exec in ["", "   "] {
        s.lf(&["work", "--exec", exec, "--drain"]).error("--exec");
    }
}

#[test]
fn negative_counts_and_durations_name_their_flag() {
    let s = Sandbox::new();
    s.lf(&["init"]).ok();
    for (args, flag) in [
        (&["list", "--limit", "-1"][..], "--limit"),
        (
            &["claim-batch", "--owner", "w", "--ttl", "5", "--n", "-3"],
            "--n",
        ),
        (&["enqueue", "j", "--max-attempts", "-1"], "--max-attempts"),
        (&["work", "--exec", "true", "--ttl", "-5"], "--ttl"),
        (
            &["work", "--exec", "true", "--concurrency", "-2"],
            "--concurrency",
        ),
        (
            &["work", "--exec", "true", "--shutdown-deadline", "-1"],
            "--shutdown-deadline",
        ),
        (
            &["work", "--exec", "true", "--retry-delay", "-1"],
            "--retry-delay",
        ),
        (&["work", "--exec", "true", "--poll", "-0.5"], "--poll"),
        (&["schedule", "tick", "--ttl", "-5"], "--ttl"),
        (&["serve", "--request-timeout", "-3"], "request-timeout"),
    ] {
        let run = s.lf(args);
        run.bad(flag);
        assert!(
            !run.stderr.contains("unexpected argument"),
            "{args:?}: {run:#?}"
        );
        assert!(
            run.stderr.contains("must be") || run.stderr.contains("give"),
            "{args:?}: {run:#?}"
        );
    }
}

/// A duration too large for the worker's clock is refused as too large: it was "must be a
/// finite number of seconds >= 0, got 1e300", which 1e300 is.
#[test]
fn a_huge_work_duration_is_refused_as_too_large() {
    let s = Sandbox::new();
    s.lf(&["init"]).ok();
    for flag in [
        "--shutdown-deadline",
        "--retry-delay",
        "--retry-max",
        "--poll",
    ] {
        let run = s.lf(&["work", "--exec", "true", "--drain", flag, "1e300"]);
        run.bad(flag).bad("must be at most");
        assert!(!run.stderr.contains(">= 0"), "{flag}: {run:#?}");
    }
}

/// Counts parsed by clap's own range parser: a negative one is refused naming its flag and the
/// range, not taken for an unknown argument.
#[test]
fn negative_counts_of_demo_and_serve_name_their_flag() {
    let s = Sandbox::new();
    for (args, flag) in [
        (&["demo", "--jobs", "-5"][..], "--jobs"),
        (&["demo", "--workers", "-1"], "--workers"),
        (&["serve", "--connections", "-1"], "--connections"),
        (&["serve", "--max-body-bytes", "-1"], "--max-body-bytes"),
    ] {
        let run = s.lf(args);
        run.bad(flag);
        assert!(
            !run.stderr.contains("unexpected argument"),
            "{args:?}: {run:#?}"
        );
    }
}

#[test]
fn global_options_are_described_once_at_the_top() {
    let s = Sandbox::new();
    let top = s.lf(&["--help"]);
    top.ok().says("libpq key=value").says("sqlite://PATH");
    for verb in ["init", "state", "list", "claim", "work"] {
        let help = s.lf(&[verb, "--help"]);
        help.ok().says("Global options:").says("--db <DB>");
        assert!(!help.stdout.contains("sqlite://PATH"), "{verb}: {help:#?}");
        assert!(
            !help.stdout.contains("database server's clock (not"),
            "{verb}"
        );
    }
}

#[test]
fn work_help_lists_the_environment_of_a_command() {
    let s = Sandbox::new();
    let help = s.lf(&["work", "--help"]);
    help.ok()
        .says("LEASEFENCE_JOB_ID")
        .says("LEASEFENCE_FENCE")
        .says("LEASEFENCE_ATTEMPT");
}
