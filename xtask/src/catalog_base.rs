//! `cargo xtask mutants --since-base` / `--record-base`: the catalog's verdicts depend only on
//! the library, its tests and the catalog itself. `mutants/catalog.base` records the commit of
//! the last full run that killed every entry as predicted (the run whose observations
//! `docs/worksheet.md` shows); when none of those inputs changed since that commit, the run is
//! not repeated — only the catalog's static check is (every `find` applies exactly once).
//!
//! Each entry is also judged on its own: a run that kills an entry as predicted on a committed
//! tree records that commit as the entry's verdict in `mutants/catalog.verdicts.json` (see
//! `verdicts`), and the entry's change is then measured from there instead of from the base.
//! So a run of the entries one change concerns, committed with it, spares the next CI run
//! those entries.
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

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::catalog::Mutant;
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

/// Which entries the change since their verdicts concerns (the working tree compared,
/// uncommitted changes included); see the module's rules. An entry's reference is its own
/// verdict in `mutants/catalog.verdicts.json` when that was given to the entry as it is now
/// (same fingerprint) at a commit this clone knows; otherwise the full run's base.
///
/// # Errors
/// A malformed base file, verdicts file or catalog, or git failing.
pub fn since_base(root: &Path, catalog: &crate::catalog::Catalog) -> Result<SinceBase, String> {
    let verdicts = crate::verdicts::load(root)?;
    let base = base_commit(root)?;
    let mut by_reference: BTreeMap<String, Vec<&Mutant>> = BTreeMap::new();
    let mut unjudged: Vec<&Mutant> = Vec::new();
    for m in &catalog.mutant {
        let own = verdicts
            .get(&m.id)
            .filter(|v| v.fingerprint == m.fingerprint() && is_hex_commit(&v.commit))
            .filter(|v| known_commit(root, &v.commit));
        match (own, &base) {
            (Some(v), _) => by_reference.entry(v.commit.clone()).or_default().push(m),
            (None, Ok(base)) => by_reference.entry(base.clone()).or_default().push(m),
            (None, Err(_)) => unjudged.push(m),
        }
    }
    if let Err(why) = &base
        && unjudged.len() == catalog.mutant.len()
    {
        return Ok(SinceBase::All(why.clone()));
    }
    let mut chosen: BTreeSet<&str> = unjudged.iter().map(|m| m.id.as_str()).collect();
    let mut reasons = Vec::new();
    if let Err(why) = &base
        && !unjudged.is_empty()
    {
        reasons.push(format!(
            "{} entries have no verdict and {why}",
            unjudged.len()
        ));
    }
    for (reference, entries) in &by_reference {
        let short = &reference[..reference.len().min(7)];
        match changed_paths(root, reference)? {
            Err(why) => {
                chosen.extend(entries.iter().map(|m| m.id.as_str()));
                reasons.push(format!(
                    "all {} entries judged at {short}: {why}",
                    entries.len()
                ));
            }
            Ok(paths) if paths.is_empty() => {}
            Ok(paths) => {
                let concerned = concerned(root, reference, &paths, entries);
                if !concerned.is_empty() {
                    reasons.push(format!(
                        "{} of the {} entries judged at {short} ({} input file{} changed since: {})",
                        concerned.len(),
                        entries.len(),
                        paths.len(),
                        if paths.len() == 1 { "" } else { "s" },
                        paths.join(", ")
                    ));
                }
                chosen.extend(concerned);
            }
        }
    }
    if chosen.is_empty() {
        return Ok(SinceBase::Stands);
    }
    let ids: Vec<String> = catalog
        .mutant
        .iter()
        .filter(|m| chosen.contains(m.id.as_str()))
        .map(|m| m.id.clone())
        .collect();
    let why = format!(
        "running the {} entr{} a change concerns: {}",
        ids.len(),
        if ids.len() == 1 { "y" } else { "ies" },
        reasons.join("; ")
    );
    Ok(SinceBase::Entries(ids, why))
}

/// Of `entries`, all judged at `reference`, those that the change of `paths` since then
/// concerns, by the module's rules.
fn concerned<'c>(
    root: &Path,
    reference: &str,
    paths: &[String],
    entries: &[&'c Mutant],
) -> Vec<&'c str> {
    const IT: &str = "crates/leasefence/tests/it/";
    let shared = |p: &str| p == "crates/leasefence/tests/it/common.rs";
    if paths.iter().any(|p| shared(p)) {
        return entries.iter().map(|m| m.id.as_str()).collect();
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
        &["show", &format!("{reference}:{}", crate::catalog::CATALOG)],
    )
    .ok()
    .and_then(|text| toml::from_str(&text).ok());
    let same_as_before = |m: &Mutant| {
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
    entries
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
        .map(|m| m.id.as_str())
        .collect()
}

/// Whether this clone has `commit`.
fn known_commit(root: &Path, commit: &str) -> bool {
    git(root, &["cat-file", "-e", &format!("{commit}^{{commit}}")]).is_ok()
}

/// The full run's base commit, or (`Err`) why there is no usable one.
fn base_commit(root: &Path) -> Result<Result<String, String>, String> {
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
    if !known_commit(root, base) {
        return Ok(Err(format!(
            "the recorded base {base} is unknown to this clone"
        )));
    }
    Ok(Ok(base.to_owned()))
}

/// The input paths changed since `base` (the working tree and untracked files included), or
/// (`Err`) why every verdict given at `base` is void (a locked dependency of the library
/// changed).
fn changed_paths(root: &Path, base: &str) -> Result<Result<Vec<String>, String>, String> {
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
                changed.retain(|path| *path != "Cargo.lock");
            }
            Ok(false) => {
                return Ok(Err(format!(
                    "Cargo.lock changed a package the library builds with since {base}"
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
    Ok(Ok(paths))
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
    let head = match committed_head(root)? {
        Ok(head) => head,
        Err(dirty) => {
            return Err(format!(
                "not recording a base: the run judged uncommitted changes ({dirty})"
            ));
        }
    };
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

/// HEAD, when every input is as HEAD has it (a run then judges that commit); otherwise
/// (`Err`) the first input that differs.
///
/// # Errors
/// git failing.
pub fn committed_head(root: &Path) -> Result<Result<String, String>, String> {
    let mut args = vec!["status", "--porcelain", "--"];
    args.extend(INPUTS);
    let dirty = git(root, &args)?;
    if let Some(first) = dirty.lines().map(str::trim).find(|l| !l.is_empty()) {
        return Ok(Err(first.to_owned()));
    }
    Ok(Ok(git(root, &["rev-parse", "HEAD"])?.trim().to_string()))
}

/// For each entry, the commit of the last run recorded to have killed it as predicted, for
/// the worksheet: its own verdict in `mutants/catalog.verdicts.json` for the entry as it is
/// now, or else the full run's base when the entry was the same there (same fingerprint),
/// whatever changed in the code since (that is [`since_base`]'s concern). Entries with neither
/// are absent.
///
/// # Errors
/// A malformed base or verdicts file, or git failing.
pub fn judged_at(
    root: &Path,
    catalog: &crate::catalog::Catalog,
) -> Result<BTreeMap<String, String>, String> {
    let verdicts = crate::verdicts::load(root)?;
    let base = base_commit(root)?.ok();
    let at_base: Option<crate::catalog::Catalog> = base.as_ref().and_then(|base| {
        git(
            root,
            &["show", &format!("{base}:{}", crate::catalog::CATALOG)],
        )
        .ok()
        .and_then(|text| toml::from_str(&text).ok())
    });
    let mut judged = BTreeMap::new();
    for m in &catalog.mutant {
        let print = m.fingerprint();
        if let Some(v) = verdicts.get(&m.id).filter(|v| v.fingerprint == print) {
            judged.insert(m.id.clone(), v.commit.clone());
        } else if let (Some(base), Some(old)) = (&base, &at_base)
            && old
                .mutant
                .iter()
                .any(|o| o.id == m.id && o.fingerprint() == print)
        {
            judged.insert(m.id.clone(), base.clone());
        }
    }
    Ok(judged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdicts::{Verdict, Verdicts};

    const CATALOG_TEXT: &str = r#"
step = []
not_guaranteed = []

[[mutant]]
id = "a-1"
rule = "r"
file = "crates/leasefence/src/a.rs"
find = "a"
replace = "A"
prediction = "p"
killed_by = ["alpha::t"]

[[mutant]]
id = "b-1"
rule = "r"
file = "crates/leasefence/src/b.rs"
find = "b"
replace = "B"
prediction = "p"
killed_by = ["beta::t"]
"#;

    fn git_ok(dir: &Path, args: &[&str]) -> String {
        let mut all = vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ];
        all.extend(args);
        git(dir, &all).unwrap()
    }

    fn write(dir: &Path, path: &str, text: &str) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn commit(dir: &Path, message: &str) -> String {
        git_ok(dir, &["add", "-A"]);
        git_ok(dir, &["commit", "-q", "-m", message]);
        git_ok(dir, &["rev-parse", "HEAD"]).trim().to_owned()
    }

    fn selected(dir: &Path, catalog: &crate::catalog::Catalog) -> Vec<String> {
        match since_base(dir, catalog).unwrap() {
            SinceBase::Stands => vec![],
            SinceBase::Entries(ids, _) => ids,
            SinceBase::All(why) => panic!("all: {why}"),
        }
    }

    #[test]
    fn an_entry_is_measured_from_its_own_verdict_else_from_the_full_runs_base() {
        let repo = tempfile::tempdir().unwrap();
        let dir = repo.path();
        git_ok(dir, &["init", "-q"]);
        write(dir, "crates/leasefence/src/a.rs", "a\n");
        write(dir, "crates/leasefence/src/b.rs", "b\n");
        write(dir, "crates/leasefence/tests/it/beta.rs", "t\n");
        write(dir, crate::catalog::CATALOG, CATALOG_TEXT);
        let base = commit(dir, "base");
        write(dir, BASE_FILE, &format!("# the full run\n{base}\n"));
        commit(dir, "record the base");
        let catalog: crate::catalog::Catalog = toml::from_str(CATALOG_TEXT).unwrap();
        assert_eq!(selected(dir, &catalog), Vec::<String>::new());

        // b.rs changes: b-1 runs again, a-1 stands.
        write(dir, "crates/leasefence/src/b.rs", "b b\n");
        let judged = commit(dir, "change b");
        assert_eq!(selected(dir, &catalog), ["b-1"]);

        // A run at that commit killed b-1: measured from there, nothing has changed since.
        let b1 = catalog.mutant.iter().find(|m| m.id == "b-1").unwrap();
        let mut verdicts = Verdicts::new();
        verdicts.insert(
            "b-1".into(),
            Verdict {
                commit: judged.clone(),
                fingerprint: b1.fingerprint(),
            },
        );
        crate::verdicts::save(dir, &verdicts).unwrap();
        assert_eq!(selected(dir, &catalog), Vec::<String>::new());
        assert_eq!(
            judged_at(dir, &catalog).unwrap(),
            BTreeMap::from([("a-1".into(), base.clone()), ("b-1".into(), judged.clone())])
        );

        // A module of b-1's predicted tests changes (uncommitted): b-1 again.
        write(dir, "crates/leasefence/tests/it/beta.rs", "t t\n");
        assert_eq!(selected(dir, &catalog), ["b-1"]);
        git_ok(
            dir,
            &["checkout", "-q", "--", "crates/leasefence/tests/it/beta.rs"],
        );

        // A verdict given to the entry as it was before (another fingerprint) does not stand:
        // b-1 is measured from the base again, where b.rs differs.
        verdicts.get_mut("b-1").unwrap().fingerprint = "an older entry".into();
        crate::verdicts::save(dir, &verdicts).unwrap();
        assert_eq!(selected(dir, &catalog), ["b-1"]);
        // (The worksheet still names the full run that last killed it.)
        assert_eq!(
            judged_at(dir, &catalog).unwrap(),
            BTreeMap::from([("a-1".into(), base.clone()), ("b-1".into(), base.clone())])
        );

        // No usable base: every entry runs when none has a verdict ...
        write(dir, BASE_FILE, "# no commit\n");
        assert!(matches!(
            since_base(dir, &catalog).unwrap(),
            SinceBase::All(_)
        ));
        // ... and those without one when some have.
        verdicts.get_mut("b-1").unwrap().fingerprint = b1.fingerprint();
        crate::verdicts::save(dir, &verdicts).unwrap();
        assert_eq!(selected(dir, &catalog), ["a-1"]);
    }
}
