//! `cargo xtask test`: the README's test command — every Rust test of the workspace, then the
//! Python package built into a scratch virtual environment and its pytest suite.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::python;

/// What `cargo xtask test` runs.
#[derive(Debug, Default)]
pub struct Options {
    /// Skip `cargo test --workspace`.
    pub no_rust: bool,
    /// Skip the Python package.
    pub no_python: bool,
    /// Arguments for `cargo test` (after `--`).
    pub cargo_args: Vec<String>,
    /// Arguments for pytest (after `--pytest`).
    pub pytest_args: Vec<String>,
}

/// The cargo target directory: `CARGO_TARGET_DIR`, else `target/` of the workspace.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        })
        .unwrap_or_else(|| root.join("target"))
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn status(cmd: &mut Command, what: &str) -> Result<bool, String> {
    println!("\n== {what} ==");
    let status = cmd.status().map_err(|e| format!("{what}: {e}"))?;
    Ok(status.success())
}

/// Runs the suites; `Ok(false)` when a test failed.
pub fn run(root: &Path, options: &Options) -> Result<bool, String> {
    let target = target_dir(root);
    let mut ok = true;
    if !options.no_rust {
        let mut cmd = cargo();
        cmd.current_dir(root)
            .args(["test", "--workspace", "--locked"])
            .args(&options.cargo_args);
        ok &= status(&mut cmd, "cargo test --workspace")?;
    }
    if !options.no_python {
        // The interoperability tests drive the `leasefence` binary on the package's files.
        let mut cmd = cargo();
        cmd.current_dir(root)
            .args(["build", "--locked", "--quiet", "-p", "leasefence-cli"]);
        if !status(
            &mut cmd,
            "cargo build -p leasefence-cli (for the Python interop tests)",
        )? {
            return Err("the leasefence binary does not build".into());
        }
        println!("\n== the Python package: pip install ./python into a scratch environment ==");
        let venv = target.join("python-venv");
        let py = python::venv(&venv)?;
        python::install(root, &py, &target)?;
        let mut cmd = python::typecheck(root, &py);
        ok &= status(
            &mut cmd,
            "mypy --strict python/leasefence (the stubs match the code)",
        )?;
        let mut cmd = python::pytest(root, &py, &["tests", "-rf"]);
        cmd.args(&options.pytest_args)
            .env("LEASEFENCE_CLI", target.join("debug").join("leasefence"));
        ok &= status(&mut cmd, "pytest python/tests")?;
    }
    if ok {
        println!("\nall tests passed");
    } else {
        println!("\nFAILED: see the output above");
    }
    Ok(ok)
}
