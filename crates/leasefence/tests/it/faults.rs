//! Faults: a full disk, a read-only file or folder, a database locked past the busy timeout, a
//! truncated or corrupt file, a missing folder. Each gives a clear, typed error, the operation
//! has no partial effect, and the store works again once the fault is gone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use leasefence::{Error, JobId, NewJob, Now, Owner, SqliteOptions, SqliteStore, Store, Ttl};

fn now(t: f64) -> Now {
    Now::new(t).unwrap()
}
fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}
fn job(id: &str) -> JobId<'_> {
    JobId::new(id).unwrap()
}

#[test]
fn a_full_disk_is_storage_full_rolls_the_call_back_and_passes_once_space_is_there() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "j").unwrap();
    let size = std::fs::metadata(&db.path).unwrap().len();
    // The file may not grow at all: the stand-in for a full disk.
    let full = SqliteOptions::new().max_size(size).open(&db.path).unwrap();
    let w = Owner::new("w").unwrap();
    let fence = full
        .claim_fence(job("j"), w, now(0.0), ttl(60.0))
        .unwrap()
        .unwrap();
    let leased = db.rows();

    let big = "x".repeat(4 << 20);
    let err = full
        .complete(job("j"), w, fence, now(1.0), &big)
        .unwrap_err();
    assert!(
        matches!(&err, Error::StorageFull { database } if database == &db.path.display().to_string()),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("full"), "{err}");
    assert_eq!(db.rows(), leased, "nothing of the completion was written");
    let many: Vec<NewJob> = (0..64)
        .map(|i| {
            NewJob::new(format!("big-{i}"))
                .unwrap()
                .payload(vec![7; 64 << 10])
        })
        .collect();
    assert!(matches!(
        full.enqueue_many(&many),
        Err(Error::StorageFull { .. })
    ));
    assert_eq!(db.rows(), leased, "no job of the batch was inserted");

    // The same store goes on with writes that fit; a store without the limit takes the rest.
    assert!(
        full.complete(job("j"), w, fence, now(1.0), "small")
            .unwrap()
    );
    let roomy = SqliteStore::open(&db.path).unwrap();
    assert_eq!(roomy.enqueue_many(&many).unwrap(), vec![true; 64]);
    assert_eq!(db.rows().len(), 65);
    assert_eq!(sqlite3(&db.path, "PRAGMA integrity_check;").trim(), "ok");
}

#[test]
fn max_size_lets_the_file_grow_up_to_the_size_given_and_no_further() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "j").unwrap();
    let size = std::fs::metadata(&db.path).unwrap().len();
    // Room for 256 KiB more than the file holds now.
    let store = SqliteOptions::new()
        .max_size(size + (256 << 10))
        .open(&db.path)
        .unwrap();
    let fits = NewJob::new("fits").unwrap().payload(vec![7; 64 << 10]);
    assert_eq!(store.enqueue_many(&[fits]).unwrap(), vec![true]);
    let too_big = NewJob::new("too-big").unwrap().payload(vec![7; 1 << 20]);
    assert!(matches!(
        store.enqueue_many(&[too_big]),
        Err(Error::StorageFull { .. })
    ));
    let ids: Vec<String> = db.rows().into_iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        ["fits", "j"],
        "the job that fits is stored, the one too big is not"
    );
}

/// Makes `path` unwritable for this process until dropped: by its mode, or — for root, whom
/// modes do not stop — with the immutable attribute (`chattr +i`).
struct Unwritable {
    path: PathBuf,
    mode: u32,
    immutable: bool,
}

impl Unwritable {
    fn new(path: &Path) -> Unwritable {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        let read_only = if path.is_dir() { 0o555 } else { 0o444 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(read_only)).unwrap();
        let probe = if path.is_dir() {
            std::fs::write(path.join(".probe"), b"").is_err()
        } else {
            std::fs::OpenOptions::new().append(true).open(path).is_err()
        };
        let mut guard = Unwritable {
            path: path.to_owned(),
            mode,
            immutable: false,
        };
        if !probe {
            let _ = std::fs::remove_file(path.join(".probe"));
            let status = Command::new("chattr").arg("+i").arg(path).status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "running as root and `chattr +i {}` failed: cannot make a read-only file here",
                path.display()
            );
            guard.immutable = true;
        }
        guard
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.immutable {
            let _ = Command::new("chattr").arg("-i").arg(&self.path).status();
        }
        let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(self.mode));
    }
}

#[test]
fn a_read_only_file_is_a_read_only_error_and_changes_nothing() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "j").unwrap();
    let before = db.bytes();
    let w = Owner::new("w").unwrap();
    {
        let _fault = Unwritable::new(&db.path);
        let err = SqliteStore::open(&db.path)
            .and_then(|s| s.claim_fence(job("j"), w, now(0.0), ttl(10.0)))
            .unwrap_err();
        assert!(matches!(err, Error::ReadOnly { .. }), "{err:?}");
        assert!(err.to_string().contains("read-only"), "{err}");
        let err = leasefence::claim(&db.path, "j", "w", 0.0, 10.0).unwrap_err();
        assert!(matches!(err, Error::ReadOnly { .. }), "{err:?}");
    }
    assert_eq!(db.bytes(), before, "the file is byte for byte as it was");
    assert_eq!(db.row("j").unwrap(), Row::fresh("j"));
    // writable again: the same operations go through
    let store = SqliteStore::open(&db.path).unwrap();
    assert_eq!(
        store.claim_fence(job("j"), w, now(0.0), ttl(10.0)).unwrap(),
        Some(1)
    );
}

#[test]
fn a_read_only_folder_refuses_a_new_database_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ro");
    std::fs::create_dir(&folder).unwrap();
    let path = folder.join("jobs.db");
    {
        let _fault = Unwritable::new(&folder);
        let err = leasefence::init_db(&path).unwrap_err();
        assert!(
            matches!(err, Error::CannotOpen { .. } | Error::ReadOnly { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("jobs.db"), "{err}");
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
    }
    leasefence::init_db(&path).unwrap();
    assert!(leasefence::enqueue(&path, "j").unwrap());
}

#[test]
fn a_database_locked_past_the_busy_timeout_is_busy_and_retrying_later_works() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "j").unwrap();
    let store = SqliteOptions::new()
        .busy_timeout(Duration::from_millis(50))
        .open(&db.path)
        .unwrap();
    let w = Owner::new("w").unwrap();
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = store
        .claim_fence(job("j"), w, now(0.0), ttl(10.0))
        .unwrap_err();
    assert!(matches!(err, Error::Busy) && err.is_retryable(), "{err:?}");
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(db.row("j").unwrap(), Row::fresh("j"));
    assert_eq!(
        store.claim_fence(job("j"), w, now(0.0), ttl(10.0)).unwrap(),
        Some(1)
    );
}

/// A database with `n` jobs, closed (WAL checkpointed into the file), and a backup copy.
fn closed_db_with_jobs(n: usize) -> (Db, Vec<u8>) {
    let db = Db::new();
    let store = SqliteStore::open(&db.path).unwrap();
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            NewJob::new(format!("job-{i:04}"))
                .unwrap()
                .payload(vec![1; 200])
        })
        .collect();
    store.enqueue_many(&jobs).unwrap();
    drop(store);
    let backup = db.bytes();
    (db, backup)
}

#[test]
fn a_truncated_file_is_a_clear_error_and_the_backup_works_again() {
    let (db, backup) = closed_db_with_jobs(500);
    assert!(backup.len() > 64 << 10);
    std::fs::write(&db.path, &backup[..backup.len() / 2]).unwrap();
    let truncated = db.bytes();
    let outcome = SqliteStore::open(&db.path).and_then(|s| {
        s.state(job("job-0499"))?;
        s.stats(now(0.0))
    });
    let err = outcome.unwrap_err();
    assert!(
        matches!(err, Error::Corrupt { .. } | Error::NotADatabase { .. }),
        "{err:?}"
    );
    assert_eq!(db.bytes(), truncated, "the damaged file was not written to");
    std::fs::write(&db.path, &backup).unwrap();
    let store = SqliteStore::open(&db.path).unwrap();
    assert_eq!(store.stats(now(0.0)).unwrap().ready, 500);
}

#[test]
fn a_corrupt_page_is_a_corrupt_error_naming_the_file() {
    let (db, backup) = closed_db_with_jobs(500);
    let mut bytes = backup.clone();
    let page = 4096;
    // Scribble over every page after the schema's: the tables' b-tree pages.
    for p in (2 * page..bytes.len()).step_by(page) {
        for b in &mut bytes[p..p + 64] {
            *b = 0xA5;
        }
    }
    std::fs::write(&db.path, &bytes).unwrap();
    let outcome = SqliteStore::open(&db.path).and_then(|s| s.stats(now(0.0)));
    let err = outcome.unwrap_err();
    assert!(matches!(&err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert!(
        err.to_string().contains(&db.path.display().to_string()),
        "{err}"
    );
    std::fs::write(&db.path, &backup).unwrap();
    assert_eq!(
        SqliteStore::open(&db.path)
            .unwrap()
            .stats(now(0.0))
            .unwrap()
            .ready,
        500
    );
}

#[test]
fn a_missing_folder_is_cannot_open_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-folder").join("jobs.db");
    for err in [
        leasefence::init_db(&path).unwrap_err(),
        SqliteStore::open(&path).unwrap_err(),
        leasefence::enqueue(&path, "j").unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::CannotOpen { path: p, .. } if p == &path),
            "{err:?}"
        );
    }
    assert!(!dir.path().join("no-such-folder").exists());
    std::fs::create_dir(dir.path().join("no-such-folder")).unwrap();
    assert!(
        leasefence::enqueue(&path, "j").is_err(),
        "no file yet: init first"
    );
    leasefence::init_db(&path).unwrap();
    assert!(leasefence::enqueue(&path, "j").unwrap());
}
