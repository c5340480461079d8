//! One worker thread of the stress run: claim, maybe stall past the lease and try stale writes,
//! complete; until every job is finished.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use leasefence::{AnyStore, Fence, JobId, Owner, Store as _};

use super::workload::{Ack, Counts, Item, Shared, SplitMix64, Tally};
use crate::cmd;
use crate::ctx::Purpose;

/// How often a call that met a busy database is tried in all before the run gives up.
const BUSY_ATTEMPTS: u32 = 8;

/// Runs worker number `w` on a store of its own until every job is finished or the run aborts.
///
/// # Errors
/// Opening its store, database errors (busy past [`BUSY_ATTEMPTS`] tries included), or a run
/// that stopped making progress.
pub fn run(shared: &Shared<'_>, w: usize, seed: u64) -> anyhow::Result<Tally> {
    let name = format!("worker-{w}");
    let owner = Owner::new(&name)?;
    let store = (shared.open)(Purpose::Worker)
        .with_context(|| format!("{name}: opening its connection"))?;
    let mut rng = SplitMix64(seed);
    let mut tally = Tally::default();
    let counts = &mut tally.counts;
    let ttl = shared.config.ttl;

    while !shared.aborted() {
        let Some(item) = shared.pop() else {
            if shared.all_finished() {
                break;
            }
            shared.idle()?;
            continue;
        };
        if item.not_before > shared.seconds() {
            shared.push(item);
            shared.idle()?;
            continue;
        }
        let id = &shared.ids[item.job];
        let job = JobId::new(id)?;

        let started = Instant::now();
        let mut claimed_at = shared.now()?;
        let claimed = retry(counts, || {
            claimed_at = shared.now()?;
            cmd::claim(&store, job, owner, claimed_at, ttl)
        })
        .with_context(|| format!("{name}: claim {id}"))?;
        let Some((fence, until)) = claimed else {
            let row = retry(counts, || store.state(job))
                .with_context(|| format!("{name}: state {id}"))?;
            match row {
                Some(row) if !row.done => {
                    if row.until > claimed_at.seconds() {
                        counts.leased_refused += 1;
                    } else {
                        counts.claimable_refused += 1;
                    }
                    shared.push(Item {
                        job: item.job,
                        not_before: row.until,
                        leased_until: row.until,
                    });
                }
                // Done without this worker's complete: the verdict reports it.
                _ => shared.finished(),
            }
            continue;
        };
        if claimed_at.seconds() < item.leased_until {
            counts.live_claimed += 1;
        }

        if fence == 1 && rng.chance(shared.config.stall_rate) {
            counts.stalls += 1;
            if let Some(ack) = stall(shared, &store, (item.job, fence, until), &name, counts)? {
                tally.acks.push((item.job, ack));
            }
            continue;
        }

        let result = format!("result of {id} by {name} under fence {fence}");
        let mut completed_at = shared.now()?;
        let stored = retry(counts, || {
            completed_at = shared.now()?;
            store.complete(job, owner, fence, completed_at, &result)
        })
        .with_context(|| format!("{name}: complete {id}"))?;
        counts.slowest = counts.slowest.max(started.elapsed());
        if stored {
            let ack = Ack {
                owner: name.clone(),
                fence,
                result,
            };
            tally.acks.push((item.job, ack));
            shared.finished();
        } else {
            if completed_at.seconds() < until {
                counts.live_refused += 1;
            } else {
                // The lease ran out before the complete got the write lock.
                counts.late_refused += 1;
            }
            // Nobody else can hold the job (it was not queued): queue it again.
            shared.push(Item::ready(item.job));
        }
    }
    Ok(tally)
}

/// A worker stalls after its claim of `job` under `fence` (lease until `until`): it puts the
/// job back for others, sleeps past its lease, then tries to renew and complete with the old
/// fence. Both must be refused; returns what the complete stored if it was not.
///
/// Stalls alternate between two timings. In one, the job may be tried from half a lease
/// before it expires (those early claims must be refused) and is usually taken over before the
/// stalled worker wakes. In the other, nobody may try it until after the stalled worker woke,
/// so its stale writes meet an expired lease still held under its own owner and fence: only
/// `until > now` refuses them.
fn stall(
    shared: &Shared<'_>,
    store: &AnyStore,
    (job, fence, until): (usize, Fence, f64),
    name: &str,
    counts: &mut Counts,
) -> anyhow::Result<Option<Ack>> {
    let ttl = shared.config.ttl;
    let id = &shared.ids[job];
    let job_id = JobId::new(id)?;
    let owner = Owner::new(name)?;
    let wake = until + (0.1 * ttl.seconds()).max(0.005);
    let not_before = if shared.next_stall().is_multiple_of(2) {
        until - 0.5 * ttl.seconds()
    } else {
        wake + 0.5 * ttl.seconds()
    };
    shared.push(Item {
        job,
        not_before,
        leased_until: until,
    });
    while shared.seconds() < wake {
        std::thread::sleep(Duration::from_secs_f64(wake - shared.seconds()));
    }

    let renewed = retry(counts, || {
        store.renew(job_id, owner, fence, shared.now()?, ttl)
    })
    .with_context(|| format!("{name}: stale renew {id}"))?;
    let stale = format!("STALE result of {id} by {name} under fence {fence}");
    let stored = retry(counts, || {
        store.complete(job_id, owner, fence, shared.now()?, &stale)
    })
    .with_context(|| format!("{name}: stale complete {id}"))?;
    for accepted in [renewed, stored] {
        if accepted {
            counts.stale_accepted += 1;
        } else {
            counts.stale_refused += 1;
        }
    }
    Ok(stored.then(|| Ack {
        owner: name.to_owned(),
        fence,
        result: stale,
    }))
}

/// Calls `call` again while it fails with an error the library classes as retryable
/// ([`leasefence::Error::is_retryable`]: a busy database), up to [`BUSY_ATTEMPTS`] tries in
/// all. The library's own busy timeout has already waited inside each try.
fn retry<T>(
    counts: &mut Counts,
    mut call: impl FnMut() -> leasefence::Result<T>,
) -> leasefence::Result<T> {
    let mut attempt = 1;
    loop {
        match call() {
            Err(e) if e.is_retryable() && attempt < BUSY_ATTEMPTS => {
                counts.busy_retries += 1;
                std::thread::sleep(Duration::from_millis(1 << attempt));
                attempt += 1;
            }
            other => return other,
        }
    }
}
