//! The store's reachability as `serve` logs it: one warning when the database cannot be
//! reached (with the driver's reason: connection refused, too many clients, …), a reminder at
//! most every [`REMIND`] while it stays so (how many requests were answered 503 meanwhile), and
//! one line when it answers again — not a line per request.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often an outage that goes on is logged again.
pub const REMIND: Duration = Duration::from_secs(30);

struct Outage {
    began: Instant,
    said: Instant,
    /// Requests answered "unavailable" since the last line.
    failed: u64,
}

static OUTAGE: Mutex<Option<Outage>> = Mutex::new(None);

fn outage() -> std::sync::MutexGuard<'static, Option<Outage>> {
    OUTAGE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A store call found the database unreachable (or, from `/readyz`, not answering in time).
pub fn unreachable(error: &leasefence::Error) {
    let mut outage = outage();
    match outage.as_mut() {
        None => {
            let now = Instant::now();
            *outage = Some(Outage {
                began: now,
                said: now,
                failed: 1,
            });
            tracing::warn!(
                error = %leasefence::error_chain(error),
                "store unreachable: requests that need it are answered 503 until it answers"
            );
        }
        Some(o) if o.said.elapsed() >= REMIND => {
            o.failed += 1;
            tracing::warn!(
                error = %leasefence::error_chain(error),
                seconds = o.began.elapsed().as_secs_f64(),
                answered_503 = o.failed,
                "store still unreachable"
            );
            o.said = Instant::now();
            o.failed = 0;
        }
        Some(o) => o.failed += 1,
    }
}

/// A request was answered by the store (a route's success or refusal): ends an outage, if one
/// was going on, with a line saying how long it lasted.
pub fn answered() {
    let mut outage = outage();
    if let Some(o) = outage.take() {
        tracing::warn!(
            seconds = o.began.elapsed().as_secs_f64(),
            "store answers again"
        );
    }
}
