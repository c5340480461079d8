//! The records the store hands back and takes in.

use super::Fence;
use super::args::{JobId, Owner, non_empty};
use super::queue::Queue;
use crate::error::{Error, Result};

/// One stored row of the `jobs` table, exactly as it is on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct JobState {
    /// The job id.
    pub id: String,
    /// The worker holding (or that last held) the lease; `None` when never claimed or released.
    pub owner: Option<String>,
    /// The end of the current lease, in the callers' clock; `0.0` when not leased. The lease is
    /// live while `until > now`.
    pub until: f64,
    /// The last fence handed out for this job; `0` when never claimed.
    pub fence: i64,
    /// The result stored by the successful `complete`, if any.
    pub result: Option<String>,
    /// Whether the job was completed.
    pub done: bool,
}

impl JobState {
    /// Whether the lease is live at `now` (`until > now`) and the job is not done.
    ///
    /// ```
    /// # use leasefence::JobState;
    /// let s = JobState { id: "a".into(), owner: Some("w".into()), until: 10.0, fence: 1, result: None, done: false };
    /// assert!(s.is_leased_at(9.9));
    /// assert!(!s.is_leased_at(10.0)); // now == until is expired
    /// ```
    pub fn is_leased_at(&self, now: f64) -> bool {
        !self.done && self.until > now
    }
}

/// A job to enqueue with its queue settings: queue, kind, payload, priority, not-before time,
/// attempts budget and unique key. `enqueue(id)` is the same as enqueueing `NewJob::new(id)`
/// with every default.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// use leasefence::NewJob;
/// let job = NewJob::new("resize-17")?
///     .queue("images")?
///     .kind("resize")?
///     .payload(br#"{"w":640}"#.to_vec())
///     .priority(10)
///     .not_before(1_700_000_000.0)?
///     .max_attempts(5)
///     .unique_key("resize:photo-17")?;
/// assert_eq!(job.id(), "resize-17");
/// assert_eq!(job.queue_name().as_str(), "images");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    id: String,
    queue: Queue,
    kind: Option<String>,
    payload: Option<Vec<u8>>,
    priority: i64,
    not_before: f64,
    max_attempts: u32,
    unique_key: Option<String>,
    unique_for: Option<f64>,
}

/// The longest kind name and unique key, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// A kind or unique key: non-empty, at most [`MAX_KEY_LEN`] bytes, no control characters.
pub(crate) fn key_text(argument: &'static str, value: String) -> Result<String> {
    non_empty(argument, &value)?;
    if value.len() > MAX_KEY_LEN {
        return Err(Error::invalid(
            argument,
            format!("must be at most {MAX_KEY_LEN} bytes, got {}", value.len()),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid(
            argument,
            "must not contain control characters",
        ));
    }
    Ok(value)
}

impl NewJob {
    /// A job with no payload, priority 0, ready at once (`not_before = 0`) and no limit on
    /// attempts.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `job_id` when `id` is empty.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        non_empty("job_id", &id)?;
        Ok(NewJob {
            id,
            queue: Queue::default(),
            kind: None,
            payload: None,
            priority: 0,
            not_before: 0.0,
            max_attempts: 0,
            unique_key: None,
            unique_for: None,
        })
    }

    /// The queue the job joins (default `default`); see [`Queue::new`] for valid names.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `queue` for an invalid name.
    pub fn queue(mut self, queue: impl Into<String>) -> Result<Self> {
        self.queue = Queue::new(queue)?;
        Ok(self)
    }

    /// What kind of job this is (default: none): a [`Worker`](crate::Worker) with handlers
    /// per kind ([`WorkerBuilder::kind`](crate::WorkerBuilder::kind)) runs it with the
    /// handler registered for it, and fails it with a clear error when it has none.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `kind` when it is empty, longer than 512 bytes or has
    /// a control character.
    pub fn kind(mut self, kind: impl Into<String>) -> Result<Self> {
        self.kind = Some(key_text("kind", kind.into())?);
        Ok(self)
    }

    /// Makes the job unique by `key` within its queue: while a job of the same queue with the
    /// same key is unfinished (ready, scheduled, leased, expired or retrying), enqueueing this
    /// one inserts nothing and reports the job it matched
    /// ([`Enqueued::Duplicate`]). Decided by a unique index inside the insert, so it holds
    /// under any number of concurrent enqueuers. Once that job has finished (completed, dead
    /// or cancelled), the key is free again — unless [`unique_for`](Self::unique_for) says
    /// otherwise. A job whose last attempt's lease expired is reported dead at once, but is
    /// finished as dead only by the next claim, of any queue (the enqueue takes no clock to
    /// judge the lease by): until then it still holds its key.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `unique_key` when it is empty, longer than 512 bytes
    /// or has a control character.
    pub fn unique_key(mut self, key: impl Into<String>) -> Result<Self> {
        self.unique_key = Some(key_text("unique_key", key.into())?);
        Ok(self)
    }

    /// Widens the uniqueness of [`unique_key`](Self::unique_key) to a window: enqueueing
    /// inserts nothing while a job of the same queue with the same key is unfinished **or was
    /// enqueued less than `seconds` ago**, finished or not. Enqueue times are the database's
    /// clock (SQLite: the enqueuing host's system clock). Call it after `unique_key`. The
    /// window is this enqueue's own (as Oban's unique period is): a later enqueue without one
    /// checks only unfinished jobs; a job's own window keeps `purge` from deleting it while it
    /// is open.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `unique_for` when `seconds` is not a finite number
    /// greater than 0, or when no unique key was set before.
    pub fn unique_for(mut self, seconds: f64) -> Result<Self> {
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(Error::invalid(
                "unique_for",
                format!(
                    "must be a finite number of seconds greater than 0, got {}",
                    crate::types::args::Seconds(seconds)
                ),
            ));
        }
        if self.unique_key.is_none() {
            return Err(Error::invalid(
                "unique_for",
                "needs a unique key: set unique_key too (on a builder, before unique_for)",
            ));
        }
        self.unique_for = Some(seconds);
        Ok(self)
    }

    /// The bytes handed to the worker with the lease.
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    /// Higher runs first (default 0; negative values run after the default).
    pub fn priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }

    /// `claim_next` does not hand the job out before this clock reading (default 0).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `not_before` when it is NaN or infinite.
    pub fn not_before(mut self, not_before: f64) -> Result<Self> {
        if !not_before.is_finite() {
            return Err(Error::invalid(
                "not_before",
                format!("must be a finite number, got {not_before}"),
            ));
        }
        self.not_before = not_before;
        Ok(self)
    }

    /// How many runs the job gets before a failure makes it dead; `0` (the default) means
    /// no limit.
    ///
    /// Every claim spends one attempt and raises the fence; a lease given back by `release`
    /// (a graceful shutdown, or a user) refunds its attempt, while the fence stays raised, so
    /// an interruption never burns the budget and a fence number is never handed out twice. A
    /// failure on the last attempt, or the expiry of the last attempt's lease, finishes the
    /// job as dead. An id purged and enqueued again starts with its whole budget (its fences
    /// continue above every one it had).
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The job id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The payload, if any.
    pub fn payload_bytes(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }

    /// The priority.
    pub fn priority_value(&self) -> i64 {
        self.priority
    }

    /// The not-before time.
    pub fn not_before_value(&self) -> f64 {
        self.not_before
    }

    /// The attempts budget (`0` = unlimited).
    pub fn max_attempts_value(&self) -> u32 {
        self.max_attempts
    }

    /// The queue.
    pub fn queue_name(&self) -> &Queue {
        &self.queue
    }

    /// The kind, if any.
    pub fn kind_name(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// The unique key, if any.
    pub fn unique_key_value(&self) -> Option<&str> {
        self.unique_key.as_deref()
    }

    /// The uniqueness window in seconds, if any.
    pub fn unique_for_value(&self) -> Option<f64> {
        self.unique_for
    }
}

/// What enqueueing one job did ([`Store::enqueue_jobs`](crate::Store::enqueue_jobs)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Enqueued {
    /// The job was inserted.
    Inserted,
    /// A job with this id exists; it was left exactly as it was.
    Known,
    /// Not inserted: the job with this id holds the same unique key in the same queue (it is
    /// unfinished, or was enqueued within the window of
    /// [`NewJob::unique_for`](NewJob::unique_for)).
    Duplicate {
        /// The id of the job that holds the key.
        of: String,
    },
}

impl Enqueued {
    /// Whether the job was inserted.
    pub fn is_inserted(&self) -> bool {
        matches!(self, Enqueued::Inserted)
    }
}

/// A lease handed out by `claim_next` / `claim_batch`: everything a worker needs to do the job
/// and to prove, on every later write, that it still holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// The job id.
    pub job_id: String,
    /// The job's queue.
    pub queue: String,
    /// The job's kind, if it has one.
    pub kind: Option<String>,
    /// The worker that holds the lease.
    pub owner: String,
    /// The fencing token of this lease.
    pub fence: Fence,
    /// The lease is live while `until > now`.
    pub until: f64,
    /// The job's payload, if it has one.
    pub payload: Option<Vec<u8>>,
    /// The job's priority.
    pub priority: i64,
    /// The job's attempts budget (`0` = unlimited; see [`NewJob::max_attempts`]).
    pub max_attempts: u32,
    /// The error recorded by the previous failed attempt, if any.
    pub last_error: Option<String>,
    /// This run's attempt number, from 1: the attempts spent, this one included. Unlike the
    /// fence it does not count leases given back by `release`.
    pub attempt: u32,
}

impl Lease {
    /// The job id, validated.
    pub fn job(&self) -> JobId<'_> {
        JobId(&self.job_id)
    }

    /// The owner, validated.
    pub fn holder(&self) -> Owner<'_> {
        Owner(&self.owner)
    }

    /// Whether a failure of this attempt makes the job dead.
    pub fn is_last_attempt(&self) -> bool {
        self.max_attempts > 0 && self.attempt >= self.max_attempts
    }
}

/// What a fenced `fail` did with the job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Failed {
    /// The job will be claimable again from this clock reading on.
    Retrying {
        /// The new not-before time.
        at: f64,
    },
    /// That was the last attempt: the job is dead and will not run again.
    Dead,
}

/// Where a job is in its life, at a given clock reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Status {
    /// Claimable now by `claim_next`.
    Ready,
    /// Waiting for its not-before time (never failed).
    Scheduled,
    /// Held under a live lease.
    Leased,
    /// Its lease ran out without complete, fail or release; claimable again.
    Expired,
    /// Failed, waiting for (or past) its retry time.
    Retrying,
    /// Completed with a result.
    Done,
    /// Out of attempts.
    Dead,
    /// Cancelled before it finished.
    Cancelled,
}

impl Status {
    /// Every status, in display order.
    pub const ALL: [Status; 8] = [
        Status::Ready,
        Status::Scheduled,
        Status::Leased,
        Status::Expired,
        Status::Retrying,
        Status::Done,
        Status::Dead,
        Status::Cancelled,
    ];

    /// The lower-case name used in SQL, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "ready",
            Status::Scheduled => "scheduled",
            Status::Leased => "leased",
            Status::Expired => "expired",
            Status::Retrying => "retrying",
            Status::Done => "done",
            Status::Dead => "dead",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parses [`Status::as_str`]'s names.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `status` for an unknown name.
    pub fn parse(name: &str) -> Result<Self> {
        Status::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| {
                Error::invalid(
                    "status",
                    format!(
                        "unknown status {name:?}; expected one of {}",
                        Status::ALL.map(Status::as_str).join(", ")
                    ),
                )
            })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job as `list` shows it: the stored row with its queue settings and its status.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    /// The six contract columns.
    pub state: JobState,
    /// The job's queue.
    pub queue: String,
    /// The job's kind, if it has one.
    pub kind: Option<String>,
    /// The job's unique key, if it has one.
    pub unique_key: Option<String>,
    /// The job's status at the clock reading `list` was given.
    pub status: Status,
    /// The payload, if any.
    pub payload: Option<Vec<u8>>,
    /// The priority.
    pub priority: i64,
    /// The not-before time.
    pub not_before: f64,
    /// The attempts budget (`0` = unlimited; see [`NewJob::max_attempts`]).
    pub max_attempts: u32,
    /// The attempts spent: claims, less the leases given back by `release`.
    pub attempts: u32,
    /// The error of the last failed attempt, if any.
    pub error: Option<String>,
    /// When the job finished (completed, died or was cancelled), if it did.
    pub finished_at: Option<f64>,
    /// How it finished: `completed`, `dead` or `cancelled`; `None` while unfinished.
    pub outcome: Option<String>,
    /// When it was enqueued, in Unix seconds by the enqueuing host's clock (SQLite) or the
    /// database server's (PostgreSQL); informational, `None` for jobs enqueued before
    /// leasefence recorded it.
    pub enqueued_at: Option<f64>,
}

impl JobInfo {
    /// The job id (the same as `state.id`).
    pub fn id(&self) -> &str {
        &self.state.id
    }
}

/// Counts of jobs by [`Status`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Claimable now.
    pub ready: u64,
    /// Waiting for their not-before time.
    pub scheduled: u64,
    /// Under a live lease.
    pub leased: u64,
    /// Lease ran out; claimable again.
    pub expired: u64,
    /// Failed and waiting to be retried (or due).
    pub retrying: u64,
    /// Completed.
    pub done: u64,
    /// Out of attempts.
    pub dead: u64,
    /// Cancelled.
    pub cancelled: u64,
}

impl Stats {
    /// The count for one status.
    pub fn get(&self, status: Status) -> u64 {
        match status {
            Status::Ready => self.ready,
            Status::Scheduled => self.scheduled,
            Status::Leased => self.leased,
            Status::Expired => self.expired,
            Status::Retrying => self.retrying,
            Status::Done => self.done,
            Status::Dead => self.dead,
            Status::Cancelled => self.cancelled,
        }
    }

    pub(crate) fn slot(&mut self, status: Status) -> &mut u64 {
        match status {
            Status::Ready => &mut self.ready,
            Status::Scheduled => &mut self.scheduled,
            Status::Leased => &mut self.leased,
            Status::Expired => &mut self.expired,
            Status::Retrying => &mut self.retrying,
            Status::Done => &mut self.done,
            Status::Dead => &mut self.dead,
            Status::Cancelled => &mut self.cancelled,
        }
    }

    /// All jobs.
    pub fn total(&self) -> u64 {
        Status::ALL.iter().map(|s| self.get(*s)).sum()
    }
}
