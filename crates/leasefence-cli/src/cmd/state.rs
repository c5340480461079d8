//! `leasefence state ID [--now T] [--epoch]`: one job with every field.

use anyhow::Context as _;
use serde_json::json;

use leasefence::{History, JobId, JobInfo, Store as _};

use crate::cmd::shared::one_line;
use crate::cmd::time::Times;
use crate::cmd::{history, list, read_at_now};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `state`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Times are UTC dates with their distance from the clock reading used, e.g. \
                  `2026-12-01 07:30:12Z (in 25 s)`; `-` when unset. `--epoch` shows seconds \
                  since the Unix epoch instead, as `--json` always does. The payload, error \
                  and result are shown whole, as stored."
)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
    /// The clock reading the status is computed at, in seconds [default: the system clock,
    /// seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
    /// Times as seconds since the Unix epoch instead of UTC dates.
    #[arg(long)]
    epoch: bool,
}

/// Prints every field of the job (exit 0); an unknown id is refused (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let id = &args.id;
    let (now, (job, history)) = JobId::new(id)
        .and_then(|job| {
            read_at_now(ctx, args.now, |store, now| {
                Ok((store.inspect(job, now)?, store.history(job)?))
            })
        })
        .with_context(|| crate::cmd::shared::about("state", id))?;
    let Some(job) = job else {
        return Ok(ctx.out.refused(
            format!("{id} is unknown"),
            json!({ "op": "state", "job_id": id, "now": now }),
        ));
    };
    let mut record = list::record(&job, now);
    record["op"] = json!("state");
    // Deleted between the two reads: the job is shown without a ledger.
    let history = history.unwrap_or_default();
    record["ledger"] = history::counts(&history);
    let times = Times {
        now,
        epoch: args.epoch,
    };
    Ok(ctx.out.done(human(&job, &history, times), record))
}

/// The readable form: the id, then one `name  value` line per field; the long texts last, whole.
fn human(job: &JobInfo, history: &History, times: Times) -> String {
    let s = &job.state;
    let dash = || "-".to_owned();
    let attempts = match job.max_attempts {
        0 => format!("{} (no limit)", job.attempts),
        max => format!("{} of {max}", job.attempts),
    };
    let payload = match job.payload.as_deref() {
        None => dash(),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => format!("{} bytes: {text}", bytes.len()),
            Err(_) => format!(
                "{} bytes, not UTF-8 (`--json` has it as payload_hex)",
                bytes.len()
            ),
        },
    };
    let fields = [
        ("status", job.status.to_string()),
        ("queue", one_line(job.queue.as_str())),
        ("kind", job.kind.as_deref().map_or_else(dash, one_line)),
        (
            "unique key",
            job.unique_key.as_deref().map_or_else(dash, one_line),
        ),
        ("owner", s.owner.as_deref().map_or_else(dash, one_line)),
        ("fence", s.fence.to_string()),
        ("lease until", times.show(s.until)),
        ("attempts", attempts),
        ("ledger", history::summary(history)),
        ("priority", job.priority.to_string()),
        ("not before", times.show(job.not_before)),
        ("enqueued", times.show_opt(job.enqueued_at)),
        ("finished", times.show_opt(job.finished_at)),
        ("outcome", job.outcome.clone().unwrap_or_else(dash)),
        ("done", s.done.to_string()),
        ("payload", payload),
        ("error", job.error.clone().unwrap_or_else(dash)),
        ("result", s.result.clone().unwrap_or_else(dash)),
    ];
    // The short fields on their line (a stored newline written `\n`); the long texts whole.
    let mut lines = vec![one_line(&s.id)];
    lines.extend(
        fields
            .iter()
            .map(|(name, value)| format!("  {name:<12} {value}")),
    );
    lines.join("\n")
}
