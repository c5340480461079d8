//! A worker asked for more threads than the system lets its process start (a container's
//! `pids.max`, a memory limit): `Worker::run` returns an error naming `concurrency` — after
//! the threads it did start stopped and gave back what they held — instead of panicking
//! (which left a Python `Worker.run()` waiting forever).
//!
//! The test runs a child copy of itself in a pids cgroup of its own (cgroup v1 at
//! `/sys/fs/cgroup/pids`, made by the test, removed at the end) whose limit lets it start a
//! few dozen threads, and asks for 150. Where such a cgroup cannot be made (not root, no pids
//! controller) it prints why and skips — except with `CI` set, where it fails instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use leasefence::{NewJob, SqliteStore, Store, Worker};

/// The child's environment variable: the SQLite file.
const CHILD_ENV: &str = "LEASEFENCE_THREAD_LIMIT_CHILD";
/// Tasks (threads) the child's cgroup allows, all of its threads counted.
const PIDS_MAX: u32 = 40;
/// Worker threads asked for: well past that.
const ASKED: usize = 150;
/// How long the child may take to stop.
const PATIENCE: Duration = Duration::from_secs(60);

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// A pids cgroup made for the test; removed (once empty) when dropped.
struct Cgroup(PathBuf);

impl Cgroup {
    fn make(max: u32) -> Result<Cgroup, String> {
        let root = Path::new("/sys/fs/cgroup/pids");
        if !root.join("cgroup.procs").exists() {
            return Err(format!(
                "no cgroup v1 pids controller at {}",
                root.display()
            ));
        }
        let dir = root.join(format!("leasefence-thread-limit-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let cgroup = Cgroup(dir);
        std::fs::write(cgroup.0.join("pids.max"), max.to_string())
            .map_err(|e| format!("setting pids.max: {e}"))?;
        Ok(cgroup)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The child: a worker with [`ASKED`] threads on the file named by [`CHILD_ENV`]; prints
/// `LFERR <error>` and `LFARG <argument>` for the error `run` returns (`LFOK` if none).
#[test]
#[ignore = "the child process of a_worker_the_system_refuses_threads_returns_an_error_naming_concurrency"]
fn thread_limit_child() {
    let Some(db) = std::env::var_os(CHILD_ENV) else {
        eprintln!("thread_limit_child only runs inside the thread-limit test");
        return;
    };
    let db = PathBuf::from(db);
    let worker = Worker::builder(move || SqliteStore::open(&db))
        .concurrency(ASKED)
        // Drained: a worker that ran on without the refused threads never ends (they never
        // report idle), which the parent's deadline catches.
        .drain(true)
        .poll_interval(Duration::from_millis(10))
        .shutdown_deadline(Duration::from_secs(2))
        .build(|ctx| {
            // Hold each job a little, so that started threads hold leases when the worker stops.
            ctx.token().wait_timeout(Duration::from_millis(300));
            Ok(format!("done by {}", ctx.lease().fence))
        })
        .unwrap();
    match worker.run() {
        Ok(stats) => println!("LFOK {stats:?}"),
        Err(e) => {
            println!("LFERR {e}");
            println!("LFARG {}", e.argument().unwrap_or("-"));
        }
    }
}

#[test]
fn a_worker_the_system_refuses_threads_returns_an_error_naming_concurrency() {
    let cgroup = match Cgroup::make(PIDS_MAX) {
        Ok(cgroup) => cgroup,
        Err(why) => {
            assert!(
                !ci(),
                "CI is set, and the thread-limit test cannot run here: {why}"
            );
            eprintln!("skipped: a pids cgroup cannot be made here: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db");
    let store = SqliteStore::open(&db).unwrap();
    let jobs: Vec<NewJob> = (0..20)
        .map(|i| NewJob::new(format!("j{i}")).unwrap())
        .collect();
    store.enqueue_many(&jobs).unwrap();
    let exe = std::env::current_exe().unwrap();
    let procs = cgroup.0.join("cgroup.procs");
    let started = Instant::now();
    // The shell joins the cgroup, then becomes the child: every thread it starts counts. Its
    // output goes to files, and it is waited for with a deadline: a worker that runs on with
    // fewer threads (and never drains, its missing threads never idle) must fail this test,
    // not hang it.
    let (out_path, err_path) = (dir.path().join("child.out"), dir.path().join("child.err"));
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$0" && exec "$1" thread_limit::thread_limit_child --exact --ignored --nocapture --test-threads 1"#)
        .arg(&procs)
        .arg(&exe)
        .env(CHILD_ENV, &db)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let out = std::fs::read(&out_path).unwrap();
    let err = std::fs::read(&err_path).unwrap();
    let stdout = String::from_utf8_lossy(&out);
    let stderr = String::from_utf8_lossy(&err);
    let said = |tag: &str| {
        stdout
            .lines()
            .find_map(|l| l.find(tag).map(|at| l[at + tag.len()..].trim().to_owned()))
    };
    let status = status.unwrap_or_else(|| {
        panic!("the worker did not stop within {PATIENCE:?}: {stdout}\n{stderr}")
    });
    assert!(status.success(), "the child failed: {stdout}\n{stderr}");
    assert_eq!(
        said("LFARG").as_deref(),
        Some("concurrency"),
        "run() returns an error naming concurrency: {stdout}\n{stderr}"
    );
    let error = said("LFERR").unwrap();
    assert!(
        error.contains("the system refused to start worker thread")
            && error.contains(&format!("of {ASKED}")),
        "{error}"
    );
    // Read back through the test's own connection: the threads that started gave back or
    // finished what they took — no lease is left held.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let held: i64 = conn
        .query_row(
            "SELECT count(*) FROM jobs WHERE done = 0 AND owner IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(held, 0, "{stdout}");
    eprintln!("thread limit: {error} (child ran {took:?})");
}
