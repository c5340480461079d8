//! `leasefence fail ID --owner O --fence F --error TEXT [--retry-at T] [--now T]`: record a
//! failed attempt under the fence; the job is retried later, or dead after its last attempt.

use anyhow::Context as _;
use leasefence::{Failed, JobId, Lease, Now, Owner, Store as _};
use serde_json::json;

use crate::cmd::{at_now, shared};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `fail`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
    /// The worker holding the lease.
    #[arg(long)]
    owner: String,
    /// The fence returned by the claim.
    #[arg(long, allow_negative_numbers = true)]
    fence: i64,
    /// The error to record with the attempt.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    error: String,
    /// When the job may be claimed again, a clock reading in seconds [default: exponential
    /// backoff from `now`: 1 s after the first attempt, doubling, at most one hour, ±20 %
    /// jitter].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    retry_at: Option<f64>,
    /// The clock reading in seconds [default: the system clock, seconds since the Unix epoch;
    /// on PostgreSQL the database server's clock].
    #[arg(long, allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Records the failure while the lease is current: the lease is given up (fence kept) and the
/// job is retried at `--retry-at`, or is dead when that was its last attempt (exit 0). A stale
/// owner or fence, an expired lease or a done job is refused and nothing changes (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args {
        id,
        owner,
        fence,
        error,
        retry_at,
        now,
    } = &args;
    let context = || crate::cmd::shared::about("fail", id);
    shared::not_the_scheduler_job("fail", id).with_context(context)?;
    let retry_at = match retry_at {
        Some(t) if !t.is_finite() => {
            return Err(shared::invalid(
                "--retry-at",
                format!("must be a finite number, got {t}"),
            ))
            .with_context(context);
        }
        Some(t) => Some(Now::new(*t).with_context(context)?),
        None => None,
    };
    let (now, failed) = (|| {
        let (job, who) = (JobId::new(id)?, Owner::new(owner)?);
        let lease = Lease {
            job_id: job.as_str().to_owned(),
            queue: leasefence::DEFAULT_QUEUE.to_owned(),
            kind: None,
            owner: who.as_str().to_owned(),
            fence: *fence,
            // Not read by `fail`: the store judges the lease it holds.
            until: 0.0,
            payload: None,
            priority: 0,
            max_attempts: 0,
            last_error: None,
            // Only the default backoff reads it (without --retry-at): the fence bounds the
            // attempt number from above, so the delay is never shorter than the run's own.
            attempt: u32::try_from(*fence).unwrap_or(u32::MAX),
        };
        at_now(ctx, *now, |store, now| {
            store.fail(&lease, now, error, retry_at)
        })
    })()
    .with_context(context)?;
    let mut record = json!({
        "op": "fail", "job_id": id, "owner": owner, "fence": fence, "now": now,
    });
    Ok(match failed {
        Some(Failed::Retrying { at }) => {
            record["outcome"] = json!("retrying");
            record["retry_at"] = json!(at);
            ctx.out.done_line(
                format!(
                    "failed {id} as {owner} (fence {fence}): retrying, claimable again at {at}"
                ),
                record,
            )
        }
        Some(Failed::Dead) => {
            record["outcome"] = json!("dead");
            record["retry_at"] = json!(null);
            ctx.out.done_line(
                format!("failed {id} as {owner} (fence {fence}): dead, that was its last attempt"),
                record,
            )
        }
        None => ctx.out.refused(
            format!(
                "{owner} holds no live lease on {id} under fence {fence} \
                 (stale fence, other owner, expired lease, done, or unknown job); \
                 nothing is recorded"
            ),
            record,
        ),
    })
}
