//! crates/leasefence/examples/async_worker.rs: an `async fn` handler under leases and fences,
//! on tokio (cargo feature `async`). Run it on an initialised file:
//! `cargo run -p leasefence --example async_worker -- jobs.db`.

use leasefence::{AsyncOptions, AsyncStore, AsyncWorker, NewJob, Store};

#[tokio::main]
async fn main() -> Result<(), leasefence::Error> {
    let db = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "jobs.db".to_owned());
    let store = AsyncStore::open(&db, AsyncOptions::new().connections(4)).await?;
    let jobs: Vec<NewJob> = ["ada", "grace", "edsger"]
        .iter()
        .map(|name| Ok(NewJob::new(format!("greet-{name}"))?.payload(name.as_bytes())))
        .collect::<leasefence::Result<_>>()?;
    store.call(move |s| s.enqueue_many(&jobs)).await?;

    // Up to 2 jobs at once; leases of 30 s, renewed every 10 s in one call for all of them.
    let worker = AsyncWorker::builder(store.clone())
        .concurrency(2)
        .ttl(30.0)
        .drain(true)
        .build(|job| async move {
            let name = String::from_utf8_lossy(job.payload()).into_owned();
            // Real work awaits here; if the lease is lost meanwhile, this future is dropped
            // and nothing of it is stored.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            Ok(format!("hello, {name} (fence {})", job.fence()))
        })?;
    // Until the queue is drained, or Ctrl-C (then running jobs get the shutdown deadline).
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let stats = worker.run(ctrl_c).await?;
    println!("{} completed, {} lost", stats.completed, stats.lost);
    Ok(())
}
