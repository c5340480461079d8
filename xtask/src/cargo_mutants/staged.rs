//! The staged cargo-mutants run: a quick screen that may only say "caught", then the whole
//! suite for every mutant the screen did not catch, with each verdict kept for as long as the
//! mutated file is unchanged.
//!
//! The whole suite costs about a minute per mutant on 2 cores (the model tests alone run
//! 1,500 cases a store, and the doctests are compiled anew), and the library has some 1,500
//! mutants: a day. But most mutants are caught in seconds by the tests of the code they
//! mutate. So:
//!
//! 1. **Screen.** cargo-nextest, which stops at the first failing test, runs only the tests of
//!    the mutated file's concern (its [`Group`]), without the slow tests ([`SLOW`](super::groups::SLOW)) and with
//!    100 model cases a store. A failure there is a real failure of a real test: the mutant is
//!    caught. Passing proves nothing, so a mutant the screen does not catch goes on to
//! 2. **the whole suite**: `cargo test -p leasefence` with `.cargo/mutants.toml`'s arguments,
//!    the PostgreSQL cases and the doctests included, exactly as a plain cargo-mutants run
//!    judges it. Only this stage can call a mutant missed.
//!
//! Both stages build without debug info (and link with mold when it is installed), run the
//! tests' scratch files in `/dev/shm` when it exists, and mutate a clone of the commit under
//! test in place (`target/cargo-mutants/tree`, kept with its build between runs), so no
//! mutant pays for copying or rebuilding the tree.
//!
//! Verdicts are kept in `mutants/cargo-mutants.verdicts.json` (committed, so the hours of a
//! whole run can be spent in parts), keyed by the mutant's name (file, line, column, change)
//! and the git blob of its file: a later run skips a mutant already
//! caught or unviable in a file that has not changed since, and judges again every mutant that
//! was missed or timed out. (A verdict kept this way assumes the tests have not been weakened
//! since; `--fresh` judges every mutant anew.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::groups::{Group, SCREEN_MODEL_CASES};
use super::invoke::{Stage, blobs, have_nextest, run_stage};
use super::outcome::{Kept, Mutant, Tally, Verdict, load_kept, save_kept};

/// The whole staged run over `mutants` of `commit` (checked out in `tree`). Verdicts are saved
/// after every stage, so an interrupted run loses at most the stage under way. A save adds this
/// run's verdicts to the file as it is *then* (read again), so verdicts recorded meanwhile —
/// by hand, or by another run — are kept.
pub fn run(
    root: &Path,
    tree: &Path,
    commit: &str,
    mutants: &[Mutant],
    fresh: bool,
    extra: &[String],
) -> Result<Tally, String> {
    let blobs = blobs(tree, commit)?;
    let kept = if fresh {
        BTreeMap::new()
    } else {
        load_kept(root)?
    };
    // This run's own verdicts, added to the file at each save.
    let mut new: BTreeMap<String, Kept> = BTreeMap::new();
    let save = |new: &BTreeMap<String, Kept>| -> Result<(), String> {
        let mut file = if fresh {
            BTreeMap::new()
        } else {
            load_kept(root)?
        };
        file.extend(new.iter().map(|(k, v)| (k.clone(), v.clone())));
        save_kept(root, &file)
    };
    let blob_of = |m: &Mutant| blobs.get(&m.file).cloned().unwrap_or_default();
    let mut tally = Tally::default();
    let mut todo: BTreeMap<Group, Vec<&Mutant>> = BTreeMap::new();
    for m in mutants {
        match kept.get(&m.name) {
            Some(k)
                if k.blob == blob_of(m)
                    && matches!(k.verdict, Verdict::Caught | Verdict::Unviable) =>
            {
                tally.verdicts.insert(m.name.clone(), k.verdict);
                tally.kept += 1;
            }
            _ => todo.entry(Group::of(&m.file)).or_default().push(m),
        }
    }
    println!(
        "cargo-mutants: {} mutants; {} kept from earlier runs (caught or unviable in an unchanged \
         file), {} to judge",
        mutants.len(),
        tally.kept,
        mutants.len() - tally.kept
    );
    let record = |new: &mut BTreeMap<String, Kept>,
                  tally: &mut Tally,
                  m: &Mutant,
                  verdict: Verdict,
                  stage: &str| {
        tally.verdicts.insert(m.name.clone(), verdict);
        new.insert(
            m.name.clone(),
            Kept {
                blob: blob_of(m),
                verdict,
                stage: stage.to_string(),
                commit: commit.to_string(),
            },
        );
    };
    let mut unscreened: Vec<&Mutant> = Vec::new();
    if have_nextest() {
        for (group, ms) in &todo {
            // The screen's own baseline (its tests on the unmutated tree) comes first: a test
            // failing there would make every mutant look caught.
            let stage = Stage {
                label: format!("screen:{}", group.name()),
                names: ms.iter().map(|m| m.name.as_str()).collect(),
                test_tool: "nextest",
                test_args: vec![
                    // Only the unit tests and the one integration binary are built and run:
                    // the multi-process binaries are slow tests (the whole suite runs them).
                    "--lib".into(),
                    "--test".into(),
                    "it".into(),
                    "--test-threads".into(),
                    "6".into(),
                    // `.config/nextest.toml`: a test a mutant makes hang fails after two
                    // minutes (the mutant is caught) instead of holding the screen.
                    "--profile".into(),
                    "mutants-screen".into(),
                    // A filter that matches nothing passes: the mutant goes on to the suite.
                    "--no-tests=pass".into(),
                    "-E".into(),
                    group.filter(),
                ],
                env: vec![("LEASEFENCE_MODEL_CASES", SCREEN_MODEL_CASES)],
                baseline: true,
            };
            let verdicts = run_stage(root, tree, &stage, extra)?;
            for m in ms {
                match verdicts.get(&m.name) {
                    Some(v @ (Verdict::Caught | Verdict::Unviable)) => {
                        tally.screened += 1;
                        record(&mut new, &mut tally, m, *v, &stage.label);
                    }
                    _ => unscreened.push(m),
                }
            }
            save(&new)?;
        }
    } else {
        println!(
            "cargo-mutants: cargo-nextest is not installed: no screen, the whole suite for each"
        );
        unscreened = todo.values().flatten().copied().collect();
    }
    let suite_args = suite_args(tree)?;
    let stage = Stage {
        label: "suite".into(),
        names: unscreened.iter().map(|m| m.name.as_str()).collect(),
        test_tool: "cargo",
        test_args: suite_args,
        env: vec![],
        baseline: true,
    };
    let verdicts = run_stage(root, tree, &stage, extra)?;
    for m in &unscreened {
        let verdict = *verdicts
            .get(&m.name)
            .ok_or_else(|| format!("cargo-mutants suite: no outcome for `{}`", m.name))?;
        tally.suited += 1;
        record(&mut new, &mut tally, m, verdict, "suite");
    }
    save(&new)?;
    Ok(tally)
}

/// The whole suite's test arguments: `.cargo/mutants.toml`'s own.
fn suite_args(tree: &Path) -> Result<Vec<String>, String> {
    let base = tree.join(".cargo").join("mutants.toml");
    let text = std::fs::read_to_string(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", base.display()))?;
    Ok(table
        .get("additional_cargo_test_args")
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default())
}

/// The distinct files of `mutants`, for the summary.
pub fn files(mutants: &[Mutant]) -> BTreeSet<&str> {
    mutants.iter().map(|m| m.file.as_str()).collect()
}
