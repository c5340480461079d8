//! The validated arguments of the store's operations: each check of the contract, once.

use crate::error::{Error, Result};

/// A job id: any non-empty string.
///
/// ```
/// # use leasefence::JobId;
/// assert!(JobId::new("invoice-42").is_ok());
/// assert_eq!(JobId::new("").unwrap_err().argument(), Some("job_id"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobId<'a>(pub(crate) &'a str);

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
pub struct Owner<'a>(pub(crate) &'a str);

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

pub(crate) fn non_empty<'a>(argument: &'static str, value: &'a str) -> Result<&'a str> {
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
pub struct Now(pub(crate) f64);

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
                format!("must be a finite number, got {}", Seconds(now)),
            ))
        }
    }

    /// This host's clock: seconds since the Unix epoch (`SystemTime::now()`), the clock the
    /// CLI and [`SystemClock`](crate::SystemClock) use. A clock set before 1970 reads 0.
    ///
    /// ```
    /// # use leasefence::Now;
    /// assert!(Now::system().seconds() > 1_600_000_000.0);
    /// ```
    pub fn system() -> Self {
        Now(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()))
    }

    /// The reading in seconds.
    pub fn seconds(self) -> f64 {
        self.0
    }
}

/// A lease duration in seconds: finite, greater than zero, and at most [`Ttl::MAX`].
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
    /// The longest lease: 10¹² seconds, about 31,700 years. A longer one is a mistake (a unit
    /// mixed up, a sentinel), not a lease: it would hold the job for good and make every
    /// figure derived from lease ends meaningless, so it is refused like the others.
    pub const MAX: f64 = 1e12;

    /// Validates a lease duration.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `ttl` when `ttl` is NaN, infinite, zero, negative or
    /// above [`Ttl::MAX`].
    pub fn new(ttl: f64) -> Result<Self> {
        if ttl.is_finite() && ttl > 0.0 && ttl <= Self::MAX {
            Ok(Ttl(ttl))
        } else {
            Err(Error::invalid(
                "ttl",
                format!(
                    "must be a finite number of seconds greater than 0 and at most 1e12, got {}",
                    Seconds(ttl)
                ),
            ))
        }
    }

    /// The duration in seconds.
    pub fn seconds(self) -> f64 {
        self.0
    }

    /// The end of a lease taken at `now`: `now + ttl` (never infinite: `now` is finite and the
    /// ttl at most [`Ttl::MAX`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `ttl` when the ttl is too small to move the end past
    /// `now` (`1e-9` at `now = 1.7e9` rounds back to
    /// `now`): such a lease would never be live, yet spend an attempt and a fence. When the
    /// ttl is a second or more and still rounds away, `now` is what is wrong (beyond 2^53
    /// seconds, a quarter of a billion years, a float cannot count seconds): the error then
    /// names `now`.
    pub fn until(self, now: Now) -> Result<f64> {
        let until = now.0 + self.0;
        if until <= now.0 && self.0 >= 1.0 {
            Err(Error::invalid(
                "now",
                format!(
                    "too large to end a lease after it: now + ttl rounds to now ({} + {}); \
                     a clock reading in seconds is far below 2^53",
                    Seconds(now.0),
                    Seconds(self.0)
                ),
            ))
        } else if until <= now.0 {
            Err(Error::invalid(
                "ttl",
                format!(
                    "too small to end the lease after now: now + ttl rounds to now ({} + {})",
                    Seconds(now.0),
                    Seconds(self.0)
                ),
            ))
        } else {
            Ok(until)
        }
    }
}

/// A resource name for the fence gate ([`Store::admit`](crate::Store::admit)): any non-empty
/// string naming something outside the store that checks fences (a file, a table, an API).
///
/// ```
/// # use leasefence::Resource;
/// assert_eq!(Resource::new("s3://bucket/report.pdf").unwrap().as_str(), "s3://bucket/report.pdf");
/// assert_eq!(Resource::new("").unwrap_err().argument(), Some("resource"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resource<'a>(&'a str);

impl<'a> Resource<'a> {
    /// Validates a resource name.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `resource` when `name` is empty.
    pub fn new(name: &'a str) -> Result<Self> {
        non_empty("resource", name).map(Resource)
    }

    /// The name as text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// How many jobs one [`Store::claim_batch`](crate::Store::claim_batch) may take: at least 1.
///
/// ```
/// # use leasefence::BatchSize;
/// assert_eq!(BatchSize::new(64).unwrap().get(), 64);
/// assert_eq!(BatchSize::ONE.get(), 1);
/// assert_eq!(BatchSize::new(0).unwrap_err().argument(), Some("n"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchSize(std::num::NonZeroUsize);

impl BatchSize {
    /// One job: what [`Store::claim_next`](crate::Store::claim_next) takes.
    pub const ONE: BatchSize = BatchSize(std::num::NonZeroUsize::MIN);

    /// Validates a batch size.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `n` when `n == 0`.
    pub fn new(n: usize) -> Result<Self> {
        std::num::NonZeroUsize::new(n)
            .map(BatchSize)
            .ok_or_else(|| Error::invalid("n", "must be at least 1"))
    }

    /// The size.
    pub fn get(self) -> usize {
        self.0.get()
    }

    /// The size as an SQL `LIMIT` (saturating at `i64::MAX`).
    pub(crate) fn limit(self) -> i64 {
        i64::try_from(self.get()).unwrap_or(i64::MAX)
    }
}

impl From<std::num::NonZeroUsize> for BatchSize {
    fn from(n: std::num::NonZeroUsize) -> Self {
        BatchSize(n)
    }
}

/// A number (of seconds, mostly) as an error message shows it: as Rust prints it, except that
/// one very large or very small is written with an exponent (`1e300`, `1e-300`) instead of its
/// hundreds of digits.
pub struct Seconds(pub f64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let magnitude = self.0.abs();
        if magnitude.is_finite() && magnitude != 0.0 && !(1e-6..1e16).contains(&magnitude) {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Seconds;

    #[test]
    fn far_off_numbers_are_shown_with_an_exponent_the_others_as_rust_prints_them() {
        let shown = |x: f64| Seconds(x).to_string();
        assert_eq!(shown(1e300), "1e300");
        assert_eq!(shown(-1e20), "-1e20");
        assert_eq!(shown(1e-300), "1e-300");
        assert_eq!(shown(1.5e-7), "1.5e-7");
        assert_eq!(shown(1e16), "1e16");
        assert_eq!(shown(1e15), "1000000000000000");
        assert_eq!(shown(1_700_000_000.25), "1700000000.25");
        assert_eq!(shown(0.000_001), "0.000001");
        assert_eq!(shown(2.5), "2.5");
        assert_eq!(shown(0.0), "0");
        assert_eq!(shown(f64::NAN), "NaN");
        assert_eq!(shown(f64::NEG_INFINITY), "-inf");
    }
}
