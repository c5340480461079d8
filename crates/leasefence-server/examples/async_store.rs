//! crates/leasefence-server/examples/async_store.rs: one enqueue, one claim and a fenced
//! completion, each on tokio's blocking pool.

use leasefence::{NewJob, Now, Owner, Store, Ttl};
use leasefence_server::{AsyncOptions, AsyncStore};

#[tokio::main]
async fn main() -> Result<(), leasefence::Error> {
    let db = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "jobs.db".to_owned());
    let store = AsyncStore::open(&db, AsyncOptions::new().connections(4)).await?;
    store
        .call(|s| s.enqueue_job(NewJob::new("mail-1")?))
        .await?;
    let claim =
        |s: &leasefence::AnyStore| s.claim_next(Owner::new("w1")?, Now::system(), Ttl::new(30.0)?);
    if let Some(lease) = store.call(claim).await? {
        let done = store
            .call(move |s| s.complete_lease(&lease, Now::system(), "sent"))
            .await?;
        assert!(done, "refused: the lease was lost");
    }
    Ok(())
}
