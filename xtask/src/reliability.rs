//! `cargo xtask reliability [--quick]`: the long tier of the reliability tests.
//!
//! CI runs every reliability test at its default size as part of `cargo test --workspace`. This
//! runs them again, scaled up through their environment variables, and prints the counts each
//! one reports (the numbers `docs/reliability.md` quotes):
//!
//! | suite | test binary | scaled by |
//! |---|---|---|
//! | model-based sequences | `it` (`model::`) | `LEASEFENCE_MODEL_CASES` |
//! | concurrency histories | `linearizability` | `LEASEFENCE_LIN_ROUNDS` |
//! | SIGSTOP pauses | `pause` | `LEASEFENCE_PAUSE_JOBS` |
//! | SIGKILL crashes | `crash` | `LEASEFENCE_CRASH_KILLS` |
//! | faults and bad input | `it` (`faults::`, `bad_input::`) | (fixed tables) |
//! | power cuts | `power_loss` (package `leasefence-powercut`) | `LEASEFENCE_POWER_CUTS` |
//! | PostgreSQL server faults | `pg_faults` (a private cluster of its own) | `LEASEFENCE_PG_FAULT_ROUNDS` |
//!
//! PostgreSQL variants run when `LEASEFENCE_TEST_PG` is set (as in CI).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::process;

/// One suite of the long tier.
struct Suite {
    name: &'static str,
    package: &'static str,
    test: &'static str,
    filter: &'static [&'static str],
    env: &'static [(&'static str, &'static str, &'static str)],
}

/// (variable, long value, quick value)
const SUITES: &[Suite] = &[
    Suite {
        package: "leasefence",
        name: "model-based sequences",
        test: "it",
        filter: &["model::"],
        env: &[("LEASEFENCE_MODEL_CASES", "5000", "1000")],
    },
    Suite {
        package: "leasefence",
        name: "concurrency histories",
        test: "linearizability",
        filter: &[],
        env: &[("LEASEFENCE_LIN_ROUNDS", "2000", "300")],
    },
    Suite {
        package: "leasefence",
        name: "SIGSTOP pauses",
        test: "pause",
        filter: &[],
        env: &[("LEASEFENCE_PAUSE_JOBS", "120", "24")],
    },
    Suite {
        package: "leasefence",
        name: "SIGKILL crashes",
        test: "crash",
        filter: &[],
        env: &[("LEASEFENCE_CRASH_KILLS", "500", "50")],
    },
    Suite {
        package: "leasefence",
        name: "faults and bad input",
        test: "it",
        filter: &["faults::", "bad_input::"],
        env: &[],
    },
    Suite {
        package: "leasefence-powercut",
        name: "power cuts",
        test: "power_loss",
        filter: &[],
        env: &[("LEASEFENCE_POWER_CUTS", "200", "50")],
    },
    Suite {
        package: "leasefence",
        name: "PostgreSQL server faults",
        test: "pg_faults",
        filter: &[],
        env: &[("LEASEFENCE_PG_FAULT_ROUNDS", "5", "1")],
    },
];

/// Lines of a test's stderr that carry its counts.
fn is_count_line(line: &str) -> bool {
    [
        "model: ",
        "histories",
        "leases taken over",
        "kills;",
        "caught as expected",
        "power cuts at",
        "server faults, slowest recovery",
    ]
    .iter()
    .any(|k| line.contains(k))
}

/// Runs the long tier (or, with `quick`, a shorter one). Returns whether every suite passed.
///
/// # Errors
/// A test binary that cannot be started, or Ctrl-C.
pub fn run(quick: bool) -> Result<bool, String> {
    if std::env::var_os("LEASEFENCE_TEST_PG").is_none() {
        println!("note: LEASEFENCE_TEST_PG is not set: the PostgreSQL variants will be skipped");
    }
    let started = Instant::now();
    let mut failed = vec![];
    let mut report = vec![];
    for suite in SUITES {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "test",
            "--package",
            suite.package,
            "--test",
            suite.test,
            "--",
        ])
        .args(suite.filter)
        .arg("--nocapture");
        let mut settings = vec![];
        for (var, long, short) in suite.env {
            let value = if quick { short } else { long };
            cmd.env(var, value);
            settings.push(format!("{var}={value}"));
        }
        println!(
            "== {} ({}{})",
            suite.name,
            suite.test,
            if settings.is_empty() {
                String::new()
            } else {
                format!(", {}", settings.join(" "))
            }
        );
        let out = process::run(&mut cmd, Duration::from_secs(4 * 3600))?;
        let counts: Vec<&str> = out.stderr.lines().filter(|l| is_count_line(l)).collect();
        for line in &counts {
            println!("   {}", line.trim());
        }
        let verdict = if out.success() {
            "passed"
        } else {
            failed.push(suite.name);
            println!("{}", tail(&out.stdout, 30));
            "FAILED"
        };
        println!("   {verdict} in {:.0?}", out.elapsed);
        report.push((suite.name, verdict, counts.len()));
    }
    println!("\nreliability tier done in {:.0?}", started.elapsed());
    for (name, verdict, _) in &report {
        println!("  {name:<24} {verdict}");
    }
    if !failed.is_empty() {
        println!("FAILED: {}", failed.join(", "));
    }
    Ok(failed.is_empty())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
