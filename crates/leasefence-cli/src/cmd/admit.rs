//! `leasefence admit RESOURCE --fence F`: the fence gate for a resource outside the store.

use anyhow::Context as _;
use leasefence::Store as _;
use serde_json::json;

use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `admit`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "A system outside the store (a file, a bucket, another database) is fenced \
                  only if it checks the token itself: call `admit` with the lease's fence \
                  before each write to it, and write only when it is admitted."
)]
pub struct Args {
    /// The name of the external resource (any non-empty text).
    #[arg(value_name = "RESOURCE")]
    resource: String,
    /// The fence of the lease under which the caller writes to the resource.
    #[arg(long, allow_negative_numbers = true)]
    fence: i64,
}

/// Admits the fence when it is at least the highest already admitted for the resource, and
/// records it (exit 0); a lower fence — an older generation — is refused and nothing changes
/// (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args { resource, fence } = &args;
    let admitted = ctx
        .open(false)
        .and_then(|store| store.admit(leasefence::Resource::new(resource)?, *fence))
        .with_context(|| format!("admit {resource}"))?;
    let record = json!({ "op": "admit", "resource": resource, "fence": fence });
    Ok(if admitted {
        ctx.out.done_line(
            format!("admitted fence {fence} for {resource} (no higher fence was admitted before)"),
            record,
        )
    } else {
        ctx.out.refused(
            format!(
                "fence {fence} is lower than a fence already admitted for {resource} \
                 (an older generation); nothing changes"
            ),
            record,
        )
    })
}
