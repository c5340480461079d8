//! What is measured: the floor, leasefence's APIs, on SQLite and PostgreSQL.
//!
//! Every subject runs the same workload on a freshly prepared database: N jobs are enqueued
//! (untimed), then workers claim the next job and complete it until none is left. A *loop*
//! (`run_loop`) is one worker's share; it runs on a thread or in a child process and returns
//! how many jobs it completed and the wall-clock time of its last completion.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use leasefence::{
    NewJob, Now, Owner, PgOptions, PgStore, SqliteOptions, SqliteStore, Store, Synchronous, Ttl,
    Worker, WorkerBuilder,
};
use serde::{Deserialize, Serialize};

/// Jobs per transaction of the batch subject.
pub(crate) const BATCH: usize = 64;
const TTL: f64 = 60.0;

/// Seconds since the Unix epoch: comparable across processes.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
}

/// Durability of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub(crate) enum Durability {
    /// SQLite WAL + `synchronous = FULL` (leasefence's default).
    Full,
    /// SQLite WAL + `synchronous = NORMAL`.
    Normal,
    /// PostgreSQL with `synchronous_commit = on` (the server default).
    Pg,
}

impl Durability {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Durability::Full => "SQLite FULL",
            Durability::Normal => "SQLite NORMAL",
            Durability::Pg => "PostgreSQL",
        }
    }

    fn synchronous(self) -> Synchronous {
        match self {
            Durability::Normal => Synchronous::Normal,
            _ => Synchronous::Full,
        }
    }

    fn pragma(self) -> &'static str {
        match self {
            Durability::Normal => "NORMAL",
            _ => "FULL",
        }
    }
}

/// Who does the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub(crate) enum Subject {
    /// The minimum SQL a fenced cycle needs: two single-row UPDATE transactions, by hand.
    Floor,
    /// `Store::claim_next` → `Store::complete_lease` on a kept connection.
    Single,
    /// `Store::claim_batch(64)` → `Store::complete_batch` on a kept connection.
    Batch,
    /// The seed's free functions `claim` → `complete` (a connection per call).
    Seed,
    /// The worker runtime (`Worker`) with a no-op handler.
    Worker,
}

impl Subject {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Subject::Floor => "floor (2 UPDATE txns)",
            Subject::Single => "leasefence Store, single",
            Subject::Batch => "leasefence Store, batch 64",
            Subject::Seed => "leasefence free fns (conn/call)",
            Subject::Worker => "leasefence Worker",
        }
    }
}

/// A prepared database: where it is and what it holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Target {
    pub(crate) durability: Durability,
    /// SQLite file, or PostgreSQL URL.
    pub(crate) location: String,
    /// PostgreSQL schema of this run.
    pub(crate) schema: String,
    pub(crate) jobs: usize,
}

impl Target {
    fn path(&self) -> &Path {
        Path::new(&self.location)
    }

    fn sqlite(&self) -> Result<SqliteStore> {
        Ok(SqliteOptions::new()
            .synchronous(self.durability.synchronous())
            .open(self.path())?)
    }

    fn pg(&self, pool: u32) -> Result<PgStore> {
        Ok(PgOptions::new()
            .schema(&self.schema)
            .pool_size(pool)
            .open(&self.location)?)
    }

    fn floor_sqlite(&self) -> Result<rusqlite::Connection> {
        let conn = rusqlite::Connection::open(self.path())?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "synchronous", self.durability.pragma())?;
        Ok(conn)
    }

    fn floor_pg(&self) -> Result<postgres::Client> {
        let mut client = postgres::Client::connect(&self.location, postgres::NoTls)?;
        client.batch_execute(&format!("SET search_path TO {}", self.schema))?;
        Ok(client)
    }
}

fn job_id(i: usize) -> String {
    format!("job-{i:08}")
}

/// Creates a fresh database for `subject` in `dir` (SQLite) or a fresh schema (PostgreSQL) and
/// enqueues `jobs` jobs.
pub(crate) fn prepare(
    durability: Durability,
    subject: Subject,
    jobs: usize,
    dir: &Path,
    pg_url: Option<&str>,
    tag: &str,
) -> Result<Target> {
    let target = match durability {
        Durability::Pg => {
            let url = pg_url.context("no PostgreSQL URL")?;
            let schema = format!("bench_{tag}");
            let mut client = postgres::Client::connect(url, postgres::NoTls)?;
            client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))?;
            Target {
                durability,
                location: url.to_owned(),
                schema,
                jobs,
            }
        }
        _ => Target {
            durability,
            location: dir
                .join(format!("{tag}.db"))
                .to_str()
                .context("utf-8 temp path")?
                .to_owned(),
            schema: String::new(),
            jobs,
        },
    };
    if subject == Subject::Floor {
        prepare_floor(&target)?;
    } else {
        enqueue(&target, jobs)?;
    }
    Ok(target)
}

/// The jobs of one run, enqueued through the public API in chunks (one transaction each).
pub(crate) fn enqueue(target: &Target, jobs: usize) -> Result<()> {
    let store: Box<dyn Store> = match target.durability {
        Durability::Pg => Box::new(target.pg(1)?),
        _ => Box::new(target.sqlite()?),
    };
    let mut next = 0;
    while next < jobs {
        let end = (next + 20_000).min(jobs);
        let chunk = (next..end)
            .map(|i| NewJob::new(job_id(i)))
            .collect::<leasefence::Result<Vec<_>>>()?;
        store.enqueue_many(&chunk)?;
        next = end;
    }
    Ok(())
}

const FLOOR_TABLE: &str = "CREATE TABLE floor (id INTEGER PRIMARY KEY, owner TEXT, \
     until DOUBLE PRECISION NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0, \
     done INTEGER NOT NULL DEFAULT 0); \
     CREATE INDEX floor_ready ON floor (id) WHERE done = 0;";

fn prepare_floor(target: &Target) -> Result<()> {
    let jobs = target.jobs;
    match target.durability {
        Durability::Pg => {
            let mut client = postgres::Client::connect(&target.location, postgres::NoTls)?;
            client.batch_execute(&format!(
                "CREATE SCHEMA {s}; SET search_path TO {s}; {} \
                 INSERT INTO floor (id) SELECT g FROM generate_series(1, {jobs}) g;",
                FLOOR_TABLE.replace("INTEGER PRIMARY KEY", "BIGINT PRIMARY KEY"),
                s = target.schema
            ))?;
        }
        _ => {
            let conn = target.floor_sqlite()?;
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            anyhow::ensure!(mode == "wal", "journal mode {mode}");
            conn.execute_batch(&format!(
                "BEGIN; {FLOOR_TABLE} \
                 WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {jobs}) \
                 INSERT INTO floor (id) SELECT i FROM g; COMMIT;"
            ))?;
        }
    }
    Ok(())
}

/// Drops a PostgreSQL run's schema; removes nothing for SQLite (the temp dir goes as a whole).
pub(crate) fn cleanup(target: &Target) -> Result<()> {
    if target.durability == Durability::Pg {
        let mut client = postgres::Client::connect(&target.location, postgres::NoTls)?;
        client.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", target.schema))?;
    }
    Ok(())
}

/// What one loop (or one whole run) did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Done {
    pub(crate) completed: u64,
    /// Unix time of the last completion.
    pub(crate) last: f64,
    /// Busy errors that reached the caller.
    pub(crate) busy: u64,
    /// How long each claim → complete cycle took, in ms (the single-operation subject only).
    #[serde(default)]
    pub(crate) cycle_ms: Vec<f64>,
}

impl Done {
    /// The 99th percentile of the cycles' times, in ms (none without cycles).
    pub(crate) fn p99_ms(&self) -> Option<f64> {
        let mut ms = self.cycle_ms.clone();
        ms.sort_by(f64::total_cmp);
        let last = ms.len().checked_sub(1)?;
        Some(ms[(last as f64 * 0.99).round() as usize])
    }
}

/// One worker's loop: claim → complete until nothing is left. `index`/`of` split the ids for
/// the seed subject, which claims by id.
pub(crate) fn run_loop(subject: Subject, target: &Target, index: usize, of: usize) -> Result<Done> {
    let owner_name = format!("bench-{}-{index}", std::process::id());
    let owner = Owner::new(&owner_name)?;
    let ttl = Ttl::new(TTL)?;
    let mut done = Done::default();
    let finish = |done: &mut Done, n: u64| {
        done.completed += n;
        done.last = unix_now();
    };
    match (subject, target.durability) {
        (Subject::Floor, Durability::Pg) => {
            let mut client = target.floor_pg()?;
            let claim = client.prepare(
                "UPDATE floor SET owner = $1, until = $2, fence = fence + 1 WHERE id = \
                 (SELECT id FROM floor WHERE done = 0 AND until <= $3 ORDER BY id LIMIT 1 \
                 FOR UPDATE SKIP LOCKED) RETURNING id, fence",
            )?;
            let complete = client.prepare(
                "UPDATE floor SET done = 1 WHERE id = $1 AND owner = $2 AND fence = $3 \
                 AND done = 0 AND until > $4",
            )?;
            loop {
                let now = unix_now();
                let Some(row) = client.query_opt(&claim, &[&owner_name, &(now + TTL), &now])?
                else {
                    break;
                };
                let (id, fence): (i64, i64) = (row.get(0), row.get(1));
                let n = client.execute(&complete, &[&id, &owner_name, &fence, &unix_now()])?;
                anyhow::ensure!(n == 1, "floor complete refused");
                finish(&mut done, 1);
            }
        }
        (Subject::Floor, _) => {
            let conn = target.floor_sqlite()?;
            let mut claim = conn.prepare(
                "UPDATE floor SET owner = ?1, until = ?2, fence = fence + 1 WHERE id = \
                 (SELECT id FROM floor WHERE done = 0 AND until <= ?3 LIMIT 1) \
                 RETURNING id, fence",
            )?;
            let mut complete = conn.prepare(
                "UPDATE floor SET done = 1 WHERE id = ?1 AND owner = ?2 AND fence = ?3 \
                 AND done = 0 AND until > ?4",
            )?;
            loop {
                let now = unix_now();
                let row = claim
                    .query_row((&owner_name, now + TTL, now), |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
                    })
                    .map(Some)
                    .or_else(|e| match e {
                        rusqlite::Error::QueryReturnedNoRows => Ok(None),
                        e => Err(e),
                    })?;
                let Some((id, fence)) = row else { break };
                let n = complete.execute((id, &owner_name, fence, unix_now()))?;
                anyhow::ensure!(n == 1, "floor complete refused");
                finish(&mut done, 1);
            }
        }
        (Subject::Single | Subject::Batch, durability) => {
            let store: Box<dyn Store> = match durability {
                Durability::Pg => Box::new(target.pg(1)?),
                _ => Box::new(target.sqlite()?),
            };
            let n = leasefence::BatchSize::new(if subject == Subject::Batch { BATCH } else { 1 })?;
            loop {
                let began = std::time::Instant::now();
                let leases = match store.claim_batch(owner, Now::new(unix_now())?, ttl, n) {
                    Ok(leases) => leases,
                    Err(e) if e.is_retryable() => {
                        done.busy += 1;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                if leases.is_empty() {
                    break;
                }
                let now = Now::new(unix_now())?;
                let stored = if n == leasefence::BatchSize::ONE {
                    vec![store.complete_lease(&leases[0], now, "ok")?]
                } else {
                    let results: Vec<_> = leases.iter().map(|l| (l, "ok")).collect();
                    store.complete_batch(&results, now)?
                };
                anyhow::ensure!(stored.iter().all(|s| *s), "a completion was refused");
                if n == leasefence::BatchSize::ONE {
                    done.cycle_ms.push(began.elapsed().as_secs_f64() * 1e3);
                }
                finish(&mut done, stored.len() as u64);
            }
        }
        (Subject::Seed, Durability::Pg) => bail!("the free functions are SQLite only"),
        (Subject::Seed, _) => {
            let path = target.path();
            for i in (index..target.jobs).step_by(of.max(1)) {
                let id = job_id(i);
                let now = unix_now();
                let fence = leasefence::claim(path, &id, &owner_name, now, TTL)?
                    .context("a job the seed loop owns was not claimable")?;
                let stored = leasefence::complete(path, &id, &owner_name, fence, unix_now(), "ok")?;
                anyhow::ensure!(stored, "a completion was refused");
                finish(&mut done, 1);
            }
        }
        (Subject::Worker, _) => return run_worker(target, 1),
    }
    Ok(done)
}

/// The worker runtime with `threads` threads, draining the queue; the time is that of the last
/// completion (seen through the outcome hook), not of the drain check that follows it.
pub(crate) fn run_worker(target: &Target, threads: usize) -> Result<Done> {
    match target.durability {
        Durability::Pg => {
            let target = target.clone();
            let pool = u32::try_from(threads + 1).unwrap_or(u32::MAX);
            drive(
                Worker::builder(move || {
                    PgOptions::new()
                        .schema(&target.schema)
                        .pool_size(pool)
                        .open(&target.location)
                }),
                threads,
            )
        }
        durability => {
            let path = PathBuf::from(&target.location);
            let sync = durability.synchronous();
            drive(
                Worker::builder(move || SqliteOptions::new().synchronous(sync).open(&path)),
                threads,
            )
        }
    }
}

fn drive<S: Store + Send + 'static>(builder: WorkerBuilder<S>, threads: usize) -> Result<Done> {
    let last = Arc::new(Mutex::new(0.0f64));
    let completed = Arc::new(AtomicU64::new(0));
    let (hook_last, hook_completed) = (last.clone(), completed.clone());
    let stats = builder
        .concurrency(threads)
        .ttl(TTL)
        .drain(true)
        .poll_interval(Duration::from_millis(1))
        .on_outcome(move |_lease, outcome| {
            if outcome.is_stored_result() {
                hook_completed.fetch_add(1, Ordering::SeqCst);
                *hook_last.lock().expect("not poisoned") = unix_now();
            }
        })
        .build(|_ctx| Ok(String::new()))?
        .run()?;
    let completed = completed.load(Ordering::SeqCst);
    anyhow::ensure!(
        stats.completed == completed,
        "stats {stats:?} vs {completed}"
    );
    let last = *last.lock().expect("not poisoned");
    Ok(Done {
        completed,
        last,
        busy: 0,
        cycle_ms: Vec::new(),
    })
}
