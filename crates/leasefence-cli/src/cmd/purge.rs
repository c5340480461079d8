//! `leasefence purge (--finished-before T | --older-than SECONDS [--now T])`: delete old
//! finished jobs, keeping their last fence as a floor.

use anyhow::Context as _;
use leasefence::{Now, Store as _};
use serde_json::json;

use crate::cmd::{now_on, shared};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `purge`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Fence floor: the last fence of every purged id is kept in a separate \
                        table, so enqueueing the same id again continues from it — a fence \
                        number is never issued twice for the same id, even after a purge. \
                        A job enqueued with --unique-for is kept until its window has passed: \
                        until then an enqueue with the same window must still find it."
)]
pub struct Args {
    /// The cutoff.
    #[command(flatten)]
    cutoff: Cutoff,
    /// The clock reading `--older-than` counts back from, in seconds [default: the system
    /// clock, seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(
        long,
        value_name = "T",
        allow_negative_numbers = true,
        conflicts_with = "finished_before"
    )]
    now: Option<f64>,
}

/// Which finished jobs go: exactly one of an absolute or a relative cutoff.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct Cutoff {
    /// Delete jobs that finished (completed, dead or cancelled) before this clock reading.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    finished_before: Option<f64>,
    /// Delete jobs that finished more than this many seconds before `--now`.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    older_than: Option<f64>,
}

/// Deletes the finished jobs before the cutoff and prints how many (exit 0, also for none).
/// Unfinished jobs — ready, scheduled, leased, expired, retrying — are never purged.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    // Opened once `--now` is known to be good, or at once when the store's clock is needed.
    let mut store = None;
    let given = args.cutoff.finished_before.is_some() || args.now.is_some();
    let age = args.cutoff.older_than.unwrap_or(0.0);
    let before = match (args.cutoff.finished_before, args.cutoff.older_than) {
        (Some(t), _) if !t.is_finite() => {
            return Err(shared::invalid(
                "--finished-before",
                format!("must be a finite number, got {t}"),
            ));
        }
        (Some(t), _) => t,
        (None, Some(age)) if !(age.is_finite() && age >= 0.0) => {
            return Err(shared::invalid(
                "--older-than",
                format!(
                    "must be a finite number of seconds, 0 or more, got {}",
                    leasefence::Seconds(age)
                ),
            ));
        }
        (None, Some(age)) => {
            if let Some(given) = args.now {
                Now::new(given).context("purge")?;
            }
            // --older-than counts back on the clock the jobs' finish times were taken on.
            let opened = store.insert(shared::open(ctx).context("purge")?);
            let now = now_on(opened, args.now).context("purge")?;
            let before = now - age;
            if !before.is_finite() {
                return Err(shared::invalid(
                    "--older-than",
                    format!(
                        "--now minus --older-than overflows ({} - {})",
                        leasefence::Seconds(now),
                        leasefence::Seconds(age)
                    ),
                ));
            }
            before
        }
        (None, None) => unreachable!("clap requires --finished-before or --older-than"),
    };
    let purged = Now::new(before)
        .and_then(|before| match store {
            Some(store) => store.purge(before),
            None => shared::open(ctx)?.purge(before),
        })
        .context("purge")?;
    let jobs = if purged == 1 { "job" } else { "jobs" };
    Ok(ctx.out.done(
        format!(
            "purged {purged} finished {jobs} (finished before {}); their last fences stay \
             reserved, so a re-enqueued id never reuses one",
            // In the caller's seconds when it gave the cutoff or `--now`; else a date.
            crate::cmd::time::reading(before, before + age, given)
        ),
        json!({ "op": "purge", "finished_before": before, "purged": purged }),
    ))
}
