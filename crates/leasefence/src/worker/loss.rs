//! Why a lease ended under a running job — taken over by another claim or expired (what the
//! fence is for), or ended by an operator (cancel, retry, delete, release) — and marking the
//! job lost, counted under the right name.

use std::sync::atomic::Ordering;

use super::job::{Job, LOSS_NONE, LOSS_OPERATOR, LOSS_TAKEN_OVER, Phase};
use super::shared::Shared;
use super::stats::{Counters, bump};
use super::sync::lock;
use crate::store::Store;
use crate::types::{JobInfo, Lease, Now, Status};

/// Asks the store (one read) why `lease` is no longer current at `now`: `LOSS_OPERATOR` when
/// the job was deleted, cancelled, or given back under this very fence (retried or released
/// by an operator); otherwise `LOSS_TAKEN_OVER` (a newer fence, or the lease expired). A read
/// that fails counts as taken over.
pub(super) fn classify<S: Store>(store: &S, lease: &Lease, now: f64) -> u8 {
    match Now::new(now).and_then(|at| store.inspect(lease.job(), at)) {
        Ok(info) => reason(info.as_ref(), lease),
        Err(_) => LOSS_TAKEN_OVER,
    }
}

/// Why `lease` is not current, judged from the job as the store shows it (`None`: deleted).
pub(crate) fn reason(info: Option<&JobInfo>, lease: &Lease) -> u8 {
    match info {
        None => LOSS_OPERATOR,
        Some(job) if job.status == Status::Cancelled => LOSS_OPERATOR,
        Some(job)
            if job.state.fence == lease.fence && job.state.owner.is_none() && !job.state.done =>
        {
            LOSS_OPERATOR
        }
        _ => LOSS_TAKEN_OVER,
    }
}

/// Marks a queued or running job lost for `reason` (under its lock), counts it — `lost` for a
/// takeover, `cancelled` for an operator — and cancels its token. A job no longer queued or
/// running is left alone. Returns whether it marked the job.
pub(super) fn mark_lost(counters: &Counters, job: &Job, reason: u8, now: f64) -> bool {
    let lease = &job.lease;
    let mut beat = lock(&job.beat);
    if !beat.phase.is_renewable() {
        return false;
    }
    beat.phase = Phase::Lost;
    job.loss.store(reason, Ordering::SeqCst);
    job.lost.store(true, Ordering::SeqCst);
    // Count before cancelling: whoever the token wakes must see the loss counted.
    if reason == LOSS_OPERATOR {
        bump(&counters.cancelled);
        tracing::warn!(
            job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner, now,
            "the job was cancelled, retried or deleted by an operator; cancelling the handler"
        );
    } else {
        bump(&counters.lost);
        tracing::warn!(
            job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner, now,
            until = beat.until,
            "lease lost: taken over or expired; cancelling the handler, its writes will be refused"
        );
    }
    job.token.cancel();
    true
}

/// Counts a write the store refused for `job` and says how it ended: cancelled by an operator
/// (counted once, here or when the loss was seen) or a stale write refused (the lease was
/// taken over or had expired).
pub(super) fn refused<S: Store>(shared: &Shared<S>, store: &S, job: &Job) -> bool {
    refused_at(&shared.counters, store, job, shared.clock_now())
}

/// [`refused`], judged at `now` on the worker's clock.
pub(super) fn refused_at<S: Store>(counters: &Counters, store: &S, job: &Job, now: f64) -> bool {
    let known = job.loss.load(Ordering::SeqCst);
    let reason = if known == LOSS_NONE {
        classify(store, &job.lease, now)
    } else {
        known
    };
    if reason == LOSS_OPERATOR {
        if known == LOSS_NONE {
            bump(&counters.cancelled);
        }
        true
    } else {
        bump(&counters.stale_refused);
        false
    }
}
