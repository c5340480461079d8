//! A stop signal that reaches the commands too.
//!
//! systemd's default `KillMode=control-group` sends SIGTERM to every process of a service at
//! once — the commands as well as `work` — and so does `kill -TERM 0` from a script. A command
//! that dies of the very signal that stops the worker has not failed: its attempt is given back
//! like any attempt a shutdown interrupts (lease released, fence kept, attempt refunded).
//! Recorded as a failure it used up an attempt, and on a job's last attempt made it dead.

use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use leasefence::{JobContext, ShutdownHandle, Store};

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
}

/// Counts a handler as busy while it lives.
pub(super) struct Busy<'a>(&'a Inner);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Interrupts {
    /// Gives the interrupted handlers the worker's shutdown handle.
    pub(super) fn set_handle(&self, stop: ShutdownHandle) {
        let _ = self.0.stop.set(stop);
    }

    /// Counts the calling handler as busy until the guard drops.
    pub(super) fn busy(&self) -> Busy<'_> {
        self.0.busy.fetch_add(1, Ordering::SeqCst);
        Busy(&self.0)
    }

    /// Whether a command that exited with `status` (on its own, not stopped by `work`) died of
    /// the signal that is stopping the worker. If so, waits until the worker has given the
    /// job's lease back — at the shutdown deadline, or at once when every other command has
    /// ended too — and returns `true`; the worker then reports the job released, not failed.
    pub(super) fn given_back<S: Store>(&self, job: &JobContext<'_, S>, status: ExitStatus) -> bool {
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
        let inner = &self.0;
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        // The token is cancelled when the worker gives the lease back (or loses it).
        while !job.token().wait_timeout(Duration::from_millis(20)) {
            // Nothing left to wait for: every busy handler is one of these.
            if inner.waiting.load(Ordering::SeqCst) >= inner.busy.load(Ordering::SeqCst)
                && let Some(stop) = inner.stop.get()
            {
                stop.shutdown_now();
            }
        }
        inner.waiting.fetch_sub(1, Ordering::SeqCst);
        true
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
