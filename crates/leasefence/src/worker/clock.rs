//! Where a worker reads the time for leases: [`Clock`](crate::Clock), [`SystemClock`],
//! [`ManualClock`], and
//! the worker's own reading of it on the store's timescale.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::error::Result;
use crate::types::Now;

/// Where a worker reads the time for leases: seconds, on the same scale for every worker of a
/// store.
///
/// ```
/// use leasefence::{Clock, ManualClock, SystemClock};
/// assert!(SystemClock.now() > 1.6e9); // seconds since the Unix epoch
/// let clock = ManualClock::new(100.0);
/// clock.advance(5.0);
/// assert_eq!(clock.now(), 105.0);
/// ```
pub trait Clock: Send + Sync {
    /// The current reading in seconds. Must be finite and should never go backwards.
    fn now(&self) -> f64;
}

/// The system clock: seconds since the Unix epoch. The default [`Clock`](crate::Clock) of a
/// [`Worker`](crate::Worker).
///
/// ```
/// use leasefence::{Clock, SystemClock};
/// let (a, b) = (SystemClock.now(), SystemClock.now());
/// assert!(b >= a);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// The database's clock as read once, advanced by a monotonic timer: the default clock of a
/// worker whose store judges leases by the database's clock.
#[derive(Debug)]
struct Anchored {
    at_start: f64,
    start: Instant,
}

impl Clock for Anchored {
    fn now(&self) -> f64 {
        self.at_start + self.start.elapsed().as_secs_f64()
    }
}

/// A clock that moves only when told to, shared by every clone: tests hand one to a worker and
/// move it with [`set`](ManualClock::set) and [`advance`](ManualClock::advance) instead of
/// sleeping.
///
/// ```
/// use leasefence::{Clock, ManualClock};
/// let clock = ManualClock::new(0.0);
/// let worker_side = clock.clone();
/// clock.set(10.0);
/// assert_eq!(clock.advance(2.5), 12.5);
/// assert_eq!(worker_side.now(), 12.5);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    bits: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: f64) -> Self {
        ManualClock {
            bits: Arc::new(AtomicU64::new(start.to_bits())),
        }
    }

    /// Sets the reading to `now`.
    pub fn set(&self, now: f64) {
        self.bits.store(now.to_bits(), Ordering::SeqCst);
    }

    /// Moves the clock forward by `seconds` and returns the new reading.
    pub fn advance(&self, seconds: f64) -> f64 {
        let mut new = 0.0;
        let _ = self
            .bits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |bits| {
                new = f64::from_bits(bits) + seconds;
                Some(new.to_bits())
            });
        new
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::SeqCst))
    }
}

/// The clock a worker reads, on the store's timescale: the builder's [`Clock`](crate::Clock),
/// shifted by the
/// offset to the database's clock, or replaced by [`Anchored`] (see
/// [`Worker::run`](crate::Worker::run)).
///
/// [`Worker::run`](crate::Worker::run): crate::Worker::run
pub(super) struct WorkerClock {
    clock: Arc<dyn Clock>,
    /// No clock was given to the builder: [`SystemClock`].
    is_default: bool,
    /// Seconds added to every reading of `clock` (f64 bits): the database's clock minus the
    /// worker's, measured when [`Worker::run`](crate::Worker::run) starts on a store that
    /// judges leases by the database's clock; 0 otherwise.
    offset: AtomicU64,
}

impl WorkerClock {
    pub(super) fn new(clock: Arc<dyn Clock>, is_default: bool) -> Self {
        WorkerClock {
            clock,
            is_default,
            offset: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// The reading as a validated [`Now`].
    pub(super) fn now(&self) -> Result<Now> {
        Now::new(self.reading())
    }

    /// The worker's clock on the store's timescale.
    pub(super) fn reading(&self) -> f64 {
        self.clock.now() + f64::from_bits(self.offset.load(Ordering::SeqCst))
    }

    /// Puts the worker on the database's clock, read as `reading`. With no clock of the
    /// caller's, it follows that reading on a monotonic timer from now on, so a step of this
    /// host's clock cannot shift the heartbeats; a caller's clock is kept, shifted onto the
    /// database's timescale ([`shift_to`](Self::shift_to)).
    pub(super) fn follow(&mut self, reading: f64) {
        if self.is_default {
            self.clock = Arc::new(Anchored {
                at_start: reading,
                start: Instant::now(),
            });
        } else {
            self.shift_to(reading);
        }
    }

    /// Shifts every later reading so that this one equals `reading`.
    pub(super) fn shift_to(&self, reading: f64) {
        let offset = reading - self.clock.now();
        self.offset.store(offset.to_bits(), Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a clock of the caller's, the worker follows the database's reading on a
    /// monotonic timer: a step of the clock it had (here a manual clock standing in for the
    /// system clock) no longer moves it.
    #[test]
    fn the_default_clock_is_replaced_by_the_databases_on_a_monotonic_timer() {
        let host = ManualClock::new(5_000.0);
        let mut clock = WorkerClock::new(Arc::new(host.clone()), true);
        clock.follow(100.0);
        host.advance(3_600.0);
        let reading = clock.reading();
        assert!((100.0..101.0).contains(&reading), "{reading}");
    }

    /// A caller's clock is kept, shifted onto the database's timescale: it moves exactly as
    /// the caller moves it.
    #[test]
    fn a_callers_clock_is_kept_and_shifted_onto_the_databases_timescale() {
        let caller = ManualClock::new(5_000.0);
        let mut clock = WorkerClock::new(Arc::new(caller.clone()), false);
        clock.follow(100.0);
        assert_eq!(clock.reading(), 100.0);
        caller.advance(5.0);
        assert_eq!(clock.reading(), 105.0);
        assert_eq!(clock.now().unwrap().seconds(), 105.0);
    }
}
