//! `leasefence init`: create the `jobs` table idempotently.

use anyhow::Context as _;
use serde_json::json;

use crate::Ctx;
use crate::output::Outcome;

/// `init` takes no arguments besides the global `--db`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Creates the file and the `jobs` table if absent. Running it again never resets a row.
pub fn run(ctx: &Ctx, _args: Args) -> anyhow::Result<Outcome> {
    let db = ctx.db();
    leasefence::init_db(db).with_context(|| format!("init {}", db.display()))?;
    Ok(ctx.out.done(
        format!(
            "initialised {}: jobs table ready, existing rows untouched",
            db.display()
        ),
        json!({ "op": "init", "db": db.display().to_string() }),
    ))
}
