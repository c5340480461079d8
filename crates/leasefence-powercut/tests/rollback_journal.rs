//! A power cut right after an acknowledged claim on a database in rollback-journal mode.
//!
//! The contract lets any file with the six-column `jobs` table be used ("a stock `sqlite3` shell
//! can read them"), and every call that opens an existing file (`claim(path, …)`, the CLI, the
//! worker) opens it with `init(false)`, which leaves the journal mode as it is. A file made by
//! the `sqlite3` shell is in `journal_mode = DELETE`. There a commit at `synchronous = FULL` ends
//! with the unlink of the journal, and SQLite syncs the folder after that unlink only at `EXTRA`
//! (pager.c: `sqlite3OsDelete(…, pPager->extraSync)`): a power cut can bring the journal back,
//! hot, and the next open rolls the acknowledged commit back — the claim's fence is forgotten
//! and handed out again.
//!
//! The simulated disk models the folder: an unlink not followed by a sync of the folder may be
//! undone by the cut.

use leasefence::rusqlite::Connection;
use leasefence::{JobId, Now, Owner, SqliteOptions, Store, Ttl};
use leasefence_powercut::PowerCut;

#[test]
fn full_keeps_an_acknowledged_claim_on_a_rollback_journal_file() {
    let base = leasefence_powercut::seed();
    let mut lost = vec![];
    for i in 0..16 {
        let seed = base.wrapping_add(i);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        // The file as the stock `sqlite3` shell makes it: the contract's table, rollback journal.
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "PRAGMA journal_mode = DELETE;
                 CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0,
                   fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0);
                 INSERT INTO jobs(id) VALUES ('a');",
            )
            .unwrap();
        }
        let power = PowerCut::new(dir.path(), seed);
        let fence = {
            // What `leasefence::claim(path, …)` opens: the defaults (FULL), init off.
            let store = SqliteOptions::new().init(false).open(&path).unwrap();
            let journal: String = Connection::open(&path)
                .unwrap()
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(journal, "delete");
            let lease = store
                .claim(
                    JobId::new("a").unwrap(),
                    Owner::new("w1").unwrap(),
                    Now::new(1.0).unwrap(),
                    Ttl::new(60.0).unwrap(),
                )
                .unwrap()
                .expect("a is ready");
            // Acknowledged; the power goes off right after.
            power.cut();
            lease.fence
        };
        let report = power.reboot().unwrap();
        drop(power);
        let conn = leasefence_powercut::open_intact(&path).unwrap();
        let stored: i64 = conn
            .query_row("SELECT fence FROM jobs WHERE id = 'a'", [], |r| r.get(0))
            .unwrap();
        if stored < fence {
            lost.push((seed, fence, stored, report));
        }
    }
    assert!(
        lost.is_empty(),
        "acknowledged claims forgotten after a power cut (seed, fence acknowledged, fence \
         stored, cut): {lost:#?}"
    );
}
