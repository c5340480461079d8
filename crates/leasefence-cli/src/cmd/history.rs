//! `leasefence history ID [--epoch]`: a job's attempt ledger — every claim with its fence,
//! owner, times and outcome, and the refused writes counted per fence.

use anyhow::Context as _;
use serde_json::{Value, json};

use leasefence::{AttemptOutcome, History, JobId, Store as _};

use crate::cmd::read_at_now;
use crate::cmd::shared::one_line;
use crate::cmd::time::Times;
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `history`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "One line per claim (per fence handed out), oldest first: who claimed it, \
                  when it was claimed and ended, how it ended (completed, failed, timed out, \
                  released, lost, cancelled; `open` while held, or expired and not noticed \
                  yet) and the writes refused under that fence. The times are the store's \
                  own clock (this host's for SQLite, the database server's for PostgreSQL), \
                  shown relative to it now; `--epoch` shows seconds since the Unix epoch, as \
                  `--json` always does. The ledger is kept across `retry` and removed with \
                  its job by `delete` and `purge`."
)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
    /// Times as seconds since the Unix epoch instead of UTC dates.
    #[arg(long)]
    epoch: bool,
}

/// Prints the ledger (exit 0); an unknown id is refused (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let id = &args.id;
    let (now, history) = JobId::new(id)
        .and_then(|job| read_at_now(ctx, None, |store, _| store.history(job)))
        .with_context(|| crate::cmd::shared::about("history", id))?;
    let Some(history) = history else {
        return Ok(ctx.out.refused(
            format!("{id} is unknown"),
            json!({ "op": "history", "job_id": id }),
        ));
    };
    let mut record = record(&history);
    record["op"] = json!("history");
    record["job_id"] = json!(id);
    let times = Times {
        now,
        epoch: args.epoch,
    };
    Ok(ctx.out.done(human(id, &history, times), record))
}

/// The JSON form: the attempts (each with its refused-write count) and the refusals.
fn record(history: &History) -> Value {
    let attempts: Vec<Value> = history
        .attempts
        .iter()
        .map(|a| {
            json!({
                "fence": a.fence,
                "owner": a.owner,
                "claimed_at": a.claimed_at,
                "ended_at": a.ended_at,
                "outcome": a.outcome.map(AttemptOutcome::as_str),
                "error": a.error,
                "refused": history.refused_under(a.fence),
            })
        })
        .collect();
    let refusals: Vec<Value> = history
        .refusals
        .iter()
        .map(|r| {
            json!({
                "fence": r.fence,
                "op": r.op.as_str(),
                "count": r.count,
                "last_at": r.last_at,
            })
        })
        .collect();
    json!({
        "attempts": attempts,
        "refusals": refusals,
        "ledger": counts(history),
    })
}

/// The counts `state` and `history` show: attempts in all, open, per outcome, refused writes.
pub fn counts(history: &History) -> Value {
    let mut counts = serde_json::Map::new();
    counts.insert("attempts".into(), json!(history.attempts.len()));
    counts.insert("open".into(), json!(history.open()));
    for outcome in AttemptOutcome::ALL {
        counts.insert(
            outcome.as_str().replace(' ', "_"),
            json!(history.count(outcome)),
        );
    }
    counts.insert("refused".into(), json!(history.refused()));
    Value::Object(counts)
}

/// `3 attempts (1 completed, 2 lost), 5 writes refused`: the counts in one line.
pub fn summary(history: &History) -> String {
    let n = history.attempts.len();
    let mut parts: Vec<String> = AttemptOutcome::ALL
        .into_iter()
        .map(|o| (history.count(o), o))
        .filter(|(count, _)| *count > 0)
        .map(|(count, o)| format!("{count} {o}"))
        .collect();
    if history.open() > 0 {
        parts.push(format!("{} open", history.open()));
    }
    let attempts = match n {
        0 => "no attempts".to_owned(),
        1 => format!("1 attempt ({})", parts.join(", ")),
        n => format!("{n} attempts ({})", parts.join(", ")),
    };
    match history.refused() {
        0 => format!("{attempts}, no write refused"),
        1 => format!("{attempts}, 1 write refused"),
        r => format!("{attempts}, {r} writes refused"),
    }
}

/// The readable form: the summary, then a table of attempts, then refusals under fences that
/// no attempt of this job holds (forged, or from before the ledger).
fn human(id: &str, history: &History, times: Times) -> String {
    let mut lines = vec![format!("{}: {}", one_line(id), summary(history))];
    if history.attempts.is_empty() && history.refusals.is_empty() {
        return lines.join("\n");
    }
    let refused_under = |fence| {
        let parts: Vec<String> = history
            .refusals
            .iter()
            .filter(|r| r.fence == fence)
            .map(|r| format!("{} {}", r.op, r.count))
            .collect();
        if parts.is_empty() {
            "-".to_owned()
        } else {
            parts.join(", ")
        }
    };
    let mut rows = vec![[
        "FENCE".to_owned(),
        "OWNER".to_owned(),
        "CLAIMED".to_owned(),
        "ENDED".to_owned(),
        "OUTCOME".to_owned(),
        "REFUSED".to_owned(),
        "ERROR".to_owned(),
    ]];
    for a in &history.attempts {
        rows.push([
            a.fence.to_string(),
            one_line(&a.owner),
            a.claimed_at
                .map_or_else(|| "unknown".to_owned(), |t| times.show(t)),
            times.show_opt(a.ended_at),
            a.outcome.map_or("open", AttemptOutcome::as_str).to_owned(),
            refused_under(a.fence),
            a.error.as_deref().map_or_else(|| "-".to_owned(), one_line),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 6 {
                    cell.clone()
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        lines.push(cells.join("  ").trim_end().to_owned());
    }
    let held: Vec<i64> = history.attempts.iter().map(|a| a.fence).collect();
    for r in history.refusals.iter().filter(|r| !held.contains(&r.fence)) {
        lines.push(format!(
            "refused under fence {} (no attempt of this job has it): {} {}",
            r.fence, r.op, r.count
        ));
    }
    lines.join("\n")
}
