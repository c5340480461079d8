//! The stress run: worker threads, each with its own store on the caller's clock, take jobs
//! from a shared queue on the real clock. Some stall past their lease after claiming and then
//! try to renew and complete with their old fence. Every acknowledged complete is recorded, and
//! at the end every job is read back through a fresh connection and judged.
//!
//! - [`workload`]: the jobs, the queue the workers share, and what each worker tallies;
//! - [`worker`]: one worker thread (claim, maybe stall, complete);
//! - [`report`]: the verdict from reading every job back, and its rendering.

mod report;
mod worker;
mod workload;

use std::time::Instant;

use anyhow::{Context as _, bail};
use leasefence::{Clock, NewJob, Store as _};

pub use self::report::Report;
use self::workload::{Ack, Counts, Shared, Tally};
pub use self::workload::{Config, Opener};
use crate::ctx::Purpose;

/// How many jobs one `enqueue_many` call inserts while setting up.
const SETUP_BATCH: usize = 500;

/// Enqueues `config.jobs` jobs named `{prefix}job-NNNNN`, runs the workers on `clock` (the
/// demo passes [`leasefence::SystemClock`]) and judges the result through a fresh connection.
///
/// # Errors
/// Bad arguments, database errors (busy past the workers' retries included), or a run that
/// stopped making progress.
pub fn run(
    open: &Opener<'_>,
    clock: &dyn Clock,
    prefix: &str,
    config: &Config,
) -> anyhow::Result<Report> {
    let ids: Vec<String> = (0..config.jobs)
        .map(|i| format!("{prefix}job-{i:05}"))
        .collect();

    // Setup only: no fence is handed out while enqueueing, so these commits may be cheaper
    // ([`Purpose::Setup`]). Claims and completes are durable.
    let started = Instant::now();
    let setup = open(Purpose::Setup).context("opening the database to enqueue the stress jobs")?;
    for batch in ids.chunks(SETUP_BATCH) {
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

    let shared = Shared::new(open, &ids, config, clock)?;
    let started = Instant::now();
    let seed = clock.now().to_bits();
    let outcomes: Vec<anyhow::Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..config.workers)
            .map(|w| {
                let shared = &shared;
                s.spawn(move || {
                    shared.abort_on_error(worker::run(shared, w, seed ^ (w as u64 + 1)))
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

    let reader = open(Purpose::Verdict).context("opening a fresh connection for the verdict")?;
    let mut report = Report::judge(&reader, &ids, &acks)?;
    report.enqueue_time = enqueue_time;
    report.elapsed = elapsed;
    report.counts = counts;
    Ok(report)
}
