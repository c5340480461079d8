//! The one integration-test binary, organised by operation: one module per `Store` operation
//! (the same name as its SQL file and its catalog ids), then cross-cutting concerns.
//!
//! Every case asserts what the call returned **and** what is stored, read back through an
//! independent connection (for the schema, through the stock `sqlite3` shell). Shared cases
//! (`contract!`) run on every backend listed once in `common::backends!`: `seed` (the free
//! functions), `kept` (`SqliteStore`), `any_sqlite` (`AnyStore` on a path), `pg` (`PgStore`)
//! and `any_pg` (`AnyStore` on a URL).

mod common;

// The contract's eight steps.
mod claim;
mod claim_many;
mod complete;
mod enqueue;
mod init_db;
mod release;
mod renew;
mod state;

// The queue on top of them.
mod admit;
mod async_expiry;
mod async_release;
mod audit;
mod backoff_checked;
mod boundaries;
mod cancel;
mod cancel_expired;
mod claim_batch;
mod claim_budget;
mod claim_next;
mod collation;
mod complete_batch;
mod complete_with;
mod database_clock;
mod db_string_slips;
mod defaults;
mod delete;
mod ended_by_operator;
mod enqueue_jobs;
mod enqueue_many;
mod errors;
mod fail;
mod fences;
mod find_jobs;
mod given_up;
mod hung_store;
mod inspect;
mod ledger;
mod list;
mod mistyped;
mod operator_scope;
mod overview;
mod pause;
mod pg_init_off;
mod pg_schema_names;
mod purge;
mod queues;
mod retry;
mod schedule;
mod schedule_bad_now;
mod schedule_missed;
mod schedule_stored;
mod stats;
mod status;
mod unstorable;

mod any_store;
mod async_worker;
mod bad_input;
mod busy;
mod faults;
mod group_commit;
mod logs;
mod migrate_again;
mod model;
mod pg_races;
mod pg_timeouts;
mod pg_tls;
mod postgres;
mod processes;
mod reconnect;
mod renew_batch;
mod seam;
#[cfg(unix)]
mod signals;
mod story;
mod thread_limit;
mod watch;
mod worker;
mod write_outage;
mod writer;
