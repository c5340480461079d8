//! `cargo xtask mutants --since-base` / `--record-base`: the catalog's verdicts depend only on
//! the library, its tests and the catalog itself. `mutants/catalog.base` records the commit of
//! the last full run that killed every entry as predicted (the run whose observations
//! `docs/worksheet.md` shows); when none of those inputs changed since that commit, the run is
//! not repeated — only the catalog's static check is (every `find` applies exactly once).
//! Anything else (no base, a base unknown to this clone, any change under `crates/leasefence/`
//! or `mutants/catalog.toml`, or a change of `Cargo.lock` that touches a package the library or
//! its tests build with) runs the whole catalog. A `Cargo.lock` change that only adds or moves
//! packages outside the library's dependency closure (a new crate of the workspace, say) cannot
//! change a verdict: the catalog builds `cargo test --package leasefence` alone.

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
    let mut changed: Vec<&str> = changed.lines().chain(untracked.lines()).collect();
    if changed.contains(&"Cargo.lock") {
        match lock_change_outside_library(root, base) {
            Ok(true) => {
                println!(
                    "catalog base: Cargo.lock changed since {base}, but not in any package the \
                     library or its tests build with"
                );
                changed.retain(|path| *path != "Cargo.lock");
            }
            Ok(false) => {}
            Err(why) => println!("catalog base: cannot compare Cargo.lock's closure ({why})"),
        }
    }
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

/// Whether every package of the library's dependency closure — what `cargo tree` says
/// `cargo test --package leasefence` builds with on this host (normal, build and dev
/// dependencies, features resolved for that package alone) — is locked at the same version,
/// source and checksum in the base's `Cargo.lock`.
///
/// # Errors
/// `cargo tree` or git failing, or a lock file that does not parse.
fn lock_change_outside_library(root: &Path, base: &str) -> Result<bool, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(root)
        .args([
            "tree",
            "--package",
            "leasefence",
            "--edges",
            "normal,build,dev",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--locked",
        ])
        .output()
        .map_err(|e| format!("cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    // `name vVERSION` and maybe ` (path)`, ` (*)` or ` (proc-macro)`.
    let closure: std::collections::BTreeSet<(String, String)> =
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let name = words.next()?;
                let version = words.next()?.strip_prefix('v')?;
                Some((name.to_owned(), version.to_owned()))
            })
            .collect();
    if closure.is_empty() {
        return Err("cargo tree listed no package".into());
    }
    let old = git(root, &["show", &format!("{base}:Cargo.lock")])?;
    let old: toml::Value =
        toml::from_str(&old).map_err(|e| format!("the base's Cargo.lock: {e}"))?;
    let new = std::fs::read_to_string(root.join("Cargo.lock")).map_err(|e| e.to_string())?;
    let new: toml::Value = toml::from_str(&new).map_err(|e| format!("Cargo.lock: {e}"))?;
    let locked = |lock: &toml::Value| -> Vec<(String, String, String)> {
        lock.get("package")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| {
                let field = |k: &str| p.get(k).and_then(toml::Value::as_str).unwrap_or("");
                (
                    field("name").to_owned(),
                    field("version").to_owned(),
                    format!("{} {}", field("source"), field("checksum")),
                )
            })
            .collect()
    };
    let old = locked(&old);
    Ok(locked(&new)
        .into_iter()
        .filter(|(name, version, _)| closure.contains(&(name.clone(), version.clone())))
        .all(|entry| old.contains(&entry)))
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
