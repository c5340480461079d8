//! The seed story on one job, with the clock as an argument (t = 0 … 13): A claims and stalls,
//! B cannot claim while A's lease is live, the lease expires, B claims and completes, A wakes
//! and every write it tries is refused, and the stored row still shows B's result; the attempt
//! ledger shows A's attempt lost with its three late writes counted, and B's completed.

use anyhow::Context as _;
use leasefence::{AnyStore, Fence, JobId, JobState, Now, Owner, Store as _, Ttl};
use serde_json::json;

use crate::cmd;
use crate::output::Out;

/// The lease duration of the story, in the story's seconds.
const TTL: f64 = 10.0;

/// Plays the story on `job` and prints a timeline. Returns how many steps broke their
/// expectation (0 when the contract held).
///
/// # Errors
/// Database errors; a refusal is never an error here, it is an expectation.
pub fn run(store: &AnyStore, job: &str, out: Out) -> anyhow::Result<usize> {
    let db = Db(store);
    let mut timeline = Timeline { out, broken: 0 };
    timeline.heading(format!(
        "The stalled-worker story on job {job} (clock given as t=..., ttl {TTL} s):"
    ));
    let ctx = |op: &str| format!("story: {op} {job}");

    let inserted = db.enqueue(job).with_context(|| ctx("enqueue"))?;
    timeline.check(0.0, "enqueue", "inserted", accepted(inserted, "inserted"));

    let a = db.claim(job, "A", 0.0, TTL).with_context(|| ctx("claim"))?;
    timeline.check(0.0, "A claims", "fence 1", fence(a));
    timeline.note(
        0.0,
        "A stalls (GC pause, swapped out, network partition) ...",
    );

    let early = db.claim(job, "B", 5.0, TTL).with_context(|| ctx("claim"))?;
    timeline.check(
        5.0,
        "B tries to claim (A's lease live)",
        "refused",
        fence(early),
    );

    let row = db.state(job).with_context(|| ctx("state"))?;
    let lease = match &row {
        Some(row) if row.is_leased_at(10.0) => format!("{}; still leased", describe(row)),
        Some(row) => format!("{}; expired", describe(row)),
        None => "unknown".to_owned(),
    };
    timeline.check(
        10.0,
        "A's lease expires (until = now)",
        "owner A, fence 1, until t=10, not done; expired",
        lease,
    );

    let b = db
        .claim(job, "B", 10.0, TTL)
        .with_context(|| ctx("claim"))?;
    timeline.check(10.0, "B claims", "fence 2", fence(b));

    let b_fence = b.unwrap_or(2);
    let stored = db
        .complete(job, "B", b_fence, 12.0, "B's result")
        .with_context(|| ctx("complete"))?;
    timeline.check(
        12.0,
        "B completes with \"B's result\"",
        "stored",
        accepted(stored, "stored"),
    );

    let a_fence = a.unwrap_or(1);
    let renewed = db
        .renew(job, "A", a_fence, 13.0, TTL)
        .with_context(|| ctx("renew"))?;
    timeline.check(
        13.0,
        &format!("A wakes: renew, fence {a_fence}"),
        "refused",
        accepted(renewed, "renewed"),
    );
    let overwrote = db
        .complete(job, "A", a_fence, 13.0, "A's stale result")
        .with_context(|| ctx("complete"))?;
    timeline.check(
        13.0,
        &format!("A: complete, fence {a_fence}"),
        "refused",
        accepted(overwrote, "stored"),
    );
    let released = db
        .release(job, "A", a_fence)
        .with_context(|| ctx("release"))?;
    timeline.check(
        13.0,
        &format!("A: release, fence {a_fence}"),
        "refused",
        accepted(released, "released"),
    );

    let row = db.state(job).with_context(|| ctx("state"))?;
    timeline.check(
        13.0,
        "read back",
        "owner B, fence 2, until t=20, done, result \"B's result\"",
        row.as_ref().map_or_else(|| "unknown".to_owned(), describe),
    );

    // The ledger says who held which fence and which late writes the fence stopped.
    let history = JobId::new(job)
        .and_then(|id| store.history(id))
        .with_context(|| ctx("history"))?;
    timeline.check(
        13.0,
        "the attempt ledger",
        "fence 1 A lost, 3 writes refused; fence 2 B completed",
        history
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), ledger),
    );
    Ok(timeline.broken)
}

/// The ledger in the story's words: per attempt, its fence, owner, outcome and refusals.
fn ledger(history: &leasefence::History) -> String {
    let attempts: Vec<String> = history
        .attempts
        .iter()
        .map(|a| {
            let outcome = a.outcome.map_or("open", leasefence::AttemptOutcome::as_str);
            match history.refused_under(a.fence) {
                0 => format!("fence {} {} {outcome}", a.fence, a.owner),
                1 => format!("fence {} {} {outcome}, 1 write refused", a.fence, a.owner),
                n => format!(
                    "fence {} {} {outcome}, {n} writes refused",
                    a.fence, a.owner
                ),
            }
        })
        .collect();
    attempts.join("; ")
}

/// The story's calls, with its plain arguments; the store must use the caller's `now`.
struct Db<'a>(&'a AnyStore);

impl Db<'_> {
    fn enqueue(&self, job: &str) -> leasefence::Result<bool> {
        self.0.enqueue(JobId::new(job)?)
    }

    fn state(&self, job: &str) -> leasefence::Result<Option<JobState>> {
        self.0.state(JobId::new(job)?)
    }

    fn claim(
        &self,
        job: &str,
        owner: &str,
        now: f64,
        ttl: f64,
    ) -> leasefence::Result<Option<Fence>> {
        let claimed = cmd::claim(
            self.0,
            JobId::new(job)?,
            Owner::new(owner)?,
            Now::new(now)?,
            Ttl::new(ttl)?,
        )?;
        Ok(claimed.map(|(fence, _)| fence))
    }

    fn renew(
        &self,
        job: &str,
        owner: &str,
        fence: Fence,
        now: f64,
        ttl: f64,
    ) -> leasefence::Result<bool> {
        let (now, ttl) = (Now::new(now)?, Ttl::new(ttl)?);
        self.0
            .renew(JobId::new(job)?, Owner::new(owner)?, fence, now, ttl)
    }

    fn complete(
        &self,
        job: &str,
        owner: &str,
        fence: Fence,
        now: f64,
        result: &str,
    ) -> leasefence::Result<bool> {
        let now = Now::new(now)?;
        self.0
            .complete(JobId::new(job)?, Owner::new(owner)?, fence, now, result)
    }

    fn release(&self, job: &str, owner: &str, fence: Fence) -> leasefence::Result<bool> {
        self.0.release(JobId::new(job)?, Owner::new(owner)?, fence)
    }
}

/// Prints the story's lines and counts broken expectations.
struct Timeline {
    out: Out,
    broken: usize,
}

impl Timeline {
    fn heading(&self, text: String) {
        self.out.line(
            text,
            json!({ "op": "demo", "phase": "story", "step": "start" }),
        );
    }

    fn note(&self, t: f64, step: &str) {
        self.out.line(
            format!("  t={t:<3} {step}"),
            json!({ "op": "demo", "phase": "story", "t": t, "step": step }),
        );
    }

    /// One step: `got` must equal `expected`.
    fn check(&mut self, t: f64, step: &str, expected: &str, got: String) {
        let ok = got == expected;
        let human = if ok {
            format!("  t={t:<3} {step:<36} ok      {got}")
        } else {
            self.broken += 1;
            format!("  t={t:<3} {step:<36} BROKEN  {got}, expected {expected}")
        };
        self.out.line(
            human,
            json!({ "op": "demo", "phase": "story", "t": t, "step": step,
                    "expected": expected, "got": got, "ok": ok }),
        );
    }
}

/// `what` when the store accepted the write, `refused` when the contract refused it.
fn accepted(ok: bool, what: &str) -> String {
    if ok {
        what.to_owned()
    } else {
        "refused".to_owned()
    }
}

/// `fence N` for a claim that got a fence, `refused` for one that did not.
fn fence(claimed: Option<i64>) -> String {
    claimed.map_or_else(|| "refused".to_owned(), |f| format!("fence {f}"))
}

/// The stored row in the story's words.
fn describe(row: &JobState) -> String {
    let mut text = format!(
        "owner {}, fence {}, until t={}, {}",
        row.owner.as_deref().unwrap_or("none"),
        row.fence,
        row.until,
        if row.done { "done" } else { "not done" },
    );
    if let Some(result) = &row.result {
        text.push_str(&format!(", result {result:?}"));
    }
    text
}
