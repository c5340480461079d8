//! A server with fewer connection slots than a fleet of workers would like: every worker must
//! still make progress. Each `Worker::postgres` holds a session of its own for its watch (the
//! `LISTEN` that wakes idle threads) besides the sessions its claims use; after a restart with
//! a small `max_connections`, every worker could take back just its watch's session and wait
//! for another, none of them claiming — found by an outside fault run (two workers, two slots:
//! no job for minutes). The watch now gives its session up while the claims cannot reach the
//! store, and listens again once they can.
//!
//! A private cluster (as in `pg_faults.rs`), restarted with two slots for the workers' role;
//! two workers in this process, one thread each; then jobs enqueued through a superuser's
//! reserved slot must all be completed. Skips with the reason where no cluster can be made
//! (fails with `CI` set).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use leasefence::{JobOutcome, NewJob, PgOptions, Store, Worker};

#[path = "support/cluster.rs"]
mod cluster;
use cluster::{APP, Cluster};

const SCHEMA: &str = "starved";

#[test]
fn workers_on_a_server_short_of_connections_still_complete_every_job() {
    let Some(c) = Cluster::start_or_skip() else {
        return;
    };
    let options = || {
        PgOptions::new()
            .schema(SCHEMA)
            .connect_timeout(Duration::from_secs(2))
    };
    // The workers' role makes (and owns) the schema; the superuser can use it too.
    drop(
        options()
            .open(&c.url(APP))
            .expect("the workers' role makes the schema"),
    );
    let admin = options()
        .open(&c.url("postgres"))
        .expect("the admin's store");
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    let mut handles = Vec::new();
    for name in ["a", "b"] {
        let done = done.clone();
        let worker = Worker::postgres_with(c.url(APP), options())
            .concurrency(1)
            .ttl(5.0)
            .owner_prefix(name)
            // Idle threads poll slowly: the watch is what would take a slot back first.
            .poll_interval(Duration::from_secs(2))
            .on_outcome(move |_, outcome| {
                if matches!(outcome, JobOutcome::Completed) {
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
            .build(|ctx| Ok(ctx.lease().job_id.clone()))
            .expect("build a worker");
        handles.push(worker.shutdown_handle());
        workers.push(std::thread::spawn(move || worker.run()));
    }
    let wait_done = |n: usize, what: &str| {
        let since = Instant::now();
        while done.load(Ordering::SeqCst) < n {
            assert!(
                workers.iter().all(|w| !w.is_finished()),
                "{what}: a worker stopped"
            );
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "{what}: {} of {n} jobs completed in 60 s",
                done.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let jobs = |prefix: &str, n: usize| -> Vec<NewJob> {
        (0..n)
            .map(|i| NewJob::new(format!("{prefix}-{i}")).unwrap())
            .collect()
    };
    admin.enqueue_many(&jobs("warm", 4)).unwrap();
    wait_done(4, "before the restart");

    // Three slots, one of them reserved for superusers: two for the workers' role, which
    // would like four (a watch and a claim session each).
    c.pg_ctl(&[
        "restart",
        "-m",
        "fast",
        "-w",
        "-t",
        "60",
        "-o",
        "-c max_connections=3 -c superuser_reserved_connections=1",
    ])
    .expect("restart with three slots");
    let admin = {
        let since = Instant::now();
        loop {
            match options().open(&c.url("postgres")) {
                Ok(store) => break store,
                Err(e) => {
                    assert!(since.elapsed() < Duration::from_secs(60), "{e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    };
    admin.enqueue_many(&jobs("starved", 20)).unwrap();
    wait_done(24, "on a server with two slots for two workers");

    for handle in handles {
        handle.shutdown();
    }
    for worker in workers {
        worker
            .join()
            .unwrap()
            .expect("the worker stopped on an error");
    }
    let stats = admin.stats(leasefence::Now::new(0.0).unwrap()).unwrap();
    assert_eq!((stats.done, stats.total()), (24, 24));
}
