//! The soak (issue 18, deliverable 4): the product as it is deployed — `leasefence work`
//! processes on an SQLite file and on PostgreSQL, `leasefence serve` on PostgreSQL with a
//! `leasefence work --server` worker behind it — runs a steady stream of jobs while faults
//! are injected at random, one after another, for as long as the soak lasts:
//! - a worker process SIGKILLed (and started again), on either backend;
//! - a worker process SIGSTOPped past its lease (its jobs are taken over; when it wakes, its
//!   late writes must be refused);
//! - every PostgreSQL server fault of `pg_faults.rs` (`support/server_faults.rs`): fast and
//!   immediate restarts, every session terminated, a SIGKILLed backend, lock timeouts,
//!   `statement_timeout`, no free connection.
//!
//! After each fault every worker must complete a job again within [`RECOVERY_BOUND`]. The
//! resident memory (`VmRSS`) and the open file descriptors of the processes that are never
//! faulted — the SQLite worker, the PostgreSQL worker, `serve` and the HTTP worker — are sampled
//! twice a second: after the warm-up (the first [`WARM_UP`] of the run) the median of the last
//! fifth may not exceed the median of the fifth after the warm-up by more than
//! [`GROWTH_LIMIT`] (judged in soaks of at least [`JUDGED_FROM`]; shorter ones print it). At
//! the end, read back through the test's own connections:
//! - no (job, fence) ran two commands: no fence issued twice;
//! - every completion a worker reported is stored, under its fence, with its result;
//! - every stored result is the one written under the job's stored fence: no stale write;
//! - every acknowledged enqueue is stored, and every job is done;
//! - every process stops cleanly on SIGTERM (exit 0).
//!
//! Network partitions need network namespaces and are the subject of
//! `crates/leasefence/tests/partition.rs`; power cuts are simulated below SQLite by
//! `crates/leasefence-powercut`. Neither is part of the soak.
//!
//! `LEASEFENCE_SOAK_SECONDS` sets the length (default 45; `cargo xtask reliability --soak
//! MINUTES` sets it), `LEASEFENCE_SOAK_SEED` replays a run's choice of faults (its seed is
//! printed). Needs PostgreSQL's server binaries for the private cluster; where they are
//! missing it prints why and skips, except with `CI` set, where it fails.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasefence::{AnyStore, NewJob, Now, Store};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

#[path = "../../leasefence/tests/support/cluster.rs"]
mod cluster;
#[path = "../../leasefence/tests/support/server_faults.rs"]
mod server_faults;
use cluster::{APP, Cluster};
use server_faults::{Fault, server_faults};

/// The leases of the workers, in seconds: short, so that a stopped or killed worker's jobs are
/// taken over within the soak.
const TTL: u64 = 2;
/// How long after a fault ended every worker must have completed a job again.
const RECOVERY_BOUND: Duration = Duration::from_secs(30);
/// The share of the run before memory and descriptors are taken as settled.
const WARM_UP: f64 = 0.3;
/// The most the sampled memory and descriptors may grow after the warm-up.
const GROWTH_LIMIT: f64 = 1.05;
/// The shortest soak whose growth is judged: in a shorter one (CI's 45 s) a fault in the last
/// fifth (a reconnecting pool's descriptors, a restarted session's buffers) moves a median
/// that has not settled, so the growth is printed but not judged.
const JUDGED_FROM: Duration = Duration::from_secs(300);
/// The tokens of `serve`.
const WORKER_TOKEN: &str = "soak-worker-token-4c1d9a";
const ADMIN_TOKEN: &str = "soak-admin-token-9e27f3";
/// The PostgreSQL schema the CLI uses by default.
const SCHEMA: &str = "leasefence";
/// What each job runs: notes the run (worker, job, fence) and prints the result, `job@fence`.
const HANDLER: &str = r#"printf '%s %s %s\n' "$SOAK_WORKER" "$LEASEFENCE_JOB_ID" "$LEASEFENCE_FENCE" >> "$SOAK_RUNS"; printf '%s@%s' "$LEASEFENCE_JOB_ID" "$LEASEFENCE_FENCE""#;

fn soak_length() -> Duration {
    let seconds: f64 = std::env::var("LEASEFENCE_SOAK_SECONDS")
        .ok()
        .map(|s| {
            s.parse()
                .expect("LEASEFENCE_SOAK_SECONDS: a number of seconds")
        })
        .unwrap_or(45.0);
    Duration::from_secs_f64(seconds)
}

/// xorshift64*: enough to pick faults, and replayable from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What a process reported on stdout (`work --json`), shared with its reader threads.
#[derive(Default)]
struct Events {
    /// (job, fence, when) of every completion the process reported.
    completed: Vec<(String, i64, Instant)>,
    /// Every other event, by name.
    other: BTreeMap<String, u64>,
}

/// One `leasefence` process the soak keeps running (and starts again after a SIGKILL).
struct Proc {
    name: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    child: Child,
    events: Arc<Mutex<Events>>,
    /// The first line of stdout, for `serve` (its address).
    first_line: Option<String>,
    starts: u32,
}

impl Proc {
    fn start(
        name: &'static str,
        args: Vec<String>,
        env: Vec<(String, String)>,
        wait_first_line: bool,
    ) -> Proc {
        let events = Arc::new(Mutex::new(Events::default()));
        let (child, first_line) = Self::spawn(&args, &env, &events, wait_first_line);
        Proc {
            name,
            args,
            env,
            child,
            events,
            first_line,
            starts: 1,
        }
    }

    fn spawn(
        args: &[String],
        env: &[(String, String)],
        events: &Arc<Mutex<Events>>,
        wait_first_line: bool,
    ) -> (Child, Option<String>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_leasefence"))
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env_remove("LEASEFENCE_DB")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn leasefence");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first_line = wait_first_line.then(|| {
            lines
                .next()
                .expect("a first line")
                .expect("a first line in UTF-8")
        });
        let events = events.clone();
        std::thread::spawn(move || {
            for line in lines {
                let Ok(line) = line else { break };
                let at = Instant::now();
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let event = v["event"].as_str().unwrap_or_default().to_owned();
                let mut events = events.lock().unwrap();
                if event == "completed" {
                    let job = v["job_id"].as_str().unwrap().to_owned();
                    events
                        .completed
                        .push((job, v["fence"].as_i64().unwrap(), at));
                } else {
                    *events.other.entry(event).or_default() += 1;
                }
            }
        });
        (child, first_line)
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// SIGKILL, then the same command again.
    fn kill_and_restart(&mut self) {
        kill(self.pid(), Signal::SIGKILL).unwrap();
        self.child.wait().unwrap();
        let (child, _) = Self::spawn(&self.args, &self.env, &self.events, false);
        self.child = child;
        self.starts += 1;
    }

    /// SIGSTOP for `pause`, then SIGCONT.
    fn freeze(&self, pause: Duration) {
        kill(self.pid(), Signal::SIGSTOP).unwrap();
        std::thread::sleep(pause);
        kill(self.pid(), Signal::SIGCONT).unwrap();
    }

    fn completed_since(&self, since: Instant) -> bool {
        let events = self.events.lock().unwrap();
        events.completed.iter().rev().any(|(_, _, at)| *at > since)
    }

    /// SIGTERM, and the exit status.
    fn stop(mut self) -> (i32, Arc<Mutex<Events>>) {
        kill(self.pid(), Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not stop within 60 s of SIGTERM",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code().unwrap_or(-1), self.events)
    }
}

/// One sample of a process: seconds into the run, resident kB, open descriptors.
type Sample = (f64, u64, usize);

fn sample(pid: u32) -> Option<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((rss, fds))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The growth of a sampled figure: the median of the last fifth of the run over the median of
/// the fifth after the warm-up.
fn growth(samples: &[Sample], length: f64, pick: fn(&Sample) -> f64) -> (f64, f64, f64) {
    let window = |from: f64, to: f64| -> Vec<f64> {
        samples
            .iter()
            .filter(|s| s.0 >= from * length && s.0 <= to * length)
            .map(pick)
            .collect()
    };
    let settled = median(window(WARM_UP, WARM_UP + 0.2));
    let end = median(window(0.8, 1.0));
    (settled, end, end / settled)
}

/// The most unfinished jobs an enqueuer lets a backend hold: the stream follows what the
/// workers finish, so the backlog stays bounded however slow the machine is.
const BACKLOG: u64 = 200;

/// Enqueues `prefix`-numbered jobs in tens until `stop`, while the backend holds fewer than
/// [`BACKLOG`] unfinished jobs; the acknowledged ids, and how many calls failed.
fn enqueuer(
    db: String,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Vec<String>, u64)> {
    std::thread::spawn(move || {
        let mut store = None;
        let mut acked = vec![];
        let mut errors = 0;
        let mut next = 0u64;
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
            if store.is_none() {
                store = AnyStore::open(&db).ok();
            }
            let Some(s) = &store else {
                errors += 1;
                continue;
            };
            match s.stats(Now::system()) {
                Ok(st) if st.ready + st.leased + st.expired + st.retrying >= BACKLOG => continue,
                Ok(_) => {}
                Err(_) => {
                    errors += 1;
                    continue;
                }
            }
            let batch: Vec<NewJob> = (0..10)
                .map(|k| NewJob::new(format!("{prefix}{:07}", next + k)).unwrap())
                .collect();
            next += 10;
            match s.enqueue_many(&batch) {
                Ok(_) => acked.extend(batch.iter().map(|j| j.id().to_owned())),
                // An enqueue whose answer was lost may have landed; its ids are not counted.
                Err(_) => errors += 1,
            }
        }
        (acked, errors)
    })
}

/// The `work` arguments of a worker on `db`.
fn work_args(db: &str) -> Vec<String> {
    [
        "--db",
        db,
        "--json",
        "work",
        "--exec",
        HANDLER,
        "--concurrency",
        "2",
        "--ttl",
        &TTL.to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn env_of(worker: &str, runs: &Path) -> Vec<(String, String)> {
    vec![
        ("SOAK_WORKER".into(), worker.into()),
        ("SOAK_RUNS".into(), runs.display().to_string()),
    ]
}

/// The rows of a table read through the test's own connection: id → (fence, result, done).
type Rows = BTreeMap<String, (i64, Option<String>, i64)>;

fn sqlite_rows(path: &Path) -> Rows {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT id, fence, result, done FROM jobs")
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get::<_, i64>(3)?)))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn pg_rows(cluster: &Cluster) -> Rows {
    cluster
        .admin()
        .query(
            &format!("SELECT id, fence, result, done::bigint FROM {SCHEMA}.jobs"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
        .collect()
}

#[test]
fn soak_with_faults_at_random() {
    let Some(cluster) = Cluster::start_or_skip() else {
        return;
    };
    let length = soak_length();
    let seed: u64 = std::env::var("LEASEFENCE_SOAK_SEED")
        .ok()
        .map(|s| s.parse().expect("LEASEFENCE_SOAK_SEED: a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!(
        "soak: {:.0} s, seed {seed} (LEASEFENCE_SOAK_SEED={seed} replays the faults)",
        length.as_secs_f64()
    );
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("soak.db");
    let sqlite_db = sqlite.display().to_string();
    let runs: PathBuf = dir.path().join("runs.log");
    let pg = format!("postgres://{APP}@127.0.0.1:{}/postgres", cluster.port);
    // Both stores exist before any process starts.
    drop(AnyStore::open(&sqlite_db).unwrap());
    drop(AnyStore::open(&pg).unwrap());

    let mut steady = vec![
        Proc::start(
            "SQLite worker",
            work_args(&sqlite_db),
            env_of("sqlite-steady", &runs),
            false,
        ),
        Proc::start(
            "PostgreSQL worker",
            work_args(&pg),
            env_of("pg-steady", &runs),
            false,
        ),
    ];
    let mut serve_args: Vec<String> = ["--db", &pg, "serve", "--bind", "127.0.0.1:0"]
        .map(str::to_owned)
        .to_vec();
    serve_args.extend(["--connections".to_owned(), "2".to_owned()]);
    let mut serve_env = env_of("serve", &runs);
    serve_env.push(("LEASEFENCE_WORKER_TOKEN".into(), WORKER_TOKEN.into()));
    serve_env.push(("LEASEFENCE_ADMIN_TOKEN".into(), ADMIN_TOKEN.into()));
    let serve = Proc::start("serve", serve_args, serve_env, true);
    let url = serve
        .first_line
        .as_deref()
        .and_then(|l| l.trim().strip_prefix("listening on "))
        .expect("serve names its address first")
        .to_owned();
    let mut http_args: Vec<String> = ["--json", "work", "--server", &url, "--exec", HANDLER]
        .map(str::to_owned)
        .to_vec();
    http_args.extend(["--concurrency", "2", "--ttl", &TTL.to_string()].map(str::to_owned));
    let mut http_env = env_of("http", &runs);
    http_env.push(("LEASEFENCE_WORKER_TOKEN".into(), WORKER_TOKEN.into()));
    steady.push(Proc::start("HTTP worker", http_args, http_env, false));
    let mut victims = [
        Proc::start(
            "SQLite victim",
            work_args(&sqlite_db),
            env_of("sqlite-victim", &runs),
            false,
        ),
        Proc::start(
            "PostgreSQL victim",
            work_args(&pg),
            env_of("pg-victim", &runs),
            false,
        ),
    ];

    let stop = Arc::new(AtomicBool::new(false));
    let enqueuers = [
        enqueuer(sqlite_db.clone(), "s", stop.clone()),
        enqueuer(pg.clone(), "p", stop.clone()),
    ];

    // Memory and descriptors of the processes never faulted (serve included).
    let sampled: Vec<(&'static str, u32)> = steady
        .iter()
        .map(|p| (p.name, p.child.id()))
        .chain([(serve.name, serve.child.id())])
        .collect();
    let samples: Arc<Mutex<BTreeMap<&'static str, Vec<Sample>>>> = Arc::default();
    let started = Instant::now();
    let sampler = {
        let (samples, stop) = (samples.clone(), stop.clone());
        let sampled = sampled.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for (name, pid) in &sampled {
                    if let Some((rss, fds)) = sample(*pid) {
                        let at = started.elapsed().as_secs_f64();
                        samples
                            .lock()
                            .unwrap()
                            .entry(name)
                            .or_default()
                            .push((at, rss, fds));
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };

    let server: Vec<(&'static str, Fault)> = server_faults(SCHEMA, 1);
    let processes = ["SQLite victim", "PostgreSQL victim"];
    let kinds = 2 * processes.len() + server.len();
    let mut report: BTreeMap<String, (u32, Duration)> = BTreeMap::new();
    let recovered = |steady: &mut [Proc], victims: &mut [Proc], since: Instant, fault: &str| {
        loop {
            let all = steady
                .iter()
                .chain(victims.iter())
                .all(|p| p.completed_since(since));
            if all {
                return since.elapsed();
            }
            for p in steady.iter_mut().chain(victims.iter_mut()) {
                if let Ok(Some(status)) = p.child.try_wait() {
                    panic!("{} exited ({status}) after the fault {fault}", p.name);
                }
            }
            assert!(
                since.elapsed() < RECOVERY_BOUND,
                "after the fault {fault}, not every worker completed a job within \
                 {RECOVERY_BOUND:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let warm = recovered(&mut steady, &mut victims, started, "none (warm-up)");
    eprintln!("soak: every worker completing jobs after {warm:.1?}");
    while started.elapsed() < length {
        // A pause between faults, so that the workload also runs undisturbed.
        std::thread::sleep(Duration::from_millis(300 + rng.below(1200) as u64));
        if started.elapsed() >= length {
            break;
        }
        let pick = rng.below(kinds);
        let name = if pick < 2 * processes.len() {
            let victim = &mut victims[pick % processes.len()];
            if pick < processes.len() {
                victim.kill_and_restart();
                format!("{} SIGKILLed and started again", victim.name)
            } else {
                victim.freeze(Duration::from_secs(TTL + 1));
                format!("{} SIGSTOPped past its lease", victim.name)
            }
        } else {
            let (name, fault) = &server[pick - 2 * processes.len()];
            fault(&cluster);
            format!("PostgreSQL: {name}")
        };
        let ended = Instant::now();
        let took = recovered(&mut steady, &mut victims, ended, &name);
        let entry = report.entry(name).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(took);
    }
    let length = started.elapsed();

    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let [sqlite_acked, pg_acked] = enqueuers.map(|e| e.join().unwrap());
    // Every acknowledged job finishes.
    let drained = Instant::now();
    let mut pg_admin = cluster.admin();
    let sqlite_conn = rusqlite::Connection::open(&sqlite).unwrap();
    loop {
        let open: i64 = pg_admin
            .query_one(
                &format!("SELECT count(*) FROM {SCHEMA}.jobs WHERE done = 0"),
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
            + sqlite_conn
                .query_row("SELECT count(*) FROM jobs WHERE done = 0", [], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap_or(1);
        if open == 0 {
            break;
        }
        assert!(
            drained.elapsed() < Duration::from_secs(60),
            "{open} jobs still open 60 s after the last fault"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(sqlite_conn);

    let mut findings = vec![];
    let mut reported: Vec<(&'static str, Arc<Mutex<Events>>, u32)> = vec![];
    for p in steady.into_iter().chain(victims).chain([serve]) {
        let (name, starts) = (p.name, p.starts);
        let (code, events) = p.stop();
        if code != 0 {
            findings.push(format!("{name} exited {code} on SIGTERM"));
        }
        reported.push((name, events, starts));
    }

    // Read back through the test's own connections.
    let stored_sqlite = sqlite_rows(&sqlite);
    let stored_pg = pg_rows(&cluster);
    let stored = |job: &str| {
        if job.starts_with('s') {
            stored_sqlite.get(job)
        } else {
            stored_pg.get(job)
        }
    };
    for id in sqlite_acked.0.iter().chain(&pg_acked.0) {
        if stored(id).is_none() {
            findings.push(format!("acknowledged enqueue of {id} lost"));
        }
    }
    let log = std::fs::read_to_string(&runs).unwrap();
    let mut handed: BTreeSet<(&str, &str)> = BTreeSet::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let [worker, job, fence] = words[..] else {
            findings.push(format!("a torn line in the runs log: {line:?}"));
            continue;
        };
        if !handed.insert((job, fence)) {
            findings.push(format!(
                "fence {fence} of {job} handed out twice ({worker})"
            ));
        }
    }
    let mut completions = 0;
    let mut others: BTreeMap<String, u64> = BTreeMap::new();
    for (name, events, _) in &reported {
        let events = events.lock().unwrap();
        completions += events.completed.len();
        for (event, n) in &events.other {
            *others.entry(event.clone()).or_default() += n;
        }
        for (job, fence, _) in &events.completed {
            match stored(job) {
                Some((f, Some(result), 1)) if f == fence && *result == format!("{job}@{fence}") => {
                }
                other => findings.push(format!(
                    "{name}'s completion of {job} under fence {fence} is not stored: {other:?}"
                )),
            }
        }
    }
    for (id, (fence, result, done)) in stored_sqlite.iter().chain(&stored_pg) {
        if *done != 1 {
            findings.push(format!("{id} is not done"));
        }
        match result {
            Some(result) if *result == format!("{id}@{fence}") => {}
            other => findings.push(format!(
                "{id}: stored result {other:?} is not the one written under its fence {fence} \
                 (a stale write)"
            )),
        }
    }

    let samples = samples.lock().unwrap();
    let secs = length.as_secs_f64();
    for (name, _) in &sampled {
        let s = &samples[name];
        let (rss0, rss1, rss) = growth(s, secs, |s| s.1 as f64);
        let (fd0, fd1, fds) = growth(s, secs, |s| s.2 as f64);
        eprintln!(
            "soak: {name}: {} samples; memory {rss0:.0} → {rss1:.0} kB ({:+.1} %), descriptors \
             {fd0:.0} → {fd1:.0} ({:+.1} %) after the warm-up",
            s.len(),
            (rss - 1.0) * 100.0,
            (fds - 1.0) * 100.0
        );
        let judged = length >= JUDGED_FROM;
        if judged && rss > GROWTH_LIMIT {
            findings.push(format!(
                "{name}'s memory grew {:.1} % after the warm-up ({rss0:.0} → {rss1:.0} kB)",
                (rss - 1.0) * 100.0
            ));
        }
        if judged && fds > GROWTH_LIMIT {
            findings.push(format!(
                "{name}'s open descriptors grew from {fd0:.0} to {fd1:.0} after the warm-up"
            ));
        }
    }
    if length < JUDGED_FROM {
        eprintln!(
            "soak: growth printed, not judged: a run under {JUDGED_FROM:?} is too short to settle"
        );
    }
    let faults: u32 = report.values().map(|(n, _)| n).sum();
    for (name, (n, slowest)) in &report {
        eprintln!("soak: {n} × {name}: slowest recovery {slowest:.2?}");
    }
    let slowest = report.values().map(|(_, d)| *d).max().unwrap_or_default();
    eprintln!(
        "soak: {secs:.0} s, {faults} faults of {} kinds, slowest recovery {slowest:.2?} (bound \
         {RECOVERY_BOUND:?}); {} enqueues acknowledged ({} enqueue calls failed), {} commands \
         run, {completions} completions reported, other outcomes {others:?}; {} findings \
         (fences handed out twice, acknowledged results lost, stale writes stored, growth)",
        report.len(),
        sqlite_acked.0.len() + pg_acked.0.len(),
        sqlite_acked.1 + pg_acked.1,
        handed.len(),
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "{} findings (seed {seed}):\n{}",
        findings.len(),
        findings.join("\n")
    );
    assert!(completions > 0 && faults > 0, "the soak ran nothing");
}

/// The growth check compares the settled window with the end, not the warm-up: memory taken
/// while warming up is no finding, memory taken after it is.
#[test]
fn growth_is_measured_after_the_warm_up() {
    let rss = |s: &Sample| s.1 as f64;
    // 100 s: doubling during the warm-up, flat after it.
    let warming: Vec<Sample> = (0u32..=100)
        .map(|t| {
            (
                f64::from(t),
                if t < 30 {
                    1000 + 30 * u64::from(t)
                } else {
                    2000
                },
                10,
            )
        })
        .collect();
    let (settled, end, ratio) = growth(&warming, 100.0, rss);
    assert_eq!((settled, end, ratio), (2000.0, 2000.0, 1.0));
    // Growing 1 kB a second: the settled window (30–50 s) against the end (80–100 s) is
    // +4.8 %, just under the limit; 20 kB a second is far over it.
    let leaking: Vec<Sample> = (0u32..=100)
        .map(|t| (f64::from(t), 1000 + u64::from(t), 10))
        .collect();
    let (settled, end, ratio) = growth(&leaking, 100.0, rss);
    assert_eq!((settled, end), (1040.0, 1090.0));
    assert!(ratio > 1.04 && ratio < GROWTH_LIMIT, "{ratio}");
    let (_, _, fds) = growth(&leaking, 100.0, |s| s.2 as f64);
    assert_eq!(fds, 1.0);
    let doubling: Vec<Sample> = (0u32..=100)
        .map(|t| (f64::from(t), 1000 + 20 * u64::from(t), 10))
        .collect();
    assert!(growth(&doubling, 100.0, rss).2 > GROWTH_LIMIT);
}
