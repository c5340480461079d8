//! A `jobs` table whose six columns are declared with types that cannot hold what the contract
//! stores (an `INTEGER PRIMARY KEY` id, a `TEXT` lease end) is a schema mismatch, refused
//! before anything is written: the file stays byte for byte as it was. It used to be
//! migrated first (eight tables and thirteen columns added, committed) and then fail with a
//! datatype mismatch. Types of the same affinity as the seed's (`VARCHAR`, `BIGINT`,
//! `DOUBLE`) are a table the store takes and brings up to date.

use leasefence::{Error, SqliteStore};

fn made_with(columns: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE jobs ({columns}); INSERT INTO jobs (id) VALUES (1);"
    ))
    .unwrap();
    drop(conn);
    (dir, path)
}

#[test]
fn mistyped_columns_are_a_schema_mismatch_and_change_nothing() {
    for (columns, named) in [
        (
            "id INTEGER PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, \
             fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0",
            "id INTEGER PRIMARY KEY",
        ),
        (
            "id TEXT PRIMARY KEY, owner TEXT, until TEXT NOT NULL DEFAULT 0, \
             fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0",
            "until TEXT",
        ),
        (
            "id TEXT PRIMARY KEY, owner INTEGER, until REAL NOT NULL DEFAULT 0, \
             fence INTEGER NOT NULL DEFAULT 0, result REAL, done INTEGER NOT NULL DEFAULT 0",
            "owner INTEGER, result REAL",
        ),
    ] {
        let (_dir, path) = made_with(columns);
        let before = std::fs::read(&path).unwrap();
        for attempt in [
            SqliteStore::open(&path).map(drop),
            leasefence::enqueue(&path, "j").map(drop),
            leasefence::state(&path, "1").map(drop),
        ] {
            match attempt {
                Err(Error::SchemaMismatch { detail, .. }) => {
                    assert!(detail.contains(named), "{columns}: {detail}")
                }
                other => panic!("{columns}: expected a schema mismatch, got {other:?}"),
            }
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{columns}: the file changed"
        );
    }
}

#[test]
fn types_of_the_seeds_affinity_are_taken() {
    let (_dir, path) = made_with(
        "id VARCHAR(64) PRIMARY KEY, owner NVARCHAR(100), until DOUBLE NOT NULL DEFAULT 0, \
         fence BIGINT NOT NULL DEFAULT 0, result CLOB, done TINYINT NOT NULL DEFAULT 0",
    );
    assert!(leasefence::enqueue(&path, "j").unwrap());
    assert_eq!(
        leasefence::claim(&path, "j", "w", 0.0, 10.0).unwrap(),
        Some(1)
    );
    assert!(leasefence::complete(&path, "j", "w", 1, 1.0, "r").unwrap());
    let done: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT done FROM jobs WHERE id = 'j'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(done, 1);
}
