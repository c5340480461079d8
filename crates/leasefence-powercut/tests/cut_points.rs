//! Power cuts at **every** point of a fixed workload (issue 18), as SQLite's own crash tests
//! sweep them: one thread runs the same twelve calls — enqueue, claim, renew, complete,
//! claim_next, release, a second owner's claim, claim_batch, complete_batch, fail, claim_next,
//! complete — and closes the store; a clean run counts its tracked I/O calls (writes, truncates,
//! syncs, the close's checkpoint included), then the workload runs once per call with the power
//! cut on exactly that call, dropping, tearing and reordering every write not yet synced.
//!
//! After each reboot, read back through SQLite's own `unix` VFS: the file is intact and the
//! jobs hold **exactly** what the clean run held after some prefix of the calls. At
//! `synchronous = FULL` (the default) that prefix is every acknowledged call, or those and the
//! call the cut fell on (its commit may have reached the disk before the call failed); a store
//! reopened on the file then hands out, for every unfinished job, a fence above every fence a
//! claim acknowledged. At `NORMAL` the prefix may end earlier (the commits since the last
//! checkpoint are lost), and the test counts the cut points at which a fence already handed
//! out would be handed out again — the hazard `Synchronous::Normal` documents.
//!
//! `LEASEFENCE_POWER_AT=N` runs the cut at call N alone; `LEASEFENCE_POWER_SEED` sets what the
//! cuts keep (each cut point uses the seed plus its number; printed).

use std::path::Path;

use leasefence::{
    BatchSize, Error, JobId, JobState, Now, Owner, SqliteOptions, SqliteStore, Store, Synchronous,
    Ttl,
};
use leasefence_powercut::PowerCut;

/// The jobs of the template, in enqueue order; `e` is enqueued by the workload.
const JOBS: [&str; 5] = ["a", "b", "c", "d", "e"];
const NOW: f64 = 100.0;
const TTL: f64 = 50.0;

/// What the jobs hold, in `JOBS` order (`None`: not stored).
type Snapshot = Vec<Option<JobState>>;

fn only_at() -> Option<u64> {
    std::env::var("LEASEFENCE_POWER_AT")
        .ok()
        .and_then(|s| s.parse().ok())
}

fn options(mode: Synchronous) -> SqliteOptions {
    SqliteOptions::new().synchronous(mode)
}

/// A store with the schema and jobs `a`–`d`, made outside the simulated disk.
fn template(dir: &Path, mode: Synchronous) -> std::path::PathBuf {
    let path = dir.join("template.db");
    let store = options(mode).open(&path).unwrap();
    for job in &JOBS[..4] {
        assert!(store.enqueue(JobId::new(job).unwrap()).unwrap());
    }
    drop(store);
    assert!(
        !dir.join("template.db-wal").exists(),
        "the template's close checkpointed its WAL away"
    );
    path
}

fn snapshot(store: &SqliteStore) -> Snapshot {
    JOBS.iter()
        .map(|job| store.state(JobId::new(job).unwrap()).unwrap())
        .collect()
}

/// What one run of the workload saw: the snapshots after each acknowledged call (clean runs
/// only), and every fence a claim acknowledged, by job.
#[derive(Default)]
struct Seen {
    /// calls acknowledged (returned `Ok`)
    acked: usize,
    snapshots: Vec<Snapshot>,
    fences: Vec<(String, i64)>,
}

/// The workload, stopping at the first error. `seen` counts the acknowledged calls and gets
/// each acknowledged claim's fence, and with `record` the snapshot after every call.
fn workload(store: &SqliteStore, record: bool, seen: &mut Seen) -> Result<(), Error> {
    let now = Now::new(NOW).unwrap();
    let ttl = Ttl::new(TTL).unwrap();
    let w = |name| Owner::new(name).unwrap();
    let job = |name| JobId::new(name).unwrap();
    let step = |seen: &mut Seen, fence: Option<(&str, i64)>| {
        seen.acked += 1;
        if let Some((job, fence)) = fence {
            seen.fences.push((job.to_owned(), fence));
        }
        if record {
            seen.snapshots.push(snapshot(store));
        }
    };
    assert!(store.enqueue(job("e"))?);
    step(seen, None);
    let mut a = store
        .claim(job("a"), w("w1"), now, ttl)?
        .expect("a is ready");
    step(seen, Some(("a", a.fence)));
    assert!(store.renew_lease(&mut a, now, ttl)?);
    step(seen, None);
    assert!(store.complete_lease(&a, now, "ra")?);
    step(seen, None);
    let b = store.claim_next(w("w1"), now, ttl)?.expect("b is next");
    assert_eq!(b.job_id, "b");
    step(seen, Some(("b", b.fence)));
    assert!(store.release_lease(&b)?);
    step(seen, None);
    let b = store
        .claim(job("b"), w("w2"), now, ttl)?
        .expect("b released");
    step(seen, Some(("b", b.fence)));
    let batch = store.claim_batch(w("w3"), now, ttl, BatchSize::new(2).unwrap())?;
    let ids: Vec<&str> = batch.iter().map(|l| l.job_id.as_str()).collect();
    assert_eq!(ids, ["c", "d"]);
    for lease in &batch {
        seen.fences.push((lease.job_id.clone(), lease.fence));
    }
    step(seen, None);
    let stored = store.complete_batch(&[(&batch[0], "rc"), (&batch[1], "rd")], now)?;
    assert_eq!(stored, [true, true]);
    step(seen, None);
    assert!(store.fail(&b, now, "boom", None)?.is_some());
    step(seen, None);
    // b waits out its backoff: e is the one ready job.
    let e = store.claim_next(w("w4"), now, ttl)?.expect("e is ready");
    assert_eq!(e.job_id, "e");
    step(seen, Some(("e", e.fence)));
    assert!(store.complete_lease(&e, now, "re")?);
    step(seen, None);
    Ok(())
}

/// The jobs as stored, read through SQLite's own VFS (`open_intact`). `Err`: the file is not
/// intact.
fn read_back(path: &Path) -> Result<Snapshot, String> {
    let conn = leasefence_powercut::open_intact(path)?;
    JOBS.iter()
        .map(|job| {
            let row = conn.query_row(
                "SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?1",
                [job],
                |r| {
                    Ok(JobState {
                        id: r.get(0)?,
                        owner: r.get(1)?,
                        until: r.get(2)?,
                        fence: r.get(3)?,
                        result: r.get(4)?,
                        done: r.get::<_, i64>(5)? != 0,
                    })
                },
            );
            match row {
                Ok(state) => Ok(Some(state)),
                Err(leasefence::rusqlite::Error::QueryReturnedNoRows) => Ok(None),
                Err(e) => Err(format!("read {job}: {e}")),
            }
        })
        .collect()
}

/// What the sweep found at one `synchronous` mode.
#[derive(Default, Debug)]
struct Sweep {
    /// tracked I/O calls of the clean run: the cut points
    points: u64,
    /// cut points whose reboot held fewer calls than were acknowledged
    rolled_back: u64,
    /// cut points after which a fence already acknowledged would be handed out again
    reissuable: u64,
    /// unsynced writes the cuts found, and of those torn
    unsynced: usize,
    torn: usize,
}

/// Runs the clean workload, then one cut per tracked I/O call of it (or `LEASEFENCE_POWER_AT`
/// alone), checking each reboot. With `strict` (what FULL promises), panics at the first
/// acknowledged call lost or fence handed out again.
fn sweep(mode: Synchronous, seed: u64, strict: bool) -> Sweep {
    let dir = tempfile::tempdir().unwrap();
    let template = template(dir.path(), mode);
    let disk = |name: &str| {
        let root = dir.path().join(name);
        std::fs::create_dir(&root).unwrap();
        std::fs::copy(&template, root.join("jobs.db")).unwrap();
        root
    };
    // The clean run: the snapshots and the number of I/O calls.
    let root = disk("clean");
    let power = PowerCut::new(&root, seed);
    let mut clean = Seen::default();
    let store = options(mode).open(root.join("jobs.db")).unwrap();
    clean.snapshots.push(snapshot(&store));
    workload(&store, true, &mut clean).unwrap();
    drop(store);
    let mut sweep = Sweep {
        points: power.events(),
        ..Sweep::default()
    };
    drop(power);
    assert_eq!(clean.acked, 12);
    let points: Vec<u64> = match only_at() {
        Some(at) => vec![at],
        None => (1..=sweep.points).collect(),
    };
    for at in points {
        let root = disk(&format!("cut-{at}"));
        let path = root.join("jobs.db");
        let power = PowerCut::new(&root, seed.wrapping_add(at));
        power.arm(at);
        let mut seen = Seen::default();
        match options(mode).open(&path) {
            Ok(store) => {
                if let Err(e) = workload(&store, false, &mut seen) {
                    assert!(power.is_cut(), "cut at {at}: an error before the cut: {e}");
                }
                drop(store);
            }
            Err(e) => assert!(
                power.is_cut(),
                "cut at {at}: open failed before the cut: {e}"
            ),
        }
        let acked = seen.acked;
        assert!(power.is_cut(), "cut point {at} was never reached");
        let report = power.reboot().unwrap();
        sweep.unsynced += report.unsynced;
        sweep.torn += report.torn;
        let stored = read_back(&path)
            .unwrap_or_else(|why| panic!("{mode:?}, cut at {at} (seed {seed}): {why}"));
        // The calls whose effect the file holds: a prefix of the clean run.
        let held = (0..clean.snapshots.len())
            .rev()
            .find(|&i| clean.snapshots[i] == stored)
            .unwrap_or_else(|| {
                panic!(
                    "{mode:?}, cut at {at} (seed {seed}): the file holds no state the workload \
                     passed through: {stored:#?}"
                )
            });
        let fine = held == acked || held == acked + 1;
        if strict {
            assert!(
                fine,
                "{mode:?}, cut at {at} (seed {seed}): {acked} calls acknowledged, the file holds {held}"
            );
        } else {
            assert!(
                held <= acked + 1,
                "{mode:?}, cut at {at}: the file holds a call never made"
            );
        }
        if held < acked {
            sweep.rolled_back += 1;
        }
        // Reopened, the store hands out fences above every acknowledged one.
        drop(power);
        let store = options(mode).open(&path).unwrap();
        let later = Now::new(1e6).unwrap();
        let me = Owner::new("after").unwrap();
        let mut reissued = false;
        while let Some(lease) = store.claim_next(me, later, Ttl::new(TTL).unwrap()).unwrap() {
            let acked_max = seen
                .fences
                .iter()
                .filter(|(job, _)| *job == lease.job_id)
                .map(|(_, f)| *f)
                .max()
                .unwrap_or(0);
            reissued |= lease.fence <= acked_max;
            assert!(store.complete_lease(&lease, later, "after").unwrap());
        }
        if strict {
            assert!(
                !reissued,
                "{mode:?}, cut at {at} (seed {seed}): a fence handed out again"
            );
        }
        sweep.reissuable += u64::from(reissued);
    }
    sweep
}

#[test]
fn full_holds_every_acknowledged_call_at_every_cut_point() {
    let seed = leasefence_powercut::seed();
    let sweep = sweep(Synchronous::Full, seed, true);
    eprintln!("power cuts at every point, FULL: {sweep:?} (seed {seed})");
    assert_eq!(sweep.rolled_back, 0);
    assert_eq!(sweep.reissuable, 0);
    assert!(sweep.points >= 24, "{sweep:?}");
    assert!(sweep.unsynced > 0, "{sweep:?}");
}

#[test]
fn normal_rolls_back_to_a_prefix_and_can_hand_a_fence_out_again() {
    let seed = leasefence_powercut::seed();
    let sweep = sweep(Synchronous::Normal, seed, false);
    eprintln!("power cuts at every point, NORMAL: {sweep:?} (seed {seed})");
    // What Synchronous::Normal documents: a cut loses the commits since the last checkpoint,
    // and a claim lost so hands its fence out again.
    assert!(sweep.rolled_back > 0, "{sweep:?}");
    assert!(sweep.reissuable > 0, "{sweep:?}");
}

/// The sweep can fail: held to FULL's promise, a store that never syncs (`OFF`) breaks it.
#[test]
fn the_sweep_catches_a_store_that_never_syncs() {
    let seed = leasefence_powercut::seed();
    let caught = std::panic::catch_unwind(|| sweep(Synchronous::Off, seed, true));
    let why = caught.expect_err("OFF kept every acknowledged call at every cut point");
    let why = why.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        why.contains("acknowledged")
            || why.contains("handed out again")
            || why.contains("integrity")
            || why.contains("open"),
        "seed {seed}: {why}"
    );
}
