//! `leasefence cancel ID [--now T]`: stop an unfinished job from ever running (again).

use anyhow::Context as _;
use leasefence::{JobId, Store as _};
use serde_json::json;

use crate::cmd::at_now;
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `cancel`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
    /// The clock reading recorded as the finish time, in seconds [default: the system clock,
    /// seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Cancels an unfinished job (exit 0): it is never handed out again and its current holder's
/// renew, complete and fail are refused; the fence is kept. An unknown or already finished
/// job is refused and left as it is (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let id = &args.id;
    let context = || crate::cmd::shared::about("cancel", id);
    let job = JobId::new(id).with_context(context)?;
    crate::cmd::shared::not_the_scheduler_job("cancel", id).with_context(context)?;
    let (now, (cancelled, row)) = at_now(ctx, args.now, |store, now| {
        let cancelled = store.cancel(job, now)?;
        // Only to word a refusal: the job may have changed since, but not back to unfinished.
        let row = if cancelled { None } else { store.state(job)? };
        Ok((cancelled, row))
    })
    .with_context(context)?;
    let record = json!({ "op": "cancel", "job_id": id, "now": now });
    if cancelled {
        return Ok(ctx.out.done_line(
            format!(
                "cancelled {id}: it is never handed out again, and its holder's renew, \
                 complete and fail are refused"
            ),
            record,
        ));
    }
    let reason = match row {
        None => format!("{id} is unknown"),
        Some(_) => {
            format!("{id} is already finished (completed, dead or cancelled); it is left as it is")
        }
    };
    Ok(ctx.out.refused(reason, record))
}
