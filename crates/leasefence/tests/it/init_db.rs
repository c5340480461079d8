//! Step 1 — `init_db` creates the table idempotently and never resets a row.

use crate::common::*;
use leasefence::{Error, JobId, SqliteOptions, Store, Synchronous};

#[test]
fn creates_the_six_columns_as_the_sqlite3_shell_sees_them() {
    let db = Db::empty();
    leasefence::init_db(&db.path).unwrap();
    // cid|name|type|notnull|dflt_value|pk
    let info = sqlite3(&db.path, "PRAGMA table_info(jobs);");
    let lines: Vec<&str> = info.lines().collect();
    // the contract's six, first and exactly so; the queue's own columns follow
    assert_eq!(
        lines[..6],
        [
            "0|id|TEXT|0||1",
            "1|owner|TEXT|0||0",
            "2|until|REAL|1|0|0",
            "3|fence|INTEGER|1|0|0",
            "4|result|TEXT|0||0",
            "5|done|INTEGER|1|0|0",
        ]
    );
    // A row inserted by the shell gets the contract's defaults.
    sqlite3(&db.path, "INSERT INTO jobs (id) VALUES ('from-shell');");
    assert_eq!(db.row("from-shell"), Some(Row::fresh("from-shell")));
    assert_eq!(
        leasefence::state(&db.path, "from-shell").unwrap(),
        Some(Row::fresh("from-shell").as_state())
    );
}

#[test]
fn running_it_again_never_resets_a_row_above_all_a_fence() {
    let db = Db::new();
    let p = &db.path;
    leasefence::enqueue(p, "a").unwrap();
    leasefence::enqueue(p, "b").unwrap();
    let f1 = leasefence::claim(p, "a", "w1", 0.0, 10.0).unwrap().unwrap();
    assert!(leasefence::release(p, "a", "w1", f1).unwrap());
    let f2 = leasefence::claim(p, "a", "w2", 1.0, 10.0).unwrap().unwrap();
    let fb = leasefence::claim(p, "b", "w3", 1.0, 10.0).unwrap().unwrap();
    assert!(leasefence::complete(p, "b", "w3", fb, 2.0, "B done").unwrap());
    let before = db.rows();
    assert_eq!(before.len(), 2);

    // A worker restart: init again, twice, also through a kept store.
    leasefence::init_db(p).unwrap();
    leasefence::init_db(p).unwrap();
    drop(leasefence::SqliteStore::open(p).unwrap());
    assert_eq!(db.rows(), before);

    // The old fence stays stale, and the next claim continues the sequence.
    assert!(!leasefence::renew(p, "a", "w1", f1, 3.0, 10.0).unwrap());
    assert!(leasefence::renew(p, "a", "w2", f2, 3.0, 10.0).unwrap());
    let f3 = leasefence::claim(p, "a", "w4", 13.0, 10.0)
        .unwrap()
        .unwrap();
    assert_eq!((f1, f2, f3), (1, 2, 3));
}

#[test]
fn switches_the_file_to_wal_and_commits_durably_by_default() {
    let db = Db::new();
    assert_eq!(sqlite3(&db.path, "PRAGMA journal_mode;").trim(), "wal");
    let store = leasefence::SqliteStore::open(&db.path).unwrap();
    assert_eq!(store.synchronous().unwrap(), Synchronous::Full);
    let relaxed = SqliteOptions::new()
        .synchronous(Synchronous::Normal)
        .open(&db.path)
        .unwrap();
    assert_eq!(relaxed.synchronous().unwrap(), Synchronous::Normal);
}

/// A file in rollback-journal mode (as the `sqlite3` shell makes it), opened without init, keeps
/// its mode; at FULL its commits run at SQLite's EXTRA, which syncs the folder after the
/// journal's unlink that commits (at FULL a power cut can bring the journal back and roll an
/// acknowledged commit back: `leasefence-powercut`'s `rollback_journal`). A WAL file keeps FULL.
#[test]
fn a_rollback_journal_file_commits_at_extra_and_a_wal_file_at_full() {
    let level = |path: &std::path::Path| {
        let store = SqliteOptions::new().init(false).open(path).unwrap();
        let (job, w) = (
            JobId::new("a").unwrap(),
            leasefence::Owner::new("w").unwrap(),
        );
        let lease = store
            .claim(job, w, now(0.0), leasefence::Ttl::new(60.0).unwrap())
            .unwrap()
            .unwrap();
        let level = store
            .complete_with(&lease, now(1.0), "done", |conn| {
                conn.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))
                    .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
            })
            .unwrap();
        (level, store.synchronous().unwrap())
    };
    let shell = Db::empty();
    sqlite3(
        &shell.path,
        "CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, \
         fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0); \
         INSERT INTO jobs(id) VALUES ('a');",
    );
    assert_eq!(level(&shell.path), (Some(3), Synchronous::Full), "EXTRA");
    assert_eq!(
        sqlite3(&shell.path, "PRAGMA journal_mode;").trim(),
        "delete"
    );
    let wal = Db::new();
    leasefence::enqueue(&wal.path, "a").unwrap();
    assert_eq!(level(&wal.path), (Some(2), Synchronous::Full), "FULL");
}

#[test]
fn refuses_a_file_that_is_not_sqlite_and_leaves_it_unmodified() {
    let db = Db::empty();
    let junk = b"this is a text file, not a database\n".repeat(200);
    std::fs::write(&db.path, &junk).unwrap();
    let err = leasefence::init_db(&db.path).unwrap_err();
    assert!(matches!(err, Error::NotADatabase { .. }), "{err:?}");
    assert!(err.to_string().contains("not an SQLite database"), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(db.bytes(), junk);
    // Every other operation refuses it the same way.
    assert!(matches!(
        leasefence::enqueue(&db.path, "a"),
        Err(Error::NotADatabase { .. })
    ));
    assert!(matches!(
        leasefence::claim(&db.path, "a", "w", 0.0, 1.0),
        Err(Error::NotADatabase { .. })
    ));
    assert_eq!(db.bytes(), junk);
    assert!(!db.path.with_extension("db-wal").exists());
}

#[test]
fn refuses_a_jobs_table_lacking_a_column_and_leaves_the_file_unmodified() {
    for missing in ["id", "owner", "until", "fence", "result", "done"] {
        let db = Db::empty();
        let columns: Vec<&str> = [
            "id TEXT PRIMARY KEY",
            "owner TEXT",
            "until REAL NOT NULL DEFAULT 0",
            "fence INTEGER NOT NULL DEFAULT 0",
            "result TEXT",
            "done INTEGER NOT NULL DEFAULT 0",
        ]
        .into_iter()
        .filter(|c| !c.starts_with(&format!("{missing} ")))
        .collect();
        sqlite3(
            &db.path,
            &format!("CREATE TABLE jobs ({}); ", columns.join(", ")),
        );
        let bytes = db.bytes();
        let err = leasefence::init_db(&db.path).unwrap_err();
        match &err {
            Error::SchemaMismatch { detail, .. } => {
                assert!(detail.contains(missing), "{detail}")
            }
            other => panic!("expected a schema mismatch for `{missing}`, got {other:?}"),
        }
        assert_eq!(db.bytes(), bytes, "file modified (missing {missing})");
        assert_eq!(sqlite3(&db.path, "PRAGMA journal_mode;").trim(), "delete");
        let err = leasefence::enqueue(&db.path, "a").unwrap_err();
        assert!(matches!(err, Error::SchemaMismatch { .. }), "{err:?}");
        assert_eq!(db.bytes(), bytes);
    }
}

#[test]
fn accepts_a_table_with_extra_columns_and_keeps_them() {
    let db = Db::empty();
    sqlite3(
        &db.path,
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, \
         fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0, \
         note TEXT); INSERT INTO jobs (id, fence, note) VALUES ('old', 7, 'kept');",
    );
    leasefence::init_db(&db.path).unwrap();
    assert_eq!(
        leasefence::claim(&db.path, "old", "w", 0.0, 1.0).unwrap(),
        Some(8)
    );
    assert_eq!(
        sqlite3(&db.path, "SELECT note, fence FROM jobs;").trim(),
        "kept|8"
    );
}

#[test]
fn a_missing_folder_is_a_clear_error() {
    let db = Db::empty();
    let path = db
        .path
        .parent()
        .unwrap()
        .join("no-such-folder")
        .join("jobs.db");
    let err = leasefence::init_db(&path).unwrap_err();
    assert!(matches!(err, Error::CannotOpen { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-folder"), "{err}");
    assert!(!path.parent().unwrap().exists());
}

#[test]
fn operations_before_init_are_errors_and_create_nothing() {
    let db = Db::empty();
    let err = leasefence::enqueue(&db.path, "a").unwrap_err();
    assert!(matches!(err, Error::CannotOpen { .. }), "{err:?}");
    let err = leasefence::state(&db.path, "a").unwrap_err();
    assert!(matches!(err, Error::CannotOpen { .. }), "{err:?}");
    assert!(!db.path.exists(), "a failed call must not create the file");

    // An SQLite file without the table: a schema error, and still no table.
    sqlite3(&db.path, "CREATE TABLE other (x);");
    let bytes = db.bytes();
    for err in [
        leasefence::enqueue(&db.path, "a").unwrap_err(),
        leasefence::claim(&db.path, "a", "w", 0.0, 1.0).unwrap_err(),
        leasefence::state(&db.path, "a").unwrap_err(),
    ] {
        match err {
            Error::SchemaMismatch { detail, .. } => assert!(detail.contains("init"), "{detail}"),
            other => panic!("expected a schema mismatch, got {other:?}"),
        }
    }
    assert_eq!(db.bytes(), bytes);
}

#[test]
fn a_store_reports_its_path_and_each_durability_level() {
    let db = Db::new();
    let store = leasefence::SqliteStore::open(&db.path).unwrap();
    assert_eq!(store.path(), db.path.as_path());
    let debug = format!("{store:?}");
    assert!(debug.starts_with("SqliteStore"), "{debug}");
    assert!(debug.contains(&format!("{:?}", db.path)), "{debug}");
    for level in [Synchronous::Off, Synchronous::Normal, Synchronous::Full] {
        let store = SqliteOptions::new()
            .synchronous(level)
            .open(&db.path)
            .unwrap();
        assert_eq!(store.synchronous().unwrap(), level);
    }
    assert_eq!(
        SqliteOptions::default()
            .open(&db.path)
            .unwrap()
            .synchronous()
            .unwrap(),
        Synchronous::Full
    );
}

#[test]
fn a_journal_that_cannot_be_opened_is_a_cannot_open_error() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "job").unwrap();
    // Every connection is closed, so the WAL file is gone; a folder now stands in its way.
    let wal = db.path.with_extension("db-wal");
    assert!(!wal.exists());
    std::fs::create_dir(&wal).unwrap();
    let bytes = db.bytes();
    for err in [
        leasefence::init_db(&db.path).unwrap_err(),
        leasefence::state(&db.path, "job").unwrap_err(),
    ] {
        match &err {
            Error::CannotOpen { path, .. } => assert_eq!(path, &db.path),
            other => panic!("expected CannotOpen, got {other:?}"),
        }
        assert!(!err.is_retryable());
    }
    assert_eq!(db.bytes(), bytes);
}

// ─── Migrations: opening an older file upgrades it without touching a row ───────────────────

#[test]
fn a_six_column_database_is_upgraded_without_touching_a_row() {
    let db = Db::empty();
    sqlite3(
        &db.path,
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, \
         fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0); \
         INSERT INTO jobs VALUES ('a', 'w', 50.0, 7, NULL, 0), ('b', 'v', 3.0, 2, 'r', 1);",
    );
    let before = db.rows();
    // any operation upgrades it, even one that only reads; the six columns stay as they were
    assert_eq!(leasefence::state(&db.path, "a").unwrap().unwrap().fence, 7);
    assert_eq!(db.rows(), before);
    assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "7");
    assert_eq!(db.queue_row("a").priority, 0);
    // The lease held across the upgrade has an open attempt in the ledger, claimed at an
    // unknown time; the finished job has none.
    let held = Probe::attempts(&db, "a");
    assert_eq!(
        held.iter().map(|a| a.brief()).collect::<Vec<_>>(),
        [(7, "w", None)]
    );
    assert!(!held[0].claimed && !held[0].ended);
    assert_eq!(Probe::attempts(&db, "b"), []);
    // a job finished before the upgrade gets its lease end as finish time, an upper bound
    assert_eq!(db.queue_row("b").finished_at, Some(3.0));
    assert_eq!(db.queue_row("a").finished_at, None);
    let s = open(&db);
    assert_eq!(s.purge(now(3.0)).unwrap(), 0);
    assert_eq!(s.purge(now(3.5)).unwrap(), 1);
    assert_eq!(
        s.claim_next(owner("x"), now(50.0), ttl(1.0))
            .unwrap()
            .unwrap()
            .fence,
        8
    );
}

#[test]
fn an_up_to_date_file_is_opened_and_read_while_another_connection_holds_the_write_lock() {
    let db = Db::new();
    leasefence::enqueue(&db.path, "j").unwrap();
    let blocker = db.raw();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    // Nothing to migrate, so opening takes no write lock: a reader (`leasefence list`
    // beside running workers) is never blocked by a writer.
    let s = leasefence::SqliteOptions::new()
        .busy_timeout(std::time::Duration::from_millis(100))
        .open(&db.path)
        .unwrap();
    assert_eq!(
        s.state(JobId::new("j").unwrap()).unwrap(),
        Some(Row::fresh("j").as_state())
    );
    assert_eq!(s.stats(now(0.0)).unwrap().ready, 1);
    assert_eq!(
        leasefence::state(&db.path, "j").unwrap(),
        Some(Row::fresh("j").as_state())
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "7");
}

/// A version-2 file (the queue schema, whose fence counted the attempts) gets the attempts
/// counter filled from the fence, so a job keeps exactly the budget it had left.
#[test]
fn a_version_2_file_gets_its_attempts_counted_from_the_fence() {
    let db = Db::empty();
    let v2 = format!(
        "\n{}\n{}\nPRAGMA user_version = 2;\n\
         INSERT INTO jobs (id, owner, until, fence, max_attempts) VALUES \
           ('spent', 'w', 50.0, 3, 3), ('one-left', NULL, 0, 2, 3), ('unlimited', NULL, 0, 4, 0);",
        include_str!("../../src/sqlite/migrations/0001_jobs.sql"),
        include_str!("../../src/sqlite/migrations/0002_queue.sql"),
    );
    sqlite3(&db.path, &v2);
    let before = db.rows();
    let s = open(&db);
    assert_eq!(db.rows(), before, "the six columns are untouched");
    assert_eq!(sqlite3(&db.path, "PRAGMA user_version;").trim(), "7");
    let attempts: Vec<i64> = ["spent", "one-left", "unlimited"]
        .iter()
        .map(|id| db.queue_row(id).attempts)
        .collect();
    assert_eq!(attempts, [3, 2, 4]);
    // one-left gets its third and last attempt; spent is buried once its lease ran out.
    let lease = s
        .claim_next(owner("x"), now(50.0), ttl(1.0))
        .unwrap()
        .unwrap();
    assert_eq!(
        (lease.job_id.as_str(), lease.fence, lease.attempt),
        ("one-left", 3, 3)
    );
    assert!(lease.is_last_attempt());
    assert_eq!(db.queue_row("spent").outcome.as_deref(), Some("dead"));
}

#[test]
fn a_users_own_column_of_the_same_name_is_kept() {
    let db = Db::empty();
    sqlite3(
        &db.path,
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, \
         fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0, \
         priority INTEGER NOT NULL DEFAULT 0); INSERT INTO jobs (id, priority) VALUES ('p', 9);",
    );
    leasefence::init_db(&db.path).unwrap();
    assert_eq!(db.queue_row("p").priority, 9);
    let s = open(&db);
    s.enqueue_many(&[job("q").priority(3)]).unwrap();
    let first = s
        .claim_next(owner("w"), now(0.0), ttl(1.0))
        .unwrap()
        .unwrap();
    assert_eq!(first.job_id, "p");
}

// ─── PostgreSQL: opening a store is its init ────────────────────────────────────────────────

/// The six contract columns as PostgreSQL types them (migrations/0001_jobs.sql).
const PG_SIX_COLUMNS: [&str; 6] = [
    "id TEXT PRIMARY KEY",
    "owner TEXT",
    "until DOUBLE PRECISION NOT NULL DEFAULT 0",
    "fence BIGINT NOT NULL DEFAULT 0",
    "result TEXT",
    "done INTEGER NOT NULL DEFAULT 0",
];

/// A schema of `db` holding only a hand-made `jobs` table with `columns` (no migration
/// record): what an older leasefence, or a user in `psql`, left behind.
fn pg_hand_made_jobs(db: &PgDb, columns: &[&str]) {
    db.exec(&format!(
        "DROP SCHEMA {s} CASCADE; CREATE SCHEMA {s}; CREATE TABLE {s}.jobs ({});",
        columns.join(", "),
        s = db.schema
    ));
}

/// Each column of `jobs` in this schema with its type and default, in order.
fn pg_columns(db: &PgDb) -> Vec<String> {
    let rows = db.query_strings(&format!(
        "SELECT column_name || ' ' || data_type || ' ' || coalesce(column_default, '-') \
         FROM information_schema.columns WHERE table_schema = '{}' AND table_name = 'jobs' \
         ORDER BY ordinal_position",
        db.schema
    ));
    assert!(!rows.is_empty(), "no jobs table");
    rows
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_opening_again_never_resets_a_row_above_all_a_fence() {
    let Some(db) = PgDb::new() else { return };
    let s = db.store();
    s.enqueue_many(&[job("leased"), job("done"), job("fresh")])
        .unwrap();
    db.leased("leased", "w", 7, 50.0);
    db.put(&Row {
        result: Some("r".into()),
        done: 1,
        fence: 7,
        ..Row::fresh("done")
    });
    db.exec("UPDATE jobs SET finished_at = 3 WHERE id = 'done'");
    let before = db.stored();
    // A worker restart: open again, twice, also through AnyStore.
    drop(db.store());
    drop(db.store());
    drop(db.any_store(db.options()));
    assert_eq!(db.stored(), before);
    // A schema whose migration record was lost (as an older leasefence left it) runs every
    // migration again over the full table: still not a row changes.
    let counted = db.store().stats(now(10.0)).unwrap();
    assert_eq!(
        (counted.leased, counted.done, counted.ready, counted.total()),
        (1, 1, 1, 3)
    );
    db.exec("DELETE FROM schema_migrations");
    drop(db.store());
    assert_eq!(db.stored(), before);
    assert_eq!(db.query_i64("SELECT count(*) FROM schema_migrations"), [8]);
    // the counts were kept, not filled again from the jobs: each job is counted once
    assert_eq!(db.store().stats(now(10.0)).unwrap(), counted);
    // The old fence stays stale; the next claim continues the sequence.
    let s = db.store();
    assert!(
        !s.renew(
            JobId::new("leased").unwrap(),
            owner("w"),
            6,
            now(10.0),
            ttl(1.0)
        )
        .unwrap()
    );
    assert_eq!(
        claim_by_name(&s, "leased", "v", 50.0, 10.0).unwrap(),
        Some(8)
    );
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_a_hand_made_six_column_table_is_adopted_without_losing_a_row() {
    let Some(db) = PgDb::new() else { return };
    pg_hand_made_jobs(&db, &PG_SIX_COLUMNS);
    db.exec(&format!(
        "INSERT INTO {}.jobs VALUES ('a', 'w', 50.0, 7, NULL, 0), ('b', 'v', 3.0, 2, 'r', 1)",
        db.schema
    ));
    let rows = db.rows();
    let s = db.store();
    assert_eq!(db.rows(), rows, "a row changed");
    assert_eq!(
        rows,
        [
            Row {
                owner: Some("w".into()),
                until: 50.0,
                fence: 7,
                ..Row::fresh("a")
            },
            Row {
                owner: Some("v".into()),
                until: 3.0,
                fence: 2,
                result: Some("r".into()),
                done: 1,
                ..Row::fresh("b")
            }
        ]
    );
    // The queue columns were added with their defaults; a finished job keeps a finish time.
    let a = db.queue_row("a");
    assert_eq!((a.priority, a.not_before, a.max_attempts), (0, 0.0, 0));
    assert_eq!(db.queue_row("b").finished_at, Some(3.0));
    // The lease held across the upgrade has an open attempt in the ledger, claimed at an
    // unknown time; the finished job has none.
    let held = db.attempts("a");
    assert_eq!(
        held.iter().map(|a| a.brief()).collect::<Vec<_>>(),
        [(7, "w", None)]
    );
    assert!(!held[0].claimed);
    assert_eq!(db.attempts("b"), []);
    // The fence-7 lease is live until 50, then continues at 8, and the ledger records the loss.
    assert_eq!(claim_by_name(&s, "a", "x", 49.0, 10.0).unwrap(), None);
    assert_eq!(claim_by_name(&s, "a", "x", 50.0, 10.0).unwrap(), Some(8));
    assert_eq!(
        db.attempts("a")
            .iter()
            .map(|a| a.brief().2)
            .collect::<Vec<_>>(),
        [Some("lost"), None]
    );
    assert_eq!(db.query_i64("SELECT count(*) FROM schema_migrations"), [8]);
}

/// Opens a store on a hand-made `jobs` table lacking `missing` and checks that it is refused
/// and the schema is left as it was (no column added, no migration recorded, rows kept).
fn pg_refuses_a_jobs_table_lacking(missing: &str) {
    let Some(db) = PgDb::new() else { return };
    let columns: Vec<&str> = PG_SIX_COLUMNS
        .into_iter()
        .filter(|c| !c.starts_with(&format!("{missing} ")))
        .collect();
    pg_hand_made_jobs(&db, &columns);
    let before = pg_columns(&db);
    let err = db
        .options()
        .open(&db.url)
        .map(drop)
        .expect_err(&format!("a jobs table lacking `{missing}` was adopted"));
    assert!(!err.is_retryable(), "{err:?}");
    match &err {
        leasefence::Error::SchemaMismatch { detail, .. } => {
            assert!(detail.contains(missing), "{detail} (missing {missing})")
        }
        other => panic!("a jobs table lacking `{missing}`: {other:?}"),
    }
    assert_eq!(
        pg_columns(&db),
        before,
        "the table was changed (missing {missing})"
    );
    assert_eq!(
        db.query_i64(&format!(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = '{}'",
            db.schema
        )),
        [1],
        "tables were added next to it (missing {missing})"
    );
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_refuses_a_jobs_table_lacking_until_or_done_and_leaves_it_unchanged() {
    for missing in ["until", "done"] {
        pg_refuses_a_jobs_table_lacking(missing);
    }
}

/// Found while porting the SQLite case: PgStore once adopted (and migrated) a table lacking one
/// of these columns; it now checks the six columns before it creates or alters anything.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn on_postgresql_refuses_a_jobs_table_lacking_any_other_column_and_leaves_it_unchanged() {
    for missing in ["id", "owner", "fence", "result"] {
        pg_refuses_a_jobs_table_lacking(missing);
    }
}
