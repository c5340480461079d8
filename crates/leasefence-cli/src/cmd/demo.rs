//! `leasefence demo`: the stalled-worker story step by step, then a multi-threaded stress run
//! with stalling workers, judged by reading every job back through a fresh connection.
//!
//! Exit status 0 when every expectation of the story and every invariant of the stress run
//! held, 1 when one broke, 2 on bad arguments or a database error, 3 when the database stayed
//! busy.

mod story;
mod stress;

use anyhow::Context as _;
use serde_json::json;

use crate::cmd::shared;
use crate::ctx::{Ctx, Purpose};
use crate::output::Outcome;

/// Arguments of `demo`. The database is a fresh temporary file unless `--db` (or
/// `LEASEFENCE_DB`) is given; then this run's job ids get a unique prefix so that existing jobs
/// are not disturbed. On PostgreSQL (`--db postgres://…`) the demo runs in a fresh schema that
/// it drops at the end, unless `--pg-schema` is given: then it uses that schema, with prefixed
/// job ids, and leaves its jobs there. It never touches another schema.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of jobs in the stress run.
    #[arg(long, default_value_t = 2000, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// Number of worker threads, each with its own connection.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=256))]
    workers: u32,
    /// Lease duration of the stress run in (real) seconds.
    ///
    /// The default leaves normal jobs well inside their lease while 8 workers queue for
    /// SQLite's write lock with durable (fsynced) commits. At most 3600: stalled workers wait
    /// out their leases in real time.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    ttl: f64,
    /// Fraction of first claims after which the worker stalls past its lease, then tries to
    /// renew and complete with its old fence (both must be refused).
    #[arg(long, default_value_t = 0.02, allow_negative_numbers = true)]
    stall_rate: f64,
}

/// The longest `--ttl` the demo takes, in seconds.
const MAX_TTL: f64 = 3600.0;

/// Runs the story, then the stress run, and prints the verdict.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let ttl = leasefence::Ttl::new(args.ttl).context("--ttl")?;
    // The stress run stalls workers past their lease in real time and gives up on a run that
    // made no progress for 30 s + 4 ttl: a longer lease would only make the demo hang.
    if args.ttl > MAX_TTL {
        return Err(shared::invalid(
            "--ttl",
            format!(
                "must be at most {MAX_TTL} seconds (the demo waits out leases in real time), \
                 got {}",
                args.ttl
            ),
        ));
    }
    if !(0.0..=1.0).contains(&args.stall_rate) {
        return Err(shared::invalid(
            "--stall-rate",
            format!("must be between 0 and 1, got {}", args.stall_rate),
        ));
    }

    let scratch = ctx.scratch()?;
    let interrupted = scratch.remove_on_signal();
    let result = run_in(ctx, &args, ttl, scratch);
    // Stopped by a signal: the calls failing as the database goes are not the demo's result;
    // the handler removes the database and exits 130.
    if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    result
}

/// The demo in `scratch`, its database, which is removed when it is dropped here.
fn run_in(
    ctx: &Ctx,
    args: &Args,
    ttl: leasefence::Ttl,
    scratch: crate::ctx::Scratch,
) -> anyhow::Result<Outcome> {
    let out = ctx.out;
    let prefix = scratch.prefix.clone();
    let shown = scratch.shown();
    let store = scratch
        .open(Purpose::Story)
        .with_context(|| format!("opening {}", shown.with_schema()))?;
    let where_ = if scratch.temporary {
        scratch.temporary_kind().to_owned()
    } else {
        format!("given; this run's job ids start with {prefix}")
    };
    let mut record = json!({ "op": "demo", "phase": "setup",
                             "temporary": scratch.temporary, "job_prefix": prefix });
    shown.add_to(&mut record);
    out.line(
        format!("database: {} ({where_})", shown.with_schema()),
        record,
    );
    let story_broken = story::run(&store, &format!("{prefix}seed-job"), out)?;
    drop(store);

    let config = stress::Config {
        jobs: args.jobs as usize,
        workers: args.workers as usize,
        ttl,
        stall_rate: args.stall_rate,
        durability: scratch.durability(),
        setup_note: scratch.setup_note(),
    };
    // Real time, on the caller's clock: the invariants are judged on the readings it gives.
    let open = |purpose| scratch.open(purpose);
    let report = stress::run(&open, &leasefence::SystemClock, &prefix, &config)?;
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
    drop(scratch);
    Ok(if ok { Outcome::Done } else { Outcome::Refused })
}
