//! One module per subcommand, each with its clap `Args` and a `run` function.

pub mod cancel;
pub mod claim;
pub mod complete;
pub mod demo;
pub mod enqueue;
pub mod init;
pub mod list;
pub mod purge;
pub mod queue;
pub mod release;
pub mod renew;
pub mod state;
pub mod stats;
pub mod work;

use std::time::{SystemTime, UNIX_EPOCH};

/// `--now` if given, else the system clock in seconds since the Unix epoch.
pub fn now_or_clock(now: Option<f64>) -> f64 {
    now.unwrap_or_else(unix_now)
}

/// The system clock in seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
