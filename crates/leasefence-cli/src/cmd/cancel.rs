//! `leasefence cancel ID [--now T]`: stop an unfinished job from ever running (again).

use anyhow::Context as _;
use leasefence::{JobId, Now, Store as _};
use serde_json::json;

use crate::Ctx;
use crate::cmd::{now_or_clock, queue};
use crate::output::Outcome;

/// Arguments of `cancel`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
    /// The clock reading recorded as the finish time, in seconds [default: the system clock,
    /// seconds since the Unix epoch].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Cancels an unfinished job (exit 0): it is never handed out again and its current holder's
/// renew, complete and fail are refused; the fence is kept. An unknown or already finished
/// job is refused and left as it is (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let id = &args.id;
    let now = now_or_clock(args.now);
    let context = || format!("cancel {id}");
    let job = JobId::new(id).with_context(context)?;
    let now_arg = Now::new(now).with_context(context)?;
    let store = queue::open(ctx).with_context(context)?;
    let cancelled = store.cancel(job, now_arg).with_context(context)?;
    let record = json!({ "op": "cancel", "job_id": id, "now": now });
    if cancelled {
        return Ok(ctx.out.done(
            format!(
                "cancelled {id}: it is never handed out again, and its holder's renew, \
                 complete and fail are refused"
            ),
            record,
        ));
    }
    // Only to word the refusal: the job may have changed since, but not back to unfinished.
    let reason = match store.state(job).with_context(context)? {
        None => format!("{id} is unknown"),
        Some(_) => {
            format!("{id} is already finished (completed, dead or cancelled); it is left as it is")
        }
    };
    Ok(ctx.out.refused(reason, record))
}
