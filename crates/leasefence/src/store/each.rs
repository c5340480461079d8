//! The bodies of [`Store`]'s default methods that take more than a line: what a backend gets
//! when it does not override them.

use super::Store;
use crate::error::Result;
use crate::types::{BatchSize, Enqueued, Lease, Now, Owner, Queues, Ttl};

/// [`Store::enqueue_many`]: whether each of [`Store::enqueue_jobs`]'s outcomes is an insert.
pub(super) fn inserted(outcomes: &[Enqueued]) -> Vec<bool> {
    outcomes.iter().map(Enqueued::is_inserted).collect()
}

/// [`Store::claim_next_in`]: the lease of [`Store::claim_batch_in`] of one, if any.
pub(super) fn claim_next_in<S: Store + ?Sized>(
    store: &S,
    queues: &Queues,
    owner: Owner<'_>,
    now: Now,
    ttl: Ttl,
) -> Result<Option<Lease>> {
    Ok(store
        .claim_batch_in(queues, owner, now, ttl, BatchSize::ONE)?
        .pop())
}

/// [`Store::renew_lease`]: the renew, and on success `lease.until` set to its new end.
pub(super) fn renew_lease<S: Store + ?Sized>(
    store: &S,
    lease: &mut Lease,
    now: Now,
    ttl: Ttl,
) -> Result<bool> {
    let renewed = store.renew(lease.job(), lease.holder(), lease.fence, now, ttl)?;
    if renewed {
        lease.until = ttl.until(now)?;
    }
    Ok(renewed)
}

/// [`Store::complete_batch`] without a transaction: one [`Store::complete_lease`] per item, in
/// order, stopping at the first error.
pub(super) fn complete_each<S: Store + ?Sized>(
    store: &S,
    completions: &[(&Lease, &str)],
    now: Now,
) -> Result<Vec<bool>> {
    completions
        .iter()
        .map(|(lease, result)| store.complete_lease(lease, now, result))
        .collect()
}

/// [`Store::renew_batch`] without a transaction: one [`Store::renew`] per lease, in order,
/// stopping at the first error.
pub(super) fn renew_each<S: Store + ?Sized>(
    store: &S,
    leases: &[&Lease],
    now: Now,
    ttl: Ttl,
) -> Result<Vec<bool>> {
    leases
        .iter()
        .map(|lease| store.renew(lease.job(), lease.holder(), lease.fence, now, ttl))
        .collect()
}
