//! The scheduler role on a thread of a worker ([`WorkerBuilder::scheduler`]): a
//! [`Scheduler`] stepped every poll interval (at most a second) until the worker stops, then
//! resigned so another worker takes the role at once.
//!
//! [`WorkerBuilder::scheduler`]: crate::WorkerBuilder::scheduler

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::shared::Shared;
use super::stats::bump;
use crate::schedule::{Scheduler, Step};
use crate::store::Store;

/// The longest wait between two steps, in real time: slots have whole seconds.
const STEP: Duration = Duration::from_secs(1);

/// Starts the scheduler thread on `store` (a connection of its own).
pub(super) fn spawn<S: Store + Send + 'static>(
    shared: &Arc<Shared<S>>,
    store: S,
) -> JoinHandle<()> {
    let shared = shared.clone();
    std::thread::Builder::new()
        .name("leasefence-scheduler".into())
        .spawn(move || schedule(&shared, store))
        .expect("spawn the scheduler thread")
}

fn schedule<S: Store>(shared: &Shared<S>, store: S) {
    let owner = format!("{}-scheduler", shared.config.owner_prefix);
    let mut scheduler = match Scheduler::new(&store, &owner, shared.config.ttl) {
        Ok(scheduler) => scheduler,
        Err(e) => return shared.fatal(e),
    };
    while !shared.stop.is_cancelled() {
        let now = match shared.now() {
            Ok(now) => now,
            Err(e) => return shared.fatal(e),
        };
        match scheduler.step(now) {
            Ok(Step::Ticked(tick)) => {
                for job in &tick.enqueued {
                    tracing::info!(%owner, %job, "scheduled run enqueued");
                }
                if tick.skipped > 0 {
                    tracing::info!(
                        %owner,
                        skipped = tick.skipped,
                        "missed slots not run (each schedule runs once on catch-up)"
                    );
                }
            }
            Ok(Step::Refused) => {
                tracing::warn!(%owner, "the scheduler's enqueue was refused: its lease had expired");
            }
            Ok(Step::Standby) => {}
            Err(e) => {
                // Not fatal: the worker's jobs go on; the role is tried again next step.
                bump(&shared.counters.errors);
                tracing::warn!(%owner, error = %e, "the scheduler's step failed; trying again");
            }
        }
        shared.stop.wait_timeout(STEP.min(shared.config.poll));
    }
    match scheduler.resign() {
        Ok(true) => tracing::info!(%owner, "scheduler role given back"),
        Ok(false) => {}
        Err(e) => tracing::warn!(%owner, error = %e, "could not give the scheduler role back"),
    }
}
