//! Many hosts, simulated, on one PostgreSQL queue: workers whose clocks disagree by far more
//! than the ttl, and separate OS processes with injected stalls.
//!
//! The multi-process test re-executes this test binary: `pg_child_worker` is an ignored test
//! that only does work when the parent hands it a schema through the environment.
//!
//! A test binary of its own (not part of `it`): these tests take seconds of real time, and the
//! mutation catalog runs `it` once per mutant.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[allow(dead_code, unused_macros, unused_imports)]
#[path = "it/common.rs"]
mod common;
use common::*;
use leasefence::{
    Clock, NewJob, Now, Owner, PgOptions, Store, SystemClock, Ttl, Worker, WorkerStats,
};

/// Runs `worker` to its end, but stops it at once (`shutdown_now`) if it is still running after
/// `limit`: a worker that a fault keeps from ever draining the queue (a clock that does not move,
/// say, so no lease is ever renewed and every job is lost and claimed again) ends with stats
/// the test's assertions refuse, instead of hanging the test.
fn run_within<S: Store + Send + 'static>(worker: Worker<S>, limit: Duration) -> WorkerStats {
    let handle = worker.shutdown_handle();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(limit).is_err() {
            handle.shutdown_now();
        }
    });
    let stats = worker.run().unwrap();
    let _ = done.send(());
    watchdog.join().unwrap();
    stats
}

/// A host clock that runs `skew` seconds off the true time.
struct Skewed(f64);

impl Clock for Skewed {
    fn now(&self) -> f64 {
        SystemClock.now() + self.0
    }
}

/// One handler run: which worker ran which job under which fence, and when (real time).
#[derive(Debug, Clone)]
struct Run {
    job: String,
    worker: &'static str,
    fence: i64,
    start: Instant,
    end: Instant,
    /// `until - now` as the handler saw it when it started.
    headroom: f64,
}

const TTL: f64 = 1.0;

/// Two workers, one clock 1000 s slow and one 1000 s fast (the ttl is 1 s), drain `jobs` jobs
/// whose handlers each take 2.5 ttl (kept alive by heartbeats). Returns every handler run and
/// the lost-lease count.
fn skewed_workers(db: &PgDb, database_clock: bool, jobs: usize) -> (Vec<Run>, u64) {
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| NewJob::new(format!("job-{i:02}")).unwrap())
        .collect();
    db.store().enqueue_many(&batch).unwrap();
    let runs = Arc::new(Mutex::new(Vec::<Run>::new()));
    // Handlers the slow host has started: the fast one starts once the slow one holds leases.
    let slow_started = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = [("slow", -1000.0), ("fast", 1000.0)]
        .into_iter()
        .map(|(name, skew)| {
            let options = db.options().pool_size(2);
            let builder = if database_clock {
                Worker::postgres_with(db.url.clone(), options)
            } else {
                let url = db.url.clone();
                Worker::builder(move || options.open(&url))
            };
            let (runs, slow_started) = (runs.clone(), slow_started.clone());
            builder
                .clock(Skewed(skew))
                .concurrency(2)
                .ttl(TTL)
                .owner_prefix(name)
                .poll_interval(Duration::from_millis(20))
                .drain(true)
                .build(move |ctx| {
                    let start = Instant::now();
                    let headroom = ctx.until() - ctx.now();
                    if name == "slow" {
                        slow_started.fetch_add(1, Ordering::SeqCst);
                    }
                    // Longer than the ttl: only heartbeats keep the lease.
                    ctx.token().wait_timeout(Duration::from_secs_f64(2.5 * TTL));
                    runs.lock().unwrap().push(Run {
                        job: ctx.job_id().to_owned(),
                        worker: name,
                        fence: ctx.lease().fence,
                        start,
                        end: Instant::now(),
                        headroom,
                    });
                    Ok(format!("{name}@{}", ctx.lease().fence))
                })
                .unwrap()
        })
        .collect();
    let stats: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(i, w)| {
                let slow_started = slow_started.clone();
                scope.spawn(move || {
                    // The fast host starts once the slow one holds leases (both its threads
                    // run a handler), so there are live leases of the slow one to take.
                    if i == 1 {
                        let patience = Instant::now() + Duration::from_secs(30);
                        while slow_started.load(Ordering::SeqCst) < 2 {
                            assert!(Instant::now() < patience, "the slow host claimed no jobs");
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    }
                    run_within(w, Duration::from_secs(60))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let lost = stats.iter().map(|s| s.lost).sum();
    let runs = runs.lock().unwrap().clone();
    (runs, lost)
}

/// Pairs of runs of the same job by different workers whose handlers overlapped in real time:
/// both believed they held a live lease at once.
fn overlaps(runs: &[Run]) -> Vec<(Run, Run)> {
    let mut found = vec![];
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if a.job == b.job && a.worker != b.worker && a.start < b.end && b.start < a.end {
                found.push((a.clone(), b.clone()));
            }
        }
    }
    found
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn workers_whose_clocks_disagree_by_more_than_the_ttl_never_both_hold_a_live_lease() {
    let Some(db) = PgDb::new() else { return };
    let (runs, lost) = skewed_workers(&db, true, 8);
    let both = overlaps(&runs);
    assert!(both.is_empty(), "two live leases on one job: {both:?}");
    assert_eq!(lost, 0, "no lease was taken away: {runs:?}");
    // every job ran once, under fence 1, and its result is that run's
    assert_eq!(runs.len(), 8, "{runs:?}");
    for run in &runs {
        // the worker's clock follows the database's: a fresh lease has about a ttl left,
        // not ttl ± 1000 s
        assert!(
            run.headroom > 0.0 && run.headroom <= TTL + 0.5,
            "the worker's clock is off the database's: {run:?}"
        );
        let row = db.row(&run.job).unwrap();
        assert_eq!((row.done, row.fence, run.fence), (1, 1, 1), "{run:?}");
        assert_eq!(row.result, Some(format!("{}@1", run.worker)));
    }
    let by: BTreeMap<&str, usize> = runs.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.worker).or_default() += 1;
        m
    });
    assert_eq!(by.len(), 2, "both workers took jobs: {by:?}");
}

/// The contrast that shows the test above can fail: on the workers' own clocks, the fast one
/// finds the slow one's live leases expired and takes them while their handlers still run.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_their_own_clocks_the_same_workers_take_each_others_live_leases() {
    let Some(db) = PgDb::new() else { return };
    let (runs, lost) = skewed_workers(&db, false, 4);
    assert!(
        !overlaps(&runs).is_empty() && lost > 0,
        "the fast clock should have stolen live leases: lost {lost}, {runs:?}"
    );
    assert!(db.rows().iter().any(|r| r.fence >= 2), "{:?}", db.rows());
}

// ---- several OS processes with stalls ------------------------------------------------------

const CHILD_ENV: &str = "LEASEFENCE_IT_PG_CHILD";
const PROCESSES: usize = 4;
const JOBS: usize = 40;
/// Lease length in the children, and how long a stalled child sleeps before writing.
const CHILD_TTL: f64 = 0.5;
const STALL: f64 = 1.2;

/// Every fifth job stalls its first holder past the lease.
fn stalls(job: &str, fence: i64) -> bool {
    fence == 1 && job.trim_start_matches("job-").parse::<usize>().unwrap() % 5 == 0
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn several_processes_with_stalls_finish_every_job_once_and_refuse_every_stale_write() {
    let Some(db) = PgDb::new() else { return };
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|i| NewJob::new(format!("job-{i:02}")).unwrap())
        .collect();
    db.store().enqueue_many(&jobs).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            Command::new(&exe)
                .args(["pg_child_worker", "--exact", "--ignored"])
                .args(["--nocapture", "--test-threads", "1"])
                .env(CHILD_ENV, format!("{}\n{}\nhost-{p}", db.url, db.schema))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a child process")
        })
        .collect();

    // (job, fence) -> (host, accepted) for every completion attempted
    let mut writes: BTreeMap<(String, i64), Vec<(String, bool)>> = BTreeMap::new();
    let mut pids = std::collections::BTreeSet::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in stdout
            .lines()
            .filter_map(|l| l.split_once("LFWRITE ").map(|(_, rest)| rest))
        {
            let parts: Vec<&str> = line.split(' ').collect();
            let [pid, host, job, fence, accepted] = parts[..] else {
                panic!("bad line {line}")
            };
            pids.insert(pid.to_owned());
            writes
                .entry((job.to_owned(), fence.parse().unwrap()))
                .or_default()
                .push((host.to_owned(), accepted == "accepted"));
        }
    }
    assert_eq!(
        pids.len(),
        PROCESSES,
        "the writes came from {PROCESSES} processes"
    );

    let mut stale = 0;
    for i in 0..JOBS {
        let job = format!("job-{i:02}");
        let row = db.row(&job).unwrap();
        assert_eq!(row.done, 1, "{job} is done: {row:?}");
        // exactly one accepted completion per job, under the stored fence, by the stored owner,
        // and the stored result is that one (nothing overwrote it)
        let accepted: Vec<(i64, &String)> = writes
            .iter()
            .filter(|((j, _), _)| *j == job)
            .flat_map(|((_, f), w)| w.iter().filter(|(_, ok)| *ok).map(move |(h, _)| (*f, h)))
            .collect();
        assert_eq!(accepted.len(), 1, "{job}: {accepted:?}");
        let (fence, host) = accepted[0];
        assert_eq!(row.fence, fence, "{job}");
        assert_eq!(row.owner.as_deref(), Some(host.as_str()), "{job}");
        assert_eq!(row.result, Some(format!("{host}@{fence}")), "{job}");
        // the stalled first holder's late write was refused
        if stalls(&job, 1) {
            assert!(fence >= 2, "{job} was taken over after its stall");
            let first = &writes[&(job.clone(), 1)];
            assert_eq!(first.len(), 1);
            assert!(!first[0].1, "{job}: a stale write was accepted");
        }
        stale += writes
            .iter()
            .filter(|((j, _), _)| *j == job)
            .flat_map(|(_, w)| w)
            .filter(|(_, ok)| !ok)
            .count();
    }
    assert!(
        stale >= JOBS / 5,
        "every stall ended in a refused write: {stale}"
    );
    eprintln!(
        "{JOBS} jobs done once by {PROCESSES} processes; {stale} stale writes refused, 0 accepted"
    );
}

#[test]
#[ignore = "helper process of several_processes_with_stalls_finish_every_job_once_and_refuse_every_stale_write"]
fn pg_child_worker() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("pg_child_worker only runs inside the multi-process test");
        return;
    };
    let parts: Vec<&str> = spec.split('\n').collect();
    let [url, schema, host] = parts[..] else {
        panic!("bad spec {spec:?}")
    };
    // Hosts judge leases by the database's clock; `now` is passed but ignored.
    let store = PgOptions::new()
        .schema(schema)
        .pool_size(2)
        .database_clock(true)
        .open(url)
        .unwrap();
    let me = Owner::new(host).unwrap();
    let pid = std::process::id();
    let deadline = Instant::now() + Duration::from_secs(120);
    let ttl = Ttl::new(CHILD_TTL).unwrap();
    let unused = Now::new(0.0).unwrap();
    loop {
        assert!(Instant::now() < deadline, "the queue never drained");
        let Some(lease) = store.claim_next(me, unused, ttl).unwrap() else {
            let stats = store.stats(unused).unwrap();
            if stats.done as usize == JOBS {
                break;
            }
            // jobs are still leased by others (maybe stalled): look again shortly
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        if stalls(&lease.job_id, lease.fence) {
            std::thread::sleep(Duration::from_secs_f64(STALL));
        }
        let result = format!("{host}@{}", lease.fence);
        let accepted = store.complete_lease(&lease, unused, &result).unwrap();
        println!(
            "LFWRITE {pid} {host} {} {} {}",
            lease.job_id,
            lease.fence,
            if accepted { "accepted" } else { "refused" }
        );
    }
}

/// Without a clock of the caller's, `Worker::postgres` follows the database's clock on a
/// monotonic timer: a fresh lease has about a ttl left on it, and heartbeats keep a job that
/// runs for several ttls.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn worker_postgres_follows_the_database_clock_by_default() {
    let Some(db) = PgDb::new() else { return };
    db.store()
        .enqueue_many(&[NewJob::new("long").unwrap()])
        .unwrap();
    let seen = Arc::new(Mutex::new(vec![]));
    let record = seen.clone();
    let server = db.store();
    let worker = Worker::postgres_with(db.url.clone(), db.options().pool_size(2))
        .ttl(TTL)
        .poll_interval(Duration::from_millis(20))
        .drain(true)
        .build(move |ctx| {
            let database = server.now().unwrap().seconds();
            record
                .lock()
                .unwrap()
                .push((ctx.until() - ctx.now(), ctx.now() - database));
            ctx.token().wait_timeout(Duration::from_secs_f64(3.0 * TTL));
            Ok("done".to_owned())
        })
        .unwrap();
    let stats = run_within(worker, Duration::from_secs(30));
    assert_eq!((stats.completed, stats.lost), (1, 0), "{stats:?}");
    let seen = seen.lock().unwrap();
    let (headroom, off) = seen[0];
    assert!(headroom > 0.0 && headroom <= TTL + 0.5, "{headroom}");
    assert!(
        off.abs() < 0.5,
        "the worker's clock is {off} s off the database's"
    );
    let row = db.row("long").unwrap();
    assert_eq!((row.done, row.fence), (1, 1));
}
