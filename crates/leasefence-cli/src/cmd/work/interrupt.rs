//! A stop signal that reaches the commands too.
//!
//! systemd's default `KillMode=control-group` sends SIGTERM to every process of a service at
//! once, the commands as well as `work`. A command that dies of the very signal that stops the
//! worker has not failed: its handler gives the attempt back at once
//! (`JobContext::release`: lease released, fence kept, attempt refunded), so the job is
//! claimable again and no attempt of its budget is spent — recorded as a failure it used up an
//! attempt, and on a job's last attempt made it dead. Given back at once, the attempt is
//! settled before a `--timeout` could fail it. When the shell `work` started is what died (a
//! script, a pipeline: `sh` does not exec them), what it started may still be finishing — a
//! trap cleaning up — so the group is left to end on its own for up to the shutdown deadline
//! (its late writes are refused like any stale worker's); its exit status is unknown (the shell
//! is gone), so the job is given back either way.

use std::collections::HashSet;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasefence::{JobContext, Lease, Store};

/// How long a command dead of a stop signal waits for the worker to be stopping too: the signal
/// reaches both at about the same time, and the worker's may be handled a moment later.
const SIGNAL_SKEW: Duration = Duration::from_millis(500);

/// The handlers of one `work`, as far as stopping is concerned.
#[derive(Clone, Default)]
pub(super) struct Interrupts(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// Handlers running a command, or waiting for what an interrupted one left behind.
    busy: AtomicUsize,
    /// Jobs whose handler has returned and whose outcome the worker has not reported yet: lines
    /// still to be printed when the worker returns.
    unsettled: Mutex<HashSet<(String, i64)>>,
}

impl Inner {
    fn unsettled(&self) -> std::sync::MutexGuard<'_, HashSet<(String, i64)>> {
        self.unsettled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counts a handler as busy while it lives; as it ends, its job is unsettled until the worker
/// reports the outcome ([`Interrupts::settled`]).
pub(super) struct Busy<'a> {
    inner: &'a Inner,
    job: (String, i64),
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        // Unsettled before it stops being busy: never neither.
        self.inner.unsettled().insert(std::mem::take(&mut self.job));
        self.inner.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Interrupts {
    /// Counts the handler of `job` as busy until the guard drops.
    pub(super) fn busy<S: Store>(&self, job: &JobContext<'_, S>) -> Busy<'_> {
        self.busy_with(job.job_id(), job.fence())
    }

    fn busy_with(&self, job_id: &str, fence: i64) -> Busy<'_> {
        self.0.busy.fetch_add(1, Ordering::SeqCst);
        Busy {
            inner: &self.0,
            job: (job_id.to_owned(), fence),
        }
    }

    /// The worker reported how the job of `lease` ended.
    pub(super) fn settled(&self, lease: &Lease) {
        self.settled_with(&lease.job_id, lease.fence);
    }

    fn settled_with(&self, job_id: &str, fence: i64) {
        self.0.unsettled().remove(&(job_id.to_owned(), fence));
    }

    /// Whether no handler is busy and every outcome is reported.
    fn idle(&self) -> bool {
        self.0.busy.load(Ordering::SeqCst) == 0 && self.0.unsettled().is_empty()
    }

    /// Whether a command that exited with `status` on its own (not stopped by `work`) died of
    /// the signal that is stopping the worker: a stop signal, while the worker is stopping or
    /// at most [`SIGNAL_SKEW`] before it takes its own.
    pub(super) fn stopped_by_signal<S: Store>(
        &self,
        job: &JobContext<'_, S>,
        status: ExitStatus,
    ) -> bool {
        if !stop_signal(status) {
            return false;
        }
        let asked = Instant::now();
        while !job.is_shutting_down() {
            if asked.elapsed() >= SIGNAL_SKEW {
                // Somebody else's signal: the command failed.
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Waits until no handler is busy and every outcome is reported, for at most `limit`: after
    /// the worker returned, so that commands still being stopped get their grace and their
    /// jobs' lines are printed.
    pub(super) fn wait_idle(&self, limit: Duration) {
        let start = Instant::now();
        while !self.idle() && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Gives the attempt of `job` back ([`JobContext::release`]), trying again while the store is
/// busy or unavailable — until it answers, or the worker gives the attempt up itself (its
/// shutdown deadline: the token is cancelled, and the worker releases the lease).
pub(super) fn give_back<S: Store>(job: &JobContext<'_, S>) -> leasefence::Result<bool> {
    loop {
        match job.release() {
            Err(e) if e.is_retryable() && !job.token().wait_timeout(RETRY_PAUSE) => {}
            answer => return answer,
        }
    }
}

/// The pause between two tries of [`give_back`] (each waits out the store's busy timeout).
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Whether `status` is a death by one of the signals that stop `work` (SIGTERM, SIGINT,
/// SIGHUP), or the exit status 128 + that signal with which shells and many programs report
/// one.
#[cfg(unix)]
fn stop_signal(status: ExitStatus) -> bool {
    use nix::sys::signal::Signal;
    use std::os::unix::process::ExitStatusExt as _;
    let stops = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP].map(|s| s as i32);
    match (status.signal(), status.code()) {
        (Some(signal), _) => stops.contains(&signal),
        (None, Some(code)) => code > 128 && stops.contains(&(code - 128)),
        (None, None) => false,
    }
}

#[cfg(not(unix))]
fn stop_signal(_status: ExitStatus) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `work` is idle only once every handler has ended and its job's outcome was reported
    /// (its line printed), the outcome of the same job's other fence not counting.
    #[test]
    fn idle_only_once_every_handler_has_ended_and_its_outcome_was_reported() {
        let interrupts = Interrupts::default();
        assert!(interrupts.idle());
        let first = interrupts.busy_with("first", 1);
        let second = interrupts.busy_with("second", 1);
        drop(first);
        interrupts.settled_with("first", 1);
        assert!(!interrupts.idle(), "the second handler still runs");
        drop(second);
        assert!(
            !interrupts.idle(),
            "the second returned; its outcome is not reported yet"
        );
        interrupts.settled_with("second", 2); // another fence of the same job: not it
        assert!(!interrupts.idle());
        interrupts.settled_with("second", 1);
        assert!(interrupts.idle());
        assert_eq!(interrupts.0.busy.load(Ordering::SeqCst), 0);
    }

    #[cfg(unix)]
    #[test]
    fn the_stop_signals_and_their_exit_statuses_are_interruptions_other_ends_are_not() {
        use std::os::unix::process::ExitStatusExt as _;
        let by_signal = |n: i32| ExitStatus::from_raw(n);
        let by_code = |n: i32| ExitStatus::from_raw(n << 8);
        for stop in [15, 2, 1] {
            assert!(stop_signal(by_signal(stop)), "signal {stop}");
            assert!(stop_signal(by_code(128 + stop)), "exit {}", 128 + stop);
        }
        for other in [9, 6, 11] {
            assert!(!stop_signal(by_signal(other)), "signal {other}");
            assert!(!stop_signal(by_code(128 + other)), "exit {}", 128 + other);
        }
        for code in [0, 1, 2, 15, 128] {
            assert!(!stop_signal(by_code(code)), "exit {code}");
        }
    }
}
