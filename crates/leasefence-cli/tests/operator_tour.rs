//! What an operator tour of the command line found (2026-12-06), pinned: `retry --dead
//! --queue`, the `list` page hint that keeps the database, the worker's wording of a second
//! signal and of an operator's cancel. Exit statuses, output, and the stored rows read back
//! through the sandbox's own rusqlite connection.

mod support;
use support::Sandbox;

/// `(done, attempts, outcome)` of a stored job.
fn stored(s: &Sandbox, id: &str) -> (i64, i64, Option<String>) {
    s.conn()
        .query_row(
            "SELECT done, attempts, outcome FROM jobs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

/// Makes `id` (in `queue`) dead: one attempt, failed.
fn kill(s: &Sandbox, id: &str, queue: &str) {
    s.lf(&["enqueue", id, "--queue", queue, "--max-attempts", "1"])
        .ok();
    s.lf(&["claim", id, "--owner", "w", "--ttl", "30", "--now", "0"])
        .ok();
    s.lf(&[
        "fail", id, "--owner", "w", "--fence", "1", "--error", "boom", "--now", "1",
    ])
    .ok();
    assert_eq!(stored(s, id), (1, 1, Some("dead".into())));
}

/// `retry --dead --queue Q` retries the dead jobs of the named queues only (issue 13's
/// `retry --dead [--queue …]`); `--queue` without `--dead`, or a bad queue name, is a usage
/// error that changes nothing.
#[test]
fn retry_dead_of_one_queue_leaves_the_other_queues_dead() {
    let s = Sandbox::new();
    kill(&s, "m1", "mail");
    kill(&s, "m2", "mail");
    kill(&s, "p1", "pdf");
    kill(&s, "x1", "other");

    s.lf(&["retry", "--queue", "mail", "m1"]).status(2);
    s.lf(&["retry", "--dead", "--queue", "a b"]).bad("queue");
    assert_eq!(stored(&s, "m1"), (1, 1, Some("dead".into())));

    let v = s
        .lf(&["--json", "retry", "--dead", "--queue", "mail", "--now", "2"])
        .ok()
        .json();
    assert_eq!(
        (&v["retried"], &v["left"], &v["queues"]),
        (&2.into(), &0.into(), &serde_json::json!(["mail"]))
    );
    assert_eq!(stored(&s, "m1"), (0, 0, None));
    assert_eq!(stored(&s, "m2"), (0, 0, None));
    assert_eq!(stored(&s, "p1"), (1, 1, Some("dead".into())));

    s.lf(&[
        "retry",
        "--dead",
        "--queue",
        "pdf",
        "--queue",
        "nothing-here",
        "--now",
        "3",
    ])
    .ok()
    .says("retried 1 dead job of the queues pdf, nothing-here");
    assert_eq!(stored(&s, "p1"), (0, 0, None));
    assert_eq!(stored(&s, "x1"), (1, 1, Some("dead".into())));
    s.lf(&["retry", "--dead", "--now", "4"])
        .ok()
        .says("retried 1 dead job:");
    assert_eq!(stored(&s, "x1"), (0, 0, None));
}

/// `--queue` narrows only `claim --next` and `retry --dead`: given with an id it was silently
/// ignored (clap's `requires` is met by a flag's default); now a usage error naming `--queue`,
/// nothing claimed or retried.
#[test]
fn queue_without_next_or_dead_is_refused_by_name() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "a"]).ok();
    s.lf(&["claim", "a", "--queue", "q", "--owner", "o", "--ttl", "3"])
        .bad("--queue");
    assert_eq!(stored(&s, "a"), (0, 0, None));
    kill(&s, "d", "default");
    let v = s.lf(&["--json", "retry", "d", "--queue", "default"]).json();
    assert_eq!(
        (&v["ok"], &v["argument"], &v["exit"]),
        (&false.into(), &"--queue".into(), &2.into())
    );
    assert_eq!(stored(&s, "d"), (1, 1, Some("dead".into())));
}

/// The hint under a `list` page is a command that, pasted into a shell in another folder,
/// shows the next page of the same database: it keeps `--db` (shell-quoted; the folder's name
/// has a space and a quote), where it printed only `list … --after ID` and so read the
/// default `leasefence.db` of wherever it was run.
#[test]
fn the_next_page_hint_names_the_database_it_listed() {
    let s = Sandbox::new();
    let dir = s.dir.path().join("it's a dir");
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("q.db");
    let db = db.to_str().unwrap();
    let lf = |args: &[&str]| {
        let mut all = vec!["--db", db];
        all.extend_from_slice(args);
        support::Run::of(s.dir.path(), &all, None, &[])
    };
    lf(&["init"]).ok();
    for id in ["j1", "j2", "j3"] {
        lf(&["enqueue", id]).ok();
    }
    let page = lf(&["list", "--limit", "2", "--now", "0"]);
    page.ok();
    let hint = page.stdout.lines().last().unwrap();
    let command = hint
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in {hint:?}"));
    assert!(
        command.starts_with("leasefence --db '") && command.ends_with("--after j2"),
        "{command}"
    );
    let exe = env!("CARGO_BIN_EXE_leasefence");
    let next = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{exe}{}",
            command.strip_prefix("leasefence").unwrap()
        ))
        .current_dir(std::env::temp_dir())
        .env_remove("LEASEFENCE_DB")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&next.stdout);
    assert!(next.status.success(), "{next:?}");
    assert!(out.contains("j3") && !out.contains("j2"), "{out}");
}

/// An empty job id is named in an error that reads `OP: invalid argument `job_id`…`, not
/// `OP : …` with the empty id's stray space; nothing changes.
#[test]
fn an_empty_job_id_is_refused_without_a_stray_space() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "a"]).ok();
    for args in [
        &["delete", ""][..],
        &["state", ""],
        &["cancel", ""],
        &["history", ""],
        &["retry", ""],
        &["release", "", "--owner", "o", "--fence", "1"],
        &["claim", "", "--owner", "o", "--ttl", "3"],
    ] {
        let run = s.lf(args);
        run.bad("`job_id`");
        assert!(
            run.stderr
                .contains(&format!("error: {}: invalid argument `job_id`", args[0])),
            "{run:#?}"
        );
    }
    assert_eq!(stored(&s, "a"), (0, 0, None));
}

/// A tick at a clock reading before the never-claimed role job's lease end (0, so any reading
/// before 1970) cannot take the role: it says nobody holds it, not that `-` (fence 0) does.
#[test]
fn a_tick_before_1970_says_nobody_holds_the_role() {
    let s = Sandbox::new();
    let run = s.lf(&["schedule", "tick", "--owner", "a", "--now", "-5"]);
    run.refused();
    assert!(
        run.stderr.contains("nobody holds the scheduler role") && !run.stderr.contains("held by -"),
        "{run:#?}"
    );
    let (fence, owner): (i64, Option<String>) = s
        .conn()
        .query_row(
            "SELECT fence, owner FROM jobs WHERE id = 'leasefence.scheduler'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((fence, owner), (0, None), "no fence handed out");
}

/// `schedule list` says who holds the scheduler role also when there is no schedule, and its
/// `--json` records carry the holder (`scheduler`: owner, fence, lease end; `null` when none).
#[test]
fn schedule_list_names_the_role_holder_with_or_without_schedules() {
    let s = Sandbox::new();
    s.lf(&["schedule", "list"])
        .ok()
        .says("no schedule")
        .says("scheduler: none holds the role now");
    s.lf(&["schedule", "tick", "--owner", "t", "--now", "1796083200"])
        .ok();
    s.lf(&[
        "claim",
        "leasefence.scheduler",
        "--owner",
        "hand",
        "--ttl",
        "100",
        "--now",
        "1796083201",
    ])
    .ok();
    s.lf(&["schedule", "list", "--now", "1796083202"])
        .ok()
        .says("no schedule")
        .says("scheduler: held by hand (fence 2)");
    s.lf(&[
        "schedule",
        "add",
        "sync",
        "--cron",
        "@hourly",
        "--now",
        "1796083202",
    ])
    .ok();
    let v = s
        .lf(&["--json", "schedule", "list", "--now", "1796083203"])
        .ok()
        .json();
    assert_eq!(
        v["scheduler"],
        serde_json::json!({ "owner": "hand", "fence": 2, "until": 1796083301.0 })
    );
    let v = s
        .lf(&["--json", "schedule", "list", "--now", "1796083302"])
        .ok()
        .json();
    assert_eq!(
        v["scheduler"],
        serde_json::Value::Null,
        "the lease has ended"
    );
}

/// A bad positional value's `--json` error names the argument as its message does (`queue`),
/// not clap's placeholder (`<Q>`).
#[test]
fn a_bad_positional_value_is_named_as_its_message_names_it() {
    let s = Sandbox::new();
    let v = s.lf(&["--json", "queue", "pause", ""]).json();
    assert_eq!(
        (&v["argument"], &v["error"], &v["exit"]),
        (&"queue".into(), &"usage".into(), &2.into())
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("invalid argument `queue`")
    );
    assert!(
        s.conn()
            .query_row("SELECT count(*) FROM queues", [], |r| r.get::<_, i64>(0))
            .unwrap()
            == 0
    );
}

/// The lease end (or cutoff) a verb computed on the system clock reads as a date with how far
/// it is; given `--now`, in the caller's own seconds, as before; `--json` carries the number.
#[test]
fn times_read_from_the_system_clock_print_as_dates() {
    fn dated(text: &str, after: &str) -> bool {
        let Some((_, rest)) = text.split_once(after) else {
            return false;
        };
        let b = rest.as_bytes();
        rest.len() > 20
            && b[..4].iter().all(u8::is_ascii_digit)
            && (b[4], b[7], b[10], b[19]) == (b'-', b'-', b' ', b'Z')
            && rest[20..].starts_with(" (in ")
    }
    let s = Sandbox::new();
    for id in ["a", "b", "c"] {
        s.lf(&["enqueue", id]).ok();
    }
    let run = s.lf(&["claim", "a", "--owner", "o", "--ttl", "30"]);
    assert!(dated(&run.ok().stdout, "lease until "), "{run:#?}");
    let run = s.lf(&["renew", "a", "--owner", "o", "--fence", "1", "--ttl", "60"]);
    assert!(dated(&run.ok().stdout, "lease until "), "{run:#?}");
    let run = s.lf(&["claim", "--next", "--owner", "o", "--ttl", "30"]);
    assert!(dated(&run.ok().stdout, "lease until "), "{run:#?}");
    s.lf(&["claim", "c", "--owner", "o", "--ttl", "30", "--now", "100"])
        .ok()
        .says("lease until 130\n");
    let v = s
        .lf(&[
            "--json", "renew", "c", "--owner", "o", "--fence", "1", "--ttl", "5", "--now", "101",
        ])
        .ok()
        .json();
    assert_eq!(v["until"], 106.0);
    s.lf(&["purge", "--older-than", "60", "--now", "1000"])
        .ok()
        .says("finished before 940)");
    let run = s.lf(&["purge", "--older-than", "0"]);
    assert!(
        !dated(&run.ok().stdout, "finished before "),
        "a past cutoff: {run:#?}"
    );
    assert!(run.stdout.contains("finished before 20"), "{run:#?}");
}

/// `work` on a database whose write lock another connection holds past the busy timeout says
/// so on stderr, once, and once more when the database answers again — where it said nothing
/// and ended with an unexplained "N store errors" — then does the job.
#[test]
fn work_says_when_the_database_is_busy_and_when_it_is_free_again() {
    use std::io::Read as _;
    use std::sync::{Arc, Mutex};
    let s = Sandbox::new();
    s.lf(&["enqueue", "j"]).ok();
    let holder = rusqlite::Connection::open(s.db()).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_leasefence"))
        .args([
            "--db",
            s.db().to_str().unwrap(),
            "work",
            "--exec",
            "echo hi",
            "--drain",
        ])
        .args(["--poll", "0.05"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let sink = seen.clone();
    let mut pipe = worker.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !seen.lock().unwrap().contains("the database is busy") {
        assert!(
            std::time::Instant::now() < deadline,
            "no busy line: {}",
            seen.lock().unwrap()
        );
        assert!(
            worker.try_wait().unwrap().is_none(),
            "work exited: {}",
            seen.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    holder.execute_batch("ROLLBACK").unwrap();
    let out = worker.wait_with_output().unwrap();
    reader.join().unwrap();
    let err = seen.lock().unwrap().clone();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches("the database is busy").count(), 1, "{err}");
    assert!(err.contains("the store answers again"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("done j (fence 1)"));
    let result: Option<String> = s
        .conn()
        .query_row("SELECT result FROM jobs WHERE id = 'j'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(result.as_deref(), Some("hi\n"));
}
