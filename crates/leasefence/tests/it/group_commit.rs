//! Group commit on SQLite: single writes of threads with their own stores on one file share one
//! transaction, and each caller still gets its own answer. A group is made deterministic by
//! holding the file's write lock from an independent connection: the first caller leads and
//! waits for the lock, the next ones queue behind it (read from `group_commit_stats`), and all
//! of them run as one group once the lock is let go.

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::common::*;
use leasefence::{
    Error, Failed, GroupCommitStats, JobId, Lease, SqliteOptions, SqliteStore, Store, Synchronous,
};

/// Waits until the stats of `store`'s group satisfy `ready` (10 s at most).
fn await_stats(store: &SqliteStore, what: &str, ready: impl Fn(&GroupCommitStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = store.group_commit_stats();
        if ready(&stats) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waited 10 s for {what}: {stats:?}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `call` on a store of its own in a new thread; returns when the call has joined the
/// group commit.
fn queue_call<T: Send + 'static>(
    db: &Db,
    options: &SqliteOptions,
    call: impl FnOnce(&SqliteStore) -> T + Send + 'static,
) -> JoinHandle<T> {
    let store = options.open(&db.path).unwrap();
    let joined = |s: &GroupCommitStats| s.calls + s.waiting as u64;
    let before = joined(&store.group_commit_stats());
    let handle = thread::spawn(move || call(&store));
    let probe = options.open(&db.path).unwrap();
    // Joined: waiting, or already taken by a leader.
    await_stats(&probe, "the call to join", |s| joined(s) == before + 1);
    handle
}

/// The answer of the call `handle` runs, which must come within 10 s (a group that never
/// answers fails the test instead of hanging it).
fn answer<T>(handle: JoinHandle<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !handle.is_finished() {
        assert!(Instant::now() < deadline, "no answer within 10 s");
        thread::sleep(Duration::from_millis(1));
    }
    handle.join().unwrap()
}

/// Runs a test's `body` in a thread of its own that must finish within 30 s: a group that
/// never answers fails the test instead of hanging the suite.
pub(crate) fn within_30s(body: impl FnOnce() + Send + 'static) {
    let handle = thread::spawn(body);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !handle.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the test did not finish within 30 s"
        );
        thread::sleep(Duration::from_millis(1));
    }
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Jobs `ids`, each claimed by `w` at 0 s for 100 s: their leases.
fn claimed(db: &Db, ids: &[&str]) -> Vec<Lease> {
    let store = open(db);
    let jobs: Vec<_> = ids.iter().map(|id| job(id)).collect();
    store.enqueue_many(&jobs).unwrap();
    ids.iter()
        .map(|id| {
            store
                .claim(JobId::new(id).unwrap(), owner("w"), now(0.0), ttl(100.0))
                .unwrap()
                .unwrap()
        })
        .collect()
}

/// Holds the write lock of `db` until the returned connection commits or rolls back; the
/// first caller then leads a group of one and waits for the lock (returns once it does).
fn hold_lock_behind_a_leader(
    db: &Db,
    options: &SqliteOptions,
    lead: impl FnOnce(&SqliteStore) -> Result<bool, Error> + Send + 'static,
) -> (rusqlite::Connection, JoinHandle<Result<bool, Error>>) {
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let store = options.open(&db.path).unwrap();
    let groups = store.group_commit_stats().groups;
    let leader = thread::spawn(move || lead(&store));
    let probe = options.open(&db.path).unwrap();
    await_stats(&probe, "the leader to take its group", |s| {
        s.leading && s.groups == groups + 1 && s.waiting == 0
    });
    (blocker, leader)
}

#[test]
fn concurrent_writes_share_one_transaction_and_each_caller_gets_its_own_answer() {
    within_30s(|| {
        let db = Db::new();
        let options = SqliteOptions::new();
        let leases = claimed(&db, &["a", "b", "c", "d", "e"]);
        let probe = options.open(&db.path).unwrap();
        let before = probe.group_commit_stats();

        let a = leases[0].clone();
        let (blocker, leader) =
            hold_lock_behind_a_leader(&db, &options, move |s| s.complete_lease(&a, now(1.0), "A"));
        let b = leases[1].clone();
        let stored_b = queue_call(&db, &options, move |s| s.complete_lease(&b, now(1.0), "B"));
        // A stale writer in the same group: refused, and only it.
        let mut stale = leases[2].clone();
        stale.fence += 6;
        let refused = queue_call(&db, &options, move |s| {
            s.complete_lease(&stale, now(1.0), "C")
        });
        let d = leases[3].clone();
        let failed = queue_call(&db, &options, move |s| {
            s.fail(&d, now(1.0), "broke", Some(now(50.0)))
        });
        let mut e = leases[4].clone();
        let renewed = queue_call(&db, &options, move |s| {
            s.renew_lease(&mut e, now(1.0), ttl(200.0))
                .map(|r| (r, e.until))
        });
        let nothing = queue_call(&db, &options, |s| {
            s.claim_next(owner("x"), now(1.0), ttl(5.0))
        });
        assert_eq!(probe.group_commit_stats().waiting, 5);
        blocker.execute_batch("ROLLBACK").unwrap();

        assert!(answer(leader).unwrap());
        assert!(answer(stored_b).unwrap());
        assert!(!answer(refused).unwrap());
        assert_eq!(answer(failed).unwrap(), Some(Failed::Retrying { at: 50.0 }));
        assert_eq!(answer(renewed).unwrap(), (true, 201.0));
        assert!(answer(nothing).unwrap().is_none());
        let after = probe.group_commit_stats();
        // The leader's group of one, then the five that queued behind it as one group.
        assert_eq!(
            (after.groups - before.groups, after.calls - before.calls),
            (2, 6)
        );
        assert!(!after.leading && after.waiting == 0, "{after:?}");

        // Read back independently: every answer was committed, and only what was answered.
        let row = |id: &str| db.row(id).unwrap();
        assert_eq!((row("a").done, row("a").result.as_deref()), (1, Some("A")));
        assert_eq!((row("b").done, row("b").result.as_deref()), (1, Some("B")));
        assert_eq!((row("c").done, row("c").fence), (0, 1));
        assert_eq!((row("d").done, row("d").owner), (0, None));
        assert_eq!((row("e").done, row("e").until), (0, 201.0));
        let refusals = probe
            .history(JobId::new("c").unwrap())
            .unwrap()
            .unwrap()
            .refusals;
        assert_eq!(
            refusals
                .iter()
                .map(|r| (r.fence, r.op.as_str(), r.count))
                .collect::<Vec<_>>(),
            vec![(7, "complete", 1)]
        );
    });
}

#[test]
fn a_failing_call_is_undone_alone_and_its_neighbours_commit() {
    within_30s(|| {
        let db = Db::new();
        let options = SqliteOptions::new();
        let leases = claimed(&db, &["lead", "a", "abort", "b", "rollback", "c"]);
        // A job whose only attempt's lease has expired by 1,000 s: a claim then buries it first.
        let store = open(&db);
        store.enqueue_many(&[job("spent").max_attempts(1)]).unwrap();
        let spent = JobId::new("spent").unwrap();
        store
            .claim(spent, owner("w"), now(0.0), ttl(100.0))
            .unwrap()
            .unwrap();
        // Three ways a call can fail: ABORT undoes the statement (the transaction goes on), after
        // the claim's bury for the saboteur; ROLLBACK makes SQLite roll the whole transaction back.
        db.raw()
            .execute_batch(
                "CREATE TRIGGER abort_one BEFORE UPDATE OF result ON jobs
                   WHEN NEW.result = 'abort' BEGIN SELECT RAISE(ABORT, 'aborted by a trigger'); END;
                 CREATE TRIGGER roll_all_back BEFORE UPDATE OF result ON jobs
                   WHEN NEW.result = 'rollback'
                   BEGIN SELECT RAISE(ROLLBACK, 'rolled back by a trigger'); END;
                 CREATE TRIGGER sabotage BEFORE UPDATE OF owner ON jobs
                   WHEN NEW.owner = 'saboteur'
                   BEGIN SELECT RAISE(ABORT, 'claim refused by a trigger'); END;",
            )
            .unwrap();
        let probe = options.open(&db.path).unwrap();

        let lead = leases[0].clone();
        let (blocker, leader) = hold_lock_behind_a_leader(&db, &options, move |s| {
            s.complete_lease(&lead, now(1.0), "ok")
        });
        let calls: Vec<_> = leases[1..]
            .iter()
            .map(|lease| {
                let lease = lease.clone();
                let result = match lease.job_id.as_str() {
                    id @ ("abort" | "rollback") => id.to_owned(),
                    _ => "ok".to_owned(),
                };
                queue_call(&db, &options, move |s| {
                    s.complete_lease(&lease, now(1.0), &result)
                })
            })
            .collect();
        let saboteur = queue_call(&db, &options, |s| {
            s.claim_next(owner("saboteur"), now(1_000.0), ttl(5.0))
        });
        let groups = probe.group_commit_stats().groups;
        blocker.execute_batch("ROLLBACK").unwrap();
        assert!(answer(leader).unwrap());
        let err = answer(saboteur).unwrap_err();
        assert!(
            err.to_string().contains("claim refused by a trigger"),
            "{err}"
        );

        let answers: Vec<_> = calls.into_iter().map(answer).collect();
        for (lease, answer) in leases[1..].iter().zip(&answers) {
            match lease.job_id.as_str() {
                "abort" | "rollback" => {
                    let err = answer.as_ref().unwrap_err();
                    assert!(matches!(err, Error::Backend(_)), "{err:?}");
                    assert!(err.to_string().contains("by a trigger"), "{err}");
                }
                _ => assert_eq!(answer.as_ref().unwrap(), &true, "{}", lease.job_id),
            }
        }
        assert_eq!(probe.group_commit_stats().groups, groups + 1);
        for id in ["lead", "a", "b", "c"] {
            let row = db.row(id).unwrap();
            assert_eq!((row.done, row.result.as_deref()), (1, Some("ok")), "{id}");
        }
        // The failed calls changed nothing: not their own jobs, nor the saboteur's bury.
        for id in ["abort", "rollback", "spent"] {
            let row = db.row(id).unwrap();
            assert_eq!((row.done, row.owner.as_deref()), (0, Some("w")), "{id}");
        }
    });
}

#[test]
fn a_transaction_that_cannot_begin_fails_every_call_of_its_group_and_changes_nothing() {
    within_30s(|| {
        let db = Db::new();
        let options = SqliteOptions::new().busy_timeout(Duration::from_secs(1));
        let leases = claimed(&db, &["a", "b", "c"]);
        let rows = db.rows();
        let a = leases[0].clone();
        let (blocker, leader) =
            hold_lock_behind_a_leader(&db, &options, move |s| s.complete_lease(&a, now(1.0), "A"));
        let b = leases[1].clone();
        let stored_b = queue_call(&db, &options, move |s| s.complete_lease(&b, now(1.0), "B"));
        let c = leases[2].clone();
        let released = queue_call(&db, &options, move |s| s.release_lease(&c));
        for answer in [answer(leader), answer(stored_b), answer(released)] {
            assert!(matches!(answer, Err(Error::Busy)), "{answer:?}");
        }
        assert_eq!(db.rows(), rows);
        blocker.execute_batch("ROLLBACK").unwrap();
        // The group is free again: the next write leads and commits.
        let store = options.open(&db.path).unwrap();
        assert!(store.complete_lease(&leases[1], now(2.0), "B").unwrap());
        assert_eq!(db.row("b").unwrap().result.as_deref(), Some("B"));
    });
}

#[test]
fn only_stores_of_one_file_with_the_same_settings_share_a_group() {
    within_30s(|| {
        let db = Db::new();
        let other = Db::new();
        let full = SqliteStore::open(&db.path).unwrap();
        let full_too = SqliteStore::open(&db.path).unwrap();
        let elsewhere = SqliteStore::open(&other.path).unwrap();
        let limited = SqliteOptions::new()
            .max_size(1 << 30)
            .open(&db.path)
            .unwrap();
        let patient = SqliteOptions::new()
            .busy_timeout(Duration::from_secs(9))
            .open(&db.path)
            .unwrap();
        let normal_grouped = SqliteOptions::new()
            .synchronous(Synchronous::Normal)
            .group_commit(true)
            .open(&db.path)
            .unwrap();
        let normal = SqliteOptions::new()
            .synchronous(Synchronous::Normal)
            .open(&db.path)
            .unwrap();
        let full_alone = SqliteOptions::new()
            .group_commit(false)
            .open(&db.path)
            .unwrap();
        let stores = [
            &full,
            &elsewhere,
            &limited,
            &patient,
            &normal_grouped,
            &normal,
            &full_alone,
        ];
        for (i, store) in stores.iter().enumerate() {
            store
                .enqueue(JobId::new(&format!("job-{i}")).unwrap())
                .unwrap();
        }
        let calls = |s: &SqliteStore| {
            let stats = s.group_commit_stats();
            (stats.groups, stats.calls)
        };
        // One write each, each counted only by its own group; none at all where nothing groups
        // (NORMAL by default, or group commit turned off).
        assert_eq!(calls(&full), (1, 1));
        assert_eq!(calls(&full_too), (1, 1));
        assert_eq!(calls(&elsewhere), (1, 1));
        assert_eq!(calls(&limited), (1, 1));
        assert_eq!(calls(&patient), (1, 1));
        assert_eq!(calls(&normal_grouped), (1, 1));
        assert_eq!(calls(&normal), (0, 0));
        assert_eq!(calls(&full_alone), (0, 0));
        assert_eq!(normal.synchronous().unwrap(), Synchronous::Normal);
        // Every write committed, grouped or not.
        for i in 0..stores.len() {
            let id = format!("job-{i}");
            let found = if i == 1 { other.row(&id) } else { db.row(&id) };
            assert!(found.is_some(), "{id}");
        }
    });
}

#[test]
fn batches_share_a_group_with_single_writes_and_each_gets_its_own_answer() {
    within_30s(|| {
        let db = Db::new();
        let options = SqliteOptions::new();
        let leases = claimed(&db, &["lead", "a", "b", "single"]);
        open(&db)
            .enqueue_many(&[job("r1"), job("r2"), job("r3")])
            .unwrap();
        let probe = options.open(&db.path).unwrap();
        let before = probe.group_commit_stats();

        let lead = leases[0].clone();
        let (blocker, leader) = hold_lock_behind_a_leader(&db, &options, move |s| {
            s.complete_lease(&lead, now(1.0), "L")
        });
        // A batch of completions, one of them stale: refused alone.
        let (a, mut stale) = (leases[1].clone(), leases[2].clone());
        stale.fence += 4;
        let completed = queue_call(&db, &options, move |s| {
            s.complete_batch(&[(&a, "A"), (&stale, "B")], now(1.0))
        });
        let batch = queue_call(&db, &options, |s| {
            s.claim_batch(owner("x"), now(1.0), ttl(10.0), bs(2))
        });
        let single = leases[3].clone();
        let stored = queue_call(&db, &options, move |s| {
            s.complete_lease(&single, now(1.0), "S")
        });
        // Taken by the next group: sees what the batch before it in the group claimed.
        let rest = queue_call(&db, &options, |s| {
            s.claim_batch(owner("y"), now(1.0), ttl(10.0), bs(5))
        });
        assert_eq!(probe.group_commit_stats().waiting, 4);
        blocker.execute_batch("ROLLBACK").unwrap();

        assert!(answer(leader).unwrap());
        assert_eq!(answer(completed).unwrap(), [true, false]);
        let batch = answer(batch).unwrap();
        assert_eq!(ids(&batch), ["r1", "r2"]);
        assert!(batch.iter().all(|l| l.owner == "x" && l.fence == 1));
        assert!(answer(stored).unwrap());
        assert_eq!(ids(&answer(rest).unwrap()), ["r3"]);
        let after = probe.group_commit_stats();
        // The leader's group of one, then the four that queued behind it as one group.
        assert_eq!(
            (after.groups - before.groups, after.calls - before.calls),
            (2, 5)
        );
        let row = |id: &str| db.row(id).unwrap();
        assert_eq!((row("a").done, row("a").result.as_deref()), (1, Some("A")));
        assert_eq!((row("b").done, row("b").fence), (0, 1));
        assert_eq!(db.refusals("b"), [(5, "complete".into(), 1)]);
        assert_eq!(
            (row("single").done, row("single").result.as_deref()),
            (1, Some("S"))
        );
        for (id, holder) in [("r1", "x"), ("r2", "x"), ("r3", "y")] {
            assert_eq!(
                (row(id).owner.as_deref(), row(id).fence),
                (Some(holder), 1),
                "{id}"
            );
        }
    });
}

#[test]
fn a_failing_batch_is_undone_alone_and_its_neighbours_commit() {
    within_30s(|| {
        let db = Db::new();
        let options = SqliteOptions::new();
        let leases = claimed(&db, &["lead", "a", "boom", "b"]);
        db.raw()
            .execute_batch(
                "CREATE TRIGGER boom BEFORE UPDATE OF done ON jobs WHEN NEW.id = 'boom'
                   BEGIN SELECT RAISE(ABORT, 'boom refused by a trigger'); END;",
            )
            .unwrap();
        let lead = leases[0].clone();
        let (blocker, leader) = hold_lock_behind_a_leader(&db, &options, move |s| {
            s.complete_lease(&lead, now(1.0), "L")
        });
        let a = leases[1].clone();
        let first = queue_call(&db, &options, move |s| {
            s.complete_batch(&[(&a, "A")], now(1.0))
        });
        let (boom, b) = (leases[2].clone(), leases[3].clone());
        let failing = queue_call(&db, &options, move |s| {
            s.complete_batch(&[(&b, "B"), (&boom, "X")], now(1.0))
        });
        blocker.execute_batch("ROLLBACK").unwrap();
        assert!(answer(leader).unwrap());
        assert_eq!(answer(first).unwrap(), [true]);
        let err = answer(failing).unwrap_err();
        assert!(
            err.to_string().contains("boom refused by a trigger"),
            "{err}"
        );
        // The failing batch stored nothing, not even its good completion; its neighbour did.
        assert_eq!(db.row("a").unwrap().result.as_deref(), Some("A"));
        for id in ["b", "boom"] {
            assert_eq!(db.row(id).unwrap().done, 0, "{id}");
        }
    });
}

/// A busy timeout too long to add to the clock (`Duration::MAX`: wait however long it takes)
/// is taken as such by the grouped writes (on at FULL), as by the others: each write is
/// answered, nothing panics.
#[test]
fn an_unbounded_busy_timeout_waits_instead_of_failing() {
    within_30s(|| {
        let db = Db::new();
        let store = SqliteOptions::new()
            .busy_timeout(Duration::MAX)
            .open(&db.path)
            .unwrap();
        let job = JobId::new("j").unwrap();
        assert!(store.enqueue(job).unwrap());
        let lease = store
            .claim(job, owner("w"), now(0.0), ttl(10.0))
            .unwrap()
            .unwrap();
        assert!(store.complete_lease(&lease, now(1.0), "done").unwrap());
        assert!(
            store.group_commit_stats().calls >= 3,
            "the writes were grouped"
        );
        let row = db.row("j").unwrap();
        assert_eq!((row.done, row.fence), (1, 1));
        assert_eq!(row.result.as_deref(), Some("done"));
    });
}

/// A small tmpfs mounted on a folder for the test (root only), unmounted when dropped.
struct SmallDisk {
    dir: std::path::PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` on `dir`; `None` (with the reason printed) where that cannot
    /// be done — a failure instead when `CI` is set, so the case never passes unrun there.
    fn mount_on(dir: &std::path::Path, bytes: u64) -> Option<SmallDisk> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but a tmpfs cannot be mounted (needs root): the full-disk case must run"
            );
            eprintln!(
                "skipped: cannot mount a tmpfs (needs root), so the full-disk case did not run"
            );
        }
        ok.then(|| SmallDisk {
            dir: dir.to_path_buf(),
        })
    }

    /// Fills the disk, then frees `room` bytes of it.
    fn fill_leaving(&self, room: u64) {
        use std::io::Write;
        let filler = self.dir.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.flush();
        let len = std::fs::metadata(&filler).unwrap().len();
        file.set_len(len.saturating_sub(room)).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.dir).status();
    }
}

/// A full disk at the group's commit, caused by one caller's large result, must reach that
/// caller only, as it does without group commit: its small neighbour is stored and told so.
fn full_disk_at_commit(group_commit: bool) {
    full_disk(group_commit, 256 << 10, 1 << 20, 1);
}

/// With `room` bytes left on the disk, a result of `large` bytes and then its neighbour's of
/// `small` bytes, each on a lease of its own: the large one is told the disk is full, the small
/// one is stored.
fn full_disk(group_commit: bool, room: u64, large: usize, small: usize) {
    // The database's own folder is the small disk (unmounted before the folder is removed).
    let db = Db::empty();
    let Some(disk) = SmallDisk::mount_on(db.path.parent().unwrap(), 16 << 20) else {
        return;
    };
    {
        leasefence::init_db(&db.path).unwrap();
        let options = SqliteOptions::new().group_commit(group_commit);
        let leases = claimed(&db, &["lead", "big", "a"]);
        db.raw()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        disk.fill_leaving(room);
        let (large, small) = ("x".repeat(large), "a".repeat(small));
        let (too_big, stored_a) = if group_commit {
            let lead = leases[0].clone();
            let (blocker, leader) = hold_lock_behind_a_leader(&db, &options, move |s| {
                s.complete_lease(&lead, now(1.0), "L")
            });
            let big = leases[1].clone();
            let too_big = queue_call(&db, &options, move |s| {
                s.complete_lease(&big, now(1.0), &large)
            });
            let a = leases[2].clone();
            let stored_a = queue_call(&db, &options, move |s| {
                s.complete_lease(&a, now(1.0), &small)
            });
            blocker.execute_batch("ROLLBACK").unwrap();
            assert!(answer(leader).unwrap());
            (answer(too_big), answer(stored_a))
        } else {
            let store = options.open(&db.path).unwrap();
            assert!(store.complete_lease(&leases[0], now(1.0), "L").unwrap());
            let too_big = store.complete_lease(&leases[1], now(1.0), &large);
            let stored_a = store.complete_lease(&leases[2], now(1.0), &small);
            (too_big, stored_a)
        };
        assert!(
            matches!(too_big, Err(Error::StorageFull { .. })),
            "{too_big:?}"
        );
        assert!(
            matches!(stored_a, Ok(true)),
            "the small neighbour of a write too large for the disk: {stored_a:?}"
        );
        assert_eq!(db.row("a").unwrap().done, 1);
        assert_eq!(db.row("big").unwrap().done, 0);
    }
    drop(disk);
}

#[test]
fn a_full_disk_without_group_commit_fails_the_large_write_only() {
    within_30s(|| full_disk_at_commit(false));
}

#[test]
fn a_full_disk_at_a_group_commit_fails_the_large_write_only_and_stores_its_neighbour() {
    within_30s(|| full_disk_at_commit(true));
}
