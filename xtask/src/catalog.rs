//! `mutants/catalog.toml`: the hand-written mutants, the eight steps and what is not guaranteed.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

/// Where the catalog lives, relative to the workspace root.
pub const CATALOG: &str = "mutants/catalog.toml";

/// The whole catalog file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The contract's eight steps, in order.
    pub step: Vec<Step>,
    /// The queue's operations beyond the eight steps (issue 4): each write path with its own
    /// id prefix.
    #[serde(default)]
    pub operation: Vec<Operation>,
    /// Operating conditions the store does not guarantee.
    pub not_guaranteed: Vec<NotGuaranteed>,
    /// The mutants.
    pub mutant: Vec<Mutant>,
}

/// One of the contract's eight operations.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// 1 to 8.
    pub number: u8,
    /// The operation's name (`claim_many`).
    pub operation: String,
    /// The id prefix of its mutants (`claim-many-`): one name through every layer.
    pub prefix: String,
    /// The rule, in one sentence.
    pub rule: String,
    /// Why the tests of the earlier steps still hold once this operation exists: the invariant
    /// it preserves.
    pub preserves: String,
}

/// A queue operation beyond the eight steps (`claim_next`, `fail`, the worker, …). Its mutants
/// have no `step`; their ids start with its prefix.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// The operation's name (`claim_next`).
    pub name: String,
    /// The id prefix of its mutants (`claim_next-`).
    pub prefix: String,
    /// The rule, in one or two sentences.
    pub rule: String,
    /// Why the eight steps' tests still hold once this operation exists: the invariant of the
    /// contract it must preserve.
    pub preserves: String,
}

/// An operating condition outside the contract.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotGuaranteed {
    /// The condition.
    pub condition: String,
    /// What goes wrong under it.
    pub consequence: String,
    /// What a user should do about it.
    pub what_to_do: String,
}

/// One hand-written mutant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutant {
    /// Unique id, prefixed by the operation it breaks (`renew-fence-dropped`).
    pub id: String,
    /// The contract step it belongs to; absent for cross-cutting rules (busy, durability, …).
    pub step: Option<u8>,
    /// `true` for the design note's own broken change of that step (CONTRACT.md's table).
    #[serde(default)]
    pub seed: bool,
    /// The contract rule it breaks.
    pub rule: String,
    /// The file to mutate, relative to the workspace root.
    pub file: String,
    /// A short description of the change for the worksheet's tables, where `find` and
    /// `replace` are too long to show.
    pub change: Option<String>,
    /// The exact text to replace; must occur exactly once in `file`.
    pub find: String,
    /// Its replacement.
    pub replace: String,
    /// Which input or stored state reveals it, in one sentence.
    pub prediction: String,
    /// The tests predicted to fail (exact names as `cargo test -- --list` prints them).
    pub killed_by: Vec<String>,
    /// The Python package's tests predicted to fail too (pytest ids relative to `python/`,
    /// without parameters); when present the entry is also judged by the Python suite of the
    /// eight functions ([`crate::python::SEED_SUITES`]).
    #[serde(default)]
    pub python_killed_by: Vec<String>,
    /// The same broken change where the Python package has its own copy of the code (the
    /// package's `claim_many` is Python), applied together with `find`/`replace`.
    #[serde(default)]
    pub also: Vec<Edit>,
}

/// One more edit of a mutant: `find` (exactly once in `file`) replaced by `replace`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// Relative to the workspace root.
    pub file: String,
    /// The exact text to replace.
    pub find: String,
    /// Its replacement.
    pub replace: String,
}

impl Edit {
    /// `original` with this edit applied, or why it does not apply (`id`: the mutant's).
    pub fn apply(&self, id: &str, original: &str) -> Result<String, String> {
        match original.matches(self.find.as_str()).count() {
            1 => Ok(original.replacen(self.find.as_str(), &self.replace, 1)),
            n => Err(format!(
                "{id}: `find` occurs {n} times in {} (must be exactly once)",
                self.file
            )),
        }
    }
}

/// The ids that cross-cutting mutants (without a step) may start with.
pub const CROSS_CUTTING_PREFIXES: [&str; 4] = ["busy-", "deadline-", "group_commit-", "write-"];

impl Catalog {
    /// Reads and parses the catalog.
    pub fn load(root: &Path) -> Result<Catalog, String> {
        let path = root.join(CATALOG);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The queue operation whose prefix starts `id` (the longest one), if any.
    pub fn operation_of(&self, id: &str) -> Option<&Operation> {
        self.operation
            .iter()
            .filter(|o| id.starts_with(&o.prefix))
            .max_by_key(|o| o.prefix.len())
    }

    /// The step with this number.
    pub fn step(&self, number: u8) -> Option<&Step> {
        self.step.iter().find(|s| s.number == number)
    }

    /// Checks everything that can be checked without building: unique ids with the right
    /// prefix, exactly one seed mutant per step, non-empty predictions, and that every `find`
    /// occurs exactly once in its file under `tree`. Returns every problem found.
    pub fn check_static(&self, tree: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        let numbers: Vec<u8> = self.step.iter().map(|s| s.number).collect();
        if numbers != (1..=8).collect::<Vec<u8>>() {
            problems.push(format!(
                "[[step]] numbers must be 1..=8 in order, got {numbers:?}"
            ));
        }
        let mut ids = BTreeSet::new();
        for m in &self.mutant {
            if !ids.insert(m.id.as_str()) {
                problems.push(format!("{}: duplicate id", m.id));
            }
            match m.step.map(|n| (n, self.step(n))) {
                Some((n, None)) => problems.push(format!("{}: no step {n}", m.id)),
                Some((_, Some(step))) => {
                    // The longest matching prefix decides (`claim-many-` before `claim-`).
                    let best = self
                        .step
                        .iter()
                        .filter(|s| m.id.starts_with(&s.prefix))
                        .max_by_key(|s| s.prefix.len());
                    if best.map(|s| s.number) != Some(step.number) {
                        problems.push(format!(
                            "{}: a step-{} mutant's id must start with `{}`",
                            m.id, step.number, step.prefix
                        ));
                    }
                }
                None => {
                    if !CROSS_CUTTING_PREFIXES.iter().any(|p| m.id.starts_with(p))
                        && self.operation_of(&m.id).is_none()
                    {
                        let operations: Vec<&str> =
                            self.operation.iter().map(|o| o.prefix.as_str()).collect();
                        problems.push(format!(
                            "{}: a mutant without a step must start with a queue operation's \
                             prefix {operations:?} or a cross-cutting one {:?}",
                            m.id, CROSS_CUTTING_PREFIXES
                        ));
                    }
                    if m.seed {
                        problems.push(format!("{}: a seed mutant needs a step", m.id));
                    }
                }
            }
            if m.prediction.trim().is_empty() || m.rule.trim().is_empty() {
                problems.push(format!("{}: empty rule or prediction", m.id));
            }
            if m.killed_by.is_empty() {
                problems.push(format!("{}: no test is predicted to kill it", m.id));
            }
            if m.find == m.replace {
                problems.push(format!("{}: `replace` equals `find`", m.id));
            }
            for edit in m.edits() {
                match std::fs::read_to_string(tree.join(&edit.file)) {
                    Err(e) => problems.push(format!("{}: {}: {e}", m.id, edit.file)),
                    Ok(text) => match text.matches(edit.find.as_str()).count() {
                        1 => {}
                        0 => problems.push(format!(
                            "{}: no longer applies: `find` does not occur in {}",
                            m.id, edit.file
                        )),
                        n => problems.push(format!(
                            "{}: `find` occurs {n} times in {}; it must occur exactly once",
                            m.id, edit.file
                        )),
                    },
                }
            }
            // The design note's own eight broken changes are caught by the Python package's
            // suite too (issue 17): each seed entry names the pytest cases that must fail.
            if m.seed && m.python_killed_by.is_empty() {
                problems.push(format!(
                    "{}: a seed entry needs `python_killed_by` (the Python suite must kill it too)",
                    m.id
                ));
            }
        }
        let mut prefixes = BTreeSet::new();
        for o in &self.operation {
            if !prefixes.insert(o.prefix.as_str()) {
                problems.push(format!("[[operation]] {}: duplicate prefix", o.name));
            }
            if self.step.iter().any(|s| s.prefix == o.prefix) {
                problems.push(format!(
                    "[[operation]] {}: prefix `{}` is a step's",
                    o.name, o.prefix
                ));
            }
            if o.rule.trim().is_empty() || o.preserves.trim().is_empty() {
                problems.push(format!("[[operation]] {}: empty rule or preserves", o.name));
            }
            if !self.mutant.iter().any(|m| m.id.starts_with(&o.prefix)) {
                problems.push(format!("[[operation]] {}: has no mutant", o.name));
            }
        }
        for n in 1..=8 {
            let seeds = self
                .mutant
                .iter()
                .filter(|m| m.seed && m.step == Some(n))
                .count();
            if seeds != 1 {
                problems.push(format!(
                    "step {n} needs exactly one seed mutant (the design note's broken change), has {seeds}"
                ));
            }
        }
        problems
    }

    /// Checks that every predicted test exists. Returns every problem found.
    pub fn check_test_names(&self, known: &BTreeSet<String>) -> Vec<String> {
        self.mutant
            .iter()
            .flat_map(|m| {
                m.killed_by
                    .iter()
                    .filter(|t| !known.contains(*t))
                    .map(move |t| format!("{}: predicted test `{t}` does not exist", m.id))
            })
            .collect()
    }
}

impl Mutant {
    /// A fingerprint of what the mutant is, so results of an older version of the entry are
    /// not shown as its observation.
    pub fn fingerprint(&self) -> String {
        let mut killed_by = self.killed_by.clone();
        killed_by.sort();
        let mut print = format!(
            "{}\u{0}{}\u{0}{}\u{0}{}",
            self.file,
            self.find,
            self.replace,
            killed_by.join(",")
        );
        // Entries without the Python fields keep the fingerprints they had before them.
        if !self.python_killed_by.is_empty() || !self.also.is_empty() {
            let mut python = self.python_killed_by.clone();
            python.sort();
            print.push_str(&format!("\u{0}{}", python.join(",")));
            for edit in &self.also {
                print.push_str(&format!(
                    "\u{0}{}\u{0}{}\u{0}{}",
                    edit.file, edit.find, edit.replace
                ));
            }
        }
        print
    }

    /// Every edit of the mutant: `file`/`find`/`replace`, then `also`.
    pub fn edits(&self) -> Vec<Edit> {
        let mut edits = vec![Edit {
            file: self.file.clone(),
            find: self.find.clone(),
            replace: self.replace.clone(),
        }];
        edits.extend(self.also.iter().cloned());
        edits
    }
}
