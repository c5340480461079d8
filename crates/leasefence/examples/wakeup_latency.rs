//! Enqueue-to-handler-start latency of an idle worker, on SQLite and (with
//! `LEASEFENCE_TEST_PG` set) PostgreSQL: the store's watch wakes the worker instead of its
//! 500 ms poll. A probe for `docs/benchmarks.md`, not a timed test.
//!
//! ```sh
//! LEASEFENCE_TEST_PG='host=127.0.0.1 user=postgres dbname=test' \
//!   cargo run --release -p leasefence --features postgres --example wakeup_latency
//! ```
//!
//! Each round waits until the worker is idle (its last job stored, then 20 ms), enqueues one
//! job from another store and measures until the handler starts. The poll interval is left at
//! its default (500 ms): without the watch, the expected p50 would be about 250 ms.

use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use leasefence::{NewJob, Store, Worker};

const ROUNDS: usize = 200;

fn measure<S: Store + Send + 'static>(
    name: &str,
    enqueuer: &dyn Store,
    builder: leasefence::WorkerBuilder<S>,
) -> Result<(), leasefence::Error> {
    let (started_tx, started) = channel::<Instant>();
    let started_tx = std::sync::Mutex::new(started_tx);
    let worker = builder.build(move |_ctx| {
        let _ = started_tx.lock().unwrap().send(Instant::now());
        Ok(String::new())
    })?;
    let handle = worker.shutdown_handle();
    let run = std::thread::spawn(move || worker.run());
    let mut latencies = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis(20)); // idle again
        let sent = Instant::now();
        enqueuer.enqueue_job(NewJob::new(format!("{name}-{i}"))?)?;
        let start = started
            .recv_timeout(Duration::from_secs(10))
            .expect("the handler started");
        latencies.push(start.duration_since(sent).as_secs_f64() * 1000.0);
    }
    handle.shutdown();
    run.join().expect("the worker thread")?;
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "{name}: enqueue → handler start over {ROUNDS} jobs: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
    Ok(())
}

fn main() -> Result<(), leasefence::Error> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("jobs.db");
    let enqueuer = leasefence::SqliteStore::open(&path)?;
    measure("SQLite (FULL)", &enqueuer, Worker::sqlite(&path))?;

    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("LEASEFENCE_TEST_PG") {
        let schema = format!("lf_wakeup_{}", std::process::id());
        let options = leasefence::PgOptions::new().schema(&schema);
        let enqueuer = options.open(&url)?;
        let result = measure(
            "PostgreSQL",
            &enqueuer,
            Worker::postgres_with(url.clone(), options),
        );
        let mut client: leasefence::postgres::Client = url
            .parse::<leasefence::postgres::Config>()
            .expect("a connection string")
            .connect(leasefence::postgres::NoTls)
            .expect("a connection to drop the schema");
        client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .expect("drop the schema");
        result?;
    }
    Ok(())
}
