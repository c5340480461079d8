//! Two probes beside the throughput table: claim-next cost as the queue grows (1k / 100k / 1M
//! jobs), and eight processes contending for one SQLite file.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use leasefence::{Error, NewJob, Now, Owner, PgOptions, SqliteOptions, Store, Synchronous, Ttl};
use serde::{Deserialize, Serialize};

use crate::Cli;
use crate::subjects::unix_now;

/// What the probes measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Probes {
    pub(crate) scaling: Vec<Scaling>,
    pub(crate) contention: Option<Contention>,
}

/// Median cost of one claim_next → complete cycle at one queue size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Scaling {
    pub(crate) backend: String,
    /// `ready`: every job ready; `backlog`: all but 1,000 already done.
    pub(crate) shape: String,
    pub(crate) size: usize,
    pub(crate) micros_per_cycle: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

/// Eight processes on one file at NORMAL with default settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Contention {
    pub(crate) processes: usize,
    pub(crate) jobs: usize,
    pub(crate) completed: u64,
    pub(crate) busy_errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub(crate) max_ms: f64,
    pub(crate) jobs_per_sec: f64,
}

pub(crate) fn run(cli: &Cli, dir: &Path, pg: Option<&str>, quick: bool) -> Result<Probes> {
    let mut probes = Probes::default();
    if !cli.no_scaling {
        let sizes: &[usize] = if quick {
            &[1_000, 100_000]
        } else {
            &[1_000, 100_000, 1_000_000]
        };
        probes.scaling = scaling(dir, pg, sizes, if quick { 3 } else { 5 })?;
    }
    if !cli.no_contention {
        probes.contention = Some(contention(dir, if quick { 250 } else { 1_000 })?);
    }
    Ok(probes)
}

const CYCLES: usize = 150;
const READY_IN_BACKLOG: usize = 1_000;

fn scaling(dir: &Path, pg: Option<&str>, sizes: &[usize], rounds: usize) -> Result<Vec<Scaling>> {
    let mut out = Vec::new();
    let mut backends = vec!["SQLite NORMAL"];
    if pg.is_some() {
        backends.push("PostgreSQL");
    }
    for backend in backends {
        for shape in ["ready", "backlog"] {
            // Build every size first, then alternate between them round by round.
            let mut stores: Vec<(usize, Box<dyn Store>, Option<String>)> = Vec::new();
            for &size in sizes {
                let started = Instant::now();
                let (store, schema) = build(dir, pg, backend, shape, size)?;
                eprintln!(
                    "scaling: built {backend} {shape} {size} in {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                stores.push((size, store, schema));
            }
            let mut per_size: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
            let owner = Owner::new("scaling")?;
            let ttl = Ttl::new(600.0)?;
            for _ in 0..rounds {
                for (k, (_, store, _)) in stores.iter().enumerate() {
                    let start = Instant::now();
                    for _ in 0..CYCLES {
                        let lease = store
                            .claim_next(owner, Now::new(unix_now())?, ttl)?
                            .context("a ready job")?;
                        anyhow::ensure!(store.complete_lease(
                            &lease,
                            Now::new(unix_now())?,
                            "ok"
                        )?);
                    }
                    per_size[k].push(start.elapsed().as_secs_f64() * 1e6 / CYCLES as f64);
                }
            }
            for ((size, _, schema), samples) in stores.into_iter().zip(per_size) {
                let (median, min, max) = crate::summary::stats(&samples);
                eprintln!("scaling: {backend} {shape} {size}: {median:.0} µs/cycle");
                out.push(Scaling {
                    backend: backend.into(),
                    shape: shape.into(),
                    size,
                    micros_per_cycle: median,
                    min,
                    max,
                });
                if let (Some(schema), Some(url)) = (schema, pg) {
                    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
                    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))?;
                }
            }
        }
    }
    Ok(out)
}

/// A store holding `size` jobs: all ready, or all but 1,000 finished.
fn build(
    dir: &Path,
    pg: Option<&str>,
    backend: &str,
    shape: &str,
    size: usize,
) -> Result<(Box<dyn Store>, Option<String>)> {
    let finished = if shape == "backlog" {
        size.saturating_sub(READY_IN_BACKLOG)
    } else {
        0
    };
    let finish = format!(
        "UPDATE jobs SET done = 1, outcome = 'completed', result = 'ok', finished_at = 1, \
         fence = 1, owner = 'setup', until = 1 WHERE id < 'job-{finished:08}'"
    );
    if backend == "PostgreSQL" {
        let url = pg.context("no PostgreSQL URL")?;
        let schema = format!("bench_scaling_{}_{shape}_{size}", std::process::id());
        let store = PgOptions::new().schema(&schema).open(url)?;
        let mut client = postgres::Client::connect(url, postgres::NoTls)?;
        client.batch_execute(&format!(
            "SET search_path TO {schema}; \
             INSERT INTO jobs (id) SELECT 'job-' || lpad(g::text, 8, '0') \
             FROM generate_series(0, {}) g; {finish}; ",
            size - 1
        ))?;
        client.batch_execute(&format!("VACUUM ANALYZE {schema}.jobs"))?;
        return Ok((Box::new(store), Some(schema)));
    }
    let path = dir.join(format!("scaling-{shape}-{size}.db"));
    let setup = SqliteOptions::new()
        .synchronous(Synchronous::Off)
        .open(&path)?;
    let mut next = 0;
    while next < size {
        let end = (next + 50_000).min(size);
        let chunk = (next..end)
            .map(|i| NewJob::new(format!("job-{i:08}")))
            .collect::<leasefence::Result<Vec<_>>>()?;
        setup.enqueue_many(&chunk)?;
        next = end;
    }
    drop(setup);
    let conn = rusqlite::Connection::open(&path)?;
    conn.execute_batch(&format!(
        "{finish}; ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);"
    ))?;
    drop(conn);
    let store = SqliteOptions::new()
        .synchronous(Synchronous::Normal)
        .open(&path)?;
    Ok((Box::new(store), None))
}

/// One contending process's report.
#[derive(Debug, Serialize, Deserialize)]
struct ContendReport {
    claims_us: Vec<u64>,
    completed: u64,
    busy: u64,
    last: f64,
}

const CONTENDERS: usize = 8;

fn contention(dir: &Path, per_process: usize) -> Result<Contention> {
    let path = dir.join("contention.db");
    let jobs = CONTENDERS * per_process;
    {
        let store = SqliteOptions::new()
            .synchronous(Synchronous::Normal)
            .open(&path)?;
        let chunk = (0..jobs)
            .map(|i| NewJob::new(format!("job-{i:08}")))
            .collect::<leasefence::Result<Vec<_>>>()?;
        store.enqueue_many(&chunk)?;
    }
    let exe = std::env::current_exe()?;
    let target = path.to_str().context("utf-8 path")?;
    let mut children = Vec::new();
    for _ in 0..CONTENDERS {
        let mut child = Command::new(&exe)
            .args(["contend", "--target", target])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut out = BufReader::new(child.stdout.take().context("stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        anyhow::ensure!(line.trim() == "ready");
        children.push((child, out));
    }
    let start = unix_now();
    for (child, _) in &mut children {
        writeln!(child.stdin.as_mut().context("stdin")?, "go")?;
    }
    let mut all: Vec<u64> = Vec::new();
    let (mut completed, mut busy, mut last) = (0, 0, 0.0f64);
    for (mut child, mut out) in children {
        let mut line = String::new();
        out.read_line(&mut line)?;
        anyhow::ensure!(child.wait()?.success(), "a contender failed");
        let report: ContendReport = serde_json::from_str(line.trim())?;
        all.extend(report.claims_us);
        completed += report.completed;
        busy += report.busy;
        last = last.max(report.last);
    }
    all.sort_unstable();
    let pct = |p: f64| all[((all.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    let contention = Contention {
        processes: CONTENDERS,
        jobs,
        completed,
        busy_errors: busy,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        max_ms: pct(1.0),
        jobs_per_sec: jobs as f64 / (last - start),
    };
    eprintln!("contention: {contention:?}");
    Ok(contention)
}

/// One contending process: default options but NORMAL, claim_next → complete until empty,
/// timing every claim. A busy error is counted (it would have reached a caller) and retried.
pub(crate) fn contend_child(path: &str) -> Result<()> {
    let store = SqliteOptions::new()
        .synchronous(Synchronous::Normal)
        .open(path)?;
    let name = format!("contender-{}", std::process::id());
    let owner = Owner::new(&name)?;
    let ttl = Ttl::new(60.0)?;
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    let mut report = ContendReport {
        claims_us: Vec::new(),
        completed: 0,
        busy: 0,
        last: 0.0,
    };
    loop {
        let asked = Instant::now();
        let claimed = store.claim_next(owner, Now::new(unix_now())?, ttl);
        report.claims_us.push(asked.elapsed().as_micros() as u64);
        let lease = match claimed {
            Ok(Some(lease)) => lease,
            Ok(None) => break,
            Err(Error::Busy) => {
                report.busy += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        loop {
            match store.complete_lease(&lease, Now::new(unix_now())?, "ok") {
                Ok(true) => break,
                Ok(false) => anyhow::bail!("a completion was refused"),
                Err(Error::Busy) => report.busy += 1,
                Err(e) => return Err(e.into()),
            }
        }
        report.completed += 1;
        report.last = unix_now();
    }
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
