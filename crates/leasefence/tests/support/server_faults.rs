//! The PostgreSQL server faults, each provoked on a private [`Cluster`]: shared by
//! `pg_faults.rs` (each one in turn, then a recovery check) and the CLI's soak
//! (`crates/leasefence-cli/tests/soak.rs`, picked at random for as long as it runs).

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

use leasefence::postgres::{Client, NoTls};

use crate::cluster::{APP, Cluster, MAX_CONNECTIONS};

/// One fault: provokes it and returns when it is over (the server is up again, the lock
/// given back, the connections freed).
pub type Fault = Box<dyn Fn(&Cluster)>;

/// How long a lock or a full server lasts in the faults that hold one.
pub const HOLD: Duration = Duration::from_secs(3);

/// Every server fault, by name. The lock faults lock `{schema}.jobs`; the session faults
/// expect at least `sessions` sessions of the role [`APP`] to end.
pub fn server_faults(schema: &str, sessions: usize) -> Vec<(&'static str, Fault)> {
    let lock = format!("BEGIN; LOCK TABLE {schema}.jobs IN ACCESS EXCLUSIVE MODE");
    let lock_too = lock.clone();
    vec![
        (
            "restart (fast)",
            Box::new(|c: &Cluster| {
                c.pg_ctl(&["restart", "-m", "fast", "-w", "-t", "60"])
                    .unwrap();
            }),
        ),
        (
            "restart (immediate: crash recovery)",
            Box::new(|c: &Cluster| {
                c.pg_ctl(&["restart", "-m", "immediate", "-w", "-t", "60"])
                    .unwrap();
            }),
        ),
        (
            "pg_terminate_backend of every worker session",
            Box::new(move |c: &Cluster| {
                let n = c.terminate_app_sessions();
                assert!(n >= sessions, "only {n} worker sessions to terminate");
            }),
        ),
        (
            "SIGKILL of one backend (the postmaster resets every session)",
            Box::new(|c: &Cluster| {
                let pid = *c.app_pids().first().expect("a worker session");
                let status = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .unwrap();
                assert!(status.success(), "kill -KILL {pid}");
                // The postmaster notices the death and resets every session, refusing
                // connections during recovery: wait for that to begin (a connection refused)
                // before waiting for it to end — right after the kill the server still
                // accepts, and the next fault's connection would meet the recovery.
                let since = Instant::now();
                while Client::connect(&c.url("postgres"), NoTls).is_ok()
                    && since.elapsed() < Duration::from_secs(5)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                wait_accepting(c);
            }),
        ),
        (
            "lock timeouts (the jobs table locked for 3 s)",
            Box::new(move |c: &Cluster| {
                let mut holder = c.admin();
                holder.batch_execute(&lock).unwrap();
                std::thread::sleep(HOLD);
                holder.batch_execute("COMMIT").unwrap();
            }),
        ),
        (
            "statement_timeout (50 ms, with the jobs table locked for 3 s)",
            Box::new(move |c: &Cluster| {
                let mut admin = c.admin();
                admin
                    .batch_execute(&format!("ALTER ROLE {APP} SET statement_timeout = '50ms'"))
                    .unwrap();
                // New sessions take the setting: end the old ones.
                c.terminate_app_sessions();
                std::thread::sleep(Duration::from_millis(500));
                let mut holder = c.admin();
                holder.batch_execute(&lock_too).unwrap();
                std::thread::sleep(HOLD);
                holder.batch_execute("COMMIT").unwrap();
                admin
                    .batch_execute(&format!("ALTER ROLE {APP} RESET statement_timeout"))
                    .unwrap();
                c.terminate_app_sessions();
            }),
        ),
        (
            "out of connections (every slot taken for 3 s, worker sessions ended)",
            Box::new(|c: &Cluster| {
                let mut fillers = vec![];
                c.terminate_app_sessions();
                while let Ok(client) = Client::connect(&c.url(APP), NoTls) {
                    fillers.push(client);
                    assert!(fillers.len() <= MAX_CONNECTIONS, "no connection limit");
                }
                assert!(!fillers.is_empty(), "no connection could be taken");
                // Whatever reconnected meanwhile is ended too: every worker now meets a full
                // server.
                let mut admin = c.admin();
                let mine: Vec<i32> = fillers.iter_mut().map(backend_pid).collect();
                admin
                    .execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE usename = $1 AND NOT (pid = ANY($2))",
                        &[&APP, &mine],
                    )
                    .unwrap();
                drop(admin);
                std::thread::sleep(HOLD);
                drop(fillers);
            }),
        ),
    ]
}

fn backend_pid(client: &mut Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0)
}

/// Waits until the server accepts connections again (after the postmaster's reset).
pub fn wait_accepting(c: &Cluster) {
    let since = Instant::now();
    while Client::connect(&c.url("postgres"), NoTls).is_err() {
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "the server did not come back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
