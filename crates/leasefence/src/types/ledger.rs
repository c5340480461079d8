//! The attempt ledger: who held which generation of a job, how each attempt ended, and which
//! late writes the fence stopped.

use super::Fence;
use crate::error::{Error, Result};

/// How one attempt (one claim, one fence) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// Its holder stored the result (`complete`, a batch's completion, `complete_with`).
    Completed,
    /// Its holder recorded a failure (`fail`): retried later, or the job is dead.
    Failed,
    /// A failure the worker's time limit wrote (its error starts with `timed out after`).
    TimedOut,
    /// Its holder gave the lease back (`release`), refunding the attempt.
    Released,
    /// Its lease expired with nothing written: found when the job was claimed again, finished
    /// as dead (its last attempt) or retried by an operator.
    Lost,
    /// An operator cancelled the job while this attempt held it.
    Cancelled,
}

impl AttemptOutcome {
    /// Every outcome, in the order the CLI counts them.
    pub const ALL: [AttemptOutcome; 6] = [
        AttemptOutcome::Completed,
        AttemptOutcome::Failed,
        AttemptOutcome::TimedOut,
        AttemptOutcome::Released,
        AttemptOutcome::Lost,
        AttemptOutcome::Cancelled,
    ];

    /// The name stored in the ledger and shown by the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Completed => "completed",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::TimedOut => "timed out",
            AttemptOutcome::Released => "released",
            AttemptOutcome::Lost => "lost",
            AttemptOutcome::Cancelled => "cancelled",
        }
    }

    /// Parses [`AttemptOutcome::as_str`]'s names.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `outcome` for an unknown name.
    pub fn parse(name: &str) -> Result<Self> {
        AttemptOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == name)
            .ok_or_else(|| {
                Error::invalid(
                    "outcome",
                    format!(
                        "unknown attempt outcome {name:?}; expected one of {}",
                        AttemptOutcome::ALL.map(AttemptOutcome::as_str).join(", ")
                    ),
                )
            })
    }
}

impl std::fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fenced write the store can refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum WriteOp {
    /// `renew` (and each lease of `renew_batch`).
    Renew,
    /// `complete` (and each item of `complete_batch`, and `complete_with`).
    Complete,
    /// `fail`.
    Fail,
    /// `release`.
    Release,
    /// The scheduler's enqueue of due periodic runs (`enqueue_slots`), fenced by its lease on
    /// the job `leasefence.scheduler`.
    Schedule,
}

impl WriteOp {
    /// Every fenced write.
    pub const ALL: [WriteOp; 5] = [
        WriteOp::Renew,
        WriteOp::Complete,
        WriteOp::Fail,
        WriteOp::Release,
        WriteOp::Schedule,
    ];

    /// The name stored in the ledger and shown by the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteOp::Renew => "renew",
            WriteOp::Complete => "complete",
            WriteOp::Fail => "fail",
            WriteOp::Release => "release",
            WriteOp::Schedule => "schedule",
        }
    }

    /// Parses [`WriteOp::as_str`]'s names.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `op` for an unknown name.
    pub fn parse(name: &str) -> Result<Self> {
        WriteOp::ALL
            .into_iter()
            .find(|o| o.as_str() == name)
            .ok_or_else(|| {
                Error::invalid(
                    "op",
                    format!(
                        "unknown write {name:?}; expected one of {}",
                        WriteOp::ALL.map(WriteOp::as_str).join(", ")
                    ),
                )
            })
    }
}

impl std::fmt::Display for WriteOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One claim of a job: the generation its fence names, and how it ended.
///
/// Times are Unix seconds by the store's own clock (the SQLite host's, the PostgreSQL
/// server's), like [`JobInfo::enqueued_at`](crate::JobInfo::enqueued_at): they say when the
/// ledger saw each event, while leases are judged by the clock the caller passes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Attempt {
    /// The fence this claim handed out.
    pub fence: Fence,
    /// Who claimed it.
    pub owner: String,
    /// When it was claimed (`None` for a lease already held when the ledger was added).
    pub claimed_at: Option<f64>,
    /// When it ended (`None` while open).
    pub ended_at: Option<f64>,
    /// How it ended (`None` while open: held, or expired and not noticed yet).
    pub outcome: Option<AttemptOutcome>,
    /// The error its holder recorded (failed and timed-out attempts).
    pub error: Option<String>,
}

/// The refused writes of one operation under one fence.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Refusal {
    /// The fence the writer held (its generation: maybe long superseded, or never issued).
    pub fence: Fence,
    /// The write that was refused.
    pub op: WriteOp,
    /// How many times.
    pub count: u64,
    /// When the last one came (Unix seconds, the store's clock).
    pub last_at: f64,
}

/// A job's attempt ledger ([`Store::history`](crate::Store::history)): a stalled worker's
/// lease taken over, its late complete refused and counted under its fence, the new holder's
/// stored.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::{AttemptOutcome, JobId, NewJob, Now, Owner, SqliteStore, Store, Ttl};
/// use leasefence::WriteOp;
/// let store = SqliteStore::open(dir.path().join("jobs.db"))?;
/// store.enqueue_many(&[NewJob::new("report")?])?;
/// let (a, b) = (Owner::new("a")?, Owner::new("b")?);
/// let stale = store.claim_next(a, Now::new(0.0)?, Ttl::new(10.0)?)?.unwrap();
/// let fresh = store.claim_next(b, Now::new(20.0)?, Ttl::new(10.0)?)?.unwrap();
/// assert!(!store.complete_lease(&stale, Now::new(21.0)?, "late")?); // refused
/// assert!(store.complete_lease(&fresh, Now::new(22.0)?, "done")?);
///
/// let history = store.history(JobId::new("report")?)?.unwrap();
/// let outcomes: Vec<_> = history.attempts.iter().map(|a| (a.fence, a.outcome)).collect();
/// assert_eq!(
///     outcomes,
///     [(1, Some(AttemptOutcome::Lost)), (2, Some(AttemptOutcome::Completed))]
/// );
/// assert_eq!((history.refusals[0].fence, history.refusals[0].op), (1, WriteOp::Complete));
/// assert_eq!(history.refused_under(1), 1);
/// # Ok::<(), leasefence::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct History {
    /// Every claim of the job, oldest (lowest fence) first.
    pub attempts: Vec<Attempt>,
    /// The refused writes, by fence then operation.
    pub refusals: Vec<Refusal>,
}

impl History {
    /// How many attempts ended with `outcome`.
    pub fn count(&self, outcome: AttemptOutcome) -> u64 {
        self.attempts
            .iter()
            .filter(|a| a.outcome == Some(outcome))
            .count() as u64
    }

    /// How many attempts are still open.
    pub fn open(&self) -> u64 {
        self.attempts.iter().filter(|a| a.outcome.is_none()).count() as u64
    }

    /// How many writes were refused in all.
    pub fn refused(&self) -> u64 {
        self.refusals.iter().map(|r| r.count).sum()
    }

    /// How many writes under `fence` were refused.
    pub fn refused_under(&self, fence: Fence) -> u64 {
        self.refusals
            .iter()
            .filter(|r| r.fence == fence)
            .map(|r| r.count)
            .sum()
    }
}
