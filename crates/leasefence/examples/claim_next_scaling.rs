//! Measures what `claim_next` costs as the queue grows: 1,000 vs 1,000,000 jobs.
//!
//! ```sh
//! cargo run --release -p leasefence --example claim_next_scaling [-- SIZES...]
//! ```
//!
//! For each size it builds a fresh database (setup with `synchronous = OFF`), then times
//! claim_next → complete cycles on a kept store, in two shapes: every job ready, and all but
//! the last 2,000 already done (the usual shape of a long-lived queue). Commits are made with
//! `synchronous = OFF` too, so the query cost is measured rather than the disk's fsync; the
//! medians of 5 rounds are printed with the ratio to the smallest size.

use std::time::Instant;

use leasefence::{NewJob, Now, Owner, SqliteOptions, Store, Synchronous, Ttl};

const CYCLES: usize = 2_000;
const ROUNDS: usize = 5;

fn build(path: &std::path::Path, size: usize, done_prefix: usize) -> leasefence::Result<()> {
    let store = SqliteOptions::new()
        .synchronous(Synchronous::Off)
        .open(path)?;
    let mut next = 0;
    while next < size {
        let end = (next + 50_000).min(size);
        let batch: Vec<NewJob> = (next..end)
            .map(|i| NewJob::new(format!("job-{i:08}")))
            .collect::<leasefence::Result<_>>()?;
        store.enqueue_many(&batch)?;
        next = end;
    }
    // Finish the oldest `done_prefix` jobs quickly, in large batches.
    let owner = Owner::new("setup")?;
    let mut finished = 0;
    while finished < done_prefix {
        let n = (done_prefix - finished).min(10_000);
        for lease in store.claim_batch(
            owner,
            Now::new(0.0)?,
            Ttl::new(1.0)?,
            leasefence::BatchSize::new(n)?,
        )? {
            store.complete_lease(&lease, Now::new(0.5)?, "")?;
        }
        finished += n;
    }
    Ok(())
}

fn cycles_per_second(path: &std::path::Path) -> leasefence::Result<f64> {
    let store = SqliteOptions::new()
        .synchronous(Synchronous::Off)
        .open(path)?;
    let owner = Owner::new("bench")?;
    let mut t = 10.0;
    let start = Instant::now();
    for _ in 0..CYCLES {
        t += 0.001;
        let lease = store
            .claim_next(owner, Now::new(t)?, Ttl::new(60.0)?)?
            .expect("a ready job");
        assert!(store.complete_lease(&lease, Now::new(t)?, "ok")?);
    }
    Ok(CYCLES as f64 / start.elapsed().as_secs_f64())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> leasefence::Result<()> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("sizes are integers"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 1_000_000]
    } else {
        sizes
    };
    let dir = tempfile::tempdir().expect("tempdir");
    println!("claim_next → complete, {CYCLES} cycles, median of {ROUNDS} rounds, synchronous=OFF");
    for (shape, keep_ready) in [("all ready", None), ("all but 2,000 done", Some(CYCLES))] {
        let mut base = None;
        for &size in &sizes {
            let size = size.max(CYCLES);
            let mut rounds = vec![];
            for round in 0..ROUNDS {
                let path = dir
                    .path()
                    .join(format!("q-{size}-{round}-{}.db", keep_ready.is_some()));
                let done = keep_ready.map_or(0, |k| size - k);
                if round == 0 {
                    eprint!("building {size} jobs ({shape})… ");
                }
                let started = Instant::now();
                build(&path, size, done)?;
                if round == 0 {
                    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
                }
                rounds.push(cycles_per_second(&path)?);
                let _ = std::fs::remove_file(&path);
                if size >= 100_000 && round >= 2 {
                    break; // big builds are slow; three rounds are enough there
                }
            }
            let per_sec = median(rounds);
            let base_rate = *base.get_or_insert(per_sec);
            println!(
                "{shape:>20} {size:>9} jobs: {per_sec:>8.0} cycles/s  cost ×{:.2} of the smallest",
                base_rate / per_sec
            );
        }
    }
    Ok(())
}
