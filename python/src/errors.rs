//! leasefence's errors as the Python exceptions of `leasefence.errors`.
//!
//! The classes are defined in Python (`leasefence/errors.py`), so that `InvalidArgument` can
//! be a `ValueError` and `Busy` a `Retryable` at once; this file only picks the class for each
//! Rust error and fills in its attributes.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The name of the `leasefence.errors` class for `error`.
fn class_of(error: &leasefence::Error) -> &'static str {
    use leasefence::Error as E;
    match error {
        E::InvalidArgument { .. } => "InvalidArgument",
        E::Busy => "Busy",
        E::Unavailable { .. } => "Unavailable",
        E::SchemaMismatch { .. } => "SchemaMismatch",
        E::NotADatabase { .. } => "NotADatabase",
        E::CannotOpen { .. } => "CannotOpen",
        E::CannotConnect { .. } => "CannotConnect",
        E::ConnectionLost { .. } => "ConnectionLost",
        E::StorageFull { .. } => "StorageFull",
        E::ReadOnly { .. } => "ReadOnly",
        E::Corrupt { .. } => "Corrupt",
        E::Unsupported { .. } => "Unsupported",
        _ => "BackendError",
    }
}

/// The message: the error and its causes, as the CLI prints them. Secrets never reach it: the
/// library's errors name a PostgreSQL target without its password.
fn message(error: &leasefence::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Converts a library error into the matching `leasefence.errors` exception, with its
/// `argument` (the bad argument's name, for `InvalidArgument`) and `retryable` attributes.
pub(crate) fn to_py(py: Python<'_>, error: leasefence::Error) -> PyErr {
    let text = message(&error);
    let build = || -> PyResult<PyErr> {
        let class = py.import("leasefence.errors")?.getattr(class_of(&error))?;
        let instance = class.call1((text.clone(),))?;
        if let Some(argument) = error.argument() {
            instance.setattr("argument", argument)?;
        }
        Ok(PyErr::from_value(instance))
    };
    // The package is what imports this module, so leasefence.errors is always there; should it
    // ever fail to load, the caller still gets the message.
    build().unwrap_or_else(|_| PyRuntimeError::new_err(text))
}

/// Turns a library result into a Python one.
pub(crate) trait IntoPy<T> {
    /// The value, or the library error converted by [`to_py`].
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for leasefence::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// An `InvalidArgument` naming `argument`, for checks made before reaching the library.
pub(crate) fn invalid(py: Python<'_>, argument: &'static str, reason: &str) -> PyErr {
    to_py(
        py,
        leasefence::Error::InvalidArgument {
            argument,
            reason: reason.to_string(),
        },
    )
}

/// `result` with the argument an `InvalidArgument` names renamed by `names` (the library's
/// name → this API's parameter): `Queues::only` names each bad element `queue`, where the
/// caller passed `queues`.
pub(crate) fn renamed<T>(
    result: leasefence::Result<T>,
    names: &[(&str, &'static str)],
) -> leasefence::Result<T> {
    result.map_err(|error| rename(error, names))
}

/// `error` renamed as by [`renamed`].
pub(crate) fn rename(
    error: leasefence::Error,
    names: &[(&str, &'static str)],
) -> leasefence::Error {
    match error {
        leasefence::Error::InvalidArgument { argument, reason } => {
            let argument = names
                .iter()
                .find(|(from, _)| *from == argument)
                .map_or(argument, |(_, to)| *to);
            leasefence::Error::InvalidArgument { argument, reason }
        }
        other => other,
    }
}
