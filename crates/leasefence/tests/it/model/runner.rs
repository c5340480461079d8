//! Drives a real store and the model with the same operation sequences: after every step the
//! return values must be equal, and so must the full stored state (read back through the
//! probe's own connection) and the model's.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::test_runner::{Config, TestCaseError, TestCaseResult, TestError, TestRunner};
use proptest_state_machine::ReferenceStateMachine;

use leasefence::{
    BatchSize, Error, JobId, NewJob, Now, Owner, Queue, Queues, Resource, Store, Ttl,
};

use super::census::Census;
use super::invariants;
use super::ops::{Machine, Op};
use super::reference::{Model, Outcome};
use crate::common::ClaimFence;
use crate::common::Probe;

/// What the checker drives: a store, an independent reader of what it stored, and a restart
/// (`init_db` / a new store on the same database: the migrations run again) that must change
/// nothing.
pub struct Subject<'a> {
    pub store: &'a dyn Store,
    pub probe: &'a dyn Probe,
    pub restart: &'a dyn Fn(),
}

/// Empties every table the model covers, between cases.
pub const RESET: &str = "DELETE FROM jobs; DELETE FROM fence_floor; DELETE FROM fence_gate; \
                         DELETE FROM queues; DELETE FROM attempts; DELETE FROM refusals; \
                         DELETE FROM schedules";

/// One generated case: the initial model, the operations, and proptest-state-machine's counter
/// of the operations that ran (it lets shrinking drop the ones after a failure at once).
pub type Case = (Model, Vec<Op>, Option<Arc<AtomicUsize>>);

/// Calls the store as a caller would: the arguments go through the validated types first, so
/// a bad one is refused before the store sees it.
fn call(store: &dyn Store, op: &Op) -> Result<Outcome, Error> {
    Ok(match op {
        Op::Enqueue { id } => Outcome::Bool(store.enqueue(JobId::new(id)?)?),
        Op::EnqueueMany { jobs } => {
            let mut built = Vec::new();
            for spec in jobs {
                let mut job = NewJob::new(spec.id.clone())?
                    .not_before(spec.not_before)?
                    .priority(spec.priority)
                    .max_attempts(spec.max_attempts)
                    .queue(spec.queue.clone())?;
                if let Some(payload) = &spec.payload {
                    job = job.payload(payload.clone());
                }
                if let Some(kind) = &spec.kind {
                    job = job.kind(kind.clone())?;
                }
                if let Some(key) = &spec.unique_key {
                    job = job.unique_key(key.clone())?;
                }
                built.push(job);
            }
            Outcome::Enqueued(store.enqueue_jobs(&built)?)
        }
        Op::State { id } => Outcome::State(store.state(JobId::new(id)?)?),
        Op::Claim {
            id,
            owner,
            now,
            ttl,
        } => Outcome::Fence(store.claim_fence(
            JobId::new(id)?,
            Owner::new(owner)?,
            Now::new(*now)?,
            Ttl::new(*ttl)?,
        )?),
        Op::Renew {
            id,
            owner,
            fence,
            now,
            ttl,
        } => Outcome::Bool(store.renew(
            JobId::new(id)?,
            Owner::new(owner)?,
            *fence,
            Now::new(*now)?,
            Ttl::new(*ttl)?,
        )?),
        Op::Complete {
            id,
            owner,
            fence,
            now,
            result,
        } => Outcome::Bool(store.complete(
            JobId::new(id)?,
            Owner::new(owner)?,
            *fence,
            Now::new(*now)?,
            result,
        )?),
        Op::Release { id, owner, fence } => {
            Outcome::Bool(store.release(JobId::new(id)?, Owner::new(owner)?, *fence)?)
        }
        Op::ClaimBatch {
            owner,
            now,
            ttl,
            n,
            next,
            queues,
        } => {
            let (owner, now, ttl) = (Owner::new(owner)?, Now::new(*now)?, Ttl::new(*ttl)?);
            // Without queues, the methods that take every queue; with, the `_in` ones.
            let Some(names) = queues else {
                return Ok(Outcome::Leases(if *next {
                    store.claim_next(owner, now, ttl)?.into_iter().collect()
                } else {
                    store.claim_batch(owner, now, ttl, BatchSize::new(*n)?)?
                }));
            };
            let queues = Queues::only(names.iter().cloned())?;
            Outcome::Leases(if *next {
                store
                    .claim_next_in(&queues, owner, now, ttl)?
                    .into_iter()
                    .collect()
            } else {
                store.claim_batch_in(&queues, owner, now, ttl, BatchSize::new(*n)?)?
            })
        }
        Op::Pause { queue, resume } => {
            let queue = Queue::new(queue.clone())?;
            Outcome::Bool(if *resume {
                store.resume(&queue)?
            } else {
                store.pause(&queue)?
            })
        }
        Op::Queues { now } => Outcome::Queues(store.queues(Now::new(*now)?)?),
        Op::Fail {
            lease,
            now,
            error,
            retry_at,
        } => {
            let now = Now::new(*now)?;
            let retry_at = retry_at.map(Now::new).transpose()?;
            Outcome::Failed(store.fail(lease, now, error, retry_at)?)
        }
        Op::RenewLease { lease, now, ttl } => {
            let mut lease = lease.clone();
            let renewed = store.renew_lease(&mut lease, Now::new(*now)?, Ttl::new(*ttl)?)?;
            Outcome::Renewed(renewed, lease.until)
        }
        Op::CompleteLease { lease, now, result } => {
            Outcome::Bool(store.complete_lease(lease, Now::new(*now)?, result)?)
        }
        Op::ReleaseLease { lease } => Outcome::Bool(store.release_lease(lease)?),
        Op::Cancel { id, now } => Outcome::Bool(store.cancel(JobId::new(id)?, Now::new(*now)?)?),
        Op::Retry { ids, now } => {
            let ids = ids
                .iter()
                .map(|id| JobId::new(id))
                .collect::<Result<Vec<_>, _>>()?;
            Outcome::Bools(store.retry(&ids, Now::new(*now)?)?)
        }
        Op::RetryDead { now } => Outcome::Count(store.retry_dead(Now::new(*now)?)?),
        Op::Delete { ids } => {
            let ids = ids
                .iter()
                .map(|id| JobId::new(id))
                .collect::<Result<Vec<_>, _>>()?;
            Outcome::Bools(store.delete(&ids)?)
        }
        Op::Purge { before } => Outcome::Count(store.purge(Now::new(*before)?)?),
        Op::List { now, status, limit } => {
            let mut jobs = store.list(Now::new(*now)?, *status, None, *limit)?;
            for job in &mut jobs {
                // Recorded by the host's (or server's) clock: present, and not the model's.
                assert!(job.enqueued_at.is_some_and(f64::is_finite), "{job:?}");
                job.enqueued_at = None;
            }
            Outcome::List(jobs)
        }
        Op::Stats { now } => Outcome::Stats(store.stats(Now::new(*now)?)?),
        Op::Admit { resource, fence } => {
            Outcome::Bool(store.admit(Resource::new(resource)?, *fence)?)
        }
        Op::Tick { lease, now } => {
            Outcome::Ticked(leasefence::tick(store, lease, Now::new(*now)?)?.map(|t| {
                assert!(
                    t.passed.is_empty(),
                    "no run of `beat` is known before its tick"
                );
                t.enqueued
            }))
        }
        Op::Restart => unreachable!("run_case restarts"),
    })
}

/// The store's answer as an `Outcome`: an invalid-argument error becomes `Invalid(argument)`
/// (its message must name the argument); any other error fails the case.
fn perform(store: &dyn Store, op: &Op) -> Result<Outcome, TestCaseError> {
    match call(store, op) {
        Ok(outcome) => Ok(outcome),
        Err(e @ Error::InvalidArgument { .. }) => {
            let argument = e.argument().expect("an invalid argument names it");
            if !e.to_string().contains(&format!("`{argument}`")) {
                return Err(TestCaseError::fail(format!(
                    "{op:?}: the message does not name `{argument}`: {e}"
                )));
            }
            Ok(Outcome::Invalid(argument))
        }
        Err(e) => Err(TestCaseError::fail(format!(
            "{op:?}: unexpected error {e:?}"
        ))),
    }
}

/// Runs one case: the store must start empty, then agree with the model after every step.
pub fn run_case(subject: &Subject<'_>, census: &Census, case: Case) -> TestCaseResult {
    let (mut model, ops, seen) = case;
    let (store, probe) = (subject.store, subject.probe);
    probe.exec(RESET);
    if probe.stored() != model.stored() {
        return Err(TestCaseError::fail("the store did not start empty"));
    }
    // Every case has one schedule, a run every second from 0 (the model's `schedule_last`).
    let beat = leasefence::Schedule::new(super::reference::BEAT, "* * * * * *").expect("valid");
    store
        .add_schedule(&beat, Now::new(0.0).expect("finite"))
        .map_err(|e| TestCaseError::fail(format!("add_schedule: {e}")))?;
    for (step, op) in ops.iter().enumerate() {
        if let Some(seen) = &seen {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        let before = model.clone();
        let expected = model.apply(op);
        census.count(&before, op, &expected);
        invariants::check(&before, &model, op, &expected).map_err(|broken| {
            TestCaseError::fail(format!(
                "step {step} {op:?}: the model broke an invariant: {broken}"
            ))
        })?;
        let actual = match op {
            Op::Restart => {
                (subject.restart)();
                Outcome::Restarted
            }
            op => perform(store, op)?,
        };
        if actual != expected {
            return Err(TestCaseError::fail(format!(
                "step {step} {op:?}:\n  the store returned {actual:?}\n  the model expects  {expected:?}"
            )));
        }
        let (stored, want) = (probe.stored(), model.stored());
        if stored != want {
            return Err(TestCaseError::fail(format!(
                "step {step} {op:?} (returned {actual:?}): the stored state differs\n  \
                 stored: {stored:?}\n  model:  {want:?}"
            )));
        }
    }
    Ok(())
}

/// Runs `config.cases` random sequences of 1..=`steps` operations against `store` (its state
/// read through `probe`), shrinking the first failure.
pub fn check(
    subject: &Subject<'_>,
    census: &Census,
    config: Config,
    steps: usize,
) -> Result<(), Box<TestError<Case>>> {
    check_with(TestRunner::new(config), subject, census, steps)
}

/// `check` with a runner of the caller's (e.g. with a deterministic random number generator).
pub fn check_with(
    mut runner: TestRunner,
    subject: &Subject<'_>,
    census: &Census,
    steps: usize,
) -> Result<(), Box<TestError<Case>>> {
    runner
        .run(&Machine::sequential_strategy(1..=steps), |case| {
            run_case(subject, census, case)
        })
        .map_err(Box::new)
}

/// The shrunk failing sequence, one operation a line, for the panic message.
pub fn describe(error: &TestError<Case>) -> String {
    match error {
        TestError::Abort(why) => format!("aborted: {why}"),
        TestError::Fail(why, (_, ops, _)) => {
            let mut text = format!("{why}\nminimal failing sequence ({} ops):\n", ops.len());
            for (i, op) in ops.iter().enumerate() {
                let _ = writeln!(text, "  {i:>2}: {op:?}");
            }
            text
        }
    }
}
