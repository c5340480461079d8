//! `leasefence demo`: the stalled-worker story step by step, then a multi-threaded stress run
//! with stalling workers, judged by reading every job back through a fresh connection.
//!
//! Exit status 0 when every expectation of the story and every invariant of the stress run
//! held, 1 when one broke, 2 on bad arguments or a database error.

mod story;
mod stress;

use std::path::PathBuf;

use anyhow::{Context as _, ensure};
use serde_json::json;

use crate::Ctx;
use crate::output::Outcome;

/// Arguments of `demo`. The database is a fresh temporary file unless `--db` (or
/// `LEASEFENCE_DB`) is given; then this run's job ids get a unique prefix so that existing jobs
/// are not disturbed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of jobs in the stress run.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// Number of worker threads, each with its own connection.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    workers: u32,
    /// Lease duration of the stress run in (real) seconds.
    ///
    /// The default leaves normal jobs well inside their lease while 8 workers queue for
    /// SQLite's write lock with durable (fsynced) commits.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    ttl: f64,
    /// Fraction of first claims after which the worker stalls past its lease, then tries to
    /// renew and complete with its old fence (both must be refused).
    #[arg(long, default_value_t = 0.02, allow_negative_numbers = true)]
    stall_rate: f64,
}

/// Runs the story, then the stress run, and prints the verdict.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let out = ctx.out;
    let ttl = leasefence::Ttl::new(args.ttl).context("--ttl")?;
    ensure!(
        (0.0..=1.0).contains(&args.stall_rate),
        "--stall-rate must be between 0 and 1, got {}",
        args.stall_rate
    );

    // Keep the temporary directory alive until the end of the run; dropping it removes the file.
    let (db, _tmp, prefix): (PathBuf, _, String) = match ctx.db_given() {
        Some(db) => (db.to_path_buf(), None, format!("{}/", run_id())),
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("leasefence-demo-")
                .tempdir()
                .context("creating a temporary directory for the demo database")?;
            (tmp.path().join("demo.db"), Some(tmp), String::new())
        }
    };
    leasefence::init_db(&db).with_context(|| format!("init {}", db.display()))?;
    let where_ = if prefix.is_empty() {
        "a fresh temporary file, removed when the demo ends".to_owned()
    } else {
        format!("given; this run's job ids start with {prefix}")
    };
    out.line(
        format!("database: {} ({where_})", db.display()),
        json!({ "op": "demo", "phase": "setup", "db": db.display().to_string(),
                "temporary": prefix.is_empty(), "job_prefix": prefix }),
    );

    let story_broken = story::run(&db, &format!("{prefix}seed-job"), out)?;

    let config = stress::Config {
        jobs: args.jobs as usize,
        workers: args.workers as usize,
        ttl,
        stall_rate: args.stall_rate,
    };
    let report = stress::run(&db, &prefix, &config)?;
    report.print(&config, out);

    let mut broken: Vec<String> = report
        .broken(&config)
        .into_iter()
        .map(str::to_owned)
        .collect();
    if story_broken > 0 {
        broken.insert(0, format!("{story_broken} step(s) of the story"));
    }
    let ok = broken.is_empty();
    let verdict = if ok {
        "OK: every job done exactly once, every stale write refused, no result overwritten"
            .to_owned()
    } else {
        format!("BROKEN: {}", broken.join("; "))
    };
    out.line(
        format!("verdict: {verdict}"),
        json!({ "op": "demo", "phase": "verdict", "ok": ok, "broken": broken }),
    );
    Ok(if ok { Outcome::Done } else { Outcome::Refused })
}

/// A run id unique enough to keep two demo runs on one database apart.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("demo-{nanos:x}-{:x}", std::process::id())
}
