//! `leasefence`: the lease-and-fence contract from a shell, and a demo of it.
//!
//! Every subcommand is one operation of the library's `Store` trait on an `AnyStore`, opened in
//! one place (`ctx.rs`) from `--db`: an SQLite file (default `leasefence.db` in the working
//! directory, or `LEASEFENCE_DB`), or PostgreSQL when the database is a URL
//! (`--db postgres://user@host/dbname`) or a libpq `key=value` string
//! (`--db 'host=db user=app dbname=jobs'`), tables in the schema `--pg-schema`, default
//! `leasefence`:
//!
//! ```text
//! leasefence init
//! leasefence enqueue job-1
//! leasefence claim job-1 --owner worker-a --ttl 30          # prints the new fence
//! leasefence renew job-1 --owner worker-a --fence 1 --ttl 30
//! leasefence complete job-1 --owner worker-a --fence 1 --result "42"
//! leasefence release job-1 --owner worker-a --fence 1
//! leasefence claim-batch --owner worker-a --ttl 30 --n 10  # one line per lease
//! leasefence fail job-1 --owner worker-a --fence 1 --error "timeout"  # retrying or dead
//! leasefence admit bucket/report.csv --fence 3            # the gate for an external write
//! leasefence state job-1
//! leasefence enqueue job-2 --payload '{"w":640}' --priority 5 --not-before 0 --max-attempts 3
//! leasefence enqueue --ids-from ids.txt                    # one id per line, one transaction
//! leasefence list --status ready --limit 20                # a table of jobs, oldest first
//! leasefence stats                                         # counts by status
//! leasefence purge --older-than 86400                      # finished jobs; fences stay reserved
//! leasefence cancel job-2
//! leasefence enqueue mail-1 --queue emails --kind welcome --unique-key welcome:ada
//! leasefence queue pause emails                             # hands out nothing until resumed
//! leasefence queue list                                     # queues, paused flag, counts
//! leasefence work --exec ./send.sh --queue emails=4 --queue reports=1
//! leasefence work --exec 'cat | wc -c' --drain            # a command per job, until empty
//! leasefence serve --bind 127.0.0.1:7878                   # the contract over HTTP (docs/http.md)
//! leasefence demo                                          # the story, then a stress run
//! leasefence --db postgres://app@db.internal/jobs claim job-1 --owner a --ttl 30
//! ```
//!
//! Each prints one readable line, or with `--json` one JSON object per line on stdout.
//!
//! # Exit status
//!
//! - `0`: the operation took effect (for `demo`: every invariant held; for `work`: it stopped
//!   cleanly, by SIGTERM, SIGINT or SIGHUP or by `--drain`, with its commands' jobs finished or
//!   released).
//! - `1`: the contract refused it — a known id on `enqueue`, a job that is not claimable, a stale
//!   fence or expired lease, an unknown id on `state`, no ready job on `claim-batch`, a lower
//!   fence on `admit` (for `demo`: an invariant broke). The reason is on stderr.
//! - `2`: bad input (including clap's usage errors) or a database error, reason on stderr as
//!   `leasefence: error: …`.
//! - `3`: the database was busy (another writer held the lock past the busy timeout: nothing
//!   was written), the server unavailable (a reply cut short may hide a write that took
//!   effect), or a PostgreSQL server that could not be connected to for a passing reason (none
//!   listening, starting up or shutting down, every connection slot taken, no answer in time;
//!   not credentials, database name or TLS, which exit 2): the same command can be run again — a fenced write is never stored twice, and a
//!   repeat of one that took effect is refused. The message says so.
//!
//! With `--json` a failure also prints one object on stdout, `{"op", "ok": false, "error",
//! "argument", "retryable", "exit", "message", "hint"}` (see `failure.rs`).

mod cmd;
mod ctx;
mod failure;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use crate::ctx::Ctx;
use crate::output::{Out, Outcome};

/// What `leasefence --help` says after the subcommands: the global options in full, once
/// (each subcommand's help has only their one-line summary).
const AFTER_HELP: &str = "\
Database (--db DB, or LEASEFENCE_DB) [default: leasefence.db in the working directory; `demo` \
uses a fresh temporary file, or on PostgreSQL a fresh schema, unless given]:
  - `postgres://user:password@host:port/dbname` or `postgresql://…` is PostgreSQL;
  - a libpq key=value string, recognised by a word starting `host=`, `hostaddr=`, `port=`, \
`dbname=`, `user=`, `password=`, `passfile=`, `service=` or `sslmode=` (e.g. 'host=127.0.0.1 \
user=postgres dbname=test'), is PostgreSQL;
  - `sqlite://PATH` is the SQLite file PATH (use it for a file name that looks like key=value);
  - anything else is an SQLite file path.
  Passwords are never printed: messages show `***` instead.

On PostgreSQL, tables live in the schema --pg-schema (or LEASEFENCE_PG_SCHEMA; a lower-case \
SQL identifier, created if absent by a command that writes; state, list, stats, history, queue \
list and schedule list refuse one that does not exist) [default: leasefence; `demo` uses a fresh schema, dropped \
afterwards, unless given]. Commands run without --now judge leases by the database server's \
clock (not this host's), so invocations on different hosts agree on when a lease expires; with \
--now the given reading is used. Absolute times (--not-before, --finished-before) are then on \
the database's clock (seconds since the Unix epoch).

--json: one JSON object per line on stdout. Every object has `op` (the subcommand) and `ok` \
(whether the operation took effect), `job_id` where a job is concerned, and times as seconds \
since the Unix epoch. A command that finds nothing to print (an empty `list`) prints no lines.

Exit status: 0 the operation took effect, 1 the contract refused it (reason on stderr), 2 bad \
input or a database error, 3 the database was busy, or the server or database unavailable for \
now (run the command again; a fenced write is never stored twice).";

/// Time-limited job leases with fencing tokens, on an SQLite file or PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "leasefence", version, after_help = AFTER_HELP)]
struct Cli {
    /// The database: an SQLite file, a postgres:// URL or a libpq key=value string (see
    /// `leasefence --help`).
    #[arg(
        long,
        global = true,
        env = "LEASEFENCE_DB",
        // Its value may hold a PostgreSQL password: `--help` never shows it.
        hide_env_values = true,
        value_name = "DB",
        help_heading = "Global options"
    )]
    db: Option<PathBuf>,

    /// PostgreSQL only: the schema holding the tables [default: leasefence].
    #[arg(
        long,
        global = true,
        env = "LEASEFENCE_PG_SCHEMA",
        value_name = "SCHEMA",
        help_heading = "Global options"
    )]
    pg_schema: Option<String>,

    /// Machine-readable output: one JSON object per line on stdout.
    #[arg(long, global = true, help_heading = "Global options")]
    json: bool,

    /// The operation to run.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands, one per contract operation plus the demo.
#[derive(Debug, Subcommand)]
enum Command {
    /// Create the `jobs` table (and the file) if absent; never resets a row.
    Init(cmd::init::Args),
    /// Add a job (optionally with queue, kind, payload, priority, not-before, attempts budget,
    /// unique key); a known id or a unique key already held is refused, nothing changed.
    Enqueue(cmd::enqueue::Args),
    /// Show one job with every field: status, lease, attempts, priority, times, payload, error,
    /// result.
    State(cmd::state::Args),
    /// Show a job's attempt ledger: every claim with its fence, owner, times and outcome, and
    /// the late writes the fence refused.
    History(cmd::history::Args),
    /// Take the lease on a claimable job and print the new fence.
    Claim(cmd::claim::Args),
    /// Extend a live lease held under the current fence.
    Renew(cmd::renew::Args),
    /// Store the result and mark the job done, while the lease is current.
    Complete(cmd::complete::Args),
    /// Give a lease back early; the fence is kept.
    Release(cmd::release::Args),
    /// Take the leases on up to N ready jobs in one transaction, best first, and print each
    /// (id, fence, lease end, payload size).
    ClaimBatch(cmd::claim_batch::Args),
    /// Record a failed attempt while the lease is current: retried later (backoff or
    /// --retry-at), or dead after the job's last attempt.
    Fail(cmd::fail::Args),
    /// The fence gate for an external resource: admit a fence only if no higher one was
    /// admitted before.
    Admit(cmd::admit::Args),
    /// List jobs with their status, lease, priority and attempts, oldest first.
    List(cmd::list::Args),
    /// Count jobs by status (ready, scheduled, leased, expired, retrying, done, dead, cancelled).
    Stats(cmd::stats::Args),
    /// Delete old finished jobs; their last fences stay reserved (the fence floor).
    Purge(cmd::purge::Args),
    /// Cancel an unfinished job: never handed out again, its holder can store nothing more.
    Cancel(cmd::cancel::Args),
    /// Make dead or cancelled jobs (by id, or every dead one) ready again with a fresh
    /// attempts budget; the fence continues upward.
    Retry(cmd::retry::Args),
    /// Remove jobs by id, finished or not; their fences stay reserved (the fence floor).
    Delete(cmd::delete::Args),
    /// Named queues: pause one (it hands out nothing, held leases stay valid), resume it, or
    /// list every queue with its paused flag and counts by status.
    Queue(cmd::queue::Args),
    /// Periodic jobs: add a cron schedule, list or remove them, or tick once; the scheduler
    /// (`work --scheduler`) enqueues each slot once as the job NAME@<slot>, under a fence.
    Schedule(cmd::schedule::Args),
    /// Run a shell command per job (payload on stdin, stdout stored), with heartbeats, retries
    /// and fencing, until the queue is drained (`--drain`) or SIGTERM / Ctrl-C.
    Work(cmd::work::Args),
    /// Serve the contract over HTTP for workers in any language (docs/http.md), with
    /// metrics, until SIGTERM or Ctrl-C.
    Serve(cmd::serve::Args),
    /// Replay the stalled-worker story, then a multi-threaded stress run with a verdict.
    Demo(cmd::demo::Args),
}

fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(matches) => matches,
        Err(err) => return failure::usage(err),
    };
    // The op as the command's own `--json` lines name it: `queue pause`, not `queue`.
    let mut op: Option<String> = None;
    let mut level = matches.subcommand();
    while let Some((name, sub)) = level {
        op = Some(op.map_or_else(|| name.to_owned(), |outer| format!("{outer} {name}")));
        level = sub.subcommand();
    }
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => return failure::usage(err),
    };
    let ctx = Ctx {
        db: cli.db,
        pg_schema: cli.pg_schema,
        out: Out::new(cli.json),
    };
    let result = match cli.command {
        Command::Init(args) => cmd::init::run(&ctx, args),
        Command::Enqueue(args) => cmd::enqueue::run(&ctx, args),
        Command::State(args) => cmd::state::run(&ctx, args),
        Command::History(args) => cmd::history::run(&ctx, args),
        Command::Claim(args) => cmd::claim::run(&ctx, args),
        Command::Renew(args) => cmd::renew::run(&ctx, args),
        Command::Complete(args) => cmd::complete::run(&ctx, args),
        Command::Release(args) => cmd::release::run(&ctx, args),
        Command::ClaimBatch(args) => cmd::claim_batch::run(&ctx, args),
        Command::Fail(args) => cmd::fail::run(&ctx, args),
        Command::Admit(args) => cmd::admit::run(&ctx, args),
        Command::List(args) => cmd::list::run(&ctx, args),
        Command::Stats(args) => cmd::stats::run(&ctx, args),
        Command::Purge(args) => cmd::purge::run(&ctx, args),
        Command::Cancel(args) => cmd::cancel::run(&ctx, args),
        Command::Retry(args) => cmd::retry::run(&ctx, args),
        Command::Delete(args) => cmd::delete::run(&ctx, args),
        Command::Queue(args) => cmd::queue::run(&ctx, args),
        Command::Schedule(args) => cmd::schedule::run(&ctx, args),
        Command::Work(args) => cmd::work::run(&ctx, args),
        Command::Serve(args) => cmd::serve::run(&ctx, args),
        Command::Demo(args) => cmd::demo::run(&ctx, args),
    };
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Refused) => ExitCode::from(1),
        Err(err) => failure::report(op.as_deref(), ctx.out, &err),
    }
}
