//! `leasefence list [--status S] [--limit N] [--after ID] [--now T]`: the jobs with their
//! status, oldest first, as a table or one JSON object per job, a page at a time.
//!
//! With `--json` an empty page prints nothing at all: no lines = no jobs.

use anyhow::Context as _;
use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use leasefence::{JobId, JobInfo, Status, Store as _};
use serde_json::json;

use crate::cmd::time::Times;
use crate::cmd::{read_at_now, shared};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// How many characters of an error or result the table shows.
const EXCERPT: usize = 40;

/// What `list --help` says after the flags.
const AFTER_HELP: &str = "\
Times are UTC dates with their distance from the clock reading used, e.g. \
`2026-12-01 07:30:12Z (in 25 s)`; `-` when unset. `--epoch` shows seconds since the Unix \
epoch instead, as `--json` always does.

The table shortens long errors, results and owners to one line ending in `…`, and then says \
so below it; `leasefence state ID` shows a job whole.

With `--json`: one object per job, and no lines at all when there are no jobs (no lines = no \
jobs); exit status 0 either way.";

/// Arguments of `list`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Only jobs with this status at `--now`.
    #[arg(long, value_name = "S", value_parser = status_parser())]
    status: Option<Status>,
    /// At most this many jobs (at least 1).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100,
        allow_negative_numbers = true,
        value_parser = crate::cmd::args::count(1, u32::MAX)
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
    /// Times as seconds since the Unix epoch instead of UTC dates.
    #[arg(long)]
    epoch: bool,
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
        // A job id, but named as the flag the user gave.
        let after = args
            .after
            .as_deref()
            .map(|id| {
                JobId::new(id).map_err(|e| match e {
                    leasefence::Error::InvalidArgument { reason, .. } => {
                        leasefence::Error::InvalidArgument {
                            argument: "after",
                            reason,
                        }
                    }
                    other => other,
                })
            })
            .transpose()?;
        read_at_now(ctx, args.now, |store, now| {
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
    let times = Times {
        now,
        epoch: args.epoch,
    };
    let (table, cut) = table(&jobs, times);
    ctx.out.text(table);
    if cut {
        ctx.out.text(
            "(… marks text cut short to fit the table; `leasefence state ID` shows a job whole)",
        );
    }
    if more && let Some(last) = jobs.last() {
        ctx.out.text(format!(
            "… more jobs: the next page is `leasefence {}list {}`",
            database_flags(ctx)?,
            next_page_flags(&args, last.id())
        ));
    }
    Ok(Outcome::Done)
}

/// The JSON record of one job, as `list` and `state` print it: every field, times in seconds
/// since the Unix epoch (`0` or `null` when unset).
pub(crate) fn record(job: &JobInfo, now: f64) -> serde_json::Value {
    let s = &job.state;
    let mut record = json!({
        "op": "list",
        "ok": true,
        "now": now,
        "job_id": s.id,
        "status": job.status.as_str(),
        "queue": job.queue,
        "kind": job.kind,
        "unique_key": job.unique_key,
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
        "outcome": job.outcome,
        "enqueued_at": job.enqueued_at,
        "finished_at": job.finished_at,
    });
    shared::payload_fields(&mut record, job.payload.as_deref());
    record
}

/// The readable table: a header and one aligned row per job; and whether any cell was cut.
fn table(jobs: &[JobInfo], times: Times) -> (String, bool) {
    const HEADER: [&str; 10] = [
        "ID",
        "STATUS",
        "QUEUE",
        "OWNER",
        "FENCE",
        "UNTIL",
        "PRIORITY",
        "NOT_BEFORE",
        "ATTEMPTS",
        "ERROR/RESULT",
    ];
    let mut cut = false;
    let rows: Vec<[String; 10]> = jobs
        .iter()
        .map(|job| {
            let (cells, cut_here) = row(job, times);
            cut |= cut_here;
            cells
        })
        .collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 10]| {
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
    (lines.join("\n"), cut)
}

/// The cells of one job, and whether one was cut. The id is never cut: it is what `state`
/// and `--after` take.
fn row(job: &JobInfo, times: Times) -> ([String; 10], bool) {
    let s = &job.state;
    let mut cut = false;
    let mut short = |text: &str, max: usize| {
        let (text, was_cut) = shared::excerpt(text, max);
        cut |= was_cut;
        text
    };
    let attempts = match job.max_attempts {
        0 => job.attempts.to_string(),
        max => format!("{}/{max}", job.attempts),
    };
    let detail = match (&s.result, &job.error) {
        (Some(result), _) if s.done => format!("result: {}", short(result, EXCERPT)),
        (_, Some(error)) => format!("error: {}", short(error, EXCERPT)),
        _ => String::new(),
    };
    let owner = s
        .owner
        .as_deref()
        .map_or_else(|| "-".to_owned(), |o| short(o, 30));
    let cells = [
        shared::one_line(&s.id),
        job.status.to_string(),
        short(&job.queue, 30),
        owner,
        s.fence.to_string(),
        times.show(s.until),
        job.priority.to_string(),
        times.show(job.not_before),
        attempts,
        detail,
    ];
    (cells, cut)
}

/// `text` as one word of a shell command line: as it is when it holds only characters no
/// shell treats specially (and does not start with `=` or `~`, which zsh and others expand),
/// else single-quoted (a `'` inside as `'\''`), so that the hint can be pasted whatever the id
/// holds. An id with control characters, which the terminal would not show, is written in
/// bash's and zsh's `$'…'` form with them as `\xHH`.
pub(crate) fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && !text.starts_with(['=', '~'])
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        text.to_owned()
    } else if text.chars().any(char::is_control) {
        let mut out = String::from("$'");
        for c in text.chars() {
            match c {
                '\\' | '\'' => {
                    out.push('\\');
                    out.push(c);
                }
                c if c.is_control() => {
                    let mut bytes = [0; 4];
                    for b in c.encode_utf8(&mut bytes).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        out
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The flags of the next page: this page's filter, size, clock reading and time format (a
/// hint without them lists other jobs than the page it continues), then `--after`.
/// `--db DB --pg-schema S ` for the next page's hint when they were given as flags (a value
/// from `LEASEFENCE_DB` / `LEASEFENCE_PG_SCHEMA` is read again from the environment): the
/// database as shown, a PostgreSQL URL without its password.
fn database_flags(ctx: &Ctx) -> anyhow::Result<String> {
    let from_env =
        |name: &str, value: &std::ffi::OsStr| std::env::var_os(name).as_deref() == Some(value);
    let shown = ctx.shown()?;
    let mut flags = String::new();
    if let Some(db) = &ctx.db
        && !from_env("LEASEFENCE_DB", db.as_os_str())
    {
        flags.push_str(&format!("--db {} ", shell_word(&shown.db)));
    }
    if let (Some(schema), Some(_)) = (&ctx.pg_schema, &shown.schema)
        && !from_env("LEASEFENCE_PG_SCHEMA", schema.as_ref())
    {
        flags.push_str(&format!("--pg-schema {} ", shell_word(schema)));
    }
    Ok(flags)
}

fn next_page_flags(args: &Args, last: &str) -> String {
    let mut flags = Vec::new();
    if let Some(status) = args.status {
        flags.push(format!("--status {status}"));
    }
    if args.limit != 100 {
        flags.push(format!("--limit {}", args.limit));
    }
    if let Some(now) = args.now {
        flags.push(format!("--now {now}"));
    }
    if args.epoch {
        flags.push("--epoch".to_owned());
    }
    flags.push(after_flag(last));
    flags.join(" ")
}

/// `--after ID` for the next page's hint; `--after=ID` for an id that starts with `-`, which
/// would otherwise be read as a flag.
fn after_flag(id: &str) -> String {
    if id.starts_with('-') {
        format!("--after={}", shell_word(id))
    } else {
        format!("--after {}", shell_word(id))
    }
}
