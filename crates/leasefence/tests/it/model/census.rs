//! What a run exercised: every step is sorted into situations (a fence handed out, a renew
//! refused exactly at `now == until`, a purged id enqueued again, …) and counted. A long enough
//! run must have met every situation of `REQUIRED`, so the generator cannot quietly stop
//! reaching the interesting states.

use std::collections::BTreeMap;
use std::sync::Mutex;

use leasefence::{Failed, Status};

use super::ops::Op;
use super::reference::{Model, Outcome};

/// The situations a default-sized run must meet.
pub const REQUIRED: &[&str] = &[
    "enqueue: a purged id again, from its floor",
    "claim: handed out a fence",
    "claim: handed out at now == until",
    "claim: refused, still leased",
    "renew: extended",
    "renew: refused at now == until",
    "renew: refused, stale fence",
    "complete: stored",
    "complete: refused at now == until",
    "complete: refused, already done",
    "release: released",
    "release: refused",
    "claim_batch: several leases",
    "claim_batch: nothing ready",
    "fail: retrying",
    "fail: dead",
    "fail: refused",
    "cancel: cancelled",
    "purge: deleted",
    "retry: retried",
    "retry: refused",
    "retry_dead: retried",
    "delete: deleted",
    "list: listed jobs",
    "stats: counted jobs",
    "admit: admitted",
    "admit: refused",
    "tick: enqueued a run",
    "tick: refused by the fence",
    "tick: nothing due",
    "invalid: job_id",
    "invalid: owner",
    "invalid: now",
    "invalid: ttl",
    "invalid: n",
    "invalid: resource",
    "invalid: not_before",
    "invalid: queue",
    "invalid: queues",
    "invalid: scheduler",
    "enqueue_jobs: a duplicate of the key's holder",
    "claim_batch: from named queues",
    "claim_batch: a paused queue's job left",
    "pause: paused",
    "pause: resumed",
    "queues: listed",
    "time went backward",
    "restart",
    "status: ready",
    "status: scheduled",
    "status: leased",
    "status: expired",
    "status: retrying",
    "status: done",
    "status: dead",
    "status: cancelled",
];

#[derive(Default)]
pub struct Census(Mutex<BTreeMap<&'static str, u64>>);

impl Census {
    /// Counts the situations of one step (`before` is the model before it).
    pub fn count(&self, before: &Model, op: &Op, outcome: &Outcome) {
        let mut counts = self.0.lock().unwrap();
        for label in situations(before, op, outcome) {
            *counts.entry(label).or_default() += 1;
        }
    }

    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.0.lock().unwrap().clone()
    }

    /// The situations of `REQUIRED` that never came up.
    pub fn missing(&self) -> Vec<&'static str> {
        let counts = self.0.lock().unwrap();
        REQUIRED
            .iter()
            .copied()
            .filter(|label| !counts.contains_key(label))
            .collect()
    }
}

/// Whether the job's lease (any holder) ends exactly at `now`.
fn ends_at(before: &Model, id: &str, now: f64) -> bool {
    before
        .job(id)
        .is_some_and(|j| !j.done && j.until == now && j.owner.is_some())
}

/// Whether `owner` and `fence` are the job's current ones (so only the clock can refuse).
fn holds(before: &Model, id: &str, owner: &str, fence: i64) -> bool {
    before
        .job(id)
        .is_some_and(|j| j.owner.as_deref() == Some(owner) && j.fence == fence)
}

fn situations(before: &Model, op: &Op, outcome: &Outcome) -> Vec<&'static str> {
    let mut found = Vec::new();
    let now = match op {
        Op::Claim { now, .. }
        | Op::Renew { now, .. }
        | Op::Complete { now, .. }
        | Op::ClaimBatch { now, .. }
        | Op::Fail { now, .. }
        | Op::RenewLease { now, .. }
        | Op::CompleteLease { now, .. }
        | Op::Cancel { now, .. }
        | Op::Retry { now, .. }
        | Op::RetryDead { now }
        | Op::List { now, .. }
        | Op::Stats { now }
        | Op::Tick { now, .. } => Some(*now),
        _ => None,
    };
    if now.is_some_and(|t| t < before.clock) {
        found.push("time went backward");
    }
    if let Outcome::Invalid(argument) = outcome {
        found.push(match *argument {
            "job_id" => "invalid: job_id",
            "owner" => "invalid: owner",
            "now" => "invalid: now",
            "ttl" => "invalid: ttl",
            "n" => "invalid: n",
            "resource" => "invalid: resource",
            "not_before" => "invalid: not_before",
            "queue" => "invalid: queue",
            "queues" => "invalid: queues",
            "scheduler" => "invalid: scheduler",
            _ => "invalid: another argument",
        });
        return found;
    }
    let boundary = |id: &str| now.is_some_and(|t| ends_at(before, id, t));
    match (op, outcome) {
        (Op::Enqueue { id }, Outcome::Bool(true)) if before.fence_floor.contains_key(id) => {
            found.push("enqueue: a purged id again, from its floor")
        }
        (Op::EnqueueMany { jobs }, Outcome::Enqueued(outcomes)) => {
            let inserted = |(j, o): &(&super::ops::Spec, &leasefence::Enqueued)| {
                **o == leasefence::Enqueued::Inserted && before.fence_floor.contains_key(&j.id)
            };
            let pairs: Vec<_> = jobs.iter().zip(outcomes).collect();
            if pairs.iter().any(inserted) {
                found.push("enqueue: a purged id again, from its floor");
            }
            if outcomes
                .iter()
                .any(|o| matches!(o, leasefence::Enqueued::Duplicate { .. }))
            {
                found.push("enqueue_jobs: a duplicate of the key's holder");
            }
            let freed = |(j, o): &(&super::ops::Spec, &leasefence::Enqueued)| {
                **o == leasefence::Enqueued::Inserted
                    && j.unique_key.is_some()
                    && before
                        .jobs
                        .iter()
                        .any(|b| b.done && b.queue == j.queue && b.unique_key == j.unique_key)
            };
            if pairs.iter().any(freed) {
                found.push("enqueue_jobs: a key freed by its finished holder, taken again");
            }
        }
        (Op::Claim { id, .. }, Outcome::Fence(Some(_))) => {
            found.push("claim: handed out a fence");
            if boundary(id) {
                found.push("claim: handed out at now == until");
            }
        }
        (Op::Claim { id, now, .. }, Outcome::Fence(None))
            if before.job(id).is_some_and(|j| !j.done && j.until > *now) =>
        {
            found.push("claim: refused, still leased")
        }
        (
            Op::Renew { .. } | Op::RenewLease { .. },
            Outcome::Bool(true) | Outcome::Renewed(true, _),
        ) => found.push("renew: extended"),
        (
            Op::Renew {
                id, owner, fence, ..
            },
            Outcome::Bool(false),
        ) => {
            if boundary(id) && holds(before, id, owner, *fence) {
                found.push("renew: refused at now == until");
            }
            if before.job(id).is_some_and(|j| j.fence > *fence) {
                found.push("renew: refused, stale fence");
            }
        }
        (Op::Complete { .. } | Op::CompleteLease { .. }, Outcome::Bool(true)) => {
            found.push("complete: stored")
        }
        (
            Op::Complete {
                id, owner, fence, ..
            },
            Outcome::Bool(false),
        ) => {
            if boundary(id) && holds(before, id, owner, *fence) {
                found.push("complete: refused at now == until");
            }
            if before.job(id).is_some_and(|j| j.done) {
                found.push("complete: refused, already done");
            }
        }
        (Op::Release { .. } | Op::ReleaseLease { .. }, Outcome::Bool(released)) => {
            found.push(if *released {
                "release: released"
            } else {
                "release: refused"
            })
        }
        (Op::ClaimBatch { queues, now, .. }, Outcome::Leases(leases)) => {
            found.push(match leases.len() {
                0 => "claim_batch: nothing ready",
                1 => "claim_batch: one lease",
                _ => "claim_batch: several leases",
            });
            if queues.is_some() && !leases.is_empty() {
                found.push("claim_batch: from named queues");
            }
            let paused_ready = before.jobs.iter().any(|j| {
                before.paused.get(&j.queue) == Some(&true)
                    && !j.done
                    && j.until <= *now
                    && j.not_before <= *now
            });
            if paused_ready {
                found.push("claim_batch: a paused queue's job left");
            }
        }
        (Op::Pause { resume, .. }, Outcome::Bool(true)) => found.push(if *resume {
            "pause: resumed"
        } else {
            "pause: paused"
        }),
        (Op::Queues { .. }, Outcome::Queues(queues)) if !queues.is_empty() => {
            found.push("queues: listed")
        }
        (Op::Fail { .. }, Outcome::Failed(failed)) => found.push(match failed {
            Some(Failed::Retrying { .. }) => "fail: retrying",
            Some(Failed::Dead) => "fail: dead",
            None => "fail: refused",
        }),
        (Op::Cancel { .. }, Outcome::Bool(true)) => found.push("cancel: cancelled"),
        (Op::Retry { .. }, Outcome::Bools(b)) if b.contains(&true) => found.push("retry: retried"),
        (Op::Retry { .. }, Outcome::Bools(b)) if !b.is_empty() => found.push("retry: refused"),
        (Op::RetryDead { .. }, Outcome::Count(n)) if *n > 0 => found.push("retry_dead: retried"),
        (Op::Delete { .. }, Outcome::Bools(b)) if b.contains(&true) => {
            found.push("delete: deleted")
        }
        (Op::Restart, _) => found.push("restart"),
        (Op::Tick { .. }, Outcome::Ticked(Some(ids))) => found.push(if ids.is_empty() {
            "tick: nothing due"
        } else {
            "tick: enqueued a run"
        }),
        (Op::Tick { .. }, Outcome::Ticked(None)) => found.push("tick: refused by the fence"),
        (Op::Purge { .. }, Outcome::Count(n)) if *n > 0 => found.push("purge: deleted"),
        (Op::List { .. }, Outcome::List(jobs)) if !jobs.is_empty() => {
            found.push("list: listed jobs")
        }
        (Op::Stats { .. }, Outcome::Stats(stats)) if stats.total() > 0 => {
            found.push("stats: counted jobs");
            for status in Status::ALL.into_iter().filter(|s| stats.get(*s) > 0) {
                found.push(match status {
                    Status::Ready => "status: ready",
                    Status::Scheduled => "status: scheduled",
                    Status::Leased => "status: leased",
                    Status::Expired => "status: expired",
                    Status::Retrying => "status: retrying",
                    Status::Done => "status: done",
                    Status::Dead => "status: dead",
                    Status::Cancelled => "status: cancelled",
                    _ => "status: another",
                });
            }
        }
        (Op::Admit { .. }, Outcome::Bool(admitted)) => found.push(if *admitted {
            "admit: admitted"
        } else {
            "admit: refused"
        }),
        _ => {}
    }
    found
}
