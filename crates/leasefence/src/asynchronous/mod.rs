//! The async API (cargo feature `async`), for tokio services: [`AsyncStore`], a pool of store
//! connections whose every call runs on tokio's blocking pool, and [`AsyncWorker`], whose
//! handlers are `async fn`s.
//!
//! Nothing about the contract moves: each call is one call of the blocking [`Store`](crate::Store)
//! on one connection, so owner, fence and the live lease are checked in the database, in the
//! write's own transaction. The async worker has the blocking [`Worker`](crate::Worker)'s
//! counters ([`WorkerStats`](crate::WorkerStats)) and outcomes
//! ([`JobOutcome`](crate::JobOutcome)); a lease that ends under a running handler fires
//! [`AsyncJob::lost`] and drops the handler's future, and nothing it would return is written.
//!
//! `leasefence serve` (crate `leasefence-server`) is built on [`AsyncStore`].

mod beat;
mod builder;
mod job;
mod outcome;
mod store;
mod worker;

pub use builder::AsyncWorkerBuilder;
pub use job::{AsyncJob, Loss};
pub use store::{AsyncOptions, AsyncStore};
pub use worker::{AsyncResult, AsyncWorker};
