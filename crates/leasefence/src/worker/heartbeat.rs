//! The heartbeat: the supervising thread renews the leases of every job in flight, and at the
//! shutdown deadline gives back the ones still running.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::job::{Beat, Job, LOSS_TAKEN_OVER, Phase, SETTLED_RELEASED};
use super::loss::{classify, mark_lost};
use super::shared::{Shared, TICK, busy_retry, is_connection_fault};
use super::stats::bump;
use super::sync::lock;
use crate::store::Store;
use crate::types::{Lease, Now};

/// Renews, with one [`Store::renew_batch`], every queued or running job whose last renewal is
/// `heartbeat` seconds old on the clock. A refused renew of a job still queued or running
/// marks it lost and cancels its token, once the reason of every refusal of the tick is known.
///
/// No job's lock is held across the database call: which jobs are due is read under each
/// job's lock, released at once; the answers are applied under it again, and only to jobs
/// still queued or running. So a slow or busy renewal never stalls a thread that is finishing
/// its job, and a job that finished, was released or lost meanwhile is left alone. A renewal
/// that fails (a busy database, a server down) is tried again after [`retry_pause`]; returns
/// `false` then, `true` when the call was answered or nothing was due.
pub(super) fn heartbeat<S: Store>(shared: &Shared<S>, store: &S) -> bool {
    let now = shared.clock_now();
    let in_flight = shared.in_flight();
    let due: Vec<&Arc<Job>> = in_flight
        .iter()
        .filter(|job| !job.timed_out.load(Ordering::SeqCst))
        .filter(|job| is_due(&lock(&job.beat), now, shared))
        .collect();
    if due.is_empty() {
        return true;
    }
    let leases: Vec<&Lease> = due.iter().map(|job| &job.lease).collect();
    let answers = Now::new(now).and_then(|at| store.renew_batch(&leases, at, shared.config.ttl));
    match answers {
        Ok(answers) => {
            shared.reachable(&format_args!("{}-heartbeat", shared.config.owner_prefix));
            let mut refused = Vec::new();
            for (job, renewed) in due.into_iter().zip(answers) {
                if renewed {
                    apply(shared, job, now);
                } else if lock(&job.beat).phase.is_renewable() {
                    // Why, asked without holding the job's lock (one read, on refusals only).
                    refused.push((job, classify(store, &job.lease, now)));
                }
            }
            // Every refusal is judged before any handler is told: a handler told first could
            // free its thread, which could claim another refused job given back by an
            // operator, and that job would then look taken over instead of released.
            for (job, reason) in refused {
                mark_lost(&shared.counters, job, reason, now);
            }
            true
        }
        // The store unreachable (a restart, a cut network): an outage, said once; the leases
        // are given up by the clock if it lasts past their end.
        Err(e) if is_connection_fault(&e) || matches!(e, crate::Error::Unavailable { .. }) => {
            bump(&shared.counters.errors);
            shared.unreachable(
                &format_args!("{}-heartbeat", shared.config.owner_prefix),
                &e,
            );
            false
        }
        Err(e) => {
            bump(&shared.counters.errors);
            tracing::warn!(
                leases = leases.len(), error = %e,
                "renew failed; trying again shortly"
            );
            false
        }
    }
}

/// How long after a renewal that failed began the heartbeat tries again: a tenth of the time a
/// lease has left when it is first due (`ttl − heartbeat`), at least a tick and at most a
/// second. A failure can be instant (a server down refuses the connection, a proxy answers 503
/// at once): without a pause the heartbeat would send a renewal every tick. Ten tries fit in
/// what is left of the lease, so a store that answers again in time still renews; a try that
/// took longer than the pause to fail (a busy database's timeout) is made again at once.
pub(super) fn retry_pause<S>(shared: &Shared<S>) -> Duration {
    pause_after_failure(shared.config.ttl.seconds(), shared.config.heartbeat)
}

/// [`retry_pause`] for a lease of `ttl` seconds renewed every `heartbeat` seconds; the async
/// worker's heartbeat waits the same.
pub(crate) fn pause_after_failure(ttl: f64, heartbeat: f64) -> Duration {
    let left = ttl - heartbeat;
    Duration::from_secs_f64((left / 10.0).clamp(TICK.as_secs_f64(), 1.0))
}

/// Whether a job's lease is to be renewed at `now`: queued or running, and last renewed
/// `heartbeat` seconds ago.
fn is_due<S>(beat: &Beat, now: f64, shared: &Shared<S>) -> bool {
    beat.phase.is_renewable() && now >= beat.renewed_at + shared.config.heartbeat
}

/// Applies a granted renewal made at `now`, under the job's lock, to a job still queued or
/// running.
fn apply<S>(shared: &Shared<S>, job: &Job, now: f64) {
    let lease = &job.lease;
    let mut beat = lock(&job.beat);
    if !beat.phase.is_renewable() {
        return; // finishing, released or lost since the renewal was asked for: left alone
    }
    beat.renewed_at = now;
    beat.until = now + shared.config.ttl.seconds();
    bump(&shared.counters.renewed);
    tracing::debug!(
        job_id = %lease.job_id, fence = lease.fence, until = beat.until, "renewed"
    );
}

/// Marks lost every queued or running job whose lease has run out by the worker's own clock
/// with no renewal granted — the database unreachable, a partitioned network — and cancels its
/// token: the handler is told when the lease ends, not only once the store answers again.
/// Whatever it writes after that would be refused anyway (the lease is over, and another
/// worker may hold the job under a higher fence). A job past its time limit is left to the
/// failure being recorded for it.
pub(super) fn enforce_expiry<S>(shared: &Shared<S>) {
    let now = shared.clock_now();
    for job in shared.in_flight() {
        if job.timed_out.load(Ordering::SeqCst) {
            continue;
        }
        let expired = {
            let beat = lock(&job.beat);
            beat.phase.is_renewable() && now >= beat.until
        };
        if expired {
            mark_lost(&shared.counters, &job, LOSS_TAKEN_OVER, now);
        }
    }
}

/// Enforces the run-time limit ([`WorkerBuilder::timeout`](crate::WorkerBuilder::timeout)):
/// a handler that has run that long on the clock is timed out — its token cancelled, its
/// lease no longer renewed, its attempt to be recorded as a failure.
pub(super) fn enforce_timeouts<S>(shared: &Shared<S>) {
    let Some(limit) = shared.config.timeout else {
        return;
    };
    let now = shared.clock_now();
    for job in shared.in_flight() {
        let beat = lock(&job.beat);
        let over =
            beat.phase == Phase::Running && beat.started_at.is_some_and(|t| now >= t + limit);
        if over && !job.timed_out.swap(true, Ordering::SeqCst) {
            bump(&shared.counters.timed_out);
            job.token.cancel();
            tracing::warn!(
                job_id = %job.lease.job_id, fence = job.lease.fence, limit,
                "the handler ran past its time limit; cancelling it, the attempt fails"
            );
        }
    }
}

/// At the shutdown deadline: cancels every job still running and gives its lease back, fenced.
///
/// Each job is marked released under its lock, and the lock is dropped before the database
/// call: the cancelled handler's thread, finding the job released, writes nothing (see
/// `run_batch`), so the release never races a late outcome and no job's lock waits on the
/// database. A job already finishing (its outcome being written) is left to that write; one
/// whose handler is giving it back (`JobContext::release`) is released as a running one is
/// (the first of the two releases to land wins, the other is refused); one its handler gave
/// back only has its token cancelled, so that what the handler still winds down stops.
///
/// This first half needs no database (the supervising thread makes it at the deadline itself):
/// it marks every job still queued or running released and cancels its token (its handler is
/// told at once, and its thread will write nothing), and returns those jobs, whose leases
/// [`release`] gives back.
pub(super) fn mark_released<S>(shared: &Shared<S>) -> Vec<Arc<Job>> {
    shared
        .in_flight()
        .into_iter()
        .filter(|job| {
            let mut beat = lock(&job.beat);
            // A release its handler is writing is taken over too: if the store is busy, the
            // handler's try fails while the deadline's retries go on.
            if !beat.phase.is_renewable() && beat.phase != Phase::Releasing {
                if job.settled.load(Ordering::SeqCst) == SETTLED_RELEASED {
                    // Given back by its handler, which may still be winding down (a
                    // subprocess cleaning up): told that the deadline has come.
                    job.token.cancel();
                }
                return false;
            }
            if job.timed_out.load(Ordering::SeqCst) {
                // Past its time limit the attempt is a failure, recorded when its handler
                // returns (or, should the worker stop first, spent when the lease expires):
                // never refunded by a release. Its token is cancelled already.
                return false;
            }
            beat.phase = Phase::Released;
            job.token.cancel();
            true
        })
        .collect()
}

/// The second half (on the heartbeat's thread): gives back the leases of `releasing`, fenced.
pub(super) fn release<S: Store>(shared: &Shared<S>, store: &S, releasing: Vec<Arc<Job>>) {
    for job in releasing {
        let lease = &job.lease;
        match busy_retry(shared, || store.release_lease(lease)) {
            Ok(true) => {
                bump(&shared.counters.released);
                tracing::info!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "released at the shutdown deadline; claimable again at once"
                );
            }
            Ok(false) => {
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence,
                    "release refused: the lease was no longer held"
                );
            }
            Err(e) => {
                bump(&shared.counters.errors);
                tracing::error!(
                    job_id = %lease.job_id, fence = lease.fence, error = %e,
                    "release failed; the lease will expire instead"
                );
            }
        }
    }
}
