//! What became of each mutant: cargo-mutants' outcomes read back, and the verdicts kept between
//! runs in `mutants/cargo-mutants.verdicts.json` (committed, so that the whole run — hours on
//! two cores — can be done in parts, across sessions and machines).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What became of one mutant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// A test failed.
    Caught,
    /// It does not build.
    Unviable,
    /// The whole suite passed.
    Missed,
    /// The whole suite ran past its time limit.
    Timeout,
}

/// A verdict as kept in `verdicts.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    /// The git blob of the mutated file when it was judged.
    pub blob: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Which stage decided it: `screen:<group>`, `suite`, or `hand:<test>` (the mutation applied
    /// by hand to the commit below, and that test failed: for a mutant whose screen had not run
    /// the test that catches it).
    pub stage: String,
    /// The commit that was run.
    pub commit: String,
}

/// One mutant of the list.
#[derive(Debug, Clone)]
pub struct Mutant {
    /// cargo-mutants' name (`file:line:col: change`).
    pub name: String,
    /// Its file, relative to the workspace root.
    pub file: String,
}

/// The counts of a run, for its summary and the recorded base.
#[derive(Debug, Default)]
pub struct Tally {
    /// Every verdict of the run's mutants, by name.
    pub verdicts: BTreeMap<String, Verdict>,
    /// How many were kept from earlier runs (not judged again).
    pub kept: usize,
    /// How many the screen caught in this run.
    pub screened: usize,
    /// How many the whole suite judged in this run.
    pub suited: usize,
}

impl Tally {
    /// The mutants with `verdict`.
    pub fn with(&self, verdict: Verdict) -> Vec<&str> {
        self.verdicts
            .iter()
            .filter(|(_, v)| **v == verdict)
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

/// Where the verdicts are kept: in the repository, next to the catalog. A verdict names the
/// git blob of its file, so it stands only while that file is unchanged.
pub const KEPT_FILE: &str = "mutants/cargo-mutants.verdicts.json";

/// The kept verdicts (none when the file is missing).
pub fn load_kept(root: &Path) -> Result<BTreeMap<String, Kept>, String> {
    let path = root.join(KEPT_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the kept verdicts.
pub fn save_kept(root: &Path, kept: &BTreeMap<String, Kept>) -> Result<(), String> {
    let path = root.join(KEPT_FILE);
    let mut text = serde_json::to_string_pretty(kept).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The verdict of every mutant in cargo-mutants' `outcomes.json`.
pub fn read_outcomes(path: &Path) -> Result<BTreeMap<String, Verdict>, String> {
    #[derive(Deserialize)]
    struct Outcomes {
        outcomes: Vec<Outcome>,
    }
    #[derive(Deserialize)]
    struct Outcome {
        scenario: serde_json::Value,
        summary: String,
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let parsed: Outcomes =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut verdicts = BTreeMap::new();
    for o in parsed.outcomes {
        let Some(name) = o.scenario["Mutant"]["name"].as_str() else {
            continue; // the baseline
        };
        let verdict = match o.summary.as_str() {
            "CaughtMutant" => Verdict::Caught,
            "Unviable" => Verdict::Unviable,
            "MissedMutant" => Verdict::Missed,
            "Timeout" => Verdict::Timeout,
            other => {
                return Err(format!(
                    "{}: {name}: unknown outcome {other}",
                    path.display()
                ));
            }
        };
        verdicts.insert(name.to_string(), verdict);
    }
    Ok(verdicts)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn outcomes_become_verdicts_and_the_baseline_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outcomes.json");
        std::fs::write(
            &path,
            r#"{"outcomes": [
                {"scenario": "Baseline", "summary": "Success"},
                {"scenario": {"Mutant": {"name": "a"}}, "summary": "CaughtMutant"},
                {"scenario": {"Mutant": {"name": "b"}}, "summary": "MissedMutant"},
                {"scenario": {"Mutant": {"name": "c"}}, "summary": "Unviable"},
                {"scenario": {"Mutant": {"name": "d"}}, "summary": "Timeout"}
            ]}"#,
        )
        .unwrap();
        let v = read_outcomes(&path).unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(v["a"], Verdict::Caught);
        assert_eq!(v["b"], Verdict::Missed);
        assert_eq!(v["c"], Verdict::Unviable);
        assert_eq!(v["d"], Verdict::Timeout);
    }
}
