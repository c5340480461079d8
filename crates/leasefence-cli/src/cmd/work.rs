//! `leasefence work --exec CMD [--concurrency N] [--queue Q[=N]]… [--ttl T] [--drain]`: run a
//! shell command per job, from any language.
//!
//! Each claimed job runs `sh -c CMD` with the payload on stdin and `LEASEFENCE_JOB_ID`,
//! `LEASEFENCE_FENCE`, `LEASEFENCE_ATTEMPT`, `LEASEFENCE_QUEUE` and (for a job with a kind)
//! `LEASEFENCE_KIND` in the environment. While it runs, the lease is
//! renewed every third of the ttl. Exit status 0 stores its stdout as the result; any other
//! exit is a failure, retried with exponential backoff (stderr's tail is the recorded error) or
//! dead after the job's last attempt. When the lease is lost — the worker stalled past its ttl,
//! or the job was cancelled — the command's process group is stopped and nothing it produced
//! is stored. Stopping a command (lease lost, time limit, shutdown deadline) sends its process
//! group SIGTERM, and SIGKILL to whatever is left 2 s later: a command may trap SIGTERM to clean
//! up, but what it writes to the store after its lease is refused.
//!
//! SIGTERM (the stop signal of systemd, Docker and Kubernetes), SIGINT (Ctrl-C) and SIGHUP all
//! stop the worker the same way: no new claims, running commands get `--shutdown-deadline`
//! seconds to finish, then each one's process group is killed and its lease released (fence
//! kept) so another worker can take the job at once. A second signal cuts the deadline to
//! zero: the commands are killed and their leases released now. Either way `work` exits
//! normally, leaving no command behind (the library's `ShutdownHandle::on_signals`). A command
//! that dies of the same stop signal — systemd's default `KillMode=control-group` sends it to
//! every process of the service — has its job given back at once, not failed
//! (`work/interrupt.rs`).
//!
//! Exit status: `0` after a clean stop — by a signal or `--drain`, also when commands were
//! killed at the deadline and their jobs released, and whatever the commands' own exit
//! statuses were (a failed command is a retried or dead job, not a failed `work`); `2` on bad
//! flags or a database error, `3` when the database stayed busy or the server unavailable
//! (running jobs are shut down gracefully first).

use std::collections::HashSet;
use std::io::Write as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use leasefence::{Backoff, JobContext, Store, Worker};
use serde_json::json;

mod drain;
mod interrupt;
mod progress;

use crate::cmd::args;
use crate::cmd::shared::invalid;
use crate::ctx::Ctx;
use crate::output::{Out, Outcome};
use drain::Drain;
use interrupt::Interrupts;
use progress::{Progress, RUNNING};

/// How much of a failing command's stderr is kept as the job's error.
const STDERR_TAIL: usize = 2000;

/// What `work --help` says after the flags: signals and exit status.
const AFTER_HELP: &str = "\
Each job's command gets the payload on stdin and, in its environment, LEASEFENCE_JOB_ID (the \
job id), LEASEFENCE_FENCE (the lease's fence: pass it to `leasefence admit` before writing to \
an external resource), LEASEFENCE_ATTEMPT (1 on the first run, counting the runs of the job), \
LEASEFENCE_QUEUE (the job's queue), for a job with a kind LEASEFENCE_KIND, and on PostgreSQL \
LEASEFENCE_PG_SCHEMA (the worker's schema). Its stdout becomes the result when it exits 0 \
(it must be UTF-8 text: other bytes fail the attempt); once the command's process group is \
gone its output is read for at most 0.5 s more, so a daemon it detached (setsid) does not hold \
the job. The rest of the worker's environment is passed on as it is — LEASEFENCE_DB too when \
the worker read the database from it (a password in it included), so that the command can \
run `leasefence admit` (with --db on the command line, give the command its own); the tokens \
(LEASEFENCE_WORKER_TOKEN, LEASEFENCE_ADMIN_TOKEN) never are.

Queues: without --queue the worker takes jobs of every queue, --concurrency at a time. Each \
--queue Q serves only the queue Q, with jobs of its own: N at a time for --queue Q=N, else \
--concurrency. A paused queue (`leasefence queue pause Q`) hands out nothing until resumed.

With --json: one object per finished job, `op` \"work\", its `job_id` and `event` (completed, \
retrying, dead, refused, cancelled, released, killed, store_error), `ok` true only for \
completed; then one `stopped` object with the counts.

Stopping: SIGTERM, SIGINT (Ctrl-C) and SIGHUP stop claiming; running commands get \
--shutdown-deadline seconds to finish, then their process groups are killed and their jobs \
released (fence kept), claimable again at once. A second signal does that now. A command that \
dies of the stop signal itself (systemd's default KillMode sends it to every process of the \
service) is not a failure: its job is given back at once (fence kept, attempt refunded), not \
failed by --timeout; a busy database is tried again until the deadline. A command is killed as SIGTERM to its process group, then SIGKILL 2 s later to \
what is left.

Exit status: 0 after a clean stop (by a signal or --drain, also when commands were killed at \
the deadline; a failing command is a retried or dead job, not a failed worker), 2 on bad flags \
or a database error, 3 when the database was busy or the server unavailable as it started (run \
it again; once running, the worker waits those out).";

/// Arguments of `work`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The shell command run for each job (`sh -c CMD`); the payload is on its stdin, its
    /// stdout becomes the result.
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    exec: String,
    /// Number of jobs run at the same time (1 to 256); with --queue, per queue that does not
    /// give its own N.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = args::count(1, 256)
    )]
    concurrency: u32,
    /// Serve only the queue Q (repeat for several), each with N jobs at a time of its own
    /// [default: every queue, --concurrency at a time].
    #[arg(
        long = "queue",
        value_name = "Q[=N]",
        value_parser = args::queue_threads
    )]
    queues: Vec<(String, Option<u32>)>,
    /// Lease duration in seconds; renewed every third of it while the command runs.
    #[arg(
        long,
        default_value_t = 30.0,
        value_name = "SECS",
        allow_negative_numbers = true,
        value_parser = args::seconds(true)
    )]
    ttl: f64,
    /// Stop once no job is ready and none is running, instead of waiting for more work until
    /// a signal (SIGTERM, Ctrl-C). Jobs whose retry or not-before time is still ahead are left for a later run.
    #[arg(long)]
    drain: bool,
    /// Also take the scheduler role when no other worker holds it: enqueue the runs of every
    /// schedule (`leasefence schedule add`) as they fall due, under a lease and fence of the
    /// role's own, so any number of workers may ask for it and no slot runs twice.
    #[arg(long)]
    scheduler: bool,
    /// Seconds before the first retry of a failed job; doubles with every attempt (±20 %
    /// jitter), at most `--retry-max`. `0` retries at once.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "SECS",
        allow_negative_numbers = true,
        value_parser = args::seconds(false)
    )]
    retry_delay: f64,
    /// The longest delay between retries, in seconds.
    #[arg(
        long,
        default_value_t = 3600.0,
        value_name = "SECS",
        allow_negative_numbers = true,
        value_parser = args::seconds(false)
    )]
    retry_max: f64,
    /// Seconds between looks at an empty queue.
    #[arg(
        long,
        default_value_t = 0.5,
        value_name = "SECS",
        allow_negative_numbers = true,
        value_parser = args::seconds(true)
    )]
    poll: f64,
    /// On SIGTERM or Ctrl-C, seconds running commands get to finish before they are killed
    /// and their leases released (a second signal: at once).
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "SECS",
        allow_negative_numbers = true,
        value_parser = args::seconds(false)
    )]
    shutdown_deadline: f64,
    /// A run-time limit per job, in seconds [default: none]: past it the command's process
    /// group is killed and the attempt fails with a timeout error (retried per the backoff, or
    /// dead after the job's last attempt).
    #[arg(
        long,
        value_name = "SECS",
        allow_negative_numbers = true,
        value_parser = args::seconds(true)
    )]
    timeout: Option<f64>,
    /// Owner names are `PREFIX-N`, one per concurrent job [default: hostname-pid].
    #[arg(long, value_name = "PREFIX")]
    owner: Option<String>,
    /// Work through a `leasefence serve` at URL (http:// or https://) instead of the database:
    /// the same claims, heartbeats and fenced writes over its HTTP API, so the worker needs no
    /// database credentials. The worker token comes from --token-file or
    /// LEASEFENCE_WORKER_TOKEN.
    #[arg(
        long,
        value_name = "URL",
        env = "LEASEFENCE_SERVER",
        hide_env_values = true
    )]
    server: Option<String>,
    /// With --server: a file holding the worker token [default: LEASEFENCE_WORKER_TOKEN].
    #[arg(long, value_name = "FILE", requires = "server")]
    token_file: Option<std::path::PathBuf>,
}

fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        // 1e300 is finite and >= 0: say what is wrong with it instead.
        let why = if value.is_finite() && value >= 0.0 {
            format!("must be at most {} seconds, got {value:e}", u64::MAX)
        } else {
            format!("must be a finite number of seconds >= 0, got {value}")
        };
        invalid(flag, why)
    })
}

/// Runs the worker until the queue is drained (`--drain`) or a stop signal; exit 0 when it
/// stopped cleanly, 2 on a database error or bad flags (3 for a busy database, in `main`).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let out = ctx.out;
    init_logging();
    if args.exec.trim().is_empty() {
        return Err(invalid(
            "--exec",
            "is empty; give the shell command to run for each job, e.g. --exec 'cat | wc -c'",
        ));
    }
    let poll = seconds("--poll", args.poll)?;
    if poll.is_zero() {
        return Err(invalid("--poll", "must be greater than 0"));
    }
    let deadline = seconds("--shutdown-deadline", args.shutdown_deadline)?;
    seconds("--retry-delay", args.retry_delay)?;
    seconds("--retry-max", args.retry_max)?;
    let backoff = Backoff {
        base: args.retry_delay,
        max: args.retry_max,
        ..Backoff::default()
    };

    match args.server.clone() {
        Some(url) => {
            if ctx.db.is_some() {
                return Err(invalid(
                    "--server",
                    "give the database (--db, or LEASEFENCE_DB in the environment) or --server \
                     (a leasefence serve in front of it), not both; with LEASEFENCE_DB exported \
                     for the other verbs, unset it for this one (env -u LEASEFENCE_DB)",
                ));
            }
            if args.scheduler {
                return Err(invalid(
                    "--scheduler",
                    "the scheduler role is not offered over HTTP; run `work --scheduler` against \
                     the database",
                ));
            }
            // Read as serve reads it: a variable set but empty or not UTF-8 is an error.
            let token = crate::cmd::shared::token(
                (args.token_file.as_deref(), "--token-file"),
                "LEASEFENCE_WORKER_TOKEN",
                "worker token",
            )?;
            let store = leasefence_server::HttpStore::new(&url, token)?;
            work(out, &args, backoff, poll, deadline, None, move || {
                Ok(store.clone())
            })
        }
        // One store per worker thread (and one for the heartbeat).
        None => {
            let schema = ctx.shown()?.schema;
            work(out, &args, backoff, poll, deadline, schema, ctx.opener()?)
        }
    }
}

/// The worker's outage lines on stderr — the store (database or server) unreachable, with the
/// reason, and answering again, once each — and nothing else of the library's log: every job's
/// outcome is already a line on stdout.
fn init_logging() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let outages = tracing_subscriber::filter::Targets::new()
        .with_target(leasefence::OUTAGE_TARGET, tracing::Level::WARN);
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_filter(outages),
        )
        .try_init();
}

/// Runs the worker on the stores `open` makes (the database's, or a server's); `pg_schema`:
/// the PostgreSQL schema the commands are told.
fn work<S: Store + Send + 'static>(
    out: Out,
    args: &Args,
    backoff: Backoff,
    poll: Duration,
    deadline: Duration,
    pg_schema: Option<String>,
    open: impl Fn() -> leasefence::Result<S> + Send + Sync + 'static,
) -> anyhow::Result<Outcome> {
    let total: u32 = if args.queues.is_empty() {
        args.concurrency
    } else {
        args.queues
            .iter()
            .map(|(_, n)| n.unwrap_or(args.concurrency))
            .sum()
    };
    let progress = Progress::new(total)?;
    let tally = progress.clone();
    let interrupts = Interrupts::default();
    let reported = interrupts.clone();
    let mut builder = Worker::builder(open)
        .concurrency(args.concurrency as usize)
        .ttl(args.ttl)
        .drain(args.drain)
        .scheduler(args.scheduler)
        .poll_interval(poll)
        .backoff(backoff)
        .shutdown_deadline(deadline)
        .on_outcome(move |lease, outcome| {
            tally.report(out, lease, outcome);
            reported.settled(lease);
        });
    if let Some(owner) = &args.owner {
        builder = builder.owner_prefix(owner.as_str());
    }
    for (queue, threads) in &args.queues {
        builder = builder.queue(queue.as_str(), threads.unwrap_or(args.concurrency) as usize);
    }
    if let Some(limit) = args.timeout {
        builder = builder.timeout(limit);
    }
    let exec = Exec {
        shell: args.exec.clone(),
        // The command's own `leasefence admit` must reach this worker's fence gate: the
        // schema given as --pg-schema is passed on, as LEASEFENCE_DB is.
        pg_schema,
    };
    let shown = progress.clone();
    let groups = Groups::default();
    let running = groups.clone();
    let handlers = interrupts.clone();
    let worker = builder
        .build(move |job| {
            run_command(&exec, job, out, &shown, &running, &handlers, deadline).map_err(Into::into)
        })
        .map_err(|e| match e.argument() {
            Some(arg) => anyhow::anyhow!(e).context(format!("--{}", arg.replace('_', "-"))),
            None => anyhow::anyhow!(e),
        })?;

    let bar = progress.bar.clone();
    worker
        .shutdown_handle()
        .on_signals_with(move |n| {
            SIGNALS.store(n, Ordering::SeqCst);
            let message = match n {
                1 => format!(
                    "leasefence: shutting down: no new jobs; running commands get {} s (signal \
                     again to stop them at once)",
                    deadline.as_secs_f64()
                ),
                2 => "leasefence: second signal: killing running commands and releasing their \
                      jobs now"
                    .to_string(),
                _ => "leasefence: already stopping: running commands are being killed".to_string(),
            };
            bar.suspend(|| eprintln!("{message}"));
        })
        .context("installing the handler of SIGTERM and SIGINT")?;

    let stats = worker.run();
    // Commands being stopped get their grace (SIGTERM, then SIGKILL after STOP_GRACE) and
    // their jobs' lines are printed, also when the worker stopped waiting for them sooner (a
    // second signal, a short deadline). Then a command whose thread is still running goes
    // too: no process group outlives `work`.
    interrupts.wait_idle(STOP_GRACE + Duration::from_millis(500));
    groups.kill_all();
    let stats = stats?;
    progress.bar.finish_and_clear();
    out.line(
        format!(
            "stopped: {} claimed, {} completed, {} retried, {} dead, {} timed out, {} leases lost, \
             {} stale writes refused, {} released at shutdown, {} cancelled by an operator, \
             {} store errors",
            stats.claimed,
            stats.completed,
            stats.retried,
            stats.dead,
            stats.timed_out,
            stats.lost,
            stats.stale_refused,
            stats.released,
            stats.cancelled,
            stats.errors
        ),
        json!({
            "op": "work",
            "event": "stopped",
            "ok": true,
            "claimed": stats.claimed,
            "renewed": stats.renewed,
            "completed": stats.completed,
            "retried": stats.retried,
            "dead": stats.dead,
            "lost": stats.lost,
            "stale_refused": stats.stale_refused,
            "released": stats.released,
            "cancelled": stats.cancelled,
            "timed_out": stats.timed_out,
            "errors": stats.errors,
        }),
    );
    Ok(Outcome::Done)
}

/// The process groups of the commands running now, to kill whatever is left when `work` ends.
#[derive(Clone, Default)]
struct Groups(Arc<Mutex<HashSet<u32>>>);

impl Groups {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<u32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Kills every process group still listed.
    fn kill_all(&self) {
        for group in self.set().drain() {
            kill_pgid(group);
        }
    }
}

/// The command `work` runs for each job, and what its environment adds.
struct Exec {
    /// The `--exec` text, run by `sh -c`.
    shell: String,
    /// On PostgreSQL, the schema: the command gets it as LEASEFENCE_PG_SCHEMA.
    pg_schema: Option<String>,
}

/// Runs the command for one job; `Ok(stdout)` on exit status 0.
/// How many stop signals `work` has received (the running commands' kill lines say whether a
/// second signal or the shutdown deadline stopped them).
static SIGNALS: AtomicU32 = AtomicU32::new(0);

fn run_command<S: Store>(
    exec: &Exec,
    job: &JobContext<'_, S>,
    out: Out,
    progress: &Progress,
    groups: &Groups,
    interrupts: &Interrupts,
    deadline: Duration,
) -> Result<String, String> {
    let _busy = interrupts.busy(job);
    progress.add(RUNNING, 1);
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(&exec.shell)
        .env("LEASEFENCE_JOB_ID", job.job_id())
        .env("LEASEFENCE_FENCE", job.fence().to_string())
        .env("LEASEFENCE_ATTEMPT", job.attempt().to_string())
        .env("LEASEFENCE_QUEUE", job.queue())
        .env_remove("LEASEFENCE_KIND")
        // A job's code never gets the worker's credentials: with them it could complete, fail
        // or claim any job (`work --server` reads its token from the environment).
        .env_remove("LEASEFENCE_WORKER_TOKEN")
        .env_remove("LEASEFENCE_ADMIN_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(kind) = job.kind() {
        command.env("LEASEFENCE_KIND", kind);
    }
    if let Some(schema) = &exec.pg_schema {
        command.env("LEASEFENCE_PG_SCHEMA", schema);
    }
    #[cfg(unix)]
    {
        // Its own process group: killed as a whole, and not hit by the terminal's Ctrl-C (the
        // worker decides when a running command stops).
        use std::os::unix::process::CommandExt as _;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start `sh -c {}`: {e}", exec.shell))?;
    groups.set().insert(child.id());

    let payload = job.payload().unwrap_or_default().to_vec();
    let stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A command that does not read its stdin closes the pipe early: not an error.
            let _ = stdin.write_all(&payload);
        }
    });
    let stdout = Drain::start(child.stdout.take());
    let stderr = Drain::start(child.stderr.take());

    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(format!("waiting for the command: {e}")),
        }
        if job.token().wait_timeout(Duration::from_millis(20)) {
            kill(&mut child);
            let why = if job.is_timed_out() {
                "timed out"
            } else if job.is_ended_by_operator() {
                "an operator ended the job"
            } else if job.is_lost() {
                "lease lost"
            } else if SIGNALS.load(Ordering::SeqCst) >= 2 {
                "second signal"
            } else {
                "shutdown deadline passed"
            };
            progress.bar.suspend(|| {
                out.line(
                    format!(
                        "killed {} (fence {}): {why}; its output is discarded",
                        crate::cmd::shared::one_line(job.job_id()),
                        job.fence()
                    ),
                    json!({
                        "op": "work", "event": "killed", "ok": false, "job_id": job.job_id(),
                        "fence": job.fence(), "reason": why,
                    }),
                )
            });
            break Err(format!("command killed: {why}"));
        }
    };
    let interrupted = status
        .as_ref()
        .is_ok_and(|&status| interrupts.stopped_by_signal(job, status));
    // The stop signal reached the command too: the attempt is given back at once (lease
    // released, fence kept, attempt refunded), not failed — settled before a `--timeout` could
    // fail it. `Ok(false)`: the worker had given the attempt up already (lost, timed out,
    // released at the deadline) and records it as that.
    let gave_back = interrupted.then(|| interrupt::give_back(job));
    if interrupted {
        // Given back: what a dead shell started may still be finishing (a trap cleaning up);
        // it gets until the worker's shutdown deadline (or a second signal: the token is
        // cancelled then), then is stopped as any command is. Not given back because the store
        // failed: the job waits, as any running job, for the worker's own release at its
        // deadline. `deadline` from now is only a backstop: the worker's counts from the stop.
        let awaits_release = matches!(gave_back, Some(Err(_)));
        let backstop = Instant::now() + deadline;
        while (awaits_release || group_alive(child.id()))
            && Instant::now() < backstop
            && !job.token().wait_timeout(Duration::from_millis(20))
        {}
        if group_alive(child.id()) {
            kill(&mut child);
        }
    }
    // Whatever the command left behind in its process group goes with it.
    kill_group(&child);
    groups.set().remove(&child.id());
    let _ = writer.join();
    let stdout = stdout.take();
    let stderr = stderr.take();
    let status = status?;
    if status.success() {
        // Results are text, as `complete --result-file` requires: bytes that are not UTF-8
        // fail the attempt instead of being stored altered.
        return String::from_utf8(stdout).map_err(|e| {
            format!(
                "the command exited 0 but its stdout is not UTF-8 (byte {} of {}); results are \
                 text: encode binary output (base64) or write it elsewhere",
                e.utf8_error().valid_up_to(),
                e.as_bytes().len()
            )
        });
    }
    let error = failure(status, &stderr);
    match gave_back {
        // Given back: the worker reports the job released and records nothing of this.
        Some(Ok(true)) => Err(format!("{error} (given back: the worker is stopping)")),
        Some(Ok(false)) => Err(format!(
            "{error} (the worker's stop signal reached the command too)"
        )),
        // Released by the worker at its deadline meanwhile, unless the attempt ended otherwise.
        Some(Err(e)) => Err(format!(
            "{error} (the worker's stop signal reached the command too; giving the attempt \
             back failed: {e})"
        )),
        None => Err(error),
    }
}

/// The recorded error of a failed command: its exit status and the tail of its stderr.
fn failure(status: ExitStatus, stderr: &[u8]) -> String {
    let how = match status.code() {
        Some(code) => format!("exit status {code}"),
        None => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt as _;
                format!("killed by signal {}", status.signal().unwrap_or(0))
            }
            #[cfg(not(unix))]
            {
                "terminated".to_string()
            }
        }
    };
    let start = stderr.len().saturating_sub(STDERR_TAIL);
    let tail = String::from_utf8_lossy(&stderr[start..]);
    let tail = tail.trim();
    if tail.is_empty() {
        how
    } else {
        format!("{how}: {tail}")
    }
}

/// How long a command asked to stop (SIGTERM to its process group) has to exit before it and
/// its group are killed (SIGKILL).
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Stops the command: SIGTERM to its process group, then — if it has not exited within
/// [`STOP_GRACE`] — SIGKILL to everything left in the group; then reaps it. Its lease is
/// already over (lost, timed out or given back), so nothing it writes afterwards is stored;
/// the grace only lets it clean up.
fn kill(child: &mut Child) {
    signal_group(child.id(), Stop::Ask);
    let asked = std::time::Instant::now();
    // Until every process of the group is gone — not only the shell: `sh -c 'script'` dies on
    // SIGTERM at once while the script it runs traps it and cleans up.
    while asked.elapsed() < STOP_GRACE {
        let _ = child.try_wait(); // reaps the shell once it exits
        if !group_alive(child.id()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_group(child);
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether any process of the group `group` is still alive (a zombie not yet reaped counts).
#[cfg(unix)]
fn group_alive(group: u32) -> bool {
    use nix::sys::signal::killpg;
    use nix::unistd::Pid;
    i32::try_from(group).is_ok_and(|pid| killpg(Pid::from_raw(pid), None).is_ok())
}

#[cfg(not(unix))]
fn group_alive(_group: u32) -> bool {
    false
}

/// How a command's process group is signalled.
#[derive(Clone, Copy)]
enum Stop {
    /// SIGTERM.
    Ask,
    /// SIGKILL.
    Force,
}

/// Kills the command's process group (its pid is the group's id).
fn kill_group(child: &Child) {
    kill_pgid(child.id());
}

fn kill_pgid(group: u32) {
    signal_group(group, Stop::Force);
}

#[cfg(unix)]
fn signal_group(group: u32, how: Stop) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let signal = match how {
        Stop::Ask => Signal::SIGTERM,
        Stop::Force => Signal::SIGKILL,
    };
    if let Ok(pid) = i32::try_from(group) {
        // ESRCH (the group is already gone) is the common case after a normal exit.
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

#[cfg(not(unix))]
fn signal_group(_group: u32, _how: Stop) {}
