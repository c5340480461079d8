//! Unit tests of the SQLite watch's parts: the notifier, the registry that shares one value per
//! key, and the watch's own deadline.

use std::thread;
use std::time::Instant;

use super::*;
use crate::SqliteStore;

#[test]
fn a_notification_wakes_a_waiter_and_none_lets_it_wait_out_its_timeout() {
    let notifier = Arc::new(Notifier::default());
    let seen = notifier.generation();
    let started = Instant::now();
    assert!(!notifier.wait_past(seen, Duration::from_millis(50)));
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "waited it out"
    );

    let waiter = {
        let notifier = notifier.clone();
        thread::spawn(move || {
            let started = Instant::now();
            (
                notifier.wait_past(seen, Duration::from_secs(10)),
                started.elapsed(),
            )
        })
    };
    notifier.notify();
    let (woken, waited) = waiter.join().unwrap();
    assert!(woken, "a notification after `seen` wakes it");
    assert!(
        waited < Duration::from_secs(10),
        "woken, not timed out: {waited:?}"
    );
    assert_ne!(notifier.generation(), seen);
    // Already past `seen`: no wait at all.
    assert!(notifier.wait_past(seen, Duration::from_secs(10)));
}

#[test]
fn every_spelling_of_one_file_shares_a_notifier_and_other_files_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    std::fs::write(&a, b"").unwrap();
    std::fs::write(&b, b"").unwrap();
    let spelled = dir.path().join(".").join("a.db");
    assert_eq!(canonical(&spelled), canonical(&a));
    assert_ne!(canonical(&a), canonical(&b));
    let first = notifier(&a);
    assert!(Arc::ptr_eq(&first, &notifier(&spelled)));
    assert!(!Arc::ptr_eq(&first, &notifier(&b)));
}

#[test]
fn the_registry_shares_what_is_in_use_and_forgets_what_is_not() {
    static REGISTRY: Registry<u32, Notifier> = OnceLock::new();
    let entries = || REGISTRY.get().unwrap().lock().unwrap().len();
    let one = shared(&REGISTRY, 1);
    let two = shared(&REGISTRY, 2);
    // Making the value of another key keeps the ones in use.
    assert!(Arc::ptr_eq(&one, &shared(&REGISTRY, 1)));
    assert!(!Arc::ptr_eq(&one, &two));
    assert_eq!(entries(), 2);
    drop(two);
    // A key no longer in use is dropped when the next value is made.
    let _three = shared(&REGISTRY, 3);
    assert_eq!(entries(), 2, "1 and 3 kept, 2 forgotten");
    assert!(Arc::ptr_eq(&one, &shared(&REGISTRY, 1)));
}

#[test]
fn a_watch_with_nothing_written_waits_out_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let mut watch = SqliteWatch::open(&dir.path().join("q.db"), store.notifier.clone()).unwrap();
    let started = Instant::now();
    assert!(!watch.wait(Duration::from_millis(100)).unwrap());
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
}
