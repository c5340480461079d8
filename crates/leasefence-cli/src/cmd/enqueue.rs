//! `leasefence enqueue ID [--payload TEXT | --payload-file PATH] [--priority P]
//! [--not-before T] [--max-attempts N]`: add a job; or `enqueue --ids-from FILE` for many jobs
//! in one transaction.

use std::path::PathBuf;

use anyhow::Context as _;
use leasefence::{JobId, NewJob, Store as _};
use serde_json::json;

use crate::cmd::queue;
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `enqueue`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job id (any non-empty text).
    #[arg(
        value_name = "ID",
        required_unless_present = "ids_from",
        conflicts_with = "ids_from"
    )]
    id: Option<String>,
    /// Enqueue every id of this file (`-` for stdin) in one transaction: one id per line, taken
    /// verbatim; blank lines are skipped. The queue flags apply to every job.
    #[arg(long, value_name = "PATH")]
    ids_from: Option<PathBuf>,
    /// The payload handed to the worker with the lease.
    #[command(flatten)]
    payload: PayloadSource,
    /// Higher runs first [default: 0; negative values run after the default].
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    priority: Option<i64>,
    /// Not handed out before this clock reading, in seconds [default: 0, ready at once].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    not_before: Option<f64>,
    /// Runs the job gets before a failure makes it dead; a lease given back (a worker's
    /// graceful shutdown, `release`) does not count [default: 0, no limit].
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = crate::cmd::args::count(0, u32::MAX)
    )]
    max_attempts: Option<u32>,
}

/// The payload: given inline or read from a file; at most one of the two.
#[derive(Debug, clap::Args)]
#[group(required = false, multiple = false)]
pub struct PayloadSource {
    /// The payload text.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    payload: Option<String>,
    /// Read the payload from this file (`-` for stdin), stored verbatim as bytes.
    #[arg(long, value_name = "PATH")]
    payload_file: Option<PathBuf>,
}

impl Args {
    /// Whether any queue flag was given; without one, `enqueue` is the contract's operation.
    fn has_queue_flags(&self) -> bool {
        self.payload.payload.is_some()
            || self.payload.payload_file.is_some()
            || self.priority.is_some()
            || self.not_before.is_some()
            || self.max_attempts.is_some()
    }

    /// The job for `id` with the queue settings given.
    fn job(&self, id: &str, payload: Option<&[u8]>) -> leasefence::Result<NewJob> {
        let mut job = NewJob::new(id)?;
        if let Some(payload) = payload {
            job = job.payload(payload);
        }
        if let Some(priority) = self.priority {
            job = job.priority(priority);
        }
        if let Some(not_before) = self.not_before {
            job = job.not_before(not_before)?;
        }
        if let Some(max_attempts) = self.max_attempts {
            job = job.max_attempts(max_attempts);
        }
        Ok(job)
    }

    /// The queue settings as JSON fields, for the records of a run with queue flags.
    fn settings(&self, payload: Option<&[u8]>) -> serde_json::Value {
        json!({
            "priority": self.priority.unwrap_or(0),
            "not_before": self.not_before.unwrap_or(0.0),
            "max_attempts": self.max_attempts.unwrap_or(0),
            "payload_bytes": payload.map(<[u8]>::len),
        })
    }

    /// The settings in words, for the readable line.
    fn describe(&self, payload: Option<&[u8]>) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.priority {
            parts.push(format!("priority {p}"));
        }
        if let Some(t) = self.not_before {
            parts.push(format!("not before {t}"));
        }
        if let Some(n) = self.max_attempts {
            parts.push(match n {
                0 => "no attempts limit".to_owned(),
                1 => "at most 1 attempt".to_owned(),
                n => format!("at most {n} attempts"),
            });
        }
        if let Some(bytes) = payload {
            parts.push(format!("payload {} bytes", bytes.len()));
        }
        parts.join(", ")
    }
}

/// Inserts an unknown id (exit 0); a known id is refused and its row left untouched (exit 1).
/// With `--ids-from`, exit 0 when every id was inserted, 1 when any was already known (the
/// others are inserted all the same).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    if let (Some(ids), Some(payload)) = (&args.ids_from, &args.payload.payload_file)
        && queue::is_stdin(ids)
        && queue::is_stdin(payload)
    {
        return Err(queue::invalid(
            "--payload-file",
            "`-` (stdin) is already taken by `--ids-from -`",
        ));
    }
    let payload = match (&args.payload.payload, &args.payload.payload_file) {
        (Some(text), _) => Some(text.clone().into_bytes()),
        (None, Some(path)) => Some(queue::read_bytes(path, "the payload")?),
        (None, None) => None,
    };
    match &args.ids_from {
        Some(path) => run_many(ctx, &args, path, payload.as_deref()),
        None => {
            let id = args
                .id
                .as_deref()
                .expect("clap requires ID without --ids-from");
            run_one(ctx, &args, id, payload.as_deref())
        }
    }
}

fn run_one(ctx: &Ctx, args: &Args, id: &str, payload: Option<&[u8]>) -> anyhow::Result<Outcome> {
    let inserted = if args.has_queue_flags() {
        let job = args
            .job(id, payload)
            .with_context(|| format!("enqueue {id}"))?;
        queue::open(ctx)
            .and_then(|store| store.enqueue_many(&[job]))
            .with_context(|| format!("enqueue {id}"))?[0]
    } else {
        // The contract's operation, exactly as before the queue existed.
        JobId::new(id)
            .and_then(|job| queue::open(ctx)?.enqueue(job))
            .with_context(|| format!("enqueue {id}"))?
    };
    let mut record = json!({ "op": "enqueue", "job_id": id });
    let mut human = format!("enqueued {id}");
    if args.has_queue_flags() {
        merge(&mut record, args.settings(payload));
        human = format!("{human} ({})", args.describe(payload));
    }
    Ok(if inserted {
        ctx.out.done(human, record)
    } else {
        ctx.out.refused(
            format!("{id} is already known; its state is left untouched"),
            record,
        )
    })
}

fn run_many(
    ctx: &Ctx,
    args: &Args,
    path: &std::path::Path,
    payload: Option<&[u8]>,
) -> anyhow::Result<Outcome> {
    let source = if queue::is_stdin(path) {
        "stdin".to_owned()
    } else {
        path.display().to_string()
    };
    let bytes = queue::read_bytes(path, "the ids")?;
    let text = String::from_utf8(bytes)
        .map_err(|_| queue::invalid("--ids-from", format!("{source} is not UTF-8 text")))?;
    let ids: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let jobs = ids
        .iter()
        .enumerate()
        .map(|(n, id)| {
            args.job(id, payload)
                .with_context(|| format!("enqueue {id:?} (line {} of {source})", n + 1))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let inserted = queue::open(ctx)
        .and_then(|store| store.enqueue_many(&jobs))
        .with_context(|| format!("enqueue the ids of {source}"))?;
    let known: Vec<&str> = ids
        .iter()
        .zip(&inserted)
        .filter(|(_, inserted)| !**inserted)
        .map(|(id, _)| *id)
        .collect();
    let count = ids.len() - known.len();
    let mut record = json!({
        "op": "enqueue", "ids_from": source, "inserted": count, "known": known,
    });
    let mut human = format!("enqueued {count} of {} jobs from {source}", ids.len());
    if args.has_queue_flags() {
        merge(&mut record, args.settings(payload));
        human = format!("{human} ({})", args.describe(payload));
    }
    Ok(if known.is_empty() {
        ctx.out.done(human, record)
    } else {
        ctx.out.text(&human);
        let shown: Vec<String> = known.iter().take(10).map(|id| format!("{id:?}")).collect();
        let more = if known.len() > shown.len() {
            format!(" and {} more", known.len() - shown.len())
        } else {
            String::new()
        };
        ctx.out.refused(
            format!(
                "{} already known, left untouched: {}{more}",
                known.len(),
                shown.join(", ")
            ),
            record,
        )
    })
}

/// Adds the fields of `extra` (an object) to `record`.
fn merge(record: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(record), serde_json::Value::Object(extra)) = (record.as_object_mut(), extra) {
        record.extend(extra);
    }
}
