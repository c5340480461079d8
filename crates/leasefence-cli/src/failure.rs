//! How a command that failed ends: the reason on stderr (`leasefence: error: …`, and a hint when
//! there is an obvious next step), with `--json` also one object on stdout, and the exit status
//! (`2` bad input or a database error, `3` retryable).
//!
//! The object has the keys of every `--json` line (`op`, `ok: false`) and says what went wrong
//! in a form a script can branch on, as the HTTP API's error bodies do:
//!
//! ```text
//! {"op":"claim","ok":false,"error":"invalid_argument","argument":"owner","retryable":false,"exit":2,"message":"claim a: invalid argument `owner`: must not be empty","hint":null}
//! ```
//!
//! `error` is `usage` (clap refused the command line; `argument` is the flag it names, if any),
//! `invalid_argument` (`argument` names it), the library's error kind in snake case (`busy`,
//! `unavailable`, `cannot_open`, `cannot_connect`, `connection_lost`, `schema_mismatch`,
//! `not_a_database`, `storage_full`, `read_only`, `corrupt`, `unsupported`, `backend`, …), or
//! `error` for anything else (a file that cannot be read, a command that cannot be started).

use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory as _;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use serde_json::{Value, json};

use crate::Cli;
use crate::cmd::shared::BadFlag;
use crate::output::{self, Out};

/// Reports `err` from the subcommand `op` and returns the exit status for it.
pub fn report(op: Option<&str>, out: Out, err: &anyhow::Error) -> ExitCode {
    let message = format!("{err:#}");
    eprintln!("leasefence: error: {}", output::terminal_safe(&message));
    let hint = hint(err);
    if let Some(hint) = &hint {
        eprintln!("leasefence: hint: {hint}");
    }
    let lib = library_error(err);
    let retryable = lib.is_some_and(|e| e.is_retryable() || server_unavailable(e));
    // Contention is told apart from bad input, so that a script can retry it alone.
    let exit: u8 = if retryable { 3 } else { 2 };
    let (kind, argument) = match (lib, err.chain().find_map(|e| e.downcast_ref::<BadFlag>())) {
        (_, Some(bad)) => ("invalid_argument", Some(bad.flag.clone())),
        (Some(lib), None) => (kind_of(lib), lib.argument().map(str::to_owned)),
        (None, None) => ("error", None),
    };
    out.json(record(op, kind, argument, retryable, exit, message, hint));
    ExitCode::from(exit)
}

/// Reports a command line clap refused (with `--json` also as an object on stdout) and returns
/// exit status 2; `--help` and `--version` print as usual and exit 0.
pub fn usage(err: clap::Error) -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    // Only options before a `--` are options; `--json` after it is a value.
    let options = args.iter().take_while(|a| a.as_os_str() != "--");
    if !err.use_stderr() || !options.clone().any(|a| a == "--json") {
        err.exit();
    }
    let _ = err.print();
    // The error's paragraph, without clap's `error: ` and the usage after it; a list (the
    // missing arguments) joined onto its line.
    let rendered = err.render().to_string();
    let mut lines = rendered.lines().take_while(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let rest: Vec<&str> = lines.map(str::trim).collect();
    let message = match rest.is_empty() {
        true => first.to_owned(),
        false => format!("{first} {}", rest.join(", ")),
    };
    // The flag alone (`--ttl`, not `--ttl <TTL>`); the first one when several are missing.
    let argument = match err.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(flag)) => Some(flag),
        Some(ContextValue::Strings(flags)) => flags.first(),
        _ => None,
    };
    let argument = argument.and_then(|a| a.split_whitespace().next().map(str::to_owned));
    // A positional argument is `<Q>` to clap; the value parser's own message names it
    // (`invalid argument `queue``), as the library does: that name, not the placeholder.
    let argument = match argument {
        Some(a) if a.starts_with('<') => message
            .split_once("invalid argument `")
            .and_then(|(_, rest)| rest.split_once('`'))
            .map_or(Some(a), |(name, _)| Some(name.to_owned())),
        other => other,
    };
    let op = op_of(options.filter_map(|a| a.to_str()));
    let message = match (err.kind(), &op) {
        // clap's "error" here is the subcommand's help: say what is missing instead.
        (ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand, Some(op)) => {
            format!("`{op}` needs a subcommand; `leasefence {op} --help` lists them")
        }
        _ => message,
    };
    let out = Out::new(true);
    out.json(record(
        op.as_deref(),
        "usage",
        argument,
        false,
        2,
        message,
        None,
    ));
    ExitCode::from(2)
}

/// The subcommands the command line names, as far as it names them (`queue pause`): an
/// option's value is passed over (`--db queue` is no `queue`), also for the global options.
fn op_of<'a>(args: impl Iterator<Item = &'a str>) -> Option<String> {
    let root = Cli::command();
    let takes_value = |command: &clap::Command, arg: &str| {
        let (long, short) = match arg.strip_prefix("--") {
            Some(long) if !long.contains('=') => (Some(long), None),
            Some(_) => return false,
            None => (
                None,
                arg.strip_prefix('-').filter(|s| s.chars().count() == 1),
            ),
        };
        let short = short.and_then(|s| s.chars().next());
        command
            .get_arguments()
            .chain(root.get_arguments().filter(|a| a.is_global_set()))
            .any(|a| {
                let named = long.is_some_and(|l| a.get_long() == Some(l))
                    || short.is_some_and(|c| a.get_short() == Some(c));
                named && a.get_action().takes_values()
            })
    };
    let mut command = root.clone();
    let mut path: Vec<&str> = Vec::new();
    let mut value_next = false;
    for arg in args {
        if std::mem::take(&mut value_next) {
            continue;
        }
        if arg.starts_with('-') {
            value_next = takes_value(&command, arg);
            continue;
        }
        match command.find_subcommand(arg).cloned() {
            Some(sub) => {
                path.push(arg);
                command = sub;
            }
            // A positional argument: no subcommand follows it.
            None => break,
        }
    }
    (!path.is_empty()).then(|| path.join(" "))
}

/// The object printed with `--json`.
fn record(
    op: Option<&str>,
    kind: &str,
    argument: Option<String>,
    retryable: bool,
    exit: u8,
    message: String,
    hint: Option<String>,
) -> Value {
    json!({
        "op": op,
        "ok": false,
        "error": kind,
        "argument": argument,
        "retryable": retryable,
        "exit": exit,
        "message": message,
        "hint": hint,
    })
}

/// The library error in `err`'s chain, if any.
fn library_error(err: &anyhow::Error) -> Option<&leasefence::Error> {
    err.chain()
        .find_map(|e| e.downcast_ref::<leasefence::Error>())
}

/// The library error's kind, in snake case.
fn kind_of(error: &leasefence::Error) -> &'static str {
    use leasefence::Error as E;
    match error {
        E::InvalidArgument { .. } => "invalid_argument",
        E::Busy => "busy",
        E::Unavailable { .. } => "unavailable",
        E::SchemaMismatch { .. } => "schema_mismatch",
        E::NotADatabase { .. } => "not_a_database",
        E::CannotOpen { .. } => "cannot_open",
        E::CannotConnect { .. } => "cannot_connect",
        E::ConnectionLost { .. } => "connection_lost",
        E::StorageFull { .. } => "storage_full",
        E::ReadOnly { .. } => "read_only",
        E::Corrupt { .. } => "corrupt",
        E::Unsupported { .. } => "unsupported",
        E::SignalHandler { .. } => "signal_handler",
        _ => "backend",
    }
}

/// Whether a connection that could not be made failed for a reason that passes by itself — no
/// server listening yet, one starting up or shutting down, every connection slot taken, no
/// answer in time — rather than for a setting to fix (credentials, database name, TLS): then the
/// command exits 3, "run it again", as for a `serve` that cannot be reached.
fn server_unavailable(error: &leasefence::Error) -> bool {
    let leasefence::Error::CannotConnect { source, .. } = error else {
        return false;
    };
    let driver = source.to_string();
    [
        "Connection refused",
        "too many clients",
        "remaining connection slots are reserved",
        "the database system is starting up",
        "the database system is shutting down",
        "the database system is in recovery mode",
        "the database system is not yet accepting connections",
        "timed out",
        "timeout",
    ]
    .iter()
    .any(|needle| driver.contains(needle))
}

/// A next step for the library errors that have an obvious one.
fn hint(err: &anyhow::Error) -> Option<String> {
    match library_error(err)? {
        leasefence::Error::Unavailable { .. } => Some(
            "the server could not be reached or is busy; retry once it answers \
             (`curl URL/readyz` tells)"
                .into(),
        ),
        e if e.is_retryable() => {
            Some("another writer held the lock; nothing was written, retry the command".into())
        }
        leasefence::Error::CannotOpen { path, .. } => {
            let folder = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if !folder.is_dir() {
                Some(format!("the folder {} does not exist", folder.display()))
            } else if !path.exists() {
                Some(format!(
                    "there is no database at {}; create it with `leasefence --db {} init`",
                    path.display(),
                    crate::cmd::list::shell_word(&path.to_string_lossy())
                ))
            } else {
                None
            }
        }
        leasefence::Error::CannotConnect { target, source } => {
            // The server's own reason is in the message; the hint names the next step for it.
            let reason = err.chain().map(ToString::to_string).collect::<Vec<_>>();
            let said = |needle: &str| reason.iter().any(|r| r.contains(needle));
            // The driver's own words only: the target (a host named `tls…`) is in the chain too.
            let driver = source.to_string();
            Some(if said("does not exist") {
                format!(
                    "the server at {target} answered, but that database or role does not exist \
                     there; fix dbname= or user= in --db (or LEASEFENCE_DB), or create it"
                )
            } else if driver.contains("error performing TLS handshake")
                || driver.contains("server does not support TLS")
            {
                format!(
                    "the server at {target} answered, but the TLS that sslmode=require asks for \
                     failed (the server may have ssl off); see the error above"
                )
            } else if driver.contains("too many clients")
                || driver.contains("remaining connection slots are reserved")
            {
                format!(
                    "the server at {target} answered, but every connection slot is taken \
                     (max_connections); retry once some are free, or give leasefence fewer \
                     (--connections, --concurrency)"
                )
            } else if driver.contains("the database system is") {
                format!(
                    "the server at {target} is starting up, shutting down or recovering; retry \
                     in a moment"
                )
            } else if driver.contains("authentication") || driver.contains("password") {
                format!(
                    "the server at {target} refused the credentials; check user= and password= \
                     in --db (or LEASEFENCE_DB)"
                )
            } else {
                format!(
                    "no PostgreSQL server answered at {target}; check --db (or LEASEFENCE_DB) \
                     and that the server is running"
                )
            })
        }
        _ => None,
    }
}
