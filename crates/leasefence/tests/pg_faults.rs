//! PostgreSQL server faults, provoked under a running multi-process workload (issue 18,
//! deliverable 2): fast and immediate restarts, `pg_terminate_backend` of every worker session,
//! a SIGKILLed backend (the postmaster then resets every session), `statement_timeout` and
//! lock timeouts, and running out of connections.
//!
//! The server is a private cluster this test makes (`initdb` into a temporary folder, its own
//! port on 127.0.0.1 and its own socket folder), so restarting it never touches the shared
//! server other tests use. Three worker processes (this test binary re-executed, as in
//! `hosts.rs`) run `Worker::postgres` with two threads each while the parent enqueues; after
//! every fault each process must complete a job again within [`RECOVERY_BOUND`]. At the end,
//! read back through a connection of the test's own:
//! - no (job, fence) was handed to two handler runs: no fence issued twice;
//! - every completion a worker acknowledged is stored with its fence and result;
//! - every stored result is the one written under the job's stored fence: no stale write;
//! - every acknowledged enqueue is stored, and every job is done.
//!
//! Needs PostgreSQL's server binaries (`initdb`, `pg_ctl`). Where they are missing, or the
//! test runs as root and cannot switch to the `postgres` user, it prints why and skips —
//! except with `CI` set, where it fails instead.
//!
//! `LEASEFENCE_PG_FAULT_ROUNDS` repeats the whole list (default 1; `cargo xtask reliability`
//! uses 5). A test binary of its own (not part of `it`): it takes tens of seconds.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasefence::{JobOutcome, NewJob, PgOptions, Store, Worker};

#[path = "support/cluster.rs"]
mod cluster;
use cluster::{APP, Cluster};
#[path = "support/server_faults.rs"]
mod server_faults;
use server_faults::server_faults;

/// The re-executed child's environment variable: `url\nschema\nname`.
const CHILD_ENV: &str = "LEASEFENCE_FAULT_CHILD";
/// Worker processes, and threads in each.
const PROCESSES: usize = 3;
const THREADS: usize = 2;
/// The workers' lease. Short, so that leases left behind by a fault expire during the test.
const TTL: f64 = 3.0;
/// How long after a fault ended every worker process must have completed a job again.
const RECOVERY_BOUND: Duration = Duration::from_secs(30);
/// The schema the workload runs in.
const SCHEMA: &str = "faults";

/// What the worker processes printed, each line with the time the parent read it.
#[derive(Default)]
struct Seen {
    /// (process, job, fence, when) of every handler run (a claim acknowledged).
    runs: Vec<(usize, String, i64, Instant)>,
    /// (process, job, fence, when) of every completion acknowledged.
    done: Vec<(usize, String, i64, Instant)>,
    /// Other outcomes, by name, for the report.
    outcomes: BTreeMap<String, u64>,
    /// Each process's closing `LFSTATS` line.
    stats: Vec<String>,
}

struct Workers {
    children: Vec<(Child, Option<ChildStdin>)>,
    readers: Vec<std::thread::JoinHandle<String>>,
    seen: Arc<Mutex<Seen>>,
}

impl Workers {
    fn spawn(url: &str) -> Workers {
        let exe = std::env::current_exe().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut children = vec![];
        let mut readers = vec![];
        for p in 0..PROCESSES {
            let mut child = Command::new(&exe)
                .args(["fault_child_worker", "--exact", "--ignored"])
                .args(["--nocapture", "--test-threads", "1"])
                .env(CHILD_ENV, format!("{url}\n{SCHEMA}\nhost{p}"))
                .env("RUST_LOG", "off")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a worker process");
            let stdin = child.stdin.take();
            let stdout = child.stdout.take().unwrap();
            let seen = seen.clone();
            readers.push(std::thread::spawn(move || {
                let mut other = String::new();
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let at = Instant::now();
                    // libtest prints `test NAME ... ` before the child's first line.
                    let line = line.find("LF").map_or(line.as_str(), |k| &line[k..]);
                    let words: Vec<&str> = line.split(' ').collect();
                    let mut seen = seen.lock().unwrap();
                    match words[..] {
                        ["LFRUN", job, fence] => {
                            seen.runs
                                .push((p, job.to_owned(), fence.parse().unwrap(), at))
                        }
                        ["LFOUT", "completed", job, fence] => {
                            seen.done
                                .push((p, job.to_owned(), fence.parse().unwrap(), at))
                        }
                        ["LFOUT", outcome, ..] => {
                            *seen.outcomes.entry(outcome.to_owned()).or_default() += 1
                        }
                        ["LFSTATS", ..] => seen.stats.push(format!("host{p}: {line}")),
                        _ => {
                            other.push_str(line);
                            other.push('\n');
                        }
                    }
                }
                other
            }));
            children.push((child, stdin));
        }
        Workers {
            children,
            readers,
            seen,
        }
    }

    /// Whether every process acknowledged a completion read after `since`.
    fn all_completed_since(&self, since: Instant) -> Option<Duration> {
        let seen = self.seen.lock().unwrap();
        let mut latest = Duration::ZERO;
        for p in 0..PROCESSES {
            let first = seen
                .done
                .iter()
                .filter(|(q, _, _, at)| *q == p && *at > since)
                .map(|(_, _, _, at)| *at)
                .min()?;
            latest = latest.max(first - since);
        }
        Some(latest)
    }

    /// Waits until every process completed a job after `since`; returns how long that took.
    fn recovered_after(&mut self, since: Instant, fault: &str) -> Duration {
        loop {
            if let Some(took) = self.all_completed_since(since) {
                return took;
            }
            for (p, (child, _)) in self.children.iter_mut().enumerate() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("worker process host{p} exited ({status}) after the fault {fault}");
                }
            }
            assert!(
                since.elapsed() < RECOVERY_BOUND,
                "after the fault {fault}, not every worker process completed a job within \
                 {RECOVERY_BOUND:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asks every process to stop (closes its stdin), waits, and checks each exited cleanly.
    fn stop(mut self) -> Seen {
        for (_, stdin) in &mut self.children {
            drop(stdin.take());
        }
        let mut failures = vec![];
        for (p, ((child, _), reader)) in self.children.into_iter().zip(self.readers).enumerate() {
            let out = child.wait_with_output().unwrap();
            let other = reader.join().unwrap();
            if !out.status.success() {
                failures.push(format!(
                    "host{p} exited {}:\n{other}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        Arc::try_unwrap(self.seen)
            .ok()
            .expect("the readers are done")
            .into_inner()
            .unwrap()
    }
}

/// The child: a `Worker::postgres` on the schema until its stdin closes, printing every
/// handler run and every outcome.
#[test]
#[ignore = "a worker process of pg_faults_under_a_running_workload (runs only when it spawns it)"]
fn fault_child_worker() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("fault_child_worker only runs inside pg_faults_under_a_running_workload");
        return;
    };
    let parts: Vec<&str> = spec.split('\n').collect();
    let [url, schema, name] = parts[..] else {
        panic!("bad spec {spec:?}")
    };
    let options = PgOptions::new()
        .schema(schema)
        .connect_timeout(Duration::from_secs(2))
        .lock_timeout(Duration::from_millis(500));
    let worker = Worker::postgres_with(url, options)
        .concurrency(THREADS)
        .ttl(TTL)
        .owner_prefix(name)
        .poll_interval(Duration::from_millis(50))
        .on_outcome(|lease, outcome| {
            let name = match outcome {
                JobOutcome::Completed => "completed",
                JobOutcome::Retrying { .. } => "retrying",
                JobOutcome::Dead { .. } => "dead",
                JobOutcome::Refused => "refused",
                JobOutcome::Cancelled => "cancelled",
                JobOutcome::Released => "released",
                JobOutcome::StoreError(_) => "store_error",
                _ => "other",
            };
            println!("LFOUT {name} {} {}", lease.job_id, lease.fence);
        })
        .build(|ctx| {
            let lease = ctx.lease();
            println!("LFRUN {} {}", lease.job_id, lease.fence);
            std::thread::sleep(Duration::from_millis(5));
            Ok(format!("{}@{}", lease.job_id, lease.fence))
        })
        .expect("build the worker");
    let handle = worker.shutdown_handle();
    std::thread::spawn(move || {
        let mut sink = String::new();
        while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
        handle.shutdown();
    });
    let stats = worker.run().expect("the worker stopped on an error");
    println!(
        "LFSTATS claimed={} completed={} refused={} lost={} errors={}",
        stats.claimed, stats.completed, stats.stale_refused, stats.lost, stats.errors
    );
}

/// Enqueues batches until told to stop; returns the ids whose enqueue was acknowledged.
fn enqueuer(url: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Vec<String>, u64)> {
    std::thread::spawn(move || {
        let store = PgOptions::new()
            .schema(SCHEMA)
            .connect_timeout(Duration::from_secs(2))
            .open(&url)
            .expect("the enqueuer's store");
        let mut acked = vec![];
        let mut errors = 0;
        let mut next = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let batch: Vec<NewJob> = (0..10)
                .map(|k| NewJob::new(format!("j{:06}", next + k)).unwrap())
                .collect();
            next += 10;
            match store.enqueue_many(&batch) {
                Ok(_) => acked.extend(batch.iter().map(|j| j.id().to_owned())),
                // An enqueue whose answer was lost may have landed; its ids are not counted.
                Err(_) => errors += 1,
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        (acked, errors)
    })
}

/// How many times the whole list of faults is provoked (`LEASEFENCE_PG_FAULT_ROUNDS`, default
/// 1; the long tier, `cargo xtask reliability`, uses 5).
fn rounds() -> usize {
    std::env::var("LEASEFENCE_PG_FAULT_ROUNDS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(1)
}

#[test]
fn pg_faults_under_a_running_workload() {
    let Some(cluster) = Cluster::start_or_skip() else {
        return;
    };
    let url = cluster.url(APP);
    // Creates the schema and its tables, owned by the workers' role.
    drop(
        PgOptions::new()
            .schema(SCHEMA)
            .open(&url)
            .expect("init the schema"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let enqueues = enqueuer(url.clone(), stop.clone());
    let mut workers = Workers::spawn(&url);
    let warm = Instant::now();
    let warmed = workers.recovered_after(warm - Duration::from_secs(1), "none (warm-up)");
    eprintln!("pg_faults: every worker process completing jobs after {warmed:?}");

    let mut report: Vec<(String, Duration)> = vec![];
    let faults = server_faults(SCHEMA, PROCESSES);
    let rounds = rounds();
    for round in 1..=rounds {
        for (name, fault) in &faults {
            fault(&cluster);
            let ended = Instant::now();
            let took = workers.recovered_after(ended, name);
            eprintln!(
                "pg_faults: round {round}/{rounds}: {name}: every worker process completed a \
                 job again {took:?} after"
            );
            report.push((name.to_string(), took));
        }
    }

    stop.store(true, Ordering::SeqCst);
    let (acked, enqueue_errors) = enqueues.join().unwrap();
    let mut admin = cluster.admin();
    let drained = Instant::now();
    loop {
        let open: i64 = admin
            .query_one(
                &format!("SELECT count(*) FROM {SCHEMA}.jobs WHERE done = 0"),
                &[],
            )
            .unwrap()
            .get(0);
        if open == 0 {
            break;
        }
        assert!(
            drained.elapsed() < Duration::from_secs(60),
            "{open} jobs still open 60 s after the last fault"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = workers.stop();

    // Read back through the test's own connection.
    let rows = admin
        .query(
            &format!("SELECT id, fence, result, done FROM {SCHEMA}.jobs"),
            &[],
        )
        .unwrap();
    let stored: BTreeMap<String, (i64, Option<String>, i32)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
        .collect();
    let mut findings = vec![];
    for id in &acked {
        if !stored.contains_key(id) {
            findings.push(format!("acknowledged enqueue of {id} lost"));
        }
    }
    let mut handed: BTreeSet<(&str, i64)> = BTreeSet::new();
    for (p, job, fence, _) in &seen.runs {
        if !handed.insert((job, *fence)) {
            findings.push(format!("fence {fence} of {job} handed out twice (host{p})"));
        }
    }
    for (p, job, fence, _) in &seen.done {
        match stored.get(job) {
            Some((f, Some(result), 1)) if f == fence && *result == format!("{job}@{fence}") => {}
            other => findings.push(format!(
                "host{p}'s acknowledged completion of {job} under fence {fence} is not stored: \
                 {other:?}"
            )),
        }
    }
    for (id, (fence, result, done)) in &stored {
        if *done != 1 {
            findings.push(format!("{id} is not done"));
        }
        if let Some(result) = result
            && *result != format!("{id}@{fence}")
        {
            findings.push(format!(
                "{id}: stored result {result:?} is not the one written under its fence {fence} \
                 (a stale write)"
            ));
        }
    }
    eprintln!(
        "pg_faults: {} enqueues acknowledged ({enqueue_errors} enqueue calls failed), {} handler \
         runs, {} completions acknowledged, other outcomes {:?}",
        acked.len(),
        seen.runs.len(),
        seen.done.len(),
        seen.outcomes
    );
    for line in &seen.stats {
        eprintln!("pg_faults: {line}");
    }
    let slowest = report.iter().map(|(_, d)| *d).max().unwrap_or_default();
    eprintln!(
        "pg_faults: {} server faults, slowest recovery {slowest:?} (bound {RECOVERY_BOUND:?}); {} \
         findings (fences handed out twice, acknowledged results lost, stale writes stored)",
        report.len(),
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "{} findings:\n{}\n--- server log ---\n{}",
        findings.len(),
        findings.join("\n"),
        cluster.log()
    );
    assert!(!seen.done.is_empty());
}
