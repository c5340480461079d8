//! What an error shows of the driver's failure behind it: `Display` gives its message, `Debug`
//! the driver's own `Debug` (the details a bug report needs), and neither ever a password.

use leasefence::{Error, SqliteStore};

#[test]
fn a_driver_failure_shows_its_message_and_its_drivers_debug() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no such folder").join("jobs.db");
    let err = SqliteStore::open(&path).unwrap_err();
    let Error::CannotOpen { source, .. } = &err else {
        panic!("expected CannotOpen, got {err:?}");
    };
    assert!(
        source
            .to_string()
            .starts_with("database error: unable to open database file"),
        "{source}"
    );
    // rusqlite's own Debug: the variant and SQLite's result code.
    let debug = format!("{source:?}");
    assert!(debug.starts_with("SqliteFailure("), "{debug}");
    assert!(debug.contains("code: CannotOpen"), "{debug}");
    assert!(format!("{err:?}").contains(&debug), "{err:?}");
}
