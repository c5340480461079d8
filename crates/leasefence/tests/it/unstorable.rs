//! A result the store cannot hold — a NUL byte, which PostgreSQL text cannot store — is
//! recorded as a failed attempt saying why, and the results written in the same batch are
//! stored: the write of the whole batch failed, so each is written again alone. Before, every
//! job of that batch was left leased to expire and run again, the bad one for ever.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasefence::{JobId, JobOutcome, Lease, ManualClock, NewJob, Now, Status, Store, Worker};

use crate::common::{PgDb, Probe};

fn job(id: &str) -> NewJob {
    NewJob::new(id).unwrap()
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_result_the_store_cannot_hold_fails_its_attempt_and_spares_its_batch() {
    let Some(db) = PgDb::new() else { return };
    let store = db.store();
    // The first claim takes one job; the next ones a batch, whose results are written together.
    store.enqueue_job(job("first").priority(10)).unwrap();
    for id in ["good-1", "bad", "good-2", "good-3"] {
        store.enqueue_job(job(id).max_attempts(1)).unwrap();
    }
    let clock = ManualClock::new(0.0);
    let (log, hook) = {
        let log: Arc<Mutex<Vec<(String, JobOutcome)>>> = Arc::default();
        let into = log.clone();
        (log, move |lease: &Lease, outcome: &JobOutcome| {
            into.lock()
                .unwrap()
                .push((lease.job_id.to_string(), outcome.clone()))
        })
    };
    // Each store of the worker holds one connection, judged by the worker's manual clock.
    let (url, options) = (db.url.clone(), db.options().pool_size(1));
    let w = Worker::builder(move || options.open(&url))
        .clock(clock)
        .owner_prefix("w")
        .poll_interval(Duration::from_millis(2))
        .drain(true)
        .ttl(30.0)
        .on_outcome(hook)
        .build(|ctx| {
            Ok(if ctx.job_id() == "bad" {
                "half\0half".to_owned()
            } else {
                format!("{} done", ctx.job_id())
            })
        })
        .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    let since = Instant::now();
    while !run.is_finished() {
        if since.elapsed() > Duration::from_secs(20) {
            handle.shutdown();
            panic!("the drained run did not end: a job handed out again and again?");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = run.join().unwrap().unwrap();
    assert_eq!(
        (stats.claimed, stats.completed, stats.dead, stats.errors),
        (5, 4, 1, 0),
        "{stats:?}"
    );
    for id in ["first", "good-1", "good-2", "good-3"] {
        let row = db.row(id).unwrap();
        assert_eq!(
            (row.done, row.owner, row.result),
            (1, Some("w-0".to_owned()), Some(format!("{id} done"))),
            "{id}"
        );
    }
    let bad = store
        .inspect(JobId::new("bad").unwrap(), Now::new(0.0).unwrap())
        .unwrap()
        .unwrap();
    let error = bad.error.clone().unwrap_or_default();
    assert!(
        bad.status == Status::Dead
            && bad.state.fence == 1
            && bad.state.result.is_none()
            && error.starts_with("the result could not be stored: ")
            && error.contains("NUL"),
        "{bad:?}"
    );
    let told: Vec<_> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _)| id == "bad")
        .map(|(_, o)| o.clone())
        .collect();
    assert!(
        matches!(told.as_slice(), [JobOutcome::Dead { error: e }] if *e == error),
        "{told:?}"
    );
}
