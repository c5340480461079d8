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
    /// Only mutants in lines changed since the recorded base ([`BASE_FILE`]); a full run when
    /// the base is missing or unknown to git.
    pub since_base: bool,
    /// After a clean full run, record the commit it covered in [`BASE_FILE`].
    pub record_base: bool,
    /// Parallel build/test jobs (cargo-mutants' `--jobs`).
    pub jobs: u32,
    /// Further arguments for cargo-mutants.
    pub extra: Vec<String>,
}

/// The library's source, the only code cargo-mutants examines (see `.cargo/mutants.toml`).
const EXAMINED: &str = "crates/leasefence/src";

/// The recorded base: the commit at which the last full run was clean.
pub const BASE_FILE: &str = "mutants/cargo-mutants.base";

/// What a full run's verdict depends on: the library (its source and its tests) and the
/// configuration. A run records its base only when these match the commit exactly.
const COVERED: [&str; 2] = ["crates/leasefence", ".cargo/mutants.toml"];

/// The commit recorded in [`BASE_FILE`]: its first line that is neither empty nor a comment.
pub fn read_base(root: &Path) -> Result<Option<String>, String> {
    let path = root.join(BASE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    Ok(text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string))
}

/// The base to diff against for `--since-base`, or `None` (with the reason printed) for a full
/// run.
fn resolve_base(root: &Path) -> Result<Option<String>, String> {
    let Some(base) = read_base(root)? else {
        println!("cargo-mutants: no base recorded in {BASE_FILE}; running over the whole library");
        return Ok(None);
    };
    if !is_hex_commit(&base) {
        return Err(format!(
            "{BASE_FILE}: `{base}` is not a full commit hash (40 hex digits)"
        ));
    }
    let known = git(root, &["cat-file", "-e", &format!("{base}^{{commit}}")]).is_ok();
    if !known {
        println!(
            "cargo-mutants: the recorded base {base} is unknown to this clone (shallow, or \
             history rewritten); running over the whole library"
        );
        return Ok(None);
    }
    Ok(Some(base))
}

pub(crate) fn is_hex_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit a full run covers: HEAD, provided the library and the configuration are exactly
/// HEAD's (nothing modified or untracked). Otherwise why not.
fn covered_commit(root: &Path) -> Result<String, String> {
    let head = git(root, &["rev-parse", "HEAD"])?.trim().to_string();
    let mut args = vec!["status", "--porcelain", "--untracked-files=all", "--"];
    args.extend(COVERED);
    let dirty = git(root, &args)?;
    if dirty.trim().is_empty() {
        Ok(head)
    } else {
        Err(format!(
            "{} differ from HEAD ({head}):\n{dirty}commit them first, so the base names the tree \
             that was run",
            COVERED.join(" and ")
        ))
    }
}

/// Whether the library and the configuration are still exactly as in `commit` (other paths,
/// and commits touching only them, do not matter).
fn unchanged_since(root: &Path, commit: &str) -> Result<(), String> {
    let mut args = vec!["diff", "--name-only", commit, "--"];
    args.extend(COVERED);
    let changed = git(root, &args)?;
    let mut args = vec!["status", "--porcelain", "--untracked-files=all", "--"];
    args.extend(COVERED);
    let untracked = git(root, &args)?;
    if changed.trim().is_empty() && untracked.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("these changed meanwhile:\n{changed}{untracked}"))
    }
}

/// Writes `commit` to [`BASE_FILE`], with a comment saying what it means.
fn record_base(root: &Path, commit: &str, summary: &str) -> Result<(), String> {
    let path = root.join(BASE_FILE);
    let text = format!(
        "# The commit at which the last full `cargo xtask cargo-mutants` run over {EXAMINED} was\n\
         # clean: {summary}.\n\
         # CI (`cargo xtask cargo-mutants --since-base`) mutates every library line changed since\n\
         # this commit; a clone that does not know it runs over the whole library instead.\n\
         # Written by `cargo xtask cargo-mutants --record-base` after a clean full run: commit it.\n\
         {commit}\n"
    );
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs cargo-mutants. Returns whether no mutant was missed and none timed out.
///
/// # Errors
/// cargo-mutants missing or failing for another reason (baseline tests failing, bad usage),
/// git failing, or I/O failures.
pub fn run(root: &Path, options: &Options) -> Result<bool, String> {
    if options.record_base && (options.in_diff.is_some() || options.since_base) {
        return Err("--record-base needs a full run (no --in-diff, no --since-base)".into());
    }
    if options.in_diff.is_some() && options.since_base {
        return Err("--in-diff and --since-base exclude each other".into());
    }
    let in_diff = if options.since_base {
        resolve_base(root)?
    } else {
        options.in_diff.clone()
    };
    // Checked before the run (cargo-mutants copies the tree when it starts) and again after.
    let covered = if options.record_base {
        Some(covered_commit(root)?)
    } else {
        None
    };
    let started = std::time::Instant::now();
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
    if let Some(base) = &in_diff {
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
    let clean = missed.is_empty() && timeout.is_empty();
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    println!("cargo-mutants: wall time {minutes:.1} min");
    if let Some(commit) = covered {
        if !clean {
            println!("cargo-mutants: not clean; {BASE_FILE} left as it was");
        } else if let Err(why) = unchanged_since(root, &commit) {
            return Err(format!(
                "the run started at {commit}, but {why}; {BASE_FILE} left as it was"
            ));
        } else {
            let summary = format!(
                "{} caught, {} unviable, 0 missed, 0 timeouts in {minutes:.0} min",
                caught.len(),
                unviable.len()
            );
            record_base(root, &commit, &summary)?;
            println!("cargo-mutants: recorded {commit} in {BASE_FILE}; commit it");
        }
    }
    Ok(clean)
}

fn git_diff(root: &Path, base: &str) -> Result<String, String> {
    git(
        root,
        &["diff", "--no-color", "--no-ext-diff", base, "--", EXAMINED],
    )
}

/// Runs git in `root` and returns its standard output.
pub(crate) fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn display(path: &Path) -> String {
    PathBuf::from(path).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_line_that_is_not_a_comment() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_base(dir.path()).unwrap(), None);
        std::fs::create_dir_all(dir.path().join("mutants")).unwrap();
        let hash = "0123456789abcdef0123456789abcdef01234567";
        std::fs::write(
            dir.path().join(BASE_FILE),
            format!("# what it means\n\n  {hash}  \nignored\n"),
        )
        .unwrap();
        assert_eq!(read_base(dir.path()).unwrap().as_deref(), Some(hash));
        assert!(is_hex_commit(hash));
        assert!(!is_hex_commit("HEAD~1"));
        assert!(!is_hex_commit(&hash[1..]));
    }
}
