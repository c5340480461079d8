//! A stop signal that reaches the commands too.
//!
//! systemd's default `KillMode=control-group` sends SIGTERM to every process of a service at
//! once, the commands as well as `work`. A command that dies of the very signal that stops the
//! worker has not failed: its attempt is given back like any attempt a shutdown interrupts
//! (lease released, fence kept, attempt refunded). Recorded as a failure it used up an attempt,
//! and on a job's last attempt made it dead. When the shell `work` started is what died (a
//! script, a pipeline: `sh` does not exec them), what it started may still be finishing — a
//! trap cleaning up — so the group is left to end on its own until the shutdown deadline; its
//! exit status is unknown (the shell is gone), so the job is released either way.

use std::collections::HashSet;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use leasefence::{JobContext, Lease, ShutdownHandle, Store};

/// How long a command dead of a stop signal waits for the worker to be stopping too: the signal
/// reaches both at about the same time, and the worker's may be handled a moment later.
const SIGNAL_SKEW: Duration = Duration::from_millis(500);

/// The handlers of one `work`, as far as interrupted commands are concerned.
#[derive(Clone, Default)]
pub(super) struct Interrupts(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// The worker's shutdown handle, once it is built.
    stop: OnceLock<ShutdownHandle>,
    /// Handlers running a command, or waiting after one was interrupted.
    busy: AtomicUsize,
    /// Of those, the ones whose command died of the stop signal, waiting for their lease to be
    /// given back.
    waiting: AtomicUsize,
    /// Jobs whose handler has returned and whose outcome the worker has not reported yet: a
    /// result still on its way to the store, which giving the leases back now would lose.
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
    /// Gives the interrupted handlers the worker's shutdown handle.
    pub(super) fn set_handle(&self, stop: ShutdownHandle) {
        let _ = self.0.stop.set(stop);
    }

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

    /// Whether nothing is left to wait for: every busy handler is an interrupted one, waiting,
    /// and no result of a handler that finished is still to be written.
    fn nothing_left(&self) -> bool {
        let inner = &self.0;
        inner.waiting.load(Ordering::SeqCst) >= inner.busy.load(Ordering::SeqCst)
            && inner.unsettled().is_empty()
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

    /// Waits, for a job whose command the stop signal ended, until the worker has given its
    /// lease back — at the shutdown deadline, or at once when every other command has ended too
    /// and every result has been written; the worker then reports the job released, not
    /// failed.
    pub(super) fn give_back<S: Store>(&self, job: &JobContext<'_, S>) {
        let inner = &self.0;
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        // The token is cancelled when the worker gives the lease back (or loses it).
        while !job.token().wait_timeout(Duration::from_millis(20)) {
            if self.nothing_left()
                && let Some(stop) = inner.stop.get()
            {
                stop.shutdown_now();
            }
        }
        inner.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Waits until no handler is busy and every outcome is reported, for at most `limit`: after
    /// the worker returned, so that commands still being stopped get their grace and their
    /// jobs' lines are printed.
    pub(super) fn wait_idle(&self, limit: Duration) {
        let start = Instant::now();
        while (self.0.busy.load(Ordering::SeqCst) > 0 || !self.0.unsettled().is_empty())
            && start.elapsed() < limit
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

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

    /// The leases go back early only once every other handler has ended and its outcome was
    /// reported: a result still on its way to the store is not given away with the rest.
    #[test]
    fn nothing_is_left_only_once_every_other_job_has_ended_and_been_reported() {
        let interrupts = Interrupts::default();
        let quitter = interrupts.busy_with("quitter", 1);
        let keeper = interrupts.busy_with("keeper", 1);
        interrupts.0.waiting.fetch_add(1, Ordering::SeqCst); // the quitter waits
        assert!(
            !interrupts.nothing_left(),
            "the keeper's command still runs"
        );
        drop(keeper);
        assert!(
            !interrupts.nothing_left(),
            "the keeper returned; its result is not written yet"
        );
        interrupts.settled_with("keeper", 2); // another fence of the same job: not it
        assert!(!interrupts.nothing_left());
        interrupts.settled_with("keeper", 1);
        assert!(interrupts.nothing_left());
        // The quitter's own end is reported after its lease went back.
        interrupts.0.waiting.fetch_sub(1, Ordering::SeqCst);
        drop(quitter);
        interrupts.settled_with("quitter", 1);
        assert!(interrupts.nothing_left());
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
