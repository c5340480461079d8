//! When a wait ends, for timeouts of any length.
//!
//! A timeout is a [`Duration`], and `Duration::MAX` is a valid one — "wait on" (a worker's
//! shutdown deadline, a busy timeout, [`Watch::wait`](crate::Watch::wait)). `Instant + Duration`
//! panics past the clock's range, so every wait in the library takes its end from here:
//! a timeout too long to add to now is no end at all.

use std::time::{Duration, Instant};

/// The end of a wait: an instant, or never (a timeout too long to add to now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    /// `timeout` from now; never when that is beyond the clock's range.
    pub(crate) fn after(timeout: Duration) -> Self {
        Self(Instant::now().checked_add(timeout))
    }

    /// A deadline that never comes.
    pub(crate) const NEVER: Self = Self(None);

    /// The time left until the deadline: zero once it has passed, `Duration::MAX` for never.
    /// `std`'s timed waits (`recv_timeout`, `Condvar::wait_timeout`) take `Duration::MAX` as
    /// "wait on"; an API that adds the time to the clock itself needs a cap.
    pub(crate) fn left(self) -> Duration {
        self.0.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }

    /// Whether the deadline has come.
    pub(crate) fn passed(self) -> bool {
        self.left().is_zero()
    }

    /// The earlier of the two deadlines.
    pub(crate) fn earlier(self, other: Self) -> Self {
        match (self.0, other.0) {
            (Some(a), Some(b)) => Self(Some(a.min(b))),
            (Some(at), None) | (None, Some(at)) => Self(Some(at)),
            (None, None) => Self::NEVER,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_beyond_the_clock_never_passes() {
        let never = Deadline::after(Duration::MAX);
        assert_eq!(never, Deadline::NEVER);
        assert!(!never.passed());
        assert_eq!(never.left(), Duration::MAX);
    }

    #[test]
    fn a_zero_timeout_has_passed_and_a_long_one_has_time_left() {
        assert!(Deadline::after(Duration::ZERO).passed());
        let hour = Deadline::after(Duration::from_secs(3600));
        assert!(!hour.passed());
        let left = hour.left();
        assert!(left > Duration::from_secs(3590) && left <= Duration::from_secs(3600));
    }

    #[test]
    fn the_earlier_deadline_wins_and_never_loses_to_any() {
        let soon = Deadline::after(Duration::ZERO);
        let later = Deadline::after(Duration::from_secs(3600));
        assert_eq!(soon.earlier(later), soon);
        assert_eq!(later.earlier(soon), soon);
        assert_eq!(Deadline::NEVER.earlier(later), later);
        assert_eq!(later.earlier(Deadline::NEVER), later);
        assert_eq!(Deadline::NEVER.earlier(Deadline::NEVER), Deadline::NEVER);
    }
}
