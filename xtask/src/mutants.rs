//! `cargo xtask mutants`: apply each catalog entry in a scratch copy of the tree, run the
//! integration tests, and compare what failed with what the entry predicted.
//!
//! Verdicts:
//! - **killed**: the test binary failed, and every predicted test was among the failures.
//! - **killed, prediction missed**: it failed, but some predicted test passed. The run fails:
//!   the catalog (and so the worksheet) says something untrue.
//! - **survived**: every test passed. The run fails.
//! - **timeout**: the tests ran past the limit and were killed. The run fails: the prediction
//!   cannot be judged, and a test that hangs instead of failing should be fixed.
//! - **unviable**: the mutated tree does not compile. The run fails: the entry is wrong.
//!
//! Tests that fail beyond the predicted ones are reported but are fine.
//!
//! How a run works:
//! 1. The catalog is parsed and every `find` must occur exactly once in its file, before
//!    anything is built.
//! 2. The working tree (as it is, uncommitted changes included; without `target/` and `.git/`)
//!    is copied to a temporary directory. The working tree is never written; the copy is removed
//!    when the run ends, also on Ctrl-C (children run in their own process group and are killed).
//! 3. The copy builds into one dedicated target directory (`target/xtask-mutants` by default),
//!    kept across mutants and runs, so each mutant costs an incremental rebuild of one crate.
//!    It is never the real tree's: the copy has the same build hashes, so sharing a target
//!    directory could run a stale, unmutated binary. As a second guard, a mutant whose build did
//!    not recompile `leasefence` aborts the run.
//! 4. The unmutated copy's tests are listed (every predicted name must exist) and must pass.
//! 5. Per mutant: apply, build the `it` test binary, run it from the package folder exactly as
//!    `cargo test -p leasefence --test it` does (on [`DEFAULT_TEST_THREADS`] threads unless
//!    `--test-threads` says otherwise), parse the failed tests, restore the file. No entry needs
//!    the library's unit or doc tests, so they are not run.
//!
//!    Predicted tests first: unless `--full` is given (or the entry is a seed entry, whose
//!    worksheet line counts every failure), the binary first runs only the entry's predicted
//!    tests. If every one of them fails, the mutant is killed as predicted and the rest of the
//!    suite is not run (the record says so); otherwise the whole suite runs and decides. A
//!    prediction is still only ever confirmed by its tests failing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::catalog::{Catalog, Mutant};
use crate::process;
use crate::worksheet;

/// The package and test binary every mutant is judged by.
const PACKAGE: &str = "leasefence";
const TEST_BINARY: &str = "it";

/// Options of `cargo xtask mutants`.
#[derive(Debug, Default)]
pub struct Options {
    /// Print the entries and exit.
    pub list: bool,
    /// Only check that every entry applies and every predicted test exists; run no mutant.
    pub check: bool,
    /// Only these ids (exact, or a prefix ending in `*`).
    pub only: Vec<String>,
    /// The dedicated target directory of the scratch copies.
    pub target_dir: Option<PathBuf>,
    /// Keep the scratch copy (for debugging).
    pub keep_scratch: bool,
    /// Threads of the test binary; [`DEFAULT_TEST_THREADS`] when not given.
    pub test_threads: Option<usize>,
    /// Run the whole suite for every mutant, not the predicted tests first.
    pub full: bool,
    /// Skip the run when nothing it depends on changed since `mutants/catalog.base`.
    pub since_base: bool,
    /// After a run of every entry that killed each as predicted, record HEAD as the base.
    pub record_base: bool,
}

/// The integration tests mostly wait — on fsync (durable commits), on sleeps and on the
/// worker's real-time ticks, and a mutant that breaks the worker makes many of them wait out
/// their patience — rather than compute, so more threads than cores shorten a run a lot (on
/// two cores: 4.5 s → 2.7 s per mutant, and far more for the worker's mutants).
pub const DEFAULT_TEST_THREADS: usize = 8;

pub use crate::results::{Record, Results, Status, default_target_dir, load_results, results_path};

/// Runs `cargo xtask mutants`. Returns whether every selected mutant was killed as predicted.
///
/// # Errors
/// A catalog that does not parse or no longer applies, predicted tests that do not exist, an
/// unmutated tree whose tests fail, I/O failures, or Ctrl-C.
pub fn run(root: &Path, options: &Options) -> Result<bool, String> {
    let catalog = Catalog::load(root)?;
    let selected: Vec<&Mutant> = catalog
        .mutant
        .iter()
        .filter(|m| options.only.is_empty() || options.only.iter().any(|o| selects(o, &m.id)))
        .collect();
    if selected.is_empty() {
        return Err(format!("no catalog entry matches {:?}", options.only));
    }
    if options.list {
        for m in &selected {
            let step = m.step.map_or("-".to_string(), |s| s.to_string());
            let seed = if m.seed { " (seed)" } else { "" };
            println!("{:<40} step {step}{seed}  {}", m.id, m.file);
        }
        println!("{} entries", selected.len());
        return Ok(true);
    }

    // 1. Everything that needs no build: before anything runs.
    let problems = catalog.check_static(root);
    if !problems.is_empty() {
        return Err(report_problems("the catalog does not apply", &problems));
    }
    println!(
        "catalog: {} entries, each applies exactly once",
        catalog.mutant.len()
    );
    let mut selected = selected;
    if options.since_base {
        use crate::catalog_base::SinceBase;
        match crate::catalog_base::since_base(root, &catalog)? {
            SinceBase::All(why) => println!("catalog: running every entry: {why}"),
            SinceBase::Entries(ids, why) => {
                println!("catalog: {why}");
                selected.retain(|m| ids.contains(&m.id));
            }
            SinceBase::Stands => {
                println!(
                    "catalog: neither the library, its tests, Cargo.lock nor the catalog changed \
                     in a way that concerns an entry since its verdict ({}, or the full run in \
                     {}); the verdicts stand (docs/worksheet.md)",
                    crate::verdicts::VERDICTS_FILE,
                    crate::catalog_base::BASE_FILE
                );
                return Ok(true);
            }
        }
    }

    // 2. A scratch copy of the tree; the working tree is never written.
    let target_dir = options
        .target_dir
        .clone()
        .unwrap_or_else(|| default_target_dir(root));
    std::fs::create_dir_all(&target_dir).map_err(|e| format!("{}: {e}", target_dir.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("leasefence-mutants-")
        .tempdir()
        .map_err(|e| format!("cannot create a scratch directory: {e}"))?;
    let tree = scratch.path().join("tree");
    // Verdicts name a commit: recorded only when the copied tree's inputs are exactly HEAD's
    // (asked just before the copy; what the working tree does afterwards is not judged).
    let judged_commit = match crate::catalog_base::committed_head(root)? {
        Ok(head) => Some(head),
        Err(dirty) => {
            println!(
                "verdicts: not recorded in {} (the tree differs from HEAD: {dirty})",
                crate::verdicts::VERDICTS_FILE
            );
            None
        }
    };
    copy_tree(root, &tree)?;
    println!(
        "scratch copy: {}  (target dir: {})",
        tree.display(),
        target_dir.display()
    );
    let outcome = run_in_scratch(
        root,
        &tree,
        &target_dir,
        &catalog,
        &selected,
        options,
        judged_commit.as_deref(),
    );
    if options.record_base && matches!(outcome, Ok(true)) {
        if selected.len() != catalog.mutant.len() {
            return Err("--record-base needs a run of every entry (no --only)".into());
        }
        let head = crate::catalog_base::record(root)?;
        println!(
            "recorded {head} in {}: commit it",
            crate::catalog_base::BASE_FILE
        );
    }
    if options.keep_scratch {
        let kept = scratch.keep();
        println!("scratch copy kept at {}", kept.display());
    }
    outcome
}

fn run_in_scratch(
    root: &Path,
    tree: &Path,
    target_dir: &Path,
    catalog: &Catalog,
    selected: &[&Mutant],
    options: &Options,
    judged_commit: Option<&str>,
) -> Result<bool, String> {
    let mut runner = Runner {
        tree: tree.to_path_buf(),
        target_dir: target_dir.to_path_buf(),
        test_threads: options.test_threads.unwrap_or(DEFAULT_TEST_THREADS).max(1),
        full: options.full,
        python: None,
    };

    // 3. Baseline: the unmutated copy builds, its tests are listed and pass.
    let started = Instant::now();
    println!("baseline: building the unmutated copy …");
    let exe = runner
        .build()
        .map_err(|e| format!("the unmutated tree does not build:\n{e}"))?
        .0;
    let known = runner.list_tests(&exe)?;
    let problems = catalog.check_test_names(&known);
    if !problems.is_empty() {
        return Err(report_problems(
            "predicted tests that do not exist",
            &problems,
        ));
    }
    println!(
        "baseline: {} tests listed; every predicted test exists",
        known.len()
    );
    if selected.iter().any(|m| !m.python_killed_by.is_empty()) {
        runner.python = Some(crate::python::baseline(
            tree,
            target_dir,
            selected,
            options.check,
        )?);
    }
    if options.check {
        return Ok(true);
    }
    let baseline = runner.test(&exe, Duration::from_secs(600))?;
    if !baseline.success() {
        let failed = parse_failures(&baseline.stdout);
        return Err(format!(
            "the unmutated tree's tests fail ({}); fix them before judging mutants:\n{}",
            failed.join(", "),
            tail(&baseline.stdout, 40)
        ));
    }
    let timeout = Duration::from_secs(120).max(baseline.elapsed * 10);
    println!(
        "baseline: tests pass in {:.1}s on {} test threads (build + test {:.1}s); per-mutant \
         test timeout {}s\n",
        baseline.elapsed.as_secs_f64(),
        runner.test_threads,
        started.elapsed().as_secs_f64(),
        timeout.as_secs()
    );

    // 4. The mutants, one at a time, restoring each file afterwards.
    let logs = target_dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let mut results = load_results(target_dir);
    let mut verdicts = crate::verdicts::load(root)?;
    let mut bad = Vec::new();
    let total = selected.len();
    for (i, m) in selected.iter().enumerate() {
        print!("[{:>2}/{total}] {:<40} ", i + 1, m.id);
        flush();
        let (record, log) = runner.judge(m, known.len(), timeout)?;
        std::fs::write(logs.join(format!("{}.log", m.id)), &log)
            .map_err(|e| format!("writing the log of {}: {e}", m.id))?;
        println!("{}", verdict_line(m, &record));
        if !record.as_predicted() {
            bad.push(m.id.clone());
            // A verdict stands only while the entry is killed as predicted.
            if verdicts.remove(&m.id).is_some() {
                crate::verdicts::save(root, &verdicts)?;
            }
        } else if let Some(commit) = judged_commit {
            let verdict = crate::verdicts::Verdict {
                commit: commit.to_owned(),
                fingerprint: m.fingerprint(),
            };
            verdicts.insert(m.id.clone(), verdict);
            crate::verdicts::save(root, &verdicts)?;
        }
        results.insert(m.id.clone(), record);
        // Saved after every mutant: an interrupted run keeps what it observed.
        save_results(target_dir, &results)?;
    }
    save_results(target_dir, &results)?;

    // 5. Summary, and the worksheet after a run over the whole catalog.
    summarize(selected, &results, started.elapsed());
    // Only a run of the whole catalog rewrites the worksheet (a `--since-base` run of the
    // entries a change concerns leaves the full run's observations in place).
    if options.only.is_empty() && selected.len() == catalog.mutant.len() {
        let path = worksheet::write(root, catalog, &results)?;
        println!("worksheet written: {}", path.display());
    }
    if !bad.is_empty() {
        println!(
            "\nFAILED: {} of {} mutants were not killed as predicted: {}\n(logs in {})",
            bad.len(),
            total,
            bad.join(", "),
            logs.display()
        );
    }
    Ok(bad.is_empty())
}

/// Builds and tests inside the scratch copy.
struct Runner {
    tree: PathBuf,
    target_dir: PathBuf,
    test_threads: usize,
    full: bool,
    /// The virtual environment's python, when a selected entry is judged by the Python suite.
    python: Option<PathBuf>,
}

impl Runner {
    fn cargo(&self) -> Command {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&self.tree)
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env("CARGO_TERM_COLOR", "never");
        cmd
    }

    /// Builds the test binary. Returns its path and whether the library was recompiled.
    fn build(&self) -> Result<(PathBuf, bool), String> {
        let mut cmd = self.cargo();
        cmd.args([
            "test",
            "--package",
            PACKAGE,
            "--test",
            TEST_BINARY,
            "--no-run",
            "--message-format=json-render-diagnostics",
        ]);
        let out = process::run(&mut cmd, Duration::from_secs(1800))?;
        if !out.success() {
            return Err(tail(&out.stderr, 60));
        }
        let mut exe = None;
        let mut rebuilt = false;
        for line in out.stdout.lines() {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if msg["reason"] != "compiler-artifact" {
                continue;
            }
            let name = msg["target"]["name"].as_str().unwrap_or_default();
            let kinds = msg["target"]["kind"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if name == PACKAGE && kinds.iter().any(|k| k == "lib") {
                rebuilt |= msg["fresh"] == false;
            }
            if name == TEST_BINARY
                && let Some(path) = msg["executable"].as_str()
            {
                exe = Some(PathBuf::from(path));
            }
        }
        let exe = exe.ok_or("cargo reported no test executable")?;
        Ok((exe, rebuilt))
    }

    fn list_tests(&self, exe: &Path) -> Result<BTreeSet<String>, String> {
        let mut cmd = Command::new(exe);
        cmd.arg("--list")
            .current_dir(self.tree.join("crates").join(PACKAGE));
        let out = process::run(&mut cmd, Duration::from_secs(60))?;
        if !out.success() {
            return Err(format!("listing the tests failed:\n{}", out.stderr));
        }
        Ok(out
            .stdout
            .lines()
            .filter_map(|l| l.strip_suffix(": test"))
            .map(str::to_string)
            .collect())
    }

    /// Runs the test binary the way `cargo test -p leasefence --test it` does: from the
    /// package's folder (with `--test-threads`).
    fn test(&self, exe: &Path, timeout: Duration) -> Result<process::Finished, String> {
        self.test_filtered(exe, &[], timeout)
    }

    /// As [`Runner::test`], running only the tests named exactly in `names` (all when empty).
    fn test_filtered(
        &self,
        exe: &Path,
        names: &[String],
        timeout: Duration,
    ) -> Result<process::Finished, String> {
        let mut cmd = Command::new(exe);
        if !names.is_empty() {
            cmd.args(names).arg("--exact");
        }
        cmd.arg(format!("--test-threads={}", self.test_threads))
            .current_dir(self.tree.join("crates").join(PACKAGE))
            .env("RUST_BACKTRACE", "0");
        process::run(&mut cmd, timeout)
    }

    /// Applies `m`, builds, runs the tests and restores the file.
    fn judge(
        &self,
        m: &Mutant,
        total_tests: usize,
        timeout: Duration,
    ) -> Result<(Record, String), String> {
        // Every edit (the entry's, then its `also` ones), each file restored afterwards.
        let mut originals = Vec::new();
        let mut applied = Ok(());
        for edit in m.edits() {
            let path = self.tree.join(&edit.file);
            let step = std::fs::read_to_string(&path)
                .map_err(|e| format!("{}: {e}", path.display()))
                .and_then(|original| {
                    let mutated = edit.apply(&m.id, &original)?;
                    originals.push((path.clone(), original));
                    std::fs::write(&path, mutated).map_err(|e| format!("{}: {e}", path.display()))
                });
            if let Err(e) = step {
                applied = Err(e);
                break;
            }
        }
        let outcome = applied.and_then(|()| self.build_and_test(m, total_tests, timeout));
        // Restore before anything else, even when the run failed.
        for (path, original) in originals.iter().rev() {
            std::fs::write(path, original).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        outcome
    }

    fn build_and_test(
        &self,
        m: &Mutant,
        total_tests: usize,
        timeout: Duration,
    ) -> Result<(Record, String), String> {
        let (mut record, mut log) = self.build_and_test_rust(m, total_tests, timeout)?;
        if m.python_killed_by.is_empty() || record.status == Status::Unviable {
            return Ok((record, log));
        }
        // The Python package's suite of the eight functions, on the same mutated tree.
        let python = self
            .python
            .as_ref()
            .ok_or("internal: an entry with python_killed_by but no Python environment")?;
        crate::python::judge(
            &self.tree,
            python,
            &self.target_dir,
            m,
            &mut record,
            &mut log,
            timeout,
        )?;
        Ok((record, log))
    }

    fn build_and_test_rust(
        &self,
        m: &Mutant,
        total_tests: usize,
        timeout: Duration,
    ) -> Result<(Record, String), String> {
        let started = Instant::now();
        let record = |status, failed: Vec<String>, predicted_only| {
            let failed_set: BTreeSet<&String> = failed.iter().collect();
            let missed_predictions = m
                .killed_by
                .iter()
                .filter(|t| !failed_set.contains(t))
                .cloned()
                .collect();
            Record {
                fingerprint: m.fingerprint(),
                status,
                failed,
                missed_predictions,
                total_tests,
                seconds: started.elapsed().as_secs_f64(),
                predicted_only,
            }
        };
        let (exe, rebuilt) = match self.build() {
            Ok(built) => built,
            Err(log) => return Ok((record(Status::Unviable, vec![], false), log)),
        };
        if !rebuilt {
            return Err(format!(
                "{}: cargo did not recompile `{PACKAGE}` for this mutant; refusing to judge a \
                 stale binary",
                m.id
            ));
        }
        if !self.full && !m.seed && !m.killed_by.is_empty() {
            let out = self.test_filtered(&exe, &m.killed_by, timeout)?;
            let failed = parse_failures(&out.stdout);
            if !out.timed_out && m.killed_by.iter().all(|t| failed.contains(t)) {
                let log = format!("{}\n--- stderr ---\n{}", out.stdout, out.stderr);
                return Ok((record(Status::Killed, failed, true), log));
            }
        }
        let out = self.test(&exe, timeout)?;
        let log = format!("{}\n--- stderr ---\n{}", out.stdout, out.stderr);
        let failed = parse_failures(&out.stdout);
        let status = if out.timed_out {
            Status::Timeout
        } else if out.success() {
            Status::Survived
        } else {
            Status::Killed
        };
        Ok((record(status, failed, false), log))
    }
}

/// The names of the failed tests in libtest's output: the `test NAME ... FAILED` lines and the
/// list under the last `failures:` heading.
pub fn parse_failures(stdout: &str) -> Vec<String> {
    let mut failed = BTreeSet::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("test ")
            && let Some(name) = rest.strip_suffix(" ... FAILED")
        {
            failed.insert(name.trim().to_string());
        }
    }
    let lines: Vec<&str> = stdout.lines().collect();
    if let Some(start) = lines.iter().rposition(|l| *l == "failures:") {
        for line in &lines[start + 1..] {
            match line.strip_prefix("    ") {
                Some(name) if !name.trim().is_empty() => {
                    failed.insert(name.trim().to_string());
                }
                _ => break,
            }
        }
    }
    failed.into_iter().collect()
}

fn selects(pattern: &str, id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => id.starts_with(prefix),
        None => pattern == id,
    }
}

fn verdict_line(m: &Mutant, r: &Record) -> String {
    let failed = format!("{} of {} tests failed", r.failed.len(), r.total_tests);
    // The Rust tests and, for the entries the Python suite judges too, its pytest cases.
    let total = m.killed_by.len() + m.python_killed_by.len();
    let predicted = total.saturating_sub(r.missed_predictions.len());
    let prediction = if r.missed_predictions.is_empty() {
        format!("prediction held ({predicted}/{total})")
    } else {
        format!(
            "PREDICTION MISSED ({predicted}/{total}): did not fail: {}",
            r.missed_predictions.join(", ")
        )
    };
    match r.status {
        Status::Killed => format!("killed    {:>5.1}s  {failed}; {prediction}", r.seconds),
        Status::Survived => format!("SURVIVED  {:>5.1}s  every test passed", r.seconds),
        Status::Timeout => format!(
            "TIMEOUT   {:>5.1}s  tests killed after the limit",
            r.seconds
        ),
        Status::Unviable => format!("UNVIABLE  {:>5.1}s  the mutant does not compile", r.seconds),
    }
}

fn summarize(selected: &[&Mutant], results: &Results, elapsed: Duration) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut as_predicted = 0;
    for m in selected {
        let Some(r) = results.get(&m.id) else {
            continue;
        };
        let key = match r.status {
            Status::Killed => "killed",
            Status::Survived => "survived",
            Status::Timeout => "timeout",
            Status::Unviable => "unviable",
        };
        *counts.entry(key).or_default() += 1;
        as_predicted += usize::from(r.as_predicted());
    }
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    println!(
        "\nsummary: {} mutants: {} killed ({} as predicted), {} survived, {} timeout, {} unviable \
         in {:.0}s",
        selected.len(),
        get("killed"),
        as_predicted,
        get("survived"),
        get("timeout"),
        get("unviable"),
        elapsed.as_secs_f64()
    );
}

pub(crate) fn report_problems(what: &str, problems: &[String]) -> String {
    let mut text = format!("{what}:\n");
    for p in problems {
        text.push_str("  - ");
        text.push_str(p);
        text.push('\n');
    }
    text
}

/// Copies the working tree (as it is, uncommitted changes included) without `target/`, `.git/`
/// and cargo-mutants' output.
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    const SKIP_AT_ROOT: [&str; 4] = ["target", ".git", "mutants.out", "mutants.out.old"];
    fn walk(from: &Path, to: &Path, top: bool) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            let name = entry.file_name();
            if top && SKIP_AT_ROOT.iter().any(|s| name == *s) {
                continue;
            }
            let kind = entry.file_type()?;
            let (src, dst) = (entry.path(), to.join(&name));
            if kind.is_dir() {
                walk(&src, &dst, false)?;
            } else if kind.is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
            } else {
                std::fs::copy(&src, &dst)?;
            }
        }
        Ok(())
    }
    walk(from, to, true).map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn flush() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

/// Writes the observations to `results.json`.
fn save_results(target_dir: &Path, results: &Results) -> Result<(), String> {
    let text = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    std::fs::write(results_path(target_dir), text)
        .map_err(|e| format!("writing {}: {e}", results_path(target_dir).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libtest_failures() {
        let out = "running 3 tests\n\
                   test a::b::seed ... ok\n\
                   test a::b::kept ... FAILED\n\
                   test c ... FAILED\n\
                   \n\
                   failures:\n\
                   \n\
                   ---- a::b::kept stdout ----\n\
                   panicked\n\
                   \n\
                   failures:\n    a::b::kept\n    c\n    d\n\n\
                   test result: FAILED. 1 passed; 3 failed\n";
        assert_eq!(parse_failures(out), ["a::b::kept", "c", "d"]);
        assert!(parse_failures("test x ... ok\n\ntest result: ok.").is_empty());
    }

    #[test]
    fn selects_exact_ids_and_prefixes() {
        assert!(selects("claim-*", "claim-many-first-owner-only"));
        assert!(selects("renew-fence-dropped", "renew-fence-dropped"));
        assert!(!selects("renew", "renew-fence-dropped"));
    }
}
