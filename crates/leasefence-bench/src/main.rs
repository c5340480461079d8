//! The benchmark harness of leasefence: the floor, leasefence's APIs and peer job queues, run
//! **alternating in one process run** on the same workload, with medians and in-run ratios.
//!
//! ```sh
//! cargo xtask bench            # the full run (~15 min), writes target/bench/
//! cargo xtask bench --quick    # smaller sizes, 3 rounds: the ratio table in under 3 minutes
//! ```
//!
//! Workload of every subject: enqueue N jobs (untimed), then claim the next job → complete it
//! until none is left; jobs/s = N / (last completion − start). See `docs/benchmarks.md`.

mod peers;
mod probes;
mod report;
mod subjects;
mod summary;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};

use subjects::{Done, Durability, Subject, Target, unix_now};

#[derive(Parser)]
#[command(about = "leasefence benchmarks: floor, leasefence and peers, alternating in one run")]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    /// Smaller sizes and 3 rounds: the ratio table in under three minutes.
    #[arg(long)]
    quick: bool,
    /// Rounds (each runs every case once, in rotated order); medians are over rounds.
    #[arg(long)]
    rounds: Option<usize>,
    /// Where results.json, results.md and the plots go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// PostgreSQL server for the PostgreSQL cases (URL form; peers need it).
    #[arg(
        long,
        env = "LEASEFENCE_BENCH_PG",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    pg: String,
    /// Skip everything on PostgreSQL.
    #[arg(long)]
    no_pg: bool,
    /// The peers' folder (bench/peers); peers whose binaries are not built are reported as such.
    #[arg(long, default_value = "bench/peers")]
    peers: PathBuf,
    /// Skip the claim-next scaling probe (1k / 100k / 1M jobs).
    #[arg(long)]
    no_scaling: bool,
    /// Skip the 8-process contention probe.
    #[arg(long)]
    no_contention: bool,
    /// Run only the cases whose "subject durability workers" line contains this text (e.g.
    /// "single SQLite NORMAL 4 threads"; repeatable, any may match).
    #[arg(long)]
    only: Vec<String>,
}

#[derive(Subcommand)]
enum Sub {
    /// (internal) One worker process of a process-mode case.
    Child {
        #[arg(long)]
        subject: Subject,
        #[arg(long)]
        target: String,
        #[arg(long)]
        index: usize,
        #[arg(long)]
        of: usize,
    },
    /// (internal) One process of the contention probe.
    Contend {
        #[arg(long)]
        target: String,
    },
}

/// Who runs a case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Who {
    Ours(Subject),
    Peer(String),
}

impl Who {
    pub(crate) fn label(&self) -> String {
        match self {
            Who::Ours(s) => s.label().to_owned(),
            Who::Peer(p) => p.clone(),
        }
    }
}

/// One configuration measured in every round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Case {
    pub(crate) who: Who,
    pub(crate) durability: Durability,
    pub(crate) workers: usize,
    pub(crate) processes: bool,
    pub(crate) jobs: usize,
}

impl Case {
    pub(crate) fn mode(&self) -> String {
        match (self.workers, self.processes) {
            (1, _) => "1 worker".into(),
            (n, false) => format!("{n} threads"),
            (n, true) => format!("{n} processes"),
        }
    }
}

/// One measurement: a case in one round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Sample {
    pub(crate) case: usize,
    pub(crate) round: usize,
    pub(crate) jobs_per_sec: f64,
    /// The round's p99 of a single claim → complete cycle, in ms (single operations only).
    pub(crate) p99_ms: Option<f64>,
}

struct Sizes {
    full: usize,
    normal: usize,
    pg: usize,
    seed: usize,
    peer_max: usize,
    rounds: usize,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Some(Sub::Child {
            subject,
            target,
            index,
            of,
        }) => return child(*subject, target, *index, *of),
        Some(Sub::Contend { target }) => return probes::contend_child(target),
        None => {}
    }
    let sizes = if cli.quick {
        Sizes {
            full: 600,
            normal: 3_000,
            pg: 1_000,
            seed: 200,
            peer_max: 3_000,
            rounds: 3,
        }
    } else {
        Sizes {
            full: 3_000,
            normal: 15_000,
            pg: 4_000,
            seed: 600,
            peer_max: 3_000,
            rounds: 5,
        }
    };
    let rounds = cli.rounds.unwrap_or(sizes.rounds);
    std::fs::create_dir_all(&cli.out)?;
    let pg = if cli.no_pg || !pg_reachable(&cli.pg) {
        if !cli.no_pg {
            eprintln!(
                "note: PostgreSQL at {} is not reachable; skipping its cases",
                cli.pg
            );
        }
        None
    } else {
        Some(cli.pg.clone())
    };
    let peers = peers::discover(&cli.peers);
    for missing in &peers.missing {
        eprintln!("note: {missing}");
    }

    let mut cases = cases(&sizes, pg.is_some(), &peers);
    if !cli.only.is_empty() {
        cases.retain(|c| {
            let line = format!("{} {} {}", c.who.label(), c.durability.label(), c.mode());
            cli.only.iter().any(|o| line.contains(o.as_str()))
        });
    }
    eprintln!(
        "{} cases × {rounds} rounds; peers: {}",
        cases.len(),
        peers.names().join(", ")
    );
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    let mut samples = Vec::new();
    for round in 0..rounds {
        // Rotate the order every round so that no case always runs first (or after a big one).
        let n = cases.len();
        for k in 0..n {
            let index = (k + round * 7) % n;
            let case = &cases[index];
            let tag = format!("{}_{round}_{index}", std::process::id());
            let (rate, p99_ms) = run_case(case, &tag, dir.path(), pg.as_deref(), &peers)
                .with_context(|| {
                    format!(
                        "{} {} {}",
                        case.who.label(),
                        case.durability.label(),
                        case.mode()
                    )
                })?;
            eprintln!(
                "round {}/{rounds} [{:>3}/{n}] {:<34} {:<14} {:<12} {:>10.0} jobs/s",
                round + 1,
                k + 1,
                case.who.label(),
                case.durability.label(),
                case.mode(),
                rate
            );
            samples.push(Sample {
                case: index,
                round,
                jobs_per_sec: rate,
                p99_ms,
            });
        }
    }
    let probes = probes::run(&cli, dir.path(), pg.as_deref(), cli.quick)?;
    let report = report::Report::new(
        cases,
        samples,
        probes,
        rounds,
        started.elapsed(),
        cli.quick,
        &peers,
    );
    report.write(&cli.out)?;
    println!("{}", report.markdown());
    eprintln!(
        "wrote {}/results.md, results.json, throughput.svg",
        cli.out.display()
    );
    Ok(())
}

fn pg_reachable(url: &str) -> bool {
    postgres::Client::connect(url, postgres::NoTls).is_ok()
}

fn cases(sizes: &Sizes, pg: bool, peers: &peers::Peers) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut durabilities = vec![Durability::Full, Durability::Normal];
    if pg {
        durabilities.push(Durability::Pg);
    }
    for durability in durabilities {
        let jobs = match durability {
            Durability::Full => sizes.full,
            Durability::Normal => sizes.normal,
            Durability::Pg => sizes.pg,
        };
        for (workers, processes) in [(1, false), (4, false), (4, true)] {
            let mut add = |who: Who, jobs: usize| {
                cases.push(Case {
                    who,
                    durability,
                    workers,
                    processes,
                    jobs,
                })
            };
            add(Who::Ours(Subject::Floor), jobs);
            add(Who::Ours(Subject::Single), jobs);
            add(Who::Ours(Subject::Batch), jobs * 4);
            add(Who::Ours(Subject::Worker), jobs * 4);
            // The free functions always commit with FULL (they take no options).
            if durability == Durability::Full {
                add(Who::Ours(Subject::Seed), sizes.seed);
            }
            if !processes {
                // The peers run at a few hundred to a few thousand jobs/s: a bounded count keeps
                // the run short without changing their rate.
                for peer in peers.for_durability(durability) {
                    add(Who::Peer(peer), jobs.min(sizes.peer_max));
                }
            }
        }
    }
    cases
}

/// Runs one case on a fresh database and returns its jobs/s (and the p99 of a claim →
/// complete cycle, in ms, for single operations).
fn run_case(
    case: &Case,
    tag: &str,
    dir: &std::path::Path,
    pg: Option<&str>,
    peers: &peers::Peers,
) -> Result<(f64, Option<f64>)> {
    let subject = match &case.who {
        Who::Peer(name) => {
            let db = dir.join(format!("{tag}-{name}.db"));
            let rate = peers.run(name, case, &db, pg)?;
            remove_sqlite(&db);
            return Ok((rate, None));
        }
        Who::Ours(subject) => *subject,
    };
    let target = subjects::prepare(case.durability, subject, case.jobs, dir, pg, tag)?;
    let (done, start) = if case.processes {
        processes(subject, &target, case.workers)?
    } else if subject == Subject::Worker {
        let start = unix_now();
        (subjects::run_worker(&target, case.workers)?, start)
    } else {
        threads(subject, &target, case.workers)?
    };
    anyhow::ensure!(
        done.completed as usize == case.jobs,
        "completed {} of {} jobs",
        done.completed,
        case.jobs
    );
    subjects::cleanup(&target)?;
    if target.durability != Durability::Pg {
        remove_sqlite(std::path::Path::new(&target.location));
    }
    Ok((case.jobs as f64 / (done.last - start), done.p99_ms()))
}

fn remove_sqlite(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// `workers` threads, each running the subject's loop, released together.
fn threads(subject: Subject, target: &Target, workers: usize) -> Result<(Done, f64)> {
    let barrier = std::sync::Barrier::new(workers + 1);
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    subjects::run_loop(subject, target, i, workers)
                })
            })
            .collect();
        barrier.wait();
        let start = unix_now();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect();
        (results, start)
    });
    let (results, start) = results;
    Ok((merge(results)?, start))
}

/// `workers` child processes of this binary, each running the subject's loop (the worker
/// subject: a one-thread `Worker`), released together once all are ready.
fn processes(subject: Subject, target: &Target, workers: usize) -> Result<(Done, f64)> {
    let exe = std::env::current_exe()?;
    let target_json = serde_json::to_string(target)?;
    let mut children = Vec::new();
    for i in 0..workers {
        let mut child = Command::new(&exe)
            .args(["child", "--subject"])
            .arg(format!("{subject:?}").to_lowercase())
            .args(["--target", &target_json, "--index", &i.to_string()])
            .args(["--of", &workers.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut out = BufReader::new(child.stdout.take().context("child stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        anyhow::ensure!(line.trim() == "ready", "child said {line:?}");
        children.push((child, out));
    }
    let start = unix_now();
    for (child, _) in &mut children {
        writeln!(child.stdin.as_mut().context("child stdin")?, "go")?;
    }
    let mut results = Vec::new();
    for (mut child, mut out) in children {
        let mut line = String::new();
        out.read_line(&mut line)?;
        let status = child.wait()?;
        anyhow::ensure!(status.success(), "a child failed: {status}");
        results.push(Ok(serde_json::from_str::<Done>(line.trim())?));
    }
    Ok((merge(results)?, start))
}

fn merge(results: Vec<Result<Done>>) -> Result<Done> {
    let mut all = Done::default();
    for r in results {
        let d = r?;
        all.completed += d.completed;
        all.busy += d.busy;
        all.cycle_ms.extend(d.cycle_ms);
        all.last = all.last.max(d.last);
    }
    Ok(all)
}

fn child(subject: Subject, target: &str, index: usize, of: usize) -> Result<()> {
    let target: Target = serde_json::from_str(target)?;
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    let done = subjects::run_loop(subject, &target, index, of)?;
    println!("{}", serde_json::to_string(&done)?);
    Ok(())
}
