//! `leasefence enqueue ID [--queue Q] [--kind K] [--payload TEXT | --payload-file PATH]
//! [--priority P] [--not-before T] [--max-attempts N] [--unique-key KEY [--unique-for SECS]]`:
//! add a job; or `enqueue --ids-from FILE` for many jobs in one transaction.

use std::path::PathBuf;

use anyhow::Context as _;
use leasefence::{Enqueued, JobId, NewJob, Store as _};
use serde_json::json;

use crate::cmd::shared;
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
    /// The queue the job joins [default: default]. Workers serve queues by name
    /// (`work --queue Q`) and `queue pause Q` stops one from handing out jobs.
    #[arg(long, value_name = "Q", value_parser = crate::cmd::args::queue_name)]
    queue: Option<String>,
    /// What kind of job this is: a worker with handlers per kind runs it with the one
    /// registered for it, and fails it when it has none (`work --exec` gets it as
    /// LEASEFENCE_KIND).
    #[arg(long, value_name = "K")]
    kind: Option<String>,
    /// At most one unfinished job of the queue holds this key: while one does, the job is not
    /// enqueued (exit 1, naming the job that holds it). Decided inside the insert, so it holds
    /// for any number of concurrent enqueuers.
    #[arg(long, value_name = "KEY")]
    unique_key: Option<String>,
    /// With --unique-key: also not enqueued while a job of the queue with the key was
    /// enqueued less than SECS ago, finished or not.
    #[arg(
        long,
        value_name = "SECS",
        requires = "unique_key",
        allow_negative_numbers = true,
        value_parser = crate::cmd::args::seconds(true)
    )]
    unique_for: Option<f64>,
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
            || self.queue.is_some()
            || self.kind.is_some()
            || self.unique_key.is_some()
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
        if let Some(queue) = &self.queue {
            job = job.queue(queue.as_str())?;
        }
        if let Some(kind) = &self.kind {
            job = job.kind(kind.as_str())?;
        }
        if let Some(key) = &self.unique_key {
            job = job.unique_key(key.as_str())?;
        }
        if let Some(window) = self.unique_for {
            job = job.unique_for(window)?;
        }
        Ok(job)
    }

    /// The queue settings as JSON fields, for the records of a run with queue flags.
    fn settings(&self, payload: Option<&[u8]>) -> serde_json::Value {
        json!({
            "queue": self.queue.as_deref().unwrap_or(leasefence::DEFAULT_QUEUE),
            "kind": self.kind,
            "unique_key": self.unique_key,
            "unique_for": self.unique_for,
            "priority": self.priority.unwrap_or(0),
            "not_before": self.not_before.unwrap_or(0.0),
            "max_attempts": self.max_attempts.unwrap_or(0),
            "payload_bytes": payload.map(<[u8]>::len),
        })
    }

    /// The settings in words, for the readable line.
    fn describe(&self, payload: Option<&[u8]>) -> String {
        let mut parts = Vec::new();
        if let Some(q) = &self.queue {
            parts.push(format!("queue {q}"));
        }
        if let Some(k) = &self.kind {
            parts.push(format!("kind {k}"));
        }
        if let Some(key) = &self.unique_key {
            parts.push(match self.unique_for {
                Some(window) => {
                    format!("unique key {key}; none with it enqueued in the last {window} s")
                }
                None => format!("unique key {key}"),
            });
        }
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
        && shared::is_stdin(ids)
        && shared::is_stdin(payload)
    {
        return Err(shared::invalid(
            "--payload-file",
            "`-` (stdin) is already taken by `--ids-from -`",
        ));
    }
    let payload = match (&args.payload.payload, &args.payload.payload_file) {
        (Some(text), _) => Some(text.clone().into_bytes()),
        (None, Some(path)) => Some(shared::read_bytes(path, "the payload", "--payload-file")?),
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
    // The role's job is the scheduler's to make (never ready), as over HTTP.
    shared::not_the_scheduler_job("enqueue", id)
        .with_context(|| crate::cmd::shared::about("enqueue", id))?;
    let outcome = if args.has_queue_flags() {
        let job = args
            .job(id, payload)
            .with_context(|| crate::cmd::shared::about("enqueue", id))?;
        shared::open(ctx)
            .and_then(|store| store.enqueue_jobs(&[job]))
            .with_context(|| crate::cmd::shared::about("enqueue", id))?
            .remove(0)
    } else {
        // The contract's operation, exactly as before the queue existed.
        let inserted = JobId::new(id)
            .and_then(|job| shared::open(ctx)?.enqueue(job))
            .with_context(|| crate::cmd::shared::about("enqueue", id))?;
        if inserted {
            Enqueued::Inserted
        } else {
            Enqueued::Known
        }
    };
    let mut record = json!({ "op": "enqueue", "job_id": id });
    let mut human = format!("enqueued {id}");
    if args.has_queue_flags() {
        merge(&mut record, args.settings(payload));
        human = format!("{human} ({})", args.describe(payload));
    }
    Ok(match outcome {
        Enqueued::Inserted => ctx.out.done_line(human, record),
        Enqueued::Duplicate { of } => {
            let key = args.unique_key.as_deref().unwrap_or_default();
            let queue = args.queue.as_deref().unwrap_or(leasefence::DEFAULT_QUEUE);
            let reason = match args.unique_for {
                Some(window) => format!(
                    "{id} not enqueued: the job {of} holds the unique key {key:?} in the queue \
                     {queue} (unfinished, or enqueued less than {window} s ago)"
                ),
                None => format!(
                    "{id} not enqueued: the unfinished job {of} holds the unique key {key:?} in \
                     the queue {queue}"
                ),
            };
            record["duplicate_of"] = json!(of);
            ctx.out.refused(reason, record)
        }
        _ => ctx.out.refused(
            format!("{id} is already known; its state is left untouched"),
            record,
        ),
    })
}

fn run_many(
    ctx: &Ctx,
    args: &Args,
    path: &std::path::Path,
    payload: Option<&[u8]>,
) -> anyhow::Result<Outcome> {
    let source = if shared::is_stdin(path) {
        "stdin".to_owned()
    } else {
        path.display().to_string()
    };
    let bytes = shared::read_bytes(path, "the ids", "--ids-from")?;
    let text = String::from_utf8(bytes)
        .map_err(|_| shared::invalid("--ids-from", format!("{source} is not UTF-8 text")))?;
    let ids: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let jobs = ids
        .iter()
        .enumerate()
        .map(|(n, id)| {
            shared::not_the_scheduler_job("enqueue", id)
                .and_then(|()| Ok(args.job(id, payload)?))
                .with_context(|| format!("enqueue {id:?} (line {} of {source})", n + 1))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let outcomes = shared::open(ctx)
        .and_then(|store| store.enqueue_jobs(&jobs))
        .with_context(|| format!("enqueue the ids of {source}"))?;
    let known: Vec<&str> = ids
        .iter()
        .zip(&outcomes)
        .filter(|(_, outcome)| !outcome.is_inserted())
        .map(|(id, _)| *id)
        .collect();
    // Of those not inserted, the ones refused by the unique key, with the job that holds it.
    let duplicates: serde_json::Map<String, serde_json::Value> = ids
        .iter()
        .zip(&outcomes)
        .filter_map(|(id, outcome)| match outcome {
            Enqueued::Duplicate { of } => Some(((*id).to_owned(), json!(of))),
            _ => None,
        })
        .collect();
    let count = ids.len() - known.len();
    let mut record = json!({
        "op": "enqueue", "ids_from": source, "inserted": count, "known": known,
    });
    if !duplicates.is_empty() {
        record["duplicate_of"] = serde_json::Value::Object(duplicates);
    }
    let mut human = format!("enqueued {count} of {} jobs from {source}", ids.len());
    if args.has_queue_flags() {
        merge(&mut record, args.settings(payload));
        human = format!("{human} ({})", args.describe(payload));
    }
    Ok(if known.is_empty() {
        ctx.out.done_line(human, record)
    } else {
        ctx.out.text(&human);
        let shown: Vec<String> = known.iter().take(10).map(|id| format!("{id:?}")).collect();
        let more = if known.len() > shown.len() {
            format!(" and {} more", known.len() - shown.len())
        } else {
            String::new()
        };
        let why = if args.unique_key.is_some() {
            "already known or holding the unique key elsewhere, not enqueued"
        } else {
            "already known, left untouched"
        };
        ctx.out.refused(
            format!("{} {why}: {}{more}", known.len(), shown.join(", ")),
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
