//! Periodic jobs from Python: what `Store.schedules()` hands back (`ScheduleInfo`) and what
//! `Store.schedule_tick()` did (`Tick`). Snapshots, like the other values: nothing here reads
//! the database again.

use leasefence::Now;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::IntoPy;
use crate::values::repr_opt;

/// A schedule as the store keeps it: its definition (name, cron expression, time zone, and
/// the queue, kind, payload, priority and attempts budget of each run), when it was added and
/// the last slot enqueued. Slots are Unix seconds (UTC).
#[pyclass(frozen, module = "leasefence", eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct ScheduleInfo {
    inner: leasefence::ScheduleInfo,
}

impl From<leasefence::ScheduleInfo> for ScheduleInfo {
    fn from(inner: leasefence::ScheduleInfo) -> Self {
        ScheduleInfo { inner }
    }
}

#[pymethods]
impl ScheduleInfo {
    /// The schedule's name; each run is the job `NAME@<slot in UTC>`.
    #[getter]
    fn name(&self) -> &str {
        self.inner.schedule.name()
    }

    /// The cron expression, as given.
    #[getter]
    fn cron(&self) -> &str {
        self.inner.schedule.cron()
    }

    /// The IANA time zone the expression is read in.
    #[getter]
    fn tz(&self) -> &str {
        self.inner.schedule.tz()
    }

    /// The queue each run joins.
    #[getter]
    fn queue(&self) -> &str {
        self.inner.schedule.queue_name().as_str()
    }

    /// The kind of each run, or `None`.
    #[getter]
    fn kind(&self) -> Option<&str> {
        self.inner.schedule.kind_name()
    }

    /// The payload of each run, or `None`.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner
            .schedule
            .payload_bytes()
            .map(|b| PyBytes::new(py, b))
    }

    /// The priority of each run.
    #[getter]
    fn priority(&self) -> i64 {
        self.inner.schedule.priority_value()
    }

    /// The attempts budget of each run (`0`: no limit).
    #[getter]
    fn max_attempts(&self) -> u32 {
        self.inner.schedule.max_attempts_value()
    }

    /// When it was added (the `now` of `add_schedule`).
    #[getter]
    fn created_at(&self) -> f64 {
        self.inner.created_at
    }

    /// The last slot enqueued; at first, the second the schedule was added (no slot before
    /// it runs).
    #[getter]
    fn last_slot(&self) -> i64 {
        self.inner.last_slot
    }

    /// The last slot a scheduler ran — enqueued, or passed because a job with its id was
    /// already known — or `None` before the first.
    #[getter]
    fn last_run(&self) -> Option<i64> {
        self.inner.last_run()
    }

    /// The first slot after `last_slot`, or `None` when the expression has no later one.
    /// When slots were missed it is in the past and will not run: `next_run()` is the slot the
    /// next tick enqueues.
    #[getter]
    fn next_slot(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.inner.next_slot().py(py)
    }

    /// The slot the scheduler's next tick at `now` (default: this machine's clock) or later
    /// enqueues: the latest slot already due (missed ones run once, as the latest), else the
    /// first after `last_slot`; `None` when there is none.
    #[pyo3(signature = (now=None))]
    fn next_run(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = crate::args::now_opt)] now: Option<f64>,
    ) -> PyResult<Option<i64>> {
        let now = match now {
            Some(now) => Now::new(now).py(py)?,
            None => Now::system(),
        };
        self.inner.next_run(now).py(py)
    }

    fn __repr__(&self) -> String {
        let s = &self.inner.schedule;
        format!(
            "ScheduleInfo(name={:?}, cron={:?}, tz={:?}, queue={:?}, kind={}, priority={}, \
             max_attempts={}, created_at={}, last_slot={})",
            s.name(),
            s.cron(),
            s.tz(),
            s.queue_name().as_str(),
            repr_opt(s.kind_name()),
            s.priority_value(),
            s.max_attempts_value(),
            self.inner.created_at,
            self.inner.last_slot
        )
    }
}

/// What one `Store.schedule_tick()` did while it held the scheduler role.
#[pyclass(frozen, module = "leasefence", get_all, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct Tick {
    /// The job ids of the runs enqueued, one per schedule that had a slot due.
    enqueued: Vec<String>,
    /// Due runs that enqueued nothing: a job with their id was already known, or their
    /// schedule was removed or changed meanwhile.
    passed: Vec<String>,
    /// Missed slots not run (each schedule runs once on catch-up, as its latest slot).
    skipped: u64,
    /// Whether more slots were missed than `skipped` says (it counts up to 100,000 a schedule).
    skipped_at_least: bool,
    /// The earliest next slot of any schedule (Unix seconds), or `None`.
    next_slot: Option<i64>,
    /// The fence of the scheduler role's lease this tick ran under.
    fence: i64,
}

impl Tick {
    pub(crate) fn new(tick: leasefence::Tick, fence: i64) -> Self {
        Tick {
            enqueued: tick.enqueued,
            passed: tick.passed,
            skipped: tick.skipped,
            skipped_at_least: tick.skipped_at_least,
            next_slot: tick.next_slot,
            fence,
        }
    }
}

#[pymethods]
impl Tick {
    fn __repr__(&self) -> String {
        format!(
            "Tick(enqueued={:?}, passed={:?}, skipped={}, skipped_at_least={}, next_slot={}, \
             fence={})",
            self.enqueued,
            self.passed,
            self.skipped,
            if self.skipped_at_least {
                "True"
            } else {
                "False"
            },
            self.next_slot
                .map_or_else(|| "None".to_string(), |s| s.to_string()),
            self.fence
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ScheduleInfo>()?;
    m.add_class::<Tick>()?;
    Ok(())
}
