//! The handlers, one module per area; each handler's `#[utoipa::path]` is its entry in the
//! OpenAPI document.

pub mod batch;
pub mod jobs;
pub mod leases;
pub mod ops;
pub mod schedules;
