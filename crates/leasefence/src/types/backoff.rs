//! When a failed job may run again.

use super::args::Now;
use super::job::Lease;

/// Exponential backoff with jitter for retries after `fail`.
///
/// The delay before attempt `n + 1` is `min(max, base · factor^(n-1))`, scaled by a factor in
/// `[1 - jitter, 1 + jitter]` derived from the job id and fence (so it is spread out across
/// jobs, yet reproducible for one lease).
///
/// ```
/// use leasefence::Backoff;
/// let b = Backoff { base: 1.0, factor: 2.0, max: 60.0, jitter: 0.0 };
/// assert_eq!(b.delay("job", 1), 1.0);
/// assert_eq!(b.delay("job", 4), 8.0);
/// assert_eq!(b.delay("job", 30), 60.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay after the first failed attempt, in seconds.
    pub base: f64,
    /// Growth per attempt.
    pub factor: f64,
    /// The largest delay, in seconds.
    pub max: f64,
    /// Relative spread, `0.0..1.0`.
    pub jitter: f64,
}

impl Default for Backoff {
    /// 1 s, doubling, at most one hour, ±20 % jitter.
    fn default() -> Self {
        Backoff {
            base: 1.0,
            factor: 2.0,
            max: 3600.0,
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// The delay after the failure of attempt number `attempt` (from 1) of job `job_id`, in
    /// seconds.
    pub fn delay(&self, job_id: &str, attempt: i64) -> f64 {
        use std::hash::{Hash, Hasher};
        let exponent = attempt.saturating_sub(1).clamp(0, 1024) as i32;
        let raw = self.base * self.factor.powi(exponent);
        let capped = if raw.is_finite() {
            raw.min(self.max)
        } else {
            self.max
        };
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (job_id, attempt).hash(&mut hasher);
        let unit = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let spread = self.jitter * (2.0 * unit - 1.0);
        (capped * (1.0 + spread)).max(0.0)
    }

    /// Refuses a policy whose delays mean nothing: [`Error::InvalidArgument`] naming `backoff`
    /// and the field — `base` and `max` not finite or negative, `factor` not finite or not
    /// above 0, `jitter` outside `0.0..1.0`. The worker builders call it.
    pub(crate) fn check(&self) -> crate::Result<()> {
        let bad = |field: &str, value: f64, rule: &str| {
            Err(crate::Error::invalid(
                "backoff",
                format!(
                    "{field} must be {rule}, got {}",
                    crate::types::args::Seconds(value)
                ),
            ))
        };
        if !(self.base.is_finite() && self.base >= 0.0) {
            return bad("base", self.base, "a finite number of seconds, 0 or more");
        }
        if !(self.factor.is_finite() && self.factor > 0.0) {
            return bad("factor", self.factor, "a finite number above 0");
        }
        if !(self.max.is_finite() && self.max >= 0.0) {
            return bad("max", self.max, "a finite number of seconds, 0 or more");
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return bad("jitter", self.jitter, "in 0.0..1.0");
        }
        Ok(())
    }

    /// When the job of `lease` may run again after it failed at `now`.
    pub fn retry_at(&self, lease: &Lease, now: Now) -> Now {
        let at = now.0 + self.delay(&lease.job_id, i64::from(lease.attempt));
        Now(if at.is_finite() { at } else { now.0 })
    }
}
