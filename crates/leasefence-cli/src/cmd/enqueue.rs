//! `leasefence enqueue ID`: add a job with the default state.

use anyhow::Context as _;
use serde_json::json;

use crate::Ctx;
use crate::output::Outcome;

/// Arguments of `enqueue`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id (any non-empty text).
    #[arg(value_name = "ID")]
    id: String,
}

/// Inserts an unknown id (exit 0); a known id is refused and its row left untouched (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let id = &args.id;
    let inserted = leasefence::enqueue(ctx.db(), id).with_context(|| format!("enqueue {id}"))?;
    let record = json!({ "op": "enqueue", "job_id": id });
    Ok(if inserted {
        ctx.out.done(format!("enqueued {id}"), record)
    } else {
        ctx.out.refused(
            format!("{id} is already known; its state is left untouched"),
            record,
        )
    })
}
