//! `cargo xtask cargo-mutants`: cargo-mutants over the library's Rust code, judged by its output
//! files rather than its exit code.
//!
//! cargo-mutants' exit code is 2 for missed mutants but 3 for timeouts, and a timeout takes
//! precedence: a run with both exits 3. So this reads `mutants.out/missed.txt` and
//! `mutants.out/timeout.txt` and fails when either is not empty.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Options of `cargo xtask cargo-mutants`.
#[derive(Debug, Default)]
pub struct Options {
    /// Only mutants in lines changed since this git revision (`git diff REV`).
    pub in_diff: Option<String>,
    /// Parallel build/test jobs (cargo-mutants' `--jobs`).
    pub jobs: u32,
    /// Further arguments for cargo-mutants.
    pub extra: Vec<String>,
}

/// The library's source, the only code cargo-mutants examines (see `.cargo/mutants.toml`).
const EXAMINED: &str = "crates/leasefence/src";

/// Runs cargo-mutants. Returns whether no mutant was missed and none timed out.
///
/// # Errors
/// cargo-mutants missing or failing for another reason (baseline tests failing, bad usage),
/// git failing, or I/O failures.
pub fn run(root: &Path, options: &Options) -> Result<bool, String> {
    let out_dir = root.join("target").join("cargo-mutants");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root)
        .env_remove("CARGO_TARGET_DIR")
        .args(["mutants", "--no-shuffle", "--jobs"])
        .arg(options.jobs.max(1).to_string())
        .arg("--output")
        .arg(&out_dir);
    if let Some(base) = &options.in_diff {
        let diff = git_diff(root, base)?;
        if diff.trim().is_empty() {
            println!("cargo-mutants: no change to {EXAMINED} since {base}; nothing to mutate");
            return Ok(true);
        }
        let patch = out_dir.join("in-diff.patch");
        std::fs::write(&patch, diff).map_err(|e| format!("{}: {e}", patch.display()))?;
        println!("cargo-mutants: only lines of {EXAMINED} changed since {base}");
        cmd.arg("--in-diff").arg(&patch);
    }
    cmd.args(&options.extra);
    // A run that finds nothing to mutate writes no mutants.out: never read a previous run's.
    let results = out_dir.join("mutants.out");
    if results.exists() {
        std::fs::remove_dir_all(&results).map_err(|e| format!("{}: {e}", results.display()))?;
    }
    println!("running {cmd:?}");
    let status = cmd.status().map_err(|e| {
        format!(
            "cannot run cargo-mutants ({e}); install it with `cargo install cargo-mutants --locked`"
        )
    })?;
    // 0: all caught; 2: some missed; 3: some timed out (wins over 2). Anything else is an error.
    match status.code() {
        Some(0 | 2 | 3) => {}
        Some(4) => return Err("cargo-mutants: the unmutated tree's tests fail".into()),
        other => return Err(format!("cargo-mutants failed (exit {other:?})")),
    }
    if !results.exists() {
        println!("cargo-mutants: no mutants generated; nothing to judge");
        return Ok(true);
    }
    let read = |name: &str| -> Vec<String> {
        std::fs::read_to_string(results.join(name))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    };
    let (caught, missed, timeout, unviable) = (
        read("caught.txt"),
        read("missed.txt"),
        read("timeout.txt"),
        read("unviable.txt"),
    );
    println!(
        "\ncargo-mutants: {} caught, {} missed, {} timeout, {} unviable (exit {:?}; judged by \
         {}/{{missed,timeout}}.txt)",
        caught.len(),
        missed.len(),
        timeout.len(),
        unviable.len(),
        status.code(),
        display(&results)
    );
    for m in &missed {
        println!("  MISSED   {m}");
    }
    for m in &timeout {
        println!("  TIMEOUT  {m}");
    }
    Ok(missed.is_empty() && timeout.is_empty())
}

fn git_diff(root: &Path, base: &str) -> Result<String, String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["diff", "--no-color", "--no-ext-diff", base, "--", EXAMINED])
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git diff {base} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn display(path: &Path) -> String {
    PathBuf::from(path).display().to_string()
}
