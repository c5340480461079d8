//! The decisions that are not storage, made once above the seam so that every backend agrees:
//! the order in which a batch of claimed leases is handed out, when a failed job runs again
//! when the caller did not say, and how per-queue counts are gathered and summed.
//!
//! A backend calls these with what only it knows (the rows its statement returned, the clock
//! reading it judged by); it never makes these choices itself.

use crate::types::{Backoff, JobCursor, JobInfo, JobPage, Lease, Now, QueueInfo, Stats, Status};

/// One lease as a claim statement returned it, with the keys that rank it: the job's
/// not-before time and its enqueue order (SQLite's rowid, PostgreSQL's `seq`).
#[derive(Debug)]
pub(crate) struct Claimed {
    pub(crate) lease: Lease,
    pub(crate) not_before: f64,
    pub(crate) seq: i64,
}

/// The leases of one claim, best first — highest priority, then earliest not-before, then
/// oldest — the order `claim_next` would have handed them out in. `RETURNING` has no order of
/// its own, so every backend sorts here.
pub(crate) fn best_first(mut claimed: Vec<Claimed>) -> Vec<Lease> {
    claimed.sort_by(|a, b| {
        b.lease
            .priority
            .cmp(&a.lease.priority)
            .then(a.not_before.total_cmp(&b.not_before))
            .then(a.seq.cmp(&b.seq))
    });
    claimed.into_iter().map(|c| c.lease).collect()
}

/// When the job of `lease`, failed at `now` (the clock the store judged the failure by), may
/// be claimed again: at `asked` when the caller chose, else after [`Backoff::default`].
pub(crate) fn retry_at(asked: Option<Now>, lease: &Lease, now: Now) -> Now {
    asked.unwrap_or_else(|| Backoff::default().retry_at(lease, now))
}

/// Every job by status: the sum of the queues' counts ([`Store::stats`](crate::Store::stats)).
pub(crate) fn totals(queues: &[QueueInfo]) -> Stats {
    let mut totals = Stats::default();
    for queue in queues {
        for status in Status::ALL {
            *totals.slot(status) += queue.stats.get(status);
        }
    }
    totals
}

/// The rows of a `queues` statement — `(queue, paused, status, count, unfinished)`, ordered by
/// queue, a queue without jobs once with no status — folded into one [`QueueInfo`] per queue.
/// A status is a [`Status`] name, or `unfinished` for the queue's unfinished total;
/// `unfinished` marks that total and the statuses of unfinished jobs. Ready is the total less
/// those: the one status no index holds.
///
/// # Errors
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a status name the crate does
/// not know (a statement out of step with [`Status`]).
pub(crate) fn queue_infos(
    rows: Vec<(String, bool, Option<String>, i64, bool)>,
) -> crate::Result<Vec<QueueInfo>> {
    let mut infos: Vec<QueueInfo> = Vec::new();
    // Per queue: the unfinished total, and the unfinished jobs counted under a status.
    let mut open: Vec<(i64, i64)> = Vec::new();
    for (name, paused, status, count, unfinished) in rows {
        if infos.last().is_none_or(|last| last.name != name) {
            infos.push(QueueInfo {
                name,
                paused,
                stats: Stats::default(),
            });
            open.push((0, 0));
        }
        let (Some(status), Some(info), Some(open)) = (status, infos.last_mut(), open.last_mut())
        else {
            continue;
        };
        if status == "unfinished" {
            open.0 += count;
            continue;
        }
        if unfinished {
            open.1 += count;
        }
        *info.stats.slot(Status::parse(&status)?) += count.max(0) as u64;
    }
    for (info, (total, counted)) in infos.iter_mut().zip(open) {
        info.stats.ready += (total - counted).max(0) as u64;
    }
    Ok(infos)
}

/// One page of a job search from the rows its statement returned (each with the key it is
/// ordered by) and its window (how many jobs it looked at, of at most `window`, and the last
/// of them, `edge`). The next page goes on after the last job returned when the page is full;
/// else after the window when the window was full (the filters were sparse there); else there
/// is nothing left to look at.
pub(crate) fn job_page<K>(
    rows: Vec<(JobInfo, K)>,
    limit: i64,
    examined: i64,
    window: i64,
    cursor_of: impl Fn(&(JobInfo, K)) -> JobCursor,
    edge: Option<JobCursor>,
) -> JobPage {
    let next = if rows.len() as i64 >= limit {
        rows.last().map(cursor_of)
    } else if examined >= window {
        edge
    } else {
        None
    };
    JobPage {
        jobs: rows.into_iter().map(|(job, _)| job).collect(),
        next,
        examined: examined.max(0) as usize,
    }
}
