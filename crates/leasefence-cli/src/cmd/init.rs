//! `leasefence init`: create the `jobs` table idempotently.

use anyhow::Context as _;
use serde_json::json;

use crate::ctx::Ctx;
use crate::output::Outcome;

/// `init` takes no arguments besides the global `--db`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Creates the file and the `jobs` table if absent (on PostgreSQL: the schema and its tables).
/// Running it again never resets a row.
pub fn run(ctx: &Ctx, _args: Args) -> anyhow::Result<Outcome> {
    let shown = ctx.shown().context("init")?;
    let at = match &shown.schema {
        Some(schema) => format!("{} (schema {schema})", shown.db),
        None => shown.db.clone(),
    };
    ctx.init().with_context(|| format!("init {at}"))?;
    let mut record = json!({ "op": "init" });
    shown.add_to(&mut record);
    Ok(ctx.out.done(
        format!(
            "initialised {}: jobs table ready, existing rows untouched",
            shown.with_schema()
        ),
        record,
    ))
}
