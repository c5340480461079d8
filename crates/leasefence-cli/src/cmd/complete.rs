//! `leasefence complete ID --owner O --fence F (--result R | --result-file PATH) [--now N]`:
//! store the result while the lease is current.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::json;

use leasefence::{JobId, Now, Owner, Store as _};

use crate::cmd::now_on;
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `complete`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id.
    #[arg(value_name = "ID")]
    id: String,
    /// The worker holding the lease.
    #[arg(long)]
    owner: String,
    /// The fence returned by the claim.
    #[arg(long, allow_negative_numbers = true)]
    fence: i64,
    /// Where the result comes from.
    #[command(flatten)]
    result: ResultSource,
    /// The clock reading in seconds [default: the system clock, seconds since the Unix epoch;
    /// on PostgreSQL the database server's clock].
    #[arg(long, allow_negative_numbers = true)]
    now: Option<f64>,
}

/// The result to store: given inline or read from a file; exactly one of the two.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct ResultSource {
    /// The result text to store.
    #[arg(long, allow_hyphen_values = true)]
    result: Option<String>,
    /// Read the result from this file (`-` for stdin), stored verbatim; must be UTF-8.
    #[arg(long, value_name = "PATH")]
    result_file: Option<PathBuf>,
}

impl ResultSource {
    /// The result text, read from the file or stdin when asked.
    fn read(self) -> anyhow::Result<String> {
        match (self.result, self.result_file) {
            (Some(text), _) => Ok(text),
            (None, Some(path)) if path.as_os_str() == "-" => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("reading the result from stdin")?;
                Ok(text)
            }
            (None, Some(path)) => std::fs::read_to_string(&path)
                .with_context(|| format!("reading the result from {}", path.display())),
            (None, None) => unreachable!("clap requires --result or --result-file"),
        }
    }
}

/// Stores the result and marks the job done (exit 0); a stale owner or fence, an expired lease
/// or a done job is refused and any earlier result stays (exit 1).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let Args {
        id,
        owner,
        fence,
        result,
        now,
    } = args;
    crate::cmd::shared::not_the_scheduler_job("complete", &id)
        .with_context(|| crate::cmd::shared::about("complete", &id))?;
    let result = result.read()?;
    let (now, completed) = (|| -> leasefence::Result<(f64, bool)> {
        let (job, who) = (JobId::new(&id)?, Owner::new(&owner)?);
        let given = now.map(Now::new).transpose()?;
        let store = ctx.open(given.is_some())?;
        let now = now_on(&store, now)?;
        let completed = store.complete(job, who, fence, Now::new(now)?, &result)?;
        Ok((now, completed))
    })()
    .with_context(|| crate::cmd::shared::about("complete", &id))?;
    let record = json!({
        "op": "complete", "job_id": id, "owner": owner, "fence": fence, "now": now,
    });
    Ok(if completed {
        ctx.out.done_line(
            format!(
                "completed {id} as {owner} (fence {fence}): result stored ({} bytes)",
                result.len()
            ),
            record,
        )
    } else {
        ctx.out.refused(
            format!(
                "{owner} holds no live lease on {id} under fence {fence} \
                 (stale fence, other owner, expired lease, done, or unknown job); \
                 the stored result is unchanged"
            ),
            record,
        )
    })
}
