//! Invariants checked on the model after every step (before → after). The store is compared
//! with the model after every step, so whatever holds for the model holds for the store too.

use leasefence::Lease;

use super::ops::Op;
use super::reference::{Model, Outcome};

/// The fences an outcome hands out, as `(id, fence)`.
fn handed_out(op: &Op, outcome: &Outcome) -> Vec<(String, i64)> {
    match (op, outcome) {
        (Op::Claim { id, .. }, Outcome::Fence(Some(f))) => vec![(id.clone(), *f)],
        (_, Outcome::Leases(leases)) => {
            leases.iter().map(|l| (l.job_id.clone(), l.fence)).collect()
        }
        _ => Vec::new(),
    }
}

/// The highest fence `model` ever let `id` reach: the stored one or the floor.
fn reached(model: &Model, id: &str) -> i64 {
    let stored = model.job(id).map_or(i64::MIN, |j| j.fence);
    stored.max(model.fence_floor.get(id).copied().unwrap_or(i64::MIN))
}

/// Whether the lease would still be accepted by renew/complete at `now`.
fn live(model: &Model, lease: &Lease, now: f64) -> bool {
    model.job(&lease.job_id).is_some_and(|j| {
        j.owner.as_deref() == Some(&*lease.owner)
            && j.fence == lease.fence
            && !j.done
            && j.until > now
    })
}

pub fn check(before: &Model, after: &Model, op: &Op, outcome: &Outcome) -> Result<(), String> {
    // A refused or invalid call changes nothing that is stored.
    let refused = matches!(
        outcome,
        Outcome::Invalid(_)
            | Outcome::Bool(false)
            | Outcome::Fence(None)
            | Outcome::Failed(None)
            | Outcome::Renewed(false, _)
            | Outcome::Count(0)
    ) || matches!(outcome, Outcome::Bools(b) if !b.contains(&true))
        || matches!(outcome, Outcome::Ticked(None))
        || matches!(outcome, Outcome::Ticked(Some(ids)) if ids.is_empty());
    // The ledger is the exception: a refused fenced write is counted there (the counts only
    // grow), and a refused retry still ends an expired last attempt as lost.
    if refused {
        let (b, a) = (before.stored(), after.stored());
        let ended_as_lost = b.ledger.len() == a.ledger.len()
            && b.ledger.iter().zip(&a.ledger).all(|(b, a)| {
                b == a
                    || (b.3.is_none()
                        && a.3.as_deref() == Some("lost")
                        && (&b.0, b.1, &b.2, &b.4) == (&a.0, a.1, &a.2, &a.4))
            });
        let counted = b.refusals.iter().all(|(id, fence, op, n)| {
            a.refusals
                .iter()
                .any(|(i, f, o, m)| (i, f, o) == (id, fence, op) && m >= n)
        });
        if (&b.jobs, &b.fence_floor, &b.fence_gate) != (&a.jobs, &a.fence_floor, &a.fence_gate)
            || !ended_as_lost
            || !counted
        {
            return Err(format!(
                "a refused call ({outcome:?}) changed the stored state"
            ));
        }
    }
    // A claim that found nothing ready changes nothing either, except that it buries the
    // jobs whose last attempt's lease had expired (finished as dead at their lease end).
    if matches!(outcome, Outcome::Leases(l) if l.is_empty()) {
        let buried = |b: &super::reference::Job, a: &super::reference::Job| {
            !b.done
                && b.max_attempts > 0
                && b.attempts >= b.max_attempts
                && a.done
                && a.outcome == Some("dead")
                && a.finished_at == Some(b.until)
                && a.error.is_some()
                && (a.owner.as_ref(), a.until, a.fence, a.attempts, &a.result)
                    == (b.owner.as_ref(), b.until, b.fence, b.attempts, &b.result)
        };
        let same_ids = before.jobs.len() == after.jobs.len()
            && before
                .jobs
                .iter()
                .zip(&after.jobs)
                .all(|(b, a)| b.id == a.id);
        let only_buried = same_ids
            && before
                .jobs
                .iter()
                .zip(&after.jobs)
                .all(|(b, a)| b == a || buried(b, a))
            && before.fence_floor == after.fence_floor
            && before.fence_gate == after.fence_gate;
        if !only_buried {
            return Err(format!(
                "a claim that found nothing ({outcome:?}) changed more than the buried jobs"
            ));
        }
    }

    // A job's fence only grows, across purge and re-enqueue too (the floor carries it).
    let ids = before
        .jobs
        .iter()
        .map(|j| j.id.as_str())
        .chain(before.fence_floor.keys().map(String::as_str));
    for id in ids {
        if reached(after, id) != i64::MIN && reached(after, id) < reached(before, id) {
            return Err(format!(
                "the fence of {id} went down: {} → {}",
                reached(before, id),
                reached(after, id)
            ));
        }
    }
    for job in &after.jobs {
        if before.job(&job.id).is_none() {
            let floor = before.fence_floor.get(&job.id).copied().unwrap_or(0);
            if job.fence != floor {
                return Err(format!(
                    "{} re-enqueued at fence {} instead of its floor {floor}",
                    job.id, job.fence
                ));
            }
        }
    }

    // No fence is issued twice for one id, and a new one is above every earlier one.
    for (id, fence) in handed_out(op, outcome) {
        if before.issued.contains(&(id.clone(), fence)) {
            return Err(format!("fence {fence} of {id} was issued twice"));
        }
        if let Some(highest) = before
            .issued
            .iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, f)| *f)
            .max()
            && fence <= highest
        {
            return Err(format!(
                "fence {fence} of {id} is not above the earlier {highest}"
            ));
        }
    }

    // A finished job never changes (until purge or delete removes it), except that the
    // operator's retry makes a dead or cancelled one ready again; a completed one, never.
    let retried = |id: &str| match op {
        Op::Retry { ids, .. } => ids.iter().any(|i| i == id),
        Op::RetryDead { .. } => true,
        _ => false,
    };
    // (Its ledger keeps counting the writes refused since.)
    let sans_refusals = |j: &super::reference::Job| super::reference::Job {
        refused: Default::default(),
        ..j.clone()
    };
    for done in before.jobs.iter().filter(|j| j.done) {
        if let Some(now) = after.job(&done.id)
            && sans_refusals(now) != sans_refusals(done)
            && !(retried(&done.id) && done.outcome != Some("completed") && !now.done)
        {
            return Err(format!(
                "finished job {} changed: {done:?} → {now:?}",
                done.id
            ));
        }
    }

    // At most one live lease per job among the leases handed out.
    for job in &after.jobs {
        let live = after
            .leases
            .iter()
            .filter(|l| l.job_id == job.id && live(after, l, after.clock))
            .count();
        if live > 1 {
            return Err(format!("{live} live leases on {}", job.id));
        }
    }

    // Release keeps the fence, clears the owner and the lease end.
    let released = match op {
        Op::Release { id, .. } => Some(id.as_str()),
        Op::ReleaseLease { lease } => Some(lease.job_id.as_str()),
        _ => None,
    };
    if let (Some(id), Outcome::Bool(true)) = (released, outcome) {
        let (was, is) = (before.job(id).unwrap(), after.job(id).unwrap());
        if is.fence != was.fence || is.owner.is_some() || is.until != 0.0 {
            return Err(format!(
                "release of {id} did not keep the fence: {was:?} → {is:?}"
            ));
        }
    }
    Ok(())
}
