//! Helpers shared by the queue subcommands (`enqueue` with queue flags, `list`, `stats`,
//! `purge`, `cancel`): opening the store, reading input, formatting times and text.

use std::io::Read as _;
use std::path::Path;

use anyhow::Context as _;
use leasefence::AnyStore;
use serde_json::{Value, json};

use crate::ctx::Ctx;

/// Opens the existing, initialised database of `ctx`, exactly as the library's free functions
/// do: nothing is created, and a file that is not SQLite or was never initialised is an error.
/// On PostgreSQL the schema is created if absent, and leases are judged by the database's
/// clock (the commands that take `--now` open theirs with [`Ctx::open`]).
pub fn open(ctx: &Ctx) -> leasefence::Result<AnyStore> {
    ctx.open(false)
}

/// Whether `path` means stdin (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The bytes of `path`, or of stdin for `-`; `what` names the input in the error.
pub fn read_bytes(path: &Path, what: &str, flag: &str) -> anyhow::Result<Vec<u8>> {
    if is_stdin(path) {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .with_context(|| format!("reading {what} from stdin"))?;
        Ok(bytes)
    } else {
        // A file that cannot be read is bad input, named by its flag.
        std::fs::read(path).map_err(|e| {
            invalid(
                flag,
                format!("cannot read {what} from {}: {e}", path.display()),
            )
        })
    }
}

/// A bad command-line flag, in the library's wording for invalid arguments; with `--json` the
/// error object names `flag` as its `argument`.
#[derive(Debug)]
pub struct BadFlag {
    /// The flag, as typed (`--poll`).
    pub flag: String,
    /// What is wrong with its value.
    pub reason: String,
}

impl std::fmt::Display for BadFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid argument `{}`: {}", self.flag, self.reason)
    }
}

impl std::error::Error for BadFlag {}

/// An error naming a command-line flag, in the library's wording for invalid arguments.
pub fn invalid(flag: &str, reason: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(BadFlag {
        flag: flag.to_owned(),
        reason: reason.to_string(),
    })
}

/// A clock reading for a table: whole seconds as integers, otherwise at most three decimals.
pub fn time(t: f64) -> String {
    if t.fract() == 0.0 && t.abs() < 1e15 {
        format!("{t:.0}")
    } else {
        let s = format!("{t:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// `text` on one line: control characters (a newline, a tab) written as their escapes
/// (`\n`), everything else as it is — quotes, backslashes and non-ASCII text unescaped.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` on one line ([`one_line`]), cut to `max` characters ending in `…`; the flag tells
/// whether it was cut, so that a table can say so.
pub fn excerpt(text: &str, max: usize) -> (String, bool) {
    let line = one_line(text);
    if line.chars().count() <= max {
        (line, false)
    } else {
        let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        (cut, true)
    }
}

/// A payload in JSON: `"payload"` as text when it is UTF-8 (else `null` and `"payload_hex"`),
/// and `"payload_bytes"` with its length; all `null` when there is none.
pub fn payload_fields(record: &mut Value, payload: Option<&[u8]>) {
    let (text, len) = match payload {
        None => (Value::Null, Value::Null),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => (json!(text), json!(bytes.len())),
            Err(_) => {
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                record["payload_hex"] = json!(hex);
                (Value::Null, json!(bytes.len()))
            }
        },
    };
    record["payload"] = text;
    record["payload_bytes"] = len;
}

/// Refuses, as an invalid `job_id`, a verb that would break the scheduler role: the job
/// `leasefence.scheduler` is the role's lease, never finished. Cancelling, completing or
/// failing it stops every scheduler; retrying it would make it claimable by ordinary workers.
pub fn not_the_scheduler_job(verb: &str, id: &str) -> anyhow::Result<()> {
    if id == leasefence::SCHEDULER_JOB {
        return Err(invalid(
            "job_id",
            format!(
                "{id} is the scheduler role's own job; `{verb}` would break the role (to stop \
                 a schedule, `leasefence schedule remove NAME`; to reset the role, \
                 `leasefence delete {id}`: the next scheduler creates it again)"
            ),
        ));
    }
    Ok(())
}

/// This machine's name, for default owner names.
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

/// `rows` (the header first) as columns two spaces apart, each as wide as its widest cell:
/// left-aligned, or right-aligned where `right(column)` says so; trailing spaces trimmed.
pub fn table(rows: &[Vec<String>], right: impl Fn(usize) -> bool) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|row| {
            row.iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (cell, w))| {
                    if right(c) {
                        format!("{cell:>w$}")
                    } else {
                        format!("{cell:<w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A token from its file or the environment variable; `None` when neither is set. A variable
/// that is set but empty or not UTF-8 is refused like such a file: read as unset, a slip such
/// as `LEASEFENCE_WORKER_TOKEN=$(cat missing)` would serve every route without a token.
pub fn token(
    (file, flag): (Option<&Path>, &str),
    var: &str,
    what: &'static str,
) -> anyhow::Result<Option<leasefence_server::Token>> {
    if file.is_some() && std::env::var_os(var).is_some() {
        // Two sources that may disagree: taking either silently leaves the other one's
        // holder locked out (or let in) without a word.
        return Err(leasefence::Error::InvalidArgument {
            argument: what,
            reason: format!("given twice, by {flag} and by {var}: give one of them"),
        }
        .into());
    }
    let text = match file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the {what} from {}", path.display()))?,
        ),
        None => match std::env::var(var) {
            Ok(value) => Some(value),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(leasefence::Error::InvalidArgument {
                    argument: what,
                    reason: format!("{var} is not valid UTF-8"),
                }
                .into());
            }
        },
    };
    Ok(text
        .map(|t| leasefence_server::Token::new(&t, what))
        .transpose()?)
}

/// The context of an error about one job: `OP ID`, or `OP` alone for an empty id (whose error
/// says it must not be empty), not `OP ` with a stray space before the colon.
pub fn about(op: &str, id: &str) -> String {
    if id.is_empty() {
        op.to_owned()
    } else {
        format!("{op} {id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_short_and_exact_enough() {
        assert_eq!(time(0.0), "0");
        assert_eq!(time(130.0), "130");
        assert_eq!(time(130.5), "130.5");
        assert_eq!(time(1_767_225_600.123_456), "1767225600.123");
        assert_eq!(time(-2.25), "-2.25");
    }

    #[test]
    fn excerpts_stay_on_one_line() {
        assert_eq!(excerpt("a\nb", 10), ("a\\nb".to_owned(), false));
        assert_eq!(excerpt("abcdef", 4), ("abc…".to_owned(), true));
        assert_eq!(excerpt("abcd", 4), ("abcd".to_owned(), false));
        // Shown as written, not as a quoted string.
        assert_eq!(one_line(r#"{"a":"é\\"}"#), r#"{"a":"é\\"}"#);
    }
}
