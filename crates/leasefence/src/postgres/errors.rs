//! The mapping of driver errors onto the crate's error kinds.

use postgres::error::SqlState;

use crate::error::{BackendError, Error};

/// Why the driver refused a connection string, naming the key (`unknown option `dbnmae``,
/// `invalid value for option `port``) — without it a typo is a guessing game — but never a
/// value: its "unexpected character … but got `c`" shows a character of the string, perhaps
/// of the password (`password S3cret` without its `=`), so that part is left out.
pub(super) fn config_cause(e: &postgres::Error) -> String {
    let cause = crate::error::chain(e);
    match cause.find(" but got `") {
        Some(at) => cause[..at].to_owned(),
        None => cause,
    }
}

/// Sorts a driver error into the crate's error kinds.
pub(super) fn map_error(target: &str, e: postgres::Error) -> Error {
    // A statement cancelled by the server (`statement_timeout`, `pg_cancel_backend`) rolled
    // its transaction back like a lock timeout does: nothing was written, try again.
    let busy = [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::LOCK_NOT_AVAILABLE,
        SqlState::QUERY_CANCELED,
    ];
    match e.code() {
        Some(code) if busy.contains(code) => Error::Busy,
        Some(&SqlState::DISK_FULL) => Error::StorageFull {
            database: target.to_owned(),
        },
        Some(&SqlState::READ_ONLY_SQL_TRANSACTION) => Error::ReadOnly {
            database: target.to_owned(),
            source: BackendError::with_causes(e),
        },
        // Class 08 (connection exception) and 57P01..57P03 (the server shut the session down,
        // e.g. pg_terminate_backend), or a socket closed under us.
        Some(code)
            if code.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                ]
                .contains(code) =>
        {
            Error::ConnectionLost {
                target: target.to_owned(),
                source: BackendError::with_causes(e),
            }
        }
        None if e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) =>
        {
            Error::ConnectionLost {
                target: target.to_owned(),
                source: BackendError::with_causes(e),
            }
        }
        _ => Error::Backend(BackendError::with_causes(e)),
    }
}
