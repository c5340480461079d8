//! `cargo xtask mutants --since-base` / `--record-base`: the catalog's verdicts depend only on
//! the library, its tests and the catalog itself. `mutants/catalog.base` records the commit of
//! the last full run that killed every entry as predicted (the run whose observations
//! `docs/worksheet.md` shows); when none of those inputs changed since that commit, the run is
//! not repeated — only the catalog's static check is (every `find` applies exactly once).
//!
//! When something changed, [`since_base`] says which entries its change can concern, and CI
//! runs those (the whole catalog is the long tier, `cargo xtask mutants --record-base`):
//! - an entry whose `file` (or an `also` edit's file) changed, or that is new or changed in
//!   the catalog;
//! - an entry judged by the Python suite too (`python_killed_by`), when anything under
//!   `python/` (the package or its tests) changed;
//! - an entry predicted to be killed by a test in a test module that changed
//!   (`tests/it/<module>.rs` or `tests/it/<module>/…`);
//! - everything, when the base is missing or unknown, when the shared test helpers
//!   (`tests/it/common.rs`, `tests/it/model/` is a module of its own) changed, or when
//!   `Cargo.lock` changed a package the library or its tests build with. A `Cargo.lock`
//!   change outside that closure (a new crate of the workspace, say) cannot change a verdict:
//!   the catalog builds `cargo test --package leasefence` alone.
//!
//! Files under `crates/leasefence/` that no entry mutates and no test is (examples, docs,
//! `tests/it/main.rs`'s list of modules) select nothing; the static check still runs on every
//! entry. The selection is by file, not by meaning: a change of one file that alters what
//! another file's code does is caught by that file's entries only at the next full run, which
//! is why `--record-base` stays the measure of the whole catalog.

use std::path::Path;

use crate::git::{git, is_hex_commit};

/// The file holding the base commit (40 hex digits; `#` lines are comments).
pub const BASE_FILE: &str = "mutants/catalog.base";

/// The paths whose change can change a verdict.
const INPUTS: [&str; 4] = [
    "crates/leasefence",
    "Cargo.lock",
    "mutants/catalog.toml",
    "python",
];

/// What a `--since-base` run has to run.
#[derive(Debug, PartialEq)]
pub enum SinceBase {
    /// Nothing an entry depends on changed: the recorded verdicts stand.
    Stands,
    /// These entries (by id), for this reason.
    Entries(Vec<String>, String),
    /// Every entry, for this reason.
    All(String),
}

/// Which entries the change since the recorded base concerns (the working tree compared,
/// uncommitted changes included); see the module's rules.
///
/// # Errors
/// A malformed base file or catalog, or git failing.
pub fn since_base(root: &Path, catalog: &crate::catalog::Catalog) -> Result<SinceBase, String> {
    let changed = match changed_since_base(root)? {
        Changed::NoBase(why) => return Ok(SinceBase::All(why)),
        Changed::Paths(paths, _) if paths.is_empty() => return Ok(SinceBase::Stands),
        Changed::Paths(paths, base) => (paths, base),
    };
    let (paths, base) = changed;
    const IT: &str = "crates/leasefence/tests/it/";
    let shared = |p: &str| p == "crates/leasefence/tests/it/common.rs";
    if let Some(p) = paths.iter().find(|p| shared(p)) {
        return Ok(SinceBase::All(format!("{p} changed since the base {base}")));
    }
    let modules: Vec<String> = paths
        .iter()
        .filter_map(|p| p.strip_prefix(IT))
        .filter(|rest| *rest != "main.rs")
        .map(|rest| {
            let first = rest.split('/').next().unwrap_or(rest);
            first.strip_suffix(".rs").unwrap_or(first).to_owned()
        })
        .collect();
    let old: Option<crate::catalog::Catalog> = git(
        root,
        &["show", &format!("{base}:{}", crate::catalog::CATALOG)],
    )
    .ok()
    .and_then(|text| toml::from_str(&text).ok());
    let same_as_before = |m: &crate::catalog::Mutant| {
        old.as_ref().is_some_and(|old| {
            old.mutant.iter().any(|o| {
                o.id == m.id
                    && o.file == m.file
                    && o.find == m.find
                    && o.replace == m.replace
                    && o.killed_by == m.killed_by
                    && o.python_killed_by == m.python_killed_by
                    && o.also == m.also
            })
        })
    };
    let ids: Vec<String> = catalog
        .mutant
        .iter()
        .filter(|m| {
            paths.contains(&m.file)
                || m.also.iter().any(|edit| paths.contains(&edit.file))
                // The Python package or its tests changed: the entries it judges run again.
                || (!m.python_killed_by.is_empty() && paths.iter().any(|p| p.starts_with("python/")))
                || !same_as_before(m)
                || m.killed_by.iter().any(|t| {
                    modules
                        .iter()
                        .any(|module| t.split("::").next() == Some(module))
                })
        })
        .map(|m| m.id.clone())
        .collect();
    let why = format!(
        "{} input file{} changed since the base {base} ({}); running the {} entr{} they concern",
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        paths.join(", "),
        ids.len(),
        if ids.len() == 1 { "y" } else { "ies" }
    );
    Ok(if ids.is_empty() {
        SinceBase::Stands
    } else {
        SinceBase::Entries(ids, why)
    })
}

/// The inputs changed since the base, or why there is no usable base.
enum Changed {
    NoBase(String),
    Paths(Vec<String>, String),
}

fn changed_since_base(root: &Path) -> Result<Changed, String> {
    match full_run_needed_paths(root)? {
        Err(why) => Ok(Changed::NoBase(why)),
        Ok((paths, base)) => Ok(Changed::Paths(paths, base)),
    }
}

/// The changed input paths and the base, or (`Err`) why there is no usable base.
fn full_run_needed_paths(root: &Path) -> Result<Result<(Vec<String>, String), String>, String> {
    let path = root.join(BASE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Err(format!("no base recorded in {BASE_FILE}")));
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let Some(base) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return Ok(Err(format!("{BASE_FILE} names no commit")));
    };
    if !is_hex_commit(base) {
        return Err(format!(
            "{BASE_FILE}: `{base}` is not a full commit hash (40 hex digits)"
        ));
    }
    if git(root, &["cat-file", "-e", &format!("{base}^{{commit}}")]).is_err() {
        return Ok(Err(format!(
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
                    "catalog base: Cargo.lock changed since {base}, but no package the library \
                     or its tests built with then is locked differently"
                );
                changed.retain(|path| *path != "Cargo.lock");
            }
            Ok(false) => {
                return Ok(Err(format!(
                    "Cargo.lock changed a package the library builds with since the base {base}"
                )));
            }
            Err(why) => {
                return Ok(Err(format!("cannot compare Cargo.lock's closure ({why})")));
            }
        }
    }
    let mut paths: Vec<String> = changed.iter().map(|p| (*p).to_owned()).collect();
    paths.sort();
    paths.dedup();
    Ok(Ok((paths, base.to_owned())))
}

/// Whether every package of the library's dependency closure — what `cargo tree` says
/// `cargo test --package leasefence` builds with on this host (normal, build and dev
/// dependencies, features resolved for that package alone) — is locked at the same version,
/// source and checksum in the base's `Cargo.lock`, or is new to the lock (no version of it
/// was there).
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
    // A package of the closure locked as it was, or new to the lock altogether (a dependency
    // the change itself added, whose code only the changed files use), leaves the verdicts of
    // the existing entries as they were; a package of the closure at another version or
    // checksum than before does not.
    Ok(locked(&new)
        .into_iter()
        .filter(|(name, version, _)| closure.contains(&(name.clone(), version.clone())))
        .all(|entry| old.contains(&entry) || !old.iter().any(|(name, _, _)| *name == entry.0)))
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
