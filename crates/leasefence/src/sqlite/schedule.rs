//! Periodic jobs on SQLite: the schedules table (`schedule_add.sql`, `schedule_remove.sql`,
//! `schedules.sql`) and the scheduler's fenced enqueue of due runs (`scheduler_check.sql`,
//! `schedule_advance.sql` and the enqueue's own statements, in one `BEGIN IMMEDIATE`).

use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, enqueue::enqueue_on, sql};
use crate::error::Result;
use crate::schedule::{check_role, first_slot};
use crate::types::{Enqueued, Lease, Now, Schedule, ScheduleInfo, ScheduleName, SlotRun, WriteOp};

impl SqliteStore {
    /// `schedule_add.sql`.
    pub(super) fn schedule_add(&self, schedule: &Schedule, now: Now) -> Result<bool> {
        let first = first_slot(now)?;
        self.write_one(
            sql::SCHEDULE_ADD,
            params![
                schedule.name(),
                schedule.cron(),
                schedule.tz(),
                schedule.queue_name().as_str(),
                schedule.kind_name(),
                schedule.payload_bytes(),
                schedule.priority_value(),
                schedule.max_attempts_value(),
                now.seconds(),
                first,
            ],
        )
    }

    /// `schedule_remove.sql`.
    pub(super) fn schedule_remove(&self, name: ScheduleName<'_>) -> Result<bool> {
        self.write_one(sql::SCHEDULE_REMOVE, params![name.as_str()])
    }

    /// `schedules.sql`.
    pub(super) fn read_schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let rows = self
            .conn
            .prepare_cached(sql::SCHEDULES)
            .and_then(|mut stmt| {
                stmt.query_map([], |r| {
                    Ok((
                        (r.get(0)?, r.get(1)?, r.get::<_, String>(2)?, r.get(3)?),
                        (r.get(4)?, r.get(5)?, r.get(6)?, r.get::<_, i64>(7)?),
                        (r.get(8)?, r.get(9)?),
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.err(e))?;
        rows.into_iter()
            .map(
                |((name, cron, tz, queue), (kind, payload, priority, max), (created, last))| {
                    Ok(ScheduleInfo {
                        schedule: Schedule::stored(
                            name,
                            cron,
                            &tz,
                            queue,
                            kind,
                            payload,
                            priority,
                            u32::try_from(max).unwrap_or(u32::MAX),
                        )?,
                        created_at: created,
                        last_slot: last,
                    })
                },
            )
            .collect()
    }

    /// The scheduler's fenced write ([`Store::enqueue_slots`](crate::Store::enqueue_slots)):
    /// `scheduler_check.sql`, then per run `schedule_advance.sql` and its enqueue, in one
    /// `BEGIN IMMEDIATE`; a lease that is not current is counted by `refuse.sql` instead.
    pub(super) fn write_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[SlotRun],
    ) -> Result<Option<Vec<Option<Enqueued>>>> {
        check_role(scheduler)?;
        let written = self.transaction(|s| {
            s.judged(
                WriteOp::Schedule,
                &scheduler.job_id,
                scheduler.fence,
                || {
                    let current = s
                        .conn
                        .prepare_cached(sql::SCHEDULER_CHECK)
                        .and_then(|mut stmt| {
                            stmt.query_row(
                                params![
                                    scheduler.job_id,
                                    scheduler.owner,
                                    scheduler.fence,
                                    now.seconds()
                                ],
                                |_| Ok(()),
                            )
                            .optional()
                        })
                        .map_err(|e| s.err(e))?;
                    if current.is_none() {
                        return Ok(None);
                    }
                    let mut outcomes = Vec::with_capacity(runs.len());
                    for run in runs {
                        let advanced = s.write_one(
                            sql::SCHEDULE_ADVANCE,
                            params![run.name, run.after, run.slot],
                        )?;
                        outcomes.push(if advanced {
                            let enqueued =
                                enqueue_on(&s.conn, std::slice::from_ref(&run.job), &|e| s.err(e))?;
                            enqueued.into_iter().next()
                        } else {
                            None
                        });
                    }
                    Ok(Some(outcomes))
                },
            )
        })?;
        if let Some(outcomes) = &written
            && outcomes
                .iter()
                .any(|o| o.as_ref().is_some_and(Enqueued::is_inserted))
        {
            self.notifier.notify();
        }
        Ok(written)
    }
}
