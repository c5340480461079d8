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
//! | power cuts at every point | `cut_points` (package `leasefence-powercut`) | (every I/O call of its workload) |
//! | PostgreSQL server faults | `pg_faults` (a private cluster of its own) | `LEASEFENCE_PG_FAULT_ROUNDS` |
//! | the soak | `soak` (package `leasefence-cli`: the CLI's `work` and `serve`, faults at random) | `LEASEFENCE_SOAK_SECONDS` |
//!
//! `cargo xtask reliability --soak MINUTES` runs the soak alone, that long.
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
        package: "leasefence-powercut",
        name: "power cuts, every point",
        test: "cut_points",
        filter: &[],
        env: &[],
    },
    Suite {
        package: "leasefence",
        name: "PostgreSQL server faults",
        test: "pg_faults",
        filter: &[],
        env: &[("LEASEFENCE_PG_FAULT_ROUNDS", "5", "1")],
    },
    SOAK,
];

/// The soak: the CLI's processes under faults at random, memory and descriptors sampled.
const SOAK: Suite = Suite {
    package: "leasefence-cli",
    name: "soak",
    test: "soak",
    filter: &[],
    env: &[("LEASEFENCE_SOAK_SECONDS", "600", "60")],
};

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
        "soak: ",
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
        let settings = suite
            .env
            .iter()
            .map(|(var, long, short)| (*var, if quick { *short } else { *long }.to_owned()))
            .collect();
        let verdict = run_suite(suite, settings)?;
        if verdict != "passed" {
            failed.push(suite.name);
        }
        report.push((suite.name, verdict));
    }
    println!("\nreliability tier done in {:.0?}", started.elapsed());
    for (name, verdict) in &report {
        println!("  {name:<24} {verdict}");
    }
    if !failed.is_empty() {
        println!("FAILED: {}", failed.join(", "));
    }
    Ok(failed.is_empty())
}

/// The minutes of `--soak MINUTES`: a positive number.
///
/// # Errors
/// Anything else, naming the argument.
pub fn soak_minutes(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(m) if m.is_finite() && m > 0.0 => Ok(m),
        _ => Err(format!(
            "invalid argument `--soak`: {text:?} is not a positive number of minutes"
        )),
    }
}

/// `cargo xtask reliability --soak MINUTES`: the soak alone, that long.
///
/// # Errors
/// The test binary cannot be started, or Ctrl-C.
pub fn soak(minutes: f64) -> Result<bool, String> {
    let seconds = format!("{:.0}", minutes * 60.0);
    let verdict = run_suite(&SOAK, vec![("LEASEFENCE_SOAK_SECONDS", seconds)])?;
    Ok(verdict == "passed")
}

/// Runs one suite with these settings, printing its counts; "passed" or "FAILED".
fn run_suite(suite: &Suite, settings: Vec<(&str, String)>) -> Result<&'static str, String> {
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
    let mut shown = vec![];
    for (var, value) in &settings {
        cmd.env(var, value);
        shown.push(format!("{var}={value}"));
    }
    println!(
        "== {} ({}{})",
        suite.name,
        suite.test,
        if shown.is_empty() {
            String::new()
        } else {
            format!(", {}", shown.join(" "))
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
        println!("{}", tail(&out.stdout, 30));
        println!("{}", tail(&out.stderr, 30));
        "FAILED"
    };
    println!("   {verdict} in {:.0?}", out.elapsed);
    Ok(verdict)
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
