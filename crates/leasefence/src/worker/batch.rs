//! The jobs one thread claimed together: run their handlers in order, write their outcomes
//! (the quick results together, in one transaction), and give back the unstarted ones when
//! the worker stops.

use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::context::JobContext;
use super::job::{
    Job, LOSS_OPERATOR, Phase, SETTLED_CANCELLED, SETTLED_COMPLETED, SETTLED_REFUSED,
    SETTLED_RELEASED, UNSETTLED,
};
use super::loss::refused;
use super::shared::{Shared, Slot, busy_retry, write_retry};
use super::stats::{JobOutcome, bump};
use super::sync::lock;
use crate::store::Store;
use crate::types::{Failed, JobInfo, Lease, Now, Status};

/// The default for [`WorkerBuilder::batch`](crate::WorkerBuilder::batch). Only quick handlers
/// (under ~80 µs a job) fill it; measured against 32 and 64 in `docs/benchmarks.md`.
pub(super) const DEFAULT_BATCH: usize = 128;
/// How much handler time a batch claim aims for, and how long a result may wait to be
/// written with others.
const BATCH_WINDOW: Duration = Duration::from_millis(10);

/// The next claim's size: as many jobs as fit in [`BATCH_WINDOW`] at `per_job` each (and in a
/// quarter of the heartbeat interval), between 1 and the configured batch.
pub(super) fn batch_size_for<S>(per_job: Duration, shared: &Shared<S>) -> usize {
    let window = BATCH_WINDOW
        .as_secs_f64()
        .min(shared.config.heartbeat / 4.0);
    let fits = window / per_job.as_secs_f64().max(1e-9);
    (fits as usize).clamp(1, shared.config.batch)
}

/// Runs the handlers of one claimed batch in order and stores their outcomes; returns the
/// mean time its handlers ran per job (the writes left out: a slow commit must not shrink the
/// next claim to one job, which would add a commit per job). Results are written together (one transaction) at the end of the
/// batch, or earlier once the oldest has waited [`BATCH_WINDOW`].
pub(super) fn run_batch<S: Store + 'static>(
    shared: &Shared<S>,
    slot: &Slot,
    store: &S,
    leases: Vec<Lease>,
    claimed_at: f64,
) -> Duration {
    let counters = &shared.counters;
    let jobs: Vec<Arc<Job>> = leases
        .into_iter()
        .map(|lease| {
            bump(&counters.claimed);
            tracing::info!(
                job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner,
                until = lease.until, "claimed"
            );
            Arc::new(Job::new(lease, claimed_at))
        })
        .collect();
    *lock(&slot.jobs) = jobs.clone();
    let mut handling = Duration::ZERO;
    let mut ran = 0u32;
    let mut results: Vec<(Arc<Job>, String)> = Vec::new();
    let mut oldest: Option<Instant> = None;
    for job in &jobs {
        if oldest.is_some_and(|t| t.elapsed() >= BATCH_WINDOW) {
            store_results(shared, store, std::mem::take(&mut results));
            oldest = None;
        }
        if shared.stop.is_cancelled() {
            break; // what is still queued is released below
        }
        {
            let mut beat = lock(&job.beat);
            if beat.phase != Phase::Queued {
                continue; // lost while it waited (renew refused) or released at the deadline
            }
            beat.phase = Phase::Running;
            beat.started_at = Some(shared.clock_now());
        }
        ran += 1;
        let ctx = JobContext {
            job,
            store,
            clock: &shared.clock,
            stop: &shared.stop,
            counters: &shared.counters,
        };
        let began = Instant::now();
        let returned = match shared.handler_for(&job.lease) {
            Ok(handler) => catch_unwind(AssertUnwindSafe(|| handler(&ctx))),
            // A kind this worker has no handler for: failed, never run by other code.
            Err(why) => Ok(Err(why)),
        };
        handling += began.elapsed();
        let settled = job.settled.load(Ordering::SeqCst);
        // Past its time limit the attempt is a failure, whatever the handler returned.
        let timed_out = settled == UNSETTLED && job.timed_out.load(Ordering::SeqCst);
        if settled == UNSETTLED
            && !timed_out
            && let Ok(Ok(result)) = returned
        {
            // Written with the batch; the heartbeat keeps the lease alive meanwhile.
            results.push((job.clone(), result));
            oldest.get_or_insert_with(Instant::now);
            continue;
        }
        // Any other outcome is written now, with the heartbeat stopped first.
        let lease = &job.lease;
        if job.finish() == Phase::Released && settled == UNSETTLED {
            // Given back at the shutdown deadline while the handler ran: nothing to write.
            report(shared, lease, &JobOutcome::Released);
            continue;
        }
        let outcome = match (settled, returned) {
            (SETTLED_COMPLETED, _) => JobOutcome::Completed,
            (SETTLED_REFUSED, _) => JobOutcome::Refused,
            (SETTLED_RELEASED, _) => JobOutcome::Released,
            (SETTLED_CANCELLED, _) => JobOutcome::Cancelled,
            _ if timed_out => {
                let limit = shared.config.timeout.unwrap_or_default();
                let error = format!("timed out after {limit} s (the worker's time limit)");
                record_failure(shared, store, job, error)
            }
            (_, Ok(Ok(_))) => unreachable!("an unsettled result is written with the batch"),
            (_, Ok(Err(error))) => record_failure(shared, store, job, error),
            (_, Err(panic)) => {
                let error = format!("handler panicked: {}", panic_message(&*panic));
                record_failure(shared, store, job, error)
            }
        };
        report(shared, lease, &outcome);
    }
    store_results(shared, store, results);
    release_queued(shared, store, &jobs);
    lock(&slot.jobs).clear();
    handling / ran.max(1)
}

/// Hands the outcome to the `on_outcome` hook.
fn report<S>(shared: &Shared<S>, lease: &Lease, outcome: &JobOutcome) {
    if let Some(hook) = &shared.on_outcome
        && catch_unwind(AssertUnwindSafe(|| hook(lease, outcome))).is_err()
    {
        // The outcome is already stored; a broken hook must not take the thread down with it.
        bump(&shared.counters.errors);
        tracing::error!(job_id = %lease.job_id, fence = lease.fence, "the on_outcome hook panicked");
    }
}

/// Writes the waiting results: one `complete` for one, one `complete_batch` for several.
fn store_results<S: Store>(shared: &Shared<S>, store: &S, results: Vec<(Arc<Job>, String)>) {
    // A result whose job was released at the shutdown deadline meanwhile is not written.
    let (results, released): (Vec<_>, Vec<_>) = results
        .into_iter()
        .partition(|(job, _)| job.finish() != Phase::Released);
    for (job, _) in &released {
        report(shared, &job.lease, &JobOutcome::Released);
    }
    if !results.is_empty() {
        write_results(shared, store, results);
    }
}

/// Writes finished jobs' results, fenced, and reports each one's outcome.
fn write_results<S: Store>(shared: &Shared<S>, store: &S, results: Vec<(Arc<Job>, String)>) {
    let retried = write_retry(shared, || {
        let now = shared.now()?;
        match results.as_slice() {
            [(job, result)] => Ok(vec![store.complete_lease(&job.lease, now, result)?]),
            _ => {
                let items: Vec<(&Lease, &str)> = results
                    .iter()
                    .map(|(job, result)| (&job.lease, result.as_str()))
                    .collect();
                store.complete_batch(&items, now)
            }
        }
    });
    // A result the store cannot hold (larger than the server in between takes, a NUL byte on
    // PostgreSQL) fails the whole write: its neighbours are written alone, and it is recorded
    // as a failed attempt saying why — not left to expire and run again and again.
    if let Err(e) = &retried.answer
        && e.is_unstorable_result()
    {
        if results.len() > 1 {
            for one in results {
                write_results(shared, store, vec![one]);
            }
        } else {
            for (job, _) in &results {
                let error = format!("the result could not be stored: {e}");
                let outcome = record_failure(shared, store, job, error);
                report(shared, &job.lease, &outcome);
            }
        }
        return;
    }
    let written = retried.answer;
    for (k, (job, result)) in results.iter().enumerate() {
        let lease = &job.lease;
        let stored_now = matches!(&written, Ok(stored) if stored.get(k) == Some(&true));
        // Refused after a try whose connection was lost: that try may have been the one
        // that stored it.
        let stored_unseen = || {
            retried.maybe_landed
                && written.is_ok()
                && completed_earlier(shared, store, lease, result)
        };
        let outcome = match &written {
            _ if stored_now || stored_unseen() => {
                bump(&shared.counters.completed);
                tracing::info!(job_id = %lease.job_id, fence = lease.fence, "completed");
                JobOutcome::Completed
            }
            Ok(_) if refused(shared, store, job) => {
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner,
                    "completion refused: an operator ended the job; result not stored"
                );
                JobOutcome::Cancelled
            }
            Ok(_) => {
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner,
                    "stale completion refused: the lease is no longer current; result not stored"
                );
                JobOutcome::Refused
            }
            Err(e) => store_error(shared, lease, "complete", e),
        };
        report(shared, lease, &outcome);
    }
}

/// Ends the jobs of a batch that never started: those still queued (the worker is stopping)
/// are given back, fenced; every one of them — also those lost while they waited, or released
/// at the shutdown deadline — is told to the `on_outcome` hook, as every claimed job is.
fn release_queued<S: Store>(shared: &Shared<S>, store: &S, jobs: &[Arc<Job>]) {
    for job in jobs {
        let phase = {
            let mut beat = lock(&job.beat);
            if beat.started_at.is_some() {
                continue; // ran: told when its outcome was written
            }
            let phase = beat.phase;
            if phase == Phase::Queued {
                // Released: the heartbeat leaves it alone from now on, so the lock is not
                // needed across the write.
                beat.phase = Phase::Released;
            }
            phase
        };
        let lease = &job.lease;
        let outcome = match phase {
            Phase::Queued => release_unstarted(shared, store, lease),
            // Lost while it waited: its renewal was refused (counted then).
            Phase::Lost if job.loss.load(Ordering::SeqCst) == LOSS_OPERATOR => {
                JobOutcome::Cancelled
            }
            Phase::Lost => JobOutcome::Refused,
            // Released at the shutdown deadline by the heartbeat (counted there).
            _ => JobOutcome::Released,
        };
        report(shared, lease, &outcome);
    }
}

/// Gives back, fenced, the lease of a job that never started.
fn release_unstarted<S: Store>(shared: &Shared<S>, store: &S, lease: &Lease) -> JobOutcome {
    match busy_retry(shared, || store.release_lease(lease)) {
        Ok(true) => {
            bump(&shared.counters.released);
            tracing::info!(
                job_id = %lease.job_id, fence = lease.fence,
                "released unstarted at shutdown; claimable again at once"
            );
            JobOutcome::Released
        }
        Ok(false) => {
            tracing::warn!(
                job_id = %lease.job_id, fence = lease.fence,
                "release refused: the lease was no longer held"
            );
            JobOutcome::Refused
        }
        Err(e) => {
            bump(&shared.counters.errors);
            tracing::error!(
                job_id = %lease.job_id, fence = lease.fence, error = %e,
                "release failed; the lease will expire instead"
            );
            JobOutcome::StoreError(e.to_string())
        }
    }
}

/// The message a panic was raised with (`panic!`'s text), or `(no message)`.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

fn record_failure<S: Store>(shared: &Shared<S>, store: &S, job: &Job, error: String) -> JobOutcome {
    let lease = &job.lease;
    let counters = &shared.counters;
    let retried = write_retry(shared, || {
        let now = shared.now()?;
        let retry_at = shared.config.backoff.retry_at(lease, now);
        store.fail(lease, now, &error, Some(retry_at))
    });
    let written = match retried.answer {
        // Refused after a try whose connection was lost: that try may have been the one
        // that recorded it.
        Ok(None) if retried.maybe_landed => Ok(failed_earlier(shared, store, lease, &error)),
        other => other,
    };
    match written {
        Ok(Some(Failed::Retrying { at })) => {
            bump(&counters.retried);
            tracing::warn!(
                job_id = %lease.job_id, fence = lease.fence, %error, retry_at = at,
                "failed; will retry"
            );
            JobOutcome::Retrying { at, error }
        }
        Ok(Some(Failed::Dead)) => {
            bump(&counters.dead);
            tracing::error!(
                job_id = %lease.job_id, fence = lease.fence, %error,
                "failed on its last attempt; the job is dead"
            );
            JobOutcome::Dead { error }
        }
        Ok(None) if refused(shared, store, job) => {
            tracing::warn!(
                job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner, %error,
                "failure refused: an operator ended the job; nothing stored"
            );
            JobOutcome::Cancelled
        }
        Ok(None) => {
            tracing::warn!(
                job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner, %error,
                "stale failure refused: the lease is no longer current; nothing stored"
            );
            JobOutcome::Refused
        }
        Err(e) => store_error(shared, lease, "fail", e),
    }
}

/// Whether the job of `lease` is done under the lease's own fence with `result`: a
/// completion that was stored by a try whose answer was lost with its connection.
fn completed_earlier<S: Store>(shared: &Shared<S>, store: &S, lease: &Lease, result: &str) -> bool {
    let read = busy_retry(shared, || {
        store.inspect(lease.job(), Now::new(shared.clock_now())?)
    });
    matches!(read, Ok(Some(job)) if completed_under(&job, lease, result))
}

/// Whether `job`, read back, is done under `lease`'s own fence with `result`: the completion
/// of that lease, stored (the async worker judges its read the same way).
pub(crate) fn completed_under(job: &JobInfo, lease: &Lease, result: &str) -> bool {
    job.state.done && job.state.fence == lease.fence && job.state.result.as_deref() == Some(result)
}

/// How the failure `error` of `lease` was recorded, when a try whose answer was lost with its
/// connection recorded it: the job is no longer leased, still under the lease's fence, with
/// this error as its last one — ready again later, or dead (then also done) after its last
/// attempt. `None` when it was not (the refusal stands).
fn failed_earlier<S: Store>(
    shared: &Shared<S>,
    store: &S,
    lease: &Lease,
    error: &str,
) -> Option<Failed> {
    let read = busy_retry(shared, || {
        store.inspect(lease.job(), Now::new(shared.clock_now())?)
    });
    read.ok()
        .flatten()
        .and_then(|job| failed_under(&job, lease, error))
}

/// How `job`, read back, records the failure `error` of `lease`: no longer leased, still
/// under the lease's fence, with this error as its last one — ready again later, or dead.
/// `None` when it does not.
pub(crate) fn failed_under(job: &JobInfo, lease: &Lease, error: &str) -> Option<Failed> {
    let recorded = job.state.fence == lease.fence
        && job.state.owner.is_none()
        && job.error.as_deref() == Some(error);
    if !recorded {
        return None;
    }
    Some(match job.status {
        Status::Dead => Failed::Dead,
        _ => Failed::Retrying { at: job.not_before },
    })
}

fn store_error<S>(shared: &Shared<S>, lease: &Lease, op: &str, e: impl Display) -> JobOutcome {
    bump(&shared.counters.errors);
    tracing::error!(
        job_id = %lease.job_id, fence = lease.fence, op, error = %e,
        "could not record the outcome; the lease will expire"
    );
    JobOutcome::StoreError(e.to_string())
}
