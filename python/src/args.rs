//! Integer arguments, checked as the library checks its own: a value out of the argument's
//! range is an `InvalidArgument` naming it (a `ValueError`, as `max_attempts=-1` is bad input,
//! not arithmetic), a value that is not an integer a `TypeError` naming it. PyO3's own
//! conversion would raise a bare `OverflowError` ("out of range integral type conversion
//! attempted") for the first.
//!
//! Each argument has a converter of its own (PyO3's `from_py_with` passes none the name); any
//! object with `__index__` counts as an integer, as it does for Python's own `range()` — except
//! a `bool`, a `TypeError` naming the argument (`fence=True` is a slip, not the fence 1).
//!
//! Float arguments (seconds, clock readings) too: an `int` too large for a float
//! (`ttl=10**400`) is an `InvalidArgument` naming the argument, where PyO3 would raise a bare
//! `OverflowError` ("int too large to convert to float").

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyMemoryView, PyString};

use crate::errors::invalid;

/// `value` as a `T`, or the error naming `name`; `range` says what a valid value is.
fn integer<T: TryFrom<i64>>(
    value: &Bound<'_, PyAny>,
    name: &'static str,
    range: &str,
) -> PyResult<T> {
    let py = value.py();
    refuse_bool(value, name, "an int")?;
    let wide = match value.extract::<i64>() {
        Ok(wide) => wide,
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
            // Not its hundreds of digits (`max_attempts=10**400`): how many there are.
            let text = value.to_string();
            let digits = text.trim_start_matches('-').len();
            let shown = match digits > 24 {
                true => format!("an int of {digits} digits"),
                false => text,
            };
            return Err(invalid(py, name, &format!("{range}, got {shown}")));
        }
        Err(_) => return Err(type_error(value, name, "an int")),
    };
    T::try_from(wide).map_err(|_| invalid(py, name, &format!("{range}, got {wide}")))
}

/// A `TypeError` naming `name` for a `value` that is not of the type `wanted` says, and the
/// type it is (`invalid argument `queues`: must be a queue name or a list of names, not int`).
pub(crate) fn type_error(value: &Bound<'_, PyAny>, name: &str, wanted: &str) -> PyErr {
    let kind = value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |k| k.to_string());
    PyTypeError::new_err(format!(
        "invalid argument `{name}`: must be {wanted}, not {kind}"
    ))
}

/// A `bool` where a number is asked for is a `TypeError` naming the argument: Python counts
/// `True` as the integer 1, but `ttl=True` or `fence=False` is a slip, not a number of seconds
/// or a fence.
fn refuse_bool(value: &Bound<'_, PyAny>, name: &'static str, wanted: &str) -> PyResult<()> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "invalid argument `{name}`: must be {wanted}, not bool"
        )));
    }
    Ok(())
}

/// `value` as an `f64`, or an `InvalidArgument` naming `name` for an `int` too large for one,
/// or a `TypeError` naming it for a `bool`. Other values (NaN, negative) pass: each argument's
/// own check judges them.
fn float(value: &Bound<'_, PyAny>, name: &'static str) -> PyResult<f64> {
    refuse_bool(value, name, "a number")?;
    lenient_float(value, name)
}

/// As [`float`], but a `bool` counts as 0 or 1, as Python's `sqlite3` takes it: the eight seed
/// functions keep the seed's behaviour.
fn lenient_float(value: &Bound<'_, PyAny>, name: &'static str) -> PyResult<f64> {
    let py = value.py();
    value.extract::<f64>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(py) {
            invalid(
                py,
                name,
                "must be a finite number, got an integer too large for a float",
            )
        } else {
            e
        }
    })
}

/// Converters for one float argument each: `fn NAME(value) -> PyResult<f64>`.
macro_rules! floats {
    ($($conv:ident = $name:literal;)*) => {$(
        #[doc = concat!("The float argument `", $name, "`.")]
        pub(crate) fn $conv(value: &Bound<'_, PyAny>) -> PyResult<f64> {
            float(value, $name)
        }
    )*};
}

/// The seed functions' `now`: as [`now`], but a `bool` counts as a number (see [`lenient_float`]).
pub(crate) fn seed_now(value: &Bound<'_, PyAny>) -> PyResult<f64> {
    lenient_float(value, "now")
}

/// The seed functions' `ttl`: as [`ttl`], but a `bool` counts as a number (see [`lenient_float`]).
pub(crate) fn seed_ttl(value: &Bound<'_, PyAny>) -> PyResult<f64> {
    lenient_float(value, "ttl")
}

floats! {
    now = "now";
    ttl = "ttl";
    until = "until";
    not_before = "not_before";
    unique_for = "unique_for";
    retry_at = "retry_at";
    finished_before = "finished_before";
    busy_timeout = "busy_timeout";
    timeout = "timeout";
    poll_interval = "poll_interval";
    shutdown_deadline = "shutdown_deadline";
}

/// Converters for one argument each: `fn NAME(value) -> PyResult<TYPE>`, and for an optional
/// one `None` passed through.
macro_rules! converters {
    ($($conv:ident: $ty:ty = $name:literal, $range:literal;)*) => {$(
        #[doc = concat!("The argument `", $name, "`: ", $range, ".")]
        pub(crate) fn $conv(value: &Bound<'_, PyAny>) -> PyResult<$ty> {
            integer(value, $name, $range)
        }
    )*};
}

macro_rules! optional {
    ($($conv:ident: $ty:ty = $inner:ident;)*) => {$(
        #[doc = concat!("As [`", stringify!($inner), "`], or `None`.")]
        pub(crate) fn $conv(value: &Bound<'_, PyAny>) -> PyResult<Option<$ty>> {
            if value.is_none() { Ok(None) } else { $inner(value).map(Some) }
        }
    )*};
}

converters! {
    priority: i64 = "priority", "must be an integer from -2**63 to 2**63 - 1";
    max_attempts: u32 = "max_attempts", "must be 0 (no limit) or a number of attempts up to 2**32 - 1";
    n: usize = "n", "must be a number of jobs from 1 to 2**63 - 1";
    limit: usize = "limit", "must be a number of jobs from 0 to 2**63 - 1";
    fence: i64 = "fence", "must be a fence from -2**63 to 2**63 - 1";
    concurrency: usize = "concurrency", "must be a number of threads from 1 to 2**63 - 1";
    queue_threads: usize = "queues", "maps queue names to thread counts from 1 to 2**63 - 1";
    batch: usize = "batch", "must be a number of jobs from 1 to 2**63 - 1";
    attempt: u32 = "attempt", "must be an attempt number from 1 to 2**32 - 1";
}

optional! {
    max_attempts_opt: u32 = max_attempts;
    batch_opt: usize = batch;
    now_opt: f64 = now;
    not_before_opt: f64 = not_before;
    unique_for_opt: f64 = unique_for;
    retry_at_opt: f64 = retry_at;
    busy_timeout_opt: f64 = busy_timeout;
    timeout_opt: f64 = timeout;
}

/// The argument `payload`: `bytes` (or any object with the buffer protocol), or `None`. A
/// `str` is refused by name with the fix, where PyO3 would say "Can't extract `str` to `Vec`".
pub(crate) fn payload(value: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    if value.is_none() {
        return Ok(None);
    }
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "invalid argument `payload`: must be bytes, not str; encode it (payload.encode())",
        ));
    }
    // Only an object with the buffer protocol (bytes, bytearray, memoryview, …): extracting a
    // `Vec<u8>` would also take any sequence of small ints ([1, 2, 3] stored as b"\x01\x02\x03").
    PyMemoryView::from(value)
        .and_then(|view| view.call_method0("tobytes"))
        .and_then(|bytes| Ok(bytes.cast::<PyBytes>()?.as_bytes().to_vec()))
        .map(Some)
        .map_err(|_| type_error(value, "payload", "bytes"))
}

/// The argument `path` of the eight functions: a `str` or `os.PathLike`, neither empty nor
/// holding a NUL (`InvalidArgument`, as Python's `sqlite3` raises a `ValueError` for the NUL).
pub(crate) fn path(value: &Bound<'_, PyAny>) -> PyResult<std::path::PathBuf> {
    let path: std::path::PathBuf = value.extract()?;
    let py = value.py();
    if path.as_os_str().is_empty() {
        return Err(invalid(py, "path", "must not be empty"));
    }
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(invalid(py, "path", "must not contain a NUL character"));
    }
    Ok(path)
}
