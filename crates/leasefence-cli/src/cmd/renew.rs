//! `leasefence renew ID --owner O --fence F --ttl T [--now N]`: extend a live lease.

use anyhow::Context as _;
use serde_json::json;

use crate::Ctx;
use crate::cmd::now_or_clock;
use crate::output::Outcome;

/// Arguments of `renew`.
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
    /// New lease duration in seconds from `now` (finite, greater than 0).
    #[arg(long, allow_negative_numbers = true)]
    ttl: f64,
    /// The clock reading in seconds [default: the system clock, seconds since the Unix epoch].
    #[arg(long, allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Extends the lease to `now + ttl` (exit 0); a stale owner or fence, an expired lease or a
/// done job is refused and nothing changes (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args {
        id,
        owner,
        fence,
        ttl,
        now,
    } = &args;
    let now = now_or_clock(*now);
    let renewed = leasefence::renew(ctx.db(), id, owner, *fence, now, *ttl)
        .with_context(|| format!("renew {id}"))?;
    let mut record = json!({
        "op": "renew", "job_id": id, "owner": owner, "fence": fence, "now": now,
    });
    Ok(if renewed {
        let until = now + ttl;
        record["until"] = json!(until);
        ctx.out.done(
            format!("renewed {id} for {owner} (fence {fence}): lease until {until}"),
            record,
        )
    } else {
        ctx.out.refused(
            format!(
                "{owner} holds no live lease on {id} under fence {fence} \
                 (stale fence, other owner, expired lease, done, or unknown job)"
            ),
            record,
        )
    })
}
