//! The heartbeat: the supervising thread renews the leases of every job in flight, and at the
//! shutdown deadline gives back the ones still running.

use std::sync::atomic::Ordering;

use super::job::Phase;
use super::shared::{Shared, busy_retry};
use super::stats::bump;
use super::sync::lock;
use crate::store::Store;
use crate::types::Now;

/// Renews every running job whose last renewal is `heartbeat` seconds old on the clock. A
/// refused renew marks the job lost and cancels its token.
pub(super) fn heartbeat<S: Store>(shared: &Shared<S>, store: &S) {
    for job in shared.in_flight() {
        let mut beat = lock(&job.beat);
        if !matches!(beat.phase, Phase::Running | Phase::Queued) {
            continue;
        }
        let now = shared.clock_now();
        if now < beat.renewed_at + shared.config.heartbeat {
            continue;
        }
        let lease = &job.lease;
        let renewed = busy_retry(shared, || {
            store.renew(
                lease.job(),
                lease.holder(),
                lease.fence,
                Now::new(now)?,
                shared.config.ttl,
            )
        });
        match renewed {
            Ok(true) => {
                beat.renewed_at = now;
                beat.until = now + shared.config.ttl.seconds();
                bump(&shared.counters.renewed);
                tracing::debug!(
                    job_id = %lease.job_id, fence = lease.fence, until = beat.until, "renewed"
                );
            }
            Ok(false) => {
                beat.phase = Phase::Lost;
                job.lost.store(true, Ordering::SeqCst);
                // Count before cancelling: whoever the token wakes must see the loss counted.
                bump(&shared.counters.lost);
                job.token.cancel();
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence, owner = %lease.owner, now,
                    until = beat.until,
                    "lease lost: renew refused; cancelling the handler, its writes will be refused"
                );
            }
            Err(e) => {
                bump(&shared.counters.errors);
                tracing::warn!(
                    job_id = %lease.job_id, fence = lease.fence, error = %e,
                    "renew failed; trying again on the next tick"
                );
            }
        }
    }
}

/// At the shutdown deadline: cancels every job still running and gives its lease back, fenced.
pub(super) fn release_in_flight<S: Store>(shared: &Shared<S>, store: &S) {
    for job in shared.in_flight() {
        let mut beat = lock(&job.beat);
        if !matches!(beat.phase, Phase::Running | Phase::Queued) {
            continue;
        }
        beat.phase = Phase::Released;
        job.token.cancel();
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
