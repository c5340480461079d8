//! `cargo xtask bench [--quick] [-- ARGS…]`: the benchmark harness of issue 7.
//!
//! Builds the peers (each in its own Cargo workspace under `bench/peers/`, because their
//! SQLite versions conflict with ours) and the harness `crates/leasefence-bench` in release
//! mode, then runs the harness: the floor, leasefence and the peers alternating in one run.
//! Results go to `target/bench/` (results.md, results.json, throughput.svg); see
//! `docs/benchmarks.md`.

use std::path::Path;
use std::process::Command;

/// The peers' workspaces, relative to the workspace root.
const PEERS: [&str; 2] = ["bench/peers/effectum", "bench/peers/apalis"];

pub fn run(root: &Path, quick: bool, extra: &[String]) -> Result<bool, String> {
    for peer in PEERS {
        let manifest = root.join(peer).join("Cargo.toml");
        eprintln!("== building peer {peer} (release; minutes the first time)");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "--locked", "--manifest-path"])
            .arg(&manifest)
            .status()
            .map_err(|e| format!("cargo build {peer}: {e}"))?;
        if !status.success() {
            // The harness reports a peer that is not built instead of failing the whole run.
            eprintln!("warning: peer {peer} did not build ({status}); it is left out");
        }
    }
    eprintln!("== building the harness (release)");
    let status = Command::new(env!("CARGO"))
        .current_dir(root)
        .args(["build", "--release", "--locked", "-p", "leasefence-bench"])
        .status()
        .map_err(|e| format!("cargo build leasefence-bench: {e}"))?;
    if !status.success() {
        return Err(format!("building leasefence-bench failed ({status})"));
    }
    let mut harness = Command::new(root.join("target/release/leasefence-bench"));
    harness.current_dir(root);
    if quick {
        harness.arg("--quick");
    }
    harness.args(extra);
    eprintln!("== running {harness:?}");
    let status = harness
        .status()
        .map_err(|e| format!("running leasefence-bench: {e}"))?;
    Ok(status.success())
}
