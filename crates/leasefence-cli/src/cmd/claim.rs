//! `leasefence claim ID --owner O --ttl T [--now N]`: take the lease and print the new fence.

use anyhow::Context as _;
use serde_json::json;

use leasefence::{Fence, JobId, Now, Owner, Store as _, Target, Ttl};

use crate::Ctx;
use crate::cmd::{now_on, now_or_clock};
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
    let Args {
        id,
        owner,
        ttl,
        now,
    } = &args;
    let (now, fence, until) = match ctx.target().with_context(|| format!("claim {id}"))? {
        Target::Sqlite(path) => {
            let now = now_or_clock(*now);
            let fence = leasefence::claim(&path, id, owner, now, *ttl)
                .with_context(|| format!("claim {id}"))?;
            // The library stores exactly `now + ttl` (checked finite before the claim).
            (now, fence, now + ttl)
        }
        Target::Postgres(_) => {
            claim_pg(ctx, id, owner, *ttl, *now).with_context(|| format!("claim {id}"))?
        }
    };
    let mut record = json!({ "op": "claim", "job_id": id, "owner": owner, "now": now });
    Ok(match fence {
        Some(fence) => {
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

/// The claim through the `Store` trait, arguments checked before connecting as the free
/// function does. Returns the clock reading, the fence and the stored lease end.
fn claim_pg(
    ctx: &Ctx,
    id: &str,
    owner: &str,
    ttl: f64,
    now: Option<f64>,
) -> leasefence::Result<(f64, Option<Fence>, f64)> {
    let (job, who) = (JobId::new(id)?, Owner::new(owner)?);
    let given = now.map(Now::new).transpose()?;
    let ttl = Ttl::new(ttl)?;
    if let Some(given) = given {
        ttl.until(given)?;
    }
    let store = ctx.open(now.is_some())?;
    let now = now_on(&store, now)?;
    let lease = store.claim(job, who, Now::new(now)?, ttl)?;
    let fence = lease.as_ref().map(|lease| lease.fence);
    let until = match lease {
        Some(lease) => lease.until,
        None => ttl.until(Now::new(now)?)?,
    };
    Ok((now, fence, until))
}
