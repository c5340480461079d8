//! The one integration-test binary, organised by the contract's eight steps.
//!
//! Every case asserts what the call returned **and** what is stored, read back through an
//! independent connection (for the schema, through the stock `sqlite3` shell). Contract cases
//! run per configuration: `seed` (the free functions, one connection per call) and `kept`
//! (one `SqliteStore` kept across calls).

mod common;

mod s1_init_db;
mod s2_enqueue;
mod s3_state;
mod s4_claim;
mod s5_renew;
mod s6_complete;
mod s7_release;
mod s8_claim_many;

mod any_store;
mod bad_input;
mod busy;
mod faults;
mod model;
mod postgres;
mod processes;
mod queue;
mod renew_batch;
mod story;
mod worker;
