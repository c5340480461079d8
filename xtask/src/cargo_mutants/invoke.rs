//! Running cargo-mutants for a stage: the run's own clone of the commit, its environment, the
//! generated configuration, and the outcomes read back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::groups::EXAMINED;
use super::outcome::{Mutant, Verdict, read_outcomes};
use crate::git::git;

/// Escapes `s` for a regular expression (the syntax of the regex crate, which cargo-mutants
/// uses): every character with a meaning gets a backslash.
pub fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The directory of a staged run: `target/cargo-mutants`.
pub fn out_dir(root: &Path) -> PathBuf {
    root.join("target").join("cargo-mutants")
}

/// Checks out `commit` of `root` in the run's own clone (created on first use, its `target`
/// kept), with nothing left of an earlier, interrupted run's mutation.
pub fn prepare_tree(root: &Path, commit: &str) -> Result<PathBuf, String> {
    let tree = out_dir(root).join("tree");
    if !tree.join(".git").exists() {
        std::fs::create_dir_all(out_dir(root)).map_err(|e| e.to_string())?;
        let tree_s = tree.to_string_lossy().into_owned();
        git(
            root,
            &[
                "clone",
                "--quiet",
                "--shared",
                "--no-checkout",
                ".",
                &tree_s,
            ],
        )?;
    } else {
        let root_s = root.to_string_lossy().into_owned();
        git(&tree, &["fetch", "--quiet", &root_s, "HEAD"])?;
    }
    git(
        &tree,
        &["checkout", "--quiet", "--force", "--detach", commit],
    )?;
    git(&tree, &["clean", "--quiet", "-fdx", "-e", "/target"])?;
    Ok(tree)
}

/// The git blob of every file of the library at `commit`.
pub fn blobs(tree: &Path, commit: &str) -> Result<BTreeMap<String, String>, String> {
    let listing = git(tree, &["ls-tree", "-r", commit, "--", EXAMINED])?;
    Ok(listing
        .lines()
        .filter_map(|line| {
            let (meta, path) = line.split_once('\t')?;
            Some((
                path.to_string(),
                meta.split_whitespace().nth(2)?.to_string(),
            ))
        })
        .collect())
}

/// The environment that makes every build and test run cheaper without changing what is
/// tested: no debug info, mold as the linker when installed, scratch files in memory.
pub fn fast_env(cmd: &mut Command) {
    cmd.env_remove("CARGO_TARGET_DIR")
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env("CARGO_INCREMENTAL", "1");
    if on_path("mold") {
        cmd.env("RUSTFLAGS", "-C link-arg=-fuse-ld=mold");
    }
    if Path::new("/dev/shm").is_dir() {
        cmd.env("TMPDIR", "/dev/shm");
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Whether cargo-nextest is installed (the screen needs it; without it every mutant goes to
/// the whole suite).
pub fn have_nextest() -> bool {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The mutants cargo-mutants generates in `tree` with `config` (only those in the lines of
/// `in_diff` when given).
pub fn list(tree: &Path, config: &Path, in_diff: Option<&Path>) -> Result<Vec<Mutant>, String> {
    #[derive(Deserialize)]
    struct Listed {
        name: String,
        file: String,
    }
    let mut cmd = cargo_mutants(tree, config);
    cmd.args(["--list", "--json"]);
    if let Some(patch) = in_diff {
        cmd.arg("--in-diff").arg(patch);
    }
    let out = cmd.output().map_err(|e| {
        format!(
            "cannot run cargo-mutants ({e}); install it with `cargo install cargo-mutants --locked`"
        )
    })?;
    if !out.status.success() {
        return Err(format!(
            "cargo mutants --list failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // A diff that touches no code cargo-mutants mutates (doc comments only, say) lists
    // nothing at all, not even `[]` (cargo-mutants 27: "No mutants to filter" on stderr).
    if in_diff.is_some() && out.stdout.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let listed: Vec<Listed> = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo mutants --list --json: {e}"))?;
    Ok(listed
        .into_iter()
        .map(|l| Mutant {
            name: l.name,
            file: l.file,
        })
        .collect())
}

fn cargo_mutants(tree: &Path, config: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(tree)
        .args(["mutants", "--config"])
        .arg(config);
    fast_env(&mut cmd);
    cmd
}

/// One stage's settings.
pub struct Stage<'a> {
    /// `screen:<group>` or `suite`.
    pub label: String,
    /// The mutants it judges (exact names).
    pub names: Vec<&'a str>,
    /// `nextest` (the screen) or `cargo` (the whole suite).
    pub test_tool: &'a str,
    /// The test arguments (`additional_cargo_test_args`).
    pub test_args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(&'a str, &'a str)>,
    /// Whether cargo-mutants runs its baseline first (the whole suite does, so it sets its own
    /// time limit from it).
    pub baseline: bool,
}

/// The project's `.cargo/mutants.toml` with `stage`'s mutants and test settings, written to
/// `path`.
pub fn write_config(tree: &Path, stage: &Stage<'_>, path: &Path) -> Result<(), String> {
    let base = tree.join(".cargo").join("mutants.toml");
    let text = std::fs::read_to_string(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let mut table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", base.display()))?;
    let strings =
        |v: Vec<String>| toml::Value::Array(v.into_iter().map(toml::Value::String).collect());
    let names = stage
        .names
        .iter()
        .map(|n| format!("^{}$", regex_escape(n)))
        .collect();
    table.insert("examine_re".into(), strings(names));
    table.insert(
        "test_tool".into(),
        toml::Value::String(stage.test_tool.into()),
    );
    if !stage.test_args.is_empty() {
        table.insert(
            "additional_cargo_test_args".into(),
            strings(stage.test_args.clone()),
        );
    }
    table.remove("output");
    let text = toml::to_string(&table).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs one stage over its mutants in `tree`, in place; returns each mutant's verdict.
pub fn run_stage(
    root: &Path,
    tree: &Path,
    stage: &Stage<'_>,
    extra: &[String],
) -> Result<BTreeMap<String, Verdict>, String> {
    if stage.names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let dir = out_dir(root)
        .join("stages")
        .join(stage.label.replace(':', "-"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let config = dir.join("mutants.toml");
    write_config(tree, stage, &config)?;
    let results = dir.join("mutants.out");
    if results.exists() {
        std::fs::remove_dir_all(&results).map_err(|e| format!("{}: {e}", results.display()))?;
    }
    let mut cmd = cargo_mutants(tree, &config);
    cmd.args(["--in-place", "--no-shuffle", "--output"])
        .arg(&dir)
        .arg("--baseline")
        .arg(if stage.baseline { "run" } else { "skip" })
        .args(extra);
    if !stage.baseline {
        // No baseline to derive a limit from: a hung test is cut off after ten minutes.
        cmd.args(["--timeout", "600"]);
    }
    for (k, v) in &stage.env {
        cmd.env(k, v);
    }
    println!(
        "\n== cargo-mutants {}: {} mutants ({}) ==",
        stage.label,
        stage.names.len(),
        stage.test_tool
    );
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo-mutants: {e}"))?;
    match status.code() {
        Some(0 | 2 | 3) => {}
        Some(4) => {
            return Err(format!(
                "cargo-mutants {}: the unmutated tree's tests fail (see {})",
                stage.label,
                dir.join("mutants.out/log/baseline.log").display()
            ));
        }
        other => {
            return Err(format!(
                "cargo-mutants {} failed (exit {other:?})",
                stage.label
            ));
        }
    }
    read_outcomes(&results.join("outcomes.json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn an_escaped_name_has_no_unescaped_meta_character() {
        let name =
            "src/a.rs:12:5: replace <impl Store for X>::f -> Result<Vec<(u8, u8)>> with Ok(vec![])";
        let escaped = regex_escape(name);
        assert!(escaped.contains(r"\(u8, u8\)"));
        assert!(escaped.contains(r"vec!\[\]"));
        assert!(escaped.contains(r"a\.rs"));
        assert!(escaped.contains(r"\-> Result"));
        assert_eq!(regex_escape("plain words"), "plain words");
    }
}
