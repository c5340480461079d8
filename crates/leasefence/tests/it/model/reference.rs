//! The reference model: every `Store` operation on plain Rust values, written from
//! `CONTRACT.md` and the `Store` trait's documentation — not from the SQL.
//!
//! Per job id it keeps the six contract columns and the queue columns, in enqueue order; beside
//! them the fence floor of purged ids and the fence gate. It also keeps what only the tests need:
//! the last clock reading (to generate the next one), the leases handed out (to aim renew,
//! complete, release and fail at them, stale or current) and every fence ever issued (for the
//! invariants).

use std::collections::{BTreeMap, BTreeSet};

use leasefence::{Backoff, Enqueued, Failed, JobInfo, JobState, Lease, QueueInfo, Stats, Status};

use super::ops::{Op, Spec};
use crate::common::{QueueRow, Row, Stored};

/// One job as the contract describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: String,
    pub owner: Option<String>,
    pub until: f64,
    pub fence: i64,
    pub result: Option<String>,
    pub done: bool,
    pub payload: Option<Vec<u8>>,
    pub priority: i64,
    pub not_before: f64,
    pub max_attempts: u32,
    /// Attempts spent: claims less the leases given back by `release`.
    pub attempts: u32,
    pub error: Option<String>,
    /// `completed`, `dead` or `cancelled` once finished.
    pub outcome: Option<&'static str>,
    pub finished_at: Option<f64>,
    pub queue: String,
    pub kind: Option<String>,
    pub unique_key: Option<String>,
    /// The attempt ledger: one per claim, oldest first.
    pub ledger: Vec<Attempt>,
    /// The refused fenced writes, by (fence, operation).
    pub refused: BTreeMap<(i64, &'static str), i64>,
}

/// One claim in the ledger: its fence and owner, how it ended (`None`: open) and its error.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub fence: i64,
    pub owner: String,
    pub outcome: Option<&'static str>,
    pub error: Option<String>,
}

impl Job {
    /// A claim: the attempt still open (its lease expired unwritten) is lost, a new one opens.
    fn opened(&mut self, who: &str) {
        self.ended("lost", None);
        self.ledger.push(Attempt {
            fence: self.fence,
            owner: who.to_owned(),
            outcome: None,
            error: None,
        });
    }

    /// Ends the open attempt, if any, as `outcome`.
    fn ended(&mut self, outcome: &'static str, error: Option<String>) {
        if let Some(open) = self.ledger.iter_mut().find(|a| a.outcome.is_none()) {
            open.outcome = Some(outcome);
            open.error = error;
        }
    }

    /// Counts a refused write of `op` under `fence`.
    fn refuse(&mut self, fence: i64, op: &'static str) {
        *self.refused.entry((fence, op)).or_insert(0) += 1;
    }

    /// A freshly enqueued job: no owner, `until = 0`, not done; its fence starts at the floor.
    fn new(spec: &Spec, floor: i64) -> Job {
        Job {
            id: spec.id.clone(),
            owner: None,
            until: 0.0,
            fence: floor,
            result: None,
            done: false,
            payload: spec.payload.clone(),
            priority: spec.priority,
            not_before: spec.not_before,
            // a purged id enqueued again (floor > 0) starts with its whole budget
            max_attempts: spec.max_attempts,
            attempts: 0,
            error: None,
            outcome: None,
            finished_at: None,
            queue: spec.queue.clone(),
            kind: spec.kind.clone(),
            unique_key: spec.unique_key.clone(),
            ledger: Vec::new(),
            refused: BTreeMap::new(),
        }
    }

    /// The lease is live while `until > now`; `now == until` has expired.
    fn live(&self, now: f64) -> bool {
        !self.done && self.until > now
    }

    /// The current lease: owner and fence match, not done, `until > now`.
    fn current(&self, owner: &str, fence: i64, now: f64) -> bool {
        self.owner.as_deref() == Some(owner) && self.fence == fence && self.live(now)
    }

    /// Unfinished, its budget spent and its last lease expired at `now`: dead, not buried yet.
    fn spent_and_expired(&self, now: f64) -> bool {
        !self.done && !self.attempts_left() && self.until <= now
    }

    fn attempts_left(&self) -> bool {
        self.max_attempts == 0 || self.attempts < self.max_attempts
    }

    /// Claimable by `claim_next`: not done, lease expired, due, attempts left.
    fn ready(&self, now: f64) -> bool {
        !self.done && self.until <= now && self.not_before <= now && self.attempts_left()
    }

    /// The status at `now`, from `Status`'s documentation: a finished job by its outcome; then
    /// a live lease; then an exhausted budget (dead); a lease that ran out without release or
    /// fail (expired: the owner is still recorded); a failed attempt (retrying); not yet due
    /// (scheduled); otherwise ready.
    pub fn status(&self, now: f64) -> Status {
        if self.done {
            match self.outcome {
                Some("dead") => Status::Dead,
                Some("cancelled") => Status::Cancelled,
                _ => Status::Done,
            }
        } else if self.until > now {
            Status::Leased
        } else if !self.attempts_left() {
            Status::Dead
        } else if self.owner.is_some() {
            Status::Expired
        } else if self.error.is_some() {
            Status::Retrying
        } else if self.not_before > now {
            Status::Scheduled
        } else {
            Status::Ready
        }
    }

    pub fn state(&self) -> JobState {
        JobState {
            id: self.id.clone(),
            owner: self.owner.clone(),
            until: self.until,
            fence: self.fence,
            result: self.result.clone(),
            done: self.done,
        }
    }

    fn info(&self, now: f64) -> JobInfo {
        JobInfo {
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            unique_key: self.unique_key.clone(),
            state: self.state(),
            status: self.status(now),
            payload: self.payload.clone(),
            priority: self.priority,
            not_before: self.not_before,
            max_attempts: self.max_attempts,
            attempts: self.attempts,
            error: self.error.clone(),
            finished_at: self.finished_at,
            outcome: self.outcome.map(str::to_owned),
            // The enqueue time is the host's clock, not the model's: the runner checks that
            // the store recorded one and compares the rest.
            enqueued_at: None,
        }
    }

    /// The lease a claim of this job hands out (after the claim was applied).
    fn lease(&self) -> Lease {
        Lease {
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            job_id: self.id.clone(),
            owner: self.owner.clone().unwrap_or_default(),
            fence: self.fence,
            until: self.until,
            payload: self.payload.clone(),
            priority: self.priority,
            max_attempts: self.max_attempts,
            last_error: self.error.clone(),
            attempt: self.attempts,
        }
    }
}

/// What an operation returned. The driver turns the store's answer into the same shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// An invalid-argument error naming this argument; nothing was changed.
    Invalid(&'static str),
    Bool(bool),
    Bools(Vec<bool>),
    /// `enqueue_jobs`: per job inserted, known or a duplicate of the key's holder.
    Enqueued(Vec<Enqueued>),
    /// `queues`: every queue with jobs or a pause row, by name.
    Queues(Vec<QueueInfo>),
    Fence(Option<i64>),
    State(Option<JobState>),
    Leases(Vec<Lease>),
    Failed(Option<Failed>),
    /// `renew_lease`: whether it renewed, and the lease's `until` afterwards.
    Renewed(bool, f64),
    Count(u64),
    List(Vec<JobInfo>),
    Stats(Stats),
    /// `tick`: the run ids it enqueued, or `None` when the fence refused it.
    Ticked(Option<Vec<String>>),
    /// A restart (init again, a new store) returns nothing and changes nothing.
    Restarted,
}

/// The schedule every case starts with (`* * * * * *`, added at 0): a slot every second.
pub const BEAT: &str = "beat";

/// How many handed-out leases the model remembers for later operations to aim at.
const KEPT_LEASES: usize = 8;

/// The whole model state.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// The jobs in enqueue order.
    pub jobs: Vec<Job>,
    /// The highest fence of every purged id: a re-enqueued id starts from here.
    pub fence_floor: BTreeMap<String, i64>,
    /// The highest fence admitted per resource.
    pub fence_gate: BTreeMap<String, i64>,
    /// The last clock reading an operation used (generation only).
    pub clock: f64,
    /// The latest leases handed out, oldest first (generation only).
    pub leases: Vec<Lease>,
    /// Every `(id, fence)` ever handed out (invariants only).
    pub issued: BTreeSet<(String, i64)>,
    /// The rows of the `queues` table: a queue once paused keeps its row, with its flag.
    pub paused: BTreeMap<String, bool>,
    /// The last slot of the schedule `beat` enqueued (0: its creation).
    pub beat_last: i64,
}

/// A queue name as `Queue::new` checks it (the names drawn are valid or empty).
fn queue(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("queue")
    } else {
        Ok(())
    }
}

// The argument rules of CONTRACT.md ("Decisions where the note is silent"), in the order the
// driver builds the validated arguments (the order of the signatures).
fn job_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() { Err("job_id") } else { Ok(()) }
}
fn owner(owner: &str) -> Result<(), &'static str> {
    if owner.is_empty() {
        Err("owner")
    } else {
        Ok(())
    }
}
fn now(now: f64) -> Result<(), &'static str> {
    if now.is_finite() { Ok(()) } else { Err("now") }
}
/// A lease of at most 10^12 s (`Ttl::MAX`): a longer one is bad input.
fn ttl(ttl: f64) -> Result<(), &'static str> {
    if ttl.is_finite() && ttl > 0.0 && ttl <= 1e12 {
        Ok(())
    } else {
        Err("ttl")
    }
}
/// `now + ttl` (finite: `ttl` was checked first; the branch stays as the model's own guard).
fn until(now: f64, ttl: f64) -> Result<f64, &'static str> {
    let until = now + ttl;
    if until.is_finite() {
        Ok(until)
    } else {
        Err("ttl")
    }
}

impl Model {
    pub fn job(&self, id: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.id == id)
    }

    fn job_mut(&mut self, id: &str) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.id == id)
    }

    /// The fence the next claim of `id` builds on: the stored one, else the floor, else 0.
    pub fn fence_of(&self, id: &str) -> i64 {
        self.job(id)
            .map(|j| j.fence)
            .or_else(|| self.fence_floor.get(id).copied())
            .unwrap_or(0)
    }

    /// Clock readings at which something changes (lease ends, due times, finish times): the
    /// generator aims `now` at them to make the `now == until` boundaries likely.
    pub fn marks(&self) -> Vec<f64> {
        let mut marks: Vec<f64> = self
            .jobs
            .iter()
            .flat_map(|j| [Some(j.until), Some(j.not_before), j.finished_at])
            .flatten()
            .filter(|t| t.is_finite() && t.abs() < 1e6)
            .collect();
        marks.sort_by(f64::total_cmp);
        marks.dedup();
        marks
    }

    fn tick(&mut self, t: f64) {
        if t.is_finite() && t.abs() < 1e6 {
            self.clock = t;
        }
    }

    fn handed_out(&mut self, lease: Lease) {
        self.issued.insert((lease.job_id.clone(), lease.fence));
        self.leases.push(lease);
        if self.leases.len() > KEPT_LEASES {
            self.leases.remove(0);
        }
    }

    /// Applies `op` and returns what the store must return.
    pub fn apply(&mut self, op: &Op) -> Outcome {
        match self.apply_checked(op) {
            Ok(outcome) => outcome,
            Err(argument) => Outcome::Invalid(argument),
        }
    }

    fn apply_checked(&mut self, op: &Op) -> Result<Outcome, &'static str> {
        Ok(match op {
            Op::Tick { lease, now: t } => {
                now(*t)?;
                let slot = t.floor();
                if !(-62_135_596_800.0..=253_402_300_799.0).contains(&slot) {
                    return Err("now");
                }
                self.tick(*t);
                Outcome::Ticked(self.beat(lease, *t, slot as i64)?)
            }
            Op::Enqueue { id } => {
                job_id(id)?;
                let spec = Spec::plain(id);
                Outcome::Bool(self.enqueue(&spec))
            }
            Op::EnqueueMany { jobs } => {
                for spec in jobs {
                    job_id(&spec.id)?;
                    if !spec.not_before.is_finite() {
                        return Err("not_before");
                    }
                    queue(&spec.queue)?;
                }
                Outcome::Enqueued(jobs.iter().map(|spec| self.enqueue_job(spec)).collect())
            }
            Op::State { id } => {
                job_id(id)?;
                Outcome::State(self.job(id).map(Job::state))
            }
            Op::Claim {
                id,
                owner: who,
                now: t,
                ttl: d,
            } => {
                job_id(id)?;
                owner(who)?;
                now(*t)?;
                ttl(*d)?;
                self.tick(*t);
                let until = until(*t, *d)?;
                Outcome::Fence(self.claim(id, who, *t, until))
            }
            Op::Renew {
                id,
                owner: who,
                fence,
                now: t,
                ttl: d,
            } => {
                job_id(id)?;
                owner(who)?;
                now(*t)?;
                ttl(*d)?;
                self.tick(*t);
                let until = until(*t, *d)?;
                Outcome::Bool(self.renew(id, who, *fence, *t, until))
            }
            Op::Complete {
                id,
                owner: who,
                fence,
                now: t,
                result,
            } => {
                job_id(id)?;
                owner(who)?;
                now(*t)?;
                self.tick(*t);
                Outcome::Bool(self.complete(id, who, *fence, *t, result))
            }
            Op::Release {
                id,
                owner: who,
                fence,
            } => {
                job_id(id)?;
                owner(who)?;
                Outcome::Bool(self.release(id, who, *fence))
            }
            Op::ClaimBatch {
                owner: who,
                now: t,
                ttl: d,
                n,
                next,
                queues,
            } => {
                owner(who)?;
                now(*t)?;
                ttl(*d)?;
                if let Some(names) = queues {
                    for name in names {
                        queue(name)?;
                    }
                    if names.is_empty() {
                        return Err("queues");
                    }
                }
                self.tick(*t);
                // claim_next is claim_batch of one.
                let n = if *next { 1 } else { *n };
                if n == 0 {
                    return Err("n");
                }
                let until = until(*t, *d)?;
                Outcome::Leases(self.claim_batch(who, *t, until, n, queues.as_deref()))
            }
            Op::Fail {
                lease,
                now: t,
                error,
                retry_at,
            } => {
                now(*t)?;
                self.tick(*t);
                Outcome::Failed(self.fail(lease, *t, error, *retry_at))
            }
            Op::RenewLease {
                lease,
                now: t,
                ttl: d,
            } => {
                now(*t)?;
                ttl(*d)?;
                self.tick(*t);
                let until = until(*t, *d)?;
                let renewed = self.renew(&lease.job_id, &lease.owner, lease.fence, *t, until);
                Outcome::Renewed(renewed, if renewed { until } else { lease.until })
            }
            Op::CompleteLease {
                lease,
                now: t,
                result,
            } => {
                now(*t)?;
                self.tick(*t);
                Outcome::Bool(self.complete(&lease.job_id, &lease.owner, lease.fence, *t, result))
            }
            Op::ReleaseLease { lease } => {
                Outcome::Bool(self.release(&lease.job_id, &lease.owner, lease.fence))
            }
            Op::Cancel { id, now: t } => {
                job_id(id)?;
                now(*t)?;
                self.tick(*t);
                Outcome::Bool(self.cancel(id, *t))
            }
            Op::Retry { ids, now: t } => {
                for id in ids {
                    job_id(id)?;
                }
                now(*t)?;
                self.tick(*t);
                let mut retried = std::collections::BTreeSet::new();
                for id in ids {
                    if self.retry(id, *t) {
                        retried.insert(id.clone());
                    }
                }
                Outcome::Bools(ids.iter().map(|id| retried.contains(id)).collect())
            }
            Op::RetryDead { now: t } => {
                now(*t)?;
                self.tick(*t);
                let dead: Vec<String> = self
                    .jobs
                    .iter()
                    .filter(|j| (j.done && j.outcome == Some("dead")) || j.spent_and_expired(*t))
                    .map(|j| j.id.clone())
                    .collect();
                Outcome::Count(dead.iter().filter(|id| self.retry(id, *t)).count() as u64)
            }
            Op::Delete { ids } => {
                for id in ids {
                    job_id(id)?;
                }
                let mut deleted = std::collections::BTreeSet::new();
                for id in ids {
                    if self.delete(id) {
                        deleted.insert(id.clone());
                    }
                }
                Outcome::Bools(ids.iter().map(|id| deleted.contains(id)).collect())
            }
            Op::Purge { before } => {
                now(*before)?;
                Outcome::Count(self.purge(*before))
            }
            Op::List {
                now: t,
                status,
                limit,
            } => {
                now(*t)?;
                self.tick(*t);
                Outcome::List(
                    self.jobs
                        .iter()
                        .map(|j| j.info(*t))
                        .filter(|info| status.is_none_or(|s| info.status == s))
                        .take(*limit)
                        .collect(),
                )
            }
            Op::Stats { now: t } => {
                now(*t)?;
                self.tick(*t);
                let mut stats = Stats::default();
                for job in &self.jobs {
                    add(&mut stats, job.status(*t));
                }
                Outcome::Stats(stats)
            }
            Op::Restart => Outcome::Restarted,
            Op::Pause {
                queue: name,
                resume,
            } => {
                queue(name)?;
                let flag = self.paused.get(name).copied();
                Outcome::Bool(if *resume {
                    let was = flag == Some(true);
                    if was {
                        self.paused.insert(name.clone(), false);
                    }
                    was
                } else {
                    let was = flag == Some(true);
                    self.paused.insert(name.clone(), true);
                    !was
                })
            }
            Op::Queues { now: t } => {
                now(*t)?;
                self.tick(*t);
                let mut names: BTreeSet<&str> =
                    self.jobs.iter().map(|j| j.queue.as_str()).collect();
                names.extend(self.paused.keys().map(String::as_str));
                Outcome::Queues(
                    names
                        .into_iter()
                        .map(|name| {
                            let mut stats = Stats::default();
                            for job in self.jobs.iter().filter(|j| j.queue == name) {
                                add(&mut stats, job.status(*t));
                            }
                            QueueInfo {
                                name: name.to_owned(),
                                paused: self.paused.get(name) == Some(&true),
                                stats,
                            }
                        })
                        .collect(),
                )
            }
            Op::Admit { resource, fence } => {
                if resource.is_empty() {
                    return Err("resource");
                }
                if *fence < 1 {
                    return Err("fence");
                }
                Outcome::Bool(self.admit(resource, *fence))
            }
        })
    }

    /// The tick of the schedule `beat` (a slot every second) at `now` under `lease`: with a
    /// slot after the last one due, the current lease on the scheduler job enqueues its run
    /// (`beat@<slot>`, due at the slot) and moves the last slot on; any other lease on that job
    /// is refused and counted; a lease on another job is an invalid `scheduler`. Nothing due:
    /// nothing written, nothing checked.
    fn beat(
        &mut self,
        lease: &Lease,
        now: f64,
        slot: i64,
    ) -> Result<Option<Vec<String>>, &'static str> {
        if slot <= self.beat_last {
            return Ok(Some(Vec::new()));
        }
        if lease.job_id != leasefence::SCHEDULER_JOB {
            return Err("scheduler");
        }
        match self.job_mut(leasefence::SCHEDULER_JOB) {
            Some(job) if job.current(&lease.owner, lease.fence, now) => {
                self.beat_last = slot;
                let id = leasefence::run_id(BEAT, slot).expect("in the calendar");
                let spec = Spec {
                    not_before: slot as f64,
                    ..Spec::plain(&id)
                };
                let inserted = self.enqueue_job(&spec) == Enqueued::Inserted;
                Ok(Some(if inserted { vec![id] } else { Vec::new() }))
            }
            Some(job) => {
                job.refuse(lease.fence, "schedule");
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// An unknown id is inserted with the default state, its fence starting at the floor of a
    /// purged id; a known id is left exactly as it is.
    fn enqueue(&mut self, spec: &Spec) -> bool {
        self.enqueue_job(spec) == Enqueued::Inserted
    }

    /// `enqueue` with a unique key: a known id is `Known`; a key held by an unfinished job of
    /// the same queue is a `Duplicate` of that job and inserts nothing.
    fn enqueue_job(&mut self, spec: &Spec) -> Enqueued {
        if self.job(&spec.id).is_some() {
            return Enqueued::Known;
        }
        if let Some(holder) = self.holder(&spec.queue, spec.unique_key.as_deref(), None) {
            return Enqueued::Duplicate { of: holder };
        }
        let floor = self.fence_floor.get(&spec.id).copied().unwrap_or(0);
        self.jobs.push(Job::new(spec, floor));
        Enqueued::Inserted
    }

    /// The unfinished job (other than `except`) that holds `key` in `queue`, if any.
    fn holder(&self, queue: &str, key: Option<&str>, except: Option<&str>) -> Option<String> {
        let key = key?;
        self.jobs
            .iter()
            .find(|j| {
                !j.done
                    && j.queue == queue
                    && j.unique_key.as_deref() == Some(key)
                    && Some(j.id.as_str()) != except
            })
            .map(|j| j.id.clone())
    }

    /// Claimable: known, not done, lease expired (`until <= now`), attempts left in its budget.
    /// Then owner, `until`, fence + 1.
    fn claim(&mut self, id: &str, who: &str, now: f64, until: f64) -> Option<i64> {
        let job = self.job_mut(id)?;
        if job.done || job.until > now || !job.attempts_left() {
            return None;
        }
        job.owner = Some(who.to_owned());
        job.until = until;
        job.fence += 1;
        job.attempts = job.attempts.saturating_add(1);
        job.opened(who);
        let lease = job.lease();
        let fence = lease.fence;
        self.handed_out(lease);
        Some(fence)
    }

    /// Only the current lease is extended; an expired one is never revived.
    fn renew(&mut self, id: &str, who: &str, fence: i64, now: f64, until: f64) -> bool {
        match self.job_mut(id) {
            Some(job) if job.current(who, fence, now) => {
                job.until = until;
                true
            }
            Some(job) => {
                job.refuse(fence, "renew");
                false
            }
            None => false,
        }
    }

    /// Only the current lease stores a result; owner, fence and `until` stay as a record.
    fn complete(&mut self, id: &str, who: &str, fence: i64, now: f64, result: &str) -> bool {
        match self.job_mut(id) {
            Some(job) if job.current(who, fence, now) => {
                job.result = Some(result.to_owned());
                job.done = true;
                job.outcome = Some("completed");
                job.finished_at = Some(now);
                job.ended("completed", None);
                true
            }
            Some(job) => {
                job.refuse(fence, "complete");
                false
            }
            None => false,
        }
    }

    /// Owner and fence match and not done (no clock): owner cleared, `until = 0`, fence kept,
    /// the attempt refunded.
    fn release(&mut self, id: &str, who: &str, fence: i64) -> bool {
        match self.job_mut(id) {
            Some(job) if job.owner.as_deref() == Some(who) && job.fence == fence && !job.done => {
                job.owner = None;
                job.until = 0.0;
                job.attempts = job.attempts.saturating_sub(1);
                job.ended("released", None);
                true
            }
            Some(job) => {
                job.refuse(fence, "release");
                false
            }
            None => false,
        }
    }

    /// First buries every job whose last attempt's lease expired by `now` (dead, finished at
    /// its lease end); then the best `n` ready jobs — highest priority, earliest not-before,
    /// oldest — each claimed.
    fn claim_batch(
        &mut self,
        who: &str,
        now: f64,
        until: f64,
        n: usize,
        queues: Option<&[String]>,
    ) -> Vec<Lease> {
        for job in &mut self.jobs {
            if !job.done && !job.attempts_left() && job.until <= now {
                job.done = true;
                job.outcome = Some("dead");
                job.finished_at = Some(job.until);
                job.error
                    .get_or_insert_with(|| "the lease of the last attempt expired".to_owned());
                // Its last lease expired unwritten.
                job.ended("lost", None);
            }
        }
        // Ready, in one of the queues, and its queue not paused.
        let mut order: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| {
                let job = &self.jobs[i];
                job.ready(now)
                    && queues.is_none_or(|q| q.contains(&job.queue))
                    && self.paused.get(&job.queue) != Some(&true)
            })
            .collect();
        // Stable: among equals the enqueue order (the order of `jobs`) decides.
        order.sort_by(|&a, &b| {
            let (a, b) = (&self.jobs[a], &self.jobs[b]);
            b.priority
                .cmp(&a.priority)
                .then(a.not_before.total_cmp(&b.not_before))
        });
        order.truncate(n);
        let mut leases = Vec::new();
        for i in order {
            let job = &mut self.jobs[i];
            job.owner = Some(who.to_owned());
            job.until = until;
            job.fence += 1;
            job.attempts = job.attempts.saturating_add(1);
            job.opened(who);
            let lease = job.lease();
            leases.push(lease.clone());
            self.handed_out(lease);
        }
        leases
    }

    /// Fenced like complete. Gives the lease up (fence kept), stores the error and the retry
    /// time — given, or `Backoff::default()` from the public `delay` — and buries the job when
    /// that was its last attempt.
    fn fail(
        &mut self,
        lease: &Lease,
        now: f64,
        error: &str,
        retry_at: Option<f64>,
    ) -> Option<Failed> {
        let job = self.job_mut(&lease.job_id)?;
        if !job.current(&lease.owner, lease.fence, now) {
            job.refuse(lease.fence, "fail");
            return None;
        }
        let at = retry_at.unwrap_or_else(|| {
            let at = now + Backoff::default().delay(&lease.job_id, i64::from(lease.attempt));
            if at.is_finite() { at } else { now }
        });
        let dead = !job.attempts_left();
        job.owner = None;
        job.until = 0.0;
        job.error = Some(error.to_owned());
        job.not_before = at;
        job.done = dead;
        job.outcome = dead.then_some("dead");
        job.finished_at = dead.then_some(now);
        // The worker's time limit writes this error: the ledger tells it from a failure.
        let how = if error.starts_with("timed out after ") {
            "timed out"
        } else {
            "failed"
        };
        job.ended(how, Some(error.to_owned()));
        Some(if dead {
            Failed::Dead
        } else {
            Failed::Retrying { at }
        })
    }

    /// Any unfinished job becomes cancelled (done, fence kept); a finished one stays as it is.
    /// Its open attempt ends as cancelled while its lease is live, and as lost once it expired
    /// unwritten (it no longer held the job).
    fn cancel(&mut self, id: &str, now: f64) -> bool {
        match self.job_mut(id) {
            Some(job) if !job.done => {
                let held = job.owner.is_some() && job.until > now;
                job.done = true;
                job.outcome = Some("cancelled");
                job.finished_at = Some(now);
                job.ended(if held { "cancelled" } else { "lost" }, None);
                true
            }
            _ => false,
        }
    }

    /// Dead (finished as dead, or spent with its last lease expired) or cancelled: ready again
    /// with a fresh budget, the error cleared, due by `now`, the fence kept. Anything else is
    /// left alone.
    fn retry(&mut self, id: &str, now: f64) -> bool {
        // An expired last attempt ends as lost first, whether or not the retry happens.
        if let Some(job) = self.job_mut(id)
            && job.spent_and_expired(now)
        {
            job.ended("lost", None);
        }
        // A finished job would take its unique key back: not while another unfinished job of
        // its queue holds it.
        if let Some(job) = self.job(id)
            && job.done
            && self
                .holder(&job.queue, job.unique_key.as_deref(), Some(id))
                .is_some()
        {
            return false;
        }
        match self.job_mut(id) {
            Some(job)
                if (job.done && matches!(job.outcome, Some("dead" | "cancelled")))
                    || job.spent_and_expired(now) =>
            {
                job.done = false;
                job.outcome = None;
                job.finished_at = None;
                job.owner = None;
                job.until = 0.0;
                job.attempts = 0;
                job.error = None;
                job.not_before = job.not_before.min(now);
                true
            }
            _ => false,
        }
    }

    /// Removes the job, finished or not, raising its fence floor to its fence.
    fn delete(&mut self, id: &str) -> bool {
        let Some(at) = self.jobs.iter().position(|j| j.id == id) else {
            return false;
        };
        let job = self.jobs.remove(at);
        let floor = self.fence_floor.entry(job.id.clone()).or_insert(job.fence);
        *floor = (*floor).max(job.fence);
        true
    }

    /// Deletes the jobs finished before `before`, raising each one's fence floor to its fence.
    fn purge(&mut self, before: f64) -> u64 {
        let (gone, kept): (Vec<Job>, Vec<Job>) = std::mem::take(&mut self.jobs)
            .into_iter()
            .partition(|j| j.done && j.finished_at.is_some_and(|f| f < before));
        self.jobs = kept;
        for job in &gone {
            let floor = self.fence_floor.entry(job.id.clone()).or_insert(job.fence);
            *floor = (*floor).max(job.fence);
        }
        gone.len() as u64
    }

    /// Admits a fence at least the highest admitted one (the first always), and records it.
    fn admit(&mut self, resource: &str, fence: i64) -> bool {
        match self.fence_gate.get(resource) {
            Some(&highest) if fence < highest => false,
            _ => {
                self.fence_gate.insert(resource.to_owned(), fence);
                true
            }
        }
    }

    /// What the store must hold now, in the shape `Probe::stored` reads it.
    pub fn stored(&self) -> Stored {
        Stored {
            jobs: self
                .jobs
                .iter()
                .map(|j| {
                    (
                        Row {
                            id: j.id.clone(),
                            owner: j.owner.clone(),
                            until: j.until,
                            fence: j.fence,
                            result: j.result.clone(),
                            done: i64::from(j.done),
                        },
                        QueueRow {
                            payload: j.payload.clone(),
                            priority: j.priority,
                            not_before: j.not_before,
                            max_attempts: i64::from(j.max_attempts),
                            error: j.error.clone(),
                            outcome: j.outcome.map(str::to_owned),
                            finished_at: j.finished_at,
                            attempts: i64::from(j.attempts),
                            queue: j.queue.clone(),
                            kind: j.kind.clone(),
                            unique_key: j.unique_key.clone(),
                        },
                    )
                })
                .collect(),
            fence_floor: self
                .fence_floor
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            fence_gate: self
                .fence_gate
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            ledger: {
                let mut rows: Vec<_> = self
                    .jobs
                    .iter()
                    .flat_map(|j| {
                        j.ledger.iter().map(|a| {
                            (
                                j.id.clone(),
                                a.fence,
                                a.owner.clone(),
                                a.outcome.map(str::to_owned),
                                a.error.clone(),
                            )
                        })
                    })
                    .collect();
                rows.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
                rows
            },
            refusals: {
                let mut rows: Vec<_> = self
                    .jobs
                    .iter()
                    .flat_map(|j| {
                        j.refused
                            .iter()
                            .map(|(&(fence, op), &n)| (j.id.clone(), fence, op.to_owned(), n))
                    })
                    .collect();
                rows.sort();
                rows
            },
        }
    }
}

/// Counts one job of `status` in `stats`.
fn add(stats: &mut Stats, status: Status) {
    match status {
        Status::Ready => stats.ready += 1,
        Status::Scheduled => stats.scheduled += 1,
        Status::Leased => stats.leased += 1,
        Status::Expired => stats.expired += 1,
        Status::Retrying => stats.retrying += 1,
        Status::Done => stats.done += 1,
        Status::Dead => stats.dead += 1,
        Status::Cancelled => stats.cancelled += 1,
        other => panic!("the model knows no status {other:?}"),
    }
}
