//! `leasefence state ID`: print the stored row of a job.

use anyhow::Context as _;
use serde_json::json;

use leasefence::{JobId, Store as _};

use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `state`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
}

/// Prints id, owner, until, fence, result and done as stored (exit 0); an unknown id is
/// refused (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let id = &args.id;
    let row = JobId::new(id)
        .and_then(|job| ctx.open(false)?.state(job))
        .with_context(|| format!("state {id}"))?;
    let Some(row) = row else {
        return Ok(ctx.out.refused(
            format!("{id} is unknown"),
            json!({ "op": "state", "job_id": id }),
        ));
    };
    let human = format!(
        "{}: owner {}, until {}, fence {}, done {}, result {}",
        row.id,
        quoted(row.owner.as_deref()),
        row.until,
        row.fence,
        row.done,
        quoted(row.result.as_deref()),
    );
    Ok(ctx.out.done(
        human,
        json!({
            "op": "state",
            "job_id": id,
            "id": row.id,
            "owner": row.owner,
            "until": row.until,
            "fence": row.fence,
            "result": row.result,
            "done": row.done,
        }),
    ))
}

/// `"text"` with escapes, so that the row stays on one line; `none` for NULL.
fn quoted(value: Option<&str>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| format!("{v:?}"))
}
