//! Unit tests of the group commit's queue: the deadline of a call waiting for a leader.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Instant;

use super::*;
use crate::SqliteOptions;

const BUSY_TIMEOUT: Duration = Duration::from_millis(200);

/// A grouping store on a scratch file, with a short busy timeout, and its queue.
fn grouping() -> (tempfile::TempDir, SqliteStore, Arc<CommitQueue>) {
    let dir = tempfile::tempdir().unwrap();
    let store = grouping_at(&dir.path().join("q.db"), BUSY_TIMEOUT);
    let queue = store.group.clone().expect("group commit is on");
    (dir, store, queue)
}

fn grouping_at(path: &std::path::Path, busy_timeout: Duration) -> SqliteStore {
    SqliteOptions::new()
        .group_commit(true)
        .busy_timeout(busy_timeout)
        .open(path)
        .unwrap()
}

/// The answer of the call `handle` runs, which must come within 10 s (a call waiting
/// forever fails the test instead of hanging it).
fn answer<T>(handle: thread::JoinHandle<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !handle.is_finished() {
        assert!(Instant::now() < deadline, "no answer within 10 s");
        thread::sleep(Duration::from_millis(1));
    }
    handle.join().unwrap()
}

/// Waits (10 s at most) until `queue` has `n` calls waiting.
fn await_waiting(queue: &CommitQueue, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while queue.stats().waiting != n {
        assert!(Instant::now() < deadline, "{:?}", queue.stats());
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_call_no_leader_takes_within_the_busy_timeout_leaves_the_queue_unrun_and_is_busy() {
    let (_dir, store, queue) = grouping();
    // A leader that never comes round to the call.
    queue.lock().leading = true;
    let ran = Arc::new(AtomicBool::new(false));
    let call = {
        let ran = ran.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let answer = store.grouped(move |_| {
                ran.store(true, Ordering::SeqCst);
                Ok(())
            });
            (answer, started.elapsed())
        })
    };
    let (answer, waited) = answer(call);
    assert!(matches!(answer, Err(Error::Busy)), "{answer:?}");
    assert!(waited >= BUSY_TIMEOUT, "gave up after {waited:?}");
    assert!(!ran.load(Ordering::SeqCst), "a withdrawn call never runs");
    let stats = queue.stats();
    assert_eq!((stats.waiting, stats.calls), (0, 0), "{stats:?}");
}

#[test]
fn a_caller_that_gives_up_withdraws_its_own_call_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let limit = Duration::from_secs(1);
    let (first, second) = (grouping_at(&path, limit), grouping_at(&path, limit));
    let queue = first.group.clone().unwrap();
    queue.lock().leading = true;
    let first_joined = Instant::now();
    let first = thread::spawn(move || first.grouped(|_| Ok(1)));
    await_waiting(&queue, 1);
    // The second joins half a limit later, so it is still waiting when the first gives up.
    while first_joined.elapsed() < limit / 2 {
        thread::sleep(Duration::from_millis(5));
    }
    let second = thread::spawn(move || second.grouped(|_| Ok(2)));
    await_waiting(&queue, 2);
    assert!(matches!(answer(first), Err(Error::Busy)));
    assert_eq!(queue.stats().waiting, 1, "the second call is still queued");
    assert!(matches!(answer(second), Err(Error::Busy)));
    assert_eq!(queue.stats().waiting, 0);
}

#[test]
fn a_call_a_leader_has_taken_gets_its_answer_even_past_the_busy_timeout() {
    let (dir, store, queue) = grouping();
    // The test leads: it takes the call and answers it only after the caller's busy
    // timeout has passed.
    queue.lock().leading = true;
    let leader = SqliteOptions::new()
        .group_commit(true)
        .busy_timeout(BUSY_TIMEOUT)
        .open(dir.path().join("q.db"))
        .unwrap();
    let joined = Instant::now();
    let call = thread::spawn(move || store.grouped(|_| Ok(7)));
    await_waiting(&queue, 1);
    let mut calls = queue.take();
    while joined.elapsed() < BUSY_TIMEOUT * 2 {
        // The caller's deadline passes while its call is taken.
        thread::sleep(Duration::from_millis(5));
    }
    assert!(calls[0].run(&leader));
    queue.pass_lead();
    calls.into_iter().for_each(|c| c.answer());
    assert_eq!(answer(call).unwrap(), 7);
    assert!(!queue.stats().leading);
}
