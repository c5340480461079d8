//! `leasefence retry ID… [--now T]` / `leasefence retry --dead [--queue Q…] [--now T]`: make
//! dead or cancelled jobs ready again with a fresh attempts budget (an operator verb, not
//! fenced).

use anyhow::Context as _;
use leasefence::{JobId, Status, Store as _};
use serde_json::json;

use crate::cmd::at_now;
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `retry`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The jobs to retry: dead or cancelled ones (or `--dead`).
    #[arg(
        value_name = "ID",
        required_unless_present = "dead",
        conflicts_with = "dead"
    )]
    ids: Vec<String>,
    /// Retry every dead job (cancelled ones only by id).
    #[arg(long)]
    dead: bool,
    /// With `--dead`: only the dead jobs of this queue (repeat for several) [default: every
    /// queue].
    #[arg(
        long = "queue",
        value_name = "Q",
        requires = "dead",
        value_parser = crate::cmd::args::queue_name
    )]
    queues: Vec<String>,
    /// The clock reading the retried jobs are due at, at the latest, in seconds [default: the
    /// system clock, seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Retries the jobs in one transaction and prints one line per id: exit 0 when every one was
/// retried; a completed, waiting, running or unknown job is refused and left as it is (exit
/// 1). The fence is kept, so the next claim continues above every fence handed out.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    // clap's `requires = "dead"` is met by the flag's default (`false`): checked here.
    if !args.dead && !args.queues.is_empty() {
        return Err(crate::cmd::shared::invalid(
            "--queue",
            "needs --dead: jobs given by id are retried whatever their queue",
        ));
    }
    if args.dead {
        let queues = crate::cmd::args::queues(&args.queues).context("retry --dead")?;
        let (now, (n, left)) = at_now(ctx, args.now, |store, now| {
            let n = store.retry_dead_in(&queues, now)?;
            // The dead jobs it left: another unfinished job of their queue holds their key.
            let left = match queues.names() {
                None => store.stats(now)?.dead,
                Some(_) => store
                    .queues(now)?
                    .iter()
                    .filter(|q| queues.contains(&q.name))
                    .map(|q| q.stats.dead)
                    .sum(),
            };
            Ok((n, left))
        })
        .context("retry --dead")?;
        let of = match args.queues.as_slice() {
            [] => String::new(),
            [one] => format!(" of the queue {one}"),
            many => format!(" of the queues {}", many.join(", ")),
        };
        let mut human = format!(
            "retried {n} dead job{}{of}: ready again with a fresh attempts budget",
            plural(n)
        );
        if left > 0 {
            let (it, its) = if left == 1 {
                ("it is", "its")
            } else {
                ("they are", "their")
            };
            human.push_str(&format!(
                "; {left} dead job{} left as {it}: another unfinished job of {its} queue holds \
                 {its} unique key",
                plural(left)
            ));
        }
        return Ok(ctx.out.done_line(
            human,
            if args.queues.is_empty() {
                json!({ "op": "retry", "dead": true, "retried": n, "left": left, "now": now })
            } else {
                json!({
                    "op": "retry", "dead": true, "queues": args.queues, "retried": n,
                    "left": left, "now": now
                })
            },
        ));
    }
    let ids = args
        .ids
        .iter()
        .map(|id| {
            crate::cmd::shared::not_the_scheduler_job("retry", id)
                .and_then(|()| Ok(JobId::new(id)?))
                .with_context(|| crate::cmd::shared::about("retry", id))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (now, (retried, rows)) = at_now(ctx, args.now, |store, now| {
        let retried = store.retry(&ids, now)?;
        // Only to word the refusals.
        let mut rows = Vec::with_capacity(ids.len());
        for (id, ok) in ids.iter().zip(&retried) {
            rows.push(if *ok { None } else { store.inspect(*id, now)? });
        }
        Ok((retried, rows))
    })
    .context("retry")?;
    let mut outcome = Outcome::Done;
    for ((id, ok), row) in args.ids.iter().zip(retried).zip(rows) {
        let record = json!({ "op": "retry", "job_id": id, "now": now });
        if ok {
            let _ = ctx.out.done_line(
                format!("retried {id}: ready again with a fresh attempts budget"),
                record,
            );
            continue;
        }
        let reason = match row {
            None => format!("{id} is unknown"),
            // Retryable, but another unfinished job of its queue holds its unique key.
            Some(job)
                if matches!(job.status, Status::Dead | Status::Cancelled)
                    && job.unique_key.is_some() =>
            {
                format!(
                    "{id} is {}, but another unfinished job of the queue {} holds its unique \
                     key {:?}; it is left as it is",
                    job.status,
                    job.queue,
                    job.unique_key.as_deref().unwrap_or_default()
                )
            }
            Some(job) => format!(
                "{id} is {}, not dead or cancelled; it is left as it is",
                job.status
            ),
        };
        outcome = ctx.out.refused(reason, record);
    }
    Ok(outcome)
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}
