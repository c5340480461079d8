//! Periodic jobs above the seam, shared by every backend: which slots are due ([`due_runs`]),
//! one fenced tick ([`tick`]) and the scheduler role ([`Scheduler`]).
//!
//! The role is an ordinary lease on the reserved job [`SCHEDULER_JOB`], so it has a fence
//! and an attempt ledger like any job: `history leasefence.scheduler` shows who held it.
//! Its holder enqueues each due slot of each schedule as the job `NAME@<slot>` through
//! [`Store::enqueue_slots`], which checks the lease and advances the schedule's last slot in
//! the same transaction as the enqueue. Two schedulers, a stalled one or a restarted one can
//! therefore never enqueue a slot twice, and a stalled one's late enqueue is refused.
//!
//! **Missed slots run once on catch-up**: when the scheduler was down (or no worker held the
//! role) across several slots of a schedule, the next tick enqueues only the latest of them
//! and counts the others as skipped ([`Tick::skipped`]); it never floods the queue with a
//! backlog. A new schedule starts at the time it is added: no slot before it runs.

use crate::error::{Error, Result};
use crate::store::Store;
use crate::types::{Enqueued, Lease, NewJob, Now, Owner, ScheduleInfo, SlotRun, Ttl};

/// The reserved job whose lease is the scheduler role.
pub const SCHEDULER_JOB: &str = "leasefence.scheduler";

/// The queue of [`SCHEDULER_JOB`].
pub const SCHEDULER_QUEUE: &str = "leasefence";

/// The not-before of [`SCHEDULER_JOB`] (9999-12-31T23:59:59Z): no `claim_next` ever hands it
/// out, so only a claim by id — a scheduler's — takes it.
const NEVER: f64 = 253_402_300_799.0;

/// How many skipped slots a tick counts before it stops counting.
const COUNT_LIMIT: u64 = 100_000;

/// The whole second at or before `now`, as a schedule's slots count time.
pub(crate) fn first_slot(now: Now) -> Result<i64> {
    let seconds = now.seconds().floor();
    if !(-62_135_596_800.0..=NEVER).contains(&seconds) {
        return Err(Error::invalid(
            "now",
            format!(
                "{} is not a time a schedule can use (Unix seconds, years 1 to 9999)",
                now.seconds()
            ),
        ));
    }
    Ok(seconds as i64)
}

/// `enqueue_slots` takes only a lease on [`SCHEDULER_JOB`]: a lease on another job is not
/// the scheduler role.
pub(crate) fn check_role(scheduler: &Lease) -> Result<()> {
    if scheduler.job_id == SCHEDULER_JOB {
        Ok(())
    } else {
        Err(Error::invalid(
            "scheduler",
            format!(
                "a lease on {:?} is not the scheduler role; claim the job {SCHEDULER_JOB:?}",
                scheduler.job_id
            ),
        ))
    }
}

/// What is due at one clock reading: the runs to enqueue, and when the next slot comes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Due {
    /// One run per schedule with a slot due: its latest slot at or before `now`.
    pub runs: Vec<SlotRun>,
    /// The slots passed over (due, but not the latest of their schedule): missed slots run
    /// once on catch-up. Counted up to 100,000 per schedule.
    pub skipped: u64,
    /// Whether some schedule's count stopped at that limit: more slots were missed than
    /// `skipped` says.
    pub skipped_at_least: bool,
    /// The earliest slot of any schedule after `now`, in Unix seconds.
    pub next_slot: Option<i64>,
}

/// The runs due at `now` for `schedules` (as [`Store::schedules`] returns them): per schedule
/// whose first slot after its `last_slot` is at or before `now`, one run of its **latest**
/// slot at or before `now` (missed slots run once on catch-up).
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// use leasefence::{Now, Schedule, ScheduleInfo, due_runs};
/// let hourly = Schedule::new("sync", "@hourly")?;
/// let t0 = 1_796_083_200; // 2026-12-01T00:00:00Z
/// let info = ScheduleInfo { schedule: hourly, created_at: t0 as f64, last_slot: t0 };
/// // 02:30: the slots 01:00 and 02:00 have passed; 02:00 runs, 01:00 is skipped.
/// let due = due_runs(&[info], Now::new((t0 + 9_000) as f64)?)?;
/// assert_eq!(due.runs[0].job.id(), "sync@2026-12-01T02:00:00Z");
/// assert_eq!((due.skipped, due.next_slot), (1, Some(t0 + 3 * 3_600)));
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] naming `now` when it is not a time the calendar can hold.
pub fn due_runs(schedules: &[ScheduleInfo], now: Now) -> Result<Due> {
    let at = first_slot(now)?;
    let mut due = Due::default();
    let mut soonest = |slot: Option<i64>| {
        if let Some(slot) = slot {
            due.next_slot = Some(due.next_slot.map_or(slot, |next| next.min(slot)));
        }
    };
    let mut runs = Vec::new();
    let mut skipped = 0;
    for info in schedules {
        let schedule = &info.schedule;
        let Some(first) = schedule.next_after(info.last_slot)? else {
            continue; // no slot left (a year in the past)
        };
        if first > at {
            soonest(Some(first));
            continue;
        }
        let latest = schedule.latest_at(at)?.unwrap_or(first).max(first);
        let mut passed = first;
        let mut counted = 0;
        while passed < latest && counted < COUNT_LIMIT {
            counted += 1;
            match schedule.next_after(passed)? {
                Some(next) => passed = next,
                None => break,
            }
        }
        skipped += counted;
        // Stopped by the limit, not by the latest slot: more were missed.
        due.skipped_at_least |= counted == COUNT_LIMIT && passed < latest;
        soonest(schedule.next_after(latest)?);
        runs.push(SlotRun {
            name: schedule.name().to_owned(),
            after: info.last_slot,
            slot: latest,
            job: schedule.run(latest)?,
        });
    }
    due.runs = runs;
    due.skipped = skipped;
    Ok(due)
}

/// What one tick did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tick {
    /// The job ids of the runs enqueued, one per schedule that had a slot due.
    pub enqueued: Vec<String>,
    /// Due runs that enqueued nothing: their id was already known (or their unique key held),
    /// or their schedule was removed or advanced meanwhile.
    pub passed: Vec<String>,
    /// Missed slots not run (see [`Due::skipped`]).
    pub skipped: u64,
    /// Whether more slots were missed than `skipped` says ([`Due::skipped_at_least`]).
    pub skipped_at_least: bool,
    /// The earliest next slot of any schedule, in Unix seconds.
    pub next_slot: Option<i64>,
}

/// One tick of the scheduler holding `lease` on [`SCHEDULER_JOB`]: reads the schedules,
/// computes what is due at `now` ([`due_runs`]) and enqueues it with
/// [`Store::enqueue_slots`] — fenced by `lease`, in one transaction. `None` when the lease is
/// no longer current: nothing was enqueued, and the refusal is counted in the scheduler job's
/// ledger. With nothing due, nothing is written (and the lease is not checked).
///
/// # Errors
/// [`Error::InvalidArgument`] naming `scheduler` when something is due and `lease` is on
/// another job than [`SCHEDULER_JOB`], or `now` when it is not a time the calendar can hold;
/// busy or backend failures.
pub fn tick<S: Store + ?Sized>(store: &S, lease: &Lease, now: Now) -> Result<Option<Tick>> {
    let due = due_runs(&store.schedules()?, now)?;
    let mut tick = Tick {
        skipped: due.skipped,
        skipped_at_least: due.skipped_at_least,
        next_slot: due.next_slot,
        ..Tick::default()
    };
    if due.runs.is_empty() {
        return Ok(Some(tick));
    }
    let Some(outcomes) = store.enqueue_slots(lease, now, &due.runs)? else {
        return Ok(None);
    };
    for (run, outcome) in due.runs.iter().zip(outcomes) {
        let id = run.job.id().to_owned();
        if outcome.as_ref().is_some_and(Enqueued::is_inserted) {
            tick.enqueued.push(id);
        } else {
            tick.passed.push(id);
        }
    }
    Ok(Some(tick))
}

/// What one [`Scheduler::step`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Another scheduler holds the role (or it could not be taken): nothing was enqueued.
    Standby,
    /// This scheduler holds the role and ticked.
    Ticked(Tick),
    /// This scheduler held the role but its lease was no longer current when it ticked: its
    /// enqueue was refused by the fence and nothing was written. It stands by from now on.
    Refused,
}

/// The scheduler role, taken and kept by one caller: call [`step`](Scheduler::step) every
/// second or so. It takes the lease on [`SCHEDULER_JOB`] when nobody holds it (creating the
/// job on first use), renews it once a third of `ttl` has passed, and ticks; when another
/// scheduler holds the role it stands by with one read per step. [`resign`](Scheduler::resign)
/// gives the role back, so another scheduler takes it at once.
///
/// [`WorkerBuilder::scheduler`](crate::WorkerBuilder::scheduler) runs one on a thread of a
/// worker.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::{JobId, Now, Schedule, Scheduler, SqliteStore, Step, Store, Ttl};
/// let path = dir.path().join("jobs.db");
/// let store = SqliteStore::open(&path)?;
/// let t0 = 1_796_083_200.0; // 2026-12-01T00:00:00Z
/// store.add_schedule(&Schedule::new("sync", "*/5 * * * *")?, Now::new(t0)?)?;
///
/// let (host_a, host_b) = (SqliteStore::open(&path)?, SqliteStore::open(&path)?);
/// let mut a = Scheduler::new(&host_a, "host-a", Ttl::new(30.0)?)?;
/// let mut b = Scheduler::new(&host_b, "host-b", Ttl::new(30.0)?)?;
/// let at_5_min = Now::new(t0 + 300.0)?;
/// let Step::Ticked(tick) = a.step(at_5_min)? else { panic!("a takes the role") };
/// assert_eq!(tick.enqueued, ["sync@2026-12-01T00:05:00Z"]);
/// assert_eq!(b.step(at_5_min)?, Step::Standby); // a holds the role
/// assert!(store.state(JobId::new("sync@2026-12-01T00:05:00Z")?)?.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Scheduler<'s, S: ?Sized> {
    store: &'s S,
    owner: String,
    ttl: Ttl,
    lease: Option<Lease>,
}

impl<'s, S: Store + ?Sized> Scheduler<'s, S> {
    /// A scheduler on `store` that takes the role as `owner`, for leases of `ttl`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `owner` when it is empty.
    pub fn new(store: &'s S, owner: &str, ttl: Ttl) -> Result<Self> {
        Owner::new(owner)?;
        Ok(Scheduler {
            store,
            owner: owner.to_owned(),
            ttl,
            lease: None,
        })
    }

    /// The store.
    pub fn store(&self) -> &'s S {
        self.store
    }

    /// The lease on the role, while this scheduler holds it.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Keeps or takes the role at `now` and, holding it, ticks ([`tick`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `now` when it is not a time the calendar can hold
    /// (before anything is written); busy or backend failures (retryable ones are
    /// [`Error::is_retryable`]: step again).
    pub fn step(&mut self, now: Now) -> Result<Step> {
        let owner = Owner::new(&self.owner)?;
        // A reading the calendar cannot hold is refused before the role is taken or renewed:
        // bad input changes nothing (tick would refuse it only after the claim).
        first_slot(now)?;
        if let Some(lease) = &mut self.lease {
            // Renew once a third of the lease has passed: a step costs a read, not a commit.
            let renew_at = lease.until - self.ttl.seconds() * 2.0 / 3.0;
            if now.seconds() >= renew_at && !self.store.renew_lease(lease, now, self.ttl)? {
                tracing::warn!(owner = %self.owner, fence = lease.fence, "scheduler role lost");
                self.lease = None;
            }
        }
        if self.lease.is_none() {
            let job = crate::types::JobId::new(SCHEDULER_JOB)?;
            match self.store.state(job)? {
                None => {
                    self.store.enqueue_jobs(&[NewJob::new(SCHEDULER_JOB)?
                        .queue(SCHEDULER_QUEUE)?
                        .not_before(NEVER)?])?;
                }
                Some(row) if row.done || row.is_leased_at(now.seconds()) => {
                    return Ok(Step::Standby);
                }
                Some(_) => {}
            }
            self.lease = self.store.claim(job, owner, now, self.ttl)?;
            match &self.lease {
                Some(lease) => {
                    tracing::info!(owner = %self.owner, fence = lease.fence, "scheduler role taken");
                }
                None => return Ok(Step::Standby),
            }
        }
        let lease = self.lease.as_ref().expect("held");
        match tick(self.store, lease, now)? {
            Some(tick) => Ok(Step::Ticked(tick)),
            None => {
                self.lease = None;
                Ok(Step::Refused)
            }
        }
    }

    /// Gives the role back (a fenced release), so another scheduler can take it at once.
    /// `true` if this scheduler held it and the release was accepted.
    ///
    /// # Errors
    /// Busy or backend failures.
    pub fn resign(&mut self) -> Result<bool> {
        match self.lease.take() {
            Some(lease) => self.store.release_lease(&lease),
            None => Ok(false),
        }
    }
}
