//! What the attempt ledger costs (issue 14's target: at most 15 % of single-op throughput at
//! `FULL`): claim_next → complete cycles on a store with the ledger against the same store with
//! its ledger triggers dropped, and what a refused write costs now that it is counted.
//!
//! ```sh
//! cargo run --release -p leasefence --features postgres --example ledger_cost
//! ```
//!
//! With `LEASEFENCE_TEST_PG` set the PostgreSQL part runs too (`synchronous_commit = on`, the
//! store's default), in schemas of its own that are dropped afterwards.
//!
//! Each round times `CYCLES` cycles on a fresh store of `CYCLES` jobs, one thread, once with
//! the ledger and once without, back to back, so drift hits both alike. Printed: each variant's
//! median and spread (min–max) over `ROUNDS` rounds, and the cost as the median (min–max) of the
//! rounds' paired ratios. The refused completes that follow (each job's lease, after it was
//! completed) are counted in the ledger: their rate is printed beside the cycles'.

use std::time::Instant;

use leasefence::{NewJob, Now, Owner, SqliteOptions, Store, Synchronous, Ttl};

const CYCLES: usize = 500;
const ROUNDS: usize = 9;

/// `CYCLES` claim_next → complete cycles, then `CYCLES` refused completes of the stale leases
/// (each job re-claimed after its lease expired): (cycles/s, refused writes/s).
fn run(store: &dyn Store) -> leasefence::Result<(f64, f64)> {
    let jobs: Vec<NewJob> = (0..CYCLES)
        .map(|i| NewJob::new(format!("job-{i:05}")))
        .collect::<leasefence::Result<_>>()?;
    store.enqueue_many(&jobs)?;
    let owner = Owner::new("bench")?;
    let mut leases = Vec::with_capacity(CYCLES);
    let start = Instant::now();
    for i in 0..CYCLES {
        let t = Now::new(10.0 + i as f64 * 0.001)?;
        let lease = store
            .claim_next(owner, t, Ttl::new(60.0)?)?
            .expect("a ready job");
        assert!(store.complete_lease(&lease, t, "ok")?);
        leases.push(lease);
    }
    let cycles = CYCLES as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for lease in &leases {
        assert!(!store.complete_lease(lease, Now::new(20.0)?, "again")?);
    }
    let refused = CYCLES as f64 / start.elapsed().as_secs_f64();
    Ok((cycles, refused))
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn spread(xs: &[f64]) -> (f64, f64) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// Prints one comparison line: medians and spreads of each variant, and the cost as the median
/// (min–max) of the rounds' paired ratios (each round ran both variants back to back).
fn report(name: &str, with: &[f64], without: &[f64]) {
    let (w, wo) = (median(with.to_vec()), median(without.to_vec()));
    let ((a, b), (c, d)) = (spread(with), spread(without));
    let costs: Vec<f64> = with
        .iter()
        .zip(without)
        .map(|(w, wo)| (wo / w - 1.0) * 100.0)
        .collect();
    let (lo, hi) = spread(&costs);
    println!(
        "{name:>18}: with {w:>6.0}/s ({a:.0}–{b:.0}), without {wo:>6.0}/s ({c:.0}–{d:.0})  \
         cost {:+.1} % ({lo:+.1} to {hi:+.1})",
        median(costs.clone())
    );
}

/// The refused completes: counted in the ledger now (a committed write where there was none).
fn report_refused(name: &str, refused: &[f64], cycles: &[f64]) {
    let (a, b) = spread(refused);
    println!(
        "{name:>18}: refused completes {:>6.0}/s ({a:.0}–{b:.0}), {:.1}× the cycle rate",
        median(refused.to_vec()),
        median(refused.to_vec()) / median(cycles.to_vec())
    );
}

fn sqlite(sync: Synchronous) -> leasefence::Result<()> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut with, mut without) = ((vec![], vec![]), (vec![], vec![]));
    for round in 0..ROUNDS {
        for ledger in [true, false] {
            let path = dir.path().join(format!("{round}-{ledger}.db"));
            let store = SqliteOptions::new().synchronous(sync).open(&path)?;
            if !ledger {
                let conn = leasefence::rusqlite::Connection::open(&path).expect("open");
                conn.execute_batch(
                    "DROP TRIGGER attempts_claim; DROP TRIGGER attempts_end; \
                     DROP TRIGGER attempts_prune;",
                )
                .expect("drop the ledger triggers");
            }
            let (cycles, refused) = run(&store)?;
            let into = if ledger { &mut with } else { &mut without };
            into.0.push(cycles);
            into.1.push(refused);
        }
    }
    let name = format!("SQLite {sync:?}");
    report(&name, &with.0, &without.0);
    report_refused(&name, &with.1, &with.0);
    Ok(())
}

#[cfg(feature = "postgres")]
fn postgres(url: &str) -> leasefence::Result<()> {
    use leasefence::postgres::{Config, NoTls};
    let mut admin = url
        .parse::<Config>()
        .expect("a connection string")
        .connect(NoTls)
        .expect("a connection for the schemas");
    let (mut with, mut without) = ((vec![], vec![]), (vec![], vec![]));
    for round in 0..ROUNDS {
        for ledger in [true, false] {
            let schema = format!("lf_ledger_{}_{round}_{ledger}", std::process::id());
            let store = leasefence::PgOptions::new().schema(&schema).open(url)?;
            if !ledger {
                admin
                    .batch_execute(&format!("DROP TRIGGER attempts_ledger ON {schema}.jobs"))
                    .expect("drop the ledger trigger");
            }
            let (cycles, refused) = run(&store)?;
            let into = if ledger { &mut with } else { &mut without };
            into.0.push(cycles);
            into.1.push(refused);
            drop(store);
            admin
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .expect("drop the schema");
        }
    }
    report("PostgreSQL", &with.0, &without.0);
    report_refused("PostgreSQL", &with.1, &with.0);
    Ok(())
}

fn main() -> leasefence::Result<()> {
    println!(
        "claim_next → complete, {CYCLES} cycles a round, then {CYCLES} refused completes; \
         median (min–max) of {ROUNDS} rounds"
    );
    if std::env::var_os("LEDGER_PG_ONLY").is_none() {
        sqlite(Synchronous::Full)?;
        sqlite(Synchronous::Off)?;
    }
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("LEASEFENCE_TEST_PG") {
        postgres(&url)?;
    }
    Ok(())
}
