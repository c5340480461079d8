//! The Python package (`python/`): a scratch virtual environment with the build and test tools,
//! the package built into it, and pytest. Used by `cargo xtask test` (the README's test
//! command) and by the catalog runner for the entries that the Python suite must kill too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::catalog::Mutant;
use crate::process;
use crate::results::{Record, Status};

/// The tools the virtual environment gets, pinned (PyPI).
pub const TOOLS: [&str; 4] = [
    "maturin==1.16.0",
    "pytest==9.2.0",
    "hypothesis==6.170.17",
    "mypy==2.4.1",
];

/// The pytest files of the design note's eight functions: what a seed entry must fail.
pub const SEED_SUITES: [&str; 2] = ["tests/test_seed.py", "tests/test_model.py"];

/// The interpreter that makes the environment: `LEASEFENCE_PYTHON`, else `python3`.
fn base_python() -> String {
    std::env::var("LEASEFENCE_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// A virtual environment at `dir` with [`TOOLS`] installed (made or completed if needed).
/// Returns its `python`.
pub fn venv(dir: &Path) -> Result<PathBuf, String> {
    let python = dir.join("bin").join("python");
    if !python.exists() {
        println!("python: making the virtual environment {}", dir.display());
        let mut cmd = Command::new(base_python());
        cmd.arg("-m").arg("venv").arg(dir);
        run(&mut cmd, "python3 -m venv", Duration::from_secs(300))?;
    }
    let mut check = Command::new(&python);
    check.args(["-m", "pip", "freeze", "--disable-pip-version-check"]);
    let frozen = process::run(&mut check, Duration::from_secs(120))?;
    let have: Vec<String> = frozen.stdout.lines().map(str::to_lowercase).collect();
    let missing: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|tool| !have.iter().any(|h| h == tool))
        .collect();
    if !missing.is_empty() {
        println!("python: installing {}", missing.join(" "));
        let mut cmd = Command::new(&python);
        cmd.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(&missing);
        run(&mut cmd, "pip install", Duration::from_secs(900))?;
    }
    Ok(python)
}

/// Installs the package from `tree/python` into the environment of `python`, as a user does
/// (`pip install ./python`; the venv's maturin, release build into `target_dir`).
pub fn install(tree: &Path, python: &Path, target_dir: &Path) -> Result<(), String> {
    let mut cmd = Command::new(python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "--no-build-isolation",
        "--no-deps",
        "--force-reinstall",
    ])
    .arg(tree.join("python"))
    .env("CARGO_TARGET_DIR", target_dir);
    activate(&mut cmd, python);
    run(&mut cmd, "pip install ./python", Duration::from_secs(1800))
}

/// Builds the package from `tree/python` into the environment in place (`maturin develop`,
/// a debug build into `target_dir`): quicker, for the catalog's mutants. Output captured.
pub fn develop(tree: &Path, python: &Path, target_dir: &Path) -> Result<(), String> {
    let venv = python
        .parent()
        .and_then(Path::parent)
        .ok_or("the venv's python has no venv")?;
    let mut cmd = Command::new(venv.join("bin").join("maturin"));
    cmd.args(["develop", "--quiet"])
        .current_dir(tree.join("python"))
        .env("VIRTUAL_ENV", venv)
        .env("CARGO_TARGET_DIR", target_dir)
        .env("CARGO_TERM_COLOR", "never");
    let out = process::run(&mut cmd, Duration::from_secs(1800))?;
    if out.success() {
        Ok(())
    } else {
        Err(format!(
            "maturin develop failed:\n{}\n{}",
            tail(&out.stdout),
            tail(&out.stderr)
        ))
    }
}

/// The pytest command for `files` (relative to `tree/python`), run from there. The venv's
/// `pytest` script, not `python -m pytest`: that would put `python/` on `sys.path`, and the
/// tests would import the source folder instead of the installed package.
pub fn pytest(tree: &Path, python: &Path, files: &[&str]) -> Command {
    let mut cmd = Command::new(python.with_file_name("pytest"));
    cmd.args(["-p", "no:cacheprovider"])
        .args(files)
        .current_dir(tree.join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// `mypy --strict` over the package's sources and type stubs (`tree/python/leasefence`).
pub fn typecheck(tree: &Path, python: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.args(["-m", "mypy", "--strict", "--no-incremental", "leasefence"])
        .current_dir(tree.join("python"));
    cmd
}

/// The test ids pytest collects from `files`.
pub fn collect(tree: &Path, python: &Path, files: &[&str]) -> Result<Vec<String>, String> {
    let mut cmd = pytest(tree, python, files);
    cmd.args(["--collect-only", "-q"]);
    let out = process::run(&mut cmd, Duration::from_secs(300))?;
    if !out.success() {
        return Err(format!(
            "pytest cannot collect its tests:\n{}",
            tail(&out.stdout)
        ));
    }
    Ok(out
        .stdout
        .lines()
        .filter(|l| l.contains("::"))
        .map(|l| base_id(l.trim()).to_string())
        .collect())
}

/// A test id without its parameters: `tests/a.py::t[x]` → `tests/a.py::t`.
pub fn base_id(id: &str) -> &str {
    id.split('[').next().unwrap_or(id)
}

/// The failed test ids (parameters dropped) in pytest's `-rf` summary: `FAILED id - …`.
pub fn parse_failures(stdout: &str) -> Vec<String> {
    let mut failed: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("FAILED "))
        .map(|rest| base_id(rest.split(" - ").next().unwrap_or(rest).trim()).to_string())
        .collect();
    failed.sort();
    failed.dedup();
    failed
}

/// Runs `cmd` as inside the activated environment of `python` (its `bin/` first on `PATH`), so
/// that the build backend finds the venv's `maturin`.
fn activate(cmd: &mut Command, python: &Path) {
    if let Some(bin) = python.parent() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![bin.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(dirs) {
            cmd.env("PATH", joined);
        }
        if let Some(venv) = bin.parent() {
            cmd.env("VIRTUAL_ENV", venv);
        }
    }
}

/// The Python side of the baseline: the environment, the unmutated package built into it,
/// every predicted pytest case existing and (unless only checking) the suite passing.
pub fn baseline(
    tree: &Path,
    target_dir: &Path,
    selected: &[&Mutant],
    check: bool,
) -> Result<PathBuf, String> {
    let python = venv(&target_dir.join("python-venv"))?;
    println!("baseline: building the Python package (maturin develop) …");
    develop(tree, &python, target_dir)
        .map_err(|e| format!("the unmutated Python package does not build:\n{e}"))?;
    let known = collect(tree, &python, &SEED_SUITES)?;
    let problems: Vec<String> = selected
        .iter()
        .flat_map(|m| {
            m.python_killed_by
                .iter()
                .filter(|t| !known.contains(t))
                .map(move |t| format!("{}: predicted pytest case `{t}` does not exist", m.id))
        })
        .collect();
    if !problems.is_empty() {
        return Err(crate::mutants::report_problems(
            "predicted pytest cases that do not exist",
            &problems,
        ));
    }
    if !check {
        let mut cmd = pytest(tree, &python, &SEED_SUITES);
        cmd.args(["-q", "-rf"]);
        let out = process::run(&mut cmd, Duration::from_secs(900))?;
        if !out.success() {
            return Err(format!(
                "the unmutated tree's Python suite fails; fix it before judging mutants:\n{}",
                crate::mutants::tail(&out.stdout, 40)
            ));
        }
    }
    println!(
        "baseline: {} pytest cases of the eight functions pass; every predicted one exists",
        known.len()
    );
    Ok(python)
}

/// Judges mutant `m` (already applied to `tree`) by the Python suite of the eight functions:
/// rebuilds the package, runs [`SEED_SUITES`], and adds its failures and missed predictions
/// (as `python/<id>`) to `record`, which holds the Rust suite's verdict. A mutant the Rust
/// suite let survive counts as killed when the Python suite fails.
pub fn judge(
    tree: &Path,
    python: &Path,
    target_dir: &Path,
    m: &Mutant,
    record: &mut Record,
    log: &mut String,
    timeout: Duration,
) -> Result<(), String> {
    // The Python package's suite of the eight functions, on the same mutated tree.
    develop(tree, python, target_dir)?;
    let mut cmd = pytest(tree, python, &SEED_SUITES);
    cmd.args(["-q", "-rf"]);
    let out = process::run(&mut cmd, timeout)?;
    log.push_str(&format!(
        "\n--- pytest {} ---\n{}\n{}",
        SEED_SUITES.join(" "),
        out.stdout,
        out.stderr
    ));
    let failed = parse_failures(&out.stdout);
    record.missed_predictions.extend(
        m.python_killed_by
            .iter()
            .filter(|t| !failed.contains(t))
            .map(|t| format!("python/{t}")),
    );
    if out.timed_out && record.status == Status::Survived {
        record.status = Status::Timeout;
    } else if !out.success() && !failed.is_empty() && record.status == Status::Survived {
        record.status = Status::Killed;
    }
    record
        .failed
        .extend(failed.iter().map(|t| format!("python/{t}")));
    Ok(())
}

fn run(cmd: &mut Command, what: &str, timeout: Duration) -> Result<(), String> {
    let out = process::run(cmd, timeout)?;
    if out.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed:\n{}\n{}",
            tail(&out.stdout),
            tail(&out.stderr)
        ))
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pytest_failures_without_parameters() {
        let out = "\
..F
=========================== short test summary info ============================
FAILED tests/test_seed.py::test_a[sqlite] - AssertionError: assert 1 == 2
FAILED tests/test_seed.py::test_a[postgres] - AssertionError
FAILED tests/test_model.py::test_eight_functions_against_the_model::runTest - boom
2 failed, 1 passed in 0.1s";
        assert_eq!(
            parse_failures(out),
            [
                "tests/test_model.py::test_eight_functions_against_the_model::runTest",
                "tests/test_seed.py::test_a",
            ]
        );
        assert_eq!(base_id("tests/x.py::t[1-2]"), "tests/x.py::t");
    }
}
