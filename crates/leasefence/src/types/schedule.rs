//! Periodic jobs: a validated schedule ([`Schedule`]), what the store keeps of one
//! ([`ScheduleInfo`]) and a due run the scheduler enqueues ([`SlotRun`]).

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

use super::job::key_text;
use super::{NewJob, Queue};
use crate::error::{Error, Result};

/// The longest schedule name, in bytes: a run's job id is the name, `@` and a 20-character
/// UTC time.
pub const MAX_SCHEDULE_NAME: usize = 128;

/// A schedule's name: 1 to 128 ASCII letters, digits, `_`, `-`, `.` or `:` (no `@`, which
/// separates the name from the slot in a run's job id `NAME@2026-12-01T03:00:00Z`).
///
/// ```
/// # use leasefence::ScheduleName;
/// assert_eq!(ScheduleName::new("nightly-report").unwrap().as_str(), "nightly-report");
/// assert_eq!(ScheduleName::new("a@b").unwrap_err().argument(), Some("name"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScheduleName<'a>(pub(crate) &'a str);

impl<'a> ScheduleName<'a> {
    /// Validates a schedule name.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `name` when it is empty, longer than 128 bytes or has
    /// a character other than ASCII letters, digits, `_`, `-`, `.` and `:`.
    pub fn new(name: &'a str) -> Result<Self> {
        if name.is_empty() {
            return Err(Error::invalid("name", "must not be empty"));
        }
        if name.len() > MAX_SCHEDULE_NAME {
            return Err(Error::invalid(
                "name",
                format!(
                    "must be at most {MAX_SCHEDULE_NAME} bytes, got {}",
                    name.len()
                ),
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        {
            return Err(Error::invalid(
                "name",
                format!(
                    "{name:?} has the character {c:?}; use ASCII letters, digits, '_', '-', '.' \
                     or ':'"
                ),
            ));
        }
        Ok(ScheduleName(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// A periodic job: a cron expression read in an explicit time zone, and the job each of its
/// slots enqueues.
///
/// The expression is parsed by [`croner`]: five fields (minute, hour, day of month, month, day
/// of week), or six with seconds first, or seven with seconds first and a year last, plus
/// `@hourly`, `@daily` and the like, `L`, `#` and `W`. The time zone is an IANA name
/// (`Europe/Berlin`; default `UTC`). A local time that a
/// daylight-saving change skips (02:30 on the night the clocks go forward) has its slot at the
/// first moment after the gap (03:00); the slots follow [`croner`]'s reading of the calendar.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// use leasefence::Schedule;
/// let nightly = Schedule::new("nightly-report", "0 3 * * *")?
///     .time_zone("Europe/Berlin")?
///     .queue("reports")?
///     .kind("report")?
///     .payload(b"{\"scope\":\"all\"}".to_vec());
/// let t0 = 1_796_083_200; // 2026-12-01T00:00:00Z
/// // 03:00 in Berlin on 1 December 2026 is 02:00 UTC.
/// assert_eq!(nightly.next_after(t0)?, Some(t0 + 2 * 3_600));
/// assert_eq!(nightly.tz(), "Europe/Berlin");
/// assert_eq!(Schedule::new("bad", "61 * * * *").unwrap_err().argument(), Some("cron"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Schedule {
    pub(crate) name: String,
    pub(crate) cron_text: String,
    pub(crate) cron: Cron,
    pub(crate) tz: Tz,
    pub(crate) queue: Queue,
    pub(crate) kind: Option<String>,
    pub(crate) payload: Option<Vec<u8>>,
    pub(crate) priority: i64,
    pub(crate) max_attempts: u32,
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.cron_text == other.cron_text
            && self.tz == other.tz
            && self.queue == other.queue
            && self.kind == other.kind
            && self.payload == other.payload
            && self.priority == other.priority
            && self.max_attempts == other.max_attempts
    }
}

impl Schedule {
    /// A schedule named `name` that enqueues, at every slot of `cron` (read in UTC until
    /// [`time_zone`](Schedule::time_zone) says otherwise), a job in the queue `default` with no
    /// kind, no payload, priority 0 and no limit on attempts.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `name` (see [`ScheduleName::new`]) or `cron` when the
    /// expression does not parse.
    pub fn new(name: &str, cron: &str) -> Result<Self> {
        let name = ScheduleName::new(name)?.as_str().to_owned();
        let cron_text = cron.trim().to_owned();
        let parsed = parse_cron(&cron_text)?;
        Ok(Schedule {
            name,
            cron_text,
            cron: parsed,
            tz: Tz::UTC,
            queue: Queue::default(),
            kind: None,
            payload: None,
            priority: 0,
            max_attempts: 0,
        })
    }

    /// The IANA time zone the expression is read in (default `UTC`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `tz` for a name the time-zone database does not know.
    pub fn time_zone(mut self, tz: &str) -> Result<Self> {
        self.tz = parse_tz(tz)?;
        Ok(self)
    }

    /// The queue each run joins (default `default`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `queue` for an invalid name.
    pub fn queue(mut self, queue: impl Into<String>) -> Result<Self> {
        self.queue = Queue::new(queue)?;
        Ok(self)
    }

    /// The kind of each run.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `kind` when it is empty, too long or has control
    /// characters.
    pub fn kind(mut self, kind: impl Into<String>) -> Result<Self> {
        self.kind = Some(key_text("kind", kind.into())?);
        Ok(self)
    }

    /// The payload of each run.
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    /// The priority of each run (higher first).
    pub fn priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }

    /// The attempts budget of each run (`0`, the default: no limit).
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cron expression as given (trimmed).
    pub fn cron(&self) -> &str {
        &self.cron_text
    }

    /// The time zone's IANA name.
    pub fn tz(&self) -> &str {
        self.tz.name()
    }

    /// The queue of each run.
    pub fn queue_name(&self) -> &Queue {
        &self.queue
    }

    /// The kind of each run.
    pub fn kind_name(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// The payload of each run.
    pub fn payload_bytes(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }

    /// The priority of each run.
    pub fn priority_value(&self) -> i64 {
        self.priority
    }

    /// The attempts budget of each run.
    pub fn max_attempts_value(&self) -> u32 {
        self.max_attempts
    }

    /// The first slot strictly after `after`, in Unix seconds; `None` when the expression
    /// has no later slot (a year field in the past).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `now` when `after` is outside the calendar's range.
    pub fn next_after(&self, after: i64) -> Result<Option<i64>> {
        let start = self.local(after)?;
        Ok(self
            .cron
            .find_next_occurrence(&start, false)
            .ok()
            .map(|t| t.timestamp()))
    }

    /// The last slot at or before `at`, in Unix seconds; `None` when there is none.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `now` when `at` is outside the calendar's range.
    pub fn latest_at(&self, at: i64) -> Result<Option<i64>> {
        let start = self.local(at)?;
        Ok(self
            .cron
            .find_previous_occurrence(&start, true)
            .ok()
            .map(|t| t.timestamp()))
    }

    /// The job that the run of `slot` enqueues: id `NAME@<slot in UTC>`, due at the slot.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// let hourly = leasefence::Schedule::new("sync", "@hourly")?;
    /// assert_eq!(hourly.run(1_796_094_000)?.id(), "sync@2026-12-01T03:00:00Z");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `now` when `slot` is outside the calendar's range.
    pub fn run(&self, slot: i64) -> Result<NewJob> {
        let mut job = NewJob::new(run_id(&self.name, slot)?)?
            .queue(self.queue.as_str())?
            .priority(self.priority)
            .max_attempts(self.max_attempts)
            .not_before(slot as f64)?;
        if let Some(kind) = &self.kind {
            job = job.kind(kind.as_str())?;
        }
        if let Some(payload) = &self.payload {
            job = job.payload(payload.clone());
        }
        Ok(job)
    }

    fn local(&self, seconds: i64) -> Result<DateTime<Tz>> {
        Ok(utc(seconds)?.with_timezone(&self.tz))
    }

    /// Rebuilds a stored schedule (the store's own rows: already valid when they were added).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn stored(
        name: String,
        cron: String,
        tz: &str,
        queue: String,
        kind: Option<String>,
        payload: Option<Vec<u8>>,
        priority: i64,
        max_attempts: u32,
    ) -> Result<Self> {
        // A row that no longer parses fails every read of the schedules, so `schedule list`
        // cannot show it: the error names it, for `schedule remove NAME`.
        let named = |e: Error| match e {
            Error::InvalidArgument { argument, reason } => Error::InvalidArgument {
                argument,
                reason: format!(
                    "the stored schedule {name:?} no longer parses: {reason} (remove it with \
                     `leasefence schedule remove {name}` and add it again)"
                ),
            },
            other => other,
        };
        let mut schedule = Schedule::new(&name, &cron)
            .and_then(|s| s.time_zone(tz))
            .and_then(|s| s.queue(queue))
            .map_err(named)?
            .priority(priority)
            .max_attempts(max_attempts);
        schedule.kind = kind;
        schedule.payload = payload;
        Ok(schedule)
    }
}

/// The job id of the run of schedule `name` at `slot`: `NAME@2026-12-01T03:00:00Z`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming `now` when `slot` is outside the calendar's range.
pub fn run_id(name: &str, slot: i64) -> Result<String> {
    Ok(format!(
        "{name}@{}",
        utc(slot)?.format("%Y-%m-%dT%H:%M:%SZ")
    ))
}

fn utc(seconds: i64) -> Result<DateTime<Utc>> {
    Utc.timestamp_opt(seconds, 0)
        .single()
        .ok_or_else(|| Error::invalid("now", format!("{seconds} is outside the calendar")))
}

fn parse_cron(text: &str) -> Result<Cron> {
    Cron::from_str(text).map_err(|e| Error::invalid("cron", format!("{text:?}: {e}")))
}

fn parse_tz(name: &str) -> Result<Tz> {
    Tz::from_str(name).map_err(|_| {
        Error::invalid(
            "tz",
            format!("{name:?} is not an IANA time zone (e.g. UTC, Europe/Berlin)"),
        )
    })
}

/// A schedule as the store keeps it: its definition, when it was added and the last slot
/// enqueued.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleInfo {
    /// The definition.
    pub schedule: Schedule,
    /// When it was added (the `now` of [`Store::add_schedule`](crate::Store::add_schedule)).
    pub created_at: f64,
    /// Unix seconds of the last slot enqueued; at first, of its creation (no slot before it
    /// runs).
    pub last_slot: i64,
}

impl ScheduleInfo {
    /// The last slot a scheduler enqueued, or `None` before the first run (while `last_slot`
    /// is still the second the schedule was added).
    ///
    /// ```
    /// use leasefence::{Schedule, ScheduleInfo};
    /// let t0 = 1_796_083_200; // 2026-12-01T00:00:00Z
    /// let mut info = ScheduleInfo {
    ///     schedule: Schedule::new("sync", "@hourly").unwrap(),
    ///     created_at: t0 as f64 + 0.25,
    ///     last_slot: t0,
    /// };
    /// assert_eq!(info.last_run(), None);
    /// info.last_slot = t0 + 3_600;
    /// assert_eq!(info.last_run(), Some(t0 + 3_600));
    /// ```
    pub fn last_run(&self) -> Option<i64> {
        (self.last_slot != self.created_at.floor() as i64).then_some(self.last_slot)
    }

    /// The first slot after `last_slot`. When the scheduler missed slots, it is in the past and
    /// will not run (missed slots run once on catch-up, as the latest):
    /// [`next_run`](ScheduleInfo::next_run) is the slot the next tick enqueues.
    ///
    /// # Errors
    /// As [`Schedule::next_after`].
    pub fn next_slot(&self) -> Result<Option<i64>> {
        self.schedule.next_after(self.last_slot)
    }

    /// The slot the scheduler's next tick at `now` or later enqueues, as
    /// [`due_runs`](crate::due_runs) picks it: when slots after `last_slot` are already due at
    /// `now`, the latest of them (the others are skipped); else the first after `last_slot`.
    ///
    /// ```
    /// # fn main() -> Result<(), leasefence::Error> {
    /// use leasefence::{Now, Schedule, ScheduleInfo};
    /// let t0 = 1_796_083_200; // 2026-12-01T00:00:00Z
    /// let info = ScheduleInfo {
    ///     schedule: Schedule::new("sync", "@hourly")?,
    ///     created_at: t0 as f64,
    ///     last_slot: t0,
    /// };
    /// // 02:30, nothing ticked since 00:00: 02:00 runs next, 01:00 never does.
    /// assert_eq!(info.next_slot()?, Some(t0 + 3_600));
    /// assert_eq!(info.next_run(Now::new((t0 + 9_000) as f64)?)?, Some(t0 + 7_200));
    /// // 00:30: nothing due yet.
    /// assert_eq!(info.next_run(Now::new((t0 + 1_800) as f64)?)?, Some(t0 + 3_600));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Schedule::next_after`]; [`Error::InvalidArgument`] naming `now` when it is not a
    /// time the calendar can hold.
    pub fn next_run(&self, now: crate::types::Now) -> Result<Option<i64>> {
        let at = crate::schedule::first_slot(now)?;
        let Some(first) = self.next_slot()? else {
            return Ok(None);
        };
        if first > at {
            return Ok(Some(first));
        }
        Ok(Some(
            self.schedule.latest_at(at)?.unwrap_or(first).max(first),
        ))
    }
}

/// One due run for [`Store::enqueue_slots`](crate::Store::enqueue_slots): move schedule `name`
/// from `after` (the `last_slot` read) to `slot`, and enqueue `job` for it.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotRun {
    /// The schedule.
    pub name: String,
    /// The `last_slot` the scheduler read; the run is skipped when the stored one differs.
    pub after: i64,
    /// The slot being enqueued (after `after`).
    pub slot: i64,
    /// The job of the slot ([`Schedule::run`]).
    pub job: NewJob,
}
