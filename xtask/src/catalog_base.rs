//! `cargo xtask mutants --since-base` / `--record-base`: the catalog's verdicts depend only on
//! the library, its tests and the catalog itself. `mutants/catalog.base` records the commit of
//! the last full run that killed every entry as predicted (the run whose observations
//! `docs/worksheet.md` shows); when none of those inputs changed since that commit, the run is
//! not repeated — only the catalog's static check is (every `find` applies exactly once).
//! Anything else (no base, a base unknown to this clone, any change under `crates/leasefence/`,
//! `Cargo.lock` or `mutants/catalog.toml`) runs the whole catalog.

use std::path::Path;

use crate::cargo_mutants::{git, is_hex_commit};

/// The file holding the base commit (40 hex digits; `#` lines are comments).
pub const BASE_FILE: &str = "mutants/catalog.base";

/// The paths whose change can change a verdict.
const INPUTS: [&str; 3] = ["crates/leasefence", "Cargo.lock", "mutants/catalog.toml"];

/// `Ok(Some(why))` when the full run is needed, `Ok(None)` when nothing it depends on changed
/// since the recorded base (the working tree compared, uncommitted changes included).
///
/// # Errors
/// A malformed base file, or git failing.
pub fn full_run_needed(root: &Path) -> Result<Option<String>, String> {
    let path = root.join(BASE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Some(format!("no base recorded in {BASE_FILE}")));
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let Some(base) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return Ok(Some(format!("{BASE_FILE} names no commit")));
    };
    if !is_hex_commit(base) {
        return Err(format!(
            "{BASE_FILE}: `{base}` is not a full commit hash (40 hex digits)"
        ));
    }
    if git(root, &["cat-file", "-e", &format!("{base}^{{commit}}")]).is_err() {
        return Ok(Some(format!(
            "the recorded base {base} is unknown to this clone"
        )));
    }
    let mut args = vec!["diff", "--name-only", base, "--"];
    args.extend(INPUTS);
    let changed = git(root, &args)?;
    let untracked = git(
        root,
        &[
            &["ls-files", "--others", "--exclude-standard", "--"][..],
            &INPUTS[..],
        ]
        .concat(),
    )?;
    let changed: Vec<&str> = changed.lines().chain(untracked.lines()).collect();
    if changed.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "{} input file{} changed since the base {base} (first: {})",
        changed.len(),
        if changed.len() == 1 { "" } else { "s" },
        changed[0]
    )))
}

/// Records HEAD as the base, after a full run that killed every entry as predicted. Refused
/// when an input differs from HEAD (the run judged a tree that no commit holds).
///
/// # Errors
/// Uncommitted inputs, git failing, or I/O.
pub fn record(root: &Path) -> Result<String, String> {
    let mut args = vec!["status", "--porcelain", "--"];
    args.extend(INPUTS);
    let dirty = git(root, &args)?;
    if !dirty.trim().is_empty() {
        return Err(format!(
            "not recording a base: the run judged uncommitted changes ({})",
            dirty.lines().next().unwrap_or_default().trim()
        ));
    }
    let head = git(root, &["rev-parse", "HEAD"])?.trim().to_string();
    let text = format!(
        "# The commit of the last full `cargo xtask mutants` run that killed every catalog entry\n\
         # as predicted (docs/worksheet.md shows its observations). `cargo xtask mutants\n\
         # --since-base` (CI) runs the catalog again only when the library, its tests, Cargo.lock\n\
         # or the catalog changed since. Written by `cargo xtask mutants --record-base`: commit it.\n\
         {head}\n"
    );
    let path = root.join(BASE_FILE);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(head)
}
