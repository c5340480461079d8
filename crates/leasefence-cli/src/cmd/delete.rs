//! `leasefence delete ID…`: remove jobs by id, finished or not (an operator verb, not fenced);
//! their last fences stay reserved (the fence floor).

use anyhow::Context as _;
use leasefence::{JobId, Store as _};
use serde_json::json;

use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `delete`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The jobs to remove.
    #[arg(value_name = "ID", required = true)]
    ids: Vec<String>,
}

/// Deletes the jobs in one transaction and prints one line per id: exit 0 when every one
/// existed; an unknown id is refused (exit 1). A holder of a deleted job's lease can store
/// nothing, and the same id enqueued again continues above every fence it had.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let ids = args
        .ids
        .iter()
        .map(|id| JobId::new(id).with_context(|| crate::cmd::shared::about("delete", id)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let deleted = ctx
        .open(false)
        .and_then(|store| store.delete(&ids))
        .context("delete")?;
    let mut outcome = Outcome::Done;
    for (id, ok) in args.ids.iter().zip(deleted) {
        let record = json!({ "op": "delete", "job_id": id });
        if ok {
            let _ = ctx.out.done_line(
                format!("deleted {id}: its fences stay reserved if the id is enqueued again"),
                record,
            );
        } else {
            outcome = ctx.out.refused(format!("{id} is unknown"), record);
        }
    }
    Ok(outcome)
}
