//! `mutants/catalog.verdicts.json`: for each catalog entry, the commit at which a run of
//! `cargo xtask mutants` last killed it as predicted, and the entry's fingerprint then.
//!
//! The full run recorded in `mutants/catalog.base` judges every entry at one commit; this file
//! lets a run of some entries (`--since-base`, `--only`) move those entries' own reference
//! forward, so that the next `--since-base` runs an entry again only when what it depends on
//! changed since *its* verdict (see `catalog_base`). A verdict is recorded only for a run on a
//! tree whose inputs are exactly HEAD's (the commit then names what was judged), and an entry
//! not killed as predicted loses its verdict. Commit the file with the change it judged.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file, relative to the workspace root.
pub const VERDICTS_FILE: &str = "mutants/catalog.verdicts.json";

/// One entry's last verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The commit whose tree was judged (40 hex digits).
    pub commit: String,
    /// [`Mutant::fingerprint`](crate::catalog::Mutant::fingerprint) of the entry then: a
    /// verdict stands only for the entry as it was.
    pub fingerprint: String,
}

/// Every recorded verdict, by entry id.
pub type Verdicts = BTreeMap<String, Verdict>;

/// Reads the verdicts (none when the file is absent).
///
/// # Errors
/// A file that cannot be read or does not parse.
pub fn load(root: &Path) -> Result<Verdicts, String> {
    let path = root.join(VERDICTS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Verdicts::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the verdicts (sorted by id, one per line, so that diffs stay small).
///
/// # Errors
/// I/O failures.
pub fn save(root: &Path, verdicts: &Verdicts) -> Result<(), String> {
    let path = root.join(VERDICTS_FILE);
    let mut text = serde_json::to_string_pretty(verdicts).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}
