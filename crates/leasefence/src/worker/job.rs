//! One claimed job in flight: its lease, token, flags and the phase the heartbeat reads.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8};

use super::cancel::CancelToken;
use super::sync::lock;
use crate::types::Lease;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Claimed in a batch, its handler not started yet; the heartbeat renews.
    Queued,
    /// The handler runs (or its result waits to be written with the batch); the heartbeat
    /// renews.
    Running,
    /// The outcome is being written; the heartbeat stays away.
    Finishing,
    /// The handler's own release (`JobContext::release`) is being written; the heartbeat
    /// stays away, and the shutdown deadline takes the release over (whichever lands first
    /// gives the lease back; the other is refused).
    Releasing,
    /// A renew was refused.
    Lost,
    /// Given back at the shutdown deadline.
    Released,
}

pub(super) struct Beat {
    pub(super) phase: Phase,
    pub(super) until: f64,
    pub(super) renewed_at: f64,
    /// The clock reading when the handler started, once it has.
    pub(super) started_at: Option<f64>,
}

/// Why a lease was lost, as far as the store could tell (`Job::loss`).
pub(crate) const LOSS_NONE: u8 = 0;
/// Another claim took it over, or it expired: what fencing is for.
pub(crate) const LOSS_TAKEN_OVER: u8 = 1;
/// An operator cancelled, retried or deleted the job.
pub(crate) const LOSS_OPERATOR: u8 = 2;

pub(super) const UNSETTLED: u8 = 0;
pub(super) const SETTLED_COMPLETED: u8 = 1;
pub(super) const SETTLED_REFUSED: u8 = 2;
/// Given back by the handler itself (`JobContext::release`).
pub(super) const SETTLED_RELEASED: u8 = 3;
/// The handler's own write (`JobContext::release`) was refused because an operator had ended
/// the job.
pub(super) const SETTLED_CANCELLED: u8 = 4;

/// One claimed job, shared by its worker thread, its context and the heartbeat.
pub(super) struct Job {
    pub(super) lease: Lease,
    pub(super) token: CancelToken,
    pub(super) lost: AtomicBool,
    /// Why the lease was lost (`LOSS_*`), once it was.
    pub(super) loss: AtomicU8,
    /// The run-time limit was reached: the attempt is a failure, whatever the handler returns.
    pub(super) timed_out: AtomicBool,
    /// Set when the handler settled the attempt itself: completed through
    /// `JobContext::complete_with`, or given back through `JobContext::release`.
    pub(super) settled: AtomicU8,
    /// The phase and the lease's end as last renewed. Nothing holds it across a database
    /// call: the heartbeat snapshots what is due, renews without it, and applies the answer
    /// only if the phase is still renewable; the release at the shutdown deadline marks the
    /// job released under it and writes after, and a released job's outcome is not written.
    pub(super) beat: Mutex<Beat>,
}

impl Phase {
    /// Whether the heartbeat renews a job in this phase: queued in a batch, or running.
    pub(super) fn is_renewable(self) -> bool {
        matches!(self, Phase::Running | Phase::Queued)
    }
}

impl Job {
    /// A job just claimed (at `claimed_at` on the worker's clock), queued in its batch.
    pub(super) fn new(lease: Lease, claimed_at: f64) -> Self {
        Job {
            token: CancelToken::new(),
            lost: AtomicBool::new(false),
            loss: AtomicU8::new(LOSS_NONE),
            timed_out: AtomicBool::new(false),
            settled: AtomicU8::new(UNSETTLED),
            beat: Mutex::new(Beat {
                phase: Phase::Queued,
                until: lease.until,
                renewed_at: claimed_at,
                started_at: None,
            }),
            lease,
        }
    }

    /// Stops the heartbeat before the outcome is written; returns the phase it was in.
    pub(super) fn finish(&self) -> Phase {
        let mut beat = lock(&self.beat);
        let was = beat.phase;
        if was == Phase::Running {
            beat.phase = Phase::Finishing;
        }
        was
    }

    /// Lets the heartbeat resume after an outcome that was not written.
    pub(super) fn resume(&self, was: Phase) {
        let mut beat = lock(&self.beat);
        if was == Phase::Running && matches!(beat.phase, Phase::Finishing | Phase::Releasing) {
            beat.phase = Phase::Running;
        }
    }

    /// Marks a running job as being released by its handler; returns the phase it was in.
    pub(super) fn start_release(&self) -> Phase {
        let mut beat = lock(&self.beat);
        let was = beat.phase;
        if was == Phase::Running {
            beat.phase = Phase::Releasing;
        }
        was
    }

    /// The handler's release was answered: the job is finishing, unless the shutdown deadline
    /// took the release over meanwhile (then it stays released).
    pub(super) fn end_release(&self) {
        let mut beat = lock(&self.beat);
        if beat.phase == Phase::Releasing {
            beat.phase = Phase::Finishing;
        }
    }
}
