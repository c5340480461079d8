//! The JSON shapes of the API: request bodies (unknown fields refused) and responses. Times
//! are seconds since the Unix epoch, on the clock that judges leases (the server's, or on
//! PostgreSQL the database's). Payloads are bytes: `payload` carries them as text when they are
//! UTF-8, `payload_base64` always.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

/// The longest `delay` or `retry_in` taken, in seconds (about 31,700 years): longer ones are
/// bad input, never a clock reading that overflows.
pub const MAX_DELAY: f64 = 1e12;

/// A job to enqueue.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewJobBody {
    /// The job id: any non-empty text.
    pub id: String,
    /// The queue (default `default`).
    pub queue: Option<String>,
    /// What kind of job this is, for workers that serve several.
    pub kind: Option<String>,
    /// The payload as text. At most one of `payload` and `payload_base64`.
    pub payload: Option<String>,
    /// The payload as base64, for bytes that are not text.
    pub payload_base64: Option<String>,
    /// Higher runs first (default 0).
    pub priority: Option<i64>,
    /// Not claimable before this time (seconds since the epoch).
    pub not_before: Option<f64>,
    /// Not claimable for this many seconds from now. At most one of `not_before` and `delay`.
    pub delay: Option<f64>,
    /// Attempts before the job is dead; 0 for no limit (default 0).
    pub max_attempts: Option<u32>,
    /// At most one unfinished job of the queue holds this key.
    pub unique_key: Option<String>,
    /// The key also blocks finished jobs for this many seconds after they were enqueued.
    pub unique_for: Option<f64>,
}

impl NewJobBody {
    /// The library's job, checked; `at` is the index in a batch, for error fields.
    ///
    /// # Errors
    /// A 400 naming the field.
    pub fn into_job(self, now: f64, at: Option<usize>) -> Result<leasefence::NewJob, ApiError> {
        let name = |field: &str| match at {
            Some(i) => format!("jobs[{i}].{field}"),
            None => field.to_owned(),
        };
        let lib = |e: leasefence::Error| -> ApiError {
            match e {
                // The library's `job_id` is this body's `id`.
                leasefence::Error::InvalidArgument { argument, reason } => ApiError::bad(
                    name(if argument == "job_id" { "id" } else { argument }),
                    reason,
                ),
                other => other.into(),
            }
        };
        if self.id == leasefence::SCHEDULER_JOB {
            // The role's job is the scheduler's to make (in its own queue, never ready): one
            // enqueued here would be an ordinary job a worker could claim.
            return Err(ApiError::bad(
                name("id"),
                format!(
                    "{} is reserved for the scheduler role's job; choose another id",
                    leasefence::SCHEDULER_JOB
                ),
            ));
        }
        let mut job = leasefence::NewJob::new(self.id).map_err(lib)?;
        if let Some(queue) = self.queue {
            job = job.queue(queue).map_err(lib)?;
        }
        if let Some(kind) = self.kind {
            job = job.kind(kind).map_err(lib)?;
        }
        match (self.payload, self.payload_base64) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad(
                    name("payload_base64"),
                    "give `payload` or `payload_base64`, not both",
                ));
            }
            (Some(text), None) => job = job.payload(text.into_bytes()),
            (None, Some(b64)) => {
                let bytes = B64.decode(b64.as_bytes()).map_err(|e| {
                    ApiError::bad(name("payload_base64"), format!("not base64: {e}"))
                })?;
                job = job.payload(bytes);
            }
            (None, None) => {}
        }
        if let Some(priority) = self.priority {
            job = job.priority(priority);
        }
        let not_before = match (self.not_before, self.delay) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad(
                    name("delay"),
                    "give `not_before` or `delay`, not both",
                ));
            }
            (Some(at), None) => Some(at),
            (None, Some(delay)) if delay.is_finite() && (0.0..=MAX_DELAY).contains(&delay) => {
                Some(now + delay)
            }
            (None, Some(delay)) => {
                return Err(ApiError::bad(
                    name("delay"),
                    format!(
                        "must be seconds from 0 to {MAX_DELAY}, got {}",
                        leasefence::Seconds(delay)
                    ),
                ));
            }
            (None, None) => None,
        };
        if let Some(at) = not_before {
            job = job.not_before(at).map_err(lib)?;
        }
        if let Some(max) = self.max_attempts {
            job = job.max_attempts(max);
        }
        let keyed = self.unique_key.is_some();
        if let Some(key) = self.unique_key {
            job = job.unique_key(key).map_err(lib)?;
        }
        if let Some(seconds) = self.unique_for {
            if !keyed {
                return Err(ApiError::bad(
                    name("unique_for"),
                    "a uniqueness window needs a `unique_key`",
                ));
            }
            job = job.unique_for(seconds).map_err(lib)?;
        }
        Ok(job)
    }
}

/// `POST /v1/jobs`: one job, or `{"jobs": [...]}` for many in one transaction.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum EnqueueBody {
    /// Many jobs, in one transaction.
    Many {
        /// The jobs, in order.
        jobs: Vec<NewJobBody>,
    },
    /// One job.
    One(NewJobBody),
}

/// What an enqueue did with one job.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnqueuedBody {
    /// The job's id.
    pub job_id: String,
    /// `inserted`, `known` (the id exists; left untouched) or `duplicate`.
    pub outcome: &'static str,
    /// For `duplicate`: the job that holds the unique key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
}

/// The answer to a batch enqueue.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnqueuedMany {
    /// One entry per job, in input order.
    pub results: Vec<EnqueuedBody>,
}

/// `POST /v1/claims`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    /// Who claims: the owner every later write must name.
    pub owner: String,
    /// The lease's length in seconds (> 0, at most 1e12).
    pub ttl: f64,
    /// Claim only from these queues (default: every queue).
    pub queues: Option<Vec<String>>,
    /// Claim up to this many ready jobs at once (default 1, at most 1000).
    pub n: Option<usize>,
    /// Claim this job by id instead of the best ready one (the contract's `claim`): it must
    /// exist, be unfinished and have no live lease. A refusal is a 409 with its reason.
    pub job_id: Option<String>,
}

/// A granted lease: what a worker needs to run the job and to write under its fence.
#[derive(Debug, Serialize, ToSchema)]
pub struct LeaseBody {
    /// The job.
    pub job_id: String,
    /// Its queue.
    pub queue: String,
    /// Its kind, if it has one.
    pub kind: Option<String>,
    /// The owner that holds the lease.
    pub owner: String,
    /// The fencing token: send it with every renew, complete, fail and release.
    pub fence: i64,
    /// When the lease ends unless renewed.
    pub until: f64,
    /// The payload as text, when it is UTF-8.
    pub payload: Option<String>,
    /// The payload as base64.
    pub payload_base64: Option<String>,
    /// The job's priority.
    pub priority: i64,
    /// Attempts before the job is dead (0: no limit).
    pub max_attempts: u32,
    /// Which attempt this is (1 for the first).
    pub attempt: u32,
    /// The error the previous attempt failed with.
    pub last_error: Option<String>,
}

impl From<leasefence::Lease> for LeaseBody {
    fn from(l: leasefence::Lease) -> Self {
        let (payload, payload_base64) = payload_fields(l.payload.as_deref());
        LeaseBody {
            job_id: l.job_id,
            queue: l.queue,
            kind: l.kind,
            owner: l.owner,
            fence: l.fence,
            until: l.until,
            payload,
            payload_base64,
            priority: l.priority,
            max_attempts: l.max_attempts,
            attempt: l.attempt,
            last_error: l.last_error,
        }
    }
}

/// `payload` (text when UTF-8) and `payload_base64` of stored bytes.
pub fn payload_fields(bytes: Option<&[u8]>) -> (Option<String>, Option<String>) {
    match bytes {
        None => (None, None),
        Some(b) => (
            std::str::from_utf8(b).ok().map(str::to_owned),
            Some(B64.encode(b)),
        ),
    }
}

/// The leases a claim granted (empty when nothing was ready).
#[derive(Debug, Serialize, ToSchema)]
pub struct Leases {
    /// Best first.
    pub leases: Vec<LeaseBody>,
}

/// `renew`: owner, fence and the new ttl.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewBody {
    /// The lease's owner.
    pub owner: String,
    /// The lease's fence.
    pub fence: i64,
    /// The new lease length from now, in seconds (> 0, at most 1e12).
    pub ttl: f64,
}

/// `complete`: owner, fence and the result.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// The lease's owner.
    pub owner: String,
    /// The lease's fence.
    pub fence: i64,
    /// The result to store (text; default empty).
    #[serde(default)]
    pub result: String,
}

/// `fail`: owner, fence, the error and optionally when to retry.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    /// The lease's owner.
    pub owner: String,
    /// The lease's fence.
    pub fence: i64,
    /// What went wrong (stored with the job).
    #[serde(default)]
    pub error: String,
    /// Retry after this many seconds instead of the default backoff.
    pub retry_in: Option<f64>,
}

/// `release`: owner and fence.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    /// The lease's owner.
    pub owner: String,
    /// The lease's fence.
    pub fence: i64,
}

/// `admit`: the fence presented for the resource.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdmitBody {
    /// The fence of the write about to be made.
    pub fence: i64,
}

/// A write that took effect.
#[derive(Debug, Serialize, ToSchema)]
pub struct Done {
    /// Always `true` (a refusal is a 409).
    pub ok: bool,
    /// The job concerned. (After a pause, resume, admit or a schedule's add or removal it
    /// repeats the name of `queue`, `resource` or `schedule`, as answers before those keys
    /// did; read those.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// After a pause or resume: the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// After an admit: the resource whose gate admitted the fence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// After a schedule's add or removal: its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// After a renew: the lease's new end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<f64>,
    /// After a fail: `retrying` or `dead`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'static str>,
    /// After a fail that will be retried: from when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<f64>,
    /// After a pause or resume: whether it changed the queue (false: it already was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
}

impl Done {
    /// `{"ok": true}` alone.
    fn ok() -> Self {
        Done {
            ok: true,
            job_id: None,
            queue: None,
            resource: None,
            schedule: None,
            until: None,
            outcome: None,
            retry_at: None,
            changed: None,
        }
    }

    /// `{"ok": true, "job_id": id}`.
    pub fn job(id: impl Into<String>) -> Self {
        Done {
            job_id: Some(id.into()),
            ..Done::ok()
        }
    }

    /// `{"ok": true, "queue": name}` (and `job_id`, as before that key).
    pub fn queue(name: impl Into<String>) -> Self {
        let name = name.into();
        Done {
            job_id: Some(name.clone()),
            queue: Some(name),
            ..Done::ok()
        }
    }

    /// `{"ok": true, "resource": name}` (and `job_id`, as before that key).
    pub fn resource(name: impl Into<String>) -> Self {
        let name = name.into();
        Done {
            job_id: Some(name.clone()),
            resource: Some(name),
            ..Done::ok()
        }
    }

    /// `{"ok": true, "schedule": name}` (and `job_id`, as before that key).
    pub fn schedule(name: impl Into<String>) -> Self {
        let name = name.into();
        Done {
            job_id: Some(name.clone()),
            schedule: Some(name),
            ..Done::ok()
        }
    }
}

/// A job as stored, with its status at the time of the request.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobBody {
    /// The job id.
    pub id: String,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: Option<String>,
    /// Its unique key.
    pub unique_key: Option<String>,
    /// `ready`, `scheduled`, `leased`, `expired`, `retrying`, `done`, `dead` or `cancelled`.
    pub status: String,
    /// The holder of the last lease (kept after completion as a record).
    pub owner: Option<String>,
    /// The end of the last lease (0 when none or given back).
    pub until: f64,
    /// The highest fence handed out.
    pub fence: i64,
    /// Whether the job is finished.
    pub done: bool,
    /// The stored result.
    pub result: Option<String>,
    /// The payload as text, when it is UTF-8.
    pub payload: Option<String>,
    /// The payload as base64.
    pub payload_base64: Option<String>,
    /// Higher runs first.
    pub priority: i64,
    /// Not claimable before this time.
    pub not_before: f64,
    /// Attempts before the job is dead (0: no limit).
    pub max_attempts: u32,
    /// Attempts made.
    pub attempts: u32,
    /// The last failure's error.
    pub error: Option<String>,
    /// When it finished.
    pub finished_at: Option<f64>,
    /// `completed`, `dead` or `cancelled`, once finished.
    pub outcome: Option<String>,
    /// When it was enqueued.
    pub enqueued_at: Option<f64>,
}

impl From<leasefence::JobInfo> for JobBody {
    fn from(j: leasefence::JobInfo) -> Self {
        let (payload, payload_base64) = payload_fields(j.payload.as_deref());
        JobBody {
            id: j.state.id,
            queue: j.queue,
            kind: j.kind,
            unique_key: j.unique_key,
            status: j.status.as_str().to_owned(),
            owner: j.state.owner,
            until: j.state.until,
            fence: j.state.fence,
            done: j.state.done,
            result: j.state.result,
            payload,
            payload_base64,
            priority: j.priority,
            not_before: j.not_before,
            max_attempts: j.max_attempts,
            attempts: j.attempts,
            error: j.error,
            finished_at: j.finished_at,
            outcome: j.outcome,
            enqueued_at: j.enqueued_at,
        }
    }
}

/// A page of jobs, in the order they were enqueued.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobPage {
    /// The jobs.
    pub jobs: Vec<JobBody>,
    /// Pass as `after` for the next page; absent on the last page (a page may be short and
    /// still have one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Counts by status.
#[derive(Debug, Serialize, ToSchema)]
pub struct Counts {
    /// Claimable now.
    pub ready: u64,
    /// Waiting for their not-before time.
    pub scheduled: u64,
    /// Held under a live lease.
    pub leased: u64,
    /// Lease ran out, not yet re-claimed.
    pub expired: u64,
    /// Failed, waiting for their retry.
    pub retrying: u64,
    /// Completed.
    pub done: u64,
    /// Out of attempts.
    pub dead: u64,
    /// Cancelled by an operator.
    pub cancelled: u64,
    /// All of them.
    pub total: u64,
}

impl From<&leasefence::Stats> for Counts {
    fn from(s: &leasefence::Stats) -> Self {
        Counts {
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

/// One queue and its counts.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueBody {
    /// The queue's name.
    pub name: String,
    /// Whether it is paused (hands out nothing).
    pub paused: bool,
    /// Its jobs by status.
    pub counts: Counts,
}

/// `GET /v1/stats`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatsBody {
    /// The clock reading the counts were taken at.
    pub now: f64,
    /// Every job by status.
    pub counts: Counts,
    /// Per queue.
    pub queues: Vec<QueueBody>,
}
