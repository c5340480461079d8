//! `peer-effectum`: drives the [`effectum`] job queue (SQLite) through the shared peer workload
//! so the leasefence benchmark harness can compare it against leasefence.
//!
//! ```text
//! peer-effectum sqlite   --db <fresh file> --jobs <N> --workers <W> --sync full|normal [--journal rollback|wal]
//! peer-effectum postgres ...            (exits 3: effectum is SQLite only)
//! ```
//!
//! Workload (identical for every peer):
//! 1. open a fresh store (`Queue::new` runs effectum's migrations; untimed);
//! 2. enqueue N jobs whose JSON payload is the job index `i` with one bulk `Queue::add_jobs`
//!    call (`enqueue_secs`);
//! 3. start one effectum `Worker` with `max_concurrency(W)` (effectum's own pool: it claims up to
//!    W ready jobs at a time and runs each in a tokio task). The handler records `i` in a shared
//!    counter array, then calls `RunningJob::complete`, which returns once effectum's writer
//!    thread has committed the completion. `run_secs` runs from building the worker to the
//!    moment the N-th `complete` call has returned;
//! 4. verify every index 0..N was seen (count duplicates), close the queue and count the rows of
//!    effectum's `jobs` table whose status is `succeeded`;
//! 5. print one JSON line on stdout.
//!
//! Durability: effectum opens the database itself and cannot be configured. Its writer connection
//! runs `PRAGMA synchronous = normal`, and it *tries* to select WAL with `PRAGMA journal = wal`,
//! which is not a SQLite pragma (the real one is `journal_mode`) and is silently ignored, so out
//! of the box the database runs in the default rollback-journal mode (`delete`): `--journal
//! rollback` (the default). `--journal wal` runs it as designed: the fresh file is put in WAL
//! mode before effectum opens it (the mode is kept in the file), which is its best configuration.
//! `--sync` is accepted but cannot be applied; the JSON's `sync` says what ran (`normal(fixed),
//! WAL` or `normal(fixed), rollback journal`), and the journal mode found in the file afterwards
//! is printed on stderr and must be the one asked for.
//!
//! effectum is notification driven (no polling interval to tune): adding jobs wakes the worker,
//! and the worker refills itself when a running job finishes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use effectum::{Job, JobRunner, JobState, Queue, RunningJob, Worker};
use tokio::sync::Notify;

/// The effectum version this binary is pinned to (`=0.7.0` in Cargo.toml).
const EFFECTUM_VERSION: &str = "0.7.0";
/// The job type name registered with effectum.
const JOB_TYPE: &str = "bench";

/// Parsed command line.
struct Args {
    db: PathBuf,
    jobs: usize,
    workers: usize,
    sync: String,
    /// `wal`: the file is put in WAL mode before effectum opens it (WAL persists in the file).
    wal: bool,
}

/// Shared state of the handlers: how often each index ran, and the acknowledged completions.
#[derive(Debug)]
struct Shared {
    seen: Vec<AtomicU32>,
    completed: AtomicUsize,
    total: usize,
    all_done: Notify,
}

type Ctx = Arc<Shared>;

fn usage() -> String {
    "usage: peer-effectum sqlite --db <path> --jobs <N> --workers <W> --sync full|normal \
     [--journal rollback|wal]"
        .into()
}

fn parse_args() -> Result<Args, (u8, String)> {
    let mut it = std::env::args().skip(1);
    match it.next().as_deref() {
        Some("sqlite") => {}
        Some("postgres") => {
            return Err((
                3,
                "peer-effectum: effectum is SQLite only; no postgres mode".into(),
            ));
        }
        _ => return Err((2, usage())),
    }
    let (mut db, mut jobs, mut workers, mut sync) = (None, None, None, None);
    let mut wal = false;
    while let Some(flag) = it.next() {
        let value = it.next().ok_or((2, format!("missing value for {flag}")))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| (2, format!("{flag}: {e}")));
        match flag.as_str() {
            "--db" => db = Some(PathBuf::from(value)),
            "--jobs" => jobs = Some(num(&value)?),
            "--workers" => workers = Some(num(&value)?),
            "--sync" if value == "full" || value == "normal" => sync = Some(value),
            "--journal" if value == "rollback" || value == "wal" => wal = value == "wal",
            _ => {
                return Err((
                    2,
                    format!("unexpected argument {flag} {value}; {}", usage()),
                ));
            }
        }
    }
    match (db, jobs, workers, sync) {
        (Some(db), Some(jobs), Some(workers), Some(sync)) if workers >= 1 && workers <= 65535 => {
            Ok(Args {
                db,
                jobs,
                workers,
                sync,
                wal,
            })
        }
        _ => Err((2, usage())),
    }
}

/// The no-op handler: record the index, then complete the job through effectum's success path.
async fn handle(job: RunningJob, ctx: Ctx) -> Result<(), effectum::Error> {
    let i: usize = job.json_payload()?;
    ctx.seen[i].fetch_add(1, Ordering::Relaxed);
    job.complete(()).await?;
    if ctx.completed.fetch_add(1, Ordering::AcqRel) + 1 == ctx.total {
        ctx.all_done.notify_one();
    }
    Ok(())
}

async fn run(args: Args) -> Result<bool, Box<dyn std::error::Error>> {
    if args.db.exists() {
        return Err(format!("{} already exists; pass a fresh path", args.db.display()).into());
    }
    eprintln!(
        "peer-effectum: --sync {} requested; effectum fixes synchronous=normal (not configurable)",
        args.sync
    );
    if args.wal {
        // effectum 0.7 asks for WAL with `PRAGMA journal = wal`, a name SQLite ignores, so out
        // of the box its file stays in rollback-journal mode. WAL is kept in the file itself:
        // set here, on the fresh file, it is the mode effectum's own connections then run in
        // (read back below), as its design intends.
        let conn = rusqlite::Connection::open(&args.db)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if mode != "wal" {
            return Err(format!("could not put {} in WAL mode: {mode}", args.db.display()).into());
        }
    }
    let queue = Queue::new(&args.db).await?;
    let ctx: Ctx = Arc::new(Shared {
        seen: (0..args.jobs).map(|_| AtomicU32::new(0)).collect(),
        completed: AtomicUsize::new(0),
        total: args.jobs,
        all_done: Notify::new(),
    });

    // 2. Enqueue N jobs in one bulk call.
    let jobs: Vec<Job> = (0..args.jobs)
        .map(|i| Job::builder(JOB_TYPE).json_payload(&i).map(|b| b.build()))
        .collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    queue.add_jobs(jobs).await?;
    let enqueue_secs = t0.elapsed().as_secs_f64();

    // 3. One worker pool with concurrency W; wait for the N-th acknowledged completion.
    let runner = JobRunner::builder(JOB_TYPE, handle).build();
    let t1 = Instant::now();
    let worker = Worker::builder(&queue, ctx.clone())
        .max_concurrency(args.workers as u16)
        .jobs([runner])
        .build()
        .await?;
    let limit = Duration::from_secs(300 + args.jobs as u64 / 100);
    if args.jobs > 0 {
        let done = ctx.all_done.notified();
        tokio::time::timeout(limit, done).await.map_err(|_| {
            format!(
                "timed out after {limit:?}: {} of {} completions",
                ctx.completed.load(Ordering::Acquire),
                args.jobs
            )
        })?;
    }
    let run_secs = t1.elapsed().as_secs_f64();
    worker.unregister(Some(Duration::from_secs(30))).await?;
    queue.close(Duration::from_secs(30)).await?;

    // 4. Verify in memory, then in the store.
    let counts: Vec<u32> = ctx.seen.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let missing = counts.iter().filter(|&&c| c == 0).count();
    let duplicates: u64 = counts.iter().map(|&c| c.saturating_sub(1) as u64).sum();
    let conn = rusqlite::Connection::open(&args.db)?;
    let succeeded: usize = conn.query_row(
        "SELECT count(*) FROM jobs WHERE status = ?1",
        [JobState::Succeeded.as_str()],
        |r| r.get(0),
    )?;
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    eprintln!(
        "peer-effectum: missing={missing} duplicates={duplicates} store_succeeded={succeeded} \
         journal_mode={journal} synchronous=normal(fixed)"
    );
    let ok = missing == 0 && succeeded == args.jobs && (journal == "wal") == args.wal;

    // 5. One JSON line.
    let line = serde_json::json!({
        "peer": "effectum",
        "version": EFFECTUM_VERSION,
        "backend": "sqlite",
        "sync": if args.wal { "normal(fixed), WAL" } else { "normal(fixed), rollback journal" },
        "jobs": args.jobs,
        "workers": args.workers,
        "enqueue_secs": enqueue_secs,
        "run_secs": run_secs,
        "jobs_per_sec": if run_secs > 0.0 { args.jobs as f64 / run_secs } else { 0.0 },
        "duplicates": duplicates,
        "ok": ok,
    });
    println!("{line}");
    Ok(ok)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err((code, msg)) => {
            eprintln!("{msg}");
            return ExitCode::from(code);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match rt.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("peer-effectum: verification failed");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("peer-effectum: error: {e}");
            ExitCode::from(1)
        }
    }
}
