//! Validated arguments, the stored row and the queue's records.
//!
//! Every argument check of the contract lives here, once. A backend receives only values that
//! passed these constructors, so two backends can never disagree about what is valid input.
//!
//! - [`args`]: the validated arguments ([`JobId`], [`Owner`], [`Now`], [`Ttl`], [`Resource`],
//!   [`BatchSize`]).
//! - [`job`]: what the store hands back ([`JobState`], [`Lease`], [`JobInfo`], [`Status`],
//!   [`Stats`], [`Failed`]) and what it takes in ([`NewJob`]).
//! - [`ledger`]: the attempt ledger ([`History`], [`Attempt`], [`AttemptOutcome`],
//!   [`Refusal`], [`WriteOp`]).
//! - [`observe`]: the operator's views ([`Overview`], [`JobQuery`], [`JobPage`],
//!   [`FenceRecord`], [`AuditEntry`]).
//! - [`queue`]: named queues ([`Queue`], [`Queues`], [`QueueInfo`]).
//! - [`backoff`]: when a failed job runs again ([`Backoff`]).
//! - `schedule` (feature `cron`): periodic jobs ([`Schedule`], [`ScheduleName`],
//!   [`ScheduleInfo`], [`SlotRun`]).

pub(crate) mod args;
pub(crate) mod backoff;
pub(crate) mod job;
pub(crate) mod ledger;
pub(crate) mod observe;
pub(crate) mod queue;
#[cfg(feature = "cron")]
pub(crate) mod schedule;

pub use args::{BatchSize, JobId, Now, Owner, Resource, Ttl};
pub use backoff::Backoff;
pub use job::{Enqueued, Failed, JobInfo, JobState, Lease, MAX_KEY_LEN, NewJob, Stats, Status};
pub use ledger::{Attempt, AttemptOutcome, History, Refusal, WriteOp};
pub use observe::{
    AuditEntry, AuditRecord, EXPIRING_WITHIN, FenceRecord, JobCursor, JobOrder, JobPage, JobQuery,
    MAX_AUDIT_LEN, MAX_WINDOW, Minute, Overview, THROUGHPUT_MINUTES,
};
pub use queue::{DEFAULT_QUEUE, MAX_QUEUE_NAME, Queue, QueueInfo, Queues};
#[cfg(feature = "cron")]
pub use schedule::{MAX_SCHEDULE_NAME, Schedule, ScheduleInfo, ScheduleName, SlotRun, run_id};

/// A fencing token: the generation number handed out by `claim`. It grows by one on every
/// successful claim of a job and is never issued twice for the same job.
pub type Fence = i64;

/// `fence` as the fence gate takes it: a fence `claim` could have handed out, 1 or more. A
/// lower one would be recorded as the resource's highest and admit every later fence, so it is
/// refused as an invalid argument naming `fence`, and nothing is recorded.
pub(crate) fn gate_fence(fence: Fence) -> crate::Result<Fence> {
    if fence < 1 {
        return Err(crate::Error::invalid(
            "fence",
            format!("must be a fence handed out by a claim (1 or more), got {fence}"),
        ));
    }
    Ok(fence)
}
