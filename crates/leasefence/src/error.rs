//! The one error type of the crate.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong in a leasefence call.
///
/// A call the contract *refuses* — a stale fence, a job that is still leased, an unknown id — is
/// not an error: it returns `false` or `None`. An `Error` means the call could not be judged at
/// all, and the store was left as it was before the call — except where a variant says
/// otherwise: after [`Error::ConnectionLost`] during a commit, whether the write took effect is
/// unknown until the state is read back.
///
/// Match on the variant when you need to react to one case; use [`Error::is_retryable`] to decide
/// whether to try the same call again, and [`Error::argument`] to find which argument was bad.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument broke the contract's preconditions (empty id, non-finite `now`, `ttl <= 0`, …).
    /// Nothing was read or written.
    #[error("invalid argument `{argument}`: {reason}")]
    InvalidArgument {
        /// The name of the bad argument, as in the function signature (`job_id`, `owner`, `now`,
        /// `ttl`, …).
        argument: &'static str,
        /// What is wrong with it, including the value that was given.
        reason: String,
    },

    /// The database stayed locked by another writer past the busy timeout (PostgreSQL: past
    /// `lock_timeout`, or the statement was cancelled by `statement_timeout`, a serialization
    /// failure or a deadlock). Nothing was written; the same call can be retried.
    #[error(
        "database is busy: another connection held the lock past the busy timeout (retry the call)"
    )]
    Busy,

    /// Something between this process and the database was unavailable: a server —
    /// `leasefence serve`, reached through an HTTP store — could not be reached or answered
    /// that it is busy (HTTP 503), or an async store's connections all stayed busy past its
    /// acquire timeout (then nothing ran). The same call can be retried; a write whose answer
    /// was lost on the way back may have taken effect, which a fenced retry tells (it is
    /// refused as done or stale).
    #[error("{target} is unavailable: {reason} (retry the call)")]
    Unavailable {
        /// The server, as shown to people (its URL, never a token).
        target: String,
        /// What happened.
        reason: String,
    },

    /// The database exists but its `jobs` table is missing, or lacks one of the contract's six
    /// columns. The file (or the PostgreSQL schema) was not modified.
    #[error("schema mismatch in {path}: {detail}")]
    SchemaMismatch {
        /// The database file; for PostgreSQL, the schema and where it lives (`schema S on
        /// host=… port=… user=… dbname=…`, never a password).
        path: PathBuf,
        /// What is missing.
        detail: String,
    },

    /// The file exists but is not an SQLite database (or is encrypted or corrupt in its header).
    /// The file was not modified.
    #[error("{path} is not an SQLite database")]
    NotADatabase {
        /// The offending file.
        path: PathBuf,
    },

    /// The database file could not be opened: its folder does not exist, it is not readable, or
    /// (for every operation except `init_db`) it does not exist yet.
    #[error("cannot open database {path}")]
    CannotOpen {
        /// The path that was given.
        path: PathBuf,
        /// Why the open failed.
        #[source]
        source: BackendError,
    },

    /// No connection to the PostgreSQL server could be made within the connect timeout
    /// (server down, wrong host or credentials, pool exhausted). Nothing was read or written.
    #[error("cannot connect to PostgreSQL ({target})")]
    CannotConnect {
        /// Where the store connects to: host, port, user and database (never the password).
        target: String,
        /// Why the connection failed.
        #[source]
        source: BackendError,
    },

    /// The connection to the PostgreSQL server broke during the call (server restart,
    /// `pg_terminate_backend`, network failure). A transaction left open was rolled back by
    /// the server; a single statement whose commit was under way may or may not have taken
    /// effect, so read the state before repeating a write. The next call gets a new connection.
    #[error("lost the connection to PostgreSQL ({target})")]
    ConnectionLost {
        /// Where the store connects to: host, port, user and database (never the password).
        target: String,
        /// What the driver reported.
        #[source]
        source: BackendError,
    },

    /// The database could not grow: the disk is full, or the SQLite file reached the size
    /// limit set with [`SqliteOptions::max_size`](crate::SqliteOptions::max_size) (PostgreSQL:
    /// `disk_full`). The call's transaction was rolled back, so nothing was written; the same
    /// store works again once space is freed (e.g. by [`Store::purge`](crate::Store::purge)).
    #[error("database {database} is full (disk full or size limit reached); nothing was written")]
    StorageFull {
        /// The SQLite file, or the PostgreSQL target (host, port, user, database).
        database: String,
    },

    /// The database cannot be written: a read-only file, folder or mount (SQLite), or a
    /// read-only server or transaction (PostgreSQL: a hot standby). Nothing was written.
    #[error("database {database} is read-only; nothing was written")]
    ReadOnly {
        /// The SQLite file, or the PostgreSQL target (host, port, user, database).
        database: String,
        /// What the engine reported.
        #[source]
        source: BackendError,
    },

    /// The database engine found the file damaged (SQLite `SQLITE_CORRUPT`): the call was not
    /// carried out. Restore the file from a backup; `PRAGMA integrity_check` tells more.
    #[error("database {database} is corrupt")]
    Corrupt {
        /// The SQLite file.
        database: String,
        /// What the engine reported.
        #[source]
        source: BackendError,
    },

    /// The database cannot give a guarantee the store relies on: SQLite could not switch the
    /// file to WAL (its file system lacks shared memory or locking, e.g. some network
    /// mounts). The schema was not touched.
    #[error("database {database} cannot be used: {detail}")]
    Unsupported {
        /// The SQLite file.
        database: String,
        /// What is missing.
        detail: String,
    },

    /// The process's signal handler could not be installed (`ShutdownHandle::on_signals`,
    /// cargo feature `signals`): one is installed already — a process has one, set by an
    /// earlier call or another user of the `ctrlc` crate — or the system refused. Nothing was
    /// changed; the worker runs as before, stopped only through its handle.
    #[error("cannot install the signal handler: {reason}")]
    SignalHandler {
        /// Why, as the system or the `ctrlc` crate reported it.
        reason: String,
    },

    /// Any other failure reported by the database engine (an I/O error, …).
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl Error {
    /// `true` when the same call may succeed if simply tried again later: lock contention
    /// ([`Error::Busy`]) or a server that is unavailable for now ([`Error::Unavailable`]).
    ///
    /// ```
    /// # use leasefence::Error;
    /// assert!(Error::Busy.is_retryable());
    /// let gone = Error::Unavailable { target: "http://127.0.0.1:7878".into(), reason: "refused".into() };
    /// assert!(gone.is_retryable());
    /// assert!(!Error::StorageFull { database: "jobs.db".into() }.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Busy | Error::Unavailable { .. })
    }

    /// The name of the bad argument, for [`Error::InvalidArgument`]; `None` otherwise.
    pub fn argument(&self) -> Option<&'static str> {
        match self {
            Error::InvalidArgument { argument, .. } => Some(argument),
            _ => None,
        }
    }

    /// Whether a completion was refused for its result, which the store cannot hold (a NUL
    /// byte on PostgreSQL; over HTTP, a body larger than the server takes): writing it again
    /// can never succeed, so a worker records the attempt as failed instead.
    pub(crate) fn is_unstorable_result(&self) -> bool {
        matches!(
            self,
            Error::InvalidArgument {
                argument: "result" | "request",
                ..
            }
        )
    }

    pub(crate) fn invalid(argument: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            argument,
            reason: reason.into(),
        }
    }
}

/// A failure inside the database driver, kept opaque so that the driver's own types are not part
/// of leasefence's public API.
///
/// Its `Display` gives the driver's message — for PostgreSQL followed by the server's error
/// (`database error: db error: ERROR: …`), so the reason is visible wherever the error is
/// printed. It reports no further `source`: that text is all of it.
pub struct BackendError {
    inner: Box<dyn std::error::Error + Send + Sync + 'static>,
    /// Whether `Display` goes on with the driver's causes (the postgres driver's own message
    /// is a bare "db error"; rusqlite's already says everything, and its cause repeats it).
    causes: bool,
}

impl BackendError {
    pub(crate) fn new(inner: impl std::error::Error + Send + Sync + 'static) -> Self {
        BackendError {
            inner: Box::new(inner),
            causes: false,
        }
    }

    /// A driver error whose own message needs its causes to say what happened.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn with_causes(inner: impl std::error::Error + Send + Sync + 'static) -> Self {
        BackendError {
            inner: Box::new(inner),
            causes: true,
        }
    }
}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "database error: {}", self.inner)?;
        let mut cause = self.inner.source().filter(|_| self.causes);
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

impl std::error::Error for BackendError {}

/// `error` and the chain of its causes, as one line (`a: b: c`): what a log line or a message
/// to an operator shows of an error whose own text leaves its cause out (a driver's "db error").
///
/// ```
/// use std::error::Error;
/// use std::fmt;
///
/// #[derive(Debug)]
/// struct Refused;
/// impl fmt::Display for Refused {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("connection refused")
///     }
/// }
/// impl Error for Refused {}
///
/// #[derive(Debug)]
/// struct DbError(Refused);
/// impl fmt::Display for DbError {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("db error")
///     }
/// }
/// impl Error for DbError {
///     fn source(&self) -> Option<&(dyn Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// assert_eq!(leasefence::error_chain(&DbError(Refused)), "db error: connection refused");
/// ```
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
