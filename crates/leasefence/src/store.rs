//! The `Store` trait: the seam every backend implements.

use crate::error::Result;
use crate::types::{Fence, JobId, JobState, Now, Owner, Ttl};

/// The lease-and-fence contract, one method per operation.
///
/// Every backend implements exactly these semantics; the contract suite in `tests/it` runs one
/// set of test bodies against each of them. Arguments arrive already validated (see
/// [`JobId`], [`Owner`], [`Now`], [`Ttl`]), so a backend never decides what is valid input.
///
/// A refusal by the contract is a value (`false` / `None`), never an error. Every method returns
/// an [`Error`](crate::Error) only when the call could not be judged (busy database, I/O failure,
/// …), and then nothing was changed.
///
/// Clock values are the caller's and assumed non-decreasing. A lease is **live** while
/// `until > now`; at `now == until` it has expired.
pub trait Store {
    /// Adds an unknown job with the default state (no owner, `until = 0`, `fence = 0`, no result,
    /// not done) and returns `true`. A known id returns `false` and its row is left exactly as it
    /// was: an in-flight lease or a finished result is never reset.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool>;

    /// The stored row for `job_id`, read from the database (never from a cache); `None` for an
    /// unknown id.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>>;

    /// Takes the lease on a claimable job and returns the new fence.
    ///
    /// A job is claimable when it exists, is not done and its lease has expired (`until <= now`;
    /// `now == until` is expired). Then, atomically with that check: `owner = owner`,
    /// `until = now + ttl`, `fence = fence + 1`, and the new fence is returned. Unknown, done or
    /// still-leased jobs return `None` and nothing changes. Of any number of concurrent claims
    /// of one claimable job, exactly one gets a fence.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) naming `ttl` when `now + ttl`
    /// overflows; busy or backend failures.
    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Fence>>;

    /// Extends a live lease to `until = now + ttl` and returns `true`, only when `owner` and
    /// `fence` match the stored ones, the job is not done and the lease is still live
    /// (`until > now`). Otherwise `false` and nothing changes: an expired lease is never
    /// revived, even if nobody else took it.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) naming `ttl` when `now + ttl`
    /// overflows; busy or backend failures.
    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool>;

    /// Stores `result`, marks the job done and returns `true`, only when the lease is current:
    /// `owner` and `fence` match, the job is not done and `until > now`. Otherwise `false`, and
    /// any earlier result stays. Owner, fence and `until` are kept as they were, as a record of
    /// who finished the job under which fence.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        now: Now,
        result: &str,
    ) -> Result<bool>;

    /// Gives a lease back early: for the row whose `owner` and `fence` match and that is not
    /// done, sets `owner = NULL`, `until = 0` and returns `true`. The **fence is kept**, so the
    /// next claim hands out a higher one. Otherwise `false` and nothing changes.
    ///
    /// Release does not look at the clock: the matching holder of an expired lease that nobody
    /// re-claimed may still release it.
    ///
    /// # Errors
    /// Busy or backend failures only.
    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool>;
}
