//! `leasefence list [--status S] [--limit N] [--after ID] [--now T]`: the jobs with their
//! status, oldest first, as a table or one JSON object per job, a page at a time.

use anyhow::Context as _;
use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use leasefence::{JobId, JobInfo, Status, Store as _};
use serde_json::json;

use crate::cmd::{at_now, queue};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// How many characters of an error or result the table shows.
const EXCERPT: usize = 40;

/// Arguments of `list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only jobs with this status at `--now`.
    #[arg(long, value_name = "S", value_parser = status_parser())]
    status: Option<Status>,
    /// At most this many jobs (at least 1).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    limit: u32,
    /// Only jobs enqueued after this one: the next page (the last id of the previous page,
    /// printed below a page that has more).
    #[arg(long, value_name = "ID")]
    after: Option<String>,
    /// The clock reading the statuses are computed at, in seconds [default: the system clock,
    /// seconds since the Unix epoch; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// `--status`: one of the library's status names, listed in `--help` and in the error.
fn status_parser() -> impl clap::builder::TypedValueParser<Value = Status> {
    PossibleValuesParser::new(Status::ALL.map(Status::as_str))
        .map(|name| Status::parse(&name).expect("a possible value is a status name"))
}

/// Prints up to `--limit` jobs (exit 0, also when there are none).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let limit = args.limit as usize;
    // One more than asked, to tell whether the table is cut off.
    let (now, mut jobs) = (|| {
        let after = args.after.as_deref().map(JobId::new).transpose()?;
        at_now(ctx, args.now, |store, now| {
            store.list(now, args.status, after, limit + 1)
        })
    })()
    .context("list")?;
    let more = jobs.len() > limit;
    jobs.truncate(limit);

    for job in &jobs {
        ctx.out.json(record(job, now));
    }
    if jobs.is_empty() {
        let which = args.status.map_or(String::new(), |s| format!("{s} "));
        ctx.out.text(format!("no {which}jobs"));
        return Ok(Outcome::Done);
    }
    ctx.out.text(table(&jobs));
    if more && let Some(last) = jobs.last() {
        ctx.out.text(format!(
            "… more jobs: the next page is `leasefence list --after {}`",
            last.id()
        ));
    }
    Ok(Outcome::Done)
}

/// The JSON record of one job.
fn record(job: &JobInfo, now: f64) -> serde_json::Value {
    let s = &job.state;
    let mut record = json!({
        "op": "list",
        "now": now,
        "id": s.id,
        "status": job.status.as_str(),
        "owner": s.owner,
        "fence": s.fence,
        "until": s.until,
        "done": s.done,
        "priority": job.priority,
        "not_before": job.not_before,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "error": job.error,
        "result": s.result,
        "finished_at": job.finished_at,
        "ok": true,
    });
    queue::payload_fields(&mut record, job.payload.as_deref());
    record
}

/// The readable table: a header and one aligned row per job.
fn table(jobs: &[JobInfo]) -> String {
    const HEADER: [&str; 9] = [
        "ID",
        "STATUS",
        "OWNER",
        "FENCE",
        "UNTIL",
        "PRIORITY",
        "NOT_BEFORE",
        "ATTEMPTS",
        "ERROR/RESULT",
    ];
    let rows: Vec<[String; 9]> = jobs.iter().map(row).collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 9]| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell); // the last column is not padded
            } else {
                out.push_str(cell);
                let pad = width - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.trim_end().to_owned()
    };
    let mut lines = vec![line(&HEADER.map(str::to_owned))];
    lines.extend(rows.iter().map(line));
    lines.join("\n")
}

/// The cells of one job.
fn row(job: &JobInfo) -> [String; 9] {
    let s = &job.state;
    let dash = || "-".to_owned();
    let attempts = match job.max_attempts {
        0 => job.attempts.to_string(),
        max => format!("{}/{max}", job.attempts),
    };
    let detail = match (&s.result, &job.error) {
        (Some(result), _) if s.done => format!("result: {}", queue::excerpt(result, EXCERPT)),
        (_, Some(error)) => format!("error: {}", queue::excerpt(error, EXCERPT)),
        _ => String::new(),
    };
    [
        queue::excerpt(&s.id, 60),
        job.status.to_string(),
        s.owner
            .as_deref()
            .map_or_else(dash, |o| queue::excerpt(o, 30)),
        s.fence.to_string(),
        if s.until == 0.0 {
            dash()
        } else {
            queue::time(s.until)
        },
        job.priority.to_string(),
        if job.not_before == 0.0 {
            dash()
        } else {
            queue::time(job.not_before)
        },
        attempts,
        detail,
    ]
}
