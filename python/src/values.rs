//! What the package hands back: the seed's `dict`, and small immutable objects for leases,
//! jobs and counts. Each is a snapshot; nothing here reads the database again.

use pyo3::prelude::*;

use crate::errors::IntoPy;
use pyo3::types::{PyBytes, PyDict};

/// The seed's row `dict`, valued as Python's `sqlite3` module returns the row: `until` a
/// `float`, `fence` an `int`, `done` `0` or `1`, `owner` and `result` `str` or `None`.
pub(crate) fn state_dict<'py>(
    py: Python<'py>,
    row: &leasefence::JobState,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("id", &row.id)?;
    dict.set_item("owner", row.owner.as_deref())?;
    dict.set_item("until", row.until)?;
    dict.set_item("fence", row.fence)?;
    dict.set_item("result", row.result.as_deref())?;
    dict.set_item("done", i64::from(row.done))?;
    Ok(dict)
}

/// `'text'` or `None`, as Python's `repr` shows an optional string.
pub(crate) fn repr_opt(value: Option<&str>) -> String {
    value.map_or_else(|| "None".to_string(), |v| format!("{v:?}"))
}

fn bytes_or_none<'py>(py: Python<'py>, bytes: Option<&[u8]>) -> Option<Bound<'py, PyBytes>> {
    bytes.map(|b| PyBytes::new(py, b))
}

/// A lease: what a claim handed out. Immutable; pass it back to `Store.renew`, `complete`,
/// `fail` and `release`, which succeed only while it is the job's current lease.
#[pyclass(frozen, module = "leasefence", eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct Lease {
    pub(crate) inner: leasefence::Lease,
}

/// A `Lease`'s fields, in `Lease(...)`'s order (what `__reduce__` hands to pickle).
type LeaseFields = (
    String,
    String,
    i64,
    f64,
    String,
    Option<String>,
    Option<Vec<u8>>,
    i64,
    u32,
    Option<String>,
    u32,
);

#[pymethods]
impl Lease {
    /// A lease from its fields, as `pickle` and `copy` rebuild one (a claim is what hands
    /// leases out; one made up here is only as good as its owner and fence are current). Bad
    /// fields are refused as anywhere else: `InvalidArgument` naming them.
    #[new]
    #[pyo3(signature = (job_id, owner, fence, until, queue="default".to_owned(), kind=None,
                        payload=None, priority=0, max_attempts=0, last_error=None, attempt=1))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        job_id: String,
        owner: String,
        #[pyo3(from_py_with = crate::args::fence)] fence: i64,
        #[pyo3(from_py_with = crate::args::until)] until: f64,
        queue: String,
        kind: Option<String>,
        #[pyo3(from_py_with = crate::args::payload)] payload: Option<Vec<u8>>,
        #[pyo3(from_py_with = crate::args::priority)] priority: i64,
        #[pyo3(from_py_with = crate::args::max_attempts)] max_attempts: u32,
        last_error: Option<String>,
        #[pyo3(from_py_with = crate::args::attempt)] attempt: u32,
    ) -> PyResult<Self> {
        let check = || -> leasefence::Result<()> {
            leasefence::JobId::new(&job_id)?;
            leasefence::Owner::new(&owner)?;
            leasefence::Queue::new(queue.clone())?;
            if let Some(kind) = &kind {
                // Checked exactly as a job's kind is when it is enqueued.
                leasefence::NewJob::new(job_id.clone())?.kind(kind.clone())?;
            }
            if fence < 1 {
                return Err(leasefence::Error::InvalidArgument {
                    argument: "fence",
                    reason: format!(
                        "must be a fence handed out by a claim (1 or more), got {fence}"
                    ),
                });
            }
            if attempt == 0 {
                return Err(leasefence::Error::InvalidArgument {
                    argument: "attempt",
                    reason: "must be an attempt number from 1 (the first run is 1), got 0".into(),
                });
            }
            if !until.is_finite() {
                return Err(leasefence::Error::InvalidArgument {
                    argument: "until",
                    reason: format!("must be a finite number of seconds, got {until}"),
                });
            }
            Ok(())
        };
        check().py(py)?;
        Ok(Lease {
            inner: leasefence::Lease {
                job_id,
                queue,
                kind,
                owner,
                fence,
                until,
                payload,
                priority,
                max_attempts,
                last_error,
                attempt,
            },
        })
    }

    /// For `pickle` and `copy`: the class and its fields (a lease may go to another process,
    /// e.g. through `multiprocessing`, and be used there).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, pyo3::types::PyType>, LeaseFields) {
        let l = &slf.get().inner;
        (
            slf.get_type(),
            (
                l.job_id.clone(),
                l.owner.clone(),
                l.fence,
                l.until,
                l.queue.clone(),
                l.kind.clone(),
                l.payload.clone(),
                l.priority,
                l.max_attempts,
                l.last_error.clone(),
                l.attempt,
            ),
        )
    }

    /// The job id.
    #[getter]
    fn job_id(&self) -> &str {
        &self.inner.job_id
    }
    /// The owner that holds the lease.
    #[getter]
    fn owner(&self) -> &str {
        &self.inner.owner
    }
    /// The fencing token of this lease: one more than the job's previous one.
    #[getter]
    fn fence(&self) -> i64 {
        self.inner.fence
    }
    /// The lease is live while `until > now`.
    #[getter]
    fn until(&self) -> f64 {
        self.inner.until
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
    /// The job's payload (`bytes`), or `None`.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        bytes_or_none(py, self.inner.payload.as_deref())
    }
    /// The job's priority (higher runs first).
    #[getter]
    fn priority(&self) -> i64 {
        self.inner.priority
    }
    /// This run's attempt number, from 1.
    #[getter]
    fn attempt(&self) -> u32 {
        self.inner.attempt
    }
    /// The job's attempts budget (`0`: unlimited).
    #[getter]
    fn max_attempts(&self) -> u32 {
        self.inner.max_attempts
    }
    /// The error the previous failed attempt recorded, or `None`.
    #[getter]
    fn last_error(&self) -> Option<&str> {
        self.inner.last_error.as_deref()
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.inner.job_id, &self.inner.owner, self.inner.fence).hash(&mut h);
        // + 0.0: -0.0 becomes 0.0, which it equals (`eq`), so both hash alike.
        (self.inner.until + 0.0).to_bits().hash(&mut h);
        h.finish()
    }
    fn __repr__(&self) -> String {
        format!(
            "Lease(job_id={:?}, owner={:?}, fence={}, until={}, queue={:?}, attempt={})",
            self.inner.job_id,
            self.inner.owner,
            self.inner.fence,
            self.inner.until,
            self.inner.queue,
            self.inner.attempt
        )
    }
}

/// One job as `Store.list` and `Store.inspect` show it, with its status at the clock reading
/// of the call.
#[pyclass(frozen, module = "leasefence", get_all)]
pub(crate) struct JobInfo {
    /// The job id.
    id: String,
    /// `ready`, `scheduled`, `leased`, `expired`, `retrying`, `done`, `dead` or `cancelled`.
    status: &'static str,
    /// The current or last owner, or `None`.
    owner: Option<String>,
    /// The lease's end (`0` when never claimed or released).
    until: f64,
    /// The job's fence: the number of claims so far.
    fence: i64,
    /// The stored result, or `None`.
    result: Option<String>,
    /// Whether the job is finished (completed, dead or cancelled).
    done: bool,
    /// The job's queue.
    queue: String,
    /// The job's kind, or `None`.
    kind: Option<String>,
    /// The job's unique key, or `None`.
    unique_key: Option<String>,
    /// The payload, or `None`.
    payload: Option<Py<PyBytes>>,
    /// The priority.
    priority: i64,
    /// Not claimable before this clock reading.
    not_before: f64,
    /// The attempts budget (`0`: unlimited).
    max_attempts: u32,
    /// Attempts spent.
    attempts: u32,
    /// The last recorded error, or `None`.
    error: Option<String>,
    /// When it finished, or `None`.
    finished_at: Option<f64>,
    /// `completed`, `dead` or `cancelled` once finished, else `None`.
    outcome: Option<String>,
    /// When it was enqueued, or `None` (rows made by the seed's `enqueue` on older files).
    enqueued_at: Option<f64>,
}

impl JobInfo {
    pub(crate) fn new(py: Python<'_>, job: leasefence::JobInfo) -> Self {
        JobInfo {
            status: job.status.as_str(),
            payload: job.payload.as_deref().map(|b| PyBytes::new(py, b).unbind()),
            id: job.state.id,
            owner: job.state.owner,
            until: job.state.until,
            fence: job.state.fence,
            result: job.state.result,
            done: job.state.done,
            queue: job.queue,
            kind: job.kind,
            unique_key: job.unique_key,
            priority: job.priority,
            not_before: job.not_before,
            max_attempts: job.max_attempts,
            attempts: job.attempts,
            error: job.error,
            finished_at: job.finished_at,
            outcome: job.outcome,
            enqueued_at: job.enqueued_at,
        }
    }
}

#[pymethods]
impl JobInfo {
    fn __repr__(&self) -> String {
        format!(
            "JobInfo(id={:?}, status={:?}, queue={:?}, owner={}, fence={}, attempts={})",
            self.id,
            self.status,
            self.queue,
            repr_opt(self.owner.as_deref()),
            self.fence,
            self.attempts
        )
    }
}

/// Jobs by status.
#[pyclass(frozen, module = "leasefence", get_all, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Stats {
    /// Claimable now.
    ready: u64,
    /// Waiting for their not-before time.
    scheduled: u64,
    /// Under a live lease.
    leased: u64,
    /// Lease expired, not yet claimed again.
    expired: u64,
    /// Failed, waiting for the retry time.
    retrying: u64,
    /// Completed.
    done: u64,
    /// Out of attempts.
    dead: u64,
    /// Cancelled by an operator.
    cancelled: u64,
    /// All jobs.
    total: u64,
}

impl From<&leasefence::Stats> for Stats {
    fn from(s: &leasefence::Stats) -> Self {
        Stats {
            ready: s.ready,
            scheduled: s.scheduled,
            leased: s.leased,
            expired: s.expired,
            retrying: s.retrying,
            done: s.done,
            dead: s.dead,
            cancelled: s.cancelled,
            total: s.total(),
        }
    }
}

#[pymethods]
impl Stats {
    fn __repr__(&self) -> String {
        format!(
            "Stats(ready={}, scheduled={}, leased={}, expired={}, retrying={}, done={}, dead={}, \
             cancelled={})",
            self.ready,
            self.scheduled,
            self.leased,
            self.expired,
            self.retrying,
            self.done,
            self.dead,
            self.cancelled
        )
    }
}

/// One queue: its name, whether it is paused, and its jobs by status.
#[pyclass(frozen, module = "leasefence", get_all)]
pub(crate) struct QueueInfo {
    /// The queue's name.
    name: String,
    /// Whether `claim_next` skips it.
    paused: bool,
    /// Its jobs by status.
    stats: Stats,
}

impl From<&leasefence::QueueInfo> for QueueInfo {
    fn from(q: &leasefence::QueueInfo) -> Self {
        QueueInfo {
            name: q.name.clone(),
            paused: q.paused,
            stats: Stats::from(&q.stats),
        }
    }
}

#[pymethods]
impl QueueInfo {
    fn __repr__(&self) -> String {
        format!(
            "QueueInfo(name={:?}, paused={}, stats={})",
            self.name,
            if self.paused { "True" } else { "False" },
            self.stats.__repr__()
        )
    }
}

/// What a recorded failure led to: a retry at `retry_at`, or a dead job.
#[pyclass(frozen, module = "leasefence", get_all, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct Failed {
    /// `True` when that was the job's last attempt.
    dead: bool,
    /// When the job is claimable again, or `None` when it is dead.
    retry_at: Option<f64>,
}

impl From<leasefence::Failed> for Failed {
    fn from(f: leasefence::Failed) -> Self {
        match f {
            leasefence::Failed::Retrying { at } => Failed {
                dead: false,
                retry_at: Some(at),
            },
            _ => Failed {
                dead: true,
                retry_at: None,
            },
        }
    }
}

#[pymethods]
impl Failed {
    fn __repr__(&self) -> String {
        match self.retry_at {
            Some(at) => format!("Failed(dead=False, retry_at={at})"),
            None => "Failed(dead=True, retry_at=None)".to_string(),
        }
    }
}

/// One claim of a job in its attempt ledger (`Store.history`): the fence it handed out and
/// how it ended. Times are Unix seconds by the store's own clock (informational).
#[pyclass(frozen, module = "leasefence", get_all, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct Attempt {
    /// The fence this claim handed out.
    fence: i64,
    /// Who claimed it.
    owner: String,
    /// When it was claimed (`None` for a lease already held when the ledger was added).
    claimed_at: Option<f64>,
    /// When it ended (`None` while open).
    ended_at: Option<f64>,
    /// `completed`, `failed`, `timed out`, `released`, `lost` or `cancelled`; `None` while open.
    outcome: Option<&'static str>,
    /// The error its holder recorded (failed and timed-out attempts), or `None`.
    error: Option<String>,
}

impl From<&leasefence::Attempt> for Attempt {
    fn from(a: &leasefence::Attempt) -> Self {
        Attempt {
            fence: a.fence,
            owner: a.owner.clone(),
            claimed_at: a.claimed_at,
            ended_at: a.ended_at,
            outcome: a.outcome.map(leasefence::AttemptOutcome::as_str),
            error: a.error.clone(),
        }
    }
}

#[pymethods]
impl Attempt {
    fn __repr__(&self) -> String {
        format!(
            "Attempt(fence={}, owner={:?}, outcome={})",
            self.fence,
            self.owner,
            repr_opt(self.outcome)
        )
    }
}

/// The refused late writes of one operation under one fence (`Store.history`).
#[pyclass(frozen, module = "leasefence", get_all, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct Refusal {
    /// The fence the writer held.
    fence: i64,
    /// The refused write: `renew`, `complete`, `fail`, `release` or `schedule`.
    op: &'static str,
    /// How many times.
    count: u64,
    /// When the last one came (Unix seconds, the store's clock).
    last_at: f64,
}

impl From<&leasefence::Refusal> for Refusal {
    fn from(r: &leasefence::Refusal) -> Self {
        Refusal {
            fence: r.fence,
            op: r.op.as_str(),
            count: r.count,
            last_at: r.last_at,
        }
    }
}

#[pymethods]
impl Refusal {
    fn __repr__(&self) -> String {
        format!(
            "Refusal(fence={}, op={:?}, count={})",
            self.fence, self.op, self.count
        )
    }
}

/// A job's attempt ledger (`Store.history`): every claim, oldest first, and the late writes
/// its fence refused, by fence then operation.
#[pyclass(frozen, module = "leasefence", get_all, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct History {
    /// Every claim of the job, lowest fence first.
    attempts: Vec<Attempt>,
    /// The refused writes, by fence then operation.
    refusals: Vec<Refusal>,
}

impl From<&leasefence::History> for History {
    fn from(h: &leasefence::History) -> Self {
        History {
            attempts: h.attempts.iter().map(Attempt::from).collect(),
            refusals: h.refusals.iter().map(Refusal::from).collect(),
        }
    }
}

#[pymethods]
impl History {
    /// How many writes were refused in all, or only those under `fence`.
    #[pyo3(signature = (fence=None))]
    fn refused(&self, fence: Option<i64>) -> u64 {
        self.refusals
            .iter()
            .filter(|r| fence.is_none_or(|f| r.fence == f))
            .map(|r| r.count)
            .sum()
    }

    fn __repr__(&self) -> String {
        format!(
            "History(attempts={}, refused={})",
            self.attempts.len(),
            self.refused(None)
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Lease>()?;
    m.add_class::<JobInfo>()?;
    m.add_class::<Stats>()?;
    m.add_class::<QueueInfo>()?;
    m.add_class::<Failed>()?;
    m.add_class::<Attempt>()?;
    m.add_class::<Refusal>()?;
    m.add_class::<History>()?;
    Ok(())
}
