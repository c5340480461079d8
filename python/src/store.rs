//! `leasefence.Store`: one kept store (an SQLite file or a PostgreSQL database) with the queue's
//! operations, and `leasefence.NewJob`, a job to enqueue.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use leasefence::{
    AnyOptions, AnyStore, BatchSize, JobId, Now, Owner, PgOptions, Queue, Queues, Resource,
    Schedule, ScheduleName, Scheduler, SqliteOptions, Status, Step, Store as _, Synchronous,
    Target, Ttl,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::args::{self, type_error};
use crate::errors::{IntoPy, invalid, rename, renamed};
use crate::schedule::{ScheduleInfo, Tick};
use crate::values::{Failed, History, JobInfo, Lease, QueueInfo, Stats, state_dict};

/// A job to enqueue: its id and, optionally, payload, queue, kind, priority, not-before time,
/// attempts budget and unique key. Validated when made: a bad value raises `InvalidArgument`
/// naming it.
#[pyclass(frozen, module = "leasefence", eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct NewJob {
    inner: leasefence::NewJob,
}

/// What `NewJob.__reduce__` hands to pickle: a maker (`NewJob` with its keyword arguments
/// bound) and the positional arguments `(job_id, payload)`.
type Reduced<'py> = (Bound<'py, PyAny>, (String, Option<Bound<'py, PyBytes>>));

#[pymethods]
impl NewJob {
    #[new]
    #[pyo3(signature = (job_id, payload=None, *, queue=None, kind=None, priority=0, not_before=None,
                        max_attempts=None, unique_key=None, unique_for=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        job_id: String,
        #[pyo3(from_py_with = args::payload)] payload: Option<Vec<u8>>,
        queue: Option<String>,
        kind: Option<String>,
        #[pyo3(from_py_with = args::priority)] priority: i64,
        #[pyo3(from_py_with = args::not_before_opt)] not_before: Option<f64>,
        #[pyo3(from_py_with = args::max_attempts_opt)] max_attempts: Option<u32>,
        unique_key: Option<String>,
        #[pyo3(from_py_with = args::unique_for_opt)] unique_for: Option<f64>,
    ) -> PyResult<Self> {
        let build = || -> leasefence::Result<leasefence::NewJob> {
            let mut job = leasefence::NewJob::new(job_id)?.priority(priority);
            if let Some(payload) = payload {
                job = job.payload(payload);
            }
            if let Some(queue) = queue {
                job = job.queue(queue)?;
            }
            if let Some(kind) = kind {
                job = job.kind(kind)?;
            }
            if let Some(at) = not_before {
                job = job.not_before(at)?;
            }
            if let Some(n) = max_attempts {
                job = job.max_attempts(n);
            }
            if let Some(key) = unique_key {
                job = job.unique_key(key)?;
            }
            if let Some(seconds) = unique_for {
                job = job.unique_for(seconds)?;
            }
            Ok(job)
        };
        Ok(NewJob {
            inner: build().py(py)?,
        })
    }

    /// The job id.
    #[getter]
    fn job_id(&self) -> &str {
        self.inner.id()
    }

    /// The payload, or `None`.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.payload_bytes().map(|b| PyBytes::new(py, b))
    }

    /// The queue it joins.
    #[getter]
    fn queue(&self) -> &str {
        self.inner.queue_name().as_str()
    }

    /// The kind, or `None`.
    #[getter]
    fn kind(&self) -> Option<&str> {
        self.inner.kind_name()
    }

    /// The priority (higher first).
    #[getter]
    fn priority(&self) -> i64 {
        self.inner.priority_value()
    }

    /// Not claimable before this clock reading (`0`: at once).
    #[getter]
    fn not_before(&self) -> f64 {
        self.inner.not_before_value()
    }

    /// The attempts budget (`0`: no limit).
    #[getter]
    fn max_attempts(&self) -> u32 {
        self.inner.max_attempts_value()
    }

    /// The unique key, or `None`.
    #[getter]
    fn unique_key(&self) -> Option<&str> {
        self.inner.unique_key_value()
    }

    /// The uniqueness window in seconds (no other job with the key is enqueued within it of
    /// this one, finished or not), or `None`: the key holds while the job is unfinished.
    #[getter]
    fn unique_for(&self) -> Option<f64> {
        self.inner.unique_for_value()
    }

    /// What `pickle` (any protocol) and `copy` rebuild it from:
    /// `functools.partial(NewJob, **the rest)(job_id, payload)`, through the validating
    /// constructor.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let j = &slf.get().inner;
        let kwargs = PyDict::new(py);
        kwargs.set_item("queue", j.queue_name().as_str())?;
        kwargs.set_item("kind", j.kind_name())?;
        kwargs.set_item("priority", j.priority_value())?;
        kwargs.set_item("not_before", j.not_before_value())?;
        kwargs.set_item("max_attempts", j.max_attempts_value())?;
        kwargs.set_item("unique_key", j.unique_key_value())?;
        kwargs.set_item("unique_for", j.unique_for_value())?;
        let make = py
            .import("functools")?
            .getattr("partial")?
            .call((slf.get_type(),), Some(&kwargs))?;
        Ok((make, (j.id().to_owned(), slf.get().payload(py))))
    }

    /// Equal jobs hash alike (`-0.0` as `0.0`, which it equals), so they can be set members
    /// and dict keys.
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let j = &self.inner;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            j.id(),
            j.payload_bytes(),
            j.queue_name().as_str(),
            j.kind_name(),
        )
            .hash(&mut h);
        (
            j.priority_value(),
            j.max_attempts_value(),
            j.unique_key_value(),
        )
            .hash(&mut h);
        (j.not_before_value() + 0.0).to_bits().hash(&mut h);
        j.unique_for_value()
            .map(|u| (u + 0.0).to_bits())
            .hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        format!(
            "NewJob(id={:?}, queue={:?}, kind={})",
            self.inner.id(),
            self.inner.queue_name().as_str(),
            crate::values::repr_opt(self.inner.kind_name())
        )
    }
}

/// A kept connection to one store: an SQLite file (a path, `str` or `os.PathLike`) or a
/// PostgreSQL database (a `postgres://` URL). Opening initialises it (idempotently). Safe to
/// share between threads: calls take turns on the one connection, each with the GIL released.
#[pyclass(frozen, module = "leasefence")]
pub(crate) struct Store {
    inner: Mutex<Option<AnyStore>>,
    backend: &'static str,
    /// The target as shown in `repr`: a PostgreSQL password masked (`Target`'s `Display`).
    shown: String,
}

/// The argument `db` of `Store` and `Worker`: a `str` is parsed (a path, or a PostgreSQL URL
/// or libpq string), an `os.PathLike` is always an SQLite file, whatever its text looks like.
pub(crate) fn target_of(py: Python<'_>, db: &Bound<'_, PyAny>) -> PyResult<Target> {
    let target = if let Ok(text) = db.cast::<PyString>() {
        Target::parse(&text.to_cow()?).py(py)?
    } else {
        let path: PathBuf = db.extract().map_err(|_| {
            PyTypeError::new_err("db must be a str (a path or a postgres:// URL) or os.PathLike")
        })?;
        if path.as_os_str().is_empty() {
            return Err(invalid(py, "db", "is empty: give an SQLite file path"));
        }
        Target::Sqlite(path)
    };
    // A file name cannot hold a NUL; SQLite's open would fail with "nul byte found", named as
    // no argument. (A connection string with one is refused by the driver's parser, by name.)
    if let Target::Sqlite(path) = &target
        && path.as_os_str().as_encoded_bytes().contains(&0)
    {
        return Err(invalid(py, "db", "must not contain a NUL character"));
    }
    Ok(target)
}

/// The clock reading of a call: `now` when given, else the system clock (seconds since the
/// Unix epoch).
fn now_or_system(py: Python<'_>, now: Option<f64>) -> PyResult<Now> {
    match now {
        Some(now) => Now::new(now).py(py),
        None => Ok(Now::system()),
    }
}

/// A time argument other than `now` (`retry_at`, `finished_before`): the library checks it as
/// a clock reading and would name it `now`.
fn time_arg(py: Python<'_>, value: f64, name: &'static str) -> PyResult<Now> {
    Now::new(value).map_err(|_| {
        invalid(
            py,
            name,
            &format!("must be a finite number of seconds, got {value}"),
        )
    })
}

/// `None` (every queue), a queue name, or a list of names.
fn queues_of(py: Python<'_>, queues: Option<&Bound<'_, PyAny>>) -> PyResult<Queues> {
    let Some(queues) = queues else {
        return Ok(Queues::All);
    };
    let names: Vec<String> = if let Ok(name) = queues.cast::<PyString>() {
        vec![name.to_cow()?.into_owned()]
    } else {
        queues
            .extract()
            .map_err(|_| type_error(queues, "queues", "None, a queue name or a list of names"))?
    };
    renamed(Queues::only(names), &[("queue", "queues")]).py(py)
}

/// A job id or a list of them.
fn ids_of(_py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(id) = ids.cast::<PyString>() {
        return Ok(vec![id.to_cow()?.into_owned()]);
    }
    ids.extract()
        .map_err(|_| type_error(ids, "job_ids", "a job id or a list of job ids"))
}

fn parse_ids<'a>(py: Python<'_>, ids: &'a [String]) -> PyResult<Vec<JobId<'a>>> {
    let ids = ids.iter().map(|id| JobId::new(id)).collect();
    renamed(ids, &[("job_id", "job_ids")]).py(py)
}

impl Store {
    /// Runs `call` on the store with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&AnyStore) -> leasefence::Result<T> + Send,
    ) -> PyResult<T> {
        let result = py.detach(|| {
            let guard: MutexGuard<'_, Option<AnyStore>> =
                self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().map(call)
        });
        match result {
            Some(result) => result.py(py),
            None => Err(invalid(py, "store", "is closed")),
        }
    }
}

#[pymethods]
impl Store {
    #[new]
    #[pyo3(signature = (db, *, synchronous="full", busy_timeout=None, schema=None))]
    fn new(
        py: Python<'_>,
        db: &Bound<'_, PyAny>,
        synchronous: &str,
        #[pyo3(from_py_with = args::busy_timeout_opt)] busy_timeout: Option<f64>,
        schema: Option<String>,
    ) -> PyResult<Self> {
        let target = target_of(py, db)?;
        let mut sqlite = SqliteOptions::new();
        sqlite = match synchronous {
            "full" | "FULL" => sqlite.synchronous(Synchronous::Full),
            "normal" | "NORMAL" => sqlite.synchronous(Synchronous::Normal),
            _ => {
                return Err(invalid(
                    py,
                    "synchronous",
                    "must be \"full\" (durable, the default) or \"normal\"",
                ));
            }
        };
        let mut postgres = PgOptions::new();
        if let Some(seconds) = busy_timeout {
            // PostgreSQL takes a lock timeout of 2^31 - 1 ms at most (about 24.8 days).
            let timeout = Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|t| seconds.is_finite() && *t <= Duration::from_millis(i32::MAX as u64))
                .ok_or_else(|| {
                    invalid(
                        py,
                        "busy_timeout",
                        "must be a finite number of seconds >= 0 and at most 2147483.647",
                    )
                })?;
            sqlite = sqlite.busy_timeout(timeout);
            postgres = postgres.lock_timeout(timeout);
        }
        if let Some(schema) = schema {
            postgres = postgres.schema(schema);
        }
        let options = AnyOptions::new().sqlite(sqlite).postgres(postgres);
        let store = py.detach(|| options.open_target(&target)).py(py)?;
        Ok(Store {
            backend: store.backend(),
            shown: target.to_string(),
            inner: Mutex::new(Some(store)),
        })
    }

    /// `"sqlite"` or `"postgres"`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    /// Closes the connection (the pool, on PostgreSQL); later calls raise `InvalidArgument`
    /// naming `store`. Idempotent.
    fn close(&self, py: Python<'_>) {
        let store = py.detach(|| {
            self.inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        });
        py.detach(move || drop(store));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close(py);
    }

    fn __repr__(&self) -> String {
        format!("Store(backend={:?}, db={:?})", self.backend, self.shown)
    }

    /// The stored row of `job_id` as the seed's `dict`, or `None`.
    fn state<'py>(&self, py: Python<'py>, job_id: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
        let id = JobId::new(job_id).py(py)?;
        let row = self.with(py, |s| s.state(id))?;
        row.map(|row| state_dict(py, &row)).transpose()
    }

    /// Enqueues one job (see `NewJob` for the arguments); `False` when the id is known or the
    /// unique key is taken.
    #[pyo3(signature = (job_id, payload=None, *, queue=None, kind=None, priority=0, not_before=None,
                        max_attempts=None, unique_key=None, unique_for=None))]
    #[allow(clippy::too_many_arguments)]
    fn enqueue(
        &self,
        py: Python<'_>,
        job_id: String,
        #[pyo3(from_py_with = args::payload)] payload: Option<Vec<u8>>,
        queue: Option<String>,
        kind: Option<String>,
        #[pyo3(from_py_with = args::priority)] priority: i64,
        #[pyo3(from_py_with = args::not_before_opt)] not_before: Option<f64>,
        #[pyo3(from_py_with = args::max_attempts_opt)] max_attempts: Option<u32>,
        unique_key: Option<String>,
        #[pyo3(from_py_with = args::unique_for_opt)] unique_for: Option<f64>,
    ) -> PyResult<bool> {
        let job = NewJob::new(
            py,
            job_id,
            payload,
            queue,
            kind,
            priority,
            not_before,
            max_attempts,
            unique_key,
            unique_for,
        )?;
        self.with(py, |s| s.enqueue_job(job.inner))
    }

    /// Enqueues many jobs (ids or `NewJob`s) in one transaction; for each, whether it was
    /// inserted.
    fn enqueue_many(&self, py: Python<'_>, jobs: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        let mut batch = Vec::new();
        // A lone id is one job, as for `retry` and `delete` (not one job per character).
        if let Ok(id) = jobs.cast::<PyString>() {
            let job = leasefence::NewJob::new(id.to_cow()?.into_owned());
            batch.push(renamed(job, &[("job_id", "jobs")]).py(py)?);
            return self.with(py, |s| s.enqueue_many(&batch));
        }
        for (index, item) in jobs.try_iter()?.enumerate() {
            let item = item?;
            if let Ok(id) = item.cast::<PyString>() {
                // Named by its place in the list: `jobs` alone would read as the list itself.
                let job = leasefence::NewJob::new(id.to_cow()?.into_owned()).map_err(|e| {
                    match rename(e, &[("job_id", "jobs")]) {
                        leasefence::Error::InvalidArgument { argument, reason } => {
                            leasefence::Error::InvalidArgument {
                                argument,
                                reason: format!("the job id at index {index} {reason}"),
                            }
                        }
                        other => other,
                    }
                });
                batch.push(job.py(py)?);
            } else if let Ok(job) = item.cast::<NewJob>() {
                batch.push(job.get().inner.clone());
            } else {
                return Err(invalid(
                    py,
                    "jobs",
                    "must hold job ids (str) or NewJob objects",
                ));
            }
        }
        self.with(py, |s| s.enqueue_many(&batch))
    }

    /// Claims `job_id` for `owner` if it is claimable (known, not done, lease expired, attempts
    /// left if it has a budget).
    /// `now` is keyword-only (as on `claim_next`, `renew`, `complete` and `fail`): the seed's
    /// `claim` takes `(now, ttl)` positionally, and a call ported from it must not swap them
    /// unseen.
    #[pyo3(signature = (job_id, owner, ttl, *, now=None))]
    fn claim(
        &self,
        py: Python<'_>,
        job_id: &str,
        owner: &str,
        #[pyo3(from_py_with = args::ttl)] ttl: f64,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Option<Lease>> {
        let (id, owner, ttl) = (
            JobId::new(job_id).py(py)?,
            Owner::new(owner).py(py)?,
            Ttl::new(ttl).py(py)?,
        );
        let now = now_or_system(py, now)?;
        let lease = self.with(py, |s| s.claim(id, owner, now, ttl))?;
        Ok(lease.map(|inner| Lease { inner }))
    }

    /// Claims the best ready job (of `queues`: a name or a list; all when `None`).
    #[pyo3(signature = (owner, ttl=30.0, *, queues=None, now=None))]
    fn claim_next(
        &self,
        py: Python<'_>,
        owner: &str,
        #[pyo3(from_py_with = args::ttl)] ttl: f64,
        queues: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Option<Lease>> {
        let (owner, ttl) = (Owner::new(owner).py(py)?, Ttl::new(ttl).py(py)?);
        let queues = queues_of(py, queues)?;
        let now = now_or_system(py, now)?;
        let lease = self.with(py, |s| s.claim_next_in(&queues, owner, now, ttl))?;
        Ok(lease.map(|inner| Lease { inner }))
    }

    /// Claims up to `n` ready jobs in one transaction, best first.
    #[pyo3(signature = (owner, n, ttl=30.0, *, queues=None, now=None))]
    fn claim_batch(
        &self,
        py: Python<'_>,
        owner: &str,
        #[pyo3(from_py_with = args::n)] n: usize,
        #[pyo3(from_py_with = args::ttl)] ttl: f64,
        queues: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Vec<Lease>> {
        let (owner, ttl) = (Owner::new(owner).py(py)?, Ttl::new(ttl).py(py)?);
        let n = BatchSize::new(n).py(py)?;
        let queues = queues_of(py, queues)?;
        let now = now_or_system(py, now)?;
        let leases = self.with(py, |s| s.claim_batch_in(&queues, owner, now, ttl, n))?;
        Ok(leases.into_iter().map(|inner| Lease { inner }).collect())
    }

    /// Extends a live lease to `now + ttl`: the renewed lease, or `None` (nothing changed) when
    /// it is no longer current.
    #[pyo3(signature = (lease, ttl, *, now=None))]
    fn renew(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, Lease>,
        #[pyo3(from_py_with = args::ttl)] ttl: f64,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Option<Lease>> {
        let ttl = Ttl::new(ttl).py(py)?;
        let now = now_or_system(py, now)?;
        let mut renewed = lease.get().inner.clone();
        let ok = self.with(py, |s| s.renew_lease(&mut renewed, now, ttl))?;
        Ok(ok.then_some(Lease { inner: renewed }))
    }

    /// Stores `result` and finishes the job, only while `lease` is current; `False` otherwise
    /// (the stored result is unchanged).
    #[pyo3(signature = (lease, result, *, now=None))]
    fn complete(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, Lease>,
        result: &str,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<bool> {
        let now = now_or_system(py, now)?;
        let lease = &lease.get().inner;
        self.with(py, |s| s.complete_lease(lease, now, result))
    }

    /// Completes many leases in one transaction (one commit): `completions` holds
    /// `(lease, result)` pairs; for each, whether its result was stored (only while its lease
    /// is current, exactly as `complete`). On an error none was stored.
    #[pyo3(signature = (completions, now=None))]
    fn complete_batch(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Vec<bool>> {
        let now = now_or_system(py, now)?;
        let mut pairs: Vec<(Bound<'_, Lease>, String)> = Vec::new();
        for item in completions.try_iter()? {
            let (lease, result): (Bound<'_, Lease>, String) = item?
                .extract()
                .map_err(|_| invalid(py, "completions", "must hold (Lease, str) pairs"))?;
            pairs.push((lease, result));
        }
        let borrowed: Vec<(&leasefence::Lease, &str)> = pairs
            .iter()
            .map(|(lease, result)| (&lease.get().inner, result.as_str()))
            .collect();
        self.with(py, |s| s.complete_batch(&borrowed, now))
    }

    /// Records a failed attempt while `lease` is current: a `Failed` (retry time, or dead),
    /// or `None` when the lease is no longer current (nothing changed).
    #[pyo3(signature = (lease, error, *, now=None, retry_at=None))]
    fn fail(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, Lease>,
        error: &str,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
        #[pyo3(from_py_with = args::retry_at_opt)] retry_at: Option<f64>,
    ) -> PyResult<Option<Failed>> {
        let now = now_or_system(py, now)?;
        let retry_at = retry_at
            .map(|at| time_arg(py, at, "retry_at"))
            .transpose()?;
        let lease = &lease.get().inner;
        let failed = self.with(py, |s| s.fail(lease, now, error, retry_at))?;
        Ok(failed.map(Failed::from))
    }

    /// Gives the lease back (the fence kept); `False` when it is no longer the holder's.
    fn release(&self, py: Python<'_>, lease: &Bound<'_, Lease>) -> PyResult<bool> {
        let lease = &lease.get().inner;
        self.with(py, |s| s.release_lease(lease))
    }

    /// Operator verb: cancels an unfinished job (its holder's writes are refused from then
    /// on); `False` for a finished or unknown job.
    #[pyo3(signature = (job_id, now=None))]
    fn cancel(
        &self,
        py: Python<'_>,
        job_id: &str,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<bool> {
        let id = JobId::new(job_id).py(py)?;
        let now = now_or_system(py, now)?;
        self.with(py, |s| s.cancel(id, now))
    }

    /// Operator verb: makes dead or cancelled jobs ready again, with a fresh attempts budget
    /// (a job id or a list); for each, whether it was retried (`False` for a job that is
    /// waiting, leased, retrying after a failure, completed, or unknown).
    #[pyo3(signature = (job_ids, now=None))]
    fn retry(
        &self,
        py: Python<'_>,
        job_ids: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Vec<bool>> {
        let ids = ids_of(py, job_ids)?;
        let ids = parse_ids(py, &ids)?;
        let now = now_or_system(py, now)?;
        self.with(py, |s| s.retry(&ids, now))
    }

    /// Operator verb: retries every dead job (of `queues`); how many.
    #[pyo3(signature = (queues=None, now=None))]
    fn retry_dead(
        &self,
        py: Python<'_>,
        queues: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<u64> {
        let queues = queues_of(py, queues)?;
        let now = now_or_system(py, now)?;
        self.with(py, |s| s.retry_dead_in(&queues, now))
    }

    /// Operator verb: deletes jobs (a job id or a list), keeping their fences for a later
    /// enqueue of the same id; for each, whether it existed.
    fn delete(&self, py: Python<'_>, job_ids: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        let ids = ids_of(py, job_ids)?;
        let ids = parse_ids(py, &ids)?;
        self.with(py, |s| s.delete(&ids))
    }

    /// Operator verb: deletes the jobs finished before `finished_before` (fences kept); how
    /// many.
    fn purge(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = args::finished_before)] finished_before: f64,
    ) -> PyResult<u64> {
        let before = time_arg(py, finished_before, "finished_before")?;
        self.with(py, |s| s.purge(before))
    }

    /// A page of jobs in id order: of one `status` (a name) or all, after the id `after`.
    #[pyo3(signature = (status=None, after=None, limit=100, now=None))]
    fn list(
        &self,
        py: Python<'_>,
        status: Option<&str>,
        after: Option<&str>,
        #[pyo3(from_py_with = args::limit)] limit: usize,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Vec<JobInfo>> {
        let status = status.map(Status::parse).transpose().py(py)?;
        let after = renamed(after.map(JobId::new).transpose(), &[("job_id", "after")]).py(py)?;
        let now = now_or_system(py, now)?;
        let jobs = self.with(py, |s| s.list(now, status, after, limit))?;
        Ok(jobs.into_iter().map(|job| JobInfo::new(py, job)).collect())
    }

    /// One job with every field, or `None`.
    #[pyo3(signature = (job_id, now=None))]
    fn inspect(
        &self,
        py: Python<'_>,
        job_id: &str,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Option<JobInfo>> {
        let id = JobId::new(job_id).py(py)?;
        let now = now_or_system(py, now)?;
        let job = self.with(py, |s| s.inspect(id, now))?;
        Ok(job.map(|job| JobInfo::new(py, job)))
    }

    /// The job's attempt ledger: every claim with its fence, owner, times and how it ended,
    /// and the late writes its fence refused (counted per fence and operation); `None` when
    /// there is no such job. A read: it changes nothing.
    fn history(&self, py: Python<'_>, job_id: &str) -> PyResult<Option<History>> {
        let id = JobId::new(job_id).py(py)?;
        let history = self.with(py, |s| s.history(id))?;
        Ok(history.as_ref().map(History::from))
    }

    /// Operator verb: pauses a queue (`claim_next` skips it); `False` when already paused.
    fn pause(&self, py: Python<'_>, queue: &str) -> PyResult<bool> {
        let queue = Queue::new(queue).py(py)?;
        self.with(py, |s| s.pause(&queue))
    }

    /// Operator verb: resumes a paused queue; `False` when it was not paused.
    fn resume(&self, py: Python<'_>, queue: &str) -> PyResult<bool> {
        let queue = Queue::new(queue).py(py)?;
        self.with(py, |s| s.resume(&queue))
    }

    /// Every queue with its counts.
    #[pyo3(signature = (now=None))]
    fn queues(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Vec<QueueInfo>> {
        let now = now_or_system(py, now)?;
        let queues = self.with(py, |s| s.queues(now))?;
        Ok(queues.iter().map(QueueInfo::from).collect())
    }

    /// Jobs by status, over all queues.
    #[pyo3(signature = (now=None))]
    fn stats(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Stats> {
        let now = now_or_system(py, now)?;
        let stats = self.with(py, |s| s.stats(now))?;
        Ok(Stats::from(&stats))
    }

    /// Adds a **schedule**: at every slot of `cron` (five fields, or six with seconds first, or
    /// seven with a year last, or `@hourly`, `@daily` and the like), read in the IANA time zone
    /// `tz`, a scheduler enqueues the job `NAME@<slot in UTC>` in `queue` with `kind`,
    /// `payload`, `priority` and `max_attempts` (`0`: no limit). The first slot is the first
    /// after `now` (default: this machine's clock, Unix seconds). `False`, and nothing
    /// changed, when a schedule of that name exists. Runs are enqueued only while a scheduler
    /// runs: a `Worker(..., scheduler=True)`, `schedule_tick()` or the CLI's
    /// `work --scheduler` / `schedule tick`. An operator verb, not fenced.
    #[pyo3(signature = (name, cron, *, tz="UTC", queue=None, kind=None, payload=None, priority=0,
                        max_attempts=None, now=None))]
    #[allow(clippy::too_many_arguments)]
    fn add_schedule(
        &self,
        py: Python<'_>,
        name: &str,
        cron: &str,
        tz: &str,
        queue: Option<String>,
        kind: Option<String>,
        #[pyo3(from_py_with = args::payload)] payload: Option<Vec<u8>>,
        #[pyo3(from_py_with = args::priority)] priority: i64,
        #[pyo3(from_py_with = args::max_attempts_opt)] max_attempts: Option<u32>,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<bool> {
        let mut schedule = Schedule::new(name, cron).py(py)?.time_zone(tz).py(py)?;
        if let Some(queue) = queue {
            schedule = schedule.queue(queue).py(py)?;
        }
        if let Some(kind) = kind {
            schedule = schedule.kind(kind).py(py)?;
        }
        if let Some(payload) = payload {
            schedule = schedule.payload(payload);
        }
        schedule = schedule
            .priority(priority)
            .max_attempts(max_attempts.unwrap_or(0));
        let now = now_or_system(py, now)?;
        self.with(py, |s| s.add_schedule(&schedule, now))
    }

    /// Removes the schedule `name`; `True` if there was one. The runs it already enqueued
    /// stay. An operator verb, not fenced.
    fn remove_schedule(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let name = ScheduleName::new(name).py(py)?;
        self.with(py, |s| s.remove_schedule(name))
    }

    /// Every schedule, by name, with when it was added and its last slot enqueued. A read.
    fn schedules(&self, py: Python<'_>) -> PyResult<Vec<ScheduleInfo>> {
        let schedules = self.with(py, |s| s.schedules())?;
        Ok(schedules.into_iter().map(ScheduleInfo::from).collect())
    }

    /// Takes the **scheduler role** once, as `owner` (default `tick-<host>-<pid>`) under a
    /// lease of `ttl` seconds and a fence of its own, enqueues the runs due at `now` (default:
    /// this machine's clock), and gives the role back — for an outside timer (cron, a systemd
    /// timer) instead of a `Worker(..., scheduler=True)`. A `Tick` says what was enqueued;
    /// `None` when another scheduler holds the role (nothing was enqueued: it does the work).
    /// A slot is never enqueued twice, whoever ticks.
    #[pyo3(signature = (owner=None, ttl=30.0, *, now=None))]
    fn schedule_tick(
        &self,
        py: Python<'_>,
        owner: Option<String>,
        #[pyo3(from_py_with = args::ttl)] ttl: f64,
        #[pyo3(from_py_with = args::now_opt)] now: Option<f64>,
    ) -> PyResult<Option<Tick>> {
        let owner = match owner {
            Some(owner) => owner,
            None => {
                let host: String = py
                    .import("socket")?
                    .call_method0("gethostname")?
                    .extract()?;
                format!("tick-{host}-{}", std::process::id())
            }
        };
        Owner::new(&owner).py(py)?;
        let ttl = Ttl::new(ttl).py(py)?;
        let now = now_or_system(py, now)?;
        self.with(py, |s| {
            let mut scheduler = Scheduler::new(s, &owner, ttl)?;
            let step = scheduler.step(now);
            let fence = scheduler.lease().map_or(0, |l| l.fence);
            // The role is given back whatever the step did, so the next tick or a worker takes
            // it at once; the step's own error comes first.
            let resigned = scheduler.resign();
            let step = step?;
            resigned?;
            Ok(match step {
                Step::Ticked(tick) => Some(Tick::new(tick, fence)),
                Step::Standby | Step::Refused => None,
            })
        })
    }

    /// The fence gate: `True` (and `fence` recorded) when `fence` is at least the highest one
    /// `resource` has admitted, `False` for an older one; a fence below 1 (no claim hands one
    /// out) raises `InvalidArgument` naming `fence`.
    fn admit(
        &self,
        py: Python<'_>,
        resource: &str,
        #[pyo3(from_py_with = args::fence)] fence: i64,
    ) -> PyResult<bool> {
        let resource = Resource::new(resource).py(py)?;
        self.with(py, |s| s.admit(resource, fence))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Store>()?;
    m.add_class::<NewJob>()?;
    crate::values::register(m)?;
    Ok(())
}
