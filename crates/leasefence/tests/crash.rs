//! Crash test: worker processes doing claim → renew → complete loops are killed with SIGKILL at
//! random moments and replaced. Afterwards the database is intact, no fence acknowledged before
//! a kill is ever issued again, no acknowledged completion is lost or overwritten, and every job
//! can still be finished.
//!
//! `LEASEFENCE_CRASH_KILLS` sets the number of kills (default 20; the long tier, `cargo xtask
//! reliability`, uses 500). `LEASEFENCE_CRASH_SEED` replays a schedule. Runs on SQLite and on
//! PostgreSQL (skipped with a printed reason when `LEASEFENCE_TEST_PG` is unset, a failure in
//! CI). The test binary re-executes itself: `child` is an ignored test.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use leasefence::{Clock, JobId, NewJob, Now, Owner, Store, SystemClock, Ttl};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod support;
use support::{Backend, PgSchema, Rng};

const CHILD_ENV: &str = "LEASEFENCE_CRASH_CHILD";
const WORKERS: usize = 3;
const TTL: f64 = 0.3;

fn kills() -> usize {
    std::env::var("LEASEFENCE_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(20)
}

#[test]
fn sqlite_killed_workers_lose_nothing_and_never_reissue_a_fence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    crash_run(&Backend::Sqlite(path.display().to_string()));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn postgres_killed_workers_lose_nothing_and_never_reissue_a_fence() {
    let Some(pg) = PgSchema::new("crash") else {
        return;
    };
    crash_run(&pg.backend());
}

/// What the children acknowledged: an operation is reported only after it returned.
#[derive(Default, Debug)]
struct Acks {
    /// (job, fence) → how many times a claim returned it
    claims: BTreeMap<(String, i64), usize>,
    /// job → the results whose completion was acknowledged, with their fences
    completed: BTreeMap<String, Vec<(i64, String)>>,
}

fn crash_run(backend: &Backend) {
    let kills = kills();
    // Enough work that every kill lands on a worker that is still busy.
    let jobs = 200 + 40 * kills;
    let store = backend.store();
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| NewJob::new(format!("job-{i:04}")).unwrap())
        .collect();
    store.enqueue_many(&batch).unwrap();
    let seed = std::env::var("LEASEFENCE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemClock.now().to_bits() | 1);
    eprintln!("crash schedule seed {seed} (LEASEFENCE_CRASH_SEED={seed} replays it)");
    let mut rng = Rng(seed);

    let exe = std::env::current_exe().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let mut generation = 0;
    let mut spawn = |tx: &mpsc::Sender<String>| -> Child {
        generation += 1;
        let mut child = Command::new(&exe)
            .args(["child", "--exact", "--ignored", "--nocapture"])
            .env(
                CHILD_ENV,
                format!("{generation}\n{jobs}\n{}", backend.spec()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn a worker process");
        let out = BufReader::new(child.stdout.take().unwrap());
        let tx = tx.clone();
        std::thread::spawn(move || {
            // A line cut short by the kill is not an acknowledgement: only whole lines count.
            for line in out.split(b'\n').map_while(Result::ok) {
                if let Some(rest) = String::from_utf8_lossy(&line).split_once("LF ") {
                    let _ = tx.send(rest.1.to_owned());
                }
            }
        });
        child
    };
    let mut children: Vec<Child> = (0..WORKERS).map(|_| spawn(&tx)).collect();

    // Give the children time to start working, then kill one every few milliseconds.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..kills {
        std::thread::sleep(Duration::from_millis(5 + rng.below(60)));
        let victim = rng.below(WORKERS as u64) as usize;
        let child = &mut children[victim];
        if let Some(status) = child.try_wait().unwrap() {
            panic!("a worker ended ({status}) before it could be killed");
        }
        kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
        child.wait().unwrap();
        children[victim] = spawn(&tx);
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(300);
    for child in &mut children {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "a surviving worker failed: {status}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the workers never drained the queue"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    let mut acks = Acks::default();
    let mut exits = 0;
    for line in rx.iter() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts[..] {
            ["claim", job, fence] => {
                *acks
                    .claims
                    .entry((job.to_owned(), fence.parse().unwrap()))
                    .or_default() += 1
            }
            ["complete", job, fence, result] => acks
                .completed
                .entry(job.to_owned())
                .or_default()
                .push((fence.parse().unwrap(), result.to_owned())),
            ["exit"] => exits += 1,
            _ => panic!("bad line {line:?}"),
        }
    }
    assert_eq!(exits, WORKERS, "only the last workers finished normally");
    check(backend.name(), store.as_ref(), jobs, &acks, kills);
}

fn check(name: &str, store: &dyn Store, jobs: usize, acks: &Acks, kills: usize) {
    // No fence acknowledged to one claimer was ever handed to another.
    for ((job, fence), n) in &acks.claims {
        assert_eq!(*n, 1, "{job}: fence {fence} was issued {n} times");
    }
    let mut reclaimed = 0;
    for i in 0..jobs {
        let job = format!("job-{i:04}");
        let row = store.state(JobId::new(&job).unwrap()).unwrap().unwrap();
        // every job could still be finished
        assert!(row.done, "{job}: {row:?}");
        let max_claimed = acks
            .claims
            .keys()
            .filter(|(j, _)| *j == job)
            .map(|(_, f)| *f)
            .max()
            .unwrap_or(0);
        assert!(row.fence >= max_claimed, "{job}: {row:?} < {max_claimed}");
        if max_claimed > 1 {
            reclaimed += 1;
        }
        // an acknowledged completion is the stored one: never lost, never overwritten
        let completed = acks.completed.get(&job).map_or(&[][..], Vec::as_slice);
        assert!(completed.len() <= 1, "{job}: {completed:?}");
        if let Some((fence, result)) = completed.first() {
            assert_eq!(
                (row.fence, row.result.as_deref()),
                (*fence, Some(result.as_str())),
                "{job}"
            );
        }
    }
    assert!(
        reclaimed > 0,
        "some kills should have left leases for others to take over"
    );
    eprintln!(
        "{name}: {kills} kills; {jobs} jobs all done; {reclaimed} taken over after a kill; {} \
         acknowledged claims, none reissued; {} acknowledged completions, none lost",
        acks.claims.len(),
        acks.completed.len()
    );
}

/// A worker process: claim → renew → complete until every job is done, acknowledging each
/// operation on stdout once it returned.
#[test]
#[ignore = "helper process of the crash tests"]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("child only runs inside the crash tests");
        return;
    };
    let mut parts = spec.splitn(3, '\n');
    let generation = parts.next().unwrap();
    let jobs: u64 = parts.next().unwrap().parse().unwrap();
    let backend = Backend::parse(parts.next().unwrap());
    let store = backend.store();
    let name = format!("gen{generation}");
    let me = Owner::new(&name).unwrap();
    let ttl = Ttl::new(TTL).unwrap();
    let now = || Now::new(SystemClock.now()).unwrap();
    loop {
        let Some(mut lease) = store.claim_next(me, now(), ttl).unwrap() else {
            if store.stats(now()).unwrap().done == jobs {
                break;
            }
            // leases of killed workers run out after TTL
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        println!("LF claim {} {}", lease.job_id, lease.fence);
        // a little work between the writes: room for a kill at any point of the cycle
        std::thread::sleep(Duration::from_millis(5));
        if !store.renew_lease(&mut lease, now(), ttl).unwrap() {
            continue;
        }
        let result = format!("{name}@{}", lease.fence);
        if store.complete_lease(&lease, now(), &result).unwrap() {
            println!("LF complete {} {} {result}", lease.job_id, lease.fence);
        }
    }
    println!("LF exit");
}
