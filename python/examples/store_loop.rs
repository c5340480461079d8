//! The Rust side of `python/bench/bench.py`: the same claim_next → complete loop that the
//! benchmark times through the Python `Store`, on `leasefence::SqliteStore` directly.
//!
//! ```sh
//! CARGO_TARGET_DIR=/tmp/tgt-bench cargo build --release -p leasefence-python --example store_loop
//! store_loop PATH JOBS
//! ```
//!
//! Opens (creating) the SQLite file `PATH` with the default options (`synchronous = FULL`),
//! enqueues `JOBS` jobs `job-000000`… in one transaction (not timed), then times one thread
//! claiming the next ready job and completing it until none is ready. Prints one JSON object on
//! stdout: `{"jobs": …, "seconds": …, "jobs_per_s": …, "synchronous": "FULL"}`; the timing
//! covers the loop only (no process start, open or enqueue).

use std::time::Instant;

use leasefence::{NewJob, Now, Owner, SqliteStore, Store, Synchronous, Ttl};

fn main() -> leasefence::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(jobs), None) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: store_loop PATH JOBS");
        std::process::exit(2);
    };
    let jobs: usize = jobs.parse().unwrap_or_else(|_| {
        eprintln!("JOBS must be a non-negative integer, not {jobs:?}");
        std::process::exit(2);
    });

    let store = SqliteStore::open(&path)?;
    let synchronous = match store.synchronous()? {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
        Synchronous::Off => "OFF",
        _ => "other",
    };
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| NewJob::new(format!("job-{i:06}")))
        .collect::<leasefence::Result<_>>()?;
    store.enqueue_many(&batch)?;

    let (owner, ttl) = (Owner::new("w")?, Ttl::new(30.0)?);
    let mut t = 1.0;
    let mut done = 0usize;
    let start = Instant::now();
    loop {
        t += 0.001;
        let now = Now::new(t)?;
        let Some(lease) = store.claim_next(owner, now, ttl)? else {
            break;
        };
        if store.complete_lease(&lease, now, "ok")? {
            done += 1;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if done != jobs {
        eprintln!("completed {done} of {jobs} jobs");
        std::process::exit(1);
    }
    println!(
        "{{\"jobs\": {jobs}, \"seconds\": {seconds}, \"jobs_per_s\": {}, \"synchronous\": \"{synchronous}\"}}",
        jobs as f64 / seconds
    );
    Ok(())
}
