//! claim_next → complete cycles per second on PostgreSQL, one store, one thread: the round trips
//! and the durable commits of the hot path. A quick probe, not the benchmark harness.
//!
//! ```sh
//! LEASEFENCE_TEST_PG='host=127.0.0.1 user=postgres dbname=test' \
//!   cargo run --release -p leasefence --features postgres --example pg_cycle
//! ```

use std::time::Instant;

use leasefence::{NewJob, Now, Owner, PgOptions, Store, Ttl};

fn main() -> Result<(), leasefence::Error> {
    let url = std::env::var("LEASEFENCE_TEST_PG")
        .unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test".into());
    let schema = format!("lf_cycle_{}", std::process::id());
    let store = PgOptions::new().schema(&schema).open(&url)?;
    let n = 2000;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new(format!("j{i}")))
        .collect::<Result<_, _>>()?;
    store.enqueue_many(&jobs)?;
    let (me, ttl) = (Owner::new("w")?, Ttl::new(60.0)?);
    let started = Instant::now();
    let mut done = 0;
    while let Some(lease) = store.claim_next(me, Now::new(1.0)?, ttl)? {
        assert!(store.complete_lease(&lease, Now::new(2.0)?, "ok")?);
        done += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{done} claim_next → complete cycles in {seconds:.2} s: {:.0} cycles/s",
        f64::from(done) / seconds
    );
    if let Ok(mut raw) = leasefence::postgres::Client::connect(&url, leasefence::postgres::NoTls) {
        let _ = raw.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
    }
    Ok(())
}
