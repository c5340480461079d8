//! `leasefence claim ID --owner O --ttl T [--now N]`: take the lease and print the new fence.

use anyhow::Context as _;
use serde_json::json;

use leasefence::{Fence, JobId, Now, Owner, Ttl};

use crate::cmd::{self, now_on};
use crate::ctx::Ctx;
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
    /// The clock reading in seconds [default: the system clock, seconds since the Unix epoch;
    /// on PostgreSQL the database server's clock].
    #[arg(long, allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Claims a claimable job and prints the new fence (exit 0); an unknown, done or still-leased
/// job is refused (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let (now, claimed) = claim_at(ctx, &args).with_context(|| format!("claim {}", args.id))?;
    let Args { id, owner, .. } = &args;
    let mut record = json!({ "op": "claim", "job_id": id, "owner": owner, "now": now });
    Ok(match claimed {
        Some((fence, until)) => {
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

/// The claim, arguments checked before connecting as the free function does. Returns the
/// clock reading and, when granted, the fence and the stored lease end.
fn claim_at(ctx: &Ctx, args: &Args) -> leasefence::Result<(f64, Option<(Fence, f64)>)> {
    let (job, owner) = (JobId::new(&args.id)?, Owner::new(&args.owner)?);
    let given = args.now.map(Now::new).transpose()?;
    let ttl = Ttl::new(args.ttl)?;
    if let Some(given) = given {
        ttl.until(given)?;
    }
    let store = ctx.open(given.is_some())?;
    let now = now_on(&store, args.now)?;
    let Some((fence, until)) = cmd::claim(&store, job, owner, Now::new(now)?, ttl)? else {
        return Ok((now, None));
    };
    // On the database's clock the store chose its own `now`: show the lease end it stored.
    Ok((now, Some((fence, until))))
}
