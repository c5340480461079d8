//! `leasefence claim ID --owner O --ttl T [--now N]`: take the lease and print the new fence.

use anyhow::Context as _;
use serde_json::json;

use crate::Ctx;
use crate::cmd::now_or_clock;
use crate::output::Outcome;

/// Arguments of `claim`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
    /// The worker taking the lease.
    #[arg(long)]
    owner: String,
    /// Lease duration in seconds (finite, greater than 0).
    #[arg(long, allow_negative_numbers = true)]
    ttl: f64,
    /// The clock reading in seconds [default: the system clock, seconds since the Unix epoch].
    #[arg(long, allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Claims a claimable job and prints the new fence (exit 0); an unknown, done or still-leased
/// job is refused (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args {
        id,
        owner,
        ttl,
        now,
    } = &args;
    let now = now_or_clock(*now);
    let fence =
        leasefence::claim(ctx.db(), id, owner, now, *ttl).with_context(|| format!("claim {id}"))?;
    let mut record = json!({ "op": "claim", "job_id": id, "owner": owner, "now": now });
    Ok(match fence {
        Some(fence) => {
            // The library stores exactly `now + ttl` (checked finite before the claim).
            let until = now + ttl;
            record["fence"] = json!(fence);
            record["until"] = json!(until);
            ctx.out.done(
                format!("claimed {id} as {owner}: fence {fence}, lease until {until}"),
                record,
            )
        }
        None => {
            record["fence"] = json!(null);
            ctx.out
                .refused(format!("{id} is unknown, done, or still leased"), record)
        }
    })
}
