//! Concurrency histories: threads (and OS processes) issue overlapping claim / renew / complete /
//! release / state calls on shared jobs, each call recorded with its real start and end time.
//! Every job's history must be linearizable against a sequential model of the contract
//! (stateright's `LinearizabilityTester`): some order of the calls, respecting real time, in
//! which each call returned what the model returns.
//!
//! `LEASEFENCE_LIN_ROUNDS` scales the number of jobs (rounds) for the long tier.

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasefence::{JobId, Now, Owner, Store, Ttl};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester, SequentialSpec};

mod support;
use support::{Backend, PgSchema, Rng};

const CHILD_ENV: &str = "LEASEFENCE_LIN_CHILD";
const WORKERS: usize = 4;
const OPS_PER_ROUND: usize = 5;

fn rounds(default: usize) -> usize {
    std::env::var("LEASEFENCE_LIN_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
}

// ---- the sequential model of one job ---------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Claim {
        owner: String,
        now: f64,
        ttl: f64,
    },
    Renew {
        owner: String,
        fence: i64,
        now: f64,
        ttl: f64,
    },
    Complete {
        owner: String,
        fence: i64,
        now: f64,
        result: String,
    },
    Release {
        owner: String,
        fence: i64,
    },
    State,
}

#[derive(Clone, Debug, PartialEq)]
enum Ret {
    Fence(Option<i64>),
    Done(bool),
    /// owner, until, fence, result, done
    State(Option<String>, f64, i64, Option<String>, bool),
}

/// One enqueued job as the contract describes it.
#[derive(Clone, Debug, Default)]
struct Job {
    owner: Option<String>,
    until: f64,
    fence: i64,
    result: Option<String>,
    done: bool,
}

impl Job {
    fn holds(&self, owner: &str, fence: i64) -> bool {
        self.owner.as_deref() == Some(owner) && self.fence == fence && !self.done
    }
}

impl SequentialSpec for Job {
    type Op = Op;
    type Ret = Ret;

    fn invoke(&mut self, op: &Op) -> Ret {
        match op {
            Op::Claim { owner, now, ttl } => {
                if self.done || self.until > *now {
                    return Ret::Fence(None);
                }
                self.fence += 1;
                self.owner = Some(owner.clone());
                self.until = now + ttl;
                Ret::Fence(Some(self.fence))
            }
            Op::Renew {
                owner,
                fence,
                now,
                ttl,
            } => {
                let ok = self.holds(owner, *fence) && self.until > *now;
                if ok {
                    self.until = now + ttl;
                }
                Ret::Done(ok)
            }
            Op::Complete {
                owner,
                fence,
                now,
                result,
            } => {
                let ok = self.holds(owner, *fence) && self.until > *now;
                if ok {
                    self.result = Some(result.clone());
                    self.done = true;
                }
                Ret::Done(ok)
            }
            Op::Release { owner, fence } => {
                let ok = self.holds(owner, *fence);
                if ok {
                    self.owner = None;
                    self.until = 0.0;
                }
                Ret::Done(ok)
            }
            Op::State => Ret::State(
                self.owner.clone(),
                self.until,
                self.fence,
                self.result.clone(),
                self.done,
            ),
        }
    }
}

// ---- recording --------------------------------------------------------------------------------

/// One recorded event: which worker, when (ns since the epoch: comparable across processes on
/// one machine), and the call (invoke) or its answer (return).
#[derive(Clone, Debug)]
enum Event {
    Invoke(usize, u128, Op),
    Return(usize, u128, Ret),
}

fn stamp() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The next call of `worker` in a round: times on a small grid so that boundaries (now ==
/// until) happen, and fences that are sometimes its own, sometimes stale or made up.
fn next_op(rng: &mut Rng, worker: usize, round: usize, k: usize, mine: Option<i64>) -> Op {
    // mostly its own name, sometimes another worker's
    let owner = if rng.below(3) == 0 {
        format!("w{}", rng.below(WORKERS as u64))
    } else {
        format!("w{worker}")
    };
    let now = rng.below(8) as f64;
    let ttl = 1.0 + rng.below(3) as f64;
    let fence = match (mine, rng.below(4)) {
        (Some(f), 0..=1) => f,
        (_, n) => n as i64,
    };
    match rng.below(10) {
        0..=2 => Op::Claim { owner, now, ttl },
        3..=4 => Op::Renew {
            owner,
            fence,
            now,
            ttl,
        },
        5..=6 => Op::Complete {
            owner,
            fence,
            now,
            result: format!("r{round}-w{worker}-{k}"),
        },
        7..=8 => Op::Release { owner, fence },
        _ => Op::State,
    }
}

/// Runs `op` on job `id` of `store`.
fn call(store: &dyn Store, id: &str, op: &Op) -> Ret {
    let job = JobId::new(id).unwrap();
    fn o(s: &str) -> Owner<'_> {
        Owner::new(s).unwrap()
    }
    let n = |t: f64| Now::new(t).unwrap();
    let t = |t: f64| Ttl::new(t).unwrap();
    match op {
        Op::Claim { owner, now, ttl } => Ret::Fence(
            store
                .claim(job, o(owner), n(*now), t(*ttl))
                .unwrap()
                .map(|lease| lease.fence),
        ),
        Op::Renew {
            owner,
            fence,
            now,
            ttl,
        } => Ret::Done(
            store
                .renew(job, o(owner), *fence, n(*now), t(*ttl))
                .unwrap(),
        ),
        Op::Complete {
            owner,
            fence,
            now,
            result,
        } => Ret::Done(
            store
                .complete(job, o(owner), *fence, n(*now), result)
                .unwrap(),
        ),
        Op::Release { owner, fence } => Ret::Done(store.release(job, o(owner), *fence).unwrap()),
        Op::State => {
            let s = store.state(job).unwrap().unwrap();
            Ret::State(s.owner, s.until, s.fence, s.result, s.done)
        }
    }
}

/// One worker's part of every round: its calls on the round's job, recorded.
fn work(
    store: &dyn Store,
    worker: usize,
    seed: u64,
    rounds: usize,
    mut sync: impl FnMut(usize),
) -> Vec<(usize, Event)> {
    let mut rng = Rng((seed ^ (worker as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
    let mut log = vec![];
    for round in 0..rounds {
        sync(round);
        let id = format!("round-{round:04}");
        let mut mine = None;
        for k in 0..OPS_PER_ROUND {
            let op = next_op(&mut rng, worker, round, k, mine);
            log.push((round, Event::Invoke(worker, stamp(), op.clone())));
            let ret = call(store, &id, &op);
            log.push((round, Event::Return(worker, stamp(), ret.clone())));
            if let (Op::Claim { owner, .. }, Ret::Fence(Some(f))) = (&op, &ret)
                && *owner == format!("w{worker}")
            {
                mine = Some(*f);
            }
        }
    }
    log
}

/// Checks every round's history; returns the rounds that are not linearizable.
fn check(mut events: Vec<(usize, Event)>) -> Vec<(usize, Vec<Event>)> {
    // Real-time order; on a tie an invoke goes first, which can only make calls look
    // concurrent (more orders allowed), never hide an ordering.
    events.sort_by_key(|(_, e)| match e {
        Event::Invoke(_, t, _) => (*t, 0),
        Event::Return(_, t, _) => (*t, 1),
    });
    let mut by_round: std::collections::BTreeMap<usize, Vec<Event>> = Default::default();
    for (round, e) in events {
        by_round.entry(round).or_default().push(e);
    }
    by_round
        .into_iter()
        .filter(|(_, history)| !linearizable(history))
        .collect()
}

fn linearizable(history: &[Event]) -> bool {
    let mut tester = LinearizabilityTester::new(Job::default());
    for e in history {
        let recorded = match e.clone() {
            Event::Invoke(w, _, op) => tester.on_invoke(w, op).is_ok(),
            Event::Return(w, _, ret) => tester.on_return(w, ret).is_ok(),
        };
        assert!(recorded, "a malformed history: {history:?}");
    }
    tester.is_consistent()
}

fn seed() -> u64 {
    let seed = std::env::var("LEASEFENCE_LIN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| stamp() as u64 | 1);
    eprintln!("history seed {seed} (LEASEFENCE_LIN_SEED={seed} replays the calls)");
    seed
}

fn enqueue_rounds(store: &dyn Store, rounds: usize) {
    for round in 0..rounds {
        store
            .enqueue(JobId::new(&format!("round-{round:04}")).unwrap())
            .unwrap();
    }
}

/// Threads, each with its own store, start every round together.
fn threads_run(backend: &Backend, rounds: usize) {
    enqueue_rounds(backend.store_on_callers_clock().as_ref(), rounds);
    let seed = seed();
    let barrier = Arc::new(Barrier::new(WORKERS));
    let events = Arc::new(Mutex::new(vec![]));
    std::thread::scope(|scope| {
        for worker in 0..WORKERS {
            let (barrier, events) = (barrier.clone(), events.clone());
            let backend = backend.clone();
            scope.spawn(move || {
                let store = backend.store_on_callers_clock();
                let log = work(store.as_ref(), worker, seed, rounds, |_| {
                    barrier.wait();
                });
                events.lock().unwrap().extend(log);
            });
        }
    });
    let events = Arc::try_unwrap(events).unwrap().into_inner().unwrap();
    assert_eq!(events.len(), WORKERS * rounds * OPS_PER_ROUND * 2);
    let bad = check(events);
    assert!(bad.is_empty(), "not linearizable: {:#?}", bad.first());
    eprintln!(
        "{}: {rounds} histories of {} calls by {WORKERS} threads: all linearizable",
        backend.name(),
        WORKERS * OPS_PER_ROUND
    );
}

#[test]
fn sqlite_thread_histories_are_linearizable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    threads_run(&Backend::Sqlite(path.display().to_string()), rounds(150));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn postgres_thread_histories_are_linearizable() {
    let Some(pg) = PgSchema::new("lin") else {
        return;
    };
    threads_run(&pg.backend(), rounds(100));
}

/// OS processes on one file, started together; their clocks are the machine's, so their
/// stamps order their calls.
#[cfg(unix)]
#[test]
fn sqlite_process_histories_are_linearizable() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let backend = Backend::Sqlite(path.display().to_string());
    let rounds = rounds(100);
    enqueue_rounds(backend.store_on_callers_clock().as_ref(), rounds);
    let seed = seed();
    let exe = std::env::current_exe().unwrap();
    let go = dir.path().join("go");
    let children: Vec<_> = (0..WORKERS)
        .map(|w| {
            Command::new(&exe)
                .args(["child", "--exact", "--ignored", "--nocapture"])
                .env(
                    CHILD_ENV,
                    format!(
                        "{w}\n{seed}\n{rounds}\n{}\n{}",
                        go.display(),
                        backend.spec()
                    ),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&go, b"").unwrap();
    let mut events = vec![];
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some((_, json)) = line.split_once("LFEV ") {
                events.push(parse(json));
            }
        }
    }
    assert_eq!(events.len(), WORKERS * rounds * OPS_PER_ROUND * 2);
    let bad = check(events);
    assert!(bad.is_empty(), "not linearizable: {:#?}", bad.first());
    eprintln!("SQLite: {rounds} histories by {WORKERS} processes: all linearizable");
}

#[test]
#[ignore = "helper process of sqlite_process_histories_are_linearizable"]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("child only runs inside the process-history test");
        return;
    };
    let mut parts = spec.splitn(5, '\n');
    let worker: usize = parts.next().unwrap().parse().unwrap();
    let seed: u64 = parts.next().unwrap().parse().unwrap();
    let rounds: usize = parts.next().unwrap().parse().unwrap();
    let go = std::path::PathBuf::from(parts.next().unwrap());
    let backend = Backend::parse(parts.next().unwrap());
    let store = backend.store_on_callers_clock();
    while !go.exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
    for (round, e) in work(store.as_ref(), worker, seed, rounds, |_| {}) {
        println!("LFEV {}", format_event(round, &e));
    }
}

// A tiny line format for events crossing the process boundary.
fn format_event(round: usize, e: &Event) -> String {
    match e {
        Event::Invoke(w, t, op) => format!("{round} I {w} {t} {}", format_op(op)),
        Event::Return(w, t, ret) => format!("{round} R {w} {t} {}", format_ret(ret)),
    }
}

fn format_op(op: &Op) -> String {
    match op {
        Op::Claim { owner, now, ttl } => format!("claim {owner} {now} {ttl}"),
        Op::Renew {
            owner,
            fence,
            now,
            ttl,
        } => format!("renew {owner} {fence} {now} {ttl}"),
        Op::Complete {
            owner,
            fence,
            now,
            result,
        } => format!("complete {owner} {fence} {now} {result}"),
        Op::Release { owner, fence } => format!("release {owner} {fence}"),
        Op::State => "state".into(),
    }
}

fn format_ret(ret: &Ret) -> String {
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    match ret {
        Ret::Fence(f) => format!("fence {}", f.map_or("-".into(), |f| f.to_string())),
        Ret::Done(b) => format!("done {b}"),
        Ret::State(owner, until, fence, result, done) => {
            format!(
                "state {} {until} {fence} {} {done}",
                opt(owner),
                opt(result)
            )
        }
    }
}

fn parse(line: &str) -> (usize, Event) {
    let p: Vec<&str> = line.split(' ').collect();
    let round = p[0].parse().unwrap();
    let w = p[2].parse().unwrap();
    let t = p[3].parse().unwrap();
    let f = |i: usize| p[i].parse::<f64>().unwrap();
    let i = |i: usize| p[i].parse::<i64>().unwrap();
    let s = |i: usize| p[i].to_string();
    let opt = |i: usize| (p[i] != "-").then(|| p[i].to_string());
    let e = match (p[1], p[4]) {
        ("I", "claim") => Event::Invoke(
            w,
            t,
            Op::Claim {
                owner: s(5),
                now: f(6),
                ttl: f(7),
            },
        ),
        ("I", "renew") => Event::Invoke(
            w,
            t,
            Op::Renew {
                owner: s(5),
                fence: i(6),
                now: f(7),
                ttl: f(8),
            },
        ),
        ("I", "complete") => Event::Invoke(
            w,
            t,
            Op::Complete {
                owner: s(5),
                fence: i(6),
                now: f(7),
                result: s(8),
            },
        ),
        ("I", "release") => Event::Invoke(
            w,
            t,
            Op::Release {
                owner: s(5),
                fence: i(6),
            },
        ),
        ("I", "state") => Event::Invoke(w, t, Op::State),
        ("R", "fence") => Event::Return(w, t, Ret::Fence((p[5] != "-").then(|| i(5)))),
        ("R", "done") => Event::Return(w, t, Ret::Done(p[5] == "true")),
        ("R", "state") => {
            Event::Return(w, t, Ret::State(opt(5), f(6), i(7), opt(8), p[9] == "true"))
        }
        _ => panic!("bad event {line:?}"),
    };
    (round, e)
}

/// The checker can fail: histories a broken store could produce are caught.
#[test]
fn the_checker_rejects_histories_no_correct_store_produces() {
    let claim = |owner: &str, now: f64| Op::Claim {
        owner: owner.into(),
        now,
        ttl: 5.0,
    };
    // Two claims one after the other, both winning: a second fence 1.
    let twice = vec![
        Event::Invoke(0, 1, claim("a", 0.0)),
        Event::Return(0, 2, Ret::Fence(Some(1))),
        Event::Invoke(1, 3, claim("b", 10.0)),
        Event::Return(1, 4, Ret::Fence(Some(1))),
    ];
    assert!(!linearizable(&twice));
    // The same two claims overlapping in time, the second fence 2: fine.
    let overlapping = vec![
        Event::Invoke(0, 1, claim("a", 0.0)),
        Event::Invoke(1, 2, claim("b", 10.0)),
        Event::Return(1, 3, Ret::Fence(Some(2))),
        Event::Return(0, 4, Ret::Fence(Some(1))),
    ];
    assert!(linearizable(&overlapping));
    // A stale complete accepted after a newer claim finished.
    let stale = vec![
        Event::Invoke(0, 1, claim("a", 0.0)),
        Event::Return(0, 2, Ret::Fence(Some(1))),
        Event::Invoke(1, 3, claim("b", 6.0)),
        Event::Return(1, 4, Ret::Fence(Some(2))),
        Event::Invoke(
            0,
            5,
            Op::Complete {
                owner: "a".into(),
                fence: 1,
                now: 1.0,
                result: "late".into(),
            },
        ),
        Event::Return(0, 6, Ret::Done(true)),
    ];
    assert!(!linearizable(&stale));
    // A state read that misses a completed write.
    let lost = vec![
        Event::Invoke(0, 1, claim("a", 0.0)),
        Event::Return(0, 2, Ret::Fence(Some(1))),
        Event::Invoke(0, 3, Op::State),
        Event::Return(0, 4, Ret::State(None, 0.0, 0, None, false)),
    ];
    assert!(!linearizable(&lost));
}
