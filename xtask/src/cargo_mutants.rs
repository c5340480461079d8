//! `cargo xtask cargo-mutants`: cargo-mutants over the library's Rust code, staged (a quick
//! screen, then the whole suite for every mutant the screen did not catch; see [`staged`]) and
//! judged by each mutant's outcome rather than by cargo-mutants' exit code.
//!
//! cargo-mutants' exit code is 2 for missed mutants but 3 for timeouts, and a timeout takes
//! precedence: a run with both exits 3. So this reads `outcomes.json` and fails when any
//! mutant was missed or timed out.

mod groups;
mod invoke;
mod outcome;
mod staged;

use std::path::Path;

use crate::git::{git, is_hex_commit};
use groups::EXAMINED;
use outcome::Verdict;

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
    /// Judge every mutant anew, keeping no verdict of an earlier run.
    pub fresh: bool,
    /// Only mutants in these files or folders (paths from the workspace root); all when empty.
    pub files: Vec<String>,
    /// Further arguments for cargo-mutants.
    pub extra: Vec<String>,
}

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

/// Runs cargo-mutants, staged (see [`staged`]). Returns whether no mutant was missed and none
/// timed out.
///
/// # Errors
/// cargo-mutants missing or failing for another reason (baseline tests failing, bad usage),
/// git failing, or I/O failures.
pub fn run(root: &Path, options: &Options) -> Result<bool, String> {
    if options.record_base
        && (options.in_diff.is_some() || options.since_base || !options.files.is_empty())
    {
        return Err("--record-base needs a full run (no --in-diff, --since-base or --file)".into());
    }
    if options.in_diff.is_some() && options.since_base {
        return Err("--in-diff and --since-base exclude each other".into());
    }
    let in_diff = if options.since_base {
        resolve_base(root)?
    } else {
        options.in_diff.clone()
    };
    // The run mutates a clone of HEAD: checked before the run and again after.
    let commit = match covered_commit(root) {
        Ok(commit) => commit,
        Err(why) if options.record_base => return Err(why),
        Err(why) => {
            let head = git(root, &["rev-parse", "HEAD"])?.trim().to_string();
            println!(
                "cargo-mutants: the run covers the commit {head}, not the working tree: {why}"
            );
            head
        }
    };
    let started = std::time::Instant::now();
    let tree = invoke::prepare_tree(root, &commit)?;
    let config = tree.join(".cargo").join("mutants.toml");
    let patch = match &in_diff {
        Some(base) => {
            let diff = git(
                root,
                &[
                    "diff",
                    "--no-color",
                    "--no-ext-diff",
                    base,
                    &commit,
                    "--",
                    EXAMINED,
                ],
            )?;
            if diff.trim().is_empty() {
                println!(
                    "cargo-mutants: no change to {EXAMINED} from {base} to {commit}; nothing to mutate"
                );
                return Ok(true);
            }
            let patch = invoke::out_dir(root).join("in-diff.patch");
            std::fs::write(&patch, diff).map_err(|e| format!("{}: {e}", patch.display()))?;
            println!("cargo-mutants: only lines of {EXAMINED} changed from {base} to {commit}");
            Some(patch)
        }
        None => None,
    };
    let mut mutants = invoke::list(&tree, &config, patch.as_deref())?;
    if !options.files.is_empty() {
        mutants.retain(|m| {
            options.files.iter().any(|f| {
                let f = f.trim_end_matches('/');
                m.file == f || m.file.starts_with(&format!("{f}/"))
            })
        });
    }
    if mutants.is_empty() {
        println!("cargo-mutants: no mutants generated; nothing to judge");
        return Ok(true);
    }
    let tally = staged::run(
        root,
        &tree,
        &commit,
        &mutants,
        options.fresh,
        &options.extra,
    )?;
    let count = |v| tally.with(v).len();
    let (caught, unviable) = (count(Verdict::Caught), count(Verdict::Unviable));
    let (missed, timeout) = (tally.with(Verdict::Missed), tally.with(Verdict::Timeout));
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    println!(
        "\ncargo-mutants at {commit}: {} mutants in {} files: {caught} caught, {} missed, {} \
         timeout, {unviable} unviable ({} kept from earlier runs, {} caught by the screen, {} \
         judged by the whole suite) in {minutes:.1} min",
        mutants.len(),
        staged::files(&mutants).len(),
        missed.len(),
        timeout.len(),
        tally.kept,
        tally.screened,
        tally.suited,
    );
    for m in &missed {
        println!("  MISSED   {m}");
    }
    for m in &timeout {
        println!("  TIMEOUT  {m}");
    }
    let clean = missed.is_empty() && timeout.is_empty();
    if options.record_base {
        if !clean {
            println!("cargo-mutants: not clean; {BASE_FILE} left as it was");
        } else if let Err(why) = unchanged_since(root, &commit) {
            return Err(format!(
                "the run started at {commit}, but {why}; {BASE_FILE} left as it was"
            ));
        } else {
            let summary = format!(
                "{} mutants, {caught} caught, {unviable} unviable, 0 missed, 0 timeouts",
                mutants.len()
            );
            record_base(root, &commit, &summary)?;
            println!("cargo-mutants: recorded {commit} in {BASE_FILE}; commit it");
        }
    }
    Ok(clean)
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
