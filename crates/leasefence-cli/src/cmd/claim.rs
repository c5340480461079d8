//! `leasefence claim ID --owner O --ttl T [--now N]`: take the lease and print the new fence;
//! `leasefence claim --next --owner O --ttl T`: take the lease on the best ready job and print
//! it (id, fence, until, attempt, payload), for shell and cron pollers.

use anyhow::Context as _;
use serde_json::json;

use leasefence::{BatchSize, Fence, JobId, Now, Owner, Store as _, Ttl};

use crate::cmd::args;

use crate::cmd::{self, at_now, claim_batch, now_on};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `claim`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id (or `--next`).
    #[arg(
        value_name = "ID",
        required_unless_present = "next",
        conflicts_with = "next"
    )]
    id: Option<String>,
    /// Claim the best ready job instead of one by id: highest priority, then earliest
    /// not-before, then oldest, with attempts left. Prints its lease; exit 1 when none is ready.
    #[arg(long)]
    next: bool,
    /// With `--next`: take only a job of this queue (repeat for several) [default: every
    /// queue]. Paused queues hand out nothing.
    #[arg(
        long = "queue",
        value_name = "Q",
        requires = "next",
        value_parser = crate::cmd::args::queue_name
    )]
    queues: Vec<String>,
    /// The worker taking the lease.
    #[arg(long)]
    owner: String,
    /// Lease duration in seconds (greater than 0, at most 1e12).
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
    // clap's `requires = "next"` is met by the flag's default (`false`): checked here.
    if !args.next && !args.queues.is_empty() {
        return Err(cmd::shared::invalid(
            "--queue",
            "needs --next: a claim by id takes that job whatever its queue",
        ));
    }
    let Some(id) = args.id.clone() else {
        return next(ctx, &args);
    };
    let (now, claimed) =
        claim_at(ctx, &id, &args).with_context(|| crate::cmd::shared::about("claim", &id))?;
    let Args { owner, .. } = &args;
    let mut record = json!({ "op": "claim", "job_id": id, "owner": owner, "now": now });
    Ok(match claimed {
        Some((fence, until)) => {
            record["fence"] = json!(fence);
            record["until"] = json!(until);
            ctx.out.done_line(
                format!(
                    "claimed {id} as {owner}: fence {fence}, lease until {}",
                    crate::cmd::time::reading(until, now, args.now.is_some())
                ),
                record,
            )
        }
        None => {
            record["fence"] = json!(null);
            ctx.out.refused(
                format!("{id} is unknown, done, still leased, or out of attempts"),
                record,
            )
        }
    })
}

/// The claim, arguments checked before connecting as the free function does. Returns the
/// clock reading and, when granted, the fence and the stored lease end.
fn claim_at(ctx: &Ctx, id: &str, args: &Args) -> leasefence::Result<(f64, Option<(Fence, f64)>)> {
    let (job, owner) = (JobId::new(id)?, Owner::new(&args.owner)?);
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

/// `claim --next`: the best ready job's lease, printed as `claim-batch` prints one (exit 0), or
/// refused when no job is ready (exit 1).
fn next(ctx: &Ctx, args: &Args) -> anyhow::Result<Outcome> {
    let Args {
        owner, ttl, now, ..
    } = args;
    let (now, lease) = (|| {
        let queues = args::queues(&args.queues)?;
        let who = Owner::new(owner)?;
        let ttl = Ttl::new(*ttl)?;
        if let Some(given) = now.map(Now::new).transpose()? {
            ttl.until(given)?;
        }
        at_now(ctx, *now, |store, now| {
            store.claim_batch_in(&queues, who, now, ttl, BatchSize::ONE)
        })
    })()
    .context("claim --next")?;
    Ok(match lease.first() {
        Some(lease) => {
            let mut record = claim_batch::record(lease, now);
            record["op"] = json!("claim");
            ctx.out
                .done_line(claim_batch::human(lease, now, args.now.is_some()), record)
        }
        None => ctx.out.refused(
            "no job is ready (every job is done, leased, scheduled for later, out of attempts, or in \
             a paused queue)",
            json!({ "op": "claim", "owner": owner, "now": now, "job_id": null, "ok": false }),
        ),
    })
}
