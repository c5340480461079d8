//! Periodic jobs on PostgreSQL: the schedules table (`schedule_add.sql`,
//! `schedule_remove.sql`, `schedules.sql`) and the scheduler's fenced enqueue of due runs
//! (`scheduler_check.sql`, which locks the scheduler's job row, `schedule_advance.sql` and the
//! enqueue's own statements, in one transaction).

use super::{PgStore, sql};
use crate::error::Result;
use crate::schedule::{check_role, first_slot};
use crate::types::{Enqueued, Lease, Now, Schedule, ScheduleInfo, ScheduleName, SlotRun, WriteOp};

impl PgStore {
    /// `schedule_add.sql`.
    pub(super) fn schedule_add(&self, schedule: &Schedule, now: Now) -> Result<bool> {
        let now = self.clock(now)?;
        let first = first_slot(now)?;
        self.write_one(
            sql::SCHEDULE_ADD,
            &[
                &schedule.name(),
                &schedule.cron(),
                &schedule.tz(),
                &schedule.queue_name().as_str(),
                &schedule.kind_name(),
                &schedule.payload_bytes(),
                &schedule.priority_value(),
                &i64::from(schedule.max_attempts_value()),
                &now.seconds(),
                &first,
            ],
        )
    }

    /// `schedule_remove.sql`.
    pub(super) fn schedule_remove(&self, name: ScheduleName<'_>) -> Result<bool> {
        self.write_one(sql::SCHEDULE_REMOVE, &[&name.as_str()])
    }

    /// `schedules.sql`.
    pub(super) fn read_schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let mut conn = self.conn()?;
        let statement = conn.prepared(sql::SCHEDULES).map_err(|e| self.err(e))?;
        conn.query(&statement, &[])
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| {
                Ok(ScheduleInfo {
                    schedule: Schedule::stored(
                        r.get(0),
                        r.get(1),
                        r.get(2),
                        r.get(3),
                        r.get(4),
                        r.get(5),
                        r.get(6),
                        u32::try_from(r.get::<_, i64>(7)).unwrap_or(u32::MAX),
                    )?,
                    created_at: r.get(8),
                    last_slot: r.get(9),
                })
            })
            .collect()
    }

    /// The scheduler's fenced write ([`Store::enqueue_slots`](crate::Store::enqueue_slots)):
    /// `scheduler_check.sql` (the lease check, holding the scheduler job's row lock until the
    /// commit), then per run `schedule_advance.sql` and its enqueue, in one transaction; a
    /// lease that is not current is counted by `refuse.sql` instead.
    pub(super) fn write_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[SlotRun],
    ) -> Result<Option<Vec<Option<Enqueued>>>> {
        check_role(scheduler)?;
        let now = self.clock(now)?;
        let mut conn = self.conn()?;
        let check = conn
            .prepared(sql::SCHEDULER_CHECK)
            .map_err(|e| self.err(e))?;
        let advance = conn
            .prepared(sql::SCHEDULE_ADVANCE)
            .map_err(|e| self.err(e))?;
        let insert = conn.prepared(sql::ENQUEUE).map_err(|e| self.err(e))?;
        let matching = conn.prepared(sql::ENQUEUE_MATCH).map_err(|e| self.err(e))?;
        let mut tx = conn.transaction().map_err(|e| self.err(e))?;
        let current = tx
            .query_opt(
                &check,
                &[
                    &scheduler.job_id,
                    &scheduler.owner,
                    &scheduler.fence,
                    &now.seconds(),
                ],
            )
            .map_err(|e| self.err(e))?;
        if current.is_none() {
            tx.execute(
                sql::REFUSE,
                &[
                    &scheduler.job_id,
                    &scheduler.fence,
                    &WriteOp::Schedule.as_str(),
                ],
            )
            .map_err(|e| self.err(e))?;
            tx.commit().map_err(|e| self.err(e))?;
            return Ok(None);
        }
        let mut outcomes = Vec::with_capacity(runs.len());
        for run in runs {
            let advanced = tx
                .execute(&advance, &[&run.name, &run.after, &run.slot])
                .map_err(|e| self.err(e))?
                == 1;
            outcomes.push(if advanced {
                self.enqueue_on(&mut tx, std::slice::from_ref(&run.job), &insert, &matching)?
                    .into_iter()
                    .next()
            } else {
                None
            });
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(outcomes))
    }
}
