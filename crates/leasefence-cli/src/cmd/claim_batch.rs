//! `leasefence claim-batch --owner O --ttl T --n N [--now T]`: take the leases on up to `N`
//! ready jobs in one transaction and print each.

use anyhow::Context as _;
use leasefence::{Lease, Now, Owner, Store as _, Ttl};
use serde_json::json;

use crate::cmd::{at_now, shared};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `claim-batch`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The worker taking the leases.
    #[arg(long)]
    owner: String,
    /// Lease duration in seconds (greater than 0, at most 1e12).
    #[arg(long, allow_negative_numbers = true)]
    ttl: f64,
    /// At most this many jobs (at least 1).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = crate::cmd::args::count(1, u32::MAX)
    )]
    n: u32,
    /// Take only jobs of this queue (repeat for several) [default: every queue]. Paused queues
    /// hand out nothing.
    #[arg(
        long = "queue",
        value_name = "Q",
        value_parser = crate::cmd::args::queue_name
    )]
    queues: Vec<String>,
    /// The clock reading in seconds [default: the system clock, seconds since the Unix epoch;
    /// on PostgreSQL the database server's clock].
    #[arg(long, allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Claims up to `--n` ready jobs, best first (highest priority, then earliest not-before, then
/// oldest), and prints one line per lease (exit 0); when no job is ready, refused (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args {
        owner,
        ttl,
        n,
        now,
        queues,
    } = &args;
    let (now, leases) = (|| {
        let queues = crate::cmd::args::queues(queues)?;
        let who = Owner::new(owner)?;
        let ttl = Ttl::new(*ttl)?;
        let n = leasefence::BatchSize::new(*n as usize)?;
        if let Some(given) = now.map(Now::new).transpose()? {
            ttl.until(given)?;
        }
        at_now(ctx, *now, |store, now| {
            store.claim_batch_in(&queues, who, now, ttl, n)
        })
    })()
    .context("claim-batch")?;
    if leases.is_empty() {
        return Ok(ctx.out.refused(
            "no job is ready (every job is done, leased, scheduled for later, out of attempts, or in \
             a paused queue)",
            json!({ "op": "claim-batch", "job_id": null, "owner": owner, "now": now, "n": n }),
        ));
    }
    for lease in &leases {
        ctx.out
            .line(human(lease, now, args.now.is_some()), record(lease, now));
    }
    Ok(Outcome::Done)
}

/// The readable line of one lease claimed at `now` (`now_given`: passed by the caller, so the
/// lease end is shown in its seconds; else as a date).
pub(crate) fn human(lease: &Lease, now: f64, now_given: bool) -> String {
    let Lease {
        job_id,
        owner,
        fence,
        until,
        ..
    } = lease;
    let payload = match &lease.payload {
        Some(bytes) => format!("payload {} bytes", bytes.len()),
        None => "no payload".to_owned(),
    };
    let attempt = lease.attempt;
    // The queue and kind only when they say something: the default queue, no kind.
    let mut place = String::new();
    if lease.queue != leasefence::DEFAULT_QUEUE {
        place.push_str(&format!("queue {}, ", lease.queue));
    }
    if let Some(kind) = &lease.kind {
        place.push_str(&format!("kind {kind}, "));
    }
    // One line per lease whatever the id holds (one enqueued over HTTP may hold a newline).
    let (job_id, owner) = (shared::one_line(job_id), shared::one_line(owner));
    format!(
        "claimed {job_id} as {owner}: fence {fence}, lease until {}, attempt {attempt}, \
         {place}{payload}",
        crate::cmd::time::reading(*until, now, now_given)
    )
}

/// The JSON record of one lease.
pub(crate) fn record(lease: &Lease, now: f64) -> serde_json::Value {
    let mut record = json!({
        "op": "claim-batch",
        "job_id": lease.job_id,
        "owner": lease.owner,
        "now": now,
        "fence": lease.fence,
        "until": lease.until,
        "queue": lease.queue,
        "kind": lease.kind,
        "priority": lease.priority,
        "attempt": lease.attempt,
        "max_attempts": lease.max_attempts,
        "last_error": lease.last_error,
        "ok": true,
    });
    shared::payload_fields(&mut record, lease.payload.as_deref());
    record
}
