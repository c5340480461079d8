//! The spinner of `work` and the per-job lines it prints: what each finished job came to.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use leasefence::{JobOutcome, Lease};
use serde_json::json;

use crate::output::Out;

/// The spinner on stderr (hidden when stderr is not a terminal) and the counts it shows.
#[derive(Clone)]
pub(super) struct Progress {
    pub(super) bar: ProgressBar,
    counts: Arc<[AtomicU64; 5]>,
}

pub(super) const RUNNING: usize = 0;
pub(super) const DONE: usize = 1;
pub(super) const RETRIED: usize = 2;
pub(super) const DEAD: usize = 3;
pub(super) const REFUSED: usize = 4;

impl Progress {
    pub(super) fn new(concurrency: u32) -> anyhow::Result<Self> {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
                .context("progress style")?,
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        let progress = Progress {
            bar,
            counts: Arc::default(),
        };
        progress
            .bar
            .set_message(format!("waiting for jobs ({concurrency} at a time)"));
        Ok(progress)
    }

    pub(super) fn add(&self, which: usize, delta: i64) {
        if delta >= 0 {
            self.counts[which].fetch_add(delta as u64, Ordering::Relaxed);
        } else {
            self.counts[which].fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
        let n = |i: usize| self.counts[i].load(Ordering::Relaxed);
        self.bar.set_message(format!(
            "{} running, {} done, {} retried, {} dead, {} refused",
            n(RUNNING),
            n(DONE),
            n(RETRIED),
            n(DEAD),
            n(REFUSED)
        ));
    }

    /// Prints one line per finished job and updates the counts.
    pub(super) fn report(&self, out: Out, lease: &Lease, outcome: &JobOutcome) {
        let fence = lease.fence;
        // `ok`: the command succeeded and its result was stored.
        let ok = matches!(outcome, JobOutcome::Completed);
        let mut record = json!({ "op": "work", "ok": ok, "job_id": lease.job_id, "fence": fence });
        // One line per job whatever the id holds: anyone with the worker token can enqueue an
        // id with a newline over HTTP, which would split (or forge) lines of this log.
        let id = crate::cmd::shared::one_line(&lease.job_id);
        let (human, which) = match outcome {
            JobOutcome::Completed => {
                record["event"] = json!("completed");
                (format!("done {id} (fence {fence})"), DONE)
            }
            JobOutcome::Retrying { at, error } => {
                record["event"] = json!("retrying");
                record["retry_at"] = json!(at);
                record["error"] = json!(error);
                (
                    format!(
                        "retry {id} (fence {fence}) at {}: {error}",
                        crate::cmd::time::human(*at, system_now())
                    ),
                    RETRIED,
                )
            }
            JobOutcome::Dead { error } => {
                record["event"] = json!("dead");
                record["error"] = json!(error);
                (format!("dead {id} (fence {fence}): {error}"), DEAD)
            }
            JobOutcome::Refused => {
                record["event"] = json!("refused");
                (
                    format!(
                        "refused {id} (fence {fence}): the lease was no longer current; nothing \
                         stored"
                    ),
                    REFUSED,
                )
            }
            JobOutcome::Cancelled => {
                record["event"] = json!("cancelled");
                (
                    format!(
                        "cancelled {id} (fence {fence}): an operator ended the job; nothing \
                         stored"
                    ),
                    REFUSED,
                )
            }
            JobOutcome::Released => {
                record["event"] = json!("released");
                (
                    format!(
                        "released {id} (fence {fence}): the worker stopped before the job \
                         finished; its lease is given back, so the job is claimable again at once \
                         (or, if the store cannot be reached, once its lease ends)"
                    ),
                    REFUSED,
                )
            }
            JobOutcome::StoreError(error) => {
                record["event"] = json!("store_error");
                record["error"] = json!(error);
                // The worker already tried the write again; the library's "(retry the call)"
                // is advice for a caller of its own, not for this job.
                let error = error.trim_end_matches(" (retry the call)");
                (
                    format!(
                        "error {id} (fence {fence}): could not record the outcome: {error}; the \
                         job runs again once its lease ends"
                    ),
                    REFUSED,
                )
            }
            other => {
                record["event"] = json!("other");
                (format!("{id} (fence {fence}): {other:?}"), REFUSED)
            }
        };
        self.bar.suspend(|| out.line(human, record));
        self.add(RUNNING, -1);
        self.add(which, 1);
    }
}

/// The system clock in Unix seconds: how far a retry time is, for its readable line (the
/// worker's own clock is this one, or the database's, which the store keeps close to it).
fn system_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
