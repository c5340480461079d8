//! `leasefence._native.Worker`: the Rust worker running Python callables.
//!
//! Each worker thread is a Rust thread: it claims, renews the lease on the heartbeat while the
//! handler runs (in Rust, without the GIL), and stores the outcome only through the fence.
//! The handler is called with the GIL held, on that thread, with a `Job`. The package's
//! `Worker.run` (python/leasefence/__init__.py) starts this one on a thread of its own and
//! waits for it in short GIL-free slices, so Python's signal handlers (SIGTERM, SIGINT) run.
//!
//! The core's `run()` returns after the shutdown deadline and a grace even when a handler has
//! not returned (its lease given back, its token cancelled); a thread still running Python code
//! then would take the GIL while the interpreter finalizes, and abort the process. So the
//! worker counts the handler calls in Python ([`InPython`]) and is finished only once none is
//! left: `wait` and `join` return, and `Worker.run()` with them, after every handler returned.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use leasefence::{
    AnyOptions, AnyStore, CancelToken, HandlerError, JobContext, JobId, Now, PgOptions, Resource,
    ShutdownHandle, SqliteOptions, Status, Store as _, Synchronous, Target, WorkerStats,
};
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMapping, PyString, PyType};

use crate::args::{self, type_error};
use crate::errors::{IntoPy, invalid, rename};
use crate::values::Lease;

/// The store a `Job` opens (once per worker, on first use) for `admit` and `check_lease`.
struct SideStore {
    options: AnyOptions,
    target: Target,
    store: Mutex<Option<AnyStore>>,
}

impl SideStore {
    fn with<T>(
        &self,
        call: impl FnOnce(&AnyStore) -> leasefence::Result<T>,
    ) -> leasefence::Result<T> {
        let mut guard = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            *guard = Some(self.options.open_target(&self.target)?);
        }
        call(guard.as_ref().expect("opened above"))
    }
}

/// The job a handler is called with: its lease, payload, attempt, and the lost-lease flag.
#[pyclass(frozen, module = "leasefence")]
pub(crate) struct Job {
    lease: Py<Lease>,
    inner: leasefence::Lease,
    token: CancelToken,
    side: Arc<SideStore>,
}

#[pymethods]
impl Job {
    /// The lease this attempt runs under (immutable).
    #[getter]
    fn lease(&self, py: Python<'_>) -> Py<Lease> {
        self.lease.clone_ref(py)
    }
    /// The job id.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.job_id
    }
    /// The fencing token of this attempt's lease.
    #[getter]
    fn fence(&self) -> i64 {
        self.inner.fence
    }
    /// This run's attempt number, from 1.
    #[getter]
    fn attempt(&self) -> u32 {
        self.inner.attempt
    }
    /// The job's queue.
    #[getter]
    fn queue(&self) -> &str {
        &self.inner.queue
    }
    /// The job's kind, or `None`.
    #[getter]
    fn kind(&self) -> Option<&str> {
        self.inner.kind.as_deref()
    }
    /// The payload (`bytes`), or `None`.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.payload.as_deref().map(|b| PyBytes::new(py, b))
    }
    /// The worker's owner name for this lease.
    #[getter]
    fn owner(&self) -> &str {
        &self.inner.owner
    }
    /// `True` once this attempt can no longer store anything: a renewal was refused (the lease
    /// expired or was taken over), the run-time limit was reached, an operator ended the job,
    /// `check_lease` found it gone, or shutdown stopped waiting and gave the lease back.
    #[getter]
    fn lost(&self) -> bool {
        self.token.is_cancelled()
    }
    /// Waits up to `timeout` seconds (GIL released) for the lease to be lost; `True` when it
    /// was. Use it in place of `time.sleep` so a long step stops early.
    fn wait(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = args::timeout)] timeout: f64,
    ) -> PyResult<bool> {
        if !(timeout.is_finite() && timeout >= 0.0) {
            return Err(invalid(
                py,
                "timeout",
                "must be a finite number of seconds >= 0",
            ));
        }
        // Longer than a Duration holds (1e30): as long as it takes.
        let timeout = Duration::try_from_secs_f64(timeout).unwrap_or(Duration::MAX);
        let token = self.token.clone();
        Ok(py.detach(move || token.wait_timeout(timeout)))
    }
    /// Raises `leasefence.LeaseLost` when the lease is lost; a handler calls it between steps.
    fn raise_if_lost(&self, py: Python<'_>) -> PyResult<()> {
        if self.token.is_cancelled() {
            return Err(lease_lost(py, &self.inner));
        }
        Ok(())
    }
    /// Asks the store whether this lease is still the current one (same owner and fence,
    /// unfinished, live at the system clock), right before a side effect outside the store.
    /// When it is gone the job is marked lost and `False` returned. Once the attempt is given
    /// up (`lost`: past the time limit, ended, or given back at shutdown) it is `False` without
    /// asking. This narrows the window, it cannot close it: pass `fence` to the outside system,
    /// or use `admit`.
    fn check_lease(&self, py: Python<'_>) -> PyResult<bool> {
        if self.token.is_cancelled() {
            return Ok(false);
        }
        let lease = &self.inner;
        let current = py
            .detach(|| {
                self.side.with(|s| {
                    let info = s.inspect(JobId::new(&lease.job_id)?, Now::system())?;
                    Ok(info.is_some_and(|job| {
                        job.status == Status::Leased
                            && job.state.fence == lease.fence
                            && job.state.owner.as_deref() == Some(lease.owner.as_str())
                    }))
                })
            })
            .py(py)?;
        if !current {
            self.token.cancel();
        }
        Ok(current)
    }
    /// The fence gate for a side effect: `True` (and this fence recorded) when this lease's
    /// fence is at least the highest `resource` has admitted; `False` for a stale one, and
    /// the effect must not be made. Once the attempt is given up (`lost`) it is `False` and
    /// nothing is admitted.
    fn admit(&self, py: Python<'_>, resource: &str) -> PyResult<bool> {
        let resource = Resource::new(resource).py(py)?;
        if self.token.is_cancelled() {
            return Ok(false);
        }
        let fence = self.inner.fence;
        py.detach(|| self.side.with(|s| s.admit(resource, fence)))
            .py(py)
    }
    fn __repr__(&self) -> String {
        format!(
            "Job(id={:?}, fence={}, attempt={}, queue={:?})",
            self.inner.job_id, self.inner.fence, self.inner.attempt, self.inner.queue
        )
    }
}

fn lease_lost(py: Python<'_>, lease: &leasefence::Lease) -> PyErr {
    let message = format!(
        "lease lost: {} no longer holds {} under fence {}",
        lease.owner, lease.job_id, lease.fence
    );
    match py
        .import("leasefence.errors")
        .and_then(|m| m.getattr("LeaseLost"))
        .and_then(|class| class.call1((message.clone(),)))
    {
        Ok(instance) => PyErr::from_value(instance),
        Err(err) => err,
    }
}

/// What a handler returned, as the result to store: `str`, `bytes` in UTF-8, or `None` (an
/// empty result).
fn result_of(value: &Bound<'_, PyAny>) -> Result<String, HandlerError> {
    if value.is_none() {
        return Ok(String::new());
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(text.to_cow().map_err(|e| e.to_string())?.into_owned());
    }
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(std::str::from_utf8(bytes.as_bytes())
            .map_err(|_| "the handler returned bytes that are not UTF-8; results are text")?
            .to_string());
    }
    let type_name = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    Err(format!(
        "the handler returned an object of type {type_name}; return a str (the result), UTF-8 \
         bytes or None"
    )
    .into())
}

/// The handler calls running Python code, and whether the worker still lets one start.
#[derive(Default)]
struct InPython {
    /// (calls in Python now, closed: no call may start any more)
    state: Mutex<(usize, bool)>,
    /// Notified when the count falls to zero.
    left: Condvar,
}

impl InPython {
    fn lock(&self) -> MutexGuard<'_, (usize, bool)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a call in: `None` once closed, else a guard that counts it out when dropped
    /// (after the call has released the GIL).
    fn enter(&self) -> Option<Entered<'_>> {
        let mut state = self.lock();
        if state.1 {
            return None;
        }
        state.0 += 1;
        Some(Entered(self))
    }

    /// Waits (on a Rust thread, without the GIL) until no call is in Python, and closes: none
    /// starts afterwards.
    fn close(&self) {
        let mut state = self.lock();
        while state.0 > 0 {
            state = self
                .left
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.1 = true;
    }
}

/// One call counted in [`InPython`]; counted out on drop.
struct Entered<'a>(&'a InPython);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.0 -= 1;
        if state.0 == 0 {
            self.0.left.notify_all();
        }
    }
}

/// What every handler call of one worker shares.
struct Calls {
    /// The store of `Job.check_lease` and `Job.admit`.
    side: Arc<SideStore>,
    /// The calls in Python; the worker is finished only once it is closed.
    in_python: InPython,
    /// The first `BaseException` that is not an `Exception` (`SystemExit`,
    /// `KeyboardInterrupt`) a handler raised: `join` raises it once the worker stopped.
    interrupt: Mutex<Option<PyErr>>,
    /// Stops the worker from a handler; set as soon as the worker is built.
    stop: OnceLock<ShutdownHandle>,
}

/// What a call returned: the attempt's outcome, or a request to stop the process.
enum Called {
    Outcome(Result<String, HandlerError>),
    /// `SystemExit`, `KeyboardInterrupt` or another `BaseException` that is no `Exception`,
    /// described as a failure would be.
    Interrupted(String),
}

/// `Type: message` (or `Type`) for an exception.
fn describe(py: Python<'_>, err: &PyErr) -> String {
    let type_name = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let text = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if text.is_empty() {
        type_name
    } else {
        format!("{type_name}: {text}")
    }
}

/// Logs a handler's exception with its traceback to the logger `leasefence.worker` (level
/// ERROR), as Python job runners do: the stored failure keeps `Type: message` only. A logging
/// setup that fails is ignored — the failure is stored either way.
fn log_failure(py: Python<'_>, lease: &leasefence::Lease, err: &PyErr) {
    let logged = (|| -> PyResult<()> {
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("leasefence.worker",))?;
        let kwargs = pyo3::types::PyDict::new(py);
        // The traceback travels beside the value in a fetched error: given as the triple.
        kwargs.set_item(
            "exc_info",
            (err.get_type(py), err.value(py), err.traceback(py)),
        )?;
        logger.call_method(
            "error",
            (
                "handler raised on job %s (fence %s); the attempt fails",
                lease.job_id.as_str(),
                lease.fence,
            ),
            Some(&kwargs),
        )?;
        Ok(())
    })();
    drop(logged);
}

/// Logs a handler's return value that cannot be stored as a result, on `leasefence.worker`
/// as a raised exception is: the attempt fails with `why` as its error.
fn log_unstorable(py: Python<'_>, lease: &leasefence::Lease, why: &str) {
    let logged = (|| -> PyResult<()> {
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("leasefence.worker",))?;
        logger.call_method1(
            "error",
            (
                "handler of job %s (fence %s) returned what cannot be stored: %s; the attempt fails",
                lease.job_id.as_str(),
                lease.fence,
                why,
            ),
        )?;
        Ok(())
    })();
    drop(logged);
}

/// Calls the Python `handler` for one job; an exception becomes the stored failure
/// (`Type: message`).
///
/// A `BaseException` that is not an `Exception` — `SystemExit` (`sys.exit()`),
/// `KeyboardInterrupt` — asks for the process to stop; it says nothing about the job. The
/// worker then shuts down (gracefully), the attempt is given back (lease released, fence kept,
/// attempt refunded: `JobContext::release`), and `join` raises the exception once the worker
/// has stopped. Should the lease no longer be this attempt's to give back (lost, past its
/// time limit, released at the deadline), the attempt ends as the worker decides for it.
fn call_handler(
    handler: &Py<PyAny>,
    calls: &Calls,
    ctx: &JobContext<'_, AnyStore>,
) -> Result<String, HandlerError> {
    let Some(entered) = calls.in_python.enter() else {
        // The worker has stopped and no Python may start now (the interpreter may be
        // finalizing): the attempt is given back untouched.
        let _ = ctx.release();
        return Err("the worker stopped before the handler could run".into());
    };
    let called = Python::attach(|py| {
        let lease = match Py::new(
            py,
            Lease {
                inner: ctx.lease().clone(),
            },
        ) {
            Ok(lease) => lease,
            Err(e) => return Called::Outcome(Err(e.to_string().into())),
        };
        let job = Job {
            lease,
            inner: ctx.lease().clone(),
            token: ctx.token().clone(),
            side: calls.side.clone(),
        };
        match handler.call1(py, (job,)) {
            Ok(value) => {
                let outcome = result_of(value.bind(py));
                if let Err(why) = &outcome {
                    log_unstorable(py, ctx.lease(), &why.to_string());
                }
                Called::Outcome(outcome)
            }
            Err(err) if !err.is_instance_of::<PyException>(py) => {
                let text = describe(py, &err);
                // No new claims from now on, before the lease is given back below.
                if let Some(stop) = calls.stop.get() {
                    stop.shutdown();
                }
                let mut first = calls
                    .interrupt
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                first.get_or_insert(err);
                Called::Interrupted(text)
            }
            Err(err) => {
                log_failure(py, ctx.lease(), &err);
                Called::Outcome(Err(describe(py, &err).into()))
            }
        }
    });
    // Out of Python (the GIL released): counted out before the store is written.
    drop(entered);
    match called {
        Called::Outcome(outcome) => outcome,
        // Given back (`Ok(true)`): what is returned is not written. Otherwise the attempt
        // was no longer this handler's to give back, and ends as the worker decides.
        Called::Interrupted(text) => {
            let _ = ctx.release();
            Err(text.into())
        }
    }
}

/// A worker's counters.
#[pyclass(frozen, module = "leasefence", name = "WorkerStats", get_all)]
pub(crate) struct Stats {
    /// Leases taken.
    claimed: u64,
    /// Successful heartbeat renewals.
    renewed: u64,
    /// Jobs whose result was stored.
    completed: u64,
    /// Failed attempts scheduled for a retry.
    retried: u64,
    /// Failed attempts that were the job's last.
    dead: u64,
    /// Leases lost while the handler ran (a renewal was refused).
    lost: u64,
    /// Completions and failures the store refused: the stale writes fencing is for.
    stale_refused: u64,
    /// Leases given back at shutdown.
    released: u64,
    /// Jobs an operator ended while this worker held them.
    cancelled: u64,
    /// Handlers stopped by the run-time limit.
    timed_out: u64,
    /// Store errors met on the way (the worker went on).
    errors: u64,
}

impl From<WorkerStats> for Stats {
    fn from(s: WorkerStats) -> Self {
        Stats {
            claimed: s.claimed,
            renewed: s.renewed,
            completed: s.completed,
            retried: s.retried,
            dead: s.dead,
            lost: s.lost,
            stale_refused: s.stale_refused,
            released: s.released,
            cancelled: s.cancelled,
            timed_out: s.timed_out,
            errors: s.errors,
        }
    }
}

#[pymethods]
impl Stats {
    fn __repr__(&self) -> String {
        format!(
            "WorkerStats(claimed={}, renewed={}, completed={}, retried={}, dead={}, lost={}, \
             stale_refused={}, released={}, cancelled={}, timed_out={}, errors={})",
            self.claimed,
            self.renewed,
            self.completed,
            self.retried,
            self.dead,
            self.lost,
            self.stale_refused,
            self.released,
            self.cancelled,
            self.timed_out,
            self.errors
        )
    }
}

enum State {
    Built(Box<leasefence::Worker<AnyStore>>),
    Running(JoinHandle<leasefence::Result<WorkerStats>>),
    Finished,
}

/// The `(key, value)` pairs of the argument `name`: any mapping (`collections.abc.Mapping`, as
/// the stubs say), `None` passed through; anything else is a `TypeError` naming it.
#[allow(clippy::type_complexity)]
fn items_of<'py>(
    value: Option<&Bound<'py, PyAny>>,
    name: &'static str,
) -> PyResult<Option<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let mapping = value.cast::<PyMapping>().map_err(|_| {
        let kind = value
            .get_type()
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        PyTypeError::new_err(format!(
            "invalid argument `{name}`: must be a mapping (a dict), not {kind}"
        ))
    })?;
    let items = mapping.items()?;
    items
        .iter()
        .map(|pair| pair.extract())
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
}

/// Refuses a handler whose call returns before its body runs: an async function (a
/// coroutine), a generator function or an async generator function — or an object whose
/// `__call__` is one. Called on a worker thread, it would hand back an object that is no
/// result, and every job would fail with it; a `TypeError` naming `name` says so up front.
fn refuse_lazy(handler: &Bound<'_, PyAny>, name: &'static str) -> PyResult<()> {
    let py = handler.py();
    let inspect = py.import("inspect")?;
    let mut candidates = vec![handler.clone()];
    // An instance with `__call__` (not a function, not a class, whose call makes an instance).
    if !inspect.call_method1("isroutine", (handler,))?.is_truthy()?
        && !handler.is_instance_of::<PyType>()
        && let Ok(call) = handler.getattr("__call__")
    {
        candidates.push(call);
    }
    for candidate in &candidates {
        for (test, what, instead) in [
            (
                "iscoroutinefunction",
                "an async function",
                "a plain function (run the coroutine inside it, e.g. with asyncio.run)",
            ),
            (
                "isasyncgenfunction",
                "an async generator function",
                "a plain function that returns the result",
            ),
            (
                "isgeneratorfunction",
                "a generator function",
                "a plain function that returns the result",
            ),
        ] {
            if inspect.call_method1(test, (candidate,))?.is_truthy()? {
                return Err(PyTypeError::new_err(format!(
                    "invalid argument `{name}`: a handler must be {instead}, not {what}: its \
                     body would never run, and every job would fail"
                )));
            }
        }
    }
    Ok(())
}

/// The native worker; `leasefence.Worker` wraps it.
#[pyclass(frozen, module = "leasefence._native", name = "Worker")]
pub(crate) struct NativeWorker {
    state: Mutex<State>,
    handle: ShutdownHandle,
    /// Cancelled once the core's run returned and no handler is left in Python.
    finished: CancelToken,
    calls: Arc<Calls>,
}

#[pymethods]
impl NativeWorker {
    #[new]
    #[pyo3(signature = (db, handler=None, *, kinds=None, concurrency=1, queues=None, ttl=30.0,
                        timeout=None, drain=false, poll_interval=0.5, owner_prefix=None,
                        shutdown_deadline=30.0, batch=None, synchronous="full", schema=None,
                        scheduler=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        db: &Bound<'_, PyAny>,
        handler: Option<Py<PyAny>>,
        kinds: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = args::concurrency)] concurrency: usize,
        queues: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = args::ttl)] ttl: f64,
        #[pyo3(from_py_with = args::timeout_opt)] timeout: Option<f64>,
        drain: bool,
        #[pyo3(from_py_with = args::poll_interval)] poll_interval: f64,
        owner_prefix: Option<String>,
        #[pyo3(from_py_with = args::shutdown_deadline)] shutdown_deadline: f64,
        #[pyo3(from_py_with = args::batch_opt)] batch: Option<usize>,
        synchronous: &str,
        schema: Option<String>,
        scheduler: bool,
    ) -> PyResult<Self> {
        // Read exactly as `Store` reads it (an os.PathLike is an SQLite file, never parsed as a
        // connection string), and checked here, so that a bad one fails at construction, not in
        // `run()`: the same TypeError for a type that is no path, InvalidArgument for an empty one.
        let target = crate::store::target_of(py, db)?;
        let sync = match synchronous {
            "full" | "FULL" => Synchronous::Full,
            "normal" | "NORMAL" => Synchronous::Normal,
            _ => {
                return Err(invalid(
                    py,
                    "synchronous",
                    "must be \"full\" (durable, the default) or \"normal\"",
                ));
            }
        };
        let seconds = |name: &'static str, value: f64| -> PyResult<Duration> {
            match Duration::try_from_secs_f64(value) {
                Ok(duration) if value.is_finite() && value > 0.0 => Ok(duration),
                _ => Err(invalid(
                    py,
                    name,
                    "must be a finite number of seconds > 0 (and below about 1.8e19)",
                )),
            }
        };
        let poll = seconds("poll_interval", poll_interval)?;
        let deadline = seconds("shutdown_deadline", shutdown_deadline)?;
        let kinds = items_of(kinds, "kinds")?;
        let queues = items_of(queues, "queues")?;
        // `None` is every queue; an empty mapping names none, and would be read as every one.
        if queues.as_ref().is_some_and(Vec::is_empty) {
            return Err(invalid(
                py,
                "queues",
                "must name at least one queue (None serves every queue)",
            ));
        }
        // With named queues each has its own threads and `concurrency` is not used: say so
        // rather than run on fewer threads than asked (1, the default, is no request).
        if queues.is_some() && concurrency != 1 {
            return Err(invalid(
                py,
                "concurrency",
                "is not used with queues=: give each queue its thread count there \
                 (queues={name: threads})",
            ));
        }
        if handler.is_none() && kinds.as_ref().is_none_or(Vec::is_empty) {
            return Err(invalid(
                py,
                "handler",
                "give a handler, or kinds={name: handler}",
            ));
        }
        if let Some(h) = handler.as_ref().filter(|h| !h.bind(py).is_callable()) {
            return Err(type_error(
                h.bind(py),
                "handler",
                "callable (it is called with a Job)",
            ));
        }
        if kinds
            .as_ref()
            .is_some_and(|k| k.iter().any(|(_, h)| !h.is_callable()))
        {
            return Err(invalid(
                py,
                "kinds",
                "maps kind names to callables (each is called with a Job)",
            ));
        }
        if let Some(handler) = &handler {
            refuse_lazy(handler.bind(py), "handler")?;
        }
        for (_, handler) in kinds.iter().flatten() {
            refuse_lazy(handler, "kinds")?;
        }
        // Workers judge leases by the database's clock on PostgreSQL, one connection a thread.
        let mut pg = PgOptions::new();
        if let Some(schema) = schema {
            pg = pg.schema(schema);
        }
        // Refused here, as `Store` refuses them, rather than when `run()` opens the stores.
        if let Target::Postgres(url) = &target {
            pg.check(url)
                .map_err(|e| rename(e, &[("url", "db")]))
                .py(py)?;
        }
        let options = AnyOptions::new()
            .sqlite(SqliteOptions::new().synchronous(sync))
            .postgres(pg.clone().database_clock(true).pool_size(1));
        let side = Arc::new(SideStore {
            options: AnyOptions::new()
                .sqlite(SqliteOptions::new().synchronous(sync))
                .postgres(pg.pool_size(1)),
            target: target.clone(),
            store: Mutex::new(None),
        });
        let calls = Arc::new(Calls {
            side,
            in_python: InPython::default(),
            interrupt: Mutex::new(None),
            stop: OnceLock::new(),
        });
        let mut builder = leasefence::Worker::builder(move || options.open_target(&target))
            .concurrency(concurrency)
            .ttl(ttl)
            .drain(drain)
            .poll_interval(poll)
            .shutdown_deadline(deadline)
            .scheduler(scheduler);
        if let Some(t) = timeout {
            builder = builder.timeout(t);
        }
        if let Some(prefix) = owner_prefix {
            builder = builder.owner_prefix(prefix);
        }
        if let Some(n) = batch {
            builder = builder.batch(n);
        }
        if let Some(queues) = queues {
            for (name, threads) in queues {
                let name: String = name.extract().map_err(|_| {
                    invalid(py, "queues", "maps queue names (str) to thread counts")
                })?;
                let threads = args::queue_threads(&threads)?;
                builder = builder.queue(name, threads);
            }
        }
        if let Some(kinds) = kinds {
            for (name, callable) in kinds {
                let name: String = name
                    .extract()
                    .map_err(|_| invalid(py, "kinds", "maps kind names (str) to handlers"))?;
                let callable = callable.unbind();
                let calls = calls.clone();
                builder = builder.kind(name, move |ctx| call_handler(&callable, &calls, ctx));
            }
        }
        let handler_calls = calls.clone();
        let worker = py
            .detach(|| match handler {
                Some(handler) => {
                    builder.build(move |ctx| call_handler(&handler, &handler_calls, ctx))
                }
                None => builder.build_kinds(),
            })
            .map_err(|e| {
                let names = [
                    ("owner", "owner_prefix"),
                    ("queue", "queues"),
                    ("kind", "kinds"),
                ];
                rename(e, &names)
            })
            .py(py)?;
        let handle = worker.shutdown_handle();
        let _ = calls.stop.set(handle.clone());
        Ok(NativeWorker {
            handle,
            state: Mutex::new(State::Built(Box::new(worker))),
            finished: CancelToken::new(),
            calls,
        })
    }

    /// Starts the worker's threads; `wait` and `join` follow. A worker runs once.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let worker = match std::mem::replace(&mut *state, State::Finished) {
            State::Built(worker) => worker,
            other => {
                *state = other;
                return Err(invalid(py, "worker", "was already run; make a new Worker"));
            }
        };
        let finished = self.finished.clone();
        let calls = self.calls.clone();
        let thread = std::thread::Builder::new()
            .name("leasefence-worker".into())
            .spawn(move || {
                /// Marks the worker finished when this thread ends, however `run` ended — a
                /// panic included, or `wait` and `run()` would wait for it forever.
                struct Finish(CancelToken);
                impl Drop for Finish {
                    fn drop(&mut self) {
                        self.0.cancel();
                    }
                }
                let _finish = Finish(finished);
                let stats = worker.run();
                // The core leaves a handler that outlived the shutdown deadline running; the
                // worker is finished only once it has left Python (this thread holds no GIL).
                calls.in_python.close();
                // The connection `Job.admit` and `Job.check_lease` opened: closed with the
                // worker, not when the `Worker` object is collected (a kept `Job` reopens it).
                drop(
                    calls
                        .side
                        .store
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take(),
                );
                stats
            })
            .map_err(|e| invalid(py, "worker", &format!("cannot start a thread: {e}")))?;
        *state = State::Running(thread);
        Ok(())
    }

    /// Waits up to `timeout` seconds (GIL released) for the worker to stop; whether it has.
    fn wait(&self, py: Python<'_>, #[pyo3(from_py_with = args::timeout)] timeout: f64) -> bool {
        let finished = self.finished.clone();
        // Longer than a Duration holds (1e30, infinity): as long as it takes.
        let timeout = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        py.detach(move || finished.wait_timeout(timeout))
    }

    /// Waits (GIL released) for the worker to stop and every handler to return, and returns its
    /// counters; raises its error, or the `SystemExit`/`KeyboardInterrupt` a handler raised.
    fn join(&self, py: Python<'_>) -> PyResult<Stats> {
        let state = std::mem::replace(
            &mut *self.state.lock().unwrap_or_else(PoisonError::into_inner),
            State::Finished,
        );
        let State::Running(thread) = state else {
            return Err(invalid(py, "worker", "is not running (call start first)"));
        };
        let calls = self.calls.clone();
        let stats = py.detach(move || {
            let stats = thread.join();
            // Already closed by the thread, unless it panicked: no handler is left in Python.
            calls.in_python.close();
            stats
        });
        // The process was asked to stop from a handler: that comes first.
        let interrupt = self
            .calls
            .interrupt
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(err) = interrupt {
            return Err(err);
        }
        match stats {
            Ok(stats) => stats.py(py).map(Stats::from),
            Err(_) => Err(invalid(py, "worker", "its thread panicked")),
        }
    }

    /// Graceful stop: no new claims; running handlers may finish until the shutdown deadline,
    /// then their leases are given back.
    fn shutdown(&self) {
        self.handle.shutdown();
    }

    /// Immediate stop: running handlers' leases are given back now (their tokens cancelled).
    fn shutdown_now(&self) {
        self.handle.shutdown_now();
    }

    /// At interpreter exit (an `atexit` hook of the package): stops at once, waits (GIL
    /// released) until no handler is in Python and lets none start afterwards, then for the
    /// worker to give its leases back. Python does not join a daemon thread running `run()`;
    /// without this its Rust threads would go on calling handlers while the interpreter
    /// finalizes, and crash the process.
    fn stop_at_exit(&self, py: Python<'_>) {
        self.handle.shutdown_now();
        let (calls, finished) = (self.calls.clone(), self.finished.clone());
        py.detach(move || {
            calls.in_python.close();
            finished.wait_timeout(Duration::MAX);
        });
    }

    /// Whether a shutdown was asked for.
    #[getter]
    fn shutting_down(&self) -> bool {
        self.handle.is_shutdown()
    }

    /// The counters so far.
    fn stats(&self) -> Stats {
        Stats::from(self.handle.stats())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeWorker>()?;
    m.add_class::<Job>()?;
    m.add_class::<Stats>()?;
    Ok(())
}
