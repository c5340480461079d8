//! `leasefence queue pause Q`, `queue resume Q`, `queue list [--now T]`: the operator's view of
//! named queues. Pausing stops a queue from handing out jobs (`claim --next`, `claim-batch`,
//! `work`); leases already held in it stay valid. Operator verbs, not fenced.

use anyhow::Context as _;
use leasefence::{Queue, Status, Store as _};
use serde_json::json;

use crate::cmd::{args, read_at_now, shared};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `queue`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
}

/// What `queue` does.
#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// Stop the queue Q from handing out jobs; leases already held in it stay valid (their
    /// renew, complete, fail and release go on). A queue can be paused before it has jobs.
    Pause(Named),
    /// Let the paused queue Q hand out jobs again.
    Resume(Named),
    /// Every queue with jobs or a pause: whether it is paused, and its jobs by status.
    List(ListArgs),
}

/// A queue by name.
#[derive(Debug, clap::Args)]
struct Named {
    /// The queue's name.
    #[arg(value_name = "Q", value_parser = args::queue_name)]
    queue: String,
}

/// Arguments of `queue list`.
#[derive(Debug, clap::Args)]
struct ListArgs {
    /// The clock reading the statuses are computed at, in seconds [default: the system clock,
    /// seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Pause and resume: exit 0 whether or not the queue was already in that state (the output
/// says which); list: exit 0.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    match args.verb {
        Verb::Pause(Named { queue }) => switch(ctx, &queue, true),
        Verb::Resume(Named { queue }) => switch(ctx, &queue, false),
        Verb::List(ListArgs { now }) => list(ctx, now),
    }
}

fn switch(ctx: &Ctx, name: &str, pause: bool) -> anyhow::Result<Outcome> {
    let op = if pause { "queue pause" } else { "queue resume" };
    let queue = Queue::new(name).with_context(|| format!("{op} {name}"))?;
    let changed = shared::open(ctx)
        .and_then(|store| {
            if pause {
                store.pause(&queue)
            } else {
                store.resume(&queue)
            }
        })
        .with_context(|| format!("{op} {name}"))?;
    let human = match (pause, changed) {
        (true, true) => format!(
            "paused the queue {name}: it hands out no job until `leasefence queue resume \
             {name}`; leases already held in it stay valid"
        ),
        (true, false) => format!("the queue {name} was already paused"),
        (false, true) => format!("resumed the queue {name}: its jobs are handed out again"),
        (false, false) => format!("the queue {name} was not paused"),
    };
    Ok(ctx.out.done(
        human,
        json!({ "op": op, "queue": name, "paused": pause, "changed": changed }),
    ))
}

fn list(ctx: &Ctx, now: Option<f64>) -> anyhow::Result<Outcome> {
    let (now, queues) =
        read_at_now(ctx, now, |store, now| store.queues(now)).context("queue list")?;
    if queues.is_empty() {
        ctx.out.text("no queue has jobs or a pause");
        return Ok(Outcome::Done);
    }
    let mut header = vec!["QUEUE".to_owned(), "PAUSED".to_owned()];
    header.extend(Status::ALL.iter().map(|s| s.as_str().to_uppercase()));
    let mut rows = vec![header];
    for info in &queues {
        let mut record = json!({
            "op": "queue list", "ok": true, "now": now, "queue": info.name,
            "paused": info.paused, "total": info.stats.total(),
        });
        let mut row = vec![
            shared::one_line(&info.name),
            if info.paused { "yes" } else { "no" }.to_owned(),
        ];
        for status in Status::ALL {
            record[status.as_str()] = json!(info.stats.get(status));
            row.push(info.stats.get(status).to_string());
        }
        ctx.out.json(record);
        rows.push(row);
    }
    ctx.out.text(shared::table(&rows, |c| c >= 2));
    Ok(Outcome::Done)
}
