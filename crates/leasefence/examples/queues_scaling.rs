//! What named queues and unique keys cost on SQLite (issue 14's targets): `claim_next` with the
//! jobs spread over 100 queues against all in one, and a unique insert against a plain one.
//!
//! ```sh
//! cargo run --release -p leasefence --example queues_scaling [-- JOBS]
//! ```
//!
//! With `LEASEFENCE_TEST_PG` set (and `--features postgres`) the claim part runs on PostgreSQL
//! too, in a schema of its own that is dropped afterwards.
//!
//! `JOBS` (default 400,000) jobs are built with `synchronous = OFF`; then 2,000
//! claim_next → complete cycles are timed on a kept store, also at `OFF` (the query cost, not
//! the disk's fsync), median of 3 rounds: from every queue, and from one named queue of the
//! hundred (the shape of a worker serving its own queue). Inserts: 5,000 single `enqueue_job`s,
//! plain and with a unique key each, at `OFF` and at `FULL`.

use std::time::Instant;

use leasefence::{NewJob, Now, Owner, Queues, SqliteOptions, Store, Synchronous, Ttl};

const CYCLES: usize = 2_000;
const ROUNDS: usize = 3;
const INSERTS: usize = 5_000;

fn build(path: &std::path::Path, size: usize, queues: usize) -> leasefence::Result<()> {
    let store = SqliteOptions::new()
        .synchronous(Synchronous::Off)
        .open(path)?;
    let mut next = 0;
    while next < size {
        let end = (next + 50_000).min(size);
        let batch: Vec<NewJob> = (next..end)
            .map(|i| NewJob::new(format!("job-{i:08}"))?.queue(format!("q{:03}", i % queues)))
            .collect::<leasefence::Result<_>>()?;
        store.enqueue_many(&batch)?;
        next = end;
    }
    Ok(())
}

fn cycles_per_second(path: &std::path::Path, queues: &Queues) -> leasefence::Result<f64> {
    let store = SqliteOptions::new()
        .synchronous(Synchronous::Off)
        .open(path)?;
    let owner = Owner::new("bench")?;
    let mut t = 10.0;
    let start = Instant::now();
    for _ in 0..CYCLES {
        t += 0.001;
        let lease = store
            .claim_next_in(queues, owner, Now::new(t)?, Ttl::new(60.0)?)?
            .expect("a ready job");
        assert!(store.complete_lease(&lease, Now::new(t)?, "ok")?);
    }
    Ok(CYCLES as f64 / start.elapsed().as_secs_f64())
}

fn inserts_per_second(
    path: &std::path::Path,
    sync: Synchronous,
    unique: bool,
) -> leasefence::Result<f64> {
    let store = SqliteOptions::new().synchronous(sync).open(path)?;
    let start = Instant::now();
    for i in 0..INSERTS {
        let mut job = NewJob::new(format!("ins-{i}"))?.queue("mail")?;
        if unique {
            job = job.unique_key(format!("key-{i}"))?;
        }
        assert!(store.enqueue_job(job)?);
    }
    Ok(INSERTS as f64 / start.elapsed().as_secs_f64())
}

/// The claim part on PostgreSQL: the same three shapes, each in a fresh schema.
#[cfg(feature = "postgres")]
fn postgres(url: &str, size: usize) -> leasefence::Result<()> {
    use leasefence::postgres::{Config, NoTls};
    println!(
        "PostgreSQL: claim_next → complete, {CYCLES} cycles over {size} jobs, median of {ROUNDS} rounds"
    );
    let mut admin = url
        .parse::<Config>()
        .expect("a connection string")
        .connect(NoTls)
        .expect("a connection for the schemas");
    let cases = [
        ("1 queue, every queue", 1, Queues::All),
        ("100 queues, every queue", 100, Queues::All),
        ("100 queues, one named", 100, Queues::only(["q007"])?),
    ];
    let mut base = None;
    for (name, queues, claim_from) in &cases {
        let mut rounds = vec![];
        for round in 0..ROUNDS {
            let schema = format!("lf_queues_{}_{queues}_{round}", std::process::id());
            let store = leasefence::PgOptions::new().schema(&schema).open(url)?;
            let mut next = 0;
            while next < size {
                let end = (next + 20_000).min(size);
                let batch: Vec<NewJob> = (next..end)
                    .map(|i| {
                        NewJob::new(format!("job-{i:08}"))?.queue(format!("q{:03}", i % queues))
                    })
                    .collect::<leasefence::Result<_>>()?;
                store.enqueue_many(&batch)?;
                next = end;
            }
            admin
                .batch_execute(&format!("ANALYZE {schema}.jobs"))
                .expect("analyze");
            let owner = Owner::new("bench")?;
            let mut t = 10.0;
            let start = Instant::now();
            for _ in 0..CYCLES {
                t += 0.001;
                let lease = store
                    .claim_next_in(claim_from, owner, Now::new(t)?, Ttl::new(60.0)?)?
                    .expect("a ready job");
                assert!(store.complete_lease(&lease, Now::new(t)?, "ok")?);
            }
            rounds.push(CYCLES as f64 / start.elapsed().as_secs_f64());
            drop(store);
            admin
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .expect("drop the schema");
        }
        let rate = median(rounds);
        let base_rate = *base.get_or_insert(rate);
        println!(
            "{name:>26}: {rate:>8.0} cycles/s  cost ×{:.2} of 1 queue",
            base_rate / rate
        );
    }
    Ok(())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> leasefence::Result<()> {
    let size: usize = std::env::args()
        .nth(1)
        .map_or(400_000, |a| a.parse().expect("JOBS is an integer"))
        .max(CYCLES * 200);
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "claim_next → complete, {CYCLES} cycles over {size} jobs, median of {ROUNDS} rounds, synchronous=OFF"
    );
    let cases = [
        ("1 queue, every queue", 1, Queues::All),
        ("100 queues, every queue", 100, Queues::All),
        ("100 queues, one named", 100, Queues::only(["q007"])?),
    ];
    let mut base = None;
    for (name, queues, claim_from) in &cases {
        let mut rounds = vec![];
        for round in 0..ROUNDS {
            let path = dir.path().join(format!("c-{queues}-{round}.db"));
            build(&path, size, *queues)?;
            rounds.push(cycles_per_second(&path, claim_from)?);
            let _ = std::fs::remove_file(&path);
        }
        let spread = rounds.iter().copied().fold(f64::NAN, f64::max)
            - rounds.iter().copied().fold(f64::NAN, f64::min);
        let rate = median(rounds);
        let base_rate = *base.get_or_insert(rate);
        println!(
            "{name:>26}: {rate:>8.0} cycles/s (spread {spread:.0})  cost ×{:.2} of 1 queue",
            base_rate / rate
        );
    }
    println!("enqueue_job, {INSERTS} single inserts, median of {ROUNDS} rounds");
    for sync in [Synchronous::Off, Synchronous::Full] {
        let mut plain = vec![];
        let mut unique = vec![];
        for round in 0..ROUNDS {
            // Alternating, each on a fresh file.
            let p = dir.path().join(format!("p-{sync:?}-{round}.db"));
            plain.push(inserts_per_second(&p, sync, false)?);
            let u = dir.path().join(format!("u-{sync:?}-{round}.db"));
            unique.push(inserts_per_second(&u, sync, true)?);
        }
        let (plain, unique) = (median(plain), median(unique));
        println!(
            "{:>26}: plain {plain:>8.0}/s, unique {unique:>8.0}/s  cost ×{:.2}",
            format!("{sync:?}"),
            plain / unique
        );
    }
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("LEASEFENCE_TEST_PG") {
        postgres(&url, size)?;
    }
    Ok(())
}
