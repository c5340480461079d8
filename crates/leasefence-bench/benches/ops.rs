//! Micro-benchmarks of the hot operations, to catch regressions: `cargo bench -p leasefence-bench`.
//!
//! Commits run with `synchronous = OFF` so that the CPU cost of each operation is measured,
//! not the disk's fsync (the harness, `cargo xtask bench`, measures durable throughput).

// criterion_group! and criterion_main! define undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use leasefence::{JobId, NewJob, Now, Owner, SqliteOptions, SqliteStore, Store, Synchronous, Ttl};

/// A store on a fresh file in `dir` holding `jobs` ready jobs.
fn store(dir: &std::path::Path, name: &str, jobs: usize) -> SqliteStore {
    let store = SqliteOptions::new()
        .synchronous(Synchronous::Off)
        .open(dir.join(name))
        .expect("open");
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| NewJob::new(format!("job-{i:08}")).expect("id"))
        .collect();
    store.enqueue_many(&batch).expect("enqueue");
    store
}

fn ops(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let owner = Owner::new("bench").expect("owner");
    let ttl = Ttl::new(1e6).expect("ttl");
    let mut t = 1.0;
    let mut tick = move || {
        t += 1e-6;
        Now::new(t).expect("now")
    };

    let single = store(dir.path(), "single.db", 1_000_000);
    c.bench_function("claim_next + complete", |b| {
        b.iter(|| {
            let now = tick();
            let lease = single.claim_next(owner, now, ttl).unwrap().expect("ready");
            assert!(single.complete_lease(&lease, now, "ok").unwrap());
        })
    });

    let batched = store(dir.path(), "batch.db", 1_000_000);
    c.bench_function("claim_batch(64) + complete_batch, per batch", |b| {
        b.iter(|| {
            let now = tick();
            let leases = batched
                .claim_batch(owner, now, ttl, leasefence::BatchSize::new(64).unwrap())
                .unwrap();
            let items: Vec<(&leasefence::Lease, &str)> = leases.iter().map(|l| (l, "ok")).collect();
            black_box(batched.complete_batch(&items, now).unwrap());
        })
    });

    let held = store(dir.path(), "held.db", 1);
    let job = JobId::new("job-00000000").expect("id");
    let fence = held
        .claim(job, owner, Now::new(0.5).expect("now"), ttl)
        .unwrap()
        .expect("claimable")
        .fence;
    c.bench_function("renew", |b| {
        b.iter(|| assert!(held.renew(job, owner, fence, tick(), ttl).unwrap()))
    });
    c.bench_function("state", |b| b.iter(|| black_box(held.state(job).unwrap())));

    let mut n = 0u64;
    let sink = store(dir.path(), "enqueue.db", 0);
    c.bench_function("enqueue_many(100)", |b| {
        b.iter_batched(
            || {
                n += 1;
                (0..100)
                    .map(|i| NewJob::new(format!("e-{n}-{i}")).expect("id"))
                    .collect::<Vec<_>>()
            },
            |jobs| black_box(sink.enqueue_many(&jobs).unwrap()),
            BatchSize::SmallInput,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = ops
}
criterion_main!(benches);
