//! [`ShutdownHandle::on_signals`](crate::ShutdownHandle::on_signals) (cargo feature `signals`):
//! the process's stop signals drive the handle — the first a graceful shutdown, the next ones
//! [`shutdown_now`](crate::ShutdownHandle::shutdown_now).

use super::shutdown::ShutdownHandle;
use crate::error::{Error, Result};

impl ShutdownHandle {
    /// Wires the handle to the process's stop signals: SIGINT (Ctrl-C), SIGTERM (the stop
    /// signal of systemd, Docker and Kubernetes) and SIGHUP on Unix, Ctrl-C, Ctrl-Break and
    /// console close on Windows, all treated alike. The first one calls
    /// [`shutdown`](Self::shutdown): no new claims, running jobs get the shutdown deadline. A
    /// second one calls [`shutdown_now`](Self::shutdown_now): what still runs is cancelled and
    /// released at once. Neither ends the process: [`Worker::run`](crate::Worker::run) returns
    /// its counters as after any shutdown, and the caller decides what comes next.
    ///
    /// The handler runs on a thread of its own (the `ctrlc` crate's), not in signal context. It
    /// stays installed for the life of the process and replaces the default action of these
    /// signals (and an inherited "ignore"), so after the worker stopped they no longer end the
    /// process. See [`on_signals_with`](Self::on_signals_with) to be told of each signal.
    ///
    /// # Errors
    /// [`Error::SignalHandler`] when a handler is already installed in this process — by an
    /// earlier call, for this or another worker, or by another user of the `ctrlc` crate — or
    /// the system refused one. Nothing is changed then.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), leasefence::Error> {
    /// use leasefence::Worker;
    ///
    /// let worker = Worker::sqlite("jobs.db").build(|_ctx| Ok("ok".into()))?;
    /// worker.shutdown_handle().on_signals()?;
    /// let stats = worker.run()?; // returns after SIGTERM or Ctrl-C
    /// println!("{} released at the deadline", stats.released);
    /// # Ok(()) }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "signals")))]
    pub fn on_signals(self) -> Result<()> {
        self.on_signals_with(|_| {})
    }

    /// Like [`on_signals`](Self::on_signals), and calls `notify` after each signal was acted
    /// on, with how many have arrived so far: `1` when the graceful shutdown began, `2` when
    /// the deadline was cut to zero, more for later ones (which change nothing). A place to
    /// tell the user what happens next; it runs on the handler's thread, so it may block or
    /// print, but a panic in it ends that thread and with it the handling of later signals.
    ///
    /// # Errors
    /// As for [`on_signals`](Self::on_signals).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), leasefence::Error> {
    /// use leasefence::Worker;
    ///
    /// let worker = Worker::sqlite("jobs.db").build(|_ctx| Ok("ok".into()))?;
    /// worker.shutdown_handle().on_signals_with(|n| match n {
    ///     1 => eprintln!("stopping: running jobs get the deadline (again to stop them now)"),
    ///     _ => eprintln!("stopping now: running jobs are cancelled and released"),
    /// })?;
    /// worker.run()?;
    /// # Ok(()) }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "signals")))]
    pub fn on_signals_with(self, mut notify: impl FnMut(u32) + Send + 'static) -> Result<()> {
        let mut count: u32 = 0;
        ctrlc::set_handler(move || {
            count = count.saturating_add(1);
            if count == 1 {
                self.shutdown();
            } else {
                self.shutdown_now();
            }
            notify(count);
        })
        .map_err(|e| Error::SignalHandler {
            reason: match e {
                ctrlc::Error::MultipleHandlers => {
                    "a handler is already installed in this process".to_string()
                }
                other => other.to_string(),
            },
        })
    }
}
