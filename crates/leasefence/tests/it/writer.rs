//! The writer of a file in this process: the stores of one file write through one connection,
//! one at a time; each store still gets its own answers. An in-memory database has none (each
//! connection has its own database).

use std::thread;

use crate::common::*;
use crate::group_commit::within_30s;
use leasefence::{JobId, Owner, SqliteOptions, SqliteStore, Store, Synchronous, Ttl};

/// Two in-memory stores are two databases, even at FULL (where single writes are grouped): a
/// write of one is never run on the other's connection, nor seen by it.
#[test]
fn in_memory_stores_are_each_a_database_of_their_own() {
    within_30s(|| {
        let a = SqliteStore::open(":memory:").unwrap();
        let b = SqliteStore::open(":memory:").unwrap();
        let (job, w) = (JobId::new("a-only").unwrap(), Owner::new("w").unwrap());
        assert!(a.enqueue(job).unwrap());
        assert_eq!(b.state(job).unwrap(), None, "b is another database");
        assert!(b.enqueue(job).unwrap(), "new in b too");
        let lease = b
            .claim(job, w, now(0.0), Ttl::new(10.0).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(lease.fence, 1);
        assert!(b.complete_lease(&lease, now(1.0), "b's").unwrap());
        let in_a = a.state(job).unwrap().unwrap();
        assert_eq!((in_a.fence, in_a.done), (0, false), "a's row is untouched");

        // From threads at once: each store its own answers, on its own database.
        let workers: Vec<_> = (0..4)
            .map(|t| {
                thread::spawn(move || {
                    let store = SqliteStore::open(":memory:").unwrap();
                    for i in 0..20 {
                        let id = format!("t{t}-{i}");
                        let job = JobId::new(&id).unwrap();
                        assert!(store.enqueue(job).unwrap());
                        let lease = store
                            .claim_next(Owner::new("w").unwrap(), now(0.0), Ttl::new(10.0).unwrap())
                            .unwrap()
                            .expect("its own job is ready");
                        assert_eq!(lease.job_id, id, "only its own jobs");
                        assert!(store.complete_lease(&lease, now(1.0), &id).unwrap());
                    }
                    store.list(now(2.0), None, None, 1000).unwrap().len()
                })
            })
            .collect();
        for worker in workers {
            assert_eq!(worker.join().unwrap(), 20);
        }
    });
}

/// Many stores of one file in many threads, single writes (grouped at FULL), batches and an
/// operator verb at once, at both durabilities (two writers of one file in this process):
/// every answer is right and the file holds exactly what was acknowledged, read back through
/// an independent connection.
#[test]
fn threads_writing_through_the_files_writer_all_get_their_own_answers() {
    within_30s(|| {
        let db = Db::new();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let path = db.path.clone();
                thread::spawn(move || {
                    let durability = [Synchronous::Full, Synchronous::Normal][t % 2];
                    let store = SqliteOptions::new()
                        .synchronous(durability)
                        .open(&path)
                        .unwrap();
                    let owner = format!("w{t}");
                    let mut done = Vec::new();
                    for i in 0..25 {
                        let id = format!("t{t}-{i}");
                        let job = JobId::new(&id).unwrap();
                        assert!(store.enqueue(job).unwrap());
                        let lease = store
                            .claim(
                                job,
                                Owner::new(&owner).unwrap(),
                                now(0.0),
                                Ttl::new(60.0).unwrap(),
                            )
                            .unwrap()
                            .expect("its own new job");
                        assert_eq!(lease.fence, 1);
                        // A stale fence is refused, the current one stored.
                        let stale = leasefence::Lease {
                            fence: 2,
                            ..lease.clone()
                        };
                        assert!(!store.complete_lease(&stale, now(1.0), "stale").unwrap());
                        if i % 5 == 0 {
                            let stored = store
                                .complete_batch(&[(&lease, id.as_str())], now(1.0))
                                .unwrap();
                            assert_eq!(stored, [true]);
                        } else {
                            assert!(store.complete_lease(&lease, now(1.0), &id).unwrap());
                        }
                        done.push(id);
                    }
                    // An operator verb on the store's own connection, among the others' writes.
                    let gone = JobId::new(&done[0]).unwrap();
                    assert_eq!(store.delete(&[gone]).unwrap(), [true]);
                    done
                })
            })
            .collect();
        let mut expected = Vec::new();
        for thread in threads {
            let mut done = thread.join().unwrap();
            done.remove(0); // deleted
            expected.extend(done);
        }
        let rows = db.rows();
        assert_eq!(rows.len(), expected.len());
        for id in &expected {
            let row = db.row(id).unwrap();
            assert_eq!(row.done, 1, "{id} completed");
            assert_eq!(row.fence, 1);
            assert_eq!(row.result.as_deref(), Some(id.as_str()), "its own result");
        }
    });
}

/// A file replaced at its path while a store is still open on the old one (deleted and created
/// again, as a restore from a backup does) is another file: a store opened on the new one
/// writes into it, not through the old file's writer into the unlinked file; the old store
/// keeps its own file.
#[cfg(unix)]
#[test]
fn a_file_replaced_at_its_path_gets_a_writer_of_its_own() {
    within_30s(|| {
        let db = Db::new();
        // FULL (the default): single writes are grouped and run on the file's writer.
        let old = SqliteStore::open(&db.path).unwrap();
        assert!(old.enqueue(JobId::new("before").unwrap()).unwrap());
        for suffix in ["", "-wal", "-shm"] {
            let mut name = db.path.clone().into_os_string();
            name.push(suffix);
            match std::fs::remove_file(&name) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{e}"),
                _ => {}
            }
        }
        let new = SqliteStore::open(&db.path).unwrap();
        assert!(new.enqueue(JobId::new("after").unwrap()).unwrap());
        let lease = new
            .claim_next(Owner::new("w").unwrap(), now(0.0), Ttl::new(10.0).unwrap())
            .unwrap()
            .expect("the new file's job");
        assert_eq!((lease.job_id.as_str(), lease.fence), ("after", 1));
        assert!(new.complete_lease(&lease, now(1.0), "stored").unwrap());
        // Read back through an independent connection: the new file holds the new store's
        // writes, and nothing of the old file's.
        let row = db.row("after").expect("written into the new file");
        assert_eq!((row.done, row.fence), (1, 1));
        assert_eq!(row.result.as_deref(), Some("stored"));
        assert!(db.row("before").is_none());
        // The old store still works on its own (unlinked) file.
        assert!(old.state(JobId::new("before").unwrap()).unwrap().is_some());
        assert!(old.enqueue(JobId::new("late").unwrap()).unwrap());
        assert!(db.row("late").is_none());
    });
}

/// An error of a write names the database as its caller opened it, even when another store of
/// this process opened the file first under another name (a symlink): the writer they share
/// opened it under that other name.
#[cfg(unix)]
#[test]
fn a_storage_full_error_names_the_path_its_store_was_opened_with() {
    within_30s(|| {
        let db = Db::new();
        leasefence::enqueue(&db.path, "j").unwrap();
        let link = db.path.with_file_name("link.db");
        std::os::unix::fs::symlink(&db.path, &link).unwrap();
        let size = std::fs::metadata(&db.path).unwrap().len();
        for group_commit in [false, true] {
            let options = SqliteOptions::new()
                .max_size(size)
                .group_commit(group_commit);
            let first = options.open(&link).unwrap();
            let store = options.open(&db.path).unwrap();
            let (job, w) = (JobId::new("j").unwrap(), Owner::new("w").unwrap());
            let lease = store
                .claim(job, w, now(0.0), Ttl::new(60.0).unwrap())
                .unwrap()
                .unwrap();
            let err = store
                .complete_lease(&lease, now(1.0), &"x".repeat(4 << 20))
                .unwrap_err();
            let expected = db.path.display().to_string();
            assert!(
                matches!(&err, leasefence::Error::StorageFull { database } if *database == expected),
                "group commit {group_commit}: {err:?}, expected {expected}"
            );
            assert!(store.release_lease(&lease).unwrap());
            drop((first, store));
        }
    });
}
