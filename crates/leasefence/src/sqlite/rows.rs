//! Reading the rows the statements return into the crate's types.

use crate::types::{JobInfo, JobState, Lease, Owner, Status};

/// The lease of one row returned by the claim statements.
pub(super) fn claimed_lease(r: &rusqlite::Row<'_>, owner: Owner<'_>) -> rusqlite::Result<Lease> {
    Ok(Lease {
        job_id: r.get(0)?,
        owner: owner.as_str().to_owned(),
        fence: r.get(1)?,
        until: r.get(2)?,
        payload: r.get(3)?,
        priority: r.get(4)?,
        max_attempts: r.get(5)?,
        last_error: r.get(6)?,
        attempt: r.get(7)?,
        queue: r.get(8)?,
        kind: r.get(9)?,
    })
}

/// One row of `list.sql` or `inspect.sql`.
pub(super) fn job_info(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobInfo> {
    Ok(JobInfo {
        state: JobState {
            id: r.get(0)?,
            owner: r.get(1)?,
            until: r.get(2)?,
            fence: r.get(3)?,
            result: r.get(4)?,
            done: r.get::<_, i64>(5)? != 0,
        },
        payload: r.get(6)?,
        priority: r.get(7)?,
        not_before: r.get(8)?,
        max_attempts: r.get(9)?,
        error: r.get(10)?,
        finished_at: r.get(11)?,
        status: status_column(r, 12)?,
        attempts: r.get(13)?,
        outcome: r.get(14)?,
        enqueued_at: r.get(15)?,
        queue: r.get(16)?,
        kind: r.get(17)?,
        unique_key: r.get(18)?,
    })
}

/// Reads a status name written by `list.sql`, `inspect.sql` or `stats.sql`.
pub(super) fn status_column(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Status> {
    let name: String = row.get(index)?;
    Status::parse(&name).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    })
}
