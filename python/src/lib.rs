//! `leasefence._native`: the Rust core of the Python package `leasefence`.
//!
//! The pure-Python package (`python/leasefence/`) re-exports what is here and adds what is more
//! natural in Python (`claim_many` over a `ThreadPoolExecutor`, the exception classes, signal
//! handling of `Worker.run`). Every call that touches a database releases the GIL
//! (`Python::detach`) for its whole duration, so Python threads really contend for the lock.
//!
//! Arguments are checked before the GIL is released, and bad ones raise
//! `leasefence.InvalidArgument` (a `ValueError`) naming the argument, with nothing changed.

mod args;
mod errors;
mod schedule;
mod store;
mod values;
mod worker;

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use errors::IntoPy;

/// Creates the `jobs` table (and the file) idempotently: running it again never resets any
/// row, above all never a fence. The file is switched to WAL with durable commits.
#[pyfunction]
fn init_db(py: Python<'_>, #[pyo3(from_py_with = args::path)] path: PathBuf) -> PyResult<()> {
    py.detach(|| leasefence::init_db(&path)).py(py)
}

/// Inserts an unknown `job_id` with the default state and returns `True`; a known one returns
/// `False` and its row is untouched.
#[pyfunction]
fn enqueue(
    py: Python<'_>,
    #[pyo3(from_py_with = args::path)] path: PathBuf,
    job_id: &str,
) -> PyResult<bool> {
    py.detach(|| leasefence::enqueue(&path, job_id)).py(py)
}

/// The stored row as a `dict` (`id, owner, until, fence, result, done`, valued as Python's
/// `sqlite3` returns the row: `until` a float, `fence` an int, `done` 0 or 1), read through a
/// connection of its own; `None` for an unknown id.
#[pyfunction]
fn state<'py>(
    py: Python<'py>,
    #[pyo3(from_py_with = args::path)] path: PathBuf,
    job_id: &str,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let row = py.detach(|| leasefence::state(&path, job_id)).py(py)?;
    row.map(|row| values::state_dict(py, &row)).transpose()
}

/// Takes the lease of a claimable job (known, not done, `until <= now`, attempts left if the
/// job has a budget): stores `owner` and
/// `until = now + ttl`, increments the fence and returns it; `None` otherwise.
#[pyfunction]
fn claim(
    py: Python<'_>,
    #[pyo3(from_py_with = args::path)] path: PathBuf,
    job_id: &str,
    owner: &str,
    #[pyo3(from_py_with = args::seed_now)] now: f64,
    #[pyo3(from_py_with = args::seed_ttl)] ttl: f64,
) -> PyResult<Option<i64>> {
    py.detach(|| leasefence::claim(&path, job_id, owner, now, ttl))
        .py(py)
}

/// Extends the live lease of `owner` under `fence` to `now + ttl` and returns `True`; `False`
/// (nothing changed) when owner or fence differ, the job is done or the lease has expired.
#[pyfunction]
fn renew(
    py: Python<'_>,
    #[pyo3(from_py_with = args::path)] path: PathBuf,
    job_id: &str,
    owner: &str,
    fence: i64,
    #[pyo3(from_py_with = args::seed_now)] now: f64,
    #[pyo3(from_py_with = args::seed_ttl)] ttl: f64,
) -> PyResult<bool> {
    py.detach(|| leasefence::renew(&path, job_id, owner, fence, now, ttl))
        .py(py)
}

/// Stores `result` and sets `done = 1` while the lease of `owner` under `fence` is current;
/// `False` otherwise, and the earlier result stays.
#[pyfunction]
fn complete(
    py: Python<'_>,
    #[pyo3(from_py_with = args::path)] path: PathBuf,
    job_id: &str,
    owner: &str,
    fence: i64,
    #[pyo3(from_py_with = args::seed_now)] now: f64,
    result: &str,
) -> PyResult<bool> {
    py.detach(|| leasefence::complete(&path, job_id, owner, fence, now, result))
        .py(py)
}

/// Gives the lease back (`owner = NULL`, `until = 0`, the fence kept) when `owner` and `fence`
/// match and the job is not done; `False` otherwise.
#[pyfunction]
fn release(
    py: Python<'_>,
    #[pyo3(from_py_with = args::path)] path: PathBuf,
    job_id: &str,
    owner: &str,
    fence: i64,
) -> PyResult<bool> {
    py.detach(|| leasefence::release(&path, job_id, owner, fence))
        .py(py)
}

/// Checks `claim`'s arguments as `claim` does, touching no database: `claim_many` checks every
/// owner's before any thread starts, so a bad one changes nothing, and with no owner at all
/// (`owner=None`) still checks the others.
#[pyfunction]
fn check_claim_args(
    py: Python<'_>,
    job_id: &str,
    owner: Option<&str>,
    #[pyo3(from_py_with = args::seed_now)] now: f64,
    #[pyo3(from_py_with = args::seed_ttl)] ttl: f64,
) -> PyResult<()> {
    let check = || -> leasefence::Result<()> {
        leasefence::JobId::new(job_id)?;
        if let Some(owner) = owner {
            leasefence::Owner::new(owner)?;
        }
        let now = leasefence::Now::new(now)?;
        leasefence::Ttl::new(ttl)?.until(now)?;
        Ok(())
    };
    check().py(py)
}

/// The module `leasefence._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(init_db, m)?)?;
    m.add_function(wrap_pyfunction!(enqueue, m)?)?;
    m.add_function(wrap_pyfunction!(state, m)?)?;
    m.add_function(wrap_pyfunction!(claim, m)?)?;
    m.add_function(wrap_pyfunction!(renew, m)?)?;
    m.add_function(wrap_pyfunction!(complete, m)?)?;
    m.add_function(wrap_pyfunction!(release, m)?)?;
    m.add_function(wrap_pyfunction!(check_claim_args, m)?)?;
    store::register(m)?;
    schedule::register(m)?;
    worker::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
