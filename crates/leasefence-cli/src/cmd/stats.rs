//! `leasefence stats [--now T]`: how many jobs there are in each status.

use anyhow::Context as _;
use leasefence::{Status, Store as _};
use serde_json::json;

use crate::cmd::read_at_now;
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `stats`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The clock reading the statuses are computed at, in seconds [default: the system clock,
    /// seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Prints the count of every status and the total (exit 0).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let (now, stats) =
        read_at_now(ctx, args.now, |store, now| store.stats(now)).context("stats")?;
    let mut record = json!({ "op": "stats", "now": now });
    let mut counts: Vec<(&str, u64)> = Vec::new();
    for status in Status::ALL {
        record[status.as_str()] = json!(stats.get(status));
        counts.push((status.as_str(), stats.get(status)));
    }
    record["total"] = json!(stats.total());
    counts.push(("total", stats.total()));

    let name_width = counts.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let count_width = counts
        .iter()
        .map(|(_, c)| c.to_string().len())
        .max()
        .unwrap_or(0);
    let human = counts
        .iter()
        .map(|(name, count)| format!("{name:<name_width$}  {count:>count_width$}"))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(ctx.out.done(human, record))
}
