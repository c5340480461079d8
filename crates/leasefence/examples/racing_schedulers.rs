//! Eight schedulers racing for 10,000 simulated slots (issue 14's target: 0 duplicate runs, 0
//! missed slots), with stalls: every `STALL_EVERY` slots the scheduler holding the role
//! freezes past its lease, another takes the role over, and the frozen one wakes up and tries
//! its late enqueue — which the fence must refuse.
//!
//! ```sh
//! cargo run --release -p leasefence --features postgres,cron --example racing_schedulers
//! ```
//!
//! With `LEASEFENCE_TEST_PG` set the PostgreSQL part runs too, in a schema of its own that is
//! dropped afterwards. `SLOTS=1000` runs a shorter race.
//!
//! The eight threads each own a store (their own connection) and a `Scheduler`, and step in
//! lockstep on one simulated clock: a schedule of one run a minute (`* * * * *`), two steps a
//! minute, a lease of 60 s. Every thread steps at the same reading at once, so the claims of
//! the role really race. Afterwards the runs are read back: one job per slot, `beat@<slot>`,
//! and every slot's job present.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use leasefence::{
    Lease, Now, Schedule, Scheduler, SlotRun, SqliteOptions, Step, Store, Ttl, due_runs, run_id,
};

const THREADS: usize = 8;
const STALL_EVERY: i64 = 500;
/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200;
const STEP: i64 = 30;
const TTL: f64 = 60.0;

/// What one race observed.
#[derive(Debug, Default)]
struct Tally {
    /// Run ids the schedulers reported as enqueued, in the order they did.
    enqueued: Vec<String>,
    /// Late enqueues of stalled schedulers, refused by the fence.
    refused_late: u64,
    /// Late enqueues that were accepted (must stay 0).
    accepted_late: u64,
    /// Missed slots the ticks reported as skipped.
    skipped: u64,
    /// Role takeovers (a step that took the role from nobody or an expired holder).
    takeovers: u64,
}

fn race<S: Store + Send + 'static>(open: impl Fn() -> S, slots: i64) -> (Tally, f64) {
    let setup = open();
    setup
        .add_schedule(
            &Schedule::new("beat", "* * * * *").unwrap(),
            Now::new(T0 as f64).unwrap(),
        )
        .unwrap();
    let steps = slots * 60 / STEP;
    let barrier = Arc::new(Barrier::new(THREADS));
    let tally = Arc::new(Mutex::new(Tally::default()));
    // The thread that is frozen, and until which step.
    let frozen: Arc<Mutex<Option<(usize, i64)>>> = Arc::new(Mutex::new(None));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (barrier, tally, frozen) = (barrier.clone(), tally.clone(), frozen.clone());
            let store = open();
            scope.spawn(move || {
                let owner = format!("scheduler-{t}");
                let mut scheduler = Scheduler::new(&store, &owner, Ttl::new(TTL).unwrap()).unwrap();
                let mut stale: Option<(Lease, Vec<SlotRun>)> = None;
                for step in 1..=steps {
                    let at = T0 + step * STEP;
                    let now = Now::new(at as f64).unwrap();
                    barrier.wait();
                    let me_frozen = matches!(*frozen.lock().unwrap(), Some((f, until)) if f == t && step < until);
                    if !me_frozen && let Some((lease, runs)) = stale.take() {
                        // Woken up: the enqueue the frozen scheduler had prepared for now.
                        let late = store.enqueue_slots(&lease, now, &runs).unwrap();
                        let mut tally = tally.lock().unwrap();
                        match late {
                            None => tally.refused_late += 1,
                            Some(_) => tally.accepted_late += 1,
                        }
                    }
                    if !me_frozen {
                        let held_before = scheduler.lease().map(|l| l.fence);
                        match scheduler.step(now) {
                            Ok(Step::Ticked(done)) => {
                                let mut tally = tally.lock().unwrap();
                                if held_before != scheduler.lease().map(|l| l.fence) {
                                    tally.takeovers += 1;
                                }
                                tally.skipped += done.skipped;
                                tally.enqueued.extend(done.enqueued);
                            }
                            Ok(_) => {}
                            Err(e) if e.is_retryable() => {}
                            Err(e) => panic!("{owner}: {e}"),
                        }
                        // Every STALL_EVERY slots, the holder freezes for three steps (90 s,
                        // past its 60 s lease) right after it ticked.
                        // It has prepared the run due when it wakes (two minutes on).
                        if step % (STALL_EVERY * 60 / STEP) == 0
                            && let Some(lease) = scheduler.lease()
                        {
                            let wake = Now::new((at + 4 * STEP) as f64).unwrap();
                            let due = due_runs(&store.schedules().unwrap(), wake).unwrap();
                            stale = Some((lease.clone(), due.runs));
                            *frozen.lock().unwrap() = Some((t, step + 4));
                        }
                    }
                    barrier.wait();
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let tally = Arc::try_unwrap(tally).unwrap().into_inner().unwrap();
    (tally, seconds)
}

fn report(backend: &str, store: &dyn Store, slots: i64, tally: &Tally, seconds: f64) -> bool {
    let expected: BTreeSet<String> = (1..=slots)
        .map(|k| run_id("beat", T0 + 60 * k).unwrap())
        .collect();
    let reported: BTreeSet<String> = tally.enqueued.iter().cloned().collect();
    let duplicates = tally.enqueued.len() - reported.len();
    let stored: BTreeSet<String> = store
        .list(Now::new(0.0).unwrap(), None, None, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|j| j.id().to_owned())
        .filter(|id| id.starts_with("beat@"))
        .collect();
    let missed = expected.difference(&stored).count();
    let extra = stored.difference(&expected).count();
    let history = store
        .history(leasefence::JobId::new(leasefence::SCHEDULER_JOB).unwrap())
        .unwrap()
        .unwrap();
    println!(
        "{backend:<10} {THREADS} schedulers, {slots} slots in {seconds:.1} s: {} runs stored, \
         {duplicates} duplicate, {missed} missed, {extra} unexpected; {} stalls: {} late \
         enqueues refused, {} accepted; {} role takeovers, {} fences, {} refusals in the \
         scheduler's ledger, {} slots skipped",
        stored.len(),
        (slots - 3) / STALL_EVERY,
        tally.refused_late,
        tally.accepted_late,
        tally.takeovers,
        history.attempts.len(),
        history.refused(),
        tally.skipped,
    );
    println!(
        "{{\"backend\":\"{backend}\",\"threads\":{THREADS},\"slots\":{slots},\"seconds\":{seconds:.3},\
         \"stored\":{},\"duplicates\":{duplicates},\"missed\":{missed},\"unexpected\":{extra},\
         \"late_refused\":{},\"late_accepted\":{},\"takeovers\":{},\"skipped\":{}}}",
        stored.len(),
        tally.refused_late,
        tally.accepted_late,
        tally.takeovers,
        tally.skipped
    );
    duplicates == 0 && missed == 0 && extra == 0 && tally.accepted_late == 0
}

fn main() {
    let slots: i64 = std::env::var("SLOTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.db");
    let (tally, seconds) = race(|| SqliteOptions::new().open(&path).unwrap(), slots);
    let mut ok = report(
        "sqlite",
        &SqliteOptions::new().open(&path).unwrap(),
        slots,
        &tally,
        seconds,
    );

    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("LEASEFENCE_TEST_PG") {
        use leasefence::PgOptions;
        let schema = format!("race_{}", std::process::id());
        let options = PgOptions::new().schema(schema.as_str()).pool_size(1);
        let (tally, seconds) = race(|| options.open(&url).unwrap(), slots);
        let store = options.open(&url).unwrap();
        ok &= report("postgresql", &store, slots, &tally, seconds);
        let mut client =
            leasefence::postgres::Client::connect(&url, leasefence::postgres::NoTls).unwrap();
        client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .unwrap();
    }
    if !ok {
        eprintln!("FAILED: a slot was enqueued twice or missed, or a late enqueue was accepted");
        std::process::exit(1);
    }
}
