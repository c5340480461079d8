//! An outage of the store that only a job's outcome meets — the store goes away while the
//! handler runs, and no claim is made until it is back — is said on the outage target the CLI
//! prints: once as the write is first held up, once as it is answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use crate::defaults::Plain;
use leasefence::{SqliteStore, Store, Worker};

#[test]
fn an_outage_only_the_outcome_write_meets_is_logged_once_as_it_begins_and_ends() {
    let db = Db::new();
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_many(&[job("j")])
        .unwrap();
    let marker = crate::logs::marker("write-outage");
    let logs = crate::logs::capture(&marker);
    let path = db.path.clone();
    // three quick retries (as for a busy store), then three waited out as an outage
    let gone = Arc::new(AtomicUsize::new(6));
    let failing = gone.clone();
    let w = Worker::builder(move || Ok(Plain(SqliteStore::open(&path)?, failing.clone())))
        .owner_prefix(&marker)
        .poll_interval(Duration::from_millis(2))
        .drain(true)
        .build(|_ctx| Ok("stored".to_owned()))
        .unwrap();
    let stats = w.run().expect("run ends without an error");
    assert_eq!(gone.load(Ordering::SeqCst), 0, "six tries failed");
    assert_eq!((stats.completed, stats.errors), (1, 6), "{stats:?}");
    let row = db.row("j").unwrap();
    assert_eq!((row.done, row.result.as_deref()), (1, Some("stored")));
    let began = logs.with("the store cannot be reached to write a job's outcome");
    assert_eq!(began.len(), 1, "{began:?}");
    assert!(
        began[0].contains("WARN")
            && began[0].contains(leasefence::OUTAGE_TARGET)
            && began[0].contains("connection refused (os error 111)"),
        "{began:?}"
    );
    let ended = logs.with("the store answers again: the job's outcome is written");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(
        ended[0].contains(leasefence::OUTAGE_TARGET) && ended[0].contains("seconds="),
        "{ended:?}"
    );
}
