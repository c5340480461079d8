//! The HTTP API as a client in any language meets it: a real server on a loopback port, real
//! requests, and every effect read back from the store through an independent connection.
//! Each case runs on SQLite and on PostgreSQL (ignored, with the reason, when
//! `LEASEFENCE_TEST_PG` is unset; a failure in CI).

mod support;

mod access;
mod browser;
mod client;
mod dashboard;
mod fencing;
mod input;
mod jobs;
mod observe;
mod partition;
mod strict;
