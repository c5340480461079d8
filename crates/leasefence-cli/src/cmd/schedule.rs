//! `leasefence schedule add NAME --cron EXPR [--tz TZ] [--queue Q] [--kind K] [--payload TEXT |
//! --payload-file PATH] [--priority P] [--max-attempts N]`, `schedule list`, `schedule remove
//! NAME` and `schedule tick`: periodic jobs. Add, list and remove are operator verbs (not
//! fenced); the runs are enqueued by the scheduler — `work --scheduler`, or one `schedule
//! tick` — under a lease and fence of its own on the job `leasefence.scheduler`, each as the
//! job `NAME@<slot in UTC>`, so no slot is ever enqueued twice.

use std::path::PathBuf;

use anyhow::Context as _;
use leasefence::{
    AnyStore, Now, SCHEDULER_JOB, Schedule, ScheduleInfo, ScheduleName, Scheduler, Step,
    Store as _, Ttl,
};
use serde_json::json;

use crate::cmd::time::{Times, human};
use crate::cmd::{args, at_now, now_on, read_at_now, shared};
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `schedule`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
}

/// What `schedule` does.
#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// Add a periodic job: at every slot of the cron expression, the scheduler enqueues the
    /// job NAME@<slot in UTC> with the settings given. Its first run is its first slot after
    /// now. A known NAME is left as it was: the same definition again changes nothing (exit 0,
    /// `added` false), a different one is refused (exit 1).
    Add(AddArgs),
    /// Every schedule with its expression, time zone, job settings and next run.
    List(ListArgs),
    /// Remove a schedule (exit 1 if there is none); the runs it enqueued stay.
    Remove(RemoveArgs),
    /// Take the scheduler role once: enqueue what is due now, then give the role back. Exit 1
    /// when another scheduler holds the role (it enqueues the runs itself).
    Tick(TickArgs),
}

/// Arguments of `schedule add`.
#[derive(Debug, clap::Args)]
struct AddArgs {
    /// The schedule's name: ASCII letters, digits, '_', '-', '.' or ':' (at most 128 bytes).
    #[arg(value_name = "NAME")]
    name: String,
    /// The cron expression: five fields (minute hour day-of-month month day-of-week), or six
    /// with seconds first, or seven with seconds first and a year last; `@hourly`, `@daily`,
    /// `@weekly`, `@monthly`, `@yearly` too.
    #[arg(long, value_name = "EXPR")]
    cron: String,
    /// The IANA time zone the expression is read in (e.g. Europe/Berlin).
    #[arg(long, value_name = "TZ", default_value = "UTC")]
    tz: String,
    /// The queue each run joins [default: default].
    #[arg(long, value_name = "Q", value_parser = args::queue_name)]
    queue: Option<String>,
    /// The kind of each run (a worker routes it to the handler of that kind).
    #[arg(long, value_name = "K")]
    kind: Option<String>,
    /// The payload of each run.
    #[arg(
        long,
        value_name = "TEXT",
        allow_hyphen_values = true,
        conflicts_with = "payload_file"
    )]
    payload: Option<String>,
    /// Read the payload of each run from this file (`-` for stdin), stored verbatim.
    #[arg(long, value_name = "PATH")]
    payload_file: Option<PathBuf>,
    /// The priority of each run: higher runs first [default: 0].
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    priority: Option<i64>,
    /// The attempts budget of each run [default: 0, no limit].
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = args::count(0, u32::MAX)
    )]
    max_attempts: Option<u32>,
    /// The clock reading the schedule starts at, in Unix seconds [default: the system clock;
    /// on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Arguments of `schedule list`.
#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Show times as raw seconds since the Unix epoch.
    #[arg(long)]
    epoch: bool,
    /// The clock reading the next runs are shown relative to, in Unix seconds [default: the
    /// system clock; on PostgreSQL the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Arguments of `schedule remove`.
#[derive(Debug, clap::Args)]
struct RemoveArgs {
    /// The schedule's name.
    #[arg(value_name = "NAME")]
    name: String,
}

/// Arguments of `schedule tick`.
#[derive(Debug, clap::Args)]
struct TickArgs {
    /// The name the scheduler role is held under [default: tick-<host>-<pid>].
    #[arg(long, value_name = "NAME")]
    owner: Option<String>,
    /// The lease on the role, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 30.0,
        allow_negative_numbers = true,
        value_parser = args::seconds(true)
    )]
    ttl: f64,
    /// The clock reading to tick at, in Unix seconds [default: the system clock; on PostgreSQL
    /// the database server's clock].
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    now: Option<f64>,
}

/// Add: exit 0 when added, 1 for a known name. List: 0. Remove: 0 when removed, 1 for an
/// unknown name. Tick: 0 when it held the role and ticked, 1 when another scheduler holds it.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    match args.verb {
        Verb::Add(a) => add(ctx, a),
        Verb::List(a) => list(ctx, a),
        Verb::Remove(a) => remove(ctx, &a.name),
        Verb::Tick(a) => tick(ctx, a),
    }
}

fn definition(a: &AddArgs) -> anyhow::Result<Schedule> {
    let mut schedule = Schedule::new(&a.name, &a.cron)?.time_zone(&a.tz)?;
    if let Some(queue) = &a.queue {
        schedule = schedule.queue(queue.as_str())?;
    }
    if let Some(kind) = &a.kind {
        schedule = schedule.kind(kind.as_str())?;
    }
    if let Some(payload) = &a.payload {
        schedule = schedule.payload(payload.as_bytes());
    }
    if let Some(path) = &a.payload_file {
        schedule = schedule.payload(shared::read_bytes(path, "the payload", "--payload-file")?);
    }
    if let Some(priority) = a.priority {
        schedule = schedule.priority(priority);
    }
    if let Some(max) = a.max_attempts {
        schedule = schedule.max_attempts(max);
    }
    Ok(schedule)
}

/// The JSON fields of a schedule's definition.
fn fields(s: &Schedule) -> serde_json::Value {
    let mut record = json!({
        "name": s.name(), "cron": s.cron(), "tz": s.tz(), "queue": s.queue_name().as_str(),
        "kind": s.kind_name(), "priority": s.priority_value(),
        "max_attempts": s.max_attempts_value(),
    });
    shared::payload_fields(&mut record, s.payload_bytes());
    record
}

fn add(ctx: &Ctx, a: AddArgs) -> anyhow::Result<Outcome> {
    let what = || format!("schedule add {}", a.name);
    let schedule = definition(&a).with_context(what)?;
    let (now, (added, stored)) = at_now(ctx, a.now, |store, now| {
        let added = store.add_schedule(&schedule, now)?;
        // The schedule of that name as stored: its first slot is the store's (on PostgreSQL,
        // by the database's clock), and a known one is compared with the definition given.
        let stored = store
            .schedules()?
            .into_iter()
            .find(|info| info.schedule.name() == schedule.name());
        Ok((added, stored))
    })
    .with_context(what)?;
    let mut record = fields(&schedule);
    record["op"] = json!("schedule add");
    record["now"] = json!(now);
    if let Some(info) = stored
        .as_ref()
        .filter(|info| !added && info.schedule == schedule)
    {
        // Provisioning the same definition again is not an error: nothing to change.
        record["added"] = json!(false);
        record["last_slot"] = json!(info.last_slot);
        return Ok(ctx.out.done(
            format!(
                "the schedule {} is already there, identical; left as it was",
                a.name
            ),
            record,
        ));
    }
    if !added {
        return Ok(ctx.out.refused(
            format!(
                "a schedule named {} exists and was left as it was; `leasefence schedule remove \
                 {}` first to change it",
                a.name, a.name
            ),
            record,
        ));
    }
    let first = stored.and_then(|info| info.next_slot().ok().flatten());
    record["added"] = json!(true);
    record["next_slot"] = json!(first);
    record["next_job"] = json!(first.map(|t| leasefence::run_id(schedule.name(), t).ok()));
    let next = first.map_or_else(
        || "none (no slot after now)".to_owned(),
        |t| human(t as f64, now),
    );
    Ok(ctx.out.done(
        format!(
            "added the schedule {}: `{}` in {}, each run a job of the queue {}; first run {next}",
            schedule.name(),
            schedule.cron(),
            schedule.tz(),
            schedule.queue_name()
        ),
        record,
    ))
}

fn list(ctx: &Ctx, a: ListArgs) -> anyhow::Result<Outcome> {
    let (now, (schedules, role)) = read_at_now(ctx, a.now, |store, _| {
        Ok((
            store.schedules()?,
            store.state(leasefence::JobId::new(SCHEDULER_JOB)?)?,
        ))
    })
    .context("schedule list")?;
    let role_line = match &role {
        Some(row) if row.done => format!(
            "scheduler: the role's job {SCHEDULER_JOB} is finished, so no scheduler can take \
             the role; `leasefence delete {SCHEDULER_JOB}` resets it"
        ),
        Some(row) if row.owner.is_some() && row.is_leased_at(now) => format!(
            "scheduler: held by {} (fence {}) until {}",
            row.owner.as_deref().unwrap_or("-"),
            row.fence,
            human(row.until, now)
        ),
        _ => "scheduler: none holds the role now; runs are enqueued while a worker runs with \
              `--scheduler` (or by `leasefence schedule tick`)"
            .to_owned(),
    };
    // Who holds the role, in every record: the guide's "says who holds the role, or that none
    // does" also with --json.
    let holder = match &role {
        Some(row) if !row.done && row.owner.is_some() && row.is_leased_at(now) => {
            json!({ "owner": row.owner, "fence": row.fence, "until": row.until })
        }
        _ => serde_json::Value::Null,
    };
    if schedules.is_empty() {
        ctx.out
            .text("no schedule (add one with `leasefence schedule add NAME --cron EXPR`)");
        ctx.out.text(role_line);
        return Ok(Outcome::Done);
    }
    let times = Times {
        now,
        epoch: a.epoch,
    };
    let mut rows = vec![
        [
            "NAME",
            "CRON",
            "TZ",
            "QUEUE",
            "KIND",
            "NEXT RUN",
            "LAST SLOT",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for info in &schedules {
        // The slot the next tick enqueues: after missed slots, the latest of them.
        let next = Now::new(now)
            .and_then(|now| info.next_run(now))
            .ok()
            .flatten();
        let ScheduleInfo {
            schedule,
            created_at,
            last_slot,
        } = info;
        let mut record = fields(schedule);
        record["op"] = json!("schedule list");
        record["ok"] = json!(true);
        record["now"] = json!(now);
        record["created_at"] = json!(created_at);
        record["last_slot"] = json!(last_slot);
        record["last_run"] = json!(info.last_run());
        record["next_slot"] = json!(next);
        record["scheduler"] = holder.clone();
        ctx.out.json(record);
        // Until the first run, last_slot is the creation time: no run has happened yet.
        let last = info
            .last_run()
            .map_or_else(|| "-".to_owned(), |slot| times.show(slot as f64));
        rows.push(vec![
            schedule.name().to_owned(),
            shared::one_line(schedule.cron()),
            schedule.tz().to_owned(),
            schedule.queue_name().to_string(),
            schedule
                .kind_name()
                .map_or_else(|| "-".to_owned(), shared::one_line),
            next.map_or_else(|| "-".to_owned(), |t| times.show(t as f64)),
            last,
        ]);
    }
    ctx.out.text(shared::table(&rows, |_| false));
    ctx.out.text(role_line);
    Ok(Outcome::Done)
}

fn remove(ctx: &Ctx, name: &str) -> anyhow::Result<Outcome> {
    let what = || format!("schedule remove {name}");
    let valid = ScheduleName::new(name).with_context(what)?;
    let removed = shared::open(ctx)
        .and_then(|store| store.remove_schedule(valid))
        .with_context(what)?;
    let record = json!({ "op": "schedule remove", "name": name });
    if removed {
        Ok(ctx.out.done(
            format!("removed the schedule {name}; the runs it enqueued stay"),
            record,
        ))
    } else {
        Ok(ctx.out.refused(format!("no schedule named {name}"), record))
    }
}

fn tick(ctx: &Ctx, a: TickArgs) -> anyhow::Result<Outcome> {
    let owner = a
        .owner
        .clone()
        .unwrap_or_else(|| format!("tick-{}-{}", shared::hostname(), std::process::id()));
    let ttl = Ttl::new(a.ttl).context("schedule tick")?;
    a.now.map(Now::new).transpose().context("schedule tick")?;
    let store: AnyStore = ctx.open(a.now.is_some()).context("schedule tick")?;
    let now = now_on(&store, a.now).context("schedule tick")?;
    let mut scheduler = Scheduler::new(&store, &owner, ttl).context("schedule tick")?;
    let step = scheduler.step(Now::new(now)?).context("schedule tick");
    let fence = scheduler.lease().map(|l| l.fence);
    // Give the role back whatever the step did, so the next tick or worker takes it at once.
    let resigned = scheduler.resign();
    let step = step?;
    resigned.context("schedule tick: giving the scheduler role back")?;
    let mut record = json!({ "op": "schedule tick", "owner": owner, "now": now, "fence": fence });
    match step {
        Step::Ticked(t) => {
            record["enqueued"] = json!(t.enqueued);
            record["passed"] = json!(t.passed);
            record["skipped"] = json!(t.skipped);
            record["next_slot"] = json!(t.next_slot);
            let next = t
                .next_slot
                .map_or_else(|| "none".to_owned(), |s| human(s as f64, now));
            let mut human_text = if t.enqueued.is_empty() && t.passed.is_empty() {
                format!(
                    "nothing due (scheduler fence {}); next slot {next}",
                    fence.unwrap_or(0)
                )
            } else if t.enqueued.is_empty() {
                format!(
                    "nothing enqueued (scheduler fence {}); next slot {next}",
                    fence.unwrap_or(0)
                )
            } else {
                format!(
                    "enqueued {} (scheduler fence {}); next slot {next}",
                    t.enqueued.join(", "),
                    fence.unwrap_or(0)
                )
            };
            if !t.passed.is_empty() {
                // Due, and its slot used up, but nothing enqueued for it.
                human_text.push_str(&format!(
                    "; not enqueued {}: a job with its id exists (left as it is), or its \
                     schedule changed meanwhile",
                    t.passed.join(", ")
                ));
            }
            if t.skipped > 0 {
                // A tick counts at most 100,000 missed slots per schedule: past that, more
                // were missed than the count says.
                human_text.push_str(&format!(
                    "; {}{} missed slot{} not run (each schedule runs once on catch-up)",
                    if t.skipped_at_least { "at least " } else { "" },
                    t.skipped,
                    if t.skipped == 1 { "" } else { "s" }
                ));
            }
            Ok(ctx.out.done(human_text, record))
        }
        Step::Standby | Step::Refused => {
            let holder = store
                .state(leasefence::JobId::new(SCHEDULER_JOB)?)
                .ok()
                .flatten();
            let reason = match holder {
                Some(row) if row.done => format!(
                    "the scheduler job {SCHEDULER_JOB} is finished (cancelled?); nothing enqueued"
                ),
                Some(row) if row.owner.is_some() => format!(
                    "the scheduler role is held by {} (fence {}) until {}; nothing enqueued",
                    row.owner.as_deref().unwrap_or("-"),
                    row.fence,
                    human(row.until, now)
                ),
                // Nobody holds it, but its lease end is after `now` (a clock reading before
                // 1970 meets a job never claimed, whose lease end is 0): no claim can take it.
                Some(row) => format!(
                    "nobody holds the scheduler role, but it cannot be taken before its lease end {} \
                     (the clock reading is {}); nothing enqueued",
                    human(row.until, now),
                    human(now, now)
                ),
                None => "the scheduler role could not be taken; nothing enqueued".to_owned(),
            };
            Ok(ctx.out.refused(reason, record))
        }
    }
}
