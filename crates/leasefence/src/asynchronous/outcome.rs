//! One claimed job's task: its handler, until it returns, its lease ends or the time limit
//! passes, then its outcome written through the fence — complete or fail, and for a write the
//! store refused, one read to tell an operator's end from a takeover.

use std::sync::Arc;

use super::job::{AsyncJob, Loss};
use super::worker::{AsyncResult, Inner, key, lock};
use crate::store::Store as _;
use crate::types::{Lease, Now};
use crate::worker::{JobOutcome, LOSS_OPERATOR, LOSS_TAKEN_OVER, loss_reason};

/// Aborts the handler's task when dropped: a handler never outlives its job's task (a lost
/// lease, the time limit or the shutdown deadline).
struct AbortOnDrop(tokio::task::JoinHandle<AsyncResult>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one job's handler and writes its outcome through the fence.
pub(super) async fn run_job(inner: Arc<Inner>, job: AsyncJob) {
    let lease = job.lease().clone();
    let k = key(&lease);
    let signal = job.clone();
    // A task of its own, so that a panic is the attempt's failure, not the worker's.
    let mut work = AbortOnDrop(tokio::spawn((inner.handler)(job)));
    let limit = inner.limit;
    // The handler, until it returns, its lease ends, or the time limit.
    let answer = tokio::select! {
        answer = &mut work.0 => Some(answer.unwrap_or_else(|e| Err(format!("the handler panicked: {e}").into()))),
        _ = signal.lost() => None,
        _ = async { match limit { Some(d) => tokio::time::sleep(d).await, None => std::future::pending().await } } => {
            inner.end(&k, Loss::TimedOut);
            None
        }
    };
    // A handler whose lease ended is dropped at its next await.
    drop(work);
    let outcome = match (answer, inner.start_writing(&k)) {
        (_, Some(Loss::Shutdown)) => return, // released by `run`
        (_, Some(Loss::TakenOver)) => JobOutcome::Refused,
        (_, Some(Loss::Operator)) => JobOutcome::Cancelled,
        (_, Some(Loss::TimedOut)) | (None, None) => {
            inner.count(|s| s.timed_out += 1);
            let limit = inner.timeout.unwrap_or(0.0);
            fail(
                &inner,
                &lease,
                format!("timed out after {limit} s (the worker's time limit)"),
            )
            .await
        }
        (Some(Ok(result)), None) => {
            let l = lease.clone();
            match inner
                .write(move |s| s.complete_lease(&l, Now::system(), &result))
                .await
            {
                Ok(true) => {
                    inner.count(|s| s.completed += 1);
                    JobOutcome::Completed
                }
                Ok(false) => refused(&inner, &lease).await,
                Err(e) => {
                    inner.count(|s| s.errors += 1);
                    JobOutcome::StoreError(e.to_string())
                }
            }
        }
        (Some(Err(e)), None) => fail(&inner, &lease, e.to_string()).await,
    };
    lock(&inner.held).remove(&k);
    inner.report(&lease, &outcome);
}

/// A write of `lease`'s outcome the store refused: an operator ended the job (counted as
/// cancelled), or the lease was taken over (a stale write refused). A read that fails counts
/// as taken over, as in the blocking worker.
async fn refused(inner: &Inner, lease: &Lease) -> JobOutcome {
    let l = lease.clone();
    let reason = inner
        .store
        .call(move |s| {
            let now = s.database_now()?.unwrap_or_else(Now::system);
            Ok(loss_reason(s.inspect(l.job(), now)?.as_ref(), &l))
        })
        .await
        .unwrap_or(LOSS_TAKEN_OVER);
    if reason == LOSS_OPERATOR {
        inner.count(|s| s.cancelled += 1);
        JobOutcome::Cancelled
    } else {
        inner.count(|s| s.stale_refused += 1);
        JobOutcome::Refused
    }
}

/// Records a failed attempt through the fence: retried after the backoff, or dead.
async fn fail(inner: &Inner, lease: &Lease, error: String) -> JobOutcome {
    let (l, backoff, e) = (lease.clone(), inner.backoff, error.clone());
    let answer = inner
        .write(move |s| {
            let now = s.database_now()?.unwrap_or_else(Now::system);
            s.fail(&l, now, &e, Some(backoff.retry_at(&l, now)))
        })
        .await;
    match answer {
        Ok(Some(crate::Failed::Retrying { at })) => {
            inner.count(|s| s.retried += 1);
            JobOutcome::Retrying { at, error }
        }
        Ok(Some(crate::Failed::Dead)) => {
            inner.count(|s| s.dead += 1);
            JobOutcome::Dead { error }
        }
        Ok(None) => refused(inner, lease).await,
        Err(e) => {
            inner.count(|s| s.errors += 1);
            JobOutcome::StoreError(e.to_string())
        }
    }
}
