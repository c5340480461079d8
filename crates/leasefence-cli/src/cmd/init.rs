//! `leasefence init`: create the `jobs` table idempotently.

use anyhow::Context as _;
use leasefence::Target;
use serde_json::json;

use crate::Ctx;
use crate::output::Outcome;

/// `init` takes no arguments besides the global `--db`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Creates the file and the `jobs` table if absent (on PostgreSQL: the schema and its tables).
/// Running it again never resets a row.
pub fn run(ctx: &Ctx, _args: Args) -> anyhow::Result<Outcome> {
    let target = ctx.target().context("init")?;
    if let Target::Sqlite(db) = &target {
        leasefence::init_db(db).with_context(|| format!("init {}", db.display()))?;
        return Ok(ctx.out.done(
            format!(
                "initialised {}: jobs table ready, existing rows untouched",
                db.display()
            ),
            json!({ "op": "init", "db": db.display().to_string() }),
        ));
    }
    let schema = ctx.pg_schema();
    ctx.open(false)
        .with_context(|| format!("init {target} (schema {schema})"))?;
    Ok(ctx.out.done(
        format!("initialised {target}, schema {schema}: jobs table ready, existing rows untouched"),
        json!({ "op": "init", "db": target.to_string(), "schema": schema }),
    ))
}
