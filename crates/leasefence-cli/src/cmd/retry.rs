//! `leasefence retry ID… [--now T]` / `leasefence retry --dead [--now T]`: make dead or
//! cancelled jobs ready again with a fresh attempts budget (an operator verb, not fenced).

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
    /// The clock reading the retried jobs are due at, at the latest, in seconds [default: the
    /// system clock, seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Retries the jobs in one transaction and prints one line per id: exit 0 when every one was
/// retried; a completed, waiting, running or unknown job is refused and left as it is (exit
/// 1). The fence is kept, so the next claim continues above every fence handed out.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    if args.dead {
        let (now, (n, left)) = at_now(ctx, args.now, |store, now| {
            let n = store.retry_dead(now)?;
            // The dead jobs it left: another unfinished job of their queue holds their key.
            Ok((n, store.stats(now)?.dead))
        })
        .context("retry --dead")?;
        let mut human = format!(
            "retried {n} dead job{}: ready again with a fresh attempts budget",
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
            json!({ "op": "retry", "dead": true, "retried": n, "left": left, "now": now }),
        ));
    }
    let ids = args
        .ids
        .iter()
        .map(|id| {
            crate::cmd::shared::not_the_scheduler_job("retry", id)
                .and_then(|()| Ok(JobId::new(id)?))
                .with_context(|| format!("retry {id}"))
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
