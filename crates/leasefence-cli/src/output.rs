//! Printing results: one readable line, or one JSON object per line with `--json`.

use std::fmt::Display;
use std::io::Write as _;

use serde_json::Value;

/// How a subcommand ended, when it did not fail. `main` turns it into the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Outcome {
    /// The operation took effect (exit status 0).
    Done,
    /// The contract refused the operation (exit status 1).
    Refused,
}

/// The output mode chosen by `--json`.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    json: bool,
}

impl Out {
    /// Readable lines, or JSON lines when `json` is set.
    pub fn new(json: bool) -> Self {
        Out { json }
    }

    /// Prints one line to stdout: `human`, or `record` as JSON.
    pub fn line(self, human: impl Display, record: Value) {
        if self.json {
            stdout(record);
        } else {
            stdout(human);
        }
    }

    /// Prints `record` as one JSON line to stdout with `--json`; nothing otherwise.
    pub fn json(self, record: Value) {
        if self.json {
            stdout(record);
        }
    }

    /// Prints one readable line to stdout; nothing with `--json`.
    pub fn text(self, human: impl Display) {
        if !self.json {
            stdout(human);
        }
    }

    /// Reports an operation that took effect: `human` on stdout, or `record` with `"ok": true`.
    pub fn done(self, human: impl Display, mut record: Value) -> Outcome {
        record["ok"] = Value::Bool(true);
        self.line(human, record);
        Outcome::Done
    }

    /// Reports a refusal: `refused: {reason}` on stderr and, with `--json`, `record` with
    /// `"ok": false` and the reason on stdout.
    pub fn refused(self, reason: impl Display, mut record: Value) -> Outcome {
        let reason = reason.to_string();
        eprintln!("refused: {reason}");
        if self.json {
            record["ok"] = Value::Bool(false);
            record["reason"] = Value::String(reason);
            stdout(record);
        }
        Outcome::Refused
    }
}

/// Writes one line to stdout. A closed stdout (`leasefence demo | head`) is not worth a panic:
/// the line is dropped and the command finishes, so that its exit status still tells.
fn stdout(line: impl Display) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
