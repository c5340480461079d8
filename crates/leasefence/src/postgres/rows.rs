//! Reading the rows the statements return into the crate's types.

use crate::error::Result;
use crate::types::{JobInfo, JobState, Lease, Owner, Status};

/// One row of `list.sql` or `inspect.sql`.
pub(super) fn job_info(r: &postgres::Row) -> Result<JobInfo> {
    Ok(JobInfo {
        state: job_state(r),
        payload: r.get(6),
        priority: r.get(7),
        not_before: r.get(8),
        max_attempts: to_u32(r.get(9)),
        error: r.get(10),
        finished_at: r.get(11),
        status: Status::parse(r.get(12))?,
        attempts: to_u32(r.get(13)),
        outcome: r.get(14),
        enqueued_at: r.get(15),
        queue: r.get(16),
        kind: r.get(17),
        unique_key: r.get(18),
    })
}

/// The lease of one row returned by the claim statements (their first ten columns).
pub(super) fn claimed_lease(r: &postgres::Row, owner: Owner<'_>) -> Lease {
    Lease {
        job_id: r.get(0),
        owner: owner.as_str().to_owned(),
        fence: r.get(1),
        until: r.get(2),
        payload: r.get(3),
        priority: r.get(4),
        max_attempts: to_u32(r.get(5)),
        last_error: r.get(6),
        attempt: to_u32(r.get(7)),
        queue: r.get(8),
        kind: r.get(9),
    }
}

fn to_u32(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

pub(super) fn job_state(r: &postgres::Row) -> JobState {
    JobState {
        id: r.get(0),
        owner: r.get(1),
        until: r.get(2),
        fence: r.get(3),
        result: r.get(4),
        done: r.get::<_, i32>(5) != 0,
    }
}
