//! `peer-apalis`: drives the apalis 1.0 job queue (`apalis-sqlite` and `apalis-postgres`, both on
//! sqlx 0.9) through the shared peer workload so the leasefence benchmark harness can compare it.
//!
//! ```text
//! peer-apalis sqlite   --db <fresh file> --jobs <N> --workers <W> --sync full|normal
//! peer-apalis postgres --url <postgres://user@host:port/db> --jobs <N> --workers <W>
//! ```
//!
//! Workload (identical for every peer):
//! 1. a fresh store, untimed: SQLite opens the new file through sqlx with `journal_mode=WAL`,
//!    the requested `synchronous`, `busy_timeout=5s`; PostgreSQL connects to the server of
//!    `--url`, creates the database `bench_apalis_<pid>` and uses it (dropped `WITH (FORCE)` at
//!    the end, also after an error). Then apalis' migrations run. NOTE: we run
//!    `SqliteStorage::migrations()` rather than `SqliteStorage::setup()`, because `setup()` also
//!    issues `PRAGMA synchronous = OFF` (and other tuning) on a pool connection, which would
//!    break the durability the benchmark is meant to hold fixed;
//! 2. enqueue N jobs whose argument is the index `i: u64` with one `TaskSink::push_bulk` call
//!    (one transaction) — `enqueue_secs`;
//! 3. start W apalis workers (`WorkerBuilder`, each a tokio task, all on one connection pool),
//!    each polling with a 5 ms interval when idle. apalis' defaults otherwise: each fetch claims
//!    up to `batch_size = 10` jobs, `lock_tasks` and `persist_results` are on. The handler
//!    records `i` in a shared counter array and returns `Ok(())`; apalis then sends the job's
//!    completion to its persistence layer, which writes completions to the store in batches
//!    from the worker loop. Because the handler cannot observe that write, the clock stops when
//!    the store itself reports N jobs with status `Done` (polled every 1 ms once the handlers
//!    have seen all N indices) — `run_secs`;
//! 4. verify every index 0..N was seen (count duplicates) and that the store holds N `Done` jobs;
//! 5. print one JSON line on stdout.

use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apalis::prelude::*;
use apalis_postgres::PostgresStorage;
use apalis_sqlite::SqliteStorage;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};
use tokio::sync::{Notify, watch};

/// The apalis crates this binary is pinned to (`=1.0.0` in Cargo.toml).
const APALIS_VERSION: &str = "1.0.0";
/// The apalis queue (`job_type` column) the jobs go to.
const QUEUE: &str = "bench";
/// How often an idle apalis worker polls the store for new jobs.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which backend, with its own arguments.
enum Mode {
    Sqlite { db: String, sync: String },
    Postgres { url: String },
}

/// Parsed command line.
struct Args {
    mode: Mode,
    jobs: usize,
    workers: usize,
}

/// Shared state of the handlers: how often each index ran, and how many handler calls finished.
#[derive(Debug)]
struct Shared {
    seen: Vec<AtomicU32>,
    handled: AtomicUsize,
    all_seen: Notify,
}

/// What a run measured.
struct Outcome {
    /// The durability level the store actually ran at (`full`/`normal`, or PostgreSQL's
    /// `synchronous_commit`).
    sync: String,
    enqueue_secs: f64,
    run_secs: f64,
    duplicates: u64,
    ok: bool,
}

fn usage() -> String {
    "usage: peer-apalis sqlite --db <path> --jobs <N> --workers <W> --sync full|normal\n       \
     peer-apalis postgres --url <url> --jobs <N> --workers <W>"
        .into()
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let backend = it.next().ok_or_else(usage)?;
    let (mut db, mut url, mut sync, mut jobs, mut workers) = (None, None, None, None, None);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("missing value for {flag}"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--db" => db = Some(value),
            "--url" => url = Some(value),
            "--sync" if value == "full" || value == "normal" => sync = Some(value),
            "--jobs" => jobs = Some(num(&value)?),
            "--workers" => workers = Some(num(&value)?),
            _ => return Err(format!("unexpected argument {flag} {value}\n{}", usage())),
        }
    }
    let mode = match (backend.as_str(), db, url, sync) {
        ("sqlite", Some(db), None, Some(sync)) => Mode::Sqlite { db, sync },
        ("postgres", None, Some(url), None) => Mode::Postgres { url },
        _ => return Err(usage()),
    };
    match (jobs, workers) {
        (Some(jobs), Some(workers)) if workers >= 1 => Ok(Args {
            mode,
            jobs,
            workers,
        }),
        _ => Err(usage()),
    }
}

/// The no-op handler: record the index. Returning `Ok` is apalis' success path; the framework
/// then persists the completion (status `Done`).
async fn handle(i: u64, shared: Data<Arc<Shared>>) -> Result<(), BoxDynError> {
    let slot = shared
        .seen
        .get(i as usize)
        .ok_or("job index out of range")?;
    slot.fetch_add(1, Ordering::Relaxed);
    if shared.handled.fetch_add(1, Ordering::AcqRel) + 1 == shared.seen.len() {
        shared.all_seen.notify_one();
    }
    Ok(())
}

impl Shared {
    fn new(jobs: usize) -> Arc<Self> {
        Arc::new(Shared {
            seen: (0..jobs).map(|_| AtomicU32::new(0)).collect(),
            handled: AtomicUsize::new(0),
            all_seen: Notify::new(),
        })
    }

    /// (indices never seen, extra runs beyond the first).
    fn tally(&self) -> (usize, u64) {
        let counts: Vec<u32> = self
            .seen
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let missing = counts.iter().filter(|&&c| c == 0).count();
        let duplicates = counts.iter().map(|&c| c.saturating_sub(1) as u64).sum();
        (missing, duplicates)
    }
}

/// A future that resolves when `stop` flips to true: the shutdown signal of every worker.
async fn stop_signal(mut stop: watch::Receiver<bool>) -> Result<(), WorkerError> {
    let _ = stop.wait_for(|s| *s).await;
    Ok(())
}

/// Wait until the handlers have seen all N jobs, then until `done_in_store` reports N.
async fn wait_until_done<F, Fut>(
    shared: &Shared,
    jobs: usize,
    done_in_store: F,
) -> Result<(), BoxError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<i64, sqlx::Error>>,
{
    let limit = Duration::from_secs(300 + jobs as u64 / 100);
    let deadline = tokio::time::Instant::now() + limit;
    let seen = shared.all_seen.notified();
    if shared.handled.load(Ordering::Acquire) < jobs {
        tokio::time::timeout_at(deadline, seen).await.map_err(|_| {
            format!(
                "timed out after {limit:?}: handlers saw {} of {jobs} jobs",
                shared.handled.load(Ordering::Acquire)
            )
        })?;
    }
    loop {
        let done = done_in_store().await?;
        if done as usize >= jobs {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "timed out after {limit:?}: store reports {done} of {jobs} jobs Done"
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn run_sqlite(
    db: &str,
    sync: &str,
    jobs: usize,
    workers: usize,
) -> Result<Outcome, BoxError> {
    if std::path::Path::new(db).exists() {
        return Err(format!("{db} already exists; pass a fresh path").into());
    }
    let synchronous = if sync == "full" {
        SqliteSynchronous::Full
    } else {
        SqliteSynchronous::Normal
    };
    let options = SqliteConnectOptions::new()
        .filename(db)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(synchronous)
        .busy_timeout(Duration::from_secs(5));
    let pool = SqlitePoolOptions::new()
        .max_connections(workers as u32 + 2)
        .connect_with(options)
        .await?;
    SqliteStorage::migrations().run(&pool).await?;
    let (journal, sync_level): (String, i64) = (
        sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&pool)
            .await?,
        sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&pool)
            .await?,
    );
    eprintln!(
        "peer-apalis: sqlite journal_mode={journal} synchronous={sync_level} (1=normal, 2=full)"
    );
    let expected = if sync == "full" { 2 } else { 1 };
    if journal != "wal" || sync_level != expected {
        return Err(format!(
            "connection settings not applied: journal_mode={journal} synchronous={sync_level}"
        )
        .into());
    }
    let config = apalis_sqlite::Config::default().queue(QUEUE);

    let t0 = Instant::now();
    SqliteStorage::<u64>::new(&pool)
        .with_config(config.clone())
        .push_bulk((0..jobs as u64).collect())
        .await?;
    let enqueue_secs = t0.elapsed().as_secs_f64();

    let shared = Shared::new(jobs);
    let (stop_tx, stop_rx) = watch::channel(false);
    let t1 = Instant::now();
    let mut handles = Vec::new();
    for w in 0..workers {
        let backend = SqliteStorage::<u64>::new(&pool)
            .with_config(config.clone())
            .poll_with_interval(POLL_INTERVAL);
        let worker = WorkerBuilder::new(format!("peer-apalis-{w}"))
            .backend(backend)
            .data(shared.clone())
            .build(handle);
        handles.push(tokio::spawn(worker.run_until(stop_signal(stop_rx.clone()))));
    }
    let count_done = || {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM Jobs WHERE job_type = ?1 AND status = 'Done'",
        )
        .bind(QUEUE)
        .fetch_one(&pool)
    };
    let waited = wait_until_done(&shared, jobs, count_done).await;
    let run_secs = t1.elapsed().as_secs_f64();
    stop_workers(stop_tx, handles).await;
    waited?;

    let done = count_done().await?;
    let (missing, duplicates) = shared.tally();
    eprintln!("peer-apalis: missing={missing} duplicates={duplicates} store_done={done}");
    pool.close().await;
    let sync = sync.to_string();
    Ok(Outcome {
        sync,
        enqueue_secs,
        run_secs,
        duplicates,
        ok: missing == 0 && done as usize == jobs,
    })
}

async fn run_postgres(url: &str, jobs: usize, workers: usize) -> Result<Outcome, BoxError> {
    let server = PgConnectOptions::from_str(url)?;
    let mut admin = server.connect().await?;
    let name = format!("bench_apalis_{}", std::process::id());
    admin
        .execute(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await?;
    let outcome = postgres_workload(server.clone().database(&name), jobs, workers).await;
    if let Err(e) = admin
        .execute(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .await
    {
        eprintln!("peer-apalis: could not drop database {name}: {e}");
    }
    let _ = admin.close().await;
    outcome
}

async fn postgres_workload(
    options: PgConnectOptions,
    jobs: usize,
    workers: usize,
) -> Result<Outcome, BoxError> {
    let pool = PgPoolOptions::new()
        .max_connections(workers as u32 + 2)
        .connect_with(options)
        .await?;
    PostgresStorage::setup(&pool).await?;
    let sync: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&pool)
        .await?;
    eprintln!("peer-apalis: postgres synchronous_commit={sync}");
    let config = apalis_postgres::Config::default().queue(QUEUE);

    let t0 = Instant::now();
    PostgresStorage::<u64>::new(&pool)
        .with_config(config.clone())
        .push_bulk((0..jobs as u64).collect())
        .await?;
    let enqueue_secs = t0.elapsed().as_secs_f64();

    let shared = Shared::new(jobs);
    let (stop_tx, stop_rx) = watch::channel(false);
    let t1 = Instant::now();
    let mut handles = Vec::new();
    for w in 0..workers {
        let backend = PostgresStorage::<u64>::new(&pool)
            .with_config(config.clone())
            .poll_with_interval(POLL_INTERVAL);
        let worker = WorkerBuilder::new(format!("peer-apalis-{w}"))
            .backend(backend)
            .data(shared.clone())
            .build(handle);
        handles.push(tokio::spawn(worker.run_until(stop_signal(stop_rx.clone()))));
    }
    let count_done = || {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM apalis.jobs WHERE job_type = $1 AND status = 'Done'",
        )
        .bind(QUEUE)
        .fetch_one(&pool)
    };
    let waited = wait_until_done(&shared, jobs, count_done).await;
    let run_secs = t1.elapsed().as_secs_f64();
    stop_workers(stop_tx, handles).await;
    waited?;

    let done = count_done().await?;
    let (missing, duplicates) = shared.tally();
    eprintln!("peer-apalis: missing={missing} duplicates={duplicates} store_done={done}");
    pool.close().await;
    Ok(Outcome {
        sync,
        enqueue_secs,
        run_secs,
        duplicates,
        ok: missing == 0 && done as usize == jobs,
    })
}

/// Signal every worker to stop and wait (bounded) for them to flush and exit.
async fn stop_workers(
    stop: watch::Sender<bool>,
    handles: Vec<tokio::task::JoinHandle<Result<(), WorkerError>>>,
) {
    let _ = stop.send(true);
    for h in handles {
        match tokio::time::timeout(Duration::from_secs(30), h).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => eprintln!("peer-apalis: worker ended with error: {e}"),
            Ok(Err(e)) => eprintln!("peer-apalis: worker task failed: {e}"),
            Err(_) => eprintln!("peer-apalis: worker did not stop within 30 s"),
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let backend = match &args.mode {
        Mode::Sqlite { .. } => "sqlite",
        Mode::Postgres { .. } => "postgres",
    };
    let result = rt.block_on(async {
        match &args.mode {
            Mode::Sqlite { db, sync } => run_sqlite(db, sync, args.jobs, args.workers).await,
            Mode::Postgres { url } => run_postgres(url, args.jobs, args.workers).await,
        }
    });
    match result {
        Ok(o) => {
            let line = serde_json::json!({
                "peer": "apalis",
                "version": APALIS_VERSION,
                "backend": backend,
                "sync": o.sync,
                "jobs": args.jobs,
                "workers": args.workers,
                "enqueue_secs": o.enqueue_secs,
                "run_secs": o.run_secs,
                "jobs_per_sec": if o.run_secs > 0.0 { args.jobs as f64 / o.run_secs } else { 0.0 },
                "duplicates": o.duplicates,
                "ok": o.ok,
            });
            println!("{line}");
            if o.ok {
                ExitCode::SUCCESS
            } else {
                eprintln!("peer-apalis: verification failed");
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("peer-apalis: error: {e}");
            ExitCode::from(1)
        }
    }
}
