//! `leasefence release ID --owner O --fence F`: give a lease back early, keeping the fence.

use anyhow::Context as _;
use serde_json::json;

use leasefence::{JobId, Owner, Store as _};

use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `release`.
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
}

/// Clears owner and lease, keeping the fence (exit 0); a stale owner or fence or a done job is
/// refused (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args { id, owner, fence } = &args;
    let released = (|| {
        let (job, owner) = (JobId::new(id)?, Owner::new(owner)?);
        ctx.open(false)?.release(job, owner, *fence)
    })()
    .with_context(|| crate::cmd::shared::about("release", id))?;
    let record = json!({ "op": "release", "job_id": id, "owner": owner, "fence": fence });
    Ok(if released {
        ctx.out.done_line(
            format!("released {id} (fence {fence} kept; the next claim gets a higher one)"),
            record,
        )
    } else {
        ctx.out.refused(
            format!(
                "{owner} does not hold {id} under fence {fence} \
                 (stale fence, other owner, done, or unknown job)"
            ),
            record,
        )
    })
}
