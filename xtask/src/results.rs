//! The saved observations of the mutation catalog's runs (`target/xtask-mutants/results.json`):
//! written by `mutants`, read by `worksheet`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What happened to one mutant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tests failed.
    Killed,
    /// Every test passed.
    Survived,
    /// The tests were killed after the timeout.
    Timeout,
    /// The mutated tree did not compile.
    Unviable,
}

/// The observation of one mutant, as saved for the worksheet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// [`Mutant::fingerprint`](crate::catalog::Mutant::fingerprint) of the entry that was run.
    pub fingerprint: String,
    /// What happened.
    pub status: Status,
    /// The tests that failed.
    pub failed: Vec<String>,
    /// Predicted tests that did not fail.
    pub missed_predictions: Vec<String>,
    /// How many tests the binary has.
    pub total_tests: usize,
    /// Build plus test time.
    pub seconds: f64,
    /// Only the predicted tests were run (all of them failed), not the whole suite.
    #[serde(default)]
    pub predicted_only: bool,
}

impl Record {
    /// Killed, and every predicted test failed.
    pub fn as_predicted(&self) -> bool {
        self.status == Status::Killed && self.missed_predictions.is_empty()
    }
}

/// All saved observations, by mutant id.
pub type Results = BTreeMap<String, Record>;

/// The default dedicated target directory: inside the real `target/`, but a target directory of
/// its own, used only by scratch copies, so the real tree's build can never be mistaken for a
/// mutant's (and every mutant is an incremental rebuild of one crate).
pub fn default_target_dir(root: &Path) -> PathBuf {
    root.join("target").join("xtask-mutants")
}

/// Where the last observations are kept.
pub fn results_path(target_dir: &Path) -> PathBuf {
    target_dir.join("results.json")
}

/// Reads the saved observations (empty if none).
pub fn load_results(target_dir: &Path) -> Results {
    std::fs::read_to_string(results_path(target_dir))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}
