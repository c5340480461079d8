//! `leasefence work --exec CMD`, used as a newcomer would: jobs enqueued with the CLI, the
//! worker run as a real process (stalled with SIGSTOP, stopped with SIGINT and SIGTERM), and the
//! stored rows read back through an independent rusqlite connection.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use tempfile::TempDir;

/// How long (real time) a case waits for the worker before failing.
const PATIENCE: Duration = Duration::from_secs(20);

struct Sandbox {
    dir: TempDir,
}

/// One stored row: the six contract columns plus the queue's error and outcome.
#[derive(Debug, PartialEq)]
struct Row {
    owner: Option<String>,
    until: f64,
    fence: i64,
    result: Option<String>,
    done: i64,
    error: Option<String>,
    outcome: Option<String>,
}

impl Sandbox {
    /// An initialised database.
    fn new() -> Self {
        let s = Sandbox {
            dir: tempfile::tempdir().unwrap(),
        };
        s.ok(&["init"]);
        s
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("jobs.db")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasefence"));
        cmd.arg("--db")
            .arg(self.db())
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("LEASEFENCE_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs `leasefence --db DB ARGS` to the end and asserts exit status 0.
    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", show(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Starts `leasefence --db DB ARGS` in the background.
    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().unwrap()
    }

    fn row(&self, id: &str) -> Row {
        let conn =
            Connection::open_with_flags(self.db(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        conn.query_row(
            "SELECT owner, until, fence, result, done, error, outcome FROM jobs WHERE id = ?1",
            [id],
            |r| {
                Ok(Row {
                    owner: r.get(0)?,
                    until: r.get(1)?,
                    fence: r.get(2)?,
                    result: r.get(3)?,
                    done: r.get(4)?,
                    error: r.get(5)?,
                    outcome: r.get(6)?,
                })
            },
        )
        .unwrap()
    }

    /// Stops the worker process (SIGSTOP) at a moment when it holds no write lock on the
    /// database, so that others can still write while it is frozen.
    fn freeze(&self, pid: u32) {
        for _ in 0..100 {
            signal(pid, "STOP");
            let conn = Connection::open(self.db()).unwrap();
            conn.busy_timeout(Duration::from_millis(50)).unwrap();
            if conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK").is_ok() {
                return;
            }
            signal(pid, "CONT");
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the worker kept the database locked");
    }

    /// Waits until the command of a job has written its pid to `name`, and returns the pid.
    #[track_caller]
    fn wait_for_pid(&self, name: &str) -> u32 {
        let path = self.file(name);
        wait_until(&format!("{name} to be written"), || {
            std::fs::read_to_string(&path).is_ok_and(|s| s.ends_with('\n'))
        });
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for a background worker to exit (killing it after `PATIENCE`) and returns its output.
#[track_caller]
fn finish(mut child: Child) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > PATIENCE {
            child.kill().unwrap();
            panic!(
                "the worker did not stop: {}",
                show(&child.wait_with_output().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {pid}");
}

/// Whether a process is still there (a zombie counts as gone: it runs nothing).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn runs_the_command_per_job_with_the_payload_on_stdin_and_stores_its_stdout() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "a", "--payload", "hello "]);
    s.ok(&["enqueue", "b", "--payload", "world "]);
    s.ok(&["enqueue", "empty"]);
    let out = s.ok(&[
        "work",
        "--exec",
        "cat; echo -n done",
        "--drain",
        "--concurrency",
        "2",
    ]);
    for (id, result) in [("a", "hello done"), ("b", "world done"), ("empty", "done")] {
        let row = s.row(id);
        assert_eq!(
            (row.result.as_deref(), row.done, row.fence, row.error),
            (Some(result), 1, 1, None),
            "{id}"
        );
        assert!(out.contains(&format!("done {id} (fence 1)")), "{out}");
    }
    assert!(
        out.contains("3 claimed, 3 completed, 0 retried, 0 dead"),
        "{out}"
    );
}

/// A job id holding a newline (anyone with the worker token can enqueue one over HTTP) stays
/// on its line of `work`'s log, written `\n`, as in `state`, `history` and `list`: it could
/// split the log or forge a line (`done x (fence 1)\ndone y (fence 9)`). `--json` keeps it.
#[test]
fn a_job_id_with_a_newline_stays_on_its_line_of_the_log() {
    let s = Sandbox::new();
    let forged = "x (fence 1)\nstopped: 0 claimed";
    s.ok(&["enqueue", "--", forged]);
    let out = s.ok(&["work", "--exec", "true", "--drain"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "one job line and the stopped line: {out}");
    assert_eq!(
        lines[0], "done x (fence 1)\\nstopped: 0 claimed (fence 1)",
        "{out}"
    );
    assert!(lines[1].starts_with("stopped: 1 claimed"), "{out}");

    s.ok(&["enqueue", "--", "y\nz"]);
    let json = s.ok(&["--json", "work", "--exec", "true", "--drain"]);
    let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(first["job_id"], "y\nz", "{json}");
}

#[test]
fn the_environment_names_the_job_its_fence_and_attempt_and_a_failure_is_retried() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "flaky", "--max-attempts", "3"]);
    let script = r#"if [ "$LEASEFENCE_ATTEMPT" -lt 2 ]; then echo "not yet" >&2; exit 1; fi
printf '%s/%s/%s' "$LEASEFENCE_JOB_ID" "$LEASEFENCE_FENCE" "$LEASEFENCE_ATTEMPT""#;
    let out = s.ok(&[
        "--json",
        "work",
        "--exec",
        script,
        "--drain",
        "--retry-delay",
        "0",
    ]);
    let row = s.row("flaky");
    assert_eq!(
        (row.result.as_deref(), row.fence, row.done),
        (Some("flaky/2/2"), 2, 1)
    );
    let events = json_lines(&out);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["retrying", "completed", "stopped"]);
    assert_eq!(events[0]["error"], "exit status 1: not yet");
    assert_eq!(events[2]["retried"], 1);
    assert_eq!(events[2]["completed"], 1);
}

#[test]
fn a_failing_command_is_retried_then_dead_with_the_tail_of_its_stderr() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "doomed", "--max-attempts", "3"]);
    let out = s.ok(&[
        "work",
        "--exec",
        "echo partial; echo 'disk on fire' >&2; exit 3",
        "--drain",
        "--retry-delay",
        "0",
    ]);
    let row = s.row("doomed");
    assert_eq!(
        row,
        Row {
            owner: None,
            until: 0.0,
            fence: 3,
            result: None,
            done: 1,
            error: Some("exit status 3: disk on fire".into()),
            outcome: Some("dead".into()),
        }
    );
    assert_eq!(out.matches("retry doomed").count(), 2, "{out}");
    assert!(
        out.contains("dead doomed (fence 3): exit status 3: disk on fire"),
        "{out}"
    );
    assert!(
        out.contains("3 claimed, 0 completed, 2 retried, 1 dead"),
        "{out}"
    );
}

/// `--timeout`: a command running past the limit has its process group killed and its attempt
/// fails with a timeout error; on its last attempt the job is dead, and `work` exits 0.
#[test]
fn a_command_past_its_time_limit_is_killed_and_its_attempt_fails() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "hangs", "--max-attempts", "1"]);
    let out = s.ok(&["work", "--exec", "sleep 60", "--drain", "--timeout", "1"]);
    let row = s.row("hangs");
    assert_eq!(
        (
            row.fence,
            row.done,
            row.error.as_deref(),
            row.outcome.as_deref()
        ),
        (
            1,
            1,
            Some("timed out after 1 s (the worker's time limit)"),
            Some("dead")
        )
    );
    assert!(out.contains("killed hangs (fence 1): timed out"), "{out}");
    assert!(out.contains("1 dead, 1 timed out"), "{out}");
    // The ledger tells the time limit from an ordinary failure.
    let history = s.ok(&["history", "hangs"]);
    assert!(
        history.contains("hangs: 1 attempt (1 timed out), no write refused"),
        "{history}"
    );
    s.command(&["work", "--exec", "true", "--timeout", "0"])
        .output()
        .map(|o| assert_eq!(o.status.code(), Some(2), "--timeout 0 is refused"))
        .unwrap();
}

/// A command is stopped with SIGTERM first: one that traps it gets to clean up before its
/// group is killed; its attempt still fails, timed out.
#[test]
fn a_command_stopped_gets_sigterm_first_and_may_clean_up() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "tidy", "--max-attempts", "1"]);
    let marker = s.dir.path().join("cleaned-up");
    // A script of its own under `sh -c` (the shell dies on TERM at once; the script is given
    // its grace), cleaning up slowly.
    let script = s.dir.path().join("tidy.sh");
    std::fs::write(
        &script,
        format!(
            "trap 'sleep 0.5; echo \"$LEASEFENCE_FENCE\" > {}; exit 143' TERM\nsleep 60 &\nwait\n",
            marker.display()
        ),
    )
    .unwrap();
    let exec = format!("sh {}; true", script.display());
    let out = s.ok(&["work", "--exec", &exec, "--drain", "--timeout", "1"]);
    assert!(out.contains("killed tidy (fence 1): timed out"), "{out}");
    let cleaned = std::fs::read_to_string(&marker).expect("the command's TERM trap ran");
    assert_eq!(cleaned.trim(), "1");
    let row = s.row("tidy");
    assert_eq!(
        (row.fence, row.done, row.outcome.as_deref()),
        (1, 1, Some("dead"))
    );
}

/// The crate's story with a real process: the worker is frozen (SIGSTOP) past its ttl while its
/// command runs, another owner takes over and finishes; when the worker wakes up its renew is
/// refused, it kills the command, and nothing of its attempt is stored.
#[test]
fn a_worker_stalled_past_its_ttl_kills_its_command_and_stores_nothing() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "slow", "--payload", "x"]);
    let worker = s.spawn(&[
        "work",
        "--exec",
        "echo $$ > pid; exec sleep 30",
        "--ttl",
        "1",
        "--poll",
        "0.05",
        "--drain",
    ]);
    let command = s.wait_for_pid("pid");
    assert!(alive(command));
    assert_eq!(s.row("slow").fence, 1);

    s.freeze(worker.id());
    std::thread::sleep(Duration::from_millis(1500)); // past the ttl: the lease runs out
    s.ok(&["claim", "slow", "--owner", "B", "--ttl", "60"]);
    s.ok(&[
        "complete",
        "slow",
        "--owner",
        "B",
        "--fence",
        "2",
        "--result",
        "B's result",
    ]);
    signal(worker.id(), "CONT");

    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.contains("killed slow (fence 1): lease lost"),
        "{}",
        show(&out)
    );
    assert!(text.contains("refused slow (fence 1)"), "{text}");
    assert!(
        text.contains("1 leases lost, 1 stale writes refused"),
        "{text}"
    );
    assert!(!alive(command), "the command was killed");
    let row = s.row("slow");
    assert_eq!(
        (
            row.owner.as_deref(),
            row.fence,
            row.result.as_deref(),
            row.done
        ),
        (Some("B"), 2, Some("B's result"), 1)
    );
}

#[test]
fn cancelling_a_running_job_kills_its_command() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "unwanted"]);
    let worker = s.spawn(&[
        "work",
        "--exec",
        "echo $$ > pid; exec sleep 30",
        "--ttl",
        "0.6",
        "--poll",
        "0.05",
        "--drain",
    ]);
    let command = s.wait_for_pid("pid");
    s.ok(&["cancel", "unwanted"]);
    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stdout(&out).contains("killed unwanted (fence 1): an operator ended the job"),
        "{}",
        show(&out)
    );
    assert!(!alive(command));
    let row = s.row("unwanted");
    assert_eq!(
        (row.result, row.done, row.outcome.as_deref()),
        (None, 1, Some("cancelled"))
    );
}

#[test]
fn ctrl_c_kills_a_command_past_the_deadline_and_releases_its_job_keeping_the_fence() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "long"]);
    s.ok(&["enqueue", "later", "--priority", "-1"]);
    let worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "echo $$ > pid; exec sleep 30",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        "0.3",
    ]);
    let command = s.wait_for_pid("pid");
    signal(worker.id(), "INT");
    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!alive(command));
    let events = json_lines(&stdout(&out));
    let last = events.last().unwrap();
    assert_eq!(
        (&last["event"], &last["released"], &last["claimed"]),
        (&Value::from("stopped"), &Value::from(1), &Value::from(1))
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "killed" && e["reason"] == "shutdown deadline passed"),
        "{events:?}"
    );
    // Released: no owner, until 0, fence kept; the next claim gets fence 2 at once.
    let row = s.row("long");
    assert_eq!(
        (row.owner, row.until, row.fence, row.done),
        (None, 0.0, 1, 0)
    );
    assert_eq!(s.row("later").fence, 0, "nothing claimed after Ctrl-C");
    let claimed = s.ok(&["claim", "long", "--owner", "next", "--ttl", "5"]);
    assert!(claimed.contains("fence 2"), "{claimed}");
}

/// Starts `work --json` with a command that writes its pid to `pid` and sleeps for a long
/// time, and waits until that command runs; returns the worker and the command's pid.
fn start_sleeper(s: &Sandbox, deadline: &str) -> (Child, u32) {
    s.ok(&["enqueue", "long"]);
    let worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "echo $$ > pid; exec sleep 300",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        deadline,
    ]);
    (worker, s.wait_for_pid("pid"))
}

/// A running worker's stderr, read as it comes on a thread of its own.
struct Stderr(Arc<Mutex<Vec<u8>>>);

impl Stderr {
    fn of(worker: &mut Child) -> Stderr {
        let mut pipe = worker.stderr.take().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Stderr(seen)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// The stopped line's counters: (claimed, completed, released).
fn stopped(out: &Output) -> (Value, Value, Value) {
    let events = json_lines(&stdout(out));
    let last = events.last().unwrap();
    assert_eq!(last["event"], "stopped", "{events:?}");
    (
        last["claimed"].clone(),
        last["completed"].clone(),
        last["released"].clone(),
    )
}

#[test]
fn sigterm_kills_a_command_past_the_deadline_releases_its_job_and_exits_0() {
    let s = Sandbox::new();
    let (worker, command) = start_sleeper(&s, "0.3");
    signal(worker.id(), "TERM");
    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!alive(command), "the command outlived work");
    assert_eq!(stopped(&out), (1.into(), 0.into(), 1.into()));
    let row = s.row("long");
    assert_eq!(
        (row.owner, row.until, row.fence, row.done),
        (None, 0.0, 1, 0),
        "released: no owner, until 0, fence kept"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("leasefence: shutting down"), "{err}");
    let killed = json_lines(&stdout(&out))
        .into_iter()
        .find(|e| e["event"] == "killed")
        .unwrap();
    assert_eq!(killed["reason"], "shutdown deadline passed");
}

#[test]
fn a_second_sigterm_kills_the_command_and_releases_its_job_at_once() {
    let s = Sandbox::new();
    let (worker, command) = start_sleeper(&s, "60");
    let start = Instant::now();
    signal(worker.id(), "TERM");
    // The first signal was taken (the message is printed after the shutdown began) before
    // the second is sent: two signals close together may reach the process as one.
    let mut worker = worker;
    let stderr = Stderr::of(&mut worker);
    wait_until("the shutdown message", || {
        stderr.text().contains("shutting down")
    });
    assert!(
        alive(command),
        "the command runs on within its 60 s deadline"
    );
    signal(worker.id(), "TERM");
    let out = finish(worker);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(took < PATIENCE, "took {took:?} with a 60 s deadline");
    assert!(!alive(command), "the command outlived work");
    assert_eq!(stopped(&out), (1.into(), 0.into(), 1.into()));
    let row = s.row("long");
    assert_eq!(
        (row.owner, row.until, row.fence, row.done),
        (None, 0.0, 1, 0)
    );
    let err = stderr.text();
    assert!(err.contains("leasefence: second signal"), "{err}");
    let killed: Vec<Value> = json_lines(&stdout(&out))
        .into_iter()
        .filter(|e| e["event"] == "killed")
        .collect();
    assert_eq!(killed.len(), 1, "{}", show(&out));
    assert_eq!(
        killed[0]["reason"], "second signal",
        "not the 60 s deadline"
    );
}

/// SIGTERM to a whole process group, as systemd's default `KillMode=control-group` sends it to
/// every process of a service.
fn signal_group(group: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg("--")
        .arg(format!("-{group}"))
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} -- -{group}");
}

/// The attempts counter of a job, read through an independent connection.
fn attempts(s: &Sandbox, id: &str) -> i64 {
    let conn = Connection::open_with_flags(s.db(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    conn.query_row("SELECT attempts FROM jobs WHERE id = ?1", [id], |r| {
        r.get(0)
    })
    .unwrap()
}

/// Asserts that `id` was given back by a stop, not failed: no owner, no lease, fence 1 kept,
/// unfinished, no error, and its attempt refunded.
#[track_caller]
fn assert_released(s: &Sandbox, id: &str) {
    let row = s.row(id);
    assert_eq!(
        (
            row.owner,
            row.until,
            row.fence,
            row.done,
            row.error,
            row.outcome
        ),
        (None, 0.0, 1, 0, None, None),
        "{id}: released, not failed"
    );
    assert_eq!(attempts(s, id), 0, "{id}: the attempt is refunded");
}

/// Writes the executable script `name`: it traps SIGTERM with `on_term`, then publishes the
/// process group the shell that started it wrote to `unready-ID` as `pid-ID` (a rename: the pid
/// file appears whole, and only once the trap is set), then waits on a `sleep 30`.
fn trapping_script(s: &Sandbox, name: &str, on_term: &str) {
    std::fs::write(
        s.file(name),
        format!(
            "#!/bin/sh\ntrap '{on_term}' TERM\n\
             mv unready-$LEASEFENCE_JOB_ID pid-$LEASEFENCE_JOB_ID\nsleep 30 & wait\n"
        ),
    )
    .unwrap();
    let chmod = Command::new("chmod")
        .args(["+x", name])
        .current_dir(s.dir.path())
        .status()
        .unwrap();
    assert!(chmod.success());
}

/// Stops, as systemd does, a job `id` whose command is a shell running a script that traps
/// SIGTERM and cleans up for `seconds` (`cleaned-ID`), the shell followed by another command so
/// that it does not exec the script: the stop kills the shell, not the script. Asserts that the
/// cleanup ran to its end; returns the worker's output.
fn stop_a_script_cleaning_up(
    s: &Sandbox,
    id: &str,
    seconds: &str,
    deadline: &str,
    extra: &[&str],
) -> Output {
    let on_term = format!("sleep {seconds}; echo cleaned > cleaned-$LEASEFENCE_JOB_ID; exit 0");
    trapping_script(s, "cleanup.sh", &on_term);
    let script = "echo $$ > unready-$LEASEFENCE_JOB_ID; ./cleanup.sh; true";
    let out = stop_everything_like_systemd(s, &[id], script, deadline, extra);
    let cleaned = std::fs::read_to_string(s.file(&format!("cleaned-{id}")));
    assert_eq!(cleaned.ok().as_deref(), Some("cleaned\n"), "{}", show(&out));
    out
}

/// Enqueues `ids` (one attempt each), runs `work --json` with `script` two at a time,
/// `--shutdown-deadline deadline` and the flags `extra`, and once every command has written its process group to
/// `pid-ID`, stops everything as systemd does: SIGTERM to each command's process group —
/// first: they may die before the worker takes its own signal — then to the worker. Returns
/// the worker's output, within PATIENCE (20 s); asserts exit status 0.
fn stop_everything_like_systemd(
    s: &Sandbox,
    ids: &[&str],
    script: &str,
    deadline: &str,
    extra: &[&str],
) -> Output {
    for id in ids {
        s.ok(&["enqueue", id, "--max-attempts", "1"]);
    }
    let mut args = vec![
        "--json",
        "work",
        "--exec",
        script,
        "--concurrency",
        "2",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        deadline,
    ];
    args.extend_from_slice(extra);
    let worker = s.spawn(&args);
    for id in ids {
        signal_group(s.wait_for_pid(&format!("pid-{id}")), "TERM");
    }
    signal(worker.id(), "TERM");
    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    out
}

/// systemd stops a service by sending SIGTERM to every process in it: the commands die of the
/// signal that stops the worker. Their jobs are given back as at any shutdown — released, fence
/// kept, attempt refunded, claimable again — not failed (on a last attempt: dead), and `work`
/// does not wait out its deadline for commands that are gone.
#[test]
fn a_stop_signal_that_reaches_the_commands_too_gives_their_jobs_back() {
    let s = Sandbox::new();
    let script = "echo $$ > pid-$LEASEFENCE_JOB_ID; exec sleep 30";
    // Within PATIENCE, so not after the 60 s deadline.
    let out = stop_everything_like_systemd(&s, &["one", "two"], script, "60", &[]);
    let events = json_lines(&stdout(&out));
    let last = events.last().unwrap();
    assert_eq!(
        (&last["released"], &last["dead"], &last["retried"]),
        (&Value::from(2), &Value::from(0), &Value::from(0)),
        "{events:?}"
    );
    for id in ["one", "two"] {
        assert_released(&s, id);
    }
    let claimed = s.ok(&["claim", "one", "--owner", "next", "--ttl", "5"]);
    assert!(claimed.contains("fence 2"), "{claimed}");
}

/// The same stop with one command that traps SIGTERM and finishes: its result is stored, the
/// other's job is given back, and `work` waits for the first, not for its deadline.
#[test]
fn a_stop_signal_to_every_process_keeps_a_result_that_still_comes_and_releases_the_rest() {
    let s = Sandbox::new();
    let script = "echo $$ > pid-$LEASEFENCE_JOB_ID; \
                  if [ \"$LEASEFENCE_JOB_ID\" = keeper ]; then \
                    trap 'sleep 0.3; echo kept; exit 0' TERM; sleep 30 & wait; \
                  else exec sleep 30; fi";
    let out = stop_everything_like_systemd(&s, &["keeper", "quitter"], script, "60", &[]);
    let keeper = s.row("keeper");
    assert_eq!(
        (
            keeper.result.as_deref(),
            keeper.done,
            keeper.outcome.as_deref()
        ),
        (Some("kept\n"), 1, Some("completed")),
        "{}",
        show(&out)
    );
    assert_released(&s, "quitter");
}

/// When the stop signal kills the shell `work` started (here a script followed by another
/// command, so no `sh` execs it), the script it ran may still be cleaning up in a trap: it is
/// left to finish, not killed at once. Its exit status is the dead shell's, so the job is
/// released either way.
#[test]
fn a_stop_signal_that_kills_the_shell_leaves_its_script_time_to_clean_up() {
    let s = Sandbox::new();
    stop_a_script_cleaning_up(&s, "wrapped", "0.3", "5", &[]);
    assert_released(&s, "wrapped");
}

/// With `--timeout`, a job whose command the stop signal ended is given back at once — not
/// left running into its time limit while what the shell started cleans up (here a trap that
/// takes 2 s against a 1 s limit): released with its attempt refunded, not timed out, and so on
/// its last attempt not dead; the cleanup still runs to its end.
#[test]
fn a_job_given_back_at_a_stop_is_not_failed_by_its_time_limit_while_its_script_cleans_up() {
    let s = Sandbox::new();
    let out = stop_a_script_cleaning_up(&s, "limited", "2", "10", &["--timeout", "1"]);
    let events = json_lines(&stdout(&out));
    let last = events.last().unwrap();
    assert_eq!(
        (&last["released"], &last["timed_out"], &last["dead"]),
        (&Value::from(1), &Value::from(0), &Value::from(0)),
        "{events:?}"
    );
    assert_released(&s, "limited");
}

/// A second signal ends the cleanup of a job already given back: what its dead shell started
/// (a trap that would clean up for 8 s, against a 60 s deadline) is stopped at once, with the
/// 2 s grace of any stopped command, and the job's line is still printed.
#[test]
fn a_second_signal_stops_what_a_given_back_job_left_behind_and_prints_its_line() {
    let s = Sandbox::new();
    trapping_script(
        &s,
        "slow-cleanup.sh",
        "sleep 8; echo cleaned > cleaned-$LEASEFENCE_JOB_ID; exit 0",
    );
    s.ok(&["enqueue", "wrapped", "--max-attempts", "1"]);
    let mut worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "echo $$ > unready-$LEASEFENCE_JOB_ID; ./slow-cleanup.sh; true",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        "60",
    ]);
    let group = s.wait_for_pid("pid-wrapped");
    let stderr = Stderr::of(&mut worker);
    signal_group(group, "TERM");
    signal(worker.id(), "TERM");
    wait_until("the shutdown message", || {
        stderr.text().contains("shutting down")
    });
    wait_until("the job given back", || s.row("wrapped").owner.is_none());
    let second = Instant::now();
    signal(worker.id(), "TERM");
    let out = finish(worker);
    let took = second.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        took < Duration::from_secs(6),
        "the cleanup (8 s) was waited for: {took:?} after the second signal"
    );
    assert!(
        !s.file("cleaned-wrapped").exists(),
        "the cleanup was stopped"
    );
    let events = json_lines(&stdout(&out));
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["released", "stopped"], "{events:?}");
    assert_released(&s, "wrapped");
}

/// `--shutdown-deadline` counts from the stop, also for what a job given back left behind: a
/// shell that traps the stop signal, cleans up for 2 s and then dies of it re-raised leaves a
/// process that ignores SIGTERM (20 s); with a 3 s deadline `work` is gone within the deadline
/// and the 2 s grace, not 2 s + 3 s + 2 s after the stop.
#[test]
fn a_late_death_by_the_stop_signal_does_not_stretch_the_shutdown_deadline() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "late", "--max-attempts", "1"]);
    let worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "trap '(trap \"\" TERM; sleep 20) & sleep 2; trap - TERM; kill -TERM $$' TERM; \
         echo $$ > pid-$LEASEFENCE_JOB_ID; sleep 30 & wait",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        "3",
    ]);
    let group = s.wait_for_pid("pid-late");
    let stop = Instant::now();
    signal_group(group, "TERM");
    signal(worker.id(), "TERM");
    let out = finish(worker);
    let took = stop.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_released(&s, "late");
    assert!(
        took < Duration::from_millis(6500),
        "{took:?} after the stop: past the 3 s deadline and the 2 s grace"
    );
}

/// A database busy when the stop signal kills a command (another writer holds the lock for
/// 7 s, past the 5 s busy timeout) does not make the interruption a failure: the job is given
/// back once the database answers — released with its attempt refunded, not dead on its last
/// attempt — without waiting out the 30 s deadline.
#[test]
fn a_busy_database_at_the_stop_still_gives_the_interrupted_job_back() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "busy", "--max-attempts", "1"]);
    let worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "echo $$ > pid-$LEASEFENCE_JOB_ID; exec sleep 30",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        "30",
    ]);
    let group = s.wait_for_pid("pid-busy");
    let db = s.db();
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let locker = std::thread::spawn(move || {
        let conn = Connection::open(db).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(7));
        conn.execute_batch("ROLLBACK").unwrap();
    });
    locked.recv().unwrap();
    let stop = Instant::now();
    signal_group(group, "TERM");
    signal(worker.id(), "TERM");
    let out = finish(worker);
    let took = stop.elapsed();
    locker.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_released(&s, "busy");
    let events = json_lines(&stdout(&out));
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["released", "stopped"], "{events:?}");
    assert!(
        took < Duration::from_secs(20),
        "waited out the deadline: {took:?}"
    );
}

/// A second signal stops the commands now, but as always: SIGTERM first and up to 2 s to
/// clean up, and every job's line printed — though the worker stops waiting for its handlers
/// sooner than that.
#[test]
fn a_second_signal_still_gives_a_command_its_grace_and_prints_its_lines() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "tidy"]);
    let mut worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "trap 'sleep 0.3; echo cleaned > cleaned; exit 0' TERM; echo $$ > pid; sleep 60 & wait",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        "60",
    ]);
    s.wait_for_pid("pid");
    let stderr = Stderr::of(&mut worker);
    signal(worker.id(), "TERM");
    wait_until("the shutdown message", || {
        stderr.text().contains("shutting down")
    });
    signal(worker.id(), "TERM");
    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(
        std::fs::read_to_string(s.file("cleaned")).ok().as_deref(),
        Some("cleaned\n"),
        "the trap ran to its end"
    );
    let events = json_lines(&stdout(&out));
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["killed", "released", "stopped"], "{events:?}");
    let row = s.row("tidy");
    assert_eq!((row.owner, row.fence, row.done), (None, 1, 0));
}

/// A command killed by somebody else's SIGTERM while the worker runs on has failed: only the
/// worker's own stop signal makes a death by a signal an interruption.
#[test]
fn a_command_killed_by_another_sigterm_while_the_worker_runs_on_fails() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "solo", "--max-attempts", "1"]);
    let worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "echo $$ > pid; exec sleep 30",
        "--poll",
        "0.05",
        "--drain",
    ]);
    let command = s.wait_for_pid("pid");
    signal_group(command, "TERM");
    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let row = s.row("solo");
    assert_eq!(
        (row.done, row.outcome.as_deref(), row.error.as_deref()),
        (1, Some("dead"), Some("killed by signal 15"))
    );
    assert_eq!(attempts(&s, "solo"), 1);
}

#[test]
fn a_command_that_finishes_within_the_deadline_after_sigterm_is_completed() {
    let s = Sandbox::new();
    s.ok(&["enqueue", "slow"]);
    s.ok(&["enqueue", "later", "--priority", "-1"]);
    // The command finishes when the test tells it to (a file appears), after the signal.
    let worker = s.spawn(&[
        "--json",
        "work",
        "--exec",
        "echo $$ > pid; while [ ! -e go ]; do sleep 0.01; done; echo finished",
        "--poll",
        "0.05",
        "--shutdown-deadline",
        "60",
    ]);
    let command = s.wait_for_pid("pid");
    signal(worker.id(), "TERM");
    let mut worker = worker;
    let stderr = Stderr::of(&mut worker);
    wait_until("the shutdown message", || {
        stderr.text().contains("shutting down")
    });
    assert!(alive(command));
    std::fs::write(s.file("go"), "").unwrap();
    let out = finish(worker);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stopped(&out), (1.into(), 1.into(), 0.into()));
    let row = s.row("slow");
    assert_eq!(
        (row.result.as_deref(), row.done, row.fence),
        (Some("finished\n"), 1, 1)
    );
    assert_eq!(s.row("later").fence, 0, "nothing claimed after SIGTERM");
}

#[test]
fn work_on_a_missing_database_is_an_error_that_says_how_to_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_leasefence"))
        .args(["--db", "nope.db", "work", "--exec", "true", "--drain"])
        .current_dir(dir.path())
        .env_remove("LEASEFENCE_DB")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("leasefence: error: "), "{err}");
    assert!(err.contains("nope.db init`"), "{err}");
    assert!(!dir.path().join("nope.db").exists());
}

#[test]
fn bad_flags_are_errors() {
    let s = Sandbox::new();
    for (flag, value) in [("--ttl", "0"), ("--poll", "0"), ("--retry-delay", "-1")] {
        let out = s
            .command(&["work", "--exec", "true", "--drain", flag, value])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {}", show(&out));
    }
}

#[test]
fn with_scheduler_a_worker_enqueues_each_slot_runs_it_and_gives_the_role_back_on_sigterm() {
    let s = Sandbox::new();
    s.ok(&["schedule", "add", "beat", "--cron", "* * * * * *"]);
    let child = s.spawn(&["work", "--scheduler", "--exec", "cat", "--owner", "w"]);
    let done_runs = || -> Vec<String> {
        let conn = Connection::open_with_flags(s.db(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let mut stmt = conn
            .prepare("SELECT id FROM jobs WHERE id LIKE 'beat@%' AND done = 1 ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    wait_until("two scheduled runs completed", || done_runs().len() >= 2);
    signal(child.id(), "TERM");
    let out = finish(child);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let role = s.row("leasefence.scheduler");
    assert_eq!(
        (role.owner, role.fence),
        (None, 1),
        "the role was given back"
    );
    // Each run is its own slot, one second apart, completed by the worker's command.
    let runs = done_runs();
    assert!(runs.windows(2).all(|w| w[0] < w[1]), "{runs:?}");
    assert_eq!(s.row(&runs[0]).outcome.as_deref(), Some("completed"));
}

#[test]
fn a_command_whose_stdout_is_not_utf8_fails_its_attempt_rather_than_storing_it_altered() {
    // Results are text: `complete --result-file` refuses bytes that are not UTF-8, and `work`
    // must not store them replaced by U+FFFD as a completion.
    let s = Sandbox::new();
    s.ok(&["enqueue", "bin", "--max-attempts", "1"]);
    let out = s.ok(&["work", "--exec", r"printf '\377\376raw'", "--drain"]);
    let row = s.row("bin");
    assert_eq!(
        (row.outcome.as_deref(), row.result.as_deref()),
        (Some("dead"), None),
        "{row:?}\n{out}"
    );
    assert!(
        row.error
            .as_deref()
            .unwrap_or_default()
            .contains("not UTF-8"),
        "{row:?}"
    );
}

#[test]
fn a_command_that_exits_0_is_completed_though_a_daemon_it_detached_keeps_stdout_open() {
    // The shell exits 0 after 0.3 s with "hi" on stdout; a daemon it started in a session of
    // its own (so outside the command's process group, which is killed) still holds the stdout
    // pipe for 8 s. The job is the shell's: completed with its output, not held until the
    // daemon ends (here past --timeout, which failed it).
    let s = Sandbox::new();
    s.ok(&["enqueue", "d", "--max-attempts", "1"]);
    let out = s.ok(&[
        "--json",
        "work",
        "--drain",
        "--timeout",
        "2",
        "--exec",
        "setsid sleep 8 & sleep 0.3; echo hi",
    ]);
    let row = s.row("d");
    assert_eq!(
        (
            row.outcome.as_deref(),
            row.result.as_deref(),
            row.error.as_deref()
        ),
        (Some("completed"), Some("hi\n"), None),
        "{out}"
    );
}
