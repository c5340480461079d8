//! `leasefence renew ID --owner O --fence F --ttl T [--now N]`: extend a live lease.

use anyhow::Context as _;
use serde_json::json;

use leasefence::{JobId, Lease, Now, Owner, Store as _, Ttl};

use crate::cmd::now_on;
use crate::ctx::Ctx;
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
    /// New lease duration in seconds from `now` (greater than 0, at most 1e12).
    #[arg(long, allow_negative_numbers = true)]
    ttl: f64,
    /// The clock reading in seconds [default: the system clock, seconds since the Unix epoch;
    /// on PostgreSQL the database server's clock].
    #[arg(long, allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Extends the lease to `now + ttl` (exit 0); a stale owner or fence, an expired lease or a
/// done job is refused and nothing changes (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args {
        id, owner, fence, ..
    } = &args;
    let (now, until) =
        renew_at(ctx, &args).with_context(|| crate::cmd::shared::about("renew", id))?;
    let mut record = json!({
        "op": "renew", "job_id": id, "owner": owner, "fence": fence, "now": now,
    });
    Ok(if let Some(until) = until {
        record["until"] = json!(until);
        ctx.out.done_line(
            format!(
                "renewed {id} for {owner} (fence {fence}): lease until {}",
                crate::cmd::time::reading(until, now, args.now.is_some())
            ),
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

/// The renew, arguments checked before connecting as the free function does. Returns the clock
/// reading and, when renewed, the stored lease end.
fn renew_at(ctx: &Ctx, args: &Args) -> leasefence::Result<(f64, Option<f64>)> {
    let (job, owner) = (JobId::new(&args.id)?, Owner::new(&args.owner)?);
    let given = args.now.map(Now::new).transpose()?;
    let ttl = Ttl::new(args.ttl)?;
    if let Some(given) = given {
        ttl.until(given)?;
    }
    let store = ctx.open(given.is_some())?;
    let now = now_on(&store, args.now)?;
    // renew_lease sets `until` from the clock the store judged by (the database's, on a store
    // that reads its own), so the lease end is known without reading the row back.
    let mut lease = Lease {
        job_id: job.as_str().to_owned(),
        queue: leasefence::DEFAULT_QUEUE.to_owned(),
        kind: None,
        owner: owner.as_str().to_owned(),
        fence: args.fence,
        until: 0.0,
        payload: None,
        priority: 0,
        max_attempts: 0,
        last_error: None,
        attempt: 0, // not read by renew
    };
    if !store.renew_lease(&mut lease, Now::new(now)?, ttl)? {
        return Ok((now, None));
    }
    Ok((now, Some(lease.until)))
}
