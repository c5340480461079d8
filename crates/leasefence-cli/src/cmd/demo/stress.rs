//! The stress run: worker threads, each with its own store on the caller's clock, take jobs
//! from a shared queue on the real clock. Some stall past their lease after claiming and then
//! try to renew and complete with their old fence. Every acknowledged complete is recorded, and
//! at the end every job is read back through a fresh connection and judged.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use leasefence::{AnyStore, Fence, JobId, JobState, NewJob, Now, Owner, Store, Ttl};
use serde_json::json;

use crate::ctx::Purpose;
use crate::output::Out;

/// How often a call that met a busy database is tried again before the run gives up.
const BUSY_ATTEMPTS: u32 = 8;
/// How many offending jobs the report names when an invariant broke.
const EXAMPLES: usize = 5;

/// The shape of one stress run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Number of jobs.
    pub jobs: usize,
    /// Number of worker threads.
    pub workers: usize,
    /// Lease duration.
    pub ttl: Ttl,
    /// Fraction of first claims after which the worker stalls past its lease.
    pub stall_rate: f64,
    /// How the backend makes commits durable, for the notes of the report.
    pub durability: &'static str,
    /// How the jobs are enqueued, for the notes of the report.
    pub setup_note: &'static str,
}

/// Opens a fresh store for a purpose. Every store must take `now` from the caller: the run
/// judges its invariants on its own clock.
pub type Opener<'a> = dyn Fn(Purpose) -> leasefence::Result<AnyStore> + Sync + 'a;

/// What one acknowledged `complete` stored, as the worker was told.
#[derive(Debug, Clone, PartialEq)]
struct Ack {
    owner: String,
    fence: Fence,
    result: String,
}

/// Counters each worker keeps and the run sums up.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Claims after which the worker stalled past its lease.
    stalls: u64,
    /// Renews and completes of stalled workers that were refused (as they must be).
    stale_refused: u64,
    /// Renews and completes of stalled workers that the store accepted: broken.
    stale_accepted: u64,
    /// Claims refused because another worker's lease was live (as they must be).
    leased_refused: u64,
    /// Claims granted while a lease known to this run was still live: broken.
    live_claimed: u64,
    /// Claims refused on a job that was neither done nor leased: broken.
    claimable_refused: u64,
    /// Completes refused although owner, fence and a live lease were current: broken.
    live_refused: u64,
    /// Completes refused because the lease ran out before they got the write lock.
    late_refused: u64,
    /// Calls tried again after a busy database.
    busy_retries: u64,
    /// The longest time from the start of a claim to the return of its complete (stalls aside).
    slowest: Duration,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.stalls += o.stalls;
        self.stale_refused += o.stale_refused;
        self.stale_accepted += o.stale_accepted;
        self.leased_refused += o.leased_refused;
        self.live_claimed += o.live_claimed;
        self.claimable_refused += o.claimable_refused;
        self.live_refused += o.live_refused;
        self.late_refused += o.late_refused;
        self.busy_retries += o.busy_retries;
        self.slowest = self.slowest.max(o.slowest);
    }
}

/// What one worker reports when it stops: the completes it was told about, and its counters.
#[derive(Debug, Default)]
struct Tally {
    acks: Vec<(usize, Ack)>,
    counts: Counts,
}

/// A job in the queue.
#[derive(Debug, Clone, Copy)]
struct Item {
    /// Index into the job ids.
    job: usize,
    /// Not to be tried before this clock reading.
    not_before: f64,
    /// The end of a lease on this job known to be live (0 when none): a claim granted before
    /// it breaks the contract.
    leased_until: f64,
}

/// Real seconds since the Unix epoch that never go backwards: the wall clock read once, plus
/// a monotonic timer.
#[derive(Debug, Clone, Copy)]
struct Clock {
    epoch: f64,
    start: Instant,
}

impl Clock {
    fn start() -> Self {
        Clock {
            epoch: leasefence::Clock::now(&leasefence::SystemClock),
            start: Instant::now(),
        }
    }

    fn seconds(&self) -> f64 {
        self.epoch + self.start.elapsed().as_secs_f64()
    }

    fn now(&self) -> leasefence::Result<Now> {
        Now::new(self.seconds())
    }
}

/// What the workers share.
struct Shared<'a> {
    open: &'a Opener<'a>,
    ids: &'a [String],
    config: &'a Config,
    clock: Clock,
    queue: Mutex<VecDeque<Item>>,
    /// Jobs not yet finished: queued, or held by a worker that has not completed them.
    outstanding: AtomicUsize,
    /// Set when a worker failed or the run stopped making progress; the others stop.
    abort: AtomicBool,
    /// Stalls so far, over all workers.
    stalls: AtomicU64,
    /// Milliseconds since the clock's start at the last finished job.
    last_progress_ms: AtomicU64,
    progress: ProgressBar,
}

impl Shared<'_> {
    fn pop(&self) -> Option<Item> {
        self.lock().pop_front()
    }

    fn push(&self, item: Item) {
        self.lock().push_back(item);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Item>> {
        // A worker that panicked holding the lock cannot leave the queue half-updated.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finished(&self) {
        self.outstanding.fetch_sub(1, Ordering::SeqCst);
        self.last_progress_ms.store(
            self.clock.start.elapsed().as_millis() as u64,
            Ordering::SeqCst,
        );
        self.progress.inc(1);
    }

    /// Waits a moment for other workers; fails when no job finished for much longer than any
    /// stall could take.
    fn idle(&self) -> anyhow::Result<()> {
        let limit =
            Duration::from_secs(30) + Duration::from_secs_f64(4.0 * self.config.ttl.seconds());
        let idle = self.clock.start.elapsed()
            - Duration::from_millis(self.last_progress_ms.load(Ordering::SeqCst));
        if idle > limit {
            bail!(
                "no job finished for {:.0} s with {} outstanding; giving up",
                idle.as_secs_f64(),
                self.outstanding.load(Ordering::SeqCst)
            );
        }
        std::thread::sleep(Duration::from_millis(1));
        Ok(())
    }
}

/// Enqueues `config.jobs` jobs named `{prefix}job-NNNNN`, runs the workers and judges the
/// result through a fresh connection.
///
/// # Errors
/// Bad arguments, database errors (busy past [`BUSY_ATTEMPTS`] tries included), or a run that
/// stopped making progress.
pub fn run(open: &Opener<'_>, prefix: &str, config: &Config) -> anyhow::Result<Report> {
    let ids: Vec<String> = (0..config.jobs)
        .map(|i| format!("{prefix}job-{i:05}"))
        .collect();

    // Setup only: no fence is handed out while enqueueing, so these commits may be cheaper
    // ([`Purpose::Setup`]). Claims and completes are durable.
    let started = Instant::now();
    let setup = open(Purpose::Setup).context("opening the database to enqueue the stress jobs")?;
    // One round trip and one commit per batch instead of per job.
    for batch in ids.chunks(500) {
        let jobs = batch
            .iter()
            .map(|id| NewJob::new(id.as_str()))
            .collect::<leasefence::Result<Vec<_>>>()?;
        let inserted = setup.enqueue_many(&jobs)?;
        if let Some((id, _)) = batch.iter().zip(inserted).find(|(_, new)| !new) {
            bail!("job {id} already exists; the stress run needs fresh ids");
        }
    }
    drop(setup);
    let enqueue_time = started.elapsed();

    let progress = ProgressBar::new(config.jobs as u64);
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} stress run [{elapsed}] {wide_bar} {pos}/{len} jobs done ({per_sec})",
        )
        .context("progress bar template")?,
    );
    let shared = Shared {
        open,
        ids: &ids,
        config,
        clock: Clock::start(),
        queue: Mutex::new(
            (0..config.jobs)
                .map(|job| Item {
                    job,
                    not_before: 0.0,
                    leased_until: 0.0,
                })
                .collect(),
        ),
        outstanding: AtomicUsize::new(config.jobs),
        abort: AtomicBool::new(false),
        stalls: AtomicU64::new(0),
        last_progress_ms: AtomicU64::new(0),
        progress,
    };

    let started = Instant::now();
    let seed = shared.clock.epoch.to_bits();
    let outcomes: Vec<anyhow::Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..config.workers)
            .map(|w| {
                let shared = &shared;
                s.spawn(move || {
                    let outcome = worker(shared, w, seed ^ (w as u64 + 1));
                    if outcome.is_err() {
                        shared.abort.store(true, Ordering::SeqCst);
                    }
                    outcome
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let elapsed = started.elapsed();
    shared.progress.finish_and_clear();

    let mut acks: Vec<Vec<Ack>> = vec![Vec::new(); config.jobs];
    let mut counts = Counts::default();
    for outcome in outcomes {
        let tally = outcome?;
        for (job, ack) in tally.acks {
            acks[job].push(ack);
        }
        counts.add(tally.counts);
    }

    let mut report = judge(open, &ids, &acks)?;
    report.enqueue_time = enqueue_time;
    report.elapsed = elapsed;
    report.counts = counts;
    Ok(report)
}

/// One worker: claim, maybe stall, complete; until every job is finished.
fn worker(shared: &Shared<'_>, w: usize, seed: u64) -> anyhow::Result<Tally> {
    let name = format!("worker-{w}");
    let owner = Owner::new(&name)?;
    let store = (shared.open)(Purpose::Worker)
        .with_context(|| format!("{name}: opening its connection"))?;
    let mut rng = SplitMix64(seed);
    let mut tally = Tally::default();
    let counts = &mut tally.counts;
    let (clock, ttl) = (shared.clock, shared.config.ttl);

    while !shared.abort.load(Ordering::SeqCst) {
        let Some(item) = shared.pop() else {
            if shared.outstanding.load(Ordering::SeqCst) == 0 {
                break;
            }
            shared.idle()?;
            continue;
        };
        if item.not_before > clock.seconds() {
            shared.push(item);
            shared.idle()?;
            continue;
        }
        let id = &shared.ids[item.job];
        let job = JobId::new(id)?;

        let started = Instant::now();
        let mut claimed_at = clock.now()?;
        let claimed = retry(counts, || {
            claimed_at = clock.now()?;
            crate::cmd::claim(&store, job, owner, claimed_at, ttl)
        })
        .with_context(|| format!("{name}: claim {id}"))?;
        let Some((fence, until)) = claimed else {
            let row = retry(counts, || store.state(job))
                .with_context(|| format!("{name}: state {id}"))?;
            match row {
                Some(row) if !row.done => {
                    if row.until > claimed_at.seconds() {
                        counts.leased_refused += 1;
                    } else {
                        counts.claimable_refused += 1;
                    }
                    shared.push(Item {
                        job: item.job,
                        not_before: row.until,
                        leased_until: row.until,
                    });
                }
                // Done without this worker's complete: the verdict reports it.
                _ => shared.finished(),
            }
            continue;
        };
        if claimed_at.seconds() < item.leased_until {
            counts.live_claimed += 1;
        }

        if fence == 1 && rng.chance(shared.config.stall_rate) {
            counts.stalls += 1;
            if let Some(ack) = stall(shared, &store, (item.job, fence, until), &name, counts)? {
                tally.acks.push((item.job, ack));
            }
            continue;
        }

        let result = format!("result of {id} by {name} under fence {fence}");
        let mut completed_at = clock.now()?;
        let stored = retry(counts, || {
            completed_at = clock.now()?;
            store.complete(job, owner, fence, completed_at, &result)
        })
        .with_context(|| format!("{name}: complete {id}"))?;
        counts.slowest = counts.slowest.max(started.elapsed());
        if stored {
            tally.acks.push((
                item.job,
                Ack {
                    owner: name.clone(),
                    fence,
                    result,
                },
            ));
            shared.finished();
        } else {
            if completed_at.seconds() < until {
                counts.live_refused += 1;
            } else {
                // The lease ran out before the complete got the write lock.
                counts.late_refused += 1;
            }
            // Nobody else can hold the job (it was not queued): queue it again.
            shared.push(Item {
                job: item.job,
                not_before: 0.0,
                leased_until: 0.0,
            });
        }
    }
    Ok(tally)
}

/// A worker stalls after its claim of `job` under `fence` (lease until `until`): it puts the
/// job back for others, sleeps past its lease, then tries to renew and complete with the old
/// fence. Both must be refused; returns what the complete stored if it was not.
///
/// Stalls alternate between two timings. In one, the job may be tried from half a lease
/// before it expires (those early claims must be refused) and is usually taken over before the
/// stalled worker wakes. In the other, nobody may try it until after the stalled worker woke,
/// so its stale writes meet an expired lease still held under its own owner and fence: only
/// `until > now` refuses them.
fn stall(
    shared: &Shared<'_>,
    store: &AnyStore,
    (job, fence, until): (usize, Fence, f64),
    name: &str,
    counts: &mut Counts,
) -> anyhow::Result<Option<Ack>> {
    let (clock, ttl) = (shared.clock, shared.config.ttl);
    let id = &shared.ids[job];
    let job_id = JobId::new(id)?;
    let owner = Owner::new(name)?;
    let wake = until + (0.1 * ttl.seconds()).max(0.005);
    let not_before = if shared
        .stalls
        .fetch_add(1, Ordering::SeqCst)
        .is_multiple_of(2)
    {
        until - 0.5 * ttl.seconds()
    } else {
        wake + 0.5 * ttl.seconds()
    };
    shared.push(Item {
        job,
        not_before,
        leased_until: until,
    });
    while clock.seconds() < wake {
        std::thread::sleep(Duration::from_secs_f64(wake - clock.seconds()));
    }

    let renewed = retry(counts, || {
        store.renew(job_id, owner, fence, clock.now()?, ttl)
    })
    .with_context(|| format!("{name}: stale renew {id}"))?;
    let stale = format!("STALE result of {id} by {name} under fence {fence}");
    let stored = retry(counts, || {
        store.complete(job_id, owner, fence, clock.now()?, &stale)
    })
    .with_context(|| format!("{name}: stale complete {id}"))?;
    for accepted in [renewed, stored] {
        if accepted {
            counts.stale_accepted += 1;
        } else {
            counts.stale_refused += 1;
        }
    }
    Ok(stored.then(|| Ack {
        owner: name.to_owned(),
        fence,
        result: stale,
    }))
}

/// Calls `call` again while it fails with a retryable (busy) error, up to [`BUSY_ATTEMPTS`]
/// tries in all.
fn retry<T>(
    counts: &mut Counts,
    mut call: impl FnMut() -> leasefence::Result<T>,
) -> leasefence::Result<T> {
    let mut attempt = 1;
    loop {
        match call() {
            Err(e) if e.is_retryable() && attempt < BUSY_ATTEMPTS => {
                counts.busy_retries += 1;
                std::thread::sleep(Duration::from_millis(1 << attempt));
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The counts and the verdict of a run.
#[derive(Debug, Default)]
pub struct Report {
    enqueue_time: Duration,
    elapsed: Duration,
    jobs: usize,
    /// Jobs with exactly one acknowledged complete that are stored as done.
    done_once: usize,
    /// Jobs whose stored (owner, fence, result) differs from an acknowledged one.
    overwritten: usize,
    /// Examples of jobs that were not done exactly once or were overwritten.
    problems: Vec<String>,
    counts: Counts,
}

/// Reads every job back through a connection of its own and compares it with what the
/// workers were told.
fn judge(open: &Opener<'_>, ids: &[String], acks: &[Vec<Ack>]) -> anyhow::Result<Report> {
    let reader = open(Purpose::Verdict).context("opening a fresh connection for the verdict")?;
    let mut report = Report {
        jobs: ids.len(),
        ..Report::default()
    };
    for (id, acks) in ids.iter().zip(acks) {
        let row = reader
            .state(JobId::new(id)?)
            .with_context(|| format!("verdict: state {id}"))?;
        let mut problems = Vec::new();
        match (&row, acks.len()) {
            (None, _) => problems.push("missing from the store".to_owned()),
            (Some(row), 1) if row.done => report.done_once += 1,
            (Some(_), 0) => problems.push("no complete was acknowledged".to_owned()),
            (Some(_), 1) => problems.push("acknowledged, but not stored as done".to_owned()),
            (Some(_), n) => problems.push(format!("{n} completes acknowledged")),
        }
        let overwritten = row
            .as_ref()
            .and_then(|row| Some((row, acks.iter().find(|a| !still_stored(row, a))?)));
        if let Some((row, ack)) = overwritten {
            report.overwritten += 1;
            problems.push(format!(
                "acknowledged {:?} under fence {} by {}, stored {:?} under fence {} by {}",
                ack.result,
                ack.fence,
                ack.owner,
                row.result.as_deref().unwrap_or(""),
                row.fence,
                row.owner.as_deref().unwrap_or("none"),
            ));
        }
        for problem in problems {
            if report.problems.len() < EXAMPLES {
                report.problems.push(format!("{id}: {problem}"));
            }
        }
    }
    Ok(report)
}

/// Whether `row` still holds what `ack` stored (complete keeps owner and fence).
fn still_stored(row: &JobState, ack: &Ack) -> bool {
    row.result.as_deref() == Some(ack.result.as_str())
        && row.owner.as_deref() == Some(ack.owner.as_str())
        && row.fence == ack.fence
}

impl Report {
    /// The invariants of the run, each with its value and whether it held (`None`: a
    /// measurement, not an invariant).
    fn rows(&self, config: &Config) -> Vec<(&'static str, String, Option<bool>, String)> {
        let c = &self.counts;
        let zero = |n: u64| (n.to_string(), Some(n == 0), String::new());
        let mut rows = vec![(
            "jobs done exactly once",
            format!("{} / {}", self.done_once, self.jobs),
            Some(self.done_once == self.jobs),
            String::new(),
        )];
        let mut add = |name, (value, ok, note): (String, Option<bool>, String)| {
            rows.push((name, value, ok, note));
        };
        add(
            "stale writes refused",
            (
                c.stale_refused.to_string(),
                None,
                format!(
                    "{} stalled workers woke: renew + complete, old fence",
                    c.stalls
                ),
            ),
        );
        add("stale writes accepted", zero(c.stale_accepted));
        add("results overwritten", zero(self.overwritten as u64));
        add(
            "claims refused, lease live",
            (
                c.leased_refused.to_string(),
                None,
                "tried early on a stalled worker's job".to_owned(),
            ),
        );
        add("claims granted, lease live", zero(c.live_claimed));
        add("claims refused, claimable", zero(c.claimable_refused));
        add("completes refused, live", zero(c.live_refused));
        add(
            "completes refused, late",
            (
                c.late_refused.to_string(),
                None,
                "lease ran out while waiting for the write lock".to_owned(),
            ),
        );
        add(
            "busy retries",
            (c.busy_retries.to_string(), None, String::new()),
        );
        add(
            "slowest claim..complete",
            (
                format!("{:.3} s", c.slowest.as_secs_f64()),
                None,
                format!(
                    "ttl {} s; durable commits ({})",
                    config.ttl.seconds(),
                    config.durability
                ),
            ),
        );
        add(
            "enqueue",
            (
                format!("{:.2} s", self.enqueue_time.as_secs_f64()),
                None,
                config.setup_note.to_owned(),
            ),
        );
        add(
            "elapsed",
            (
                format!("{:.2} s", self.elapsed.as_secs_f64()),
                None,
                String::new(),
            ),
        );
        add(
            "throughput",
            (
                format!("{:.0} jobs/s", self.throughput()),
                None,
                "stalled workers' sleep included".to_owned(),
            ),
        );
        rows
    }

    fn throughput(&self) -> f64 {
        self.jobs as f64 / self.elapsed.as_secs_f64()
    }

    /// The names of the invariants that broke; empty when all held.
    pub fn broken(&self, config: &Config) -> Vec<&'static str> {
        self.rows(config)
            .into_iter()
            .filter(|(_, _, ok, _)| *ok == Some(false))
            .map(|(name, ..)| name)
            .collect()
    }

    /// Prints the summary table (or one JSON object).
    pub fn print(&self, config: &Config, out: Out) {
        let c = &self.counts;
        out.line(
            format_args!(
                "Stress run: {} jobs, {} workers, ttl {} s, stall rate {}, real clock:",
                self.jobs,
                config.workers,
                config.ttl.seconds(),
                config.stall_rate
            ),
            json!({
                    "op": "demo", "phase": "stress", "ok": self.broken(config).is_empty(),
                    "jobs": self.jobs, "workers": config.workers, "ttl": config.ttl.seconds(),
                    "stall_rate": config.stall_rate,
                    "done_exactly_once": self.done_once,
                    "stale_writes_refused": c.stale_refused,
                    "stale_writes_accepted": c.stale_accepted,
                    "results_overwritten": self.overwritten,
                    "stalls": c.stalls,
                    "claims_refused_lease_live": c.leased_refused,
                    "claims_granted_lease_live": c.live_claimed,
                    "claims_refused_claimable": c.claimable_refused,
                    "completes_refused_live": c.live_refused,
                    "completes_refused_late": c.late_refused,
                    "busy_retries": c.busy_retries,
                    "slowest_claim_to_complete_seconds": c.slowest.as_secs_f64(),
                    "enqueue_seconds": self.enqueue_time.as_secs_f64(),
                    "elapsed_seconds": self.elapsed.as_secs_f64(),
                    "throughput_jobs_per_s": self.throughput(),
                    "problems": self.problems,
            }),
        );
        for (name, value, ok, note) in self.rows(config) {
            let mark = match ok {
                Some(true) => "ok",
                Some(false) => "BROKEN",
                None => "",
            };
            let line = format!("  {name:<27} {value:>13}  {mark:<6} {note}");
            out.text(line.trim_end());
        }
        for problem in &self.problems {
            out.text(format_args!("  BROKEN {problem}"));
        }
    }
}

/// A small, fast pseudo-random generator (SplitMix64); good enough to pick stalls.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `true` with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}
