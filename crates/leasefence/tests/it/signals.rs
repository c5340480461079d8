//! `ShutdownHandle::on_signals` (feature `signals`) in a real process, sent real signals.
//!
//! A process has one signal handler, for good, so the worker runs in a child: the test binary
//! re-executes itself, and `child_worker` is an ignored test that only does work when the parent
//! hands it a directory through the environment. SQLite only: what is under test is the
//! handling of the signals, the release it leads to is the same code on both backends (the
//! `worker::shutdown` cases).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::*;
use leasefence::{Error, NewJob, SqliteStore, Store, Worker};

const CHILD_ENV: &str = "LEASEFENCE_IT_SIGNALS_CHILD";

/// How long (real time) the parent waits for the child before failing.
const PATIENCE: Duration = Duration::from_secs(20);

/// The child's shutdown deadline: far longer than `PATIENCE`, so only `shutdown_now` ends it.
const DEADLINE: Duration = Duration::from_secs(120);

fn wait_for_file(path: &Path, child: &mut Child) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the child exited ({status}) before writing {}",
                path.display()
            );
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("timed out waiting for {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn send(child: &Child, signal: Signal) {
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), signal).unwrap();
}

/// Waits for the child to exit (killing it after `PATIENCE`) and returns its output.
fn finish(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the worker did not stop {what}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn sigterm_shuts_down_gracefully_and_a_second_signal_releases_the_job_at_once() {
    let db = Db::new();
    let dir: PathBuf = db.path.parent().unwrap().to_path_buf();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_many(&[
            NewJob::new("stuck").unwrap().priority(1),
            NewJob::new("never").unwrap(),
        ])
        .unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "signals::child_worker",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(CHILD_ENV, &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child worker");
    let installed = wait_for_file(&dir.join("installed"), &mut child);
    assert!(
        installed.starts_with("again: cannot install the signal handler: "),
        "a second install is an error: {installed}"
    );
    wait_for_file(&dir.join("started"), &mut child);

    // SIGTERM: a graceful shutdown; the job is left to run within the deadline.
    send(&child, Signal::SIGTERM);
    assert_eq!(
        wait_for_file(&dir.join("graceful"), &mut child),
        "not cancelled\n"
    );
    assert_eq!(wait_for_file(&dir.join("notified"), &mut child), "1\n");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the worker waits out its deadline"
    );

    // A second signal, SIGINT this time: the deadline is cut to zero.
    send(&child, Signal::SIGINT);
    let out = finish(child, "after the second signal");
    assert!(
        out.status.success(),
        "{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notified")).unwrap(),
        "1\n2\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("stats")).unwrap(),
        "claimed 1 released 1 completed 0\n"
    );
    assert_eq!(
        db.row("stuck").unwrap(),
        Row {
            fence: 1,
            ..Row::fresh("stuck")
        },
        "released: no owner, until 0, fence kept"
    );
    assert_eq!(
        db.row("never").unwrap(),
        Row::fresh("never"),
        "nothing claimed after the stop"
    );
}

/// The child process: a worker on the parent's database whose handle is wired to the signals.
#[test]
#[ignore = "run by sigterm_shuts_down_gracefully_and_a_second_signal_releases_the_job_at_once"]
fn child_worker() {
    let Some(dir) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else {
        return;
    };
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    let notified = dir.join("notified");
    let handler_dir = dir.clone();
    let worker = Worker::sqlite(dir.join("jobs.db"))
        .poll_interval(Duration::from_millis(2))
        .shutdown_deadline(DEADLINE)
        .build(move |ctx| {
            let write = |name: &str, text: &str| {
                std::fs::write(handler_dir.join(name), text).map_err(|e| e.to_string())
            };
            write("started", "started\n")?;
            while !ctx.is_shutting_down() {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Told of the shutdown, not cancelled: the deadline holds (for a while).
            let cancelled = ctx.token().wait_timeout(Duration::from_millis(200));
            write(
                "graceful",
                if cancelled {
                    "cancelled\n"
                } else {
                    "not cancelled\n"
                },
            )?;
            ctx.token().wait_timeout(DEADLINE);
            Ok("too late".to_string())
        })
        .unwrap();
    worker
        .shutdown_handle()
        .on_signals_with(move |n| {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&notified)
                .unwrap();
            writeln!(file, "{n}").unwrap();
        })
        .unwrap();
    let again = worker.shutdown_handle().on_signals();
    match again {
        Err(e @ Error::SignalHandler { .. }) => write("installed", &format!("again: {e}\n")),
        other => write("installed", &format!("again: {other:?}\n")),
    }
    let stats = worker.run().unwrap();
    write(
        "stats",
        &format!(
            "claimed {} released {} completed {}\n",
            stats.claimed, stats.released, stats.completed
        ),
    );
}
