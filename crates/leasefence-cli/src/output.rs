//! Printing results: one readable line, or one JSON object per line with `--json`.

use std::fmt::Display;
use std::io::Write as _;

use serde_json::Value;

use crate::cmd::shared::one_line;

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
            stdout(terminal_safe(&human.to_string()));
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
            stdout(terminal_safe(&human.to_string()));
        }
    }

    /// Reports an operation that took effect: `human` on stdout, or `record` with `"ok": true`.
    pub fn done(self, human: impl Display, mut record: Value) -> Outcome {
        record["ok"] = Value::Bool(true);
        self.line(human, record);
        Outcome::Done
    }

    /// [`Out::done`] for a verb's one-line answer: every control character in `human` (a
    /// newline in a job id or an owner) written as its escape ([`one_line`]), so that a script
    /// reading the answer line by line is never handed a second, forged one.
    pub fn done_line(self, human: impl Display, record: Value) -> Outcome {
        self.done(one_line(&human.to_string()), record)
    }

    /// Reports a refusal: `refused: {reason}` on one line of stderr ([`one_line`]) and, with
    /// `--json`, `record` with `"ok": false` and the reason on stdout.
    pub fn refused(self, reason: impl Display, mut record: Value) -> Outcome {
        let reason = reason.to_string();
        eprintln!("refused: {}", one_line(&reason));
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

/// `text` for a terminal: every control character but the newline and the tab written as its
/// escape (`\u{1b}`), so that a stored id, result or error (which anyone with the worker token
/// can write) can never move the cursor, retitle the window or clear the screen of the operator
/// reading it. JSON output needs no such care: serde escapes every control character.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    #[test]
    fn only_newlines_and_tabs_reach_the_terminal() {
        assert_eq!(
            terminal_safe("ok\u{1b}]0;pwned\u{7}\u{1b}[2J\r\n\tdone"),
            "ok\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\r\n\tdone"
        );
        assert_eq!(terminal_safe("é \"quoted\" \\"), "é \"quoted\" \\");
    }
}
