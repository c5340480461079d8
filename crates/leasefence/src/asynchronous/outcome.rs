//! One claimed job's task: its handler, until it returns, its lease ends or the time limit
//! passes, then its outcome written through the fence — complete or fail, and for a write the
//! store refused, one read to tell an operator's end from a takeover. A release the handler
//! asks for is written here too, so that no other write of the attempt's crosses it.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::job::{AsyncJob, Loss, ReleaseRequest};
use super::worker::{AsyncResult, Inner, Run, key, lock};
use crate::error::Result;
use crate::store::Store as _;
use crate::types::{Failed, JobInfo, Lease, Now};
use crate::worker::{
    HandlerError, JobOutcome, LOSS_OPERATOR, LOSS_TAKEN_OVER, completed_under, failed_under,
    loss_reason, panic_message,
};

/// Aborts the handler's task when dropped: a handler never outlives its job's task (a lost
/// lease, the time limit or the shutdown deadline).
struct AbortOnDrop(tokio::task::JoinHandle<AsyncResult>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one job's handler and writes its outcome through the fence; gives the lease back when
/// the handler asks ([`AsyncJob::release`]).
pub(super) async fn run_job(
    run: Arc<Run>,
    job: AsyncJob,
    mut releases: mpsc::UnboundedReceiver<ReleaseRequest>,
) {
    let inner = &run.inner;
    let lease = job.lease().clone();
    let k = key(&lease);
    let signal = job.clone();
    // A task of its own, so that a panic is the attempt's failure, not the worker's.
    let mut work = AbortOnDrop(tokio::spawn((inner.handler)(job)));
    let limit = inner.limit;
    let limit = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(limit);
    // The handler, until it returns, its lease ends, the time limit, or it gives its lease
    // back. A release is written here, by the job's task, so that no other write of the
    // attempt's can cross it.
    let answer = loop {
        tokio::select! {
            answer = &mut work.0 => break Some(answer.unwrap_or_else(|e| Err(handler_failure(e)))),
            _ = signal.lost() => break None,
            _ = &mut limit => {
                run.end(&k, Loss::TimedOut);
                break None;
            }
            Some(reply) = releases.recv() => {
                match release(&run, &lease).await {
                    Ok(Some(outcome)) => {
                        let released = outcome == JobOutcome::Released;
                        let _ = reply.send(Ok(released));
                        if released {
                            wind_down(&run, work).await;
                        }
                        // A refused release: the handler is dropped, as for any lost lease.
                        inner.report(&lease, &outcome);
                        return;
                    }
                    // The lease had ended: the signal above fires next.
                    Ok(None) => {
                        let _ = reply.send(Ok(false));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
        }
    };
    // Releases asked from now on (a task the handler spawned) change nothing.
    drop(releases);
    // A handler whose lease ended is dropped at its next await.
    drop(work);
    let outcome = match (answer, run.start_writing(&k)) {
        (_, Some(Loss::Shutdown)) => return, // released by `run`
        (_, Some(Loss::TakenOver)) => JobOutcome::Refused,
        (_, Some(Loss::Operator)) => JobOutcome::Cancelled,
        // Settled by `release`, which reported it; never found here.
        (_, Some(Loss::Released)) => return,
        (_, Some(Loss::TimedOut)) | (None, None) => {
            inner.count(|s| s.timed_out += 1);
            let limit = inner.timeout.unwrap_or(0.0);
            fail(
                inner,
                &lease,
                format!("timed out after {limit} s (the worker's time limit)"),
            )
            .await
        }
        (Some(Ok(result)), None) => complete(inner, &lease, result).await,
        (Some(Err(e)), None) => fail(inner, &lease, e.to_string()).await,
    };
    lock(&run.held).remove(&k);
    inner.report(&lease, &outcome);
}

/// Gives `lease` back for its handler, fenced: `Released`, or — refused by the store — how the
/// lease ended (`Cancelled` by an operator, `Refused` after a takeover), counted either way.
/// `None` when the lease had ended already (nothing written); an error when the store could
/// not be reached, after which the lease runs on.
async fn release(run: &Run, lease: &Lease) -> Result<Option<JobOutcome>> {
    let inner = &run.inner;
    let k = key(lease);
    // Marked as being written: neither the heartbeat, the expiry nor the shutdown touch it.
    if run.start_writing(&k).is_some() {
        return Ok(None);
    }
    let l = lease.clone();
    let written = inner.write(lease, move |s| s.release_lease(&l)).await;
    let released = match written.answer {
        Ok(true) => true,
        // A try whose answer was lost with its connection may have been the one that gave
        // the lease back: one read tells.
        Ok(false) if written.maybe_landed => read_back(inner, lease)
            .await
            .is_some_and(|job| released_under(&job, lease)),
        Ok(false) => false,
        Err(e) => {
            run.resume(&k);
            // The shutdown deadline passed while the release was being written (and left this
            // lease alone): it goes back with the others now.
            if *run.past_deadline.borrow() {
                run.end(&k, Loss::Shutdown);
            }
            inner.count(|s| s.errors += 1);
            return Err(e);
        }
    };
    if released {
        inner.count(|s| s.released += 1);
        tracing::info!(
            job_id = %lease.job_id, fence = lease.fence,
            "released by its handler; claimable again at once, the attempt refunded"
        );
        run.settle(&k, Loss::Released);
        return Ok(Some(JobOutcome::Released));
    }
    let outcome = refused(inner, lease).await;
    let loss = if outcome == JobOutcome::Cancelled {
        Loss::Operator
    } else {
        Loss::TakenOver
    };
    tracing::warn!(
        job_id = %lease.job_id, fence = lease.fence,
        "release refused: the lease is no longer this attempt's; nothing changed"
    );
    run.settle(&k, loss);
    Ok(Some(outcome))
}

/// Whether `job`, read back, shows `lease` given back: unfinished, no owner, still under the
/// lease's fence, its last error the one the lease saw (a failure would have recorded its own).
fn released_under(job: &JobInfo, lease: &Lease) -> bool {
    !job.state.done
        && job.state.owner.is_none()
        && job.state.fence == lease.fence
        && job.error == lease.last_error
}

/// A handler that gave its lease back runs on, unrenewed and untimed, until it returns or the
/// shutdown deadline passes (then its future is dropped). Nothing it returns is written.
async fn wind_down(run: &Run, mut work: AbortOnDrop) {
    let mut deadline = run.past_deadline.subscribe();
    tokio::select! {
        _ = &mut work.0 => {}
        _ = deadline.wait_for(|past| *past) => {}
    }
}

/// A handler's task that did not return: its panic, named as the blocking worker names it
/// (`handler panicked: <message>`).
fn handler_failure(e: tokio::task::JoinError) -> HandlerError {
    match e.try_into_panic() {
        Ok(panic) => format!("handler panicked: {}", panic_message(&*panic)).into(),
        Err(e) => format!("the handler did not finish: {e}").into(),
    }
}

/// Stores `result` through the fence. Refused after a try whose answer was lost with its
/// connection: that try may have been the one that stored it, which one read tells.
async fn complete(inner: &Inner, lease: &Lease, result: String) -> JobOutcome {
    let (l, r) = (lease.clone(), result.clone());
    let written = inner
        .write(lease, move |s| s.complete_lease(&l, Now::system(), &r))
        .await;
    let stored_unseen = || async {
        read_back(inner, lease)
            .await
            .is_some_and(|job| completed_under(&job, lease, &result))
    };
    match written.answer {
        Ok(true) => {}
        Ok(false) if written.maybe_landed && stored_unseen().await => {}
        Ok(false) => return refused(inner, lease).await,
        // A result the store cannot hold (a NUL byte on PostgreSQL): a failed attempt saying
        // why, not a lease left to expire and the job run again and again.
        Err(e) if e.is_unstorable_result() => {
            return fail(inner, lease, format!("the result could not be stored: {e}")).await;
        }
        Err(e) => {
            inner.count(|s| s.errors += 1);
            return JobOutcome::StoreError(e.to_string());
        }
    }
    inner.count(|s| s.completed += 1);
    JobOutcome::Completed
}

/// The job of `lease` as the store shows it now (on its clock), to tell whether a write whose
/// answer was lost took effect; `None` when it cannot be read (the refusal then stands).
async fn read_back(inner: &Inner, lease: &Lease) -> Option<JobInfo> {
    let l = lease.clone();
    let read = inner
        .write(lease, move |s| {
            let now = s.database_now()?.unwrap_or_else(Now::system);
            s.inspect(l.job(), now)
        })
        .await;
    read.answer.ok().flatten()
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
    let written = inner
        .write(lease, move |s| {
            let now = s.database_now()?.unwrap_or_else(Now::system);
            s.fail(&l, now, &e, Some(backoff.retry_at(&l, now)))
        })
        .await;
    let answer = match written.answer {
        // Refused after a try whose answer was lost with its connection: that try may have
        // been the one that recorded it.
        Ok(None) if written.maybe_landed => Ok(read_back(inner, lease)
            .await
            .and_then(|job| failed_under(&job, lease, &error))),
        other => other,
    };
    match answer {
        Ok(Some(Failed::Retrying { at })) => {
            inner.count(|s| s.retried += 1);
            JobOutcome::Retrying { at, error }
        }
        Ok(Some(Failed::Dead)) => {
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
