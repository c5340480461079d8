//! The async worker's two timekeepers for one run's held leases: the heartbeat, which renews
//! them all in one store call per tick, and the expiry, which gives a lease up by this
//! process's clock when it ends with no renewal granted.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::job::Loss;
use super::worker::{Key, Run, key, lock};
use crate::store::Store as _;
use crate::types::{Lease, Now};
use crate::worker::{LOSS_OPERATOR, LOSS_TAKEN_OVER, loss_reason, pause_after_failure};

/// How often held leases are checked against the clock.
const EXPIRY_TICK: Duration = Duration::from_millis(20);

/// Gives up, by this process's clock (`offset` puts it on the store's timescale), every held
/// lease whose end has passed with no renewal granted — a store that does not answer, a host
/// cut off from it: its handler's `lost` fires and the loss is counted. A task of its own, so
/// that a heartbeat waiting for the store delays nothing.
pub(super) async fn expiry(run: Arc<Run>, mut stop: watch::Receiver<bool>, offset: f64) {
    let inner = &run.inner;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(EXPIRY_TICK) => {}
        }
        let now = Now::system().seconds() + offset;
        let ended: Vec<Key> = lock(&run.held)
            .iter()
            .filter(|(_, h)| !h.writing && h.lost.borrow().is_none() && now >= h.lease.until)
            .map(|(k, _)| k.clone())
            .collect();
        for k in ended {
            if run.end(&k, Loss::TakenOver) {
                inner.count(|s| s.lost += 1);
                tracing::warn!(
                    job_id = %k.0, fence = k.1,
                    "the lease ended with no renewal granted; the handler is told"
                );
            }
        }
    }
}

/// Renews every held lease in one store call per tick; a refused one ends that lease, a
/// granted one runs on from the time it was asked (`offset`: the store's clock). A renewal
/// that failed is tried again soon, not a whole heartbeat later — a store busy or down for
/// less than what is left of the lease must not cost it — but not at once either: a tenth of
/// what is left of the lease after the failed try *began* (at least 10 ms, at most 1 s), as
/// the blocking worker's heartbeat waits, so a store that fails at once (a server refusing
/// connections) is not asked a hundred times a second, and one whose try failed slowly (a
/// busy timeout) is asked again at once.
pub(super) async fn heartbeat(run: Arc<Run>, mut stop: watch::Receiver<bool>, offset: f64) {
    let inner = &run.inner;
    let retry = pause_after_failure(inner.ttl.seconds(), inner.heartbeat.as_secs_f64());
    let mut pause = inner.heartbeat;
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = inner.heartbeat;
        let leases = run.to_renew();
        if leases.is_empty() {
            continue;
        }
        let (batch, ttl) = (leases.clone(), inner.ttl);
        let began = tokio::time::Instant::now();
        let asked = Now::system();
        let answer = inner
            .store
            .call(move |s| {
                let refs: Vec<&Lease> = batch.iter().collect();
                let taken = s.renew_batch(&refs, asked, ttl)?;
                // Why each refused one ended: one read each; a read that fails counts as
                // taken over (as in the blocking worker), never as a reason to keep it.
                let why: Vec<(Key, u8)> = batch
                    .iter()
                    .zip(&taken)
                    .filter(|(_, ok)| !**ok)
                    .map(|(lease, _)| {
                        let reason = s
                            .database_now()
                            .map(|now| now.unwrap_or_else(Now::system))
                            .and_then(|now| s.inspect(lease.job(), now))
                            .map(|info| loss_reason(info.as_ref(), lease))
                            .unwrap_or(LOSS_TAKEN_OVER);
                        (key(lease), reason)
                    })
                    .collect();
                Ok((taken, why))
            })
            .await;
        match answer {
            Ok((taken, why)) => {
                if std::mem::take(&mut failing) {
                    tracing::info!("a heartbeat reached the store again");
                }
                let renewed = taken.iter().filter(|ok| **ok).count() as u64;
                inner.count(|s| s.renewed += renewed);
                let until = asked.seconds() + offset + ttl.seconds();
                let mut held = lock(&run.held);
                for (lease, _) in leases.iter().zip(&taken).filter(|(_, ok)| **ok) {
                    if let Some(h) = held.get_mut(&key(lease)) {
                        h.lease.until = h.lease.until.max(until);
                    }
                }
                drop(held);
                for (k, reason) in why {
                    let loss = if reason == LOSS_OPERATOR {
                        Loss::Operator
                    } else {
                        Loss::TakenOver
                    };
                    if run.end(&k, loss) {
                        inner.count(|s| match loss {
                            Loss::Operator => s.cancelled += 1,
                            _ => s.lost += 1,
                        });
                    }
                }
            }
            Err(e) => {
                inner.count(|s| s.errors += 1);
                // Said once per spell of failures; the tries in between are debug lines.
                if failing {
                    tracing::debug!(error = %e, "a heartbeat met a store error again; renewing again shortly");
                } else {
                    tracing::warn!(error = %e, "a heartbeat met a store error; renewing again shortly");
                }
                failing = true;
                pause = retry.saturating_sub(began.elapsed());
            }
        }
    }
}
