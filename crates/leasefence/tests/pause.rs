//! Pause test, in the spirit of Jepsen's lock tests: worker processes are frozen with SIGSTOP
//! past their lease and thawed with SIGCONT. Everything they try to store with the old fence —
//! renew, complete, and a write to a downstream resource that checks fences — must be refused.
//!
//! Runs on SQLite (one file, the system clock) and on PostgreSQL (the database clock; skipped
//! with a printed reason when `LEASEFENCE_TEST_PG` is unset, a failure in CI). The test binary
//! re-executes itself: `child` is an ignored test that only works inside the parent.
#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use leasefence::{Clock, Lease, NewJob, Now, Owner, Store, SystemClock, Ttl};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod support;
use support::{Backend, PgSchema};

const CHILD_ENV: &str = "LEASEFENCE_PAUSE_CHILD";
const WORKERS: usize = 3;
/// Jobs per run unless `LEASEFENCE_PAUSE_JOBS` says otherwise (the long tier, `cargo xtask
/// reliability`, runs more).
fn jobs() -> usize {
    std::env::var("LEASEFENCE_PAUSE_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(12)
}
/// The lease; a job's work takes `WORK` and is renewed every `BEAT`; a pause lasts `PAUSE`.
const TTL: f64 = 0.6;
const WORK: Duration = Duration::from_millis(900);
const BEAT: Duration = Duration::from_millis(150);
const PAUSE: Duration = Duration::from_millis(1500);

#[test]
fn sqlite_frozen_workers_never_store_with_an_old_fence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    pause_run(&Backend::Sqlite(path.display().to_string()));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn postgres_frozen_workers_never_store_with_an_old_fence() {
    let Some(pg) = PgSchema::new("pause") else {
        return;
    };
    pause_run(&pg.backend());
}

/// One line a child reported: `op job fence outcome`.
#[derive(Debug, Clone)]
struct Event {
    worker: usize,
    op: String,
    job: String,
    fence: i64,
    ok: bool,
    /// Whether, before this event, the worker had been frozen while holding this lease and
    /// thawed only after the job had been claimed under a newer fence.
    overtaken: bool,
}

fn pause_run(backend: &Backend) {
    let store = backend.store();
    let jobs: Vec<NewJob> = (0..jobs())
        .map(|i| NewJob::new(format!("job-{i:02}")).unwrap())
        .collect();
    store.enqueue_many(&jobs).unwrap();

    let exe = std::env::current_exe().unwrap();
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    let mut children: Vec<Child> = (0..WORKERS)
        .map(|w| {
            let mut child = Command::new(&exe)
                .args(["child", "--exact", "--ignored", "--nocapture"])
                .env(CHILD_ENV, format!("{w}\n{}", backend.spec()))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn a worker process");
            let out = BufReader::new(child.stdout.take().unwrap());
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in out.lines().map_while(Result::ok) {
                    if let Some(rest) = line.split_once("LF ").map(|(_, r)| r.to_owned()) {
                        let _ = tx.send((w, rest));
                    }
                }
            });
            child
        })
        .collect();
    drop(tx);

    // Freeze a worker right after it claims (so its lease runs out while it is stopped), thaw
    // it after PAUSE. Each worker is frozen at most every other claim, so the run makes progress.
    // worker -> (when it was frozen, the lease it held)
    let mut frozen: BTreeMap<usize, (Instant, String, i64)> = BTreeMap::new();
    let mut overtaken: BTreeSet<(usize, String, i64)> = BTreeSet::new();
    let mut last_claim: BTreeMap<String, i64> = BTreeMap::new();
    let mut claims_seen = [0usize; WORKERS];
    let mut events = vec![];
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut open = WORKERS;
    while open > 0 {
        assert!(Instant::now() < deadline, "the pause run did not finish");
        for (w, (since, job, fence)) in frozen.clone() {
            if since.elapsed() >= PAUSE {
                // Claims are reported after they commit, so one seen now happened before the
                // frozen worker can run again: everything it does next is stale.
                if last_claim[&job] > fence {
                    overtaken.insert((w, job, fence));
                }
                kill(Pid::from_raw(children[w].id() as i32), Signal::SIGCONT).unwrap();
                frozen.remove(&w);
            }
        }
        let line = match rx.recv_timeout(Duration::from_millis(10)) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let (w, text) = line;
        let parts: Vec<&str> = text.split(' ').collect();
        if parts[0] == "exit" {
            open -= 1;
            continue;
        }
        let [op, job, fence, outcome] = parts[..] else {
            panic!("bad line {text:?}")
        };
        let fence: i64 = fence.parse().unwrap();
        if op == "claim" {
            let last = last_claim.entry(job.to_owned()).or_default();
            assert!(fence > *last, "{job}: fence {fence} issued after {last}");
            *last = fence;
            claims_seen[w] += 1;
            if claims_seen[w] % 2 == 1 && frozen.len() < WORKERS - 1 {
                kill(Pid::from_raw(children[w].id() as i32), Signal::SIGSTOP).unwrap();
                frozen.insert(w, (Instant::now(), job.to_owned(), fence));
            }
        }
        events.push(Event {
            worker: w,
            op: op.to_owned(),
            job: job.to_owned(),
            fence,
            ok: outcome == "ok",
            overtaken: overtaken.contains(&(w, job.to_owned(), fence)),
        });
    }
    for (w, _) in frozen {
        // (a worker still frozen here would hang the run: thaw it)
        kill(Pid::from_raw(children[w].id() as i32), Signal::SIGCONT).unwrap();
    }
    for child in &mut children {
        assert!(child.wait().unwrap().success(), "a worker process failed");
    }
    check(backend.name(), store.as_ref(), &events);
}

fn check(name: &str, store: &dyn Store, events: &[Event]) {
    let mut taken_over = 0;
    let mut stale_refused = 0;
    for i in 0..jobs() {
        let job = format!("job-{i:02}");
        let row = store
            .state(leasefence::JobId::new(&job).unwrap())
            .unwrap()
            .unwrap();
        assert!(row.done, "{job} is done: {row:?}");
        let of_job: Vec<&Event> = events.iter().filter(|e| e.job == job).collect();
        let max_fence = of_job.iter().map(|e| e.fence).max().unwrap();
        assert_eq!(row.fence, max_fence, "{job}: the last claim finished it");
        // exactly one accepted completion, under the last fence, with that holder's result
        let completed: Vec<&&Event> = of_job
            .iter()
            .filter(|e| e.op == "complete" && e.ok)
            .collect();
        assert_eq!(completed.len(), 1, "{job}: {of_job:?}");
        assert_eq!(completed[0].fence, row.fence, "{job}");
        assert_eq!(
            row.result,
            Some(format!("w{}@{}", completed[0].worker, row.fence))
        );
        // a lease taken over while its holder was frozen: nothing the holder tried after it
        // was thawed was accepted — renew, complete, or the write to the downstream resource
        let stale: Vec<&&Event> = of_job.iter().filter(|e| e.overtaken).collect();
        for e in &stale {
            assert!(!e.ok, "{job}: a stale write was accepted: {e:?}");
        }
        stale_refused += stale.len();
        if !stale.is_empty() {
            taken_over += 1;
        }
        // the downstream resource saw fences only rising, and the final one last
        let admitted: Vec<i64> = of_job
            .iter()
            .filter(|e| e.op == "downstream" && e.ok)
            .map(|e| e.fence)
            .collect();
        assert!(
            admitted.windows(2).all(|w| w[0] <= w[1]),
            "{job}: {admitted:?}"
        );
        assert_eq!(admitted.last(), Some(&row.fence), "{job}");
    }
    assert!(
        taken_over >= 2,
        "the pauses should have cost some holders their leases: {taken_over}"
    );
    assert!(stale_refused >= taken_over);
    eprintln!(
        "{name}: {} jobs; {taken_over} leases taken over while frozen; {stale_refused} stale writes \
         refused, 0 accepted",
        jobs()
    );
}

/// A worker process: claim, then "work" for WORK while renewing every BEAT; then write
/// downstream (through the fence gate) and complete. Every attempt is reported on stdout.
#[test]
#[ignore = "helper process of the pause tests"]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("child only runs inside the pause tests");
        return;
    };
    let (w, backend) = spec.split_once('\n').unwrap();
    let w: usize = w.parse().unwrap();
    let backend = Backend::parse(backend);
    let store = backend.store();
    let name = format!("w{w}");
    let me = Owner::new(&name).unwrap();
    let ttl = Ttl::new(TTL).unwrap();
    let now = || Now::new(SystemClock.now()).unwrap();
    let report = |op: &str, lease: &Lease, ok: bool| {
        println!(
            "LF {op} {} {} {}",
            lease.job_id,
            lease.fence,
            if ok { "ok" } else { "refused" }
        );
    };
    let deadline = Instant::now() + Duration::from_secs(100);
    while Instant::now() < deadline {
        let Some(mut lease) = store.claim_next(me, now(), ttl).unwrap() else {
            if store.stats(now()).unwrap().done as usize == jobs() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        // Announce the new fence to the downstream resource at once: from now on it refuses
        // every older one.
        assert!(
            store
                .admit(
                    leasefence::Resource::new(&lease.job_id).unwrap(),
                    lease.fence
                )
                .unwrap()
        );
        report("claim", &lease, true);
        let started = Instant::now();
        while started.elapsed() < WORK {
            std::thread::sleep(BEAT);
            let ok = store.renew_lease(&mut lease, now(), ttl).unwrap();
            report("renew", &lease, ok);
            if !ok {
                break;
            }
        }
        // A holder that lost its lease still tries to store, as a stalled worker would.
        let admitted = store
            .admit(
                leasefence::Resource::new(&lease.job_id).unwrap(),
                lease.fence,
            )
            .unwrap();
        report("downstream", &lease, admitted);
        let result = format!("{name}@{}", lease.fence);
        let ok = store.complete_lease(&lease, now(), &result).unwrap();
        report("complete", &lease, ok);
    }
    println!("LF exit");
}
