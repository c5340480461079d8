//! Validated arguments and the stored row.
//!
//! Every argument check of the contract lives here, once. A backend receives only values that
//! passed these constructors, so two backends can never disagree about what is valid input.

use crate::error::{Error, Result};

/// A fencing token: the generation number handed out by `claim`. It grows by one on every
/// successful claim of a job and is never issued twice for the same job.
pub type Fence = i64;

/// A job id: any non-empty string.
///
/// ```
/// # use leasefence::JobId;
/// assert!(JobId::new("invoice-42").is_ok());
/// assert_eq!(JobId::new("").unwrap_err().argument(), Some("job_id"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobId<'a>(&'a str);

impl<'a> JobId<'a> {
    /// Validates a job id.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `job_id` when `id` is empty.
    pub fn new(id: &'a str) -> Result<Self> {
        non_empty("job_id", id).map(JobId)
    }

    /// The id as text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// The name of a worker that holds (or wants) a lease: any non-empty string.
///
/// ```
/// # use leasefence::Owner;
/// assert!(Owner::new("worker-1").is_ok());
/// assert_eq!(Owner::new("").unwrap_err().argument(), Some("owner"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner<'a>(&'a str);

impl<'a> Owner<'a> {
    /// Validates an owner name.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `owner` when `owner` is empty.
    pub fn new(owner: &'a str) -> Result<Self> {
        non_empty("owner", owner).map(Owner)
    }

    /// The owner as text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

fn non_empty<'a>(argument: &'static str, value: &'a str) -> Result<&'a str> {
    if value.is_empty() {
        Err(Error::invalid(argument, "must not be empty"))
    } else {
        Ok(value)
    }
}

/// The caller's clock reading, in seconds (any epoch, as long as every caller uses the same one).
///
/// The store never reads a clock of its own: time is an argument, assumed non-decreasing.
///
/// ```
/// # use leasefence::Now;
/// assert!(Now::new(1_700_000_000.5).is_ok());
/// assert_eq!(Now::new(f64::NAN).unwrap_err().argument(), Some("now"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Now(f64);

impl Now {
    /// Validates a clock reading.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `now` when `now` is NaN or infinite.
    pub fn new(now: f64) -> Result<Self> {
        if now.is_finite() {
            Ok(Now(now))
        } else {
            Err(Error::invalid(
                "now",
                format!("must be a finite number, got {now}"),
            ))
        }
    }

    /// The reading in seconds.
    pub fn seconds(self) -> f64 {
        self.0
    }
}

/// A lease duration in seconds: finite and greater than zero.
///
/// ```
/// # use leasefence::{Now, Ttl};
/// let ttl = Ttl::new(30.0).unwrap();
/// assert_eq!(ttl.until(Now::new(100.0).unwrap()).unwrap(), 130.0);
/// assert_eq!(Ttl::new(0.0).unwrap_err().argument(), Some("ttl"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Ttl(f64);

impl Ttl {
    /// Validates a lease duration.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `ttl` when `ttl` is NaN, infinite, zero or negative.
    pub fn new(ttl: f64) -> Result<Self> {
        if ttl.is_finite() && ttl > 0.0 {
            Ok(Ttl(ttl))
        } else {
            Err(Error::invalid(
                "ttl",
                format!("must be a finite number of seconds greater than 0, got {ttl}"),
            ))
        }
    }

    /// The duration in seconds.
    pub fn seconds(self) -> f64 {
        self.0
    }

    /// The end of a lease taken at `now`: `now + ttl`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `ttl` when the sum overflows to infinity.
    pub fn until(self, now: Now) -> Result<f64> {
        let until = now.0 + self.0;
        if until.is_finite() {
            Ok(until)
        } else {
            Err(Error::invalid(
                "ttl",
                format!("now + ttl overflows ({} + {})", now.0, self.0),
            ))
        }
    }
}

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
